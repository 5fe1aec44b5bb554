"""A/B on live traffic: the challenger scores the rows the champion served, before any promotion.

The retrain window comes from the store, so each row carries what was served: its output (score,
class probabilities or value), predicted label and the version that scored it. On the rows the
current champion served (its ``model_version``; all rows when no row names a version, as from
senders that never did), by ``model.task``:

- output distribution: the challenger's outputs against the served ones with Evidently's drift
  test (the drift reports' method and style; ``live/prediction_drift.html``): the score (binary),
  the predicted class (multiclass), the predicted value (regression);
- closeness: the share of rows where both predict the same label (``agreement``, at
  ``model.threshold`` for binary), or for regression the mean |difference| of the two predictions
  (``mean_abs_difference``, target units);
- on the held-out labelled rows (the challenger never trained on them; the same seeded split
  picks the same rows as :func:`trainer.data.split` did for the gate), paired tests
  (monitor/paired.py): accuracy with an exact McNemar test and ROC AUC with DeLong's test (binary),
  or the one-vs-rest macro ROC AUC with per-class DeLong tests combined (multiclass); MAE with a
  paired t test on the per-row absolute errors (regression).

The challenger *wins on live traffic* when it is better on one of them at significance
``1 - training.gate.confidence`` and significantly worse on none. ``training.gate.requires_live_win``
makes that a gate condition.
"""
from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.tasks import LOWER_IS_BETTER, task_of
from trainer.data import split

ARTIFACT_DIR = "live"


@dataclass
class LiveComparison:
    champion_version: str
    rows: int = 0                         # served rows the challenger scored
    agreement: float | None = None        # classifiers: share of rows with the same predicted label
    score_drift_method: str | None = None
    score_drift: float | None = None      # Evidently's drift score of challenger vs served outputs
    score_drifted: bool | None = None
    labelled_rows: int = 0                # held-out labelled rows of the paired tests
    champion_accuracy: float | None = None
    challenger_accuracy: float | None = None
    mcnemar_p: float | None = None
    champion_roc_auc: float | None = None     # multiclass: one-vs-rest macro ROC AUC
    challenger_roc_auc: float | None = None
    delong_p: float | None = None
    unavailable: str | None = None        # why there is no comparison
    task: str = "binary"
    mean_abs_difference: float | None = None  # regression: mean |challenger - served prediction|
    champion_mae: float | None = None
    challenger_mae: float | None = None
    paired_t_p: float | None = None       # regression: paired t test of the per-row absolute errors

    def _criteria(self) -> tuple[tuple[str, float | None, float | None, float | None, bool], ...]:
        """(name, challenger's, champion's, p-value, higher is better) per paired test of the task."""
        task = task_of(self.task)
        found = {metric: (getattr(self, f"challenger_{metric}"), getattr(self, f"champion_{metric}"),
                          getattr(self, p)) for metric, p in _P_VALUES.items()}
        return tuple((task.metric_label(metric), *found[metric], metric not in LOWER_IS_BETTER)
                     for metric in task.paired_metrics)

    def significant(self, alpha: float) -> tuple[list[str], list[str]]:
        """(where the challenger is significantly better, where significantly worse) at ``alpha``."""
        better: list[str] = []
        worse: list[str] = []
        for name, ours, theirs, p, higher in self._criteria():
            if ours is None or theirs is None or p is None or p >= alpha or ours == theirs:
                continue
            (better if (ours > theirs) == higher else worse).append(f"{name} {ours:.4f} vs {theirs:.4f} (p={p:.3g})")
        return better, worse

    def closeness(self) -> str:
        """How close the two models' outputs were, for people: agreement, or the mean |difference|."""
        field, label = task_of(self.task).closeness_figure
        return f"{label} {_fmt(getattr(self, field))}"

    def verdict(self, alpha: float) -> tuple[bool, str]:
        """(wins, why) at significance ``alpha``."""
        if self.unavailable:
            return False, f"no live comparison: {self.unavailable}"
        better, worse = self.significant(alpha)
        summary = f"on {self.labelled_rows} labelled live rows served by v{self.champion_version} ({self.closeness()})"
        if worse:
            return False, f"loses on live traffic: {'; '.join(worse)} {summary}"
        if not better:
            tests = {"accuracy": "McNemar", "MAE": "paired t"}
            found = ", ".join(f"{name} {ours} vs {theirs} ({tests.get(name, 'DeLong')} p={p})"
                              for name, ours, theirs, p, _ in self._criteria())
            return False, f"no significant live win at p<{alpha:g}: {found} {summary}"
        return True, f"wins on live traffic: {'; '.join(better)} {summary}"


