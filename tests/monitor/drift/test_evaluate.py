"""evaluate_window against real Evidently on the demo dataset (trainer.synthetic)."""
import json

import numpy as np
import pandas as pd
import pytest
from evidently import DataDefinition, Dataset, Report
from evidently.presets import DataDriftPreset
from sklearn.metrics import accuracy_score, roc_auc_score

from monitor.drift import DriftEvaluator, evaluate_window
from monitor.errors import DataError
from tests.monitor.drift.conftest import reference, score_frame, window
from trainer.synthetic import DRIFTING_FEATURES, make_dataset

UNTOUCHED = ("x1", "x3", "x4", "x6", "x7", "device")  # covariate_shift leaves these alone
BASELINE = {"accuracy": 0.8, "roc_auc": 0.86}


def _evidently_metric(snapshot, prefix):
    return [m["value"] for m in snapshot.dict()["metrics"] if m["metric_name"].startswith(prefix)]


@pytest.fixture(scope="module")
def no_drift(cfg, ref_frame):
    return evaluate_window(ref_frame, window(5000, seed=2, labelled=0.6), cfg.model, cfg.drift, BASELINE)


@pytest.fixture(scope="module")
def shifted(cfg, ref_frame):
    return evaluate_window(ref_frame, window(5000, seed=3, covariate_shift=1.0), cfg.model, cfg.drift, BASELINE)


def test_no_drift_means_no_dataset_drift(no_drift, cfg):
    assert no_drift.dataset_drift is False
    assert no_drift.drifted_features == []
    assert no_drift.prediction_drift.drifted is False
    assert [f.name for f in no_drift.features] == cfg.model.feature_names
    # Evidently's defaults for > 1000 reference rows: normed Wasserstein and Jensen-Shannon, 0.1.
    assert {f.method for f in no_drift.features if f.name.startswith("x")} == {"wasserstein"}
    assert {no_drift.feature("region").method, no_drift.feature("device").method} == {"jensenshannon"}
    assert all(f.threshold == 0.1 for f in no_drift.features)


def test_shifted_features_are_detected_by_name(shifted):
    for name in DRIFTING_FEATURES:
        assert shifted.feature(name).drifted, name
        assert shifted.feature(name).score >= shifted.feature(name).threshold
    for name in UNTOUCHED:
        assert not shifted.feature(name).drifted, name
    assert shifted.drift_share == pytest.approx(len(DRIFTING_FEATURES) / 10)
    assert shifted.prediction_drift.drifted  # the score leans on x0 and x5


def test_dataset_drift_follows_drift_share(cfg, ref_frame):
    drift_cfg = cfg.drift.model_copy(update={"drift_share": 0.4})
    result = evaluate_window(ref_frame, window(3000, seed=3, covariate_shift=1.0), cfg.model, drift_cfg, BASELINE)
    assert result.drift_share == pytest.approx(0.4) and result.dataset_drift is True


def test_prediction_drift_without_feature_drift(cfg, ref_frame):
    result = evaluate_window(ref_frame, window(3000, seed=4, score_shift=1.5), cfg.model, cfg.drift, BASELINE)
    assert result.prediction_drift.drifted is True
    assert result.prediction_drift.method == "wasserstein"
    assert result.drifted_features == []


def test_performance_matches_sklearn_and_evidently(no_drift, cfg):
    cur = window(5000, seed=2, labelled=0.6)
    lab = cur[cur["label"].notna()]
    y = lab["label"].astype(int)
    assert no_drift.window_rows == 5000 and no_drift.labelled_rows == len(lab)
    assert no_drift.accuracy == pytest.approx(accuracy_score(y, lab["prediction"].astype(int)))
    assert no_drift.roc_auc == pytest.approx(roc_auc_score(y, lab["score"]))
    assert no_drift.positive_rate == pytest.approx(y.mean())
    # The snapshot reports the same figures through Evidently (the window is below sample_size).
    assert _evidently_metric(no_drift.snapshot, "Accuracy")[0] == pytest.approx(no_drift.accuracy)
    assert _evidently_metric(no_drift.snapshot, "RocAuc")[0] == pytest.approx(no_drift.roc_auc)
    assert no_drift.baseline_accuracy == 0.8 and no_drift.baseline_roc_auc == 0.86
    assert no_drift.performance_actionable is True  # 3000 labelled >= 1000


