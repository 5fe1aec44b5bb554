"""The reference side of a check, prepared once per champion: its sample, the facts the drift
method choice needs from the *full* reference, its label-free estimator, segments, the bars of
``alerts.rules``, the embedding projections, the multivariate test's components and the
descriptors' values (:mod:`monitor.drift.descriptors`).

It sits above :mod:`monitor.drift.frames` (frames and the sides) and
:mod:`monitor.drift.segment_reference` (which reads served labels from frames), so neither imports
the other back.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from monitor.config import DriftConfig, ModelConfig
from monitor.drift.bounded import float32_bounded
from monitor.drift.descriptors import describe_reference
from monitor.drift.embedding import prepare_embeddings
from monitor.drift.estimators import fit_estimator
from monitor.drift.frames import (Labelled, PreparedReference, Scored, _numeric, class_names, missing_ratio,
                                  output_frame, prepare_side, scored_rows)
from monitor.drift.methods import clean, distinct_values
from monitor.drift.multivariate import prepare_multivariate
from monitor.drift.segment_reference import reference_segments


def prepare_reference(reference: pd.DataFrame, model_cfg: ModelConfig, drift_cfg: DriftConfig,
                      rng_seed: int = 0, artifacts: Path | None = None) -> PreparedReference:
    """Sample and describe the reference once; pass the result to ``evaluate_window`` in place of
    the DataFrame to skip this work on every check. ``artifacts``: the champion's
    ``training.entrypoint`` artifacts folder, where ``drift.descriptors`` finds its vocabulary."""
    reference = float32_bounded(reference)  # as the window: no stored value blinds a check (monitor.drift.bounded)
    side = prepare_side(reference, model_cfg, drift_cfg, np.random.default_rng([rng_seed, 0]), "reference")
    columns = list(side.sample.columns)
    full_counts: dict[str, int] = {}
    distinct: dict[str, frozenset | None] = {}
    outputs = output_frame(reference, model_cfg, "reference")  # on every reference row, as the features
    for c in columns:
        values = outputs[c] if outputs is not None and c in outputs.columns else reference[c]
        if c in model_cfg.numeric_features or c == model_cfg.score:
            values = _numeric(reference, c, "reference")
        full_counts[c] = int(len(clean(values)))
        distinct[c] = distinct_values(values)
    labelled = side.labelled
    # Fitting costs up to seconds per champion (regression's loss models): only when estimates are wanted.
    calibrator = fit_estimator(model_cfg, reference, labelled) if drift_cfg.estimate else None
    prepared = PreparedReference(side, full_counts, distinct, missing_ratio(reference, model_cfg.feature_names),
                                 calibrator, reference_segments(reference, model_cfg),
                                 _reference_metrics(model_cfg, labelled,
                                                    scored_rows(reference, model_cfg, "reference")),
                                 prepare_embeddings(reference, model_cfg, drift_cfg, rng_seed),
                                 multivariate=prepare_multivariate(side.sample, model_cfg, drift_cfg, rng_seed))
    # drift.descriptors: their columns join the sample (after the multivariate fit, which they stay out of).
    return describe_reference(prepared, reference, model_cfg, drift_cfg, rng_seed, artifacts)


def _reference_metrics(model_cfg: ModelConfig, labelled: Labelled | None, scored: Scored | None) -> dict[str, float]:
    """The champion's figures on its reference sample that ``alerts.rules`` compare with, by rule key:
    binary precision, recall, f1 and served positive_rate; multiclass macro_f1, weighted_f1 and
    ``precision[<class>]`` / ``recall[<class>]``; regression mae, rmse, mape and r2, and the residuals'
    mean (``bias``) and spread (``residual_sd``) that a window's ``residual_shift`` is measured in."""
    out: dict[str, float] = {}
    if labelled is not None and len(labelled):
        perf = model_cfg.kind.performance(labelled.y, labelled.pred, labelled.score, labelled.proba,
                                          model_cfg.n_classes)
        names = class_names(model_cfg)
        figures = {"precision": perf.precision, "recall": perf.recall, "f1": perf.f1,
                   "macro_f1": perf.macro_f1, "weighted_f1": perf.weighted_f1, "mae": perf.mae,
                   "rmse": perf.rmse, "mape": perf.mape, "r2": perf.r2,
                   # regression: the residuals' mean and spread (the bar of residual_shift is 0: itself)
                   "bias": perf.bias, "residual_sd": perf.residual_sd,
                   "residual_shift": None if perf.residual_sd is None else 0.0,
                   **{f"precision[{names[k]}]": v for k, v in (perf.class_precision or {}).items()},
                   **{f"recall[{names[k]}]": v for k, v in (perf.class_recall or {}).items()}}
        out.update({k: float(v) for k, v in figures.items() if v is not None})
    if scored is not None and len(scored.score):
        out.update(model_cfg.kind.served_figures(scored.pred))
    return out