#: The field of each paired test's p-value (the figures are ``challenger_<metric>`` and ``champion_<metric>``).
_P_VALUES = {"accuracy": "mcnemar_p", "roc_auc": "delong_p", "mae": "paired_t_p"}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def served_rows(window: pd.DataFrame, cfg: DriftloopConfig, champion_version: str) -> pd.Series | str:
    """Boolean mask of the window rows the champion served, or why there are none to compare."""
    score = cfg.model.score
    if score not in window.columns:
        return "the window carries no served scores (not read from the store)"
    has_score = window[score].notna().reset_index(drop=True)
    versions = window["model_version"].reset_index(drop=True) if "model_version" in window.columns else None
    if versions is None or versions.isna().all():
        mask = has_score
    else:
        mask = has_score & (versions.astype(object) == str(champion_version))
    if not mask.any():
        return f"no row of the window was served by champion v{champion_version}"
    return mask


def holdout_rows(recent: pd.DataFrame, cfg: DriftloopConfig) -> np.ndarray:
    """Positions in ``recent`` of the gate's held-out rows: the same seeded split of the same
    labels picks the same rows as :func:`trainer.data.split` did in the retrain."""
    m, t = cfg.model, cfg.training
    indexed = recent[[m.target]].assign(_row=np.arange(len(recent)))
    _, held = split(indexed, t.holdout_fraction, m.target, t.seed, what="recent window", part="holdout",
                    task=m.task)
    return np.sort(held["_row"].to_numpy())


def served_output(window: pd.DataFrame, cfg: DriftloopConfig) -> np.ndarray | str:
    """What the champion served, shaped like ``predict_proba``'s output (NaN where nothing was
    served): P(1) (binary), the class probabilities ``__proba_<i>`` (multiclass, rows x classes),
    the predicted value (regression); or why the window does not say."""
    m = cfg.model
    return m.kind.window_output(window, m.score, m.n_classes)


def predicted_labels(output: np.ndarray, task: str, threshold: float) -> np.ndarray:
    """The label a classifier's output predicts: P(1) above ``threshold``, or the likeliest class."""
    return task_of(task).served(output, threshold)[0]


