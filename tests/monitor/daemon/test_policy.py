import pytest
from hypothesis import given, strategies as st

from monitor.config import AlertsConfig
from monitor.daemon.decisions.breach import Observation, drop_of
from monitor.daemon.decisions.policy import AlertPolicy, cooldown_remaining

BASE = dict(baseline_accuracy=0.87, baseline_roc_auc=0.93, champion_version="1")


def obs(acc=0.87, auc=0.93, labelled=2000, drift=False, **kw):
    return Observation(labelled_rows=labelled, accuracy=acc, roc_auc=auc, dataset_drift=drift, **{**BASE, **kw})


def policy(**alerts):
    return AlertPolicy(AlertsConfig(**alerts), min_labels=1000)


def test_healthy_window_does_not_fire():
    v = policy().observe(obs())
    assert not v.fire and not v.retrain and v.breaches == ()
    assert v.healthy_for("accuracy") is True and v.healthy_for("drift") is True


def test_accuracy_drop_at_threshold_fires_and_retrains():
    v = policy().observe(obs(acc=0.84))  # exactly 0.03 below: the threshold counts
    assert v.fire and v.retrain and v.reason == "accuracy"
    assert [b.reason for b in v.breaches] == ["accuracy"]
    (b,) = v.breaches
    assert (b.value, b.against, b.baseline, b.threshold) == (0.84, "baseline", 0.87, 0.03)
    # The text people read (the verdict's line in logs and the check log) is made from that breach.
    assert "accuracy 0.8400 vs baseline 0.8700 (drop 0.0300 >= 0.03)" in v.message


def test_drop_just_below_threshold_does_not_fire():
    assert not policy().observe(obs(acc=0.8401)).fire


def test_auc_drop_alone_fires_with_reason_roc_auc():
    v = policy().observe(obs(auc=0.88))
    assert v.fire and v.reason == "roc_auc" and v.firing == ("roc_auc",)


def test_auc_on_a_few_rows_of_the_rarer_class_breaches_only_when_its_interval_proves_the_drop():
    # 1 % positives: 7 positives among 1,000 labelled rows put the ROC AUC at ±0.1. A point 0.07
    # under the bar whose interval reaches back over it is noise; a flip (the interval wholly below) is not.
    noisy = obs(auc=0.86, minority_rows=7, roc_auc_upper=0.96)
    assert not policy().observe(noisy).fire
    flipped = policy().observe(obs(auc=0.15, minority_rows=7, roc_auc_upper=0.35))
    assert flipped.fire and flipped.reason == "roc_auc"
    # With enough rows of each class the point judges, as always.
    assert policy().observe(obs(auc=0.86, minority_rows=30, roc_auc_upper=0.96)).fire


def test_too_few_labels_cannot_fire_and_does_not_reset_the_streak():
    p = policy(sustained_windows=2)
    assert not p.observe(obs(acc=0.70)).fire
    v = p.observe(obs(acc=0.50, labelled=999))
    assert not v.fire and not v.performance_known and v.healthy_for("accuracy") is None
    assert v.labels == (999, 1000)
    assert p.observe(obs(acc=0.70)).fire  # second breaching window with enough labels


def test_sustained_windows_need_consecutive_breaches():
    p = policy(sustained_windows=3)
    assert [p.observe(obs(acc=a)).fire for a in (0.8, 0.8, 0.87, 0.8, 0.8, 0.8)] == [
        False, False, False, False, False, True]


def test_sustained_windows_count_windows_not_checks_of_the_same_rows():
    # A check that judged the very labelled rows the last one did is the same evidence: one noisy
    # window checked twice (no label between the checks) opened an incident at sustained_windows=2.
    p = policy(sustained_windows=2)
    first = p.observe(obs(acc=0.8, judged_rows=(2000, 1.0e9)))
    again = p.observe(obs(acc=0.8, judged_rows=(2000, 1.0e9)))
    assert not first.fire and not again.fire and again.performance_streak == 1
    assert p.observe(obs(acc=0.8, judged_rows=(2100, 1.0e9 + 60))).fire  # a second window: new labels
    healthy = policy(sustained_windows=2)
    healthy.observe(obs(acc=0.87, judged_rows=(2000, 1.0e9)))
    assert healthy.observe(obs(acc=0.8, judged_rows=(2000, 1.0e9))).performance_streak == 1  # a new bar: counts
    unknown = policy(sustained_windows=2)  # checks replayed from the log carry no rows: each counts
    assert [unknown.observe(obs(acc=0.8)).fire for _ in range(2)] == [False, True]


