"""What differs per kind of model: the :class:`Task` object (STYLE.md, habit 15).

A model's task is one of three objects, :data:`BINARY`, :data:`MULTICLASS` and :data:`REGRESSION`,
instances of :class:`BinaryTask`, :class:`MulticlassTask` and :class:`RegressionTask`. A part of
driftloop asks the model's task what to do (which figures, which rule, which loss, which columns)
instead of comparing ``task == "regression"``; everything that differs between the three lives in
these classes, so a fourth task is one more class, not one more branch in every module.

A task *is* its name: :class:`Task` subclasses ``str``, so ``driftloop.yaml``, JSON records,
MLflow tags, log lines and the store keep carrying ``"binary"``, ``"multiclass"`` or
``"regression"`` unchanged, and :func:`task_of` turns any such name (or a task) into the object.
A task pickles as its plain name, so a model pickled with a task inside it loads where driftloop
is not installed (trainer/pyfunc.py); copies are the same object.

Methods are grouped by the part that asks: identity and outputs, performance figures, alert
rules and estimation (monitor), training (trainer). Nothing here imports torch, MLflow or Evidently
at module level: the bottom layer stays light.
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from monitor.tasks.columns import internal_proba_columns


class Task(str):
    """One kind of model. Subclasses set :attr:`name` and override what differs."""

    name: ClassVar[str]
    #: Whether outputs are classes with probabilities (binary, multiclass) rather than a number.
    #: For the task classes' own use and for data that must say it (JSON, docs); a part that needs
    #: to *act* differently asks a method instead (tests/test_task_branches.py keeps that so).
    classifier: ClassVar[bool]

    def __new__(cls) -> "Task":
        return super().__new__(cls, cls.name)

    # A task pickles as its name (a model pickled by value must load without driftloop) and is
    # never copied: there is one object per task.
    def __reduce__(self) -> tuple[Any, ...]:
        return (str, (str(self),))

    def __copy__(self) -> "Task":
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "Task":
        return self

    # -- identity and outputs -------------------------------------------------------------------

    def n_classes(self, classes: Sequence[str] | None) -> int:
        """Classes of a classifier (2 for binary unless named); 0 for regression."""
        raise NotImplementedError

    def n_outputs(self, classes: Sequence[str] | None) -> int:
        """Width of the model's raw output: K logits for multiclass, one number otherwise."""
        return 1

    def proba_columns(self, n_classes: int) -> list[str]:
        """The window frame's per-class probability columns (``__proba_<i>``); none unless multiclass."""
        return []

    def check_classes(self, classes: Sequence[str]) -> None:
        """Raise ``ValueError`` naming what is wrong when ``classes`` do not fit this task."""
        raise NotImplementedError

    # -- performance figures ---------------------------------------------------------------------

    #: The figure a check, a concept test and a reference comparison lead with.
    primary_metric: ClassVar[str]
    #: The two figures people read first (status, retrain summaries, gate verdicts), in order.
    lead_metrics: ClassVar[tuple[str, str]]

    def metric_label(self, metric: str) -> str:
        """How a person reads ``metric`` for this task ("macro ROC AUC" for a multiclass roc_auc)."""
        return _LABELS.get(metric, metric)

    def performance(self, y_true: np.ndarray, y_pred: np.ndarray, scores: np.ndarray,
                    proba: np.ndarray | None = None, n_classes: int = 2, confidence: float = 0.95) -> Any:
        """The performance (:class:`monitor.stats.Performance`) of a model of this task on labelled rows."""
        raise NotImplementedError

    def per_row_loss(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        """The per-row error a change-point scan and a paired test use: 0/1 misclassification for a
        classifier, the absolute error for regression."""
        return (np.asarray(y_pred) != np.asarray(y_true)).astype(np.float64)

    # -- records, ingestion, schema and commands -------------------------------------------------

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------


_LABELS = {"accuracy": "accuracy", "roc_auc": "ROC AUC", "mae": "MAE", "rmse": "RMSE", "mape": "MAPE", "r2": "R²",
           "f1": "F1", "macro_f1": "macro F1", "weighted_f1": "weighted F1", "precision": "precision",
           "recall": "recall"}


class _Classifier(Task):
    """What binary and multiclass models share: classes, accuracy and ROC AUC."""

    classifier = True
    primary_metric = "accuracy"
    lead_metrics = ("accuracy", "roc_auc")

    def n_classes(self, classes: Sequence[str] | None) -> int:
        return len(classes) if classes else 2

    # -- records, ingestion, schema and commands -------------------------------------------------

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------


class BinaryTask(_Classifier):
    """One score, P(target = 1); labels 0/1 or the two ``model.classes`` [negative, positive]."""

    name = "binary"

    def check_classes(self, classes: Sequence[str]) -> None:
        if len(classes) != 2:
            raise ValueError(f"a binary model has two classes [negative, positive], got {len(classes)}")

    def performance(self, y_true: np.ndarray, y_pred: np.ndarray, scores: np.ndarray,
                    proba: np.ndarray | None = None, n_classes: int = 2, confidence: float = 0.95) -> Any:
        from monitor.stats import performance
        return performance(y_true, y_pred, scores, confidence)

    # -- records, ingestion, schema and commands -------------------------------------------------

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------


class MulticlassTask(_Classifier):
    """2-100 named classes; a served class and one probability per class."""

    name = "multiclass"

    def n_outputs(self, classes: Sequence[str] | None) -> int:
        return len(classes or ())

    def proba_columns(self, n_classes: int) -> list[str]:
        return internal_proba_columns(n_classes)

    def check_classes(self, classes: Sequence[str]) -> None:
        if not 2 <= len(classes) <= 100:
            raise ValueError(f"a multiclass model has 2 to 100 classes, got {len(classes)}")

    def metric_label(self, metric: str) -> str:
        return "macro ROC AUC" if metric == "roc_auc" else super().metric_label(metric)

    def performance(self, y_true: np.ndarray, y_pred: np.ndarray, scores: np.ndarray,
                    proba: np.ndarray | None = None, n_classes: int = 2, confidence: float = 0.95) -> Any:
        from monitor.taskstats import multiclass_performance
        return multiclass_performance(y_true, y_pred, proba, n_classes, confidence)

    # -- records, ingestion, schema and commands -------------------------------------------------

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------


class RegressionTask(Task):
    """A predicted number; errors (MAE, RMSE, MAPE, R²) instead of classes."""

    name = "regression"
    classifier = False
    primary_metric = "mae"
    lead_metrics = ("mae", "rmse")

    def n_classes(self, classes: Sequence[str] | None) -> int:
        return 0

    def check_classes(self, classes: Sequence[str]) -> None:
        raise ValueError("classes are for classification; a regression model has none (unset model.classes)")

    def performance(self, y_true: np.ndarray, y_pred: np.ndarray, scores: np.ndarray,
                    proba: np.ndarray | None = None, n_classes: int = 2, confidence: float = 0.95) -> Any:
        from monitor.taskstats import regression_performance
        return regression_performance(y_true, y_pred, confidence)

    def per_row_loss(self, y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
        return np.abs(np.asarray(y_pred, dtype=np.float64) - np.asarray(y_true, dtype=np.float64))

    # -- records, ingestion, schema and commands -------------------------------------------------

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------


BINARY = BinaryTask()
MULTICLASS = MulticlassTask()
REGRESSION = RegressionTask()
_BY_NAME: dict[str, Task] = {t.name: t for t in (BINARY, MULTICLASS, REGRESSION)}
#: The task names, in the order docs and errors list them.
TASKS: tuple[str, ...] = tuple(_BY_NAME)


def task_of(task: "str | Task | Any") -> Task:
    """The task object of a task name, a task, or anything with a ``task`` attribute (a
    ``ModelConfig``); ``ValueError`` naming the three for anything else."""
    if isinstance(task, Task):
        return task
    name = getattr(task, "task", task)
    if isinstance(name, Task):
        return name
    try:
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {name!r}") from None
