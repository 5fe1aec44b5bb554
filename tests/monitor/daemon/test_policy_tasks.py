"""The alert policy per task, on check results built from data (monitor.taskstats figures of
simulated multiclass and regression predictions), through the controller's own observation()."""
from __future__ import annotations

import numpy as np
import pytest

from monitor.config import AlertsConfig, DriftConfig, ModelConfig, load_config
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import observation
from monitor.daemon.state.levels import Level
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.decisions.rules import check_rules_fit, rule_problems
from monitor.drift.changepoint import find_loss_change
from monitor.drift.result import CheckResult, FeatureDrift
from monitor.errors import ConfigError
from monitor.tasks import REGRESSION
from monitor.taskstats import multiclass_performance, regression_performance, residual_shift

CLASSES = ["day", "dusk", "night", "dawn", "noon"]
K = len(CLASSES)


def multiclass_rows(rng, n: int, accuracy: float, night: float | None = None):
    """Labels, served classes and probabilities of a classifier right on ``accuracy`` of the rows
    (``night``: on that share of the rows whose class is night)."""
    y = rng.integers(0, K, size=n)
    right = rng.uniform(size=n) < np.where(y == CLASSES.index("night"), accuracy if night is None else night, accuracy)
    pred = np.where(right, y, (y + rng.integers(1, K, size=n)) % K)
    proba = np.full((n, K), 0.3 / (K - 1))
    proba[np.arange(n), pred] = 0.7
    return y, pred, proba


def multiclass_result(rng, n: int, accuracy: float, reference: float = 0.90, **kw) -> CheckResult:
    y, pred, proba = multiclass_rows(rng, n, accuracy, **kw)
    ref_y, ref_pred, ref_proba = multiclass_rows(np.random.default_rng(99), 4000, reference)
    live, ref = multiclass_performance(y, pred, proba, K), multiclass_performance(ref_y, ref_pred, ref_proba, K)
    by_name = lambda d: {CLASSES[i]: v for i, v in (d or {}).items()}  # noqa: E731
    baselines = {"macro_f1": ref.macro_f1, "weighted_f1": ref.weighted_f1,
                 **{f"recall[{c}]": v for c, v in by_name(ref.class_recall).items()}}
    return CheckResult(
        "c1", "demo", 0.0, n, n, [], 0.0, 0.3, False, FeatureDrift("score", None, None, None, False),
        accuracy=live.accuracy, accuracy_ci=live.accuracy_ci, roc_auc=live.roc_auc, roc_auc_ci=live.roc_auc_ci,
        baseline_accuracy=ref.accuracy, baseline_roc_auc=ref.roc_auc, performance_actionable=True,
        task="multiclass", classes=CLASSES, macro_f1=live.macro_f1, weighted_f1=live.weighted_f1,
        class_precision=by_name(live.class_precision), class_recall=by_name(live.class_recall),
        baselines=baselines)


def regression_rows(rng, n: int, noise: float, shift: float = 0.0):
    y = rng.normal(50.0, 10.0, size=n)
    return y, y + shift + rng.normal(0.0, noise, size=n)


def regression_result(rng, n: int, noise: float, *, reference_noise: float = 2.0, estimated=None,
                      labelled: int | None = None, rows=None) -> CheckResult:
    y, pred = regression_rows(rng, n, noise) if rows is None else rows
    ref = regression_performance(*regression_rows(np.random.default_rng(98), 4000, reference_noise))
    live = regression_performance(y, pred)
    est = {} if estimated is None else {"estimated_mae": estimated[0], "estimated_mae_ci": estimated[1]}
    return CheckResult(
        "c2", "demo", 0.0, n, n if labelled is None else labelled, [], 0.0, 0.3, False,
        FeatureDrift("prediction", None, None, None, False), performance_actionable=True, task="regression",
        mae=live.mae, mae_ci=live.mae_ci, rmse=live.rmse, rmse_ci=live.rmse_ci, mape=live.mape, r2=live.r2,
        r2_ci=live.r2_ci, baseline_mae=ref.mae, bias=live.bias,
        residual_shift=residual_shift(live.bias, ref.bias, ref.residual_sd),
        baselines={k: v for k, v in {"rmse": ref.rmse, "mape": ref.mape, "r2": ref.r2, "bias": ref.bias,
                                     "residual_sd": ref.residual_sd, "residual_shift": 0.0}.items() if v is not None},
        **est)


