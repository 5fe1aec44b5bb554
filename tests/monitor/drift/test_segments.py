"""Per-segment performance (model.segments) on real Evidently checks of the demo dataset, and the
policy's segment breaches: a drop in one slice that the aggregate averages away."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from monitor.config import AlertsConfig, load_config
from monitor.daemon.runtime.controller import observation
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.drift import DriftEvaluator, ModelMetricsCollector
from tests.monitor.drift.conftest import reference, window

SEGMENTS = ["region", "device", "hour_of_day", "day_of_week"]  # 4 + 3 + 24 + 7 = 38 series at most


@pytest.fixture(scope="module")
def scfg():
    return load_config(path=None, environ={}, overrides={"home": "unused", "model": {"segments": SEGMENTS}})


def timed(frame: pd.DataFrame, hours: float = 48) -> pd.DataFrame:
    """Spread the rows evenly over ``hours`` from a Monday 00:00 UTC."""
    frame = frame.copy()
    step = hours * 3600 / len(frame)
    frame["ts"] = pd.Timestamp("2026-11-30", tz="UTC") + pd.to_timedelta(np.arange(len(frame)) * step, unit="s")
    return frame


def check(scfg, frame, baseline):
    result = DriftEvaluator()(reference(), frame, scfg.model, scfg.drift, baseline, reference_key="v1")
    outcome = CheckOutcome(0.0, "ok", "checked", champion_version="1", result=result,
                           window_rows=result.window_rows, labelled_rows=result.labelled_rows)
    return result, AlertPolicy(AlertsConfig(), min_labels=1000).observe(observation(outcome))


def test_a_night_only_drop_fires_the_segment_and_not_the_aggregate(scfg):
    frame = timed(window(19_200, seed=7))         # 400 labelled rows per hour over two days
    baseline = {"accuracy": float((frame["prediction"] == frame["label"]).mean()), "roc_auc": 0.9}
    night = pd.to_datetime(frame["ts"]).dt.hour == 2
    frame.loc[night, "label"] = 1 - frame.loc[night, "label"]  # every label flipped at 02:00
    result, verdict = check(scfg, frame, baseline)
    seg = {s.label: s for s in result.segments}
    assert seg["hour_of_day=2"].judged and seg["hour_of_day=2"].accuracy < 0.3
    assert result.accuracy > baseline["accuracy"] - 0.03          # the aggregate hides it
    assert not verdict.fire and verdict.performance_known
    assert [b.segment for b in verdict.segment_breaches] == ["hour_of_day=2"], verdict.message
    assert "segment hour_of_day=2: accuracy" in verdict.message


def test_stationary_window_breaches_no_segment(scfg):
    frame = timed(window(19_200, seed=8))
    result, verdict = check(scfg, frame, {"accuracy": float((frame["prediction"] == frame["label"]).mean())})
    assert {s.segment for s in result.segments} == set(SEGMENTS)
    assert sum(s.judged for s in result.segments) >= 30
    assert verdict.segment_breaches == ()


def test_categorical_values_are_capped_and_judged_against_the_reference(scfg):
    cfg = scfg.model.model_copy(update={"segments": ["region", "hour_of_day"], "segment_top_k": 2})
    frame = window(5000, seed=9, labelled=0.5)
    result = DriftEvaluator()(reference(), frame, cfg, scfg.drift, {"accuracy": 0.8})
    got = [(s.value, s.rows) for s in result.segments]
    assert [v for v, _ in got] == ["eu", "us", "other"] and sum(n for _, n in got) == 5000
    other = result.segments[-1]
    ref = reference()
    ref_other = ref[~ref["region"].isin(["eu", "us"])]
    assert other.reference_accuracy == pytest.approx(((ref_other["score"] > 0.5) == ref_other["label"]).mean())
    assert other.labelled_rows == frame[~frame["region"].isin(["eu", "us"])]["label"].notna().sum()
    # Time buckets need the prediction time: a window without ts has none, and says nothing wrong.
    assert all(s.segment == "region" for s in result.segments)


def test_segment_series_are_bounded_and_labelled(scfg):
    frame = timed(window(4000, seed=10))
    result, _ = check(scfg, frame, {"accuracy": 0.8})
    families = {f.name: f for f in ModelMetricsCollector("demo", lambda: result).collect()}
    acc = families["driftloop_model_segment_accuracy"]
    labels = {s.labels["segment"] for s in acc.samples}
    assert "hour_of_day=2" in labels and "region=apac" in labels and "day_of_week=mon" in labels
    assert len(labels) <= 4 + 3 + 24 + 7
    d = result.to_dict()["segments"][0]
    assert set(d) >= {"segment", "value", "rows", "labelled_rows", "accuracy", "accuracy_ci", "recall", "judged"}


def test_segments_are_checked_against_the_features_once_they_are_known():
    from monitor.config import FeatureSpec
    from monitor.dataschema import with_features
    from monitor.errors import ConfigError
    with pytest.raises(ConfigError, match="neither categorical features"):
        load_config(path=None, environ={}, overrides={"home": "unused", "model": {
            "features": [{"name": "plan", "type": "numeric"}], "segments": ["plan"]}})
    # No features configured: the champion's recorded schema supplies them, and is checked then.
    cfg = load_config(path=None, environ={},
                      overrides={"home": "unused", "model": {"segments": ["plan", "hour_of_day"]}})
    assert with_features(cfg.model, [FeatureSpec(name="plan", type="categorical")]).segments == ["plan", "hour_of_day"]
    with pytest.raises(ValueError, match="neither categorical features"):
        with_features(cfg.model, [FeatureSpec(name="plan", type="numeric")])


def test_recall_estimates_and_drift_per_value_with_their_guards(scfg):
    frame = timed(window(19_200, seed=11))
    apac = (frame["region"] == "apac").to_numpy()
    frame.loc[apac, "x2"] = frame.loc[apac, "x2"] + 3.0          # one region's feature moved
    result, _ = check(scfg, frame, {"accuracy": 0.8})
    seg = {s.label: s for s in result.segments}
    a = seg["region=apac"]
    assert a.drift_share is not None and a.drift_share > 0       # x2 drifted within apac ...
    assert all(s.drift_share == 0 for s in result.segments if s.segment == "region" and s.value != "apac")
    assert result.drift_share < 0.5                              # ... which the aggregate does not call drift
    # Recall with its Wilson interval, against the value's recall on the reference.
    lab = frame[apac & frame["label"].notna().to_numpy()]
    pos = lab[lab["label"] == 1]
    assert a.recall == pytest.approx(float((pos["prediction"] == 1).mean()))
    assert a.recall_ci[0] < a.recall < a.recall_ci[1] and a.reference_recall is not None
    # Estimated accuracy (CBPE) per value, with its band; the realised accuracy inside it for most values.
    judged = [s for s in result.segments if s.estimated_accuracy is not None and s.accuracy is not None]
    inside = sum(s.estimated_accuracy_ci[0] <= s.accuracy <= s.estimated_accuracy_ci[1] for s in judged)
    assert len(judged) >= 30 and inside / len(judged) >= 0.85
    # Too few rows in the drift sample: no drift share (shown, not judged).
    small = check(scfg, timed(window(2000, seed=12)), {"accuracy": 0.8})[0]
    assert all(s.drift_share is None for s in small.segments if s.segment == "hour_of_day")


def test_a_segment_recall_rule_flags_the_night_where_positives_are_missed(scfg):
    frame = timed(window(19_200, seed=13))
    baseline = {"accuracy": float((frame["prediction"] == frame["label"]).mean()), "roc_auc": 0.9}
    night = (pd.to_datetime(frame["ts"]).dt.hour == 2).to_numpy()
    missed = night & (frame["label"] == 1).to_numpy()
    frame.loc[missed, "prediction"] = 0                          # every positive at 02:00 served 0
    result = DriftEvaluator()(reference(), frame, scfg.model, scfg.drift, baseline, reference_key="v1")
    outcome = CheckOutcome(0.0, "ok", "checked", champion_version="1", result=result,
                           window_rows=result.window_rows, labelled_rows=result.labelled_rows)
    rules = AlertsConfig(rules=[{"metric": "recall", "drop": 0.2, "segment": True}])
    verdict = AlertPolicy(rules, min_labels=1000).observe(observation(outcome))
    assert not verdict.fire                                       # the aggregate does not breach
    flagged = {(b.reason, b.segment) for b in verdict.segment_breaches}
    assert ("recall", "hour_of_day=2") in flagged, verdict.message
    assert not any(r == "recall" and s != "hour_of_day=2" for r, s in flagged)
    assert "segment hour_of_day=2: recall 0.0000" in verdict.message
    # Without the rule, recall is shown and not judged.
    plain = AlertPolicy(AlertsConfig(), min_labels=1000).observe(observation(outcome))
    assert not any(b.reason == "recall" for b in plain.segment_breaches)


def test_check_and_status_text_show_the_worst_segments(scfg):
    from monitor.daemon.runtime.views import render_check, render_status
    from monitor.daemon.runtime.views.status import _check_summary  # a private step, not in the entry
    frame = timed(window(19_200, seed=7))
    baseline = {"accuracy": float((frame["prediction"] == frame["label"]).mean()), "roc_auc": 0.9}
    night = pd.to_datetime(frame["ts"]).dt.hour == 2
    frame.loc[night, "label"] = 1 - frame.loc[night, "label"]
    result, _ = check(scfg, frame, baseline)
    outcome = CheckOutcome(0.0, "ok", "checked", champion_version="1", result=result,
                           window_rows=result.window_rows, labelled_rows=result.labelled_rows)
    text = render_check(outcome, [])
    assert f"segments: the 10 worst of {len(result.segments)} values" in text
    first = text.split("segments: the 10 worst")[1].splitlines()[1]
    assert first.strip().startswith("hour_of_day=2") and "labelled; accuracy 0." in first and "recall" in first
    row = {"status": "ok", "ts": 0.0, "message": "checked", "window_rows": result.window_rows,
           "labelled_rows": result.labelled_rows, "baseline_accuracy": baseline["accuracy"],
           "result": result.to_dict(), "verdict": "x"}
    summary = _check_summary(row)
    assert summary["segments_total"] == len(result.segments) and len(summary["worst_segments"]) == 5
    status = render_status({"model": "demo", "champion": {"version": "1"}, "last_check": summary,
                            "open_incidents": [], "recent_incidents": [], "recent_retrains": []})
    assert f"segments: the 5 worst of {len(result.segments)} values" in status
    assert "hour_of_day=2" in status.split("segments: the 5 worst")[1].splitlines()[1]
