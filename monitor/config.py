"""Typed configuration: one YAML file plus ``DRIFTLOOP_*`` environment variables.

Precedence, lowest first: built-in defaults, the YAML file, environment variables.
An environment variable names a key by its path joined with double underscores::

    DRIFTLOOP_SERVER__PORT=8471        -> server.port
    DRIFTLOOP_ALERTS__ACCURACY_DROP=0.02

Values from the environment are parsed as YAML scalars/lists, so ``true``, ``5`` and
``[a, b]`` mean what they look like; text keys (token, host, URLs, names) take the value
verbatim. Everything is validated once, by :func:`load_config`, and every problem is reported
in one :class:`ConfigError`.
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Mapping, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.errors import ConfigError
from monitor.embeddings import INPUT_URI, MAX_EMBEDDING_DIM
from monitor.tasks import TASKS

ENV_PREFIX = "DRIFTLOOP_"
DEFAULT_CONFIG_FILE = "driftloop.yaml"


class _Section(BaseModel):
    # Unknown keys are almost always typos; reject rather than silently ignore them.
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class LoggingConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO",
                                                                description="DEBUG, INFO, WARNING or ERROR (also "
                                                                            "--log-level)")
    format: Literal["text", "json"] = Field("text", description="text, or json (one JSON object per line)")


class ExporterConfig(_Section):
    host: str = Field("127.0.0.1", description="address to listen on (0.0.0.0 or :: for Prometheus on another host)")
    # 9400 is dcgm-exporter's, 9100 node_exporter's, 9835 nvidia_gpu_exporter's.
    port: int = Field(9471, ge=1, le=65535, description="port to listen on (dcgm-exporter uses 9400 and "
                                                        "nvidia_gpu_exporter 9835: they can run side by side)")
    simulate: int = Field(0, ge=0, le=1024, description="simulate N GPUs instead of reading NVML")
    tls_cert: Path | None = Field(None, description="certificate file: serve HTTPS (TLS 1.2+); give tls_cert and "
                                                    "tls_key together")
    tls_key: Path | None = Field(None, description="private key file of tls_cert")
    process_metrics: bool = Field(False, description="export device memory per process")
    pcie_throughput: bool = Field(False, description="on GPUs without GPM (before Hopper), also read PCIe rx/tx bytes "
                                                     "per second with NVML's older counter, which samples each "
                                                     "direction for ~20 ms (in the background sampler); GPM GPUs "
                                                     "export it always")
    sampler_interval_seconds: float = Field(5.0, gt=0, description="how often the background sampler reads the slow "
                                                                   "readings (energy, GPM activity, PCIe/NVLink "
                                                                   "throughput and counters, remapped rows, MIG "
                                                                   "instances); GPM ratios are averages over this "
                                                                   "interval. pcie_interval_seconds is the old name, "
                                                                   "still accepted")
    hostname: str | None = Field(None, description="value of the hostname label on every GPU series (published as "
                                                   "dcgm-exporter's Hostname by the dcgm recording rules); default "
                                                   "this machine's host name (set it to the node name in Kubernetes); "
                                                   "an empty string leaves the label out")
    xid_events: bool = Field(False, description="count XID errors from NVML events (background thread)")
    call_timeout_seconds: float = Field(2.0, gt=0, description="bound on one NVML sweep inside a scrape")
    init_retry_initial_seconds: float = Field(1.0, gt=0, description="first retry delay when NVML is unavailable or a "
                                                                     "GPU is lost")
    init_retry_max_seconds: float = Field(60.0, gt=0, description="retry delays double up to this")

    @model_validator(mode="before")
    @classmethod
    def _old_interval_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "pcie_interval_seconds" in data:
            data = dict(data)
            old = data.pop("pcie_interval_seconds")
            data.setdefault("sampler_interval_seconds", old)
        return data

    @model_validator(mode="after")
    def _tls_pair(self) -> "ExporterConfig":
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        return self


MIN_TOKEN_LENGTH = 12


class ServerConfig(_Section):
    host: str = Field("127.0.0.1", description="address driftloop serve listens on")
    port: int = Field(8470, ge=1, le=65535, description="port driftloop serve listens on")
    token: str | None = Field(None, description="bearer token required on write endpoints when set; at least "
                              f"{MIN_TOKEN_LENGTH} characters. Checked from the headers before any "
                              "body byte is read")
    token_file: Path | None = Field(None, description="file holding the token (e.g. a mounted secret), read at "
                                                      "start-up; surrounding whitespace is stripped; not with token")
    max_body_bytes: int = Field(32 * 1024 * 1024, gt=0, description="largest request body (compressed or not) "
                                "and largest decompressed body; bigger ones get 413")
    max_batch_records: int = Field(100_000, gt=0, description="most records per request; more get 413")
    max_inflight_bodies: int = Field(8, ge=1, description="request bodies received at once; more get 503 with "
                                     "Retry-After. Bounds body memory to this x max_body_bytes")
    body_timeout_seconds: float = Field(30.0, gt=0, description="time a request body may take to arrive whole; "
                                        "a slower sender gets 408 (slow-loris protection)")
    header_timeout_seconds: float = Field(10.0, gt=0, description="time a connection has to deliver a request's "
                                          "line and headers whole (from connecting, or from the previous response "
                                          "plus server.idle_timeout_seconds); then it is closed (408 when part of "
                                          "them came). Slow-header protection, which uvicorn alone lacks")
    idle_timeout_seconds: float = Field(5.0, gt=0, description="a keep-alive connection with no new request "
                                        "for this long is closed")
    max_connections: int = Field(512, ge=8, description="open connections at most; one more closes the oldest "
                                 "connection still waiting for its request head, or is answered 503 when all are "
                                 "busy. serve raises its open-file limit to the hard limit and warns when this "
                                 "does not fit well below it")
    gpu_metrics: bool = Field(True, description="serve the GPU collector's series on the daemon's /metrics too "
                                                "(--no-gpu turns it off)")
    leader_lease_seconds: float = Field(10.0, gt=0, description="several daemons on one PostgreSQL store: one "
                                        "leader runs the scheduler, alert policy and retrains; a follower takes "
                                        "over within 2 x this after the leader dies or loses its connection")

    @model_validator(mode="before")
    @classmethod
    def _token_from_file(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("token_file") in (None, ""):
            return data
        if data.get("token") not in (None, ""):
            raise ValueError("give server.token or server.token_file, not both")
        path = Path(data["token_file"])
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"server.token_file {str(path)!r}: cannot read: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None
        if not token:
            raise ValueError(f"server.token_file {str(path)!r} is empty")
        return {**data, "token": token}

    @field_validator("token")
    @classmethod
    def _usable_token(cls, v: str | None) -> str | None:
        # A blank or one-space token was accepted before and locked every writer out.
        if v is None:
            return v
        if not v.strip():
            raise ValueError("the token is blank; unset it to turn authentication off")
        if v != v.strip():
            raise ValueError("the token starts or ends with whitespace, which an Authorization header cannot carry")
        if len(v) < MIN_TOKEN_LENGTH:
            raise ValueError(f"the token has {len(v)} characters; use at least {MIN_TOKEN_LENGTH} "
                             "(e.g. `openssl rand -hex 24`)")
        if not v.isascii() or not v.isprintable():
            raise ValueError("the token must be printable ASCII")
        return v


class StoreConfig(_Section):
    url: str | None = Field(None, description="SQLAlchemy URL; default sqlite file under home")
    retention_days: float | None = Field(30.0, gt=0, description="rows received longer ago than this many days "
                                         "are deleted by the daemon (from arrival, not ts: backfills are kept); "
                                         "null keeps all")
    busy_timeout_seconds: float = Field(30.0, gt=0, description="SQLite: how long a writer waits for the lock "
                                        "(and how long /readyz waits before calling a locked store not ready)")
    request_wait_seconds: float = Field(0.5, gt=0, description="how long a store call made for an HTTP request "
                                        "waits for a lock (this process's other writers and SQLite's write lock "
                                        "together) before the request is answered 503 + Retry-After; background "
                                        "jobs wait store.busy_timeout_seconds")
    min_free_bytes: int = Field(64 * 1024 * 1024, ge=0, description="SQLite: free space the store's filesystem "
                                "needs; below it ingestion answers 503 (nothing stored), /readyz is 503 and "
                                "driftloop_store_writable 0. 0 turns the check off")
    # FULL syncs the WAL on every commit (one fsync per batch): a power cut loses no acknowledged batch.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = Field("FULL", description="FULL fsyncs the WAL per batch (no "
                                                                              "acknowledged batch lost to a power "
                                                                              "cut); NORMAL is faster")


class FeatureSpec(_Section):
    name: str
    type: Literal["numeric", "categorical", "embedding"] = "numeric"
    dim: int | None = Field(None, ge=2, le=MAX_EMBEDDING_DIM,
                            description="embedding: the vector's fixed length (2-4096); only for type embedding")

    @model_validator(mode="after")
    def _dim_fits_type(self) -> "FeatureSpec":
        if self.type == "embedding" and self.dim is None:
            raise ValueError(f"embedding feature {self.name!r} needs dim (the vector's length, e.g. dim: 512)")
        if self.type != "embedding" and self.dim is not None:
            raise ValueError(f"feature {self.name!r}: dim is only for type embedding (it is {self.type})")
        return self

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v or not (v.replace("_", "a").isalnum() and not v[0].isdigit()):
            raise ValueError(f"feature name {v!r} must be letters, digits and _ and not start with a digit")
        return v


def _default_features() -> list[FeatureSpec]:
    # The demo dataset's schema (trainer.synthetic): 8 numeric and 2 categorical columns.
    numeric = [FeatureSpec(name=f"x{i}") for i in range(8)]
    return numeric + [FeatureSpec(name="region", type="categorical"), FeatureSpec(name="device", type="categorical")]


TIME_SEGMENTS = ("hour_of_day", "day_of_week")  # segments derived from a prediction's ts


class ModelConfig(_Section):
    task: Literal["binary", "multiclass", "regression"] = Field(
        "binary", description="binary (one score, P(target = 1)), multiclass (a class and one probability per "
        "class) or regression (a predicted number). When left out, `driftloop train` infers it from the target "
        "(two values: binary; 3-100 classes: multiclass; a continuous number: regression) and serve, check "
        "and retrain read it from the champion (docs: Tasks)")
    classes: list[str] | None = Field(
        None, description="the class names in order (multiclass: 2-100 classes; binary: optional [negative, "
        "positive] when the target is not 0/1). Inferred by `driftloop train` and recorded on the model version; "
        "labels and predictions name a class by its name (or a number equal to it)")
    name: str = Field("demo", description="the model's name: the model label, table and MLflow names "
                                          "(driftloop-<name>); 1-48 letters, digits, _, . or -")
    features: list[FeatureSpec] = Field(
        default_factory=_default_features,
        description="list of {name, type}; type is numeric, categorical or embedding (with dim: the vector's length); "
                    "names unique ignoring case, at most 60 "
                    "characters. When left out, `driftloop train` infers them from the data file (the rules of "
                    "`driftloop init`) and serve, check and retrain read them from the champion")
    score: str = Field("score", description="name of the score column (P(target = 1)) in windows, DataFrames and "
                                            "records")
    prediction: str = Field("prediction", description="name of the predicted-label column")
    target: str = Field("label", description="name of the true 0/1 outcome column in data files, label frames and "
                                             "label records (`{\"id\": ..., \"<target>\": 1}`)")
    id: str = Field("id", description="column holding the record id in data files and frames (e.g. customer_id); "
                                      "never a feature; on the wire a record's id is always the key `id`")
    ignore: list[str] = Field(default_factory=list,
                              description="columns of data files that are neither features, id nor target; "
                                          "dropped when training")
    threshold: float = Field(0.5, gt=0, lt=1, description="binary: score above which the predicted label is 1 (score > "
                                                          "threshold), as in ingestion and training")
    factory: str | None = Field(None, description="module:function building your own PyTorch model; default: the MLP")
    segments: list[str] = Field(default_factory=list, description="monitored separately: categorical feature names "
                                "and the time buckets hour_of_day (0-23, UTC) and day_of_week (mon-sun) of the "
                                "prediction's ts; per value: rows, accuracy, recall, ROC AUC, estimated accuracy and "
                                "drift share "
                                "(docs: Segments)")
    segment_top_k: int = Field(10, ge=1, le=50, description="values of a categorical segment kept by row count; "
                               "the rest are pooled as 'other', so a segment never explodes the metric series")
    max_value_chars: int = Field(1024, ge=1, le=1_000_000, description="longest categorical feature value "
                                 "ingestion accepts, in characters; a longer one is refused (422 naming the record "
                                 "and feature), since every value is stored and drawn in reports. Ids are limited "
                                 "to 200 characters, model_version to 64, input_uri to 2048")

    @field_validator("name")
    @classmethod
    def _table_safe(cls, v: str) -> str:
        # The store names its tables after the model (predictions_<name>); PostgreSQL allows 63 bytes.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}", v):
            raise ValueError(f"model name {v!r} must be 1-48 letters, digits, '_', '.' or '-', starting with a letter "
                             "or digit")
        return v

    @model_validator(mode="after")
    def _unique_names(self) -> "ModelConfig":
        names = [f.name for f in self.features]
        # SQLite column names ignore case, so X1 and x1 would be one column in the store.
        lowered = [n.lower() for n in names]
        dup = sorted({n for n in names if lowered.count(n.lower()) > 1})
        if dup:
            raise ValueError(f"duplicate feature names (case-insensitive): {', '.join(dup)}")
        if not names:
            raise ValueError("at least one feature is required")
        long = [n for n in names if len(n) > 60]
        if long:
            raise ValueError(f"feature names longer than 60 characters: {', '.join(long)}")
        if len({self.score, self.prediction, self.target, self.id}) < 4:
            raise ValueError("score, prediction, target and id must be four different column names")
        # With no features configured the champion's recorded schema supplies them later
        # (monitor.dataschema.with_features validates this model again, segments included).
        unknown = [g for g in self.segments if g not in TIME_SEGMENTS and g not in self.categorical_features]
        if unknown and "features" in self.model_fields_set:
            raise ValueError(f"segments {', '.join(unknown)} are neither categorical features nor one of "
                             f"{', '.join(TIME_SEGMENTS)}")
        if len(set(self.segments)) < len(self.segments):
            raise ValueError("segments must not repeat")
        self._check_classes()
        reserved = {self.score, self.prediction, self.target, self.id, "id", "ts", "label_ts", INPUT_URI, *self.ignore}
        clash = sorted(reserved & set(names))
        if clash:
            raise ValueError(f"feature names clash with reserved columns: {', '.join(clash)}")
        return self

    def _check_classes(self) -> None:
        classes = self.classes
        if classes is None:
            return
        if self.task == "regression":
            raise ValueError("classes are for classification; a regression model has none (unset model.classes)")
        if len(set(classes)) < len(classes):
            raise ValueError("classes must not repeat")
        if any(not c or c != c.strip() for c in classes):
            raise ValueError("class names must be non-empty and without surrounding whitespace")
        if self.task == "binary" and len(classes) != 2:
            raise ValueError(f"a binary model has two classes [negative, positive], got {len(classes)}")
        if not 2 <= len(classes) <= 100:
            raise ValueError(f"a multiclass model has 2 to 100 classes, got {len(classes)}")

    @property
    def task_configured(self) -> bool:
        """Whether ``task`` was given rather than left at the default (then the data or the champion says)."""
        return "task" in self.model_fields_set

    @property
    def n_classes(self) -> int:
        """Classes of a classifier (2 for binary); 0 for regression."""
        if self.task == "regression":
            return 0
        return len(self.classes) if self.classes else 2

    @property
    def features_configured(self) -> bool:
        """Whether ``features`` was given (file, environment, flags) rather than left at the demo default."""
        return "features" in self.model_fields_set

    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    @property
    def numeric_features(self) -> list[str]:
        return [f.name for f in self.features if f.type == "numeric"]

    @property
    def categorical_features(self) -> list[str]:
        return [f.name for f in self.features if f.type == "categorical"]

    @property
    def embedding_features(self) -> list[str]:
        """Features of type embedding: one fixed-length float vector per row (monitor/embeddings.py)."""
        return [f.name for f in self.features if f.type == "embedding"]

    @property
    def tabular_features(self) -> list[str]:
        """Numeric and categorical features: one scalar per row (what per-column drift tests)."""
        return [f.name for f in self.features if f.type != "embedding"]

    def embedding_dim(self, name: str) -> int:
        """The configured length of embedding feature ``name``."""
        for f in self.features:
            if f.name == name and f.dim is not None:
                return f.dim
        raise KeyError(f"{name!r} is not an embedding feature")


class MlflowConfig(_Section):
    tracking_uri: str | None = Field(None, description="default sqlite file under home")
    experiment: str | None = Field(None, description="default driftloop-<model>")
    registered_model: str | None = Field(None, description="default driftloop-<model>")
    ui_url: str | None = Field(None, description="link shown in dashboards and status")
    timeout_seconds: float = Field(10.0, gt=0, description="reachability check and HTTP request timeout")


class DriftConfig(_Section):
    interval_seconds: float = Field(300.0, gt=0, description="how often the daemon checks (also --check-interval)")
    window_size: int = Field(5000, gt=0, description="last N predictions")
    window_seconds: float | None = Field(None, gt=0, description="time window instead of last N")
    min_labels: int = Field(1000, ge=1, description="labelled rows needed before performance alerts can fire")
    min_rows: int = Field(500, ge=1, description="rows a window needs before its dataset-drift verdict can fire")
    # Smaller samples save little (Evidently's cost is mostly per column) and their noise nears the
    # 0.1 threshold of the default distances (Wasserstein p99 ~0.13 at 1000 rows); see docs/parts/drift.md "Cost stays
    # bounded on large windows".
    sample_size: int = Field(20_000, ge=5000, description="rows per side the drift tests run on at most")
    drift_share: float = Field(0.5, gt=0, le=1, description="share of drifted features that marks dataset drift")
    stattest_threshold: float | None = Field(None, gt=0, description="per-feature threshold; Evidently's default when "
                                                                     "unset")
    # Evidently's stattest names; None keeps Evidently's own choice (by reference size and cardinality).
    num_method: Literal["anderson", "cramer_von_mises", "ed", "empirical_mmd", "es", "hellinger", "jensenshannon",
                        "kl_div", "ks", "mannw", "psi", "t_test", "wasserstein"] | None = Field(
        None, description="one Evidently stattest for every numeric column; unset keeps Evidently's choice, made on "
        "the full data")
    cat_method: Literal["TVD", "chisquare", "fisher_exact", "g_test", "hellinger", "jensenshannon", "kl_div",
                        "psi", "z"] | None = Field(None, description="one Evidently stattest for every categorical "
                                                                     "column; unset keeps Evidently's choice")
    reports_keep: int = Field(50, ge=0, description="newest Evidently snapshots kept on disk (report files and "
                              "workspace snapshots alike; an open incident's are kept too); 0 keeps all")
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
    estimation_recalibrate_windows: int = Field(3, ge=0, description="labelled windows in a row whose realised "
                                                "accuracy (regression: MAE) falls outside the estimate's band after "
                                                "which the estimate is recalibrated on the champion's recent labelled "
                                                "rows (kept per champion version across restarts); 0 never "
                                                "recalibrates")
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


RULE_METRICS = ("accuracy", "roc_auc", "precision", "recall", "f1", "positive_rate",
                "macro_f1", "weighted_f1", "mae", "rmse", "mape", "r2")
# Which task each rule metric needs (absent: every classifier); mae, rmse and mape worsen by rising.
RULE_METRIC_TASKS = {"precision": ("binary", "multiclass"), "recall": ("binary", "multiclass"),
                     "f1": ("binary",), "positive_rate": ("binary",), "macro_f1": ("multiclass",),
                     "weighted_f1": ("multiclass",), "mae": ("regression",), "rmse": ("regression",),
                     "mape": ("regression",), "r2": ("regression",), "accuracy": ("binary", "multiclass"),
                     "roc_auc": ("binary", "multiclass")}
SEGMENT_RULE_METRICS = ("accuracy", "recall")  # those a segment value has with an interval


class MetricRule(_Section):
    """One entry of ``alerts.rules``: a drop of ``metric`` against the champion's bar that breaches."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    metric: Literal["accuracy", "roc_auc", "precision", "recall", "f1", "positive_rate", "macro_f1", "weighted_f1",
                    "mae", "rmse", "mape", "r2"] = Field(
        description="the realised metric on the window's labelled rows: accuracy, roc_auc, precision, recall, f1, "
                    "or positive_rate (share of the window's rows served label 1) for binary; accuracy, roc_auc "
                    "(one-vs-rest macro), macro_f1, weighted_f1, and precision / recall of one class (with "
                    "class) for multiclass; mae, rmse, mape, r2 for regression. Judged, like the default pair, "
                    "once the window has drift.min_labels labels")
    drop: float = Field(gt=0, description="worsening vs the bar (alerts.mode: absolute or relative) that breaches: "
                        "a drop, or for mae, rmse and mape a rise")
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
    mode: Literal["absolute", "relative"] = Field("absolute", description="absolute (baseline - live) or relative "
                                                                          "((baseline - live) / baseline)")
    sustained_windows: int = Field(1, ge=1, description="breaching checks in a row before an alert fires")
    cooldown_seconds: float = Field(300.0, ge=0, description="seconds before retrying after a retrain that *failed* "
                                    "(crashed, MLflow down); rejected retrains wait for new labelled rows instead")
    retrain_on_drift: bool = Field(False, description="retrain on dataset drift without a performance drop")
    drift_impact_windows: int = Field(3, ge=1, description="a data-drift incident (no retrain) is resolved as 'drift "
                                      "without performance impact' after this many judged checks in a row with the "
                                      "labelled performance within thresholds, while the drift goes on")
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


