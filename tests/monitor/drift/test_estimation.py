"""Performance estimated from the scores alone (CBPE), against what the labels say.

A real PyTorch MLP (trainer.build, trained as the trainer does) scores the demo dataset; its
reference sample is scored held-out rows, as ``trainer.baseline_training.reference_sample`` saves.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import f1_score, precision_score, recall_score, roc_auc_score

from monitor.config import AlertsConfig, load_config
from monitor.daemon.decisions.policy import AlertPolicy, Observation
from monitor.drift import DriftEvaluator, prepare_reference
from monitor.drift.estimation import estimate, fit_calibrator, weighted_auc
from trainer.build import build_model
from trainer.loop import LoopConfig
from trainer.runs import fit_frames
from trainer.synthetic import make_dataset


@pytest.fixture(scope="module")
def tcfg(tmp_path_factory):
    return load_config(path=None, environ={}, overrides={"home": str(tmp_path_factory.mktemp("est"))})


@pytest.fixture(scope="module")
def model(tcfg):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        data = make_dataset(10_000, seed=0)
        m = build_model(tcfg, data.iloc[:8000])
        fit_frames(m, data.iloc[:8000], data.iloc[8000:], "label", LoopConfig.from_training(tcfg.training),
                   checkpoint_path=tcfg.home / "est.pt", resume=False)
    finally:
        torch.set_num_threads(threads)
    return m


def scored(model, n, seed, **shift):
    frame = make_dataset(n, seed=seed, **shift)
    frame["score"] = model.predict_proba(frame)
    frame["prediction"] = (frame["score"] > 0.5).astype("int64")
    return frame


@pytest.fixture(scope="module")
def ref(model):
    return scored(model, 5000, 50).drop(columns=["prediction"])


@pytest.fixture(scope="module")
def calibrator(ref):
    return fit_calibrator(ref["label"].to_numpy(), ref["score"].to_numpy())


@pytest.fixture(scope="module")
def baseline(model):
    test = scored(model, 5000, 51)
    return float((test["prediction"] == test["label"]).mean())


def _estimate(calibrator, frame, confidence=0.95):
    return estimate(calibrator, frame["score"].to_numpy(), frame["prediction"].to_numpy(), confidence)


def _realised(frame) -> float:
    return float((frame["prediction"] == frame["label"]).mean())


def test_weighted_auc_with_certain_labels_is_the_roc_auc():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 2000)
    s = np.round(rng.normal(y * 0.8, 1.0), 1)  # rounded: many ties, which count one half
    assert weighted_auc(s, y.astype(float)) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_bucketed_auc_of_a_large_window_matches_the_sorted_one():
    rng = np.random.default_rng(1)
    s = rng.uniform(size=200_000)
    p = np.clip(s + rng.normal(0, 0.1, s.size), 0, 1)
    exact = weighted_auc(s[: 1 << 16], p[: 1 << 16])
    assert weighted_auc(s, p) == pytest.approx(roc_auc_score(rng.uniform(size=s.size) < p, s), abs=0.01)
    assert weighted_auc(np.r_[s[: 1 << 16], s[: 1 << 16]], np.r_[p[: 1 << 16], p[: 1 << 16]]) == pytest.approx(
        exact, abs=1e-5)  # the same rows twice: bucketed, the same AUC as sorted


def test_calibration_needs_both_classes_and_enough_rows():
    assert fit_calibrator(np.ones(500), np.linspace(0, 1, 500)) is None
    assert fit_calibrator(np.r_[np.zeros(40), np.ones(40)], np.linspace(0, 1, 80)) is None


def test_covariate_shift_estimate_is_within_its_band_in_90_percent_of_windows(model, calibrator):
    inside, errors = 0, []
    for seed in range(60):
        w = scored(model, 1000, 200 + seed, covariate_shift=0.5)
        e = _estimate(calibrator, w)
        real = _realised(w)
        inside += e.accuracy_ci[0] <= real <= e.accuracy_ci[1]
        errors.append(abs(real - e.accuracy))
    assert inside / 60 >= 0.9, (inside, np.median(errors))
    assert np.median(errors) < 0.01


def test_stationary_stream_never_suspected_over_100_windows(model, calibrator, baseline):
    policy = AlertPolicy(AlertsConfig(), min_labels=1000)
    for seed in range(100):
        e = _estimate(calibrator, scored(model, 1000, 1000 + seed))
        verdict = policy.observe(Observation(labelled_rows=0, baseline_accuracy=baseline, baseline_roc_auc=0.95,
                                             estimated_accuracy=e.accuracy, estimated_accuracy_upper=e.accuracy_ci[1],
                                             estimated_roc_auc=e.roc_auc, estimated_roc_auc_upper=e.roc_auc_ci[1]))
        assert not verdict.suspected and not verdict.suspect, verdict.message
        assert verdict.healthy["estimate"] is True


@pytest.mark.parametrize("shift", [0.5, 1.0, 2.0])
def test_covariate_shift_that_does_not_hurt_is_not_suspected(model, calibrator, baseline, shift):
    policy = AlertPolicy(AlertsConfig(), min_labels=1000)
    for seed in range(5):
        w = scored(model, 2000, 300 + seed, covariate_shift=shift)
        assert _realised(w) >= baseline - 0.01  # this shift moves rows away from the boundary
        e = _estimate(calibrator, w)
        verdict = policy.observe(Observation(labelled_rows=0, baseline_accuracy=baseline,
                                             estimated_accuracy=e.accuracy, estimated_accuracy_upper=e.accuracy_ci[1]))
        assert not verdict.suspect, verdict.message


def test_shift_towards_the_boundary_is_suspected_before_labels(model, calibrator, baseline):
    """Rows chosen by their features (a covariate shift: P(y | x) is untouched) where the model is
    unsure: accuracy really falls, and the scores show it."""
    pool = scored(model, 20_000, 400)
    w = pool[(pool["score"] - 0.5).abs() < 0.3].head(1500)
    e = _estimate(calibrator, w)
    real = _realised(w)
    assert real < baseline - 0.1
    assert e.accuracy_ci[0] <= real <= e.accuracy_ci[1]
    verdict = AlertPolicy(AlertsConfig(), min_labels=1000).observe(Observation(
        labelled_rows=0, baseline_accuracy=baseline, estimated_accuracy=e.accuracy,
        estimated_accuracy_upper=e.accuracy_ci[1]))
    assert verdict.suspect and verdict.suspected[0].reason == "accuracy"
    assert "estimated accuracy" in verdict.message
    # With enough labels, the labels judge and the estimate is not consulted.
    known = AlertPolicy(AlertsConfig(), min_labels=1000).observe(Observation(
        labelled_rows=1500, accuracy=baseline, baseline_accuracy=baseline, estimated_accuracy=e.accuracy,
        estimated_accuracy_upper=e.accuracy_ci[1]))
    assert not known.suspect and not known.fire


def test_concept_shift_is_invisible_to_the_estimate(model, calibrator):
    """CBPE's blind spot (docs/parts/estimation.md): P(y | x) changed, the scores did not."""
    w = scored(model, 5000, 500, concept_shift=1.0)
    e = _estimate(calibrator, w)
    real = _realised(w)
    assert e.accuracy - real > 0.08
    assert not e.accuracy_ci[0] <= real <= e.accuracy_ci[1]