def outcome(result: CheckResult, labelled: int | None = None, change=None) -> CheckOutcome:
    rows = result.labelled_rows if labelled is None else labelled
    return CheckOutcome(0.0, "ok", "checked", champion_version="1", result=result, window_rows=result.window_rows,
                        labelled_rows=rows, change=change)


def policy(min_labels: int = 1000, **alerts) -> AlertPolicy:
    return AlertPolicy(AlertsConfig(**alerts), min_labels=min_labels, drift=DriftConfig())


# ---- multiclass: the binary pair (accuracy -3 points, macro ROC AUC -5 points) ------------------
def test_multiclass_accuracy_drop_fires_named_accuracy():
    rng = np.random.default_rng(1)
    healthy = policy().observe(observation(outcome(multiclass_result(rng, 3000, 0.90))))
    assert not healthy.fire and healthy.healthy_for("accuracy") is True
    v = policy().observe(observation(outcome(multiclass_result(rng, 3000, 0.82))))
    assert v.fire and v.retrain and v.reason == "accuracy" and "accuracy" in v.firing
    (acc,) = [b for b in v.breaches if b.key == "accuracy"]
    assert acc.drop == pytest.approx(acc.baseline - acc.value) and acc.drop >= 0.03


def test_multiclass_estimated_accuracy_drop_is_suspected():
    rng = np.random.default_rng(2)
    r = multiclass_result(rng, 3000, 0.90)
    r.estimated_accuracy, r.estimated_accuracy_ci = 0.80, (0.78, 0.82)
    v = policy().observe(observation(outcome(r, labelled=50)))
    assert not v.performance_known and v.suspect and [b.key for b in v.suspected] == ["accuracy"]


def test_multiclass_rules_macro_f1_and_one_class_recall():
    """The seed's "recall dropped at night": one class's recall collapses while accuracy barely moves."""
    rng = np.random.default_rng(3)
    r = multiclass_result(rng, 5000, 0.92, night=0.75)   # accuracy ~0.886 vs 0.90: within 3 points
    alerts = dict(rules=[{"metric": "recall", "class": "night", "drop": 0.05}, {"metric": "macro_f1", "drop": 0.5}])
    v = policy(**alerts).observe(observation(outcome(r)))
    keys = [b.key for b in v.breaches]
    assert "recall[night]" in keys and "macro_f1" not in keys and "accuracy" not in keys
    (night,) = [b for b in v.breaches if b.key == "recall[night]"]
    assert night.reason == "recall" and night.class_name == "night" and night.against == "reference sample"
    assert "recall[night]" in v.firing and v.fire
    readings = {r.metric: r for r in v.rules}
    assert readings["recall[night]"].breached and not readings["macro_f1"].breached
    assert readings["macro_f1"].value == pytest.approx(r.macro_f1)


# ---- regression: a relative MAE rise of alerts.mae_rise -----------------------------------------
def test_regression_mae_rise_fires_named_mae():
    rng = np.random.default_rng(4)
    ok = policy().observe(observation(outcome(regression_result(rng, 3000, 2.1))))  # ~5 % worse
    assert not ok.fire and ok.healthy_for("mae") is True and ok.breaches == ()
    v = policy(mape_rise=5.0).observe(observation(outcome(regression_result(rng, 3000, 2.6))))  # ~30 % worse
    assert v.fire and v.retrain and v.reason == "mae" and v.firing == ("mae",)
    (mae,) = v.breaches
    assert mae.drop == pytest.approx((mae.value - mae.baseline) / mae.baseline) and mae.drop >= 0.10
    assert mae.reason == "mae" and mae.value > mae.baseline  # a rise: lower is better


def test_regression_threshold_is_relative_whatever_alerts_mode_and_configurable():
    rng = np.random.default_rng(5)
    r = regression_result(rng, 3000, 2.4)  # ~20 % worse, ~0.3 absolute
    assert policy(mode="absolute").observe(observation(outcome(r))).fire
    assert not policy(mae_rise=0.5, mape_rise=0.5).observe(observation(outcome(r))).fire


def test_regression_is_judged_against_the_lowest_mae_reached():
    """A champion promoted with a higher (worse) baseline MAE is judged against the level: the
    lowest MAE the loop reached."""
    rng = np.random.default_rng(6)
    r = regression_result(rng, 3000, 2.0, reference_noise=3.0)   # its own baseline is 50 % worse than now
    assert not policy().observe(observation(outcome(r))).fire
    level = Level(mae=r.baseline_mae / 1.5 * 0.8)               # good was lower still
    v = policy().observe(observation(outcome(r), level))
    assert v.fire and v.breaches[0].against == "reference level"
    assert v.breaches[0].baseline == pytest.approx(level.mae)