class GateConfig(_Section):
    """``training.gate``: when a challenger may replace the champion (trainer/gate.py, trainer/judge.py)."""
    min_accuracy_gain: float = Field(0.01, ge=0, description="accuracy gain the challenger needs on the held-out "
                                     "recent rows")
    min_auc_gain: float = Field(0.0, ge=0, description="ROC AUC gain the challenger needs (0 = not worse)")
    min_mae_gain: float = Field(0.02, ge=0, lt=1, description="regression: relative MAE fall the challenger needs on "
                                "the held-out recent rows (0.02 = 2 % lower MAE); its RMSE may not rise")
    reference_floor: float = Field(0.15, ge=0, le=1, description="max accuracy the challenger may lose vs the "
                                   "champion on the champion's reference sample (bounds forgetting; regression: max "
                                   "relative rise of its MAE there)")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="confidence of the gate's absolute floors (the "
                              "challenger's ROC AUC and accuracy lower bounds must clear 0.5 and the majority-class "
                              "rate) and of the live, shadow and review comparisons (at 1 - this)")
    max_latency_ms: float | None = Field(None, gt=0, description="the challenger's exported form (INT8 if "
                                         "published, else fp32) must score one row within this p99 latency "
                                         "(milliseconds, on the training machine); null = no limit")
    max_model_mb: float | None = Field(None, gt=0, description="the challenger's exported form (INT8 if "
                                       "published, else fp32) must be at most this many megabytes; null = no limit")
    requires_live_win: bool = Field(False, description="the challenger must also win the A/B on live traffic (the "
                                    "rows the champion served in the retrain window): better on accuracy (McNemar) or "
                                    "ROC AUC (DeLong) at 1 - training.gate.confidence, significantly worse on neither")