def test_intervals_contain_the_population_value(no_drift):
    # "Truth": the same scorer on 300k fresh rows from the same distribution (standard error < 0.001).
    big = score_frame(make_dataset(300_000, seed=99))
    true_acc = accuracy_score(big["label"], big["prediction"].astype(int))
    true_auc = roc_auc_score(big["label"], big["score"])
    lo, hi = no_drift.accuracy_ci
    assert lo < no_drift.accuracy < hi and lo <= true_acc <= hi
    lo, hi = no_drift.roc_auc_ci
    assert lo < no_drift.roc_auc < hi and lo <= true_auc <= hi


def test_few_labels_are_reported_but_not_actionable(cfg, ref_frame):
    cur = window(4000, seed=5, labelled=0.1)
    result = evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    assert 0 < result.labelled_rows < cfg.drift.min_labels_at_most == result.min_labels  # auto, called alone: 1000
    assert result.accuracy is not None and result.roc_auc is not None
    assert result.performance_actionable is False
    lower = cfg.drift.model_copy(update={"min_labels": result.labelled_rows})
    assert evaluate_window(ref_frame, cur, cfg.model, lower, BASELINE).performance_actionable is True


def test_single_class_labels_leave_auc_undefined(cfg, ref_frame):
    cur = window(2000, seed=6)
    cur["label"] = pd.array(np.ones(len(cur), dtype=int), dtype="Int64")
    result = evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    assert result.roc_auc is None and result.roc_auc_ci is None
    assert result.accuracy == pytest.approx((cur["prediction"] == 1).mean())
    assert _evidently_metric(result.snapshot, "RocAuc") == []
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.parametrize("how", ["all_na", "no_column"])
def test_no_labels(cfg, ref_frame, how):
    cur = window(1500, seed=7, labelled=0.0)
    if how == "no_column":
        cur = cur.drop(columns=["label"])
    result = evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    assert result.labelled_rows == 0 and result.accuracy is None and result.accuracy_ci is None
    assert result.roc_auc is None and result.performance_actionable is False
    assert _evidently_metric(result.snapshot, "Accuracy") == []
    assert len(result.features) == 10


def test_tiny_windows(cfg, ref_frame):
    result = evaluate_window(ref_frame, window(5, seed=8), cfg.model, cfg.drift, BASELINE)
    assert result.window_rows == 5 and len(result.features) == 10
    # A small reference switches Evidently to p-value tests; we agree with its choice, except that
    # categories get chi-square as a two-sample test (Evidently's takes the reference as exact).
    small = evaluate_window(reference(300, seed=9), window(40, seed=10), cfg.model, cfg.drift, BASELINE)
    assert small.feature("x0").method == "ks" and small.feature("region").method == "chisquare_two_sample"
    assert small.feature("x0").threshold == 0.05


def test_all_missing_feature_is_drifted_by_its_missing_share_not_fatal(cfg, ref_frame):
    cur = window(2000, seed=11, covariate_shift=1.0)
    cur["x0"] = np.nan
    cur["device"] = None
    result = evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    for name in ("x0", "device"):  # no value to test, and that is the drift (monitor/drift/missing.py)
        f = result.feature(name)
        assert f.drifted and f.method == "missing_share" and f.skipped is None
        assert f.details["values"]["skipped"] == "no values in the current window"
    assert result.drift_share == pytest.approx(5 / 10)  # x0, device and x2, x5, region of the 10 features
    off = evaluate_window(ref_frame, cur, cfg.model, cfg.drift.model_copy(update={"missing_share_change": 0}),
                          BASELINE)
    assert off.feature("x0").score is None and off.feature("x0").skipped == "no values in the current window"
    assert off.feature("device").skipped and not off.feature("device").drifted
    assert off.drift_share == pytest.approx(3 / 8)  # x2, x5, region of the 8 testable features
    cur[cfg.model.numeric_features] = np.nan
    cur["region"] = None
    with pytest.raises(DataError, match="no feature can be tested"):
        evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)


@pytest.mark.parametrize("mutate,message", [
    (lambda f: f.drop(columns=["x3"]), "lacks column.*x3"),
    (lambda f: f.drop(columns=["score"]), "lacks the score column 'score'"),
    (lambda f: f.iloc[:0], "current window is empty"),
    (lambda f: f.assign(x1=f["x1"].astype(object).where(f.index != 7, "oops")), "'x1' must be numeric; row 7 holds "
                                                                                "'oops'"),
    (lambda f: f.assign(label=pd.array([2] + [1] * (len(f) - 1), dtype="Int64")), "'label' must hold labels 0 or 1"),
])
def test_bad_input_is_a_clear_data_error(cfg, ref_frame, mutate, message):
    with pytest.raises(DataError, match=message):
        evaluate_window(ref_frame, mutate(window(200, seed=12)), cfg.model, cfg.drift, BASELINE)


