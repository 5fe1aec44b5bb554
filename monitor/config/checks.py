"""What the checks judge: ``drift`` and ``alerts`` (with ``alerts.rules``)."""
from __future__ import annotations

import warnings
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from monitor.config.base import _Section
from monitor.config.descriptors import DescriptorsConfig

# drift.min_labels: auto's range (monitor/drift/min_labels.py): a floor below which an interval is
# too wide to trust whatever the model, and the number that served every task before auto.
MIN_LABELS_AUTO = (200, 1000)


class DriftConfig(_Section):
    interval_seconds: float = Field(300.0, gt=0, description="how often the daemon checks (also --check-interval)")
    window_size: int = Field(5000, gt=0, description="last N predictions")
    window_seconds: float | None = Field(None, gt=0, description="time window instead of last N")
    min_labels: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="labelled rows needed before performance alerts can fire; auto: from the champion's "
        "baseline, the rows at which the standard error of each default alert figure (accuracy, ROC AUC; "
        "regression: MAE, MAPE) is at most a third of its threshold (alerts.accuracy_drop ...), between "
        f"{MIN_LABELS_AUTO[0]} and {MIN_LABELS_AUTO[1]} (docs/parts/drift.md, 'How many labels')")
    min_rows: int = Field(500, ge=1, description="rows a window needs before its dataset-drift verdict can fire")
    # Smaller samples save little (Evidently's cost is mostly per column) and their noise nears the
    # 0.1 threshold of the default distances (Wasserstein p99 ~0.13 at 1000 rows); see docs/parts/drift.md "Cost stays
    # bounded on large windows".
    sample_size: int = Field(20_000, ge=5000, description="rows per side the drift tests run on at most")
    drift_share: float = Field(0.5, gt=0, le=1, description="share of drifted features that marks dataset drift")
    stattest_threshold: float | None = Field(None, gt=0, description="per-feature threshold; Evidently's default when "
                                                                     "unset")
    missing_share_change: float = Field(0.1, ge=0, le=1, description="a feature whose share of missing values moved "
                                        "by this much or more from the reference's (and provably: a Fisher exact "
                                        "test) is drifted (method missing_share), whatever its values do; a feature "
                                        "gone missing altogether is drift, not 'untested'; 0 = off")
    output_drift_quantile: float | None = Field(0.99, gt=0.5, lt=1, description="the model's outputs (score, served "
                                                "class, class probabilities) drift past the higher of the stattest's "
                                                "threshold and this quantile of its score between resamples of the "
                                                "reference at the window's size, so a confident classifier's "
                                                "stationary windows are not flagged; null: the stattest's threshold")
    # Evidently's stattest names; None keeps Evidently's own choice (by reference size and cardinality).
    num_method: Literal["anderson", "cramer_von_mises", "ed", "empirical_mmd", "es", "hellinger", "jensenshannon",
                        "kl_div", "ks", "mannw", "psi", "t_test", "wasserstein"] | None = Field(
        None, description="one Evidently stattest for every numeric column; unset keeps Evidently's choice, made on "
        "the full data")
    cat_method: Literal["TVD", "chisquare", "fisher_exact", "g_test", "hellinger", "jensenshannon", "kl_div",
                        "psi", "z"] | None = Field(None, description="one Evidently stattest for every categorical "
                                                                     "column; unset keeps Evidently's choice")
    # History is kept by time (an incident is read weeks later) and bounded by size; a count of checks
    # was hours at a five-minute interval. See monitor/drift/history.py.
    history_days: float | None = Field(90.0, gt=0, description="checks older than this many days lose their "
                                       "report files and Evidently snapshots, unless an incident or a retrain "
                                       "cites them (kept while the incident is on record); null: no age limit")
    history_max_bytes: int | None = Field(10 * 1024 ** 3, ge=1024 ** 2, description="the model's report files "
                                          "and workspace snapshots together stay under this many bytes (about 5 MB "
                                          "a check with default reports): the oldest uncited checks go first; "
                                          "cited ones count but are never deleted; null: no size limit")
    reports_keep: int | None = Field(None, ge=0, description="deprecated (use history_days and "
                                     "history_max_bytes): at most this many uncited checks keep their history, "
                                     "on top of the age and size limits; 0 or null: no count limit")
    report_max_bytes: int = Field(20 * 1024 * 1024, ge=64 * 1024, description="largest report file kept: past it "
                                  "the interactive HTML is replaced by a note (the static summary stays) and the "
                                  "JSON keeps driftloop's figures without Evidently's (recorded as report_omitted)")
    workspace: str = Field("evidently", description="Evidently workspace each check's snapshot is added to (one "
                           "project per model with a dashboard; view it with `evidently ui --workspace <folder>`); "
                           "relative to home; empty turns it off")
    confidence: float = Field(0.95, gt=0, lt=1, description="level of the accuracy and ROC AUC intervals")
    estimate: bool = Field(True, description="estimate accuracy, ROC AUC, precision, recall and F1 from the scores "
                           "alone (CBPE: the champion's scores calibrated on its reference sample), before labels "
                           "arrive")
    estimation_recalibrate_windows: int = Field(2, ge=0, description="labelled windows in a row whose realised "
                                                "accuracy (regression: MAE) falls outside the estimate's band after "
                                                "which the estimate is recalibrated on the champion's recent labelled "
                                                "rows (kept per champion version across restarts); 0 never "
                                                "recalibrates")
    label_selection: bool = Field(True, description="when the labelled rows were chosen by the score (only the rows "
                                  "the model flagged get reviewed), judge their realised accuracy, ROC AUC and MAE "
                                  "against the bar moved by what the estimate expects of exactly those rows "
                                  "(monitor.drift.selection); false judges them against the level on all rows")
    label_maturity: bool = Field(True, description="when labels arrive by outcome (one class's labels take longer "
                                 "than another's: chargebacks come fast, 'no fraud' after the dispute window), "
                                 "treat the labels of rows made within the slowest class's delay of the newest "
                                 "label as not yet arrived, in checks and in the rows a retrain learns from "
                                 "(monitor.drift.maturity)")
    fast_lane: bool = Field(True, description="open an incident as soon as a change point in the champion's labelled "
                            "error stream proves a drop of at least alerts.accuracy_drop (before drift.min_labels "
                            "rows)")
    fast_min_rows: int = Field(200, ge=30, description="labelled rows after a change point the fast lane needs")
    judge_by_interval: bool = Field(True, description="with fewer than drift.min_labels labelled rows (but at least "
                                    "drift.fast_min_rows), judge a window whose accuracy (regression: MAE) interval "
                                    "lies wholly past the threshold as a breach: label-starved streams (sampled or "
                                    "late labels) need not wait for the fixed count; health still needs min_labels")
    labelled_window: bool = Field(True, description="size the check window by labelled rows: when the last "
                                  "drift.window_size rows hold fewer than drift.min_labels labels, it reaches back "
                                  "until it holds that many (at most drift.max_window_rows rows)")
    max_window_rows: int = Field(50_000, ge=1, description="rows a window sized by labelled rows "
                                 "(drift.labelled_window) holds at most")
    segment_min_labels: int = Field(300, ge=30, description="labelled rows a segment value needs before its "
                                    "accuracy (or recall) can breach (the segment alert), and rows in the drift "
                                    "sample before it gets a drift share; fewer: shown, not judged")
    fast_confidence: float = Field(0.99, gt=0.5, lt=1, description="one-sided confidence that the drop after a "
                                   "change point is at least alerts.accuracy_drop, for the fast lane to fire")
    # Embedding features (type embedding): one two-sample test of the vectors per feature, chosen and
    # sized by bench/bench_embedding_drift.py (docs/parts/drift.md "Embedding features").
    embedding_method: Literal["mmd", "classifier", "components", "reconstruction"] = Field(
        "mmd", description="test of an embedding feature's vectors: mmd (RBF-kernel MMD, permutation p-value), "
        "classifier (Evidently's default: ROC AUC of a reference-vs-window logistic classifier), components (K-S per "
        "principal component, Benjamini-Hochberg), reconstruction (NannyML's PCA reconstruction error)")
    embedding_threshold: float | None = Field(None, gt=0, description="the embedding test's threshold; unset uses "
                                              "the method's: p < 0.05 (mmd, components), AUC >= 0.55 (classifier), "
                                              "|z| >= 3 (reconstruction)")
    embedding_sample_rows: int = Field(2000, ge=100, le=5000, description="vectors per side an embedding test uses "
                                       "at most (a seeded uniform sample; mmd holds a (2 x rows)² kernel: 128 MB at "
                                       "2000); the reference also fits its projection on as many other rows")
    embedding_components: int = Field(32, ge=2, le=256, description="principal components (fitted on the "
                                      "reference, once per champion) an embedding feature's vectors are projected "
                                      "on before the test")
    # The tabular features together (monitor/drift/multivariate.py; docs/parts/drift.md "Multivariate drift").
    multivariate: bool = Field(True, description="also test the numeric and categorical features together, for "
                               "models with at least two: NannyML's PCA reconstruction error of the window against "
                               "a band drawn from the reference (catches a change of the features' joint "
                               "distribution, such as a flipped correlation, that no single feature shows)")
    multivariate_threshold_sd: float = Field(3.0, gt=0, description="half-width of the multivariate band, in "
                                             "standard deviations of the reference's mean error at the window's "
                                             "size (NannyML's default 3)")
    multivariate_dataset_drift: bool = Field(False, description="count multivariate drift as dataset drift (then "
                                             "it opens a drift incident as a drift share past drift.drift_share "
                                             "does); off: reported, exported and alerted on "
                                             "(DriftloopMultivariateDrift) on its own")
    # Constraints on the model's columns (monitor/drift/constraints.py; docs/parts/drift.md "Constraints and
    # violations").
    constraints: str | None = Field(None, description="the model's constraints file (types, completeness, ranges, "
                                    "categories per column; written by `driftloop baseline-constraints`, edited by "
                                    "hand) each check reports violations of; relative to home. Unset: "
                                    "constraints/<model>.json under home, when it exists; '' in the file turns it "
                                    "off (an empty environment variable unsets it, as any)")
    # Numbers computed from the inputs (text, images), tested as features of their own; off by default.
    descriptors: DescriptorsConfig = Field(default_factory=DescriptorsConfig)

    @property
    def min_labels_at_most(self) -> int:
        """``min_labels`` as a number where no champion's baseline has resolved ``auto`` yet: the
        configured number, or the most auto can give (monitor/drift/min_labels.py resolves it)."""
        return self.min_labels if isinstance(self.min_labels, int) else MIN_LABELS_AUTO[1]

    @field_validator("reports_keep")
    @classmethod
    def _reports_keep_deprecated(cls, v: int | None) -> int | None:
        # Still honoured for one more release, as a count limit beside age and size (0 meant "keep all").
        if v is None:
            return None
        warnings.warn("drift.reports_keep is deprecated: history is kept by drift.history_days and "
                      "drift.history_max_bytes (reports_keep still limits the count of uncited checks)",
                      FutureWarning, stacklevel=2)
        return v or None