def test_regression_estimated_mae_needs_its_band_clear_of_the_rise():
    rng = np.random.default_rng(7)
    base = regression_result(rng, 10, 2.0).baseline_mae
    clear = regression_result(rng, 3000, 2.0, labelled=0, estimated=(base * 1.4, (base * 1.1, base * 1.7)))
    v = policy().observe(observation(outcome(clear)))
    assert not v.performance_known and v.suspect and [b.key for b in v.suspected] == ["mae"]
    assert v.suspected[0].bound == pytest.approx(base * 1.1) and v.suspected[0].value == pytest.approx(base * 1.4)
    assert "band down to" in v.message  # the text people read: an error's band is told by its lower end
    straddles = regression_result(rng, 3000, 2.0, labelled=0, estimated=(base * 1.4, (base * 1.05, base * 1.7)))
    assert not policy().observe(observation(outcome(straddles))).suspect
    within = regression_result(rng, 3000, 2.0, labelled=0, estimated=(base * 1.02, (base * 0.9, base * 1.1)))
    assert policy().observe(observation(outcome(within))).healthy["estimate"] is True


def test_regression_fast_lane_fires_on_a_proven_mae_step():
    rng = np.random.default_rng(8)
    y1, p1 = regression_rows(rng, 1500, 2.0)
    y2, p2 = regression_rows(rng, 400, 2.0, shift=4.0)
    loss = REGRESSION.per_row_loss(np.concatenate([y1, y2]), np.concatenate([p1, p2]))
    change = find_loss_change("regression", loss)
    assert change is not None and change.metric == "mae"
    r = regression_result(rng, 1900, 2.0)
    v = policy().observe(observation(outcome(r, labelled=600, change=change)))  # 600 < min_labels
    assert v.fire and v.fast and v.reason == "mae"
    assert v.breaches[0].fast and v.breaches[0].key == "mae"
    # a classifier's change point says nothing about a regression model's MAE
    acc_change = find_loss_change("binary", (rng.uniform(size=2000) < np.r_[np.full(1500, .1), np.full(500, .6)]))
    assert not policy().observe(observation(outcome(r, labelled=600, change=acc_change))).fire


def test_regression_rules_rmse_mape_r2():
    rng = np.random.default_rng(9)
    r = regression_result(rng, 3000, 3.0)   # 50 % worse errors
    rules = [{"metric": "rmse", "drop": 0.2}, {"metric": "mape", "drop": 0.2}, {"metric": "r2", "drop": 0.01}]
    v = policy(mae_rise=5.0, mape_rise=5.0, mode="relative", rules=rules).observe(observation(outcome(r)))
    assert {b.key for b in v.breaches} == {"rmse", "mape", "r2"} and v.reason == "rmse"
    readings = {x.metric: x for x in v.rules}
    assert readings["rmse"].drop == pytest.approx((r.rmse - r.baselines["rmse"]) / r.baselines["rmse"])
    assert readings["r2"].drop == pytest.approx((r.baselines["r2"] - r.r2) / r.baselines["r2"])
    absolute = policy(mae_rise=5.0, mape_rise=5.0,
                      rules=[{"metric": "rmse", "drop": 1.0}, {"metric": "r2", "drop": 0.1}])
    # +1.03 in the target's units
    assert [b.key for b in absolute.observe(observation(outcome(r))).breaches] == ["rmse"]