def test_to_dict_is_strict_json(shifted):
    d = json.loads(json.dumps(shifted.to_dict(), allow_nan=False))
    assert d["dataset_drift"] is False and set(d["drifted_features"]) == set(DRIFTING_FEATURES)
    assert d["features"][0]["method"] == "wasserstein" and d["accuracy_ci"][0] < d["accuracy_ci"][1]


def test_large_window_is_sampled_with_the_unsampled_verdict(cfg):
    ref, cur = reference(200_000, seed=1), window(200_000, seed=2, covariate_shift=0.3)
    result = evaluate_window(ref, cur, cfg.model, cfg.drift, BASELINE)
    assert result.current_sample_rows == result.reference_sample_rows == cfg.drift.sample_size
    assert result.labelled_rows == 200_000  # performance on every labelled row, not the sample
    # The unsampled run: Evidently's default preset on all 200k rows per side, methods auto-selected.
    m = cfg.model
    definition = DataDefinition(numerical_columns=m.numeric_features, categorical_columns=m.categorical_features)
    full = Report([DataDriftPreset()], include_tests=True).run(
        Dataset.from_pandas(cur[m.feature_names], data_definition=definition),
        Dataset.from_pandas(ref[m.feature_names], data_definition=definition))
    verdicts = {}
    for r in full.metric_results.values():
        params = r.metric_value_location.metric.params
        if params["type"].endswith("ValueDrift"):
            verdicts[params["column"]] = any(t.status.value == "FAIL" for t in r.tests)
    assert verdicts == {f.name: f.drifted for f in result.features}
    assert sum(verdicts.values()) >= 3  # the case is not trivially "nothing drifted"


