"""Prometheus collector for the figures of the latest check (``driftloop_model_*``).

Fresh families on every scrape, built from whatever ``source`` returns at that moment: a
callable returning the latest :class:`~monitor.drift.CheckResult` (or None), or an object with
a ``.latest`` attribute. A figure that does not exist (no labels, so no accuracy; a feature that
could not be tested) is an absent series, never NaN, so a model shows the figures of its task
(:mod:`monitor.tasks`): accuracy and ROC AUC for classifiers, macro / weighted F1 and per-class
precision and recall for multiclass, MAE, RMSE, MAPE and R² for regression. A failing source costs
the scrape these families and a log line, not the scrape. Incident and retrain metrics are the daemon's.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.drift.descriptor_values import Unread
from monitor.drift.result import CheckResult

log = logging.getLogger(__name__)

_SCALARS = (  # (metric name, help, attribute or function of the result)
    ("driftloop_model_accuracy", "Accuracy of the served labels on the window's labelled rows.", "accuracy"),
    ("driftloop_model_accuracy_lower", "Lower bound of the accuracy's Wilson interval (drift.confidence).",
     lambda r: r.accuracy_ci and r.accuracy_ci[0]),
    ("driftloop_model_accuracy_upper", "Upper bound of the accuracy's Wilson interval (drift.confidence).",
     lambda r: r.accuracy_ci and r.accuracy_ci[1]),
    ("driftloop_model_roc_auc", "ROC AUC of the scores on the window's labelled rows.", "roc_auc"),
    ("driftloop_model_roc_auc_lower", "Lower bound of the ROC AUC's DeLong interval (drift.confidence).",
     lambda r: r.roc_auc_ci and r.roc_auc_ci[0]),
    ("driftloop_model_roc_auc_upper", "Upper bound of the ROC AUC's DeLong interval (drift.confidence).",
     lambda r: r.roc_auc_ci and r.roc_auc_ci[1]),
    ("driftloop_model_precision", "Precision of the served labels on the window's labelled rows.", "precision"),
    ("driftloop_model_recall", "Recall of the served labels on the window's labelled rows.", "recall"),
    ("driftloop_model_f1", "F1 of the served labels on the window's labelled rows.", "f1"),
    ("driftloop_model_predicted_positive_ratio", "Share of the window's scored rows served label 1 (model.threshold).",
     "predicted_positive_rate"),
    ("driftloop_model_estimated_accuracy", "Accuracy estimated from the scores alone (CBPE) on all the window's rows.",
     "estimated_accuracy"),
    ("driftloop_model_estimated_accuracy_lower", "Lower end of the estimated accuracy's band (drift.confidence).",
     lambda r: r.estimated_accuracy_ci and r.estimated_accuracy_ci[0]),
    ("driftloop_model_estimated_accuracy_upper", "Upper end of the estimated accuracy's band (drift.confidence).",
     lambda r: r.estimated_accuracy_ci and r.estimated_accuracy_ci[1]),
    ("driftloop_model_estimated_roc_auc", "ROC AUC estimated from the scores alone (CBPE) on all the window's rows.",
     "estimated_roc_auc"),
    ("driftloop_model_estimated_roc_auc_lower", "Lower end of the estimated ROC AUC's band (drift.confidence).",
     lambda r: r.estimated_roc_auc_ci and r.estimated_roc_auc_ci[0]),
    ("driftloop_model_estimated_roc_auc_upper", "Upper end of the estimated ROC AUC's band (drift.confidence).",
     lambda r: r.estimated_roc_auc_ci and r.estimated_roc_auc_ci[1]),
    ("driftloop_model_estimated_precision", "Precision estimated from the scores alone (CBPE).", "estimated_precision"),
    ("driftloop_model_estimated_recall", "Recall estimated from the scores alone (CBPE).", "estimated_recall"),
    ("driftloop_model_estimated_f1", "F1 estimated from the scores alone (CBPE).", "estimated_f1"),
    ("driftloop_model_estimation_error", "Realised minus estimated accuracy (regression: MAE) on the same labelled "
     "rows: how far to trust the estimate for this model.", "estimation_error"),
    ("driftloop_model_labels_chosen", "1 when the last check's labelled rows were chosen by the score (they differ "
     "from the unlabelled rows of their period) and the bars of their realised figures moved; 0 otherwise.",
     lambda r: 1.0 if (r.label_selection or {}).get("chosen") else 0.0),
    ("driftloop_model_labels_immature", "Labelled rows of the last check whose labels wait as not yet matured: labels "
     "arrive by outcome and these rows were made within the slowest class's delay of the newest label; 0 otherwise.",
     lambda r: float((r.label_maturity or {}).get("immature_rows") or 0)),
    ("driftloop_model_macro_f1", "Multiclass: F1 averaged over the classes (macro), served classes on the labelled "
     "rows.", "macro_f1"),
    ("driftloop_model_weighted_f1", "Multiclass: F1 averaged over the classes weighted by their labelled rows.",
     "weighted_f1"),
    ("driftloop_model_mae", "Regression: mean absolute error of the predicted value on the labelled rows.", "mae"),
    ("driftloop_model_mae_lower", "Lower bound of the MAE's t interval (drift.confidence).",
     lambda r: r.mae_ci and r.mae_ci[0]),
    ("driftloop_model_mae_upper", "Upper bound of the MAE's t interval (drift.confidence).",
     lambda r: r.mae_ci and r.mae_ci[1]),
    ("driftloop_model_rmse", "Regression: root mean squared error of the predicted value on the labelled rows.",
     "rmse"),
    ("driftloop_model_rmse_lower", "Lower bound of the RMSE's interval (delta method, drift.confidence).",
     lambda r: r.rmse_ci and r.rmse_ci[0]),
    ("driftloop_model_rmse_upper", "Upper bound of the RMSE's interval (delta method, drift.confidence).",
     lambda r: r.rmse_ci and r.rmse_ci[1]),
    ("driftloop_model_mape",
     "Regression: mean absolute percentage error as a fraction (absent when a target is 0 or the targets cross 0).",
     "mape"),
    ("driftloop_model_bias", "Regression: mean signed residual (prediction - target) on the labelled rows.", "bias"),
    ("driftloop_model_residual_shift", "Regression: shift of the mean signed residual from the champion's on its "
     "reference, either way, in the reference's residual standard deviations (alerts.residual_shift).",
     "residual_shift"),
    ("driftloop_model_r2", "Regression: coefficient of determination R² on the labelled rows.", "r2"),
    ("driftloop_model_r2_lower", "Lower bound of R²'s interval (delta method, drift.confidence).",
     lambda r: r.r2_ci and r.r2_ci[0]),
    ("driftloop_model_r2_upper", "Upper bound of R²'s interval (delta method, drift.confidence).",
     lambda r: r.r2_ci and r.r2_ci[1]),
    ("driftloop_model_estimated_macro_f1", "Multiclass: macro F1 estimated from the probabilities alone (CBPE).",
     "estimated_macro_f1"),
    ("driftloop_model_estimated_mae", "Regression: MAE estimated without labels (direct loss estimation).",
     "estimated_mae"),
    ("driftloop_model_estimated_mae_lower", "Lower end of the estimated MAE's band (drift.confidence).",
     lambda r: r.estimated_mae_ci and r.estimated_mae_ci[0]),
    ("driftloop_model_estimated_mae_upper", "Upper end of the estimated MAE's band (drift.confidence).",
     lambda r: r.estimated_mae_ci and r.estimated_mae_ci[1]),
    ("driftloop_model_estimated_rmse", "Regression: RMSE estimated without labels (direct loss estimation).",
     "estimated_rmse"),
    ("driftloop_model_estimated_rmse_lower", "Lower end of the estimated RMSE's band (drift.confidence).",
     lambda r: r.estimated_rmse_ci and r.estimated_rmse_ci[0]),
    ("driftloop_model_estimated_rmse_upper", "Upper end of the estimated RMSE's band (drift.confidence).",
     lambda r: r.estimated_rmse_ci and r.estimated_rmse_ci[1]),
    ("driftloop_model_baseline_accuracy", "Accuracy of the champion on its reference data.", "baseline_accuracy"),
    ("driftloop_model_baseline_roc_auc", "ROC AUC of the champion on its reference data.", "baseline_roc_auc"),
    ("driftloop_model_baseline_mae", "Regression: MAE of the champion on its reference data (the bar of "
     "alerts.mae_rise).", "baseline_mae"),
    ("driftloop_model_window_rows", "Predictions in the last checked window.", "window_rows"),
    ("driftloop_model_labelled_rows", "Labelled predictions in the last checked window.", "labelled_rows"),
    ("driftloop_model_drift_share_ratio", "Share of tested features that drifted in the last check.", "drift_share"),
    ("driftloop_model_dataset_drifted", "1 when the drift share reached drift.drift_share in the last check.",
     lambda r: int(r.dataset_drift)),
    ("driftloop_model_performance_actionable",
     "1 when the last check had at least drift.min_labels labelled rows (performance alerts may fire).",
     lambda r: int(r.performance_actionable)),
    ("driftloop_model_min_labels", "Labelled rows the last check needed before judging performance "
     "(drift.min_labels; auto: resolved from the champion's baseline).", "min_labels"),
    ("driftloop_model_prediction_drift_score", "Drift score of the model's score column (see method label).",
     lambda r: r.prediction_drift.score),
    ("driftloop_model_prediction_drifted", "1 when the score column drifted in the last check.",
     lambda r: None if r.prediction_drift.score is None else int(r.prediction_drift.drifted)),
    ("driftloop_model_label_drift_score", "Drift score of the labelled rows' target, reference vs window (prior "
     "shift; multiclass and regression; see method label).", lambda r: r.label_drift and r.label_drift.score),
    ("driftloop_model_label_drifted", "1 when the labelled rows' target distribution drifted in the last check.",
     lambda r: None if r.label_drift is None or r.label_drift.score is None else int(r.label_drift.drifted)),
    ("driftloop_model_multivariate_drift_error", "Mean PCA reconstruction error of the window's tabular features "
     "together (NannyML's data reconstruction drift; drift.multivariate).", lambda r: _multivariate(r, "error")),
    ("driftloop_model_multivariate_drift_threshold_upper", "Upper end of the reference's band for the multivariate "
     "error at the window's size (drift.multivariate_threshold_sd).", lambda r: _multivariate(r, "upper")),
    ("driftloop_model_multivariate_drift_threshold_lower", "Lower end of the reference's band for the multivariate "
     "error at the window's size (at least 0).", lambda r: _multivariate(r, "lower")),
    ("driftloop_model_multivariate_drifted", "1 when the multivariate error left the reference's band in the last "
     "check.", lambda r: None if _multivariate(r, "error") is None else int(r.multivariate.drifted)),
    ("driftloop_model_last_check_timestamp_seconds", "When the last check ran (Unix time).", "checked_at"),
    ("driftloop_model_check_duration_seconds", "How long the last check's evaluation took.", "duration_seconds"),
)


def _multivariate(result: CheckResult, name: str) -> float | None:
    """A figure of the multivariate test; None when it is off or was skipped."""
    block = getattr(result, "multivariate", None)
    return None if block is None or block.error is None else getattr(block, name)


def _value(result: CheckResult, get: str | Callable[[CheckResult], Any]) -> float | None:
    raw = getattr(result, get) if isinstance(get, str) else get(result)
    if raw is None or isinstance(raw, tuple):
        return None
    value = float(raw)
    return value if math.isfinite(value) else None


_WITH_METHOD = {"driftloop_model_prediction_drift_score": lambda r: r.prediction_drift.method,
                "driftloop_model_label_drift_score": lambda r: r.label_drift.method}


class ModelMetricsCollector(Collector):
    """``class_top_k``: per-class series for at most this many classes, those with the most labelled
    rows (``model.segment_top_k``), so a 100-class model cannot explode the series."""

    def __init__(self, model_name: str, source: Callable[[], Any] | Any, *, class_top_k: int = 10):
        self._model = model_name
        self._source = source
        self._class_top_k = class_top_k

    def _latest(self) -> CheckResult | None:
        latest = self._source() if callable(self._source) else getattr(self._source, "latest", None)
        # The daemon may hand over its check outcome, which carries the result.
        if latest is not None and not isinstance(latest, CheckResult):
            latest = getattr(latest, "result", None)
        return latest if isinstance(latest, CheckResult) else None

    def collect(self) -> Iterator[Metric]:
        try:
            result = self._latest()
        except Exception as exc:  # never fail the whole scrape for this part
            log.warning("model metrics unavailable: %s", exc)
            return
        if result is None:
            return
        yield from self._families(result)

    def _families(self, r: CheckResult) -> Iterable[Metric]:
        model = self._model
        for name, help_, get in _SCALARS:
            value = _value(r, get)
            if value is None:
                continue
            if name in _WITH_METHOD:
                fam = GaugeMetricFamily(name, help_, labels=["model", "method"])
                fam.add_metric([model, _WITH_METHOD[name](r) or ""], value)
            else:
                fam = GaugeMetricFamily(name, help_, labels=["model"])
                fam.add_metric([model], value)
            yield fam
        if r.missing_ratio:
            current = GaugeMetricFamily("driftloop_model_feature_missing_ratio",
                                        "Share of the last checked window's rows with no value for the feature.",
                                        labels=["model", "feature"])
            reference = GaugeMetricFamily("driftloop_model_feature_baseline_missing_ratio",
                                          "Share of the champion's reference rows with no value for the feature.",
                                          labels=["model", "feature"])
            for feature, ratio in r.missing_ratio.items():
                current.add_metric([model, feature], ratio)
                if feature in r.reference_missing_ratio:
                    reference.add_metric([model, feature], r.reference_missing_ratio[feature])
            yield current
            yield reference
        yield from self._selection(r)
        yield from self._classes(r)
        yield from self._outputs(r)
        yield from self._segments(r)
        yield from self._constraints(r)
        yield from self._descriptors(r)
        tested = [f for f in r.features if f.score is not None and math.isfinite(f.score)]
        if tested:
            score = GaugeMetricFamily("driftloop_model_feature_drift_score",
                                      "Drift score per feature in the last check: a distance (drifted when >= "
                                      "threshold) or a p-value (drifted when < threshold), per method.",
                                      labels=["model", "feature", "method"])
            drifted = GaugeMetricFamily("driftloop_model_feature_drifted",
                                        "1 when the feature drifted in the last check.", labels=["model", "feature"])
            threshold = GaugeMetricFamily("driftloop_model_feature_drift_threshold",
                                          "The threshold the feature's drift score is compared with.",
                                          labels=["model", "feature", "method"])
            for f in tested:
                score.add_metric([model, f.name, f.method or ""], float(f.score or 0.0))  # not None: tested
                drifted.add_metric([model, f.name], 1.0 if f.drifted else 0.0)
                if f.threshold is not None:
                    threshold.add_metric([model, f.name, f.method or ""], f.threshold)
            yield score
            yield drifted
            yield threshold

    def _selection(self, r: CheckResult) -> Iterable[Metric]:
        """How far each realised figure's bar moved for labels chosen by the score (monitor.drift.selection);
        served only while they are."""
        shift = (r.label_selection or {}).get("shift") or {}
        finite_shift = {k: float(v) for k, v in shift.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if not finite_shift:
            return
        fam = GaugeMetricFamily("driftloop_model_label_selection_shift",
                                "Labels chosen by the score: how far the bar of the realised figure moved for the "
                                "labelled rows (estimated on them minus estimated on every row of their period).",
                                labels=["model", "metric"])
        for metric, value in finite_shift.items():
            fam.add_metric([self._model, metric], value)
        yield fam

    def _classes(self, r: CheckResult) -> Iterable[Metric]:
        """Multiclass precision and recall per class, for the ``class_top_k`` classes with the most
        labelled rows (ties: class order); the others are left out here (the check's JSON has all)."""
        if not (r.class_recall or r.class_precision):
            return
        order = list(r.classes or []) or sorted(set(r.class_recall) | set(r.class_precision))
        ranked = sorted(order, key=lambda c: (-r.class_rows.get(c, 0), order.index(c)))[: self._class_top_k]
        for name, help_, values in (
            ("driftloop_model_class_recall", "Multiclass: recall of one class (its labelled rows served that class), "
             "for the model.segment_top_k classes with the most labelled rows; the others are left out.",
             r.class_recall),
            ("driftloop_model_class_precision", "Multiclass: precision of one class (its served rows that were that "
             "class), for the model.segment_top_k classes with the most labelled rows; the others are left out.",
             r.class_precision),
        ):
            fam = GaugeMetricFamily(name, help_, labels=["model", "class"])
            for c in ranked:
                value = values.get(c)
                if value is not None and math.isfinite(value):
                    fam.add_metric([self._model, c], float(value))
            yield fam

    def _outputs(self, r: CheckResult) -> Iterable[Metric]:
        """Output drift (multiclass: the served class and at most 20 class probabilities; bounded)."""
        tested = [f for f in r.output_drift if f.score is not None and math.isfinite(f.score)]
        if not tested:
            return
        score = GaugeMetricFamily("driftloop_model_output_drift_score",
                                  "Drift score of a model output in the last check (multiclass: the served class "
                                  "'prediction' and each class probability 'proba_<class>'), per method.",
                                  labels=["model", "output", "method"])
        drifted = GaugeMetricFamily("driftloop_model_output_drifted", "1 when the model output drifted in the last "
                                    "check.", labels=["model", "output"])
        for f in tested:
            score.add_metric([self._model, f.name, f.method or ""], float(f.score or 0.0))  # not None: tested
            drifted.add_metric([self._model, f.name], 1.0 if f.drifted else 0.0)
        yield score
        yield drifted

    def _constraints(self, r: CheckResult) -> Iterable[Metric]:
        """The window against the model's constraints file (monitor.drift.violations), when it has one:
        the file's validity, the columns violating each kind evaluated (0 when none) and each violation's
        share of rows (at most one series per column and kind: bounded by the model's columns)."""
        block = getattr(r, "constraints", None)
        if block is None:
            return
        valid = GaugeMetricFamily("driftloop_model_constraints_valid", "1 when the model's constraints file was "
                                  "read and checked in the last check, 0 when it could not be used (the check "
                                  "says why).", labels=["model"])
        valid.add_metric([self._model], 1.0 if block.valid else 0.0)
        yield valid
        if not block.valid:
            return
        counts = GaugeMetricFamily("driftloop_model_constraint_violations", "Columns violating the model's "
                                   "constraints in the last check, per check kind.", labels=["model", "check"])
        for kind in block.kinds:
            counts.add_metric([self._model, kind.value], float(block.count(kind)))
        yield counts
        ratio = GaugeMetricFamily("driftloop_model_constraint_violation_ratio", "Share of the rows behind a "
                                  "constraint violation in the last check (of the column's values; of the window's "
                                  "rows for completeness, a missing or an extra column), per column and check kind.",
                                  labels=["model", "column", "check"])
        for v in block.violations:
            ratio.add_metric([self._model, v.column, v.check.value], float(v.share))
        yield ratio

    def _descriptors(self, r: CheckResult) -> Iterable[Metric]:
        """``drift.descriptors``, when the model has them on: per kind and side the rows sampled for
        descriptors and those whose input gave no value, one series per reason (0 when none), and
        whether the kind was skipped. Bounded: two kinds, two sides, five reasons. Read from the
        block's JSON form (``descriptors`` of the check's JSON), which a plain dict may be already."""
        block = getattr(r, "descriptors", None)
        if block is None:
            return
        report = block if isinstance(block, Mapping) else block.to_dict()
        rows = GaugeMetricFamily("driftloop_model_descriptor_rows", "Rows sampled for descriptors in the last check "
                                 "(at most drift.descriptors.sample_rows of the drift sample), per kind and side "
                                 "(reference, current); 0 for a skipped kind.", labels=["model", "kind", "side"])
        unread = GaugeMetricFamily("driftloop_model_descriptor_unread_rows", "Rows sampled for descriptors whose input "
                                   "gave no value in the last check, per kind, side and reason (0 when none).",
                                   labels=["model", "kind", "side", "reason"])
        skipped = GaugeMetricFamily("driftloop_model_descriptor_skipped", "1 when a kind of descriptors was skipped "
                                    "for the champion (its reason is in the check), 0 when it was measured.",
                                    labels=["model", "kind"])
        for kind in report.get("kinds") or ():
            name = str(kind.get("kind"))
            skipped.add_metric([self._model, name], 0.0 if kind.get("skipped") is None else 1.0)
            for side in ("reference", "current"):
                count = kind.get(side) or {}
                rows.add_metric([self._model, name, side], float(count.get("rows") or 0))
                reasons = count.get("unread") or {}
                for reason in Unread:
                    unread.add_metric([self._model, name, side, reason.value], float(reasons.get(reason.value, 0)))
        yield rows
        yield unread
        yield skipped

    def _segments(self, r: CheckResult) -> Iterable[Metric]:
        """Per segment value (``model.segments``; at most segment_top_k + 1 values per categorical
        segment, 24 hours, 7 days): bounded label sets."""
        segments = list(getattr(r, "segments", None) or [])
        if not segments:
            return
        for name, help_, get in (
            ("driftloop_model_segment_rows", "Predictions in the last window, per segment value.", "rows"),
            ("driftloop_model_segment_labelled_rows", "Labelled predictions in the last window, per segment value.",
             "labelled_rows"),
            ("driftloop_model_segment_accuracy", "Accuracy of the served labels per segment value.", "accuracy"),
            ("driftloop_model_segment_recall", "Recall of the served labels per segment value.", "recall"),
            ("driftloop_model_segment_roc_auc", "ROC AUC of the scores per segment value.", "roc_auc"),
            ("driftloop_model_segment_mae", "Regression: MAE of the predicted value per segment value.", "mae"),
            ("driftloop_model_segment_estimated_accuracy", "Accuracy estimated from the scores alone (CBPE) per "
             "segment value, on all its rows.", "estimated_accuracy"),
            ("driftloop_model_segment_drift_share_ratio", "Share of features drifted within a segment value vs the "
             "reference (binned Jensen-Shannon beyond its noise floor, on the drift sample).", "drift_share"),
        ):
            fam = GaugeMetricFamily(name, help_, labels=["model", "segment"])
            for s in segments:
                value = getattr(s, get)
                if value is not None and math.isfinite(value):
                    fam.add_metric([self._model, s.label], float(value))
            yield fam