def test_check_result_carries_estimates_and_precision_recall(tcfg, model, ref, baseline):
    w = scored(model, 3000, 600, covariate_shift=0.5)
    w["label"] = w["label"].astype("Int64")
    w.loc[w.index[1500:], "label"] = None  # half labelled: the estimate covers all rows
    evaluator = DriftEvaluator()
    result = evaluator(ref, w, tcfg.model, tcfg.drift, {"accuracy": baseline}, reference_key="v1")
    labelled = w.iloc[:1500]
    y, p = labelled["label"].astype(int), labelled["prediction"]
    assert result.precision == pytest.approx(precision_score(y, p))
    assert result.recall == pytest.approx(recall_score(y, p))
    assert result.f1 == pytest.approx(f1_score(y, p))
    assert result.predicted_positive_rate == pytest.approx(w["prediction"].mean())
    assert result.estimated_rows == 3000
    lo, hi = result.estimated_accuracy_ci
    assert lo < result.estimated_accuracy < hi and hi - lo < 0.05
    assert abs(result.estimated_accuracy - _realised(w)) < 0.02
    assert result.estimated_roc_auc == pytest.approx(roc_auc_score(y, labelled["score"]), abs=0.02)
    assert result.estimated_recall == pytest.approx(result.recall, abs=0.05)
    assert result.estimation_error == pytest.approx(
        result.accuracy - _estimate(evaluator.prepared(ref, tcfg.model, tcfg.drift, "v1").calibrator,
                                    labelled).accuracy)
    d = result.to_dict()
    assert d["estimated_accuracy_ci"] == [lo, hi] and d["estimated_f1"] == result.estimated_f1
    # The calibration is fitted once per champion: the cached reference carries it.
    again = evaluator(ref, w, tcfg.model, tcfg.drift, {"accuracy": baseline}, reference_key="v1")
    assert (evaluator.misses, evaluator.hits) == (1, 2) and again.estimated_accuracy == result.estimated_accuracy
    off = evaluator(ref, w, tcfg.model, tcfg.drift.model_copy(update={"estimate": False}), {}, reference_key="v1")
    assert off.estimated_accuracy is None and off.predicted_positive_rate is not None


def test_prepared_reference_without_labels_estimates_nothing(tcfg, ref):
    assert prepare_reference(ref.drop(columns=["label"]), tcfg.model, tcfg.drift).calibrator is None
