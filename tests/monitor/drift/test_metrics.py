import dataclasses
import subprocess
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.drift import ModelMetricsCollector, evaluate_window
from tests.monitor.drift.conftest import window
from tests.monitor.drift.task_frames import PRIORS_SHIFTED
from tests.support.prometheus import require

T0 = 1_764_460_800.0


@pytest.fixture(scope="module")
def labelled_result(cfg, ref_frame):
    return evaluate_window(ref_frame, window(2000, seed=31, covariate_shift=1.0), cfg.model, cfg.drift,
                           {"accuracy": 0.8, "roc_auc": 0.85}, clock=lambda: T0)


@pytest.fixture(scope="module")
def unlabelled_result(cfg, ref_frame):
    return evaluate_window(ref_frame, window(800, seed=32, labelled=0.0), cfg.model, cfg.drift, {}, clock=lambda: T0)


def scrape(source) -> str:
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("demo", source))
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def promtool_check(text: str) -> None:
    proc = subprocess.run([require("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == "", proc.stdout + proc.stderr  # no lint warnings


def test_exposition_passes_promtool_and_has_the_series(labelled_result):
    text = scrape(lambda: labelled_result)
    promtool_check(text)
    got = samples(text)
    m = (("model", "demo"),)
    r = labelled_result
    assert got[("driftloop_model_accuracy", m)] == pytest.approx(r.accuracy)
    assert got[("driftloop_model_accuracy_lower", m)] == pytest.approx(r.accuracy_ci[0])
    assert got[("driftloop_model_roc_auc_upper", m)] == pytest.approx(r.roc_auc_ci[1])
    assert got[("driftloop_model_baseline_roc_auc", m)] == 0.85
    assert got[("driftloop_model_window_rows", m)] == 2000
    assert got[("driftloop_model_labelled_rows", m)] == 2000
    assert got[("driftloop_model_drift_share_ratio", m)] == pytest.approx(0.4)
    assert got[("driftloop_model_dataset_drifted", m)] == 0
    assert got[("driftloop_model_prediction_drifted", m)] == 1
    assert got[("driftloop_model_prediction_drift_score", (("method", "wasserstein"), ("model", "demo")))] > 0.1
    assert got[("driftloop_model_last_check_timestamp_seconds", m)] == T0
    assert got[("driftloop_model_check_duration_seconds", m)] == pytest.approx(r.duration_seconds)
    x0 = (("feature", "x0"), ("method", "wasserstein"), ("model", "demo"))
    assert got[("driftloop_model_feature_drift_score", x0)] == pytest.approx(r.feature("x0").score)
    assert got[("driftloop_model_feature_drift_threshold", x0)] == 0.1
    assert got[("driftloop_model_feature_drifted", (("feature", "x0"), ("model", "demo")))] == 1
    assert got[("driftloop_model_feature_drifted", (("feature", "device"), ("model", "demo")))] == 0
    region = (("feature", "region"), ("method", "jensenshannon"), ("model", "demo"))
    assert ("driftloop_model_feature_drift_score", region) in got


def test_absent_values_are_absent_series(unlabelled_result):
    text = scrape(lambda: unlabelled_result)
    promtool_check(text)
    assert "NaN" not in text
    for name in ("driftloop_model_accuracy", "driftloop_model_roc_auc_lower", "driftloop_model_baseline_accuracy"):
        assert f"\n{name}{{" not in text and not text.startswith(f"{name}{{")
    assert samples(text)[("driftloop_model_labelled_rows", (("model", "demo"),))] == 0


def test_skipped_feature_has_no_series(labelled_result):
    skipped = dataclasses.replace(labelled_result.features[0], score=None, method=None, threshold=None,
                                  drifted=False, skipped="no values in the current window")
    result = dataclasses.replace(labelled_result, features=[skipped] + labelled_result.features[1:])
    text = scrape(lambda: result)
    promtool_check(text)
    drift_lines = [line for line in text.splitlines() if line.startswith("driftloop_model_feature_drift")]
    assert not any('feature="x0"' in line for line in drift_lines)
    assert any('feature="x1"' in line for line in drift_lines)


def test_sources_latest_attribute_outcome_and_nothing_yet(labelled_result):
    holder = SimpleNamespace(latest=None)
    assert scrape(holder) == ""
    holder.latest = labelled_result
    assert "driftloop_model_accuracy{" in scrape(holder)
    outcome = SimpleNamespace(result=labelled_result, status="ok")  # the daemon's CheckOutcome shape
    assert "driftloop_model_accuracy{" in scrape(lambda: outcome)


def test_each_scrape_reads_the_source_afresh(labelled_result, unlabelled_result):
    current = {"r": labelled_result}
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("demo", lambda: current["r"]))
    assert "driftloop_model_accuracy{" in generate_latest(registry).decode()
    current["r"] = unlabelled_result
    assert "driftloop_model_accuracy{" not in generate_latest(registry).decode()


def test_failing_source_costs_only_these_families(caplog):
    def broken():
        raise RuntimeError("store down")
    assert scrape(broken) == ""
    assert "store down" in caplog.text


def test_missing_share_per_feature_against_the_baseline(cfg, ref_frame):
    """Missing values are a monitored signal: the share per feature, live and in the reference,
    in the result, its JSON and on /metrics; the features still get their drift tests."""
    import numpy as np
    current = window(1000, seed=33)
    current.loc[current.index[::4], "x0"] = np.nan        # 25% of x0 missing
    current.loc[current.index[:100], "region"] = None      # 10% of region missing
    result = evaluate_window(ref_frame, current, cfg.model, cfg.drift, {}, clock=lambda: T0)
    assert result.missing_ratio["x0"] == 0.25 and result.missing_ratio["region"] == 0.1
    assert result.missing_ratio["x1"] == 0.0 and result.reference_missing_ratio["x0"] == 0.0
    assert result.feature("x0").score is not None and result.feature("region").score is not None
    assert {"name": "x0", "ratio": 0.25, "reference_ratio": 0.0} in result.to_dict()["missing"]
    text = scrape(lambda: result)
    promtool_check(text)
    got = samples(text)
    assert got[("driftloop_model_feature_missing_ratio", (("feature", "x0"), ("model", "demo")))] == 0.25
    assert got[("driftloop_model_feature_baseline_missing_ratio", (("feature", "region"), ("model", "demo")))] == 0.0


def test_unseen_categories_are_named(cfg, ref_frame):
    current = window(600, seed=34)
    current.loc[current.index[:30], "region"] = "mars"
    current.loc[current.index[30:32], "device"] = "watch"
    result = evaluate_window(ref_frame, current, cfg.model, cfg.drift, {}, clock=lambda: T0)
    assert result.unseen_categories == {"region": ["mars"], "device": ["watch"]}
    assert result.to_dict()["unseen_categories"] == {"region": ["mars"], "device": ["watch"]}


# ---- tasks (monitor.tasks) ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def multiclass_result():
    from monitor.config import DriftConfig
    from tests.monitor.drift.task_frames import multiclass_frame, multiclass_model
    return evaluate_window(multiclass_frame(2000, seed=1, window=False),
                           multiclass_frame(1500, seed=2, priors=PRIORS_SHIFTED), multiclass_model(), DriftConfig(),
                           {"accuracy": 0.7, "roc_auc": 0.9}, clock=lambda: T0)


@pytest.fixture(scope="module")
def regression_result():
    from monitor.config import DriftConfig
    from tests.monitor.drift.task_frames import regression_frame, regression_model
    return evaluate_window(regression_frame(2000, seed=1, window=False), regression_frame(1500, seed=2),
                           regression_model(), DriftConfig(), {"mae": 1.6}, clock=lambda: T0)


def scrape_top(source, top_k: int) -> str:
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("demo", source, class_top_k=top_k))
    return generate_latest(registry).decode()


def test_multiclass_series_with_classes_capped(multiclass_result):
    r = multiclass_result
    text = scrape_top(lambda: r, 3)
    promtool_check(text)
    got = samples(text)
    m = (("model", "demo"),)
    assert got[("driftloop_model_accuracy", m)] == pytest.approx(r.accuracy)
    assert got[("driftloop_model_macro_f1", m)] == pytest.approx(r.macro_f1)
    assert got[("driftloop_model_weighted_f1", m)] == pytest.approx(r.weighted_f1)
    top = sorted(r.class_rows, key=lambda c: -r.class_rows[c])[:3]      # the prior shift makes them distinct
    for family, values in (("driftloop_model_class_recall", r.class_recall),
                           ("driftloop_model_class_precision", r.class_precision)):
        series = {dict(k[1])["class"]: v for k, v in got.items() if k[0] == family}
        assert set(series) == set(top)
        assert series == pytest.approx({c: values[c] for c in top})
    served = (("method", "jensenshannon"), ("model", "demo"), ("output", "prediction"))
    assert got[("driftloop_model_output_drift_score", served)] == pytest.approx(r.output_drift[0].score)
    assert got[("driftloop_model_output_drifted", (("model", "demo"), ("output", "prediction")))] == 1
    assert got[("driftloop_model_label_drift_score", (("method", "jensenshannon"), ("model", "demo")))] \
        == pytest.approx(r.label_drift.score)
    assert got[("driftloop_model_label_drifted", m)] == 1
    names = {k[0] for k in got}
    assert not names & {"driftloop_model_precision", "driftloop_model_predicted_positive_ratio", "driftloop_model_mae"}


def test_regression_series(regression_result):
    r = regression_result
    text = scrape(lambda: r)
    promtool_check(text)
    got = samples(text)
    m = (("model", "demo"),)
    for name, value in (("mae", r.mae), ("mae_lower", r.mae_ci[0]), ("mae_upper", r.mae_ci[1]), ("rmse", r.rmse),
                        ("rmse_lower", r.rmse_ci[0]), ("rmse_upper", r.rmse_ci[1]), ("mape", r.mape), ("r2", r.r2),
                        ("r2_lower", r.r2_ci[0]), ("r2_upper", r.r2_ci[1]), ("baseline_mae", 1.6)):
        assert got[(f"driftloop_model_{name}", m)] == pytest.approx(value), name
    if r.estimated_mae is not None:   # direct loss estimation, when the reference can fit it
        assert got[("driftloop_model_estimated_mae", m)] == pytest.approx(r.estimated_mae)
    names = {k[0] for k in got}
    assert not names & {"driftloop_model_accuracy", "driftloop_model_roc_auc", "driftloop_model_output_drift_score",
                        "driftloop_model_class_recall"}
    assert "NaN" not in text


def test_every_figure_of_each_task_is_served_and_promtool_clean():
    from tests.monitor.drift.task_frames import filled_result
    for task, expected in (("multiclass", {"driftloop_model_estimated_macro_f1", "driftloop_model_class_recall",
                                           "driftloop_model_output_drift_score", "driftloop_model_segment_accuracy"}),
                           ("regression",
                            {"driftloop_model_estimated_mae_upper", "driftloop_model_estimated_rmse_lower",
                                           "driftloop_model_segment_mae", "driftloop_model_label_drift_score"})):
        text = scrape(lambda task=task: filled_result(task))
        promtool_check(text)
        assert expected <= {k[0] for k in samples(text)}