def test_relative_mode_scales_with_the_baseline():
    p = policy(mode="relative", accuracy_drop=0.05)
    assert not p.observe(obs(acc=0.83)).fire    # 4.6 % below 0.87
    assert p.observe(obs(acc=0.82)).fire        # 5.7 % below


def test_drift_without_labels_alerts_but_retrains_only_when_configured():
    v = policy().observe(obs(labelled=0, acc=None, auc=None, drift=True))
    assert v.fire and v.reason == "drift" and not v.retrain and v.firing == ("drift",)
    assert policy(retrain_on_drift=True).observe(obs(labelled=0, drift=True)).retrain


def test_new_champion_resets_streaks():
    p = policy(sustained_windows=2)
    p.observe(obs(acc=0.8))
    assert not p.observe(obs(acc=0.8, champion_version="2")).fire


def test_undefined_auc_is_not_a_breach():
    v = policy().observe(obs(auc=float("nan")))
    assert not v.fire and v.healthy_for("roc_auc") is True


def test_cooldown():
    assert cooldown_remaining(100.0, None, 60) == 0
    assert cooldown_remaining(100.0, 50.0, 60) == pytest.approx(10.0)
    assert cooldown_remaining(200.0, 50.0, 60) == 0


@given(base=st.floats(0.5, 1.0), value=st.floats(0.0, 1.0))
def test_drop_modes_agree_on_sign(base, value):
    assert (drop_of(value, base, "absolute") > 0) == (drop_of(value, base, "relative") > 0)


def test_drift_on_a_window_below_min_rows_cannot_fire():
    p = AlertPolicy(AlertsConfig(), min_labels=1000, min_drift_rows=500)
    small = p.observe(obs(labelled=0, drift=True, window_rows=2))
    assert not small.fire and small.breaches == () and small.healthy_for("drift") is None
    assert small.drift_rows == (2, 500)
    big = p.observe(obs(labelled=0, drift=True, window_rows=500))
    assert big.fire and big.reason == "drift"


# ---- the fast lane and the reference level (issue 16) ------------------------------------------
from monitor.config import DriftConfig  # noqa: E402
from monitor.drift.changepoint import Change  # noqa: E402


def change(after: float, rows_after: int = 400) -> Change:
    return Change(index=1000, rows_before=1000, rows_after=rows_after, accuracy_before=0.87,
                  accuracy_after=after, z=9.0)


def test_fast_lane_fires_before_min_labels_and_without_a_streak():
    p = AlertPolicy(AlertsConfig(sustained_windows=3), min_labels=1000, drift=DriftConfig())
    v = p.observe(obs(acc=0.80, labelled=600, change=change(0.55)))
    assert v.fire and v.fast and v.retrain and v.reason == "accuracy"
    (b,) = v.breaches
    assert b.fast and b.reason == "accuracy" and b.value == pytest.approx(0.55) and v.change_row == 1000


def test_fast_lane_ignores_a_small_drop_and_can_be_switched_off():
    p = AlertPolicy(AlertsConfig(), min_labels=1000, drift=DriftConfig())
    assert not p.observe(obs(labelled=600, change=change(0.855, rows_after=3000))).fire  # 1.5 points
    off = AlertPolicy(AlertsConfig(), min_labels=1000, drift=DriftConfig(fast_lane=False))
    assert not off.observe(obs(labelled=600, change=change(0.55))).fire


