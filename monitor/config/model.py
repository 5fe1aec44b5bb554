"""The ``model`` section (features, task, classes) and ``mlflow``."""
from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PlainSerializer, field_validator, model_validator

from monitor.embeddings import INPUT_URI, MAX_EMBEDDING_DIM
from monitor.finite import FLOAT32_MAX
from monitor.config.base import _Section
from monitor.tasks.task import Task, task_of


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
    # Written and read as its name; held as the task object (monitor/tasks/task.py) that the parts ask.
    task: Annotated[Literal["binary", "multiclass", "regression"], AfterValidator(task_of),
                   PlainSerializer(str, return_type=str)] = Field(
        "binary", validate_default=True,
        description="binary (one score, P(target = 1)), multiclass (a class and one probability per class) or "
        "regression (a predicted number). When left out, `driftloop train` infers it from the target "
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
    max_abs_value: float = Field(FLOAT32_MAX, ge=1.0, le=FLOAT32_MAX, description="largest magnitude of a "
                                 "numeric feature, a regression's predicted value and its label that ingestion "
                                 "accepts; a larger one is refused (422 naming the record and field). Default and "
                                 "most: float32's largest finite number, 3.4e38 (a check reads stored values within "
                                 "float32's range: docs: Ingestion)")
    max_future_seconds: float | None = Field(
        366 * 86_400, gt=0, description="a ts more than this many seconds after the server's clock is refused "
        "(422 naming the record and field). A check's window is the newest rows by ts: rows stamped years ahead "
        "(a typo in the year, a clock set wrong) would be the newest for years and hide live traffic from every "
        "check. null accepts any time before 2262")
    input_roots: list[str] = Field(
        default_factory=list, description="folders a prediction's input_uri may name, as a path or file:// URI "
        "(relative folders from the working directory; a relative input_uri from the first one). Resolved after "
        "`..` and symlinks, it must lie inside one: anything else is refused at ingest (422 naming input_uri) "
        "and never opened. Empty (the default): every path is refused. training.entrypoint's dataset gets the "
        "resolved path, checked again before each retrain; rows whose input no longer resolves or cannot be "
        "read are skipped and counted (docs: Images and text)")
    input_schemes: list[str] = Field(
        default_factory=list, description="URI schemes an input_uri may have besides paths, e.g. [s3, gs]: "
        "stored and handed to training.entrypoint's dataset as they are (driftloop never opens them; your code "
        "does, so list only schemes it fetches from places you trust). Others (http, ...) are refused")

    @field_validator("name")
    @classmethod
    def _table_safe(cls, v: str) -> str:
        # The store names its tables after the model (predictions_<name>); PostgreSQL allows 63 bytes.
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,47}", v):
            raise ValueError(f"model name {v!r} must be 1-48 letters, digits, '_', '.' or '-', starting with a letter "
                             "or digit")
        return v

    @field_validator("input_roots")
    @classmethod
    def _folders(cls, v: list[str]) -> list[str]:
        if any(not r or "\x00" in r for r in v):
            raise ValueError("input_roots must be folder paths (non-empty, without NUL)")
        return v

    @field_validator("input_schemes")
    @classmethod
    def _schemes(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", s)]
        if bad:
            raise ValueError(f"input_schemes must be URI schemes without ':' or '//' (e.g. s3, gs), got "
                             f"{', '.join(map(repr, bad))}")
        if any(s.lower() == "file" for s in v):
            raise ValueError("input_schemes: file:// URIs are paths; list their folders in model.input_roots")
        return [s.lower() for s in v]

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
        self.kind.check_classes(classes)
        if len(set(classes)) < len(classes):
            raise ValueError("classes must not repeat")
        if any(not c or c != c.strip() for c in classes):
            raise ValueError("class names must be non-empty and without surrounding whitespace")

    @property
    def task_configured(self) -> bool:
        """Whether ``task`` was given rather than left at the default (then the data or the champion says)."""
        return "task" in self.model_fields_set

    @property
    def kind(self) -> Task:
        """The model's task as the object the parts ask (``task`` is that object after validation;
        this also holds on a copy made with ``model_copy(update={"task": "..."})``, which skips it)."""
        return task_of(self.task)

    @property
    def n_classes(self) -> int:
        """Classes of a classifier (2 for binary); 0 for regression."""
        return self.kind.n_classes(self.classes)

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