class ExportConfig(_Section):
    """``training.export``: the deployment forms of every registered version (trainer/deployment.py)."""
    onnx: bool = Field(True, description="export every registered version to ONNX (fp32 and INT8), checked against "
                       "PyTorch, as artifacts of its run (onnx/)")
    parity_tolerance: float = Field(1e-4, gt=0, description="max |score difference| between ONNX fp32 and PyTorch on "
                                    "the reference rows for the fp32 form to be published")
    int8_parity_tolerance: float = Field(0.05, gt=0, description="max |score difference| between ONNX INT8 and "
                                         "PyTorch on the reference rows for the INT8 form to be published")
    int8_min_accuracy_ratio: float = Field(0.98, gt=0, le=1, description="an ONNX form is published only if its "
                                           "held-out accuracy is at least this share of PyTorch's")


class ShadowConfig(_Section):
    """``training.shadow``: a challenger that passed the gate scores live traffic first (trainer/shadow.py)."""
    windows: int = Field(0, ge=0, description="a challenger that passes the gate stays under the 'challenger' alias "
                         "and scores this many check windows of live traffic beside the champion before it becomes "
                         "champion (rejected if significantly worse); 0 = off")


# The flat training keys of 0.x, accepted for one more release: old key -> (section, new key).
DEPRECATED_TRAINING_KEYS: dict[str, tuple[str, str]] = {
    "promote_min_accuracy_gain": ("gate", "min_accuracy_gain"),
    "promote_min_auc_gain": ("gate", "min_auc_gain"),
    "promote_min_mae_gain": ("gate", "min_mae_gain"),
    "reference_floor": ("gate", "reference_floor"),
    "gate_confidence": ("gate", "confidence"),
    "max_latency_ms": ("gate", "max_latency_ms"),
    "max_model_mb": ("gate", "max_model_mb"),
    "promote_requires_live_win": ("gate", "requires_live_win"),
    "export_onnx": ("export", "onnx"),
    "export_parity_tolerance": ("export", "parity_tolerance"),
    "int8_parity_tolerance": ("export", "int8_parity_tolerance"),
    "int8_min_accuracy_ratio": ("export", "int8_min_accuracy_ratio"),
    "shadow_windows": ("shadow", "windows"),
}


