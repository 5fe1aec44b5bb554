"""A multiclass model's check against real Evidently: performance per class with intervals, output
drift (served class, class probabilities) and label drift (prior shift), segments, JSON and report."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, recall_score, roc_auc_score

from monitor.config import DriftConfig
from monitor.drift import evaluate_window, prepare_reference, save_report
from monitor.drift.columns import MAX_PROBABILITY_COLUMNS, SKIPPED_CLASS, output_plans
from monitor.drift.frames import prepare_side
from monitor.tasks import internal_proba_columns
from tests.monitor.drift.task_frames import (CLASSES, PRIORS_SHIFTED, multiclass_frame, multiclass_model)

BASELINE = {"accuracy": 0.68, "roc_auc": 0.9}
T0 = 1_764_460_800.0


@pytest.fixture(scope="module")
def model():
    return multiclass_model(segments=["region"])


@pytest.fixture(scope="module")
def drift():
    return DriftConfig()


@pytest.fixture(scope="module")
def ref(model, drift):
    return prepare_reference(multiclass_frame(4000, seed=1, window=False), model, drift)


@pytest.fixture(scope="module")
def stationary_window():
    return multiclass_frame(3000, seed=2, labelled=0.7)


@pytest.fixture(scope="module")
def stationary(ref, model, drift, stationary_window):
    return evaluate_window(ref, stationary_window, model, drift, BASELINE, clock=lambda: T0)


@pytest.fixture(scope="module")
def concept(ref, model, drift):
    return evaluate_window(ref, multiclass_frame(3000, seed=3, concept=True), model, drift, BASELINE)


@pytest.fixture(scope="module")
def prior(ref, model, drift):
    return evaluate_window(ref, multiclass_frame(3000, seed=4, priors=PRIORS_SHIFTED), model, drift, BASELINE)


def _output(result, name):
    return next(f for f in result.output_drift if f.name == name)


def test_figures_are_scikit_learns_on_the_labelled_rows(stationary, stationary_window):
    lab = stationary_window[stationary_window["label"].notna()]
    y, pred = lab["label"].astype(int).to_numpy(), lab["prediction"].astype(int).to_numpy()
    proba = lab[internal_proba_columns(len(CLASSES))].to_numpy()
    r = stationary
    assert r.task == "multiclass" and r.classes == CLASSES and r.labelled_rows == len(lab)
    assert r.accuracy == pytest.approx(accuracy_score(y, pred))
    assert r.accuracy_ci[0] < r.accuracy < r.accuracy_ci[1]
    assert r.roc_auc == pytest.approx(roc_auc_score(y, proba, multi_class="ovr", average="macro"))
    assert r.macro_f1 == pytest.approx(f1_score(y, pred, average="macro"))
    assert r.weighted_f1 == pytest.approx(f1_score(y, pred, average="weighted"))
    recall = recall_score(y, pred, average=None)
    assert r.class_recall == pytest.approx(dict(zip(CLASSES, recall)))
    assert r.class_rows == {c: int((y == k).sum()) for k, c in enumerate(CLASSES)}
    assert r.baseline_accuracy == 0.68 and r.baseline_roc_auc == 0.9
    assert r.precision is None and r.recall is None and r.positive_rate is None   # binary-only
    assert r.mae is None and r.r2 is None
    # The bars of alerts.rules, by rule key, from the reference sample.
    assert {"macro_f1", "weighted_f1", "recall[bike]", "precision[walk]"} <= set(r.baselines)


def test_a_concept_change_lowers_accuracy_and_macro_f1_and_no_distribution_sees_it(stationary, concept):
    assert concept.accuracy_ci[1] < stationary.accuracy_ci[0] - 0.3
    assert concept.macro_f1 < stationary.macro_f1 - 0.3
    assert concept.roc_auc < stationary.roc_auc
    # Relabelled rows: features, served classes and the label distribution are as before.
    for r in (stationary, concept):
        assert r.drifted_features == [] and not r.prediction_drift.drifted
        assert [f.name for f in r.output_drift if f.drifted] == []
        assert r.label_drift is not None and r.label_drift.drifted is False


def test_a_prior_shift_flags_the_labels_and_the_served_classes(prior, stationary):
    assert prior.label_drift.drifted and prior.label_drift.method == "jensenshannon"
    assert prior.label_drift.score > 2 * stationary.label_drift.score
    served = _output(prior, "prediction")
    assert served.drifted and served.method == "jensenshannon"
    assert _output(prior, "proba_bike").drifted            # 20 % -> 45 % of the rows
    assert abs(prior.accuracy - stationary.accuracy) < 0.05  # the concept holds


def test_output_drift_lists_the_served_class_then_each_class(stationary):
    assert [f.name for f in stationary.output_drift] == ["prediction"] + [f"proba_{c}" for c in CLASSES]
    assert all(f.skipped is None and f.score is not None for f in stationary.output_drift)
    assert {f.method for f in stationary.output_drift[1:]} == {"wasserstein"}


def test_json_is_strict_and_the_report_renders(stationary, tmp_path):
    body = json.loads(json.dumps(stationary.to_dict(), allow_nan=False))
    assert body["task"] == "multiclass" and body["classes"] == CLASSES
    assert set(body["class_recall"]) == set(CLASSES)
    assert body["label_drift"]["name"] == "label" and len(body["output_drift"]) == 1 + len(CLASSES)
    paths = save_report(stationary, tmp_path)
    report = json.loads(paths.json.read_text())
    values = {m["metric_name"].split("(")[0]: m["value"] for m in report["metrics"]}
    assert values["Accuracy"] == pytest.approx(stationary.accuracy)
    assert values["F1Score"] == pytest.approx(stationary.macro_f1)
    assert values["RocAuc"] == pytest.approx(stationary.roc_auc)
    assert set(values["RecallByLabel"]) == set(CLASSES)
    html = paths.html.read_text()
    assert "proba_bike" in html and "Recall" in html


def test_segments_report_accuracy_only(stationary, stationary_window):
    lab = stationary_window[stationary_window["label"].notna()]
    for s in stationary.segments:
        rows = lab[lab["region"] == s.value]
        assert s.accuracy == pytest.approx((rows["label"] == rows["prediction"]).mean())
        assert s.accuracy_ci is not None and s.reference_accuracy is not None
        assert s.recall is None and s.roc_auc is None and s.reference_recall is None and s.mae is None


def test_an_unlabelled_window_has_outputs_but_no_performance_or_label_drift(ref, model, drift):
    r = evaluate_window(ref, multiclass_frame(1500, seed=5, labelled=0.0), model, drift, BASELINE)
    assert r.labelled_rows == 0 and r.accuracy is None and r.macro_f1 is None and r.class_recall == {}
    assert r.label_drift is None and len(r.output_drift) == 1 + len(CLASSES)
    json.dumps(r.to_dict(), allow_nan=False)


def test_at_most_twenty_class_probabilities_are_tested():
    classes = [f"c{i:02d}" for i in range(25)]
    model = multiclass_model(classes=classes, segments=[])
    rng = np.random.default_rng(0)
    frame = multiclass_frame(600, seed=6, window=False).drop(columns=internal_proba_columns(5) + ["label"])
    weights = np.arange(1, 26, dtype=float)                 # class i is (i + 1) / 325 likely
    proba = rng.dirichlet(weights * 5, size=len(frame))
    for column, values in zip(internal_proba_columns(25), proba.T):
        frame[column] = values
    frame["score"] = proba.max(axis=1)
    frame["label"] = proba.argmax(axis=1)
    drift = DriftConfig()
    plans = dict(output_plans(prepare_reference(frame, model, drift), prepare_side(
        frame, model, drift, np.random.default_rng(1), "current window"), model, drift))
    skipped = sorted(name for name, p in plans.items() if isinstance(p, str))
    assert len(plans) == 1 + 25 and len(plans) - 1 - len(skipped) == MAX_PROBABILITY_COLUMNS
    assert skipped == [f"proba_c{i:02d}" for i in range(5)]   # the least probable on the reference
    assert {plans[n] for n in skipped} == {SKIPPED_CLASS}