def test_a_lowered_baseline_is_judged_against_the_reference_level():
    """A champion promoted with baseline 0.53 serving 0.72 is not 'healthy': good was 0.87."""
    v = policy().observe(obs(acc=0.72, auc=0.80, baseline_accuracy=0.53, baseline_roc_auc=0.6,
                             reference_accuracy=0.87, reference_roc_auc=0.93))
    assert v.fire and v.healthy_for("accuracy") is False
    assert (v.breaches[0].reason, v.breaches[0].value, v.breaches[0].against, v.breaches[0].baseline) == (
        "accuracy", 0.72, "reference level", 0.87)
    # A champion whose own baseline is higher than the level is judged against its own baseline.
    v = policy().observe(obs(acc=0.88, baseline_accuracy=0.92, reference_accuracy=0.87, reference_roc_auc=0.93))
    assert v.fire and (v.breaches[0].against, v.breaches[0].baseline) == ("baseline", 0.92)


def est(acc, upper, labelled=100, **kw):
    return obs(acc=None, auc=None, labelled=labelled, estimated_accuracy=acc, estimated_accuracy_upper=upper, **kw)


def test_estimated_drop_is_suspected_only_with_its_band_clear_of_the_threshold():
    v = policy().observe(est(0.80, 0.84))  # upper end exactly 0.03 below 0.87: clear
    assert v.suspect and not v.fire and not v.retrain and v.suspected[0].reason == "accuracy"
    assert (v.suspected[0].value, v.suspected[0].bound, v.suspected[0].baseline) == (0.80, 0.84, 0.87)
    v = policy().observe(est(0.80, 0.8401))  # a point estimate 7 points down, but the band reaches the bar
    assert not v.suspect and v.suspected == ()
    assert v.healthy["estimate"] is False  # not healthy either: an open suspicion is not cleared by it


def test_estimated_drop_is_judged_against_the_reference_level():
    assert not policy().observe(est(0.83, 0.845)).suspect
    assert policy().observe(est(0.83, 0.845, reference_accuracy=0.90)).suspect  # bar 0.90: 0.845 <= 0.87


def test_labels_overrule_the_estimate():
    v = policy().observe(obs(labelled=2000, estimated_accuracy=0.70, estimated_accuracy_upper=0.72))
    assert not v.suspect and v.suspected == () and v.healthy["estimate"] is None and not v.fire


def test_suspicion_needs_sustained_windows_and_a_new_champion_resets_it():
    p = policy(sustained_windows=2)
    assert not p.observe(est(0.80, 0.82)).suspect
    assert p.observe(est(0.80, 0.82)).suspect
    assert not p.observe(est(0.80, 0.82, champion_version="2")).suspect


def test_estimated_auc_drop_is_suspected_too():
    v = policy().observe(obs(acc=None, auc=None, labelled=0, estimated_roc_auc=0.85, estimated_roc_auc_upper=0.87))
    assert v.suspect and v.suspected[0].reason == "roc_auc"
    assert policy().observe(obs(acc=None, auc=None, labelled=0)).healthy["estimate"] is None


def test_labels_chosen_by_the_score_move_the_bar_of_realised_figures_only():
    """monitor.drift.selection: reviewed rows are expected to realise a ROC AUC 6 points under the
    level; the bar of the realised figure moves by that, within the figure's range, and says so. A
    label-free estimate of the whole window is judged against the level itself."""
    chosen = {"roc_auc": -0.06}
    v = policy().observe(obs(auc=0.88, selection=chosen))      # 0.88 vs 0.87: not a drop for these rows
    assert not v.fire and v.breaches == ()
    assert policy().observe(obs(auc=0.88)).fire                # against the level itself it would be
    v = policy().observe(obs(auc=0.80, selection=chosen))      # 0.80 vs 0.87: a drop for these rows too
    assert v.fire and v.reason == "roc_auc"
    (b,) = v.breaches
    assert b.baseline == pytest.approx(0.87) and "moved -0.0600 for labels chosen by the score" in v.message
    v = policy().observe(obs(acc=0.95, selection={"accuracy": 0.2}))  # the bar moves to 1.0 at most
    assert v.fire and v.breaches[0].reason == "accuracy" and v.breaches[0].baseline == 1.0
    est = obs(acc=None, auc=None, labelled=0, estimated_roc_auc=0.85, estimated_roc_auc_upper=0.87,
              selection=chosen)
    assert policy().observe(est).suspect   # the estimate's bar is the level: 0.87 is 6 points under 0.93