RULE_METRICS = ("accuracy", "roc_auc", "precision", "recall", "f1", "positive_rate",
                "macro_f1", "weighted_f1", "mae", "rmse", "mape", "r2", "residual_shift")
# Which task each rule metric needs (absent: every classifier); mae, rmse, mape and residual_shift
# worsen by rising.
RULE_METRIC_TASKS = {"precision": ("binary", "multiclass"), "recall": ("binary", "multiclass"),
                     "f1": ("binary",), "positive_rate": ("binary",), "macro_f1": ("multiclass",),
                     "weighted_f1": ("multiclass",), "mae": ("regression",), "rmse": ("regression",),
                     "mape": ("regression",), "r2": ("regression",), "residual_shift": ("regression",),
                     "accuracy": ("binary", "multiclass"),
                     "roc_auc": ("binary", "multiclass")}
SEGMENT_RULE_METRICS = ("accuracy", "recall")  # those a segment value has with an interval


class MetricRule(_Section):
    """One entry of ``alerts.rules``: a drop of ``metric`` against the champion's bar that breaches."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    metric: Literal["accuracy", "roc_auc", "precision", "recall", "f1", "positive_rate", "macro_f1", "weighted_f1",
                    "mae", "rmse", "mape", "r2", "residual_shift"] = Field(
        description="the realised metric on the window's labelled rows: accuracy, roc_auc, precision, recall, f1, "
                    "or positive_rate (share of the window's rows served label 1) for binary; accuracy, roc_auc "
                    "(one-vs-rest macro), macro_f1, weighted_f1, and precision / recall of one class (with "
                    "class) for multiclass; mae, rmse, mape, r2, residual_shift (the mean signed residual's shift "
                    "from the reference's in its residual SDs, either way) for regression. Judged, like the "
                    "default pair, "
                    "once the window has drift.min_labels labels")
    drop: float = Field(gt=0, description="worsening vs the bar (alerts.mode: absolute or relative) that breaches: "
                        "a drop, or for mae, rmse, mape and residual_shift a rise")
    class_name: str | None = Field(None, alias="class", description="multiclass: the class whose precision or "
                                   "recall the rule judges (e.g. {metric: recall, class: night, drop: 0.05})")
    segment: bool = Field(False, description="also judge each segment value (model.segments) on this metric: "
                          "accuracy or recall, whose interval must lie wholly past the drop (a segment alert, no "
                          "incident)")

    @property
    def key(self) -> str:
        """The rule's name in readings and breaches: the metric, or ``recall[<class>]`` for a class."""
        return self.metric if self.class_name is None else f"{self.metric}[{self.class_name}]"

    @model_validator(mode="after")
    def _segment_metric(self) -> "MetricRule":
        if self.class_name is not None and self.metric not in ("precision", "recall"):
            raise ValueError(f"class is for precision and recall of one class, not {self.metric}")
        if self.segment and self.metric not in SEGMENT_RULE_METRICS:
            raise ValueError(f"segment: true needs a metric a segment value has with an interval "
                             f"({', '.join(SEGMENT_RULE_METRICS)}), not {self.metric}")
        return self


