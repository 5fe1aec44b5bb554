"""A champion's own figure is judged with the precision of the rows it was measured on.

A loop-promoted champion's baseline comes from the few hundred post-change rows its retrain held
out, and it won a comparison there: 0.88 on 150 rows (Wilson 0.82-0.92) is not a bar a champion
serving 0.85 has fallen 3 points below. The policy judges against the end of that interval nearest
a drop beside the reference level (monitor/daemon/decisions/breach.py ``own_bar``, applied by the
controller's ``observation``); the rescan's "below its own figure" counts the same error
(monitor/daemon/runtime/rescan.py ``below_own_figure``)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from monitor.config import AlertsConfig, DriftConfig, load_config
from monitor.daemon.decisions.breach import baseline_bounds
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import observation
from monitor.daemon.runtime.rescan import below_own_figure
from monitor.daemon.state.levels import Level
from monitor.drift.result import CheckResult, FeatureDrift
from monitor.stats import performance, wilson_interval
from trainer.outcomes import Baseline

ROWS = 2000


def served(accuracy: float, seed: int = 0) -> CheckResult:
    """A binary check of ``ROWS`` labelled rows served at ``accuracy`` by a champion whose baseline
    is 0.88 accuracy and 0.94 ROC AUC."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, ROWS)
    right = np.arange(ROWS) < round(accuracy * ROWS)
    rng.shuffle(right)
    # Confident where right, hesitant where wrong: the ranking stays good (ROC AUC about 0.97).
    sure, unsure = rng.uniform(0.8, 1.0, ROWS), rng.uniform(0.5, 0.6, ROWS)
    score = np.where(y == 1, np.where(right, sure, 1 - unsure), np.where(right, 1 - sure, unsure))
    perf = performance(y, (score >= 0.5).astype(int), score)
    no_drift = FeatureDrift("score", None, None, None, False)
    return CheckResult("c1", "demo", 0.0, ROWS, ROWS, [], 0.0, 0.3, False, no_drift,
                       accuracy=perf.accuracy, accuracy_ci=perf.accuracy_ci, roc_auc=perf.roc_auc,
                       roc_auc_ci=perf.roc_auc_ci, baseline_accuracy=0.88, baseline_roc_auc=0.94,
                       performance_actionable=True)


#: The baseline's intervals as the trainer records them for 132 right of 150 held-out rows.
INTERVALS = {"rows": 150, "confidence": 0.95, "accuracy": list(wilson_interval(132, 150)), "roc_auc": [0.90, 0.98]}
#: The reference level the loop kept from the champion before the change (a 1,200-row baseline).
LEVEL = Level(accuracy=0.842, roc_auc=0.92)


def breaches(result: CheckResult, level: Level, bounds: dict | None) -> list[str]:
    result.baseline_bounds = bounds
    out = CheckOutcome(0.0, "ok", "checked", champion_version="2", result=result, window_rows=ROWS, labelled_rows=ROWS)
    verdict = AlertPolicy(AlertsConfig(), min_labels=500, drift=DriftConfig()).observe(observation(out, level))
    return [b.key for b in verdict.breaches]


def test_a_champion_promoted_on_few_held_out_rows_is_judged_at_its_interval_beside_the_level():
    bounds = baseline_bounds(INTERVALS)
    assert bounds == {"accuracy": INTERVALS["accuracy"][0], "roc_auc": 0.90} and 0.81 < bounds["accuracy"] < 0.83
    healthy = served(0.848)  # 3.2 points under its own 0.88 point, above the level 0.842
    assert "accuracy" in breaches(healthy, LEVEL, None)          # the point as the bar: a false breach
    assert breaches(served(0.848), LEVEL, bounds) == []           # its interval beside the level: healthy
    # A real drop still breaches, against the level.
    assert breaches(served(0.80), LEVEL, bounds)[:1] == ["accuracy"]
    # Without a level beside it, the champion's own point stays the bar (nothing else to judge against).
    assert "accuracy" in breaches(served(0.848), Level(), bounds)


def test_an_error_s_bound_is_its_upper_end_and_malformed_intervals_are_skipped():
    assert baseline_bounds({"mae": [3.1, 3.9], "rows": 150, "confidence": 0.95, "roc_auc": [0.9], "x": "y"}) == {
        "mae": 3.9}
    assert baseline_bounds(None) == {}


def loss(accuracy: float, n: int) -> np.ndarray:
    wrong = np.zeros(n)
    wrong[:round((1 - accuracy) * n)] = 1.0
    return wrong


def test_below_its_own_figure_counts_the_error_of_the_held_out_figure(tmp_path):
    cfg = load_config(None)
    frame = pd.DataFrame({"x": [0.0]})
    exact = SimpleNamespace(baseline=Baseline(frame, {"accuracy": 0.88, "roc_auc": 0.94}))
    measured = SimpleNamespace(baseline=Baseline(frame, {"accuracy": 0.88, "roc_auc": 0.94}, INTERVALS))
    # 0.838 on 1,000 newer rows: 4.2 points under a figure taken as exact (z 3.6), within the error of
    # 0.88 measured on 150 rows (z 1.5).
    assert below_own_figure(cfg, exact, loss(0.838, 1000)) is not None
    assert below_own_figure(cfg, measured, loss(0.838, 1000)) is None
    # A concept that really moved on is found either way.
    moved = below_own_figure(cfg, measured, loss(0.70, 1000))
    assert moved is not None and moved.accuracy_before == 0.88 and moved.accuracy_after == 0.70
