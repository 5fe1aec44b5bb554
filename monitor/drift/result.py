"""What one drift & performance check found: :class:`CheckResult`, :class:`FeatureDrift` and
:class:`MultivariateDrift`.

Plain data, no Evidently import: the Prometheus collector, the daemon and the CLI read these
without paying for Evidently. ``to_dict()`` is JSON-safe (no NaN, no numpy scalars).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.finite import finite


def _pair(ci: tuple[float, float] | None) -> list[float | None] | None:
    return None if ci is None else [finite(ci[0]), finite(ci[1])]


@dataclass(frozen=True)
class FeatureDrift:
    """Drift of one column between the reference and the current window.

    ``method`` is Evidently's stattest name (``wasserstein``, ``jensenshannon``, ``ks``, ...);
    ``score`` is a distance (drifted when ``score >= threshold``) or a p-value (drifted when
    ``score < threshold``), as Evidently defines for that method. ``score`` is None when the
    column had no values on one side; ``skipped`` then says why.

    An embedding feature (:mod:`monitor.drift.embedding`) has ``method`` ``mmd``, ``classifier``,
    ``components`` or ``reconstruction`` (p-values for ``mmd`` and ``components``) and ``details``:
    the raw ``statistic`` (MMD², AUC, share of drifted components, error ratio), the vectors used
    per side (``reference_rows``, ``current_rows``), the ``components`` projected on, and ``seconds``.
    A descriptor (``descriptor:<name>``, :mod:`monitor.drift.descriptors`) has ``details`` too: its
    ``kind``, ``source``, the values per side and their means.
    """

    name: str
    method: str | None
    score: float | None
    threshold: float | None
    drifted: bool
    skipped: str | None = None
    details: dict[str, Any] | None = None   # embedding features and descriptors only

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "method": self.method, "score": finite(self.score),
                               "threshold": finite(self.threshold), "drifted": bool(self.drifted),
                               "skipped": self.skipped}
        if self.details is not None:
            out["details"] = {k: finite(v) if isinstance(v, float) else v for k, v in self.details.items()}
        return out


@dataclass(frozen=True)
class MultivariateDrift:
    """Drift of the tabular features *together*: NannyML's data reconstruction error
    (:mod:`monitor.drift.multivariate`). ``error`` is the window's mean reconstruction error over
    ``rows`` rows; it drifted when it lies outside ``[lower, upper]``, the reference's band for
    windows of that many rows (``reference_error`` ± ``drift.multivariate_threshold_sd`` × ``sd``;
    ``lower`` clipped at 0). ``reference_chunks`` is how many chunks of the window's size the
    reference held (their spread counts from :data:`monitor.drift.multivariate.MIN_CHUNKS` on).
    ``error`` is None when the test could not run; ``skipped`` then says why."""

    error: float | None
    lower: float | None
    upper: float | None
    drifted: bool
    skipped: str | None = None
    features: int = 0                      # tabular features encoded (those with values in the reference)
    components: int = 0                    # principal components kept (65 % of the reference's variance)
    explained: float | None = None         # share of the variance they explain
    rows: int = 0                          # window rows averaged (the drift sample: <= drift.sample_size)
    reference_rows: int = 0
    reference_error: float | None = None   # the band's centre
    sd: float | None = None                # the band's standard deviation, at the window's size
    reference_chunks: int = 0
    method: str = "pca_reconstruction"

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "error": finite(self.error), "lower": finite(self.lower),
                "upper": finite(self.upper), "drifted": bool(self.drifted), "skipped": self.skipped,
                "features": int(self.features), "components": int(self.components),
                "explained": finite(self.explained), "rows": int(self.rows),
                "reference_rows": int(self.reference_rows), "reference_error": finite(self.reference_error),
                "sd": finite(self.sd), "reference_chunks": int(self.reference_chunks)}


@dataclass
class CheckResult:
    """The outcome of :func:`monitor.drift.evaluate_window`.

    Performance figures are computed on *all* labelled rows of the window (``labelled_rows``);
    ``performance_actionable`` is False when there are fewer than ``drift.min_labels`` of them,
    in which case the figures are shown but must not fire alerts. Drift statistics are computed
    on uniform samples of at most ``drift.sample_size`` rows per side (``reference_sample_rows``,
    ``current_sample_rows``).
    """

    check_id: str
    model: str
    checked_at: float                      # epoch seconds, UTC
    window_rows: int
    labelled_rows: int
    features: list[FeatureDrift]
    drift_share: float                     # share of evaluated features that drifted, 0..1
    drift_share_threshold: float
    dataset_drift: bool                    # drift_share >= drift_share_threshold
    prediction_drift: FeatureDrift
    accuracy: float | None = None
    accuracy_ci: tuple[float, float] | None = None
    roc_auc: float | None = None
    roc_auc_ci: tuple[float, float] | None = None
    baseline_accuracy: float | None = None
    baseline_roc_auc: float | None = None
    confidence: float = 0.95
    min_labels: int = 1
    # drift.min_labels: auto: each default figure's rows behind min_labels (monitor/drift/min_labels.py,
    # set by the check job); None when a number was configured.
    min_labels_auto: dict[str, int] | None = None
    # The end of each of the champion's baseline intervals nearest a drop (an error's upper end), from
    # the held-out rows it was measured on (trainer.baseline_training.held_out_intervals; set by the
    # check job); None for a baseline logged without intervals. What the policy judges against.
    baseline_bounds: dict[str, float] | None = None
    performance_actionable: bool = False
    positive_rate: float | None = None     # share of label 1 among labelled rows
    reference_rows: int = 0
    reference_sample_rows: int = 0
    current_sample_rows: int = 0
    duration_seconds: float = 0.0
    # Share of rows with no value, per feature, over the whole window / the whole reference: a data
    # quality signal on its own (a broken upstream join shows here before it shows as drift).
    missing_ratio: dict[str, float] = field(default_factory=dict)
    reference_missing_ratio: dict[str, float] = field(default_factory=dict)
    # Categories of the window absent from the reference (the model scores them as "unknown").
    unseen_categories: dict[str, list[str]] = field(default_factory=dict)
    # At the served labels (model.threshold), on the labelled rows; None when undefined (0/0).
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    predicted_positive_rate: float | None = None   # share of the window's scored rows served label 1
    # Estimated from the scores alone on every scored row of the window (monitor.drift.estimation);
    # None when the reference cannot calibrate the scores (or drift.estimate is off).
    estimated_rows: int = 0
    estimated_accuracy: float | None = None
    estimated_accuracy_ci: tuple[float, float] | None = None
    estimated_roc_auc: float | None = None
    estimated_roc_auc_ci: tuple[float, float] | None = None
    estimated_precision: float | None = None
    estimated_recall: float | None = None
    estimated_f1: float | None = None
    # How far to trust the estimate: realised minus estimated accuracy on the same labelled rows.
    estimation_error: float | None = None
    # The estimate on the labelled rows with its band, beside what they realised
    # (monitor.drift.recalibration.LabelledEstimate.to_dict): outside the band, the estimate is off.
    estimation_check: dict[str, Any] | None = None
    # How the labelled rows compare with the unlabelled rows of their period, and how far each
    # realised figure's bar moves when they were chosen by the score (monitor.drift.selection).
    label_selection: dict[str, Any] | None = None
    # Labels that arrive by outcome: the delays per class and the rows whose labels were withheld as
    # not yet matured (monitor.drift.maturity.LabelMaturity.to_dict; set by the daemon's check).
    label_maturity: dict[str, Any] | None = None
    # ---- tasks (monitor.tasks). For multiclass, ``accuracy``/``roc_auc`` above are the multiclass
    # accuracy and the one-vs-rest macro ROC AUC, and ``estimated_accuracy``/``estimated_roc_auc``
    # their CBPE estimates; precision / recall / f1 / positive_rate stay binary-only.
    task: str = "binary"
    classes: list[str] | None = None
    macro_f1: float | None = None
    weighted_f1: float | None = None
    # per class *name*: realised precision / recall on the labelled rows (multiclass); every class here
    # (alerts.rules may name any), /metrics caps the series like segments
    class_precision: dict[str, float] = field(default_factory=dict)
    class_recall: dict[str, float] = field(default_factory=dict)
    class_rows: dict[str, int] = field(default_factory=dict)   # labelled rows per true class (by name)
    # regression: realised errors of the predicted value, with intervals (drift.confidence)
    mae: float | None = None
    mae_ci: tuple[float, float] | None = None
    rmse: float | None = None
    rmse_ci: tuple[float, float] | None = None
    mape: float | None = None
    r2: float | None = None
    r2_ci: tuple[float, float] | None = None
    bias: float | None = None              # the mean signed residual (prediction - target)
    residual_shift: float | None = None    # |bias - the reference's| in the reference's residual SDs
    baseline_mae: float | None = None      # the champion's MAE on its reference (the bar of alerts.mae_rise)
    # label-free estimates for the new tasks (monitor.drift.estimation): multiclass CBPE's macro F1;
    # regression's direct loss estimation (a model of the champion's loss fitted on its reference)
    estimated_macro_f1: float | None = None
    estimated_mae: float | None = None
    estimated_mae_ci: tuple[float, float] | None = None
    estimated_rmse: float | None = None
    estimated_rmse_ci: tuple[float, float] | None = None
    # drift of outputs and labels beside the features: multiclass predicted-class distribution
    # (``prediction_drift`` above stays the score column: the served class's probability for
    # multiclass, the predicted value for regression), per-class probabilities, and the label
    # distribution once labels arrive (prior shift)
    output_drift: list[FeatureDrift] = field(default_factory=list)
    label_drift: FeatureDrift | None = None
    segments: list[Any] = field(default_factory=list)  # monitor.drift.segments.SegmentPerformance, model.segments
    # The bars of alerts.rules beyond accuracy / ROC AUC: the champion's precision, recall, f1 and
    # served positive_rate on its reference sample at model.threshold.
    baselines: dict[str, float] = field(default_factory=dict)
    # The tabular features together (drift.multivariate); None when off or the model has fewer than two.
    # Counted in dataset_drift only with drift.multivariate_dataset_drift.
    multivariate: MultivariateDrift | None = None
    # The rows behind each drifted embedding feature (monitor.drift.drifted_rows.DriftedRows): the
    # most atypical window rows, with their ids and input_uri, and the clusters they form.
    drifted_rows: list[Any] = field(default_factory=list)
    # The window against the model's constraints file (monitor.drift.violations.ConstraintCheck: the
    # violations per column and kind, or why the file could not be used); None without a file.
    constraints: Any = None
    # drift.descriptors (monitor.drift.descriptors.DescriptorReport): per kind its source, the rows read
    # and unread on each side, the vocabulary; the descriptors themselves are in ``features``. None when off.
    descriptors: Any = None
    snapshot: Any = field(default=None, repr=False, compare=False)  # evidently Snapshot, for saving

    @property
    def drifted_features(self) -> list[str]:
        return [f.name for f in self.features if f.drifted]

    def feature(self, name: str) -> FeatureDrift:
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "model": self.model,
            "checked_at": self.checked_at,
            "window_rows": int(self.window_rows),
            "labelled_rows": int(self.labelled_rows),
            "features": [f.to_dict() for f in self.features],
            "drifted_features": self.drifted_features,
            "drift_share": finite(self.drift_share),
            "drift_share_threshold": finite(self.drift_share_threshold),
            "dataset_drift": bool(self.dataset_drift),
            "prediction_drift": self.prediction_drift.to_dict(),
            "accuracy": finite(self.accuracy),
            "accuracy_ci": _pair(self.accuracy_ci),
            "roc_auc": finite(self.roc_auc),
            "roc_auc_ci": _pair(self.roc_auc_ci),
            "baseline_accuracy": finite(self.baseline_accuracy),
            "baseline_roc_auc": finite(self.baseline_roc_auc),
            "confidence": finite(self.confidence),
            "min_labels": int(self.min_labels),
            "min_labels_auto": None if self.min_labels_auto is None else dict(self.min_labels_auto),
            "baseline_bounds": None if self.baseline_bounds is None else {k: finite(v) for k, v in
                                                                           self.baseline_bounds.items()},
            "performance_actionable": bool(self.performance_actionable),
            "positive_rate": finite(self.positive_rate),
            "reference_rows": int(self.reference_rows),
            "reference_sample_rows": int(self.reference_sample_rows),
            "current_sample_rows": int(self.current_sample_rows),
            "duration_seconds": finite(self.duration_seconds),
            "missing": [{"name": name, "ratio": finite(ratio),
                         "reference_ratio": finite(self.reference_missing_ratio.get(name))}
                        for name, ratio in self.missing_ratio.items()],
            "unseen_categories": {name: list(values) for name, values in self.unseen_categories.items()},
            "precision": finite(self.precision),
            "recall": finite(self.recall),
            "f1": finite(self.f1),
            "predicted_positive_rate": finite(self.predicted_positive_rate),
            "estimated_rows": int(self.estimated_rows),
            "estimated_accuracy": finite(self.estimated_accuracy),
            "estimated_accuracy_ci": _pair(self.estimated_accuracy_ci),
            "estimated_roc_auc": finite(self.estimated_roc_auc),
            "estimated_roc_auc_ci": _pair(self.estimated_roc_auc_ci),
            "estimated_precision": finite(self.estimated_precision),
            "estimated_recall": finite(self.estimated_recall),
            "estimated_f1": finite(self.estimated_f1),
            "estimation_error": finite(self.estimation_error),
            "estimation_check": self.estimation_check,
            "label_selection": self.label_selection,
            "label_maturity": self.label_maturity,
            "task": self.task,
            "classes": list(self.classes) if self.classes is not None else None,
            "macro_f1": finite(self.macro_f1),
            "weighted_f1": finite(self.weighted_f1),
            "class_precision": {k: finite(v) for k, v in self.class_precision.items()},
            "class_recall": {k: finite(v) for k, v in self.class_recall.items()},
            "class_rows": {k: int(v) for k, v in self.class_rows.items()},
            "mae": finite(self.mae),
            "mae_ci": _pair(self.mae_ci),
            "rmse": finite(self.rmse),
            "rmse_ci": _pair(self.rmse_ci),
            "mape": finite(self.mape),
            "r2": finite(self.r2),
            "r2_ci": _pair(self.r2_ci),
            "bias": finite(self.bias),
            "residual_shift": finite(self.residual_shift),
            "baseline_mae": finite(self.baseline_mae),
            "estimated_macro_f1": finite(self.estimated_macro_f1),
            "estimated_mae": finite(self.estimated_mae),
            "estimated_mae_ci": _pair(self.estimated_mae_ci),
            "estimated_rmse": finite(self.estimated_rmse),
            "estimated_rmse_ci": _pair(self.estimated_rmse_ci),
            "output_drift": [f.to_dict() for f in self.output_drift],
            "label_drift": self.label_drift.to_dict() if self.label_drift is not None else None,
            "segments": [s.to_dict() for s in self.segments],
            "baselines": {k: finite(v) for k, v in self.baselines.items()},
            "multivariate": self.multivariate.to_dict() if self.multivariate is not None else None,
            "drifted_rows": [d.to_dict() for d in self.drifted_rows],
            "constraints": self.constraints.to_dict() if self.constraints is not None else None,
            "descriptors": self.descriptors.to_dict() if self.descriptors is not None else None,
        }