class AlertsConfig(_Section):
    accuracy_drop: float = Field(0.03, gt=0, description="accuracy drop (vs the champion's baseline) that breaches")
    auc_drop: float = Field(0.05, gt=0,
                            description="ROC AUC drop that breaches (multiclass: one-vs-rest macro ROC AUC)")
    mae_rise: float = Field(0.10, gt=0, description="regression: relative rise of the MAE against the champion's "
                            "baseline that breaches ((live - baseline) / baseline; 0.10 = 10 % worse)")
    mape_rise: float = Field(0.25, gt=0, description="regression: relative rise of the MAPE (mean absolute percentage "
                             "error) against the champion's MAPE on its reference that breaches (0.25 = 25 % worse); "
                             "catches a model wrong on the small values while its MAE falls")
    residual_shift: float = Field(0.25, gt=0, description="regression: shift of the mean signed residual (prediction "
                                  "- target) from the champion's on its reference, either way, in the reference's "
                                  "residual standard deviations, that breaches (0.25 = a quarter of a standard "
                                  "deviation): a model that starts to over- or under-predict")
    mode: Literal["absolute", "relative"] = Field("absolute", description="absolute (baseline - live) or relative "
                                                                          "((baseline - live) / baseline)")
    sustained_windows: int = Field(1, ge=1, description="breaching windows in a row before a performance alert "
                                   "fires (a check of the same labelled rows as the one before counts once)")
    cooldown_seconds: float = Field(300.0, ge=0, description="seconds before retrying after a retrain that *failed* "
                                    "(crashed, MLflow down); rejected retrains wait for new labelled rows instead")
    retrain_on_drift: bool = Field(False, description="retrain on dataset drift without a performance drop")
    drift_impact_windows: int = Field(3, ge=1, description="a data-drift incident (no retrain) is resolved as 'drift "
                                      "without performance impact' after this many judged checks in a row with the "
                                      "labelled performance within thresholds, while the drift goes on")
    # Hysteresis on drift (issue 34): a drift episode starts on k of the last n judged checks and ends
    # after m quiet ones, so one continuing drift is one incident (with a count of its drifted checks).
    drift_open_checks: int | None = Field(None, ge=1, description="drifted checks among the last "
                                          "drift_open_window judged ones that start a drift episode (and open a "
                                          "drift incident); default alerts.sustained_windows")
    drift_open_window: int | None = Field(None, ge=1, description="judged checks drift_open_checks are counted "
                                          "over (k of n); default drift_open_checks (k in a row)")
    drift_quiet_checks: int = Field(3, ge=1, description="judged checks in a row without dataset drift that end a "
                                    "drift episode: only then is a drift incident healthy (resolved), and a "
                                    "drift that goes on after its incident was resolved (without performance "
                                    "impact, or by hand) is counted on it instead of opening another")
    drift_reopen_seconds: float = Field(86400.0, ge=0, description="a new drift episode within this many seconds "
                                        "of a resolved drift incident's last drifted check reopens (continues) "
                                        "that incident, with a 'reopened' event, instead of opening another; 0: "
                                        "never")
    retrain_on_estimate: bool = Field(False, description="retrain on an estimated drop (a suspected incident, before "
                                      "drift.min_labels labels confirm it); off: a suspected incident alerts and waits")
    retrain_cron: str | None = Field(None, description="crontab expression, e.g. '0 3 * * *'")
    healthy_windows: int = Field(1, ge=1, description="healthy checks in a row that resolve an incident")
    retrain_rows: int | None = Field(None, ge=10, description="most recent labelled rows to retrain on when nothing "
                                     "bounds the incident's evidence (no change point, no last healthy window); "
                                     "default drift.window_size. With a bound, every labelled row since it is used "
                                     "(training.max_rows)")
    max_attempts: int = Field(3, ge=1, description="rejected or failed retrains in a row after which an incident is "
                              "escalated (status, metric, alert); it keeps retrying when new labelled rows allow")
    attainable_after: int = Field(3, ge=0, description="retrains in a row of a performance incident, each on every "
                                  "labelled row since the change point, whose best model (challenger or champion on "
                                  "held-out post-change rows, 95 % interval) still misses the bar by the alert "
                                  "threshold, after which the loop records that level as the attainable one (an "
                                  "incident event, status, the MLflow run), judges later checks against it and ends "
                                  "the incident. 0: never; the incident stays open until a person resets the level")
    retry_rows: int | None = Field(None, ge=10, description="new labelled rows needed before retrying after a "
                                   "rejected retrain; doubles with each rejection in a row (back-off, capped at 8x); "
                                   "default drift.min_labels")
    retrain_timeout_seconds: float = Field(3600.0, gt=0, description="a retrain child running longer is killed")
    webhook_match: dict[str, str] = Field(default_factory=lambda: {"component": "model"},
                                          description="labels an Alertmanager alert needs to concern the daemon")
    rules: list[MetricRule] = Field(default_factory=list, description="breach rules besides the accuracy_drop / "
                                    "auc_drop pair, e.g. [{metric: recall, drop: 0.05}]. metric: accuracy, roc_auc, "
                                    "precision, recall, f1 or positive_rate (served); drop: > 0, as alerts.mode; "
                                    "segment: true also judges each segment value (accuracy, recall only). One rule "
                                    "per metric; a breach opens an incident named after its metric (docs: "
                                    "Estimation, Alert rules)")

    @model_validator(mode="after")
    def _drift_window_holds_its_checks(self) -> "AlertsConfig":
        if (self.drift_open_checks is not None and self.drift_open_window is not None
                and self.drift_open_window < self.drift_open_checks):
            raise ValueError(f"drift_open_window ({self.drift_open_window}) must be at least drift_open_checks "
                             f"({self.drift_open_checks}): k of n checks needs n >= k")
        return self

    @property
    def drift_hysteresis(self) -> tuple[int, int, int]:
        """(k, n, m): a drift episode starts on k drifted of the last n judged checks, ends after m quiet ones."""
        k = self.drift_open_checks or self.sustained_windows
        return k, max(k, self.drift_open_window or k), self.drift_quiet_checks

    @field_validator("rules")
    @classmethod
    def _one_rule_per_metric(cls, v: list[MetricRule]) -> list[MetricRule]:
        seen = [r.key for r in v]
        twice = sorted({m for m in seen if seen.count(m) > 1})
        if twice:
            raise ValueError(f"more than one rule for {', '.join(twice)}; give each metric one rule "
                             "(segment: true judges the segments with the same drop)")
        return v

    @field_validator("retrain_cron")
    @classmethod
    def _crontab(cls, v: str | None) -> str | None:
        if v is not None:
            from apscheduler.triggers.cron import CronTrigger
            try:
                CronTrigger.from_crontab(v)
            except ValueError as exc:
                raise ValueError(f"not a crontab expression (minute hour day month weekday): {exc}") from None
        return v