def _output_frames(task: str, served: np.ndarray, ours: np.ndarray, column: str,
                   threshold: float) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The two sides of the output drift test: a numeric score or value, or the predicted class."""
    kind = task_of(task)
    (theirs, column_kind), (mine, _) = kind.drift_output(served, threshold), kind.drift_output(ours, threshold)
    return pd.DataFrame({column: theirs}), pd.DataFrame({column: mine}), column_kind


def compare_live(model: Any, features: pd.DataFrame, window: pd.DataFrame, cfg: DriftloopConfig,
                 champion_version: str, *, paired: np.ndarray | None = None,
                 clock: Callable[[], float] = time.time) -> tuple[LiveComparison, Any]:
    """The comparison and Evidently's snapshot of it (None when unavailable). ``window``: rows as
    the store returns them (served output, model_version, label where known); ``features``: the
    same rows in the same order, ready for the model (the retrain's checked frame, or ``window``).
    ``paired``: positions of the rows for the paired tests (default: every labelled served row)."""
    from monitor.drift import runner

    m = cfg.model
    out = LiveComparison(champion_version=str(champion_version), task=m.task)
    mask = served_rows(window, cfg, champion_version)
    output = served_output(window, cfg) if not isinstance(mask, str) else mask
    if isinstance(mask, str) or isinstance(output, str):
        out.unavailable = str(output)
        return out, None
    served = mask.to_numpy()
    ours = np.full(output.shape, np.nan)
    ours[served] = model.predict_proba(features[served])
    out.rows = int(served.sum())
    setattr(out, m.kind.closeness_figure[0], m.kind.closeness(ours[served], output[served], m.threshold))
    column = m.kind.output_column(m.score, m.prediction)
    frame_ref, frame_cur, kind = _output_frames(m.task, output[served], ours[served], column, m.threshold)
    snapshot, verdicts = runner.run_drift(frame_ref, frame_cur, [runner.ColumnPlan(column, kind, None)], None,
                                          drift_share=0.5, threshold=None, timestamp=clock(),
                                          metadata={"driftloop.kind": "live A/B", "champion": str(champion_version)})
    verdict = verdicts.get(column)
    if verdict is not None:
        out.score_drift_method, out.score_drift, out.score_drifted = verdict.method, verdict.score, verdict.drifted

    labels = pd.to_numeric(window[m.target].reset_index(drop=True), errors="coerce").to_numpy(dtype=float,
                                                                                             na_value=np.nan)
    rows = np.arange(len(window)) if paired is None else np.asarray(paired)
    rows = rows[served[rows] & ~np.isnan(labels[rows])]
    out.labelled_rows = len(rows)
    if len(rows):
        _paired_tests(out, labels[rows], output[rows], ours[rows], m.task, m.threshold)
    return out, snapshot


def _paired_tests(out: LiveComparison, y: np.ndarray, a: np.ndarray, b: np.ndarray, task: str,
                  threshold: float) -> None:
    """Champion (``a``, what it served) against challenger (``b``) on labelled rows ``y``, into ``out``."""
    for metric, _, _, champion, challenger, p, _ in task_of(task).paired_tests(y, a, b, threshold):
        setattr(out, f"champion_{metric}", champion)
        setattr(out, f"challenger_{metric}", challenger)
        setattr(out, _P_VALUES[metric], p)


def log_live(comparison: LiveComparison, snapshot: Any) -> None:
    """Attach the comparison to the active MLflow run: ``live/comparison.json``, the Evidently
    report, ``live_*`` metrics."""
    import mlflow

    numbers = {k: float(v) for k, v in asdict(comparison).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None}
    mlflow.log_metrics({f"live_{k}": v for k, v in numbers.items() if np.isfinite(v)})
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "comparison.json").write_text(json.dumps(asdict(comparison), indent=2))
        if snapshot is not None:
            (Path(tmp) / "prediction_drift.html").write_text(snapshot.get_html_str(as_iframe=False))
        mlflow.log_artifacts(tmp, ARTIFACT_DIR)


def compare_and_log(model: Any, recent: pd.DataFrame, window: pd.DataFrame, cfg: DriftloopConfig,
                    champion_version: str) -> LiveComparison:
    """:func:`compare_live` then :func:`log_live` in the active run. A failure is the comparison's
    ``unavailable`` reason (logged and recorded), never the retrain's."""
    import logging
    try:
        comparison, snapshot = compare_live(model, recent, window, cfg, champion_version,
                                            paired=holdout_rows(recent, cfg))
    except Exception as exc:  # Evidently or a bug: the retrain still decides, without a live win
        logging.getLogger(__name__).warning("live comparison failed: %s", exc, exc_info=True)
        comparison = LiveComparison(str(champion_version), unavailable=f"failed: {exc}"[:500], task=cfg.model.task)
        snapshot = None
    try:
        log_live(comparison, snapshot)
    except Exception as exc:
        logging.getLogger(__name__).warning("could not record the live comparison on the run: %s", exc)
    return comparison
