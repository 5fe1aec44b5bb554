"""A/B on live traffic: the challenger scores the rows the champion served, before any promotion.

The retrain window comes from the store, so each row carries what was served: its score,
predicted label and the version that scored it. On the rows the current champion served (its
``model_version``; all rows when no row names a version, as from senders that never did):

- prediction distribution: the challenger's scores against the served scores, with Evidently's
  value-drift test on the score (the drift reports' method and style; ``live/prediction_drift.html``);
- agreement: the share of rows where both predict the same label at ``model.threshold``;
- on the held-out labelled rows (the challenger never trained on them; the same seeded split
  picks the same rows as :func:`trainer.data.split` did for the gate), paired accuracy with an
  exact McNemar test and paired ROC AUC with DeLong's test (monitor/paired.py).

The challenger *wins on live traffic* when it is better on accuracy or ROC AUC at significance
``1 - training.gate_confidence`` and significantly worse on neither. ``training.promote_requires_live_win``
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
from trainer.data import split

ARTIFACT_DIR = "live"


@dataclass
class LiveComparison:
    champion_version: str
    rows: int = 0                         # served rows the challenger scored
    agreement: float | None = None        # share of rows with the same predicted label
    score_drift_method: str | None = None
    score_drift: float | None = None      # Evidently's drift score of challenger vs served scores
    score_drifted: bool | None = None
    labelled_rows: int = 0                # held-out labelled rows of the paired tests
    champion_accuracy: float | None = None
    challenger_accuracy: float | None = None
    mcnemar_p: float | None = None
    champion_roc_auc: float | None = None
    challenger_roc_auc: float | None = None
    delong_p: float | None = None
    unavailable: str | None = None        # why there is no comparison

    def significant(self, alpha: float) -> tuple[list[str], list[str]]:
        """(where the challenger is significantly better, where significantly worse) at ``alpha``."""
        better: list[str] = []
        worse: list[str] = []
        for name, ours, theirs, p in (("accuracy", self.challenger_accuracy, self.champion_accuracy, self.mcnemar_p),
                                      ("ROC AUC", self.challenger_roc_auc, self.champion_roc_auc, self.delong_p)):
            if ours is None or theirs is None or p is None or p >= alpha or ours == theirs:
                continue
            (better if ours > theirs else worse).append(f"{name} {ours:.4f} vs {theirs:.4f} (p={p:.3g})")
        return better, worse

    def verdict(self, alpha: float) -> tuple[bool, str]:
        """(wins, why) at significance ``alpha``."""
        if self.unavailable:
            return False, f"no live comparison: {self.unavailable}"
        better, worse = self.significant(alpha)
        summary = (f"on {self.labelled_rows} labelled live rows served by v{self.champion_version} "
                   f"(agreement {self.agreement:.3f})")
        if worse:
            return False, f"loses on live traffic: {'; '.join(worse)} {summary}"
        if not better:
            return False, (f"no significant live win at p<{alpha:g}: accuracy {self.challenger_accuracy} vs "
                           f"{self.champion_accuracy} (McNemar p={self.mcnemar_p}), ROC AUC {self.challenger_roc_auc} "
                           f"vs {self.champion_roc_auc} (DeLong p={self.delong_p}) {summary}")
        return True, f"wins on live traffic: {'; '.join(better)} {summary}"


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
    _, held = split(indexed, t.holdout_fraction, m.target, t.seed, what="recent window", part="holdout")
    return np.sort(held["_row"].to_numpy())


def compare_live(model: Any, features: pd.DataFrame, window: pd.DataFrame, cfg: DriftloopConfig,
                 champion_version: str, *, paired: np.ndarray | None = None,
                 clock: Callable[[], float] = time.time) -> tuple[LiveComparison, Any]:
    """The comparison and Evidently's snapshot of it (None when unavailable). ``window``: rows as
    the store returns them (served score, model_version, label where known); ``features``: the
    same rows in the same order, ready for the model (the retrain's checked frame, or ``window``).
    ``paired``: positions of the rows for the paired tests (default: every labelled served row)."""
    from monitor.drift import runner
    from monitor.paired import mcnemar, paired_delong

    out = LiveComparison(champion_version=str(champion_version))
    mask = served_rows(window, cfg, champion_version)
    if isinstance(mask, str):
        out.unavailable = mask
        return out, None
    m = cfg.model
    served = mask.to_numpy()
    served_score = window[m.score].reset_index(drop=True).astype(float).to_numpy()
    ours = np.full(len(window), np.nan)
    ours[served] = model.predict_proba(features[served])
    out.rows = int(served.sum())
    out.agreement = float(np.mean((ours[served] > m.threshold) == (served_score[served] > m.threshold)))
    frame_ref, frame_cur = pd.DataFrame({m.score: served_score[served]}), pd.DataFrame({m.score: ours[served]})
    snapshot, verdicts = runner.run_drift(frame_ref, frame_cur, [runner.ColumnPlan(m.score, "numeric", None)], None,
                                          drift_share=0.5, threshold=None, timestamp=clock(),
                                          metadata={"driftloop.kind": "live A/B", "champion": str(champion_version)})
    verdict = verdicts.get(m.score)
    if verdict is not None:
        out.score_drift_method, out.score_drift, out.score_drifted = verdict.method, verdict.score, verdict.drifted

    labels = pd.to_numeric(window[m.target].reset_index(drop=True), errors="coerce").to_numpy(dtype=float,
                                                                                             na_value=np.nan)
    rows = np.arange(len(window)) if paired is None else np.asarray(paired)
    rows = rows[served[rows] & ~np.isnan(labels[rows])]
    out.labelled_rows = len(rows)
    if len(rows):
        y, a, b = labels[rows].astype(int), served_score[rows], ours[rows]
        right_a, right_b = (a > m.threshold) == (y == 1), (b > m.threshold) == (y == 1)
        out.champion_accuracy, out.challenger_accuracy = float(right_a.mean()), float(right_b.mean())
        out.mcnemar_p = mcnemar(right_a, right_b).p_value
        auc = paired_delong(y, a, b)
        if auc is not None:
            out.champion_roc_auc, out.challenger_roc_auc, out.delong_p = auc.auc_a, auc.auc_b, auc.p_value
    return out, snapshot


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
        comparison, snapshot = LiveComparison(str(champion_version), unavailable=f"failed: {exc}"[:500]), None
    try:
        log_live(comparison, snapshot)
    except Exception as exc:
        logging.getLogger(__name__).warning("could not record the live comparison on the run: %s", exc)
    return comparison