def test_evaluator_caches_the_reference_per_champion(cfg, ref_frame):
    evaluator = DriftEvaluator(clock=lambda: 1_700_000_000.0)
    cur = window(1000, seed=13, covariate_shift=1.0)
    first = evaluator(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    second = evaluator(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    assert (evaluator.misses, evaluator.hits) == (1, 1)
    evaluator.prepared(reference(3000, seed=14), cfg.model, cfg.drift)  # a new champion's frame
    assert evaluator.misses == 2
    # An explicit key (the champion version) wins over identity: an equal copy is still a hit.
    evaluator.prepared(ref_frame, cfg.model, cfg.drift, reference_key="v3")
    evaluator.prepared(ref_frame.copy(), cfg.model, cfg.drift, reference_key="v3")
    assert (evaluator.misses, evaluator.hits) == (3, 2)
    keep = {"check_id", "duration_seconds"}
    strip = lambda r: {k: v for k, v in r.to_dict().items() if k not in keep}  # noqa: E731
    assert strip(first) == strip(second) == strip(
        evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE, clock=lambda: 1_700_000_000.0))
    assert first.checked_at == 1_700_000_000.0


def test_sampling_a_high_cardinality_category_keeps_its_verdict():
    """600 cities sampled to 5,000 rows a side: the no-drift floor over 600 levels (0.061) neared the
    threshold, and the check used to warn; the folded column (monitor.drift.levels) stays well under
    it, sampled or not."""
    from monitor.config import DriftConfig, FeatureSpec, ModelConfig
    model = ModelConfig(features=[FeatureSpec(name="x"), FeatureSpec(name="city", type="categorical")])
    rng = np.random.default_rng(0)

    def frame(n):
        return pd.DataFrame({"x": rng.normal(size=n), "score": rng.uniform(size=n),
                             "city": rng.choice(np.array([f"c{i}" for i in range(600)], dtype=object), n)})
    ref, cur = frame(8000), frame(8000)
    for drift in (DriftConfig(sample_size=5000), DriftConfig(sample_size=20000)):
        city = evaluate_window(ref, cur, model, drift, {}).feature("city")
        assert city.method == "jensenshannon" and not city.drifted and city.score < 0.06, city
        assert city.details is not None and city.details["folded"]["levels"] == 600


def test_derived_prediction_uses_the_same_threshold_rule_as_ingestion_and_training(cfg, ref_frame):
    # A frame without a prediction column (as a baseline reference is saved) derives it from the
    # score; a score exactly at model.threshold is class 0 everywhere (ingestion and trainer: score > t).
    from monitor.stats import accuracy
    cur = window(200, seed=21).drop(columns=["prediction"])
    cur["score"] = cfg.model.threshold
    cur["label"] = pd.array([0] * 150 + [1] * 50, dtype="Int64")
    result = evaluate_window(ref_frame, cur, cfg.model, cfg.drift, BASELINE)
    expected = accuracy(cur["label"].to_numpy(dtype=int), cur["score"].to_numpy(), cfg.model.threshold)
    assert result.accuracy == pytest.approx(expected) == pytest.approx(0.75)


def test_categories_against_a_small_reference_are_tested_as_two_samples(cfg):
    """A champion retrained on 1,000 rows has a 1,000-row reference; a 5,000-row window from the same
    distribution must not drift on most checks (Evidently's chisquare took the reference's
    frequencies as exact: false alarms on most seeds), and a real shift still drifts."""
    from monitor.config import ModelConfig
    model = ModelConfig(name="cats", features=[{"name": "c", "type": "categorical"}, {"name": "x", "type": "numeric"}])
    p = np.array([0.2, 0.2, 0.2, 0.2, 0.1, 0.1])
    levels = np.array([f"v{i}" for i in range(6)], dtype=object)

    def frame(n, seed, probs=p):
        rng = np.random.default_rng(seed)
        out = pd.DataFrame({"c": levels[rng.choice(6, n, p=probs)], "x": rng.standard_normal(n)})
        out["score"] = rng.uniform(size=n)
        out["label"] = (rng.uniform(size=n) < out["score"]).astype(int)
        return out

    def drifted(cur):
        cur = cur.assign(prediction=pd.array((cur["score"] >= 0.5).astype(int), dtype="Int64"),
                         label=pd.array(cur["label"], dtype="Int64"))
        result = evaluate_window(ref, cur, model, cfg.drift, BASELINE)
        assert result.feature("c").method == "chisquare_two_sample"
        return result.feature("c").drifted

    ref = frame(1000, 0)
    false_alarms = sum(drifted(frame(5000, seed)) for seed in range(1, 21))
    assert false_alarms <= 4, f"{false_alarms}/20 windows of the reference's own distribution drifted"
    assert drifted(frame(5000, 99, np.array([0.1, 0.1, 0.2, 0.2, 0.2, 0.2])))


@pytest.mark.parametrize("values", [3, 5])
def test_few_valued_numerics_against_a_small_reference_are_tested_as_two_samples(cfg, values):
    """A numeric column with 3 to 5 distinct values (a count, a rating) is tested by Evidently as
    categorical; against a small reference it got the same goodness-of-fit chisquare as categories
    did, and an unchanged distribution drifted on most checks. It gets the two-sample test too."""
    from monitor.config import ModelConfig
    model = ModelConfig(name="counts", features=[{"name": "n", "type": "numeric"}, {"name": "x", "type": "numeric"}])
    p = np.full(values, 1.0 / values)

    def frame(n, seed, probs=p):
        rng = np.random.default_rng(seed)
        out = pd.DataFrame({"n": rng.choice(values, n, p=probs).astype(float), "x": rng.standard_normal(n)})
        out["score"] = rng.uniform(size=n)
        out["label"] = (rng.uniform(size=n) < out["score"]).astype(int)
        return out

    def drifted(cur):
        cur = cur.assign(prediction=pd.array((cur["score"] >= 0.5).astype(int), dtype="Int64"),
                         label=pd.array(cur["label"], dtype="Int64"))
        result = evaluate_window(ref, cur, model, cfg.drift, BASELINE)
        assert result.feature("n").method == "chisquare_two_sample"
        assert result.feature("x").method == "ks"  # many values: Evidently's choice stands
        return result.feature("n").drifted

    from evidently.legacy.calculations.stattests.chisquare_stattest import _chi_stat_test
    from evidently.legacy.core import ColumnType

    ref = frame(1000, 0)
    windows = [frame(5000, seed) for seed in range(1, 21)]
    false_alarms = sum(drifted(w) for w in windows)
    # A 5 % test: about 1 in 20 by chance; 4 or more would be unlikely (< 2 %) for a calibrated test.
    assert false_alarms <= 3, f"{false_alarms}/20 windows of the reference's own distribution drifted"
    # What Evidently's own choice, its goodness-of-fit chisquare, says on the same windows: most drift.
    evidently_says = sum(_chi_stat_test(ref["n"], w["n"], ColumnType.Categorical, 0.05)[1] for w in windows)
    assert evidently_says >= 10, evidently_says
    shifted = np.linspace(1.0, 2.0, values)
    assert drifted(frame(5000, 99, shifted / shifted.sum()))