def test_regression_mape_rise_fires_while_the_mae_falls():
    """The car-price case: after a shift to cheap cars the MAE fell while the MAPE grew many times:
    the default MAPE rule breaches (issue 34, item 7)."""
    rng = np.random.default_rng(10)
    y = rng.uniform(4.0, 30.0, size=3000)               # prices: the reference is mostly dear cars ...
    ref = regression_result(rng, 3000, 2.0, rows=(y, y + rng.normal(0.0, 2.0, size=3000)))
    cheap = rng.uniform(1.0, 6.0, size=3000)             # ... the live window cheap ones, errors a bit smaller
    live = regression_result(rng, 3000, 2.0, rows=(cheap, cheap + rng.normal(0.0, 1.8, size=3000)))
    assert live.mae < live.baseline_mae and live.mape > 2 * ref.mape
    # the bar is the champion's MAPE on its reference sample
    r = CheckResult(**{**live.__dict__, "baselines": {**live.baselines, "mape": ref.mape}})
    v = policy().observe(observation(outcome(r)))
    assert v.fire and v.reason == "mape" and v.firing == ("mape",)
    (mape,) = v.breaches
    assert mape.baseline == pytest.approx(ref.mape) and mape.drop == pytest.approx((r.mape - ref.mape) / ref.mape)
    assert not policy(mape_rise=50.0).observe(observation(outcome(r))).fire


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_regression_residual_shift_fires_either_way_while_the_mae_falls(direction):
    """A model that starts to over- (or under-) predict by half a residual SD, with less noise: its
    MAE falls, its mean signed residual moved; the two-sided default breaches."""
    rng = np.random.default_rng(11)
    y, pred = regression_rows(rng, 3000, 1.6, shift=direction * 1.0)   # reference residual SD: 2.0
    r = regression_result(rng, 3000, 2.0, rows=(y, pred))
    assert r.mae < r.baseline_mae and r.residual_shift == pytest.approx(0.5, abs=0.08)
    v = policy().observe(observation(outcome(r)))
    assert v.fire and v.firing == ("residual_shift",) and v.reason == "residual_shift"
    assert v.breaches[0].baseline == 0.0 and v.breaches[0].drop == pytest.approx(r.residual_shift)
    assert not policy(residual_shift=0.8).observe(observation(outcome(r))).fire
    steady = regression_result(rng, 3000, 2.0)                          # the reference's own errors
    assert steady.residual_shift < 0.1 and not policy().observe(observation(outcome(steady))).fire


# ---- rules that do not fit the champion's task ---------------------------------------------------
def test_rule_problems_per_task():
    cfg = AlertsConfig(rules=[{"metric": "recall", "drop": 0.05}, {"metric": "mae", "drop": 0.1}])
    assert len(rule_problems(cfg.rules, "regression", None)) == 1          # recall
    assert len(rule_problems(cfg.rules, "binary", None)) == 1              # mae
    assert len(rule_problems(cfg.rules, "multiclass", CLASSES)) == 2       # recall needs a class; mae
    per_class = AlertsConfig(rules=[{"metric": "recall", "class": "night", "drop": 0.05},
                                    {"metric": "precision", "class": "midnight", "drop": 0.05}])
    problems = rule_problems(per_class.rules, "multiclass", CLASSES)
    assert len(problems) == 1 and "midnight" in problems[0]
    assert len(rule_problems(per_class.rules, "binary", None)) == 2        # class is for multiclass


def test_rules_are_checked_once_the_task_is_known(tmp_path):
    rules = {"alerts": {"rules": [{"metric": "recall", "drop": 0.05}]}, "home": str(tmp_path)}
    unknown = load_config(path=None, environ={}, overrides=rules)       # task not configured: the champion says
    check_rules_fit(unknown)
    # what with_champion_schema does with the champion's recorded task
    model = ModelConfig.model_validate({**unknown.model.model_dump(exclude_unset=True), "task": "regression"})
    champion_says = unknown.model_copy(update={"model": model})
    with pytest.raises(ConfigError, match="recall does not apply to a regression model"):
        check_rules_fit(champion_says)


def test_regression_segment_values_are_judged_on_their_mae_interval():
    """model.segments of a regression model: a value whose whole MAE interval is alerts.mae_rise over
    its reference MAE breaches (a segment alert, no incident); one whose interval reaches it does not."""
    from monitor.drift.segments import SegmentPerformance
    rng = np.random.default_rng(12)
    r = regression_result(rng, 3000, 2.0)

    def value(name: str, noise: float) -> SegmentPerformance:
        y, pred = regression_rows(rng, 400, noise)
        perf = regression_performance(y, pred)
        return SegmentPerformance("region", name, 400, 400, None, None, None, None, None, judged=True,
                                  mae=perf.mae, mae_ci=perf.mae_ci, reference_mae=r.baseline_mae)
    r.segments = [value("eu", 2.0), value("apac", 3.0), value("us", 2.15)]
    v = policy().observe(observation(outcome(r)))
    assert [(b.key, b.segment) for b in v.segment_breaches] == [("mae", "region=apac")]
    assert not v.fire and v.segment_breaches[0].bound >= r.baseline_mae * 1.1


def test_residual_shift_is_a_regression_rule_metric():
    """alerts.rules may judge residual_shift with its own drop (the default wins its key)."""
    rules = AlertsConfig(rules=[{"metric": "residual_shift", "drop": 0.1}]).rules
    assert rule_problems(rules, "regression", None) == [] and rule_problems(rules, "binary", None)