def _move_deprecated_training_keys(data: Any) -> Any:
    """The old flat keys moved to their sections, one FutureWarning per key used; a key given both
    ways with different values is an error naming both."""
    if not isinstance(data, dict) or not any(k in DEPRECATED_TRAINING_KEYS for k in data):
        return data
    out = {k: v for k, v in data.items() if k not in DEPRECATED_TRAINING_KEYS}
    for old, value in data.items():
        if old not in DEPRECATED_TRAINING_KEYS:
            continue
        section, new = DEPRECATED_TRAINING_KEYS[old]
        given = out.get(section)
        if given is None:
            given = {}
        if not isinstance(given, dict):
            continue  # the section's own validation reports it
        if new in given and given[new] != value:
            raise ValueError(f"training.{old} ({value!r}) and training.{section}.{new} ({given[new]!r}) are both "
                             f"given and differ: keep only training.{section}.{new}")
        warnings.warn(f"training.{old} is deprecated: use training.{section}.{new}", FutureWarning, stacklevel=2)
        out[section] = {**given, new: value}
    return out


class TrainingConfig(_Section):
    epochs: int = Field(60, ge=1, description="upper bound; early stopping usually ends sooner")
    retrain_epochs: int = Field(8, ge=1, description="a warm start converges in a few epochs")
    batch_size: int = Field(64, ge=1, description="rows per micro-batch and process")
    learning_rate: float = Field(2e-3, gt=0, description="AdamW learning rate; cosine decay to 10 %")
    retrain_lr_factor: float = Field(0.5, gt=0, le=1, description="retrain LR = learning_rate * this")
    weight_decay: float = Field(1e-4, ge=0, description="AdamW weight decay")
    hidden: list[int] = Field(default_factory=lambda: [64, 32], description="hidden layer widths of the default MLP")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout of the default MLP")
    patience: int = Field(5, ge=1, description="epochs without validation improvement before stopping")
    seed: int = Field(42, description="seed of the Python, numpy and torch RNGs")
    deterministic: bool = Field(False, description="torch's deterministic algorithms (slower; bitwise repeatable)")
    amp: Literal["auto", "off", "bf16", "fp16"] = Field("auto", description="auto (fp16 on CUDA, off on CPU), off, "
                                                                            "bf16 or fp16")
    grad_accum_steps: int = Field(1, ge=1, description="micro-batches per optimizer step")
    grad_clip: float | None = Field(1.0, gt=0, description="max gradient norm; null disables clipping")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes; 0 (the fastest for tensors in memory) "
                                                  "indexes batches directly, on the GPU when the rows fit in a quarter "
                                                  "of its free memory")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N")
    checkpoint_every_minutes: float = Field(5.0, gt=0, description="how often a checkpoint is written, plus one at "
                                                                   "every epoch end")
    validation_fraction: float = Field(0.2, gt=0, lt=1,
                                       description="share of the training rows used for early stopping")
    replay_ratio: float = Field(0.5, ge=0, description="reference rows replayed per recent row")
    holdout_fraction: float = Field(0.3, gt=0, lt=1, description="test rows (train), or held-out recent rows for the "
                                                                 "promotion gate (retrain)")
    min_rows: int = Field(200, ge=10, description="fewer labelled rows is a DataError")
    gradient_checkpointing: bool = Field(False,
                                         description="recompute activations in backward (models that support it)")
    threads: int = Field(0, ge=0, description="CPU threads for training; 0 keeps torch's default (one per core)")
    progress: bool = Field(True, description="progress bar on stderr (only when stderr is a terminal)")
    entrypoint: str | None = Field(None, description="'package.module:Object': your own PyTorch model and data "
                                   "code (build_model(task, n_outputs), dataset(refs, train), optional embed(model, "
                                   "x)), trained by driftloop's loop on the rows' input_uri; default: the tabular MLP "
                                   "(docs/parts/trainer.md, 'Your own training code')")
    compile: bool = Field(False, description="torch.compile the model for training: faster steps on a GPU once "
                                             "compiled, "
                          "but the first steps wait for compilation (tens of seconds) and it needs a C++ compiler; "
                          "worth it for long runs, not for short retrains")
    reference_sample: int = Field(5000, ge=100,
                                  description="rows in a baseline's reference sample, held-out rows first")
    max_rows: int = Field(50_000, ge=100, description="labelled rows a retrain learns from at most: every row since "
                          "the incident's change point (or its last healthy window), newest first up to this many, so "
                          "each retry of an incident sees all the evidence gathered since the change")
    min_post_change_rows: int | None = Field(None, ge=10, description="labelled rows after the detected change point "
                                             "before retraining starts (fewer means wait, not train on the old "
                                             "concept); "
                                             "default max(training.min_rows, 300 / training.holdout_fraction), fewer "
                                             "for a "
                                             "classifier whose drop the rows after the change prove large (down to "
                                             "100 held-out rows)")
    try_previous_versions: int = Field(3, ge=0, description="before training, score this many earlier champions "
                                       "(newest first) on the held-out recent rows and reinstate the first that "
                                       "passes the same gate against the champion (a recurring concept: no "
                                       "training, recorded as a promotion); 0 = off")
    review_interval_checks: int = Field(10, ge=0, description="champion review: every this many successful checks "
                                        "(also while an incident is open but not retraining, its promotion then; and "
                                        "after every incident ends), the champion, the last "
                                        "training.review_versions champions and the first champion are scored on the "
                                        "latest training.review_rows labelled rows; an earlier version significantly "
                                        "better by the paired tests (McNemar / DeLong / paired t at 1 - "
                                        "training.gate.confidence, "
                                        "Bonferroni over the versions) is reinstated; 0 = off")
    review_versions: int = Field(3, ge=1, le=10, description="champion review: how many earlier champions "
                                 "(newest first) it scores besides the first champion; bounded, as each costs one "
                                 "model load (once, then cached) and one scoring of training.review_rows rows")
    review_rows: int | None = Field(None, ge=100, description="champion review: the latest labelled rows every "
                                    "version is scored on; default drift.window_size")
    gate: GateConfig = Field(default_factory=GateConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    shadow: ShadowConfig = Field(default_factory=ShadowConfig)
    cold_start: Literal["auto", "always", "never"] = Field("auto", description="also train a fresh model beside the "
                                                           "warm start and keep the better on validation: 'auto' when "
                                                           "the champion's concept no longer holds on recent rows")

    @property
    def post_change_rows(self) -> int:
        import math
        if self.min_post_change_rows is not None:
            return self.min_post_change_rows
        return max(self.min_rows, math.ceil(300 / self.holdout_fraction))

    @model_validator(mode="before")
    @classmethod
    def _deprecated_keys(cls, data: Any) -> Any:
        return _move_deprecated_training_keys(data)

    @model_validator(mode="after")
    def _costs_need_export(self) -> "TrainingConfig":
        if not self.export.onnx and (self.gate.max_latency_ms is not None or self.gate.max_model_mb is not None):
            raise ValueError("gate.max_latency_ms / gate.max_model_mb are measured on the exported model: they need "
                             "export.onnx: true")
        return self

    @field_validator("amp", mode="before")
    @classmethod
    def _amp_off(cls, v: Any) -> Any:
        return "off" if v is False else v  # YAML reads an unquoted `amp: off` as false


class DriftloopConfig(_Section):
    home: Path = Field(Path("driftloop-data"), description="folder for everything embedded: the default store "
                       "(driftloop.db), MLflow (mlflow.db, mlartifacts/), Evidently reports (reports/), "
                       "checkpoints, retrain jobs")
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    exporter: ExporterConfig = Field(default_factory=ExporterConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    mlflow: MlflowConfig = Field(default_factory=MlflowConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)

    @model_validator(mode="after")
    def _rules_fit_task(self) -> "DriftloopConfig":
        if not self.model.task_configured:
            return self  # the champion says which task; monitor.daemon checks the rules then
        wrong = [r.key for r in self.alerts.rules if self.model.task not in RULE_METRIC_TASKS.get(r.metric, TASKS)]
        if wrong:
            raise ValueError(f"alerts.rules {', '.join(wrong)} do not apply to a {self.model.task} model "
                             "(docs: Tasks, which metrics each task has)")
        return self

    # Derived locations: one place decides where embedded defaults live.
    @property
    def store_url(self) -> str:
        return self.store.url or f"sqlite:///{(self.home / 'driftloop.db').resolve()}"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow.tracking_uri or f"sqlite:///{(self.home / 'mlflow.db').resolve()}"

    @property
    def artifact_root(self) -> Path:
        return (self.home / "mlartifacts").resolve()

    @property
    def experiment_name(self) -> str:
        return self.mlflow.experiment or f"driftloop-{self.model.name}"

    @property
    def registered_model_name(self) -> str:
        return self.mlflow.registered_model or f"driftloop-{self.model.name}"

    @property
    def reports_dir(self) -> Path:
        return self.home / "reports"

    @property
    def evidently_workspace(self) -> Path | None:
        """Where ``drift.workspace`` puts the Evidently workspace; None when it is off."""
        return self.home / self.drift.workspace if self.drift.workspace else None

    @property
    def checkpoints_dir(self) -> Path:
        return self.home / "checkpoints"


def _takes_text(path: list[str], optional: bool = False) -> bool:
    """Whether the key at ``path`` holds text (str, Path or a Literal of strings); with ``optional``, or None."""
    model: Any = DriftloopConfig
    for part in path[:-1]:
        field = model.model_fields.get(part)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return False
        model = field.annotation
    field = model.model_fields.get(path[-1])
    if field is None:
        return False
    kinds = get_args(field.annotation) if get_origin(field.annotation) in (Union, UnionType) else (field.annotation,)
    rest = [k for k in kinds if k is not type(None)]
    text = all(k in (str, Path) or (get_origin(k) is Literal and all(isinstance(a, str) for a in get_args(k)))
               for k in rest)
    return bool(rest) and text and (not optional or len(rest) < len(kinds))


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The ``DRIFTLOOP_*`` variables as a nested tree, and the problems found in their names.

    Ours rather than pydantic-settings (``env_prefix``, ``env_nested_delimiter="__"``), which was
    tried (2.16.3) and differs from the documented rules in ways each needing an override of its
    parsing: it drops a variable whose section is misspelt (``DRIFTLOOP_SERVR__PORT``) silently,
    where a typo must be an error; it keeps ``""`` as text, where an empty value unsets an optional
    key; it decodes lists as JSON (``[a, b]`` fails) and stops at the first undecodable value instead
    of reporting every problem together. It also reads ``os.environ`` only, and the tests inject it.
    """
    tree: dict[str, Any] = {}
    problems: list[str] = []
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX):].split("__")]
        if not all(path):
            problems.append(f"{key}: empty path segment (use DRIFTLOOP_SECTION__KEY)")
            continue
        if raw == "":
            value = None
        elif _takes_text(path):
            # Text keys (token, host, URLs, names, choices) take the variable verbatim: YAML would turn
            # a token '#x' into null (auth off), '::' into a mapping, 'off' into false and '0123' into 83.
            value = None if raw in ("null", "~") and _takes_text(path, optional=True) else raw
        else:
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError:
                value = raw
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                problems.append(f"{key}: conflicts with another variable")
                break
        else:
            node[path[-1]] = value
    return tree, problems


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _format_errors(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        # A whole section as the input says nothing more than the message, and may hold a token.
        shown = err["type"] != "extra_forbidden" and not isinstance(err.get("input"), dict)
        if err["loc"] and err["loc"][-1] == "token":  # never echo a secret into logs
            shown = False
        lines.append(f"{loc}: {msg} (got {err.get('input')!r})" if shown else f"{loc}: {msg}")
    return lines


def load_config(
    path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> DriftloopConfig:
    """Build the configuration. ``path`` None means ``$DRIFTLOOP_CONFIG`` or ``./driftloop.yaml`` if present.

    ``overrides`` (a nested dict, e.g. from CLI flags) win over everything else.
    """
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    data: dict[str, Any] = {}
    explicit = path is not None or ENV_PREFIX + "CONFIG" in environ
    file = Path(path if path is not None else environ.get(ENV_PREFIX + "CONFIG", DEFAULT_CONFIG_FILE))
    if file.exists():
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file}: cannot read the config file: {exc}") from exc
        try:
            loaded = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            # One line, as every CLI error: PyYAML's own text spans several and names "<unicode string>".
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ConfigError(f"{file}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: expected a mapping at the top level, got {type(loaded).__name__}")
        data = loaded
    elif explicit:
        raise ConfigError(f"config file not found: {file}")
    env_tree, env_problems = _env_overrides(environ)
    problems += env_problems
    data = _merge(data, env_tree)
    if overrides:
        data = _merge(data, dict(overrides))
    try:
        cfg = DriftloopConfig.model_validate(data)
    except ValidationError as exc:
        problems += _format_errors(exc, str(file))
        cfg = None
    if problems:
        where = f" ({file})" if file.exists() else ""
        raise ConfigError(f"invalid configuration{where}:\n  " + "\n  ".join(problems))
    assert cfg is not None
    return cfg
