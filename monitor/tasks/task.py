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

from typing import Any, Callable, ClassVar, Mapping, Sequence

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

    #: The key a prediction record carries the model's output under (docs/CONTRACTS.md); also the
    #: exported graph's one output (an export manifest's ``output``; monitor/onnx_scoring.py).
    record_output: ClassVar[str]
    #: What that output holds and its shape, as an export's manifest says it.
    output_text: ClassVar[str]
    #: Output keys a prediction record may leave out (a classifier's served class, derived when absent).
    optional_outputs: ClassVar[tuple[str, ...]] = ()
    #: The output keys a record may send under their configured names (``model.score``, ``model.prediction``).
    aliased_outputs: ClassVar[tuple[str, ...]] = ("prediction",)
    #: How the schema of a label record describes the target.
    label_text: ClassVar[str]

    def prediction_fields(self) -> tuple[frozenset[str], frozenset[str]]:
        """``(allowed, required)`` fields of a prediction record: the common ones and this task's outputs."""
        outputs = {self.record_output, *self.optional_outputs}
        return (frozenset({"id", "ts", "features", "model_version", "input_uri", *outputs}),
                frozenset({"id", "features", self.record_output}))

    def batch_probas(self, n_classes: int) -> list[list[float]] | None:
        """The per-class probability columns of a batch without rows: none unless records carry them."""
        return None

    def fast_outputs(self, records: list, classes: list[str] | None, class_index: dict[str, int] | None,
                     threshold: float) -> tuple[list, list, list, list[list[float]] | None] | None:
        """A batch's ``(scores, class indices, prediction given, class probabilities)`` read column by
        column (:mod:`monitor.records.fastpath`); None when a record needs the record-by-record pass."""
        raise NotImplementedError

    def fast_labels(self, raw: list, class_index: dict[str, int] | None) -> list | None:
        """A batch's label values as stored (a number, or a class index), read column by column; None
        when one needs the record-by-record pass's words."""
        from monitor.records import fastpath
        return fastpath.class_indices(raw, class_index)

    def read_outputs(self, record: Any) -> tuple[Any, Any, bool, list[float] | None]:
        """``(score, class index or None, prediction given, class probabilities)`` of one prediction
        record, each field checked by ``record`` (monitor.records.slowpass: ``required``, ``optional``,
        ``failed`` and the class checks), which lists what is wrong; the score is None once it failed."""
        raise NotImplementedError

    def read_label(self, value: Any, classes: Any) -> Any:
        """One label value as stored; ``FieldError`` saying why not. ``classes`` checks a class
        (``class_of``, ``binary_class``: monitor.records.slowpass)."""
        return classes.class_of(value)

    def output_array(self, out: np.ndarray) -> np.ndarray:
        """An exported graph's output as ``predict_proba`` returns it: ``(n,)``, or ``(n, K)`` per class."""
        return out.reshape(-1)

    def service_output(self, output: np.ndarray, classes: Sequence[str] | None, index: Any,
                       prediction: str) -> Any:
        """What the pyfunc serves for ``output`` (monitor.onnx_scoring.served): the output as it is, or a
        DataFrame on ``index`` with the ``prediction`` column (and, per class, ``proba_<class>``)."""
        return output

    def fit_target(self, target: Any) -> Any:
        """This task as chosen with ``--task`` for ``target`` (a pandas Series): its
        :class:`~monitor.tasks.inference.InferredTask`, or a ``DataError`` naming the target when the
        values do not fit (monitor.dataschema.resolve_task)."""
        raise NotImplementedError

    def target_comment(self, classes: Sequence[str] | None) -> str:
        """What ``driftloop init`` writes next to ``model.target``: what a label of this task is."""
        raise NotImplementedError

    def classes_comment(self) -> str:
        """What ``driftloop init`` writes next to ``model.classes``: why their order matters."""
        return ""

    def summary(self, classes: Sequence[str] | None) -> str:
        """The task as a one-line summary names it (``multiclass (3 classes)``)."""
        return self.name

    def prediction_properties(self, model: Any, class_schema: Callable[[str], dict[str, Any]],
                              probabilities: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The JSON Schema properties of this task's outputs in a prediction record of ``model``
        (monitor/ingest/openapi.py): ``class_schema(description)`` is a class's schema and
        ``probabilities()`` the class probabilities'."""
        raise NotImplementedError

    def label_schema(self, classes: Sequence[str] | None,
                     class_schema: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        """The JSON Schema of a label value; ``class_schema(description)`` is a class's schema."""
        return class_schema("the true class")

    def example_classes(self, examples: list[str]) -> list[str] | None:
        """The classes an example record of this task shows when the model is of another task."""
        return None

    def example_outputs(self, classes: Sequence[str]) -> dict[str, Any]:
        """The outputs of an example prediction record (the OpenAPI document); ``classes`` to name."""
        raise NotImplementedError

    def example_label(self, classes: Sequence[str]) -> Any:
        """The label value of an example label record; ``classes`` to name."""
        return classes[0]

    def labels_within(self, labels: list, limit: float) -> bool:
        """Whether a batch's parsed labels respect ``model.max_abs_value`` (the fast path's check):
        class labels are classes, not magnitudes, so always."""
        return True

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    #: How the store keeps a label (monitor.store.schema): ``class`` (0/1 or a class index, a small
    #: integer) or ``numeric`` (a number, a double).
    stored_label: ClassVar[str]
    #: The problem the drift package fits the label-free estimator and builds Evidently's performance
    #: report for (NannyML's names); monitor/drift keeps one table of each, keyed by it.
    problem_type: ClassVar[str]
    #: The kind of column label drift tests the target as ("categorical" or "numeric", the kinds of
    #: monitor.drift.methods); None: the labels are not tested for drift (a 0/1 label's shift is seen
    #: by the performance figures already).
    label_drift_kind: ClassVar[str | None] = None

    def valid_targets(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        """Which present target values (floats) this task reads: a mask over ``y``."""
        raise NotImplementedError

    def expected_targets(self, n_classes: int) -> str:
        """What the target column must hold, as the error naming a bad value says it."""
        raise NotImplementedError

    def label_array(self, y: np.ndarray) -> np.ndarray:
        """The labelled rows' targets (floats, none missing) as the task's rows hold them."""
        return y

    def served_rows(self, score: np.ndarray, proba: np.ndarray | None, prediction: np.ndarray | None,
                    threshold: float) -> np.ndarray:
        """What the model served on rows (their score, class probabilities and prediction column,
        NaN where a row has none; None: no such columns): the predicted value, which is the score."""
        return score

    def row_outcomes(self, y: np.ndarray, served: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Per row, ``(correct, abs_error)``: 1.0 where the served class is the label (NaN label: 0),
        or the served value's absolute error (NaN without a label); the one a task lacks is None.
        Per-segment figures are accuracy for the first, the MAE for the second."""
        raise NotImplementedError

    def positive_labels(self, y: np.ndarray) -> np.ndarray:
        """The labels as recall and ROC AUC per segment count them (1: the positive class; NaN kept):
        only a binary model has a positive class, so no row of another task is positive."""
        return np.where(np.isnan(y), np.nan, 0.0)

    def served_figures(self, served: np.ndarray) -> dict[str, float]:
        """Figures of the served outputs alone, without labels (a binary model's served positive rate)."""
        return {}

    def check_fields(self, perf: Any, names: list[str], classes: Sequence[str] | None,
                     baseline: Any) -> dict[str, Any]:
        """A check result's fields beyond accuracy and ROC AUC (``perf``: the window's
        :class:`monitor.stats.Performance`; ``names``: the class names; ``baseline``: the
        champion's logged figures): the configured classes by default."""
        return {"classes": list(classes)} if classes else {}

    def report_class_columns(self, names: list[str]) -> list[str]:
        """The performance frames' probability columns, one per class named by it (Evidently reads
        the classes off them): none but a multiclass model's."""
        return []

    def report_frame(self, y: np.ndarray, pred: np.ndarray, score: np.ndarray, proba: np.ndarray | None,
                     names: list[str], columns: tuple[str, str, str]) -> dict[str, Any]:
        """The columns of a performance frame (Evidently's report) of labelled rows, by name
        (``columns``: the frame's target, prediction and score names; ``proba``: None to leave the
        probabilities out)."""
        raise NotImplementedError


    def served_column(self, score: str, prediction: str) -> str:
        """The stored column a window frame's ``prediction`` column reads: the stored prediction."""
        return prediction

    def reference_shift_fields(self, perf: Any, reference: Mapping[str, float]) -> dict[str, Any]:
        """CheckResult's figures measured against the champion's own figures on its reference
        (``PreparedReference.metrics``): none for a classifier (its bars are the baselines)."""
        return {}

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    #: The metrics an ``alerts.rules`` entry judges for one class (``{metric: recall, class: night}``),
    #: which are also the per-class figures ``driftloop check`` tables: none for a task without
    #: classes to split by (binary's precision and recall are of its positive class).
    class_metrics: ClassVar[tuple[str, ...]] = ()
    #: The figures a check reports at ``model.threshold`` (one score cut into 0/1): binary's.
    threshold_metrics: ClassVar[tuple[str, ...]] = ()
    #: Where the label-free estimates come from, as ``driftloop status`` says it.
    estimation_source: ClassVar[str]
    #: The same as ``driftloop check`` heads its table of estimates.
    estimation_source_detail: ClassVar[str]

    def default_rules(self, alerts: Any) -> tuple[tuple[str, float, str], ...]:
        """The default breaches ``(metric, threshold, mode)``, headline first, from the ``alerts``
        config section: what a check, the fast lane, a segment and a re-scan are judged on when no
        ``alerts.rules`` entry says more."""
        raise NotImplementedError

    def rule_class_problem(self, key: str, metric: str, class_name: str | None) -> str | None:
        """Why an ``alerts.rules`` entry's class (or its missing class) does not fit this task; None
        when it fits. Only multiclass judges a metric per class."""
        if class_name is not None:
            return f"{key}: class is for multiclass models ({self} {metric} is of the positive class)"
        return None

    def label_values(self, column: Any) -> np.ndarray:
        """A target or served column (pandas) as the array a per-row loss compares: class indices."""
        return np.asarray(column.astype("int64").to_numpy())

    def served_output(self, out: np.ndarray, threshold: float) -> np.ndarray:
        """What a model serves for its raw output (``predict_proba``): the prediction of :meth:`served`
        (a class for a classifier, the value itself for regression)."""
        return self.served(out, threshold)[0]

    def loss_figure(self, loss: np.ndarray) -> float:
        """The headline figure (:attr:`primary_metric`) of per-row losses (:meth:`per_row_loss`)."""
        raise NotImplementedError

    def proven_drop(self, y: np.ndarray, pred: np.ndarray, bar: float, confidence: float) -> float:
        """How far below ``bar`` the served accuracy of labelled rows provably is (the conservative end
        of its interval; <= 0: not proven), which sizes a retrain's wait for held-out rows (McNemar).
        0 for a task without accuracy: it waits the configured count."""
        return 0.0

    def reference_figures(self, metrics: Any) -> str:
        """A champion's figures a reference level keeps (``metrics``: name to value), as a log line says them."""
        raise NotImplementedError

    def shown_interval(self, ci: Any) -> Any:
        """The interval ``driftloop status`` prints beside a realised figure (``ci`` or None)."""
        return ci

    def status_estimates(self, others: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
        """The estimates ``driftloop status`` prints after the headline one (``(name, estimate, band)``):
        those there are."""
        return [o for o in others if o[1] is not None]

    #: The realised figures people see (``driftloop check``/``status``, ``GET /v1/status``), headline first.
    realised_figures: ClassVar[tuple[str, ...]]
    #: The label-free estimates people see (bands where the estimator gives one).
    estimated_figures: ClassVar[tuple[str, ...]]
    #: Keys of a check result that /v1/status's last_check carries for this task, beyond binary's.
    status_keys: ClassVar[tuple[str, ...]] = ()

    def what_it_predicts(self, target: str, classes: Sequence[str] | None) -> str:
        """What a model of this task predicts, for its description in the registry."""
        raise NotImplementedError

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    def target_values(self, raw: Any, target: str, classes: Sequence[str] | None, what: str = "training data",
                      indices: bool = False) -> Any:
        """The target column ``raw`` (a pandas Series, index reset) as the model learns it
        (trainer/data.py's :func:`~trainer.data.target_values`): a ``DataError`` naming the column,
        the count and the first bad row when a value does not fit this task, or nothing varies."""
        raise NotImplementedError

    def hold_out(self, y: np.ndarray, fraction: float, rng: np.random.Generator, what: str,
                 part: str, names: Sequence[str] = ()) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The rows a held-out set takes (a boolean mask over ``y``, about ``fraction`` of them),
        and the ``(class, rows)`` too small to be on both sides, kept for training: a
        ``DataError`` when too few rows are left to make both sides mean something (naming a
        class by ``names[index]`` when given)."""
        raise NotImplementedError

    def target_scaling(self, y: np.ndarray) -> tuple[float, float]:
        """``(mean, std)`` of the scale the network learns the target on: (0, 1), the target as
        it is, unless the target is a number of any size (regression)."""
        return 0.0, 1.0

    def factory_kwargs(self, n_outputs: int) -> dict[str, int]:
        """The keywords a ``model.factory`` is called with besides its positional arguments: none,
        so a factory written for one output keeps working; a multiclass one gets ``n_outputs=K``."""
        return {}

    def target_tensor(self, model: Any, y: np.ndarray) -> Any:
        """The targets a loss of this task takes, as a torch tensor: float32 0/1 here; the model
        (its ``scaled_target``) only matters to a task that learns a rescaled target."""
        import torch
        return torch.as_tensor(y, dtype=torch.float32)

    def loss(self, raw: Any, y: Any, weight: Any = None) -> Any:
        """The training loss of a raw output (a torch tensor; fp32, mean over the rows), ``weight``
        the per-class weights of :meth:`loss_weight`."""
        raise NotImplementedError

    def loss_weight(self, labels: Callable[[], Any], n_classes: Callable[[Any], int], device: Any) -> Any:
        """The per-class weights :meth:`loss` takes, on ``device``: none for a task whose classes
        are not weighed, so ``labels`` (every training label, read only when needed) is not read."""
        return None

    def evaluation(self, logits: Any, y: Any, model: Any) -> dict[str, float]:
        """The early-stopping ``loss`` of raw outputs ``logits`` (on their device) against the
        loop's targets ``y`` (on the CPU), with the task's two lead figures."""
        raise NotImplementedError

    #: What an exported form's parity measures, as the export table says it (trainer/forms.py).
    parity_text: ClassVar[str]

    def parity_unit(self, model: Any, reference: Any, target: str) -> float | None:
        """The unit an exported form's parity is divided by, for outputs of any size; None when
        the outputs are probabilities, whose difference already means the same for every model."""
        return None

    def held_out_refusal(self, figures: dict[str, float], torch_figures: dict[str, float], min_ratio: float) -> str:
        """Why an exported form is refused on its held-out figures against PyTorch's (``""``: it is not)."""
        raise NotImplementedError

    @staticmethod
    def _first_bad(raw: Any, bad: np.ndarray) -> tuple[int, int, object]:
        """``(count, first row, first value)`` of the bad values of ``raw``, for a DataError."""
        rows = np.nonzero(bad)[0]
        first = raw.iloc[rows[0]]
        return len(rows), int(rows[0]), first.item() if isinstance(first, np.generic) else first

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------

    #: The figures the paired tests compare (live A/B, champion review), the headline figure first.
    paired_metrics: ClassVar[tuple[str, ...]]
    #: How close two models' outputs on the same rows are: (LiveComparison's field, how people read it).
    closeness_figure: ClassVar[tuple[str, str]]

    def served(self, out: Any, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(prediction, score, proba)`` of a served output (``predict_proba``) as window frames carry them."""
        raise NotImplementedError

    def served_columns(self, out: Any, threshold: float, score: str, prediction: str) -> dict[str, Any]:
        """The columns a reference sample carries for a model's output ``out``, as a store window carries
        what was served: the score and the prediction (and, multiclass, one ``__proba_<i>`` per class)."""
        pred, value, _ = self.served(out, threshold)
        return {score: value, prediction: pred}

    def window_output(self, window: Any, score: str, n_classes: int) -> np.ndarray | str:
        """What a window says was served, shaped like ``predict_proba``'s output (NaN where nothing was):
        the ``score`` column, or why the window does not say."""
        import pandas as pd
        return pd.to_numeric(window[score], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

    def figures(self, y_true: Any, out: Any, threshold: float = 0.5) -> dict[str, float]:
        """The task's figures (trainer.metrics' table) of a served output against the targets; NaN where
        undefined."""
        raise NotImplementedError

    def reference_figure(self, y_true: Any, out: Any, threshold: float = 0.5) -> float:
        """The one figure (:attr:`primary_metric`) the gate's forgetting bound and the concept check compare."""
        raise NotImplementedError

    def headline(self, metrics: dict[str, float]) -> str:
        """The leading figures of ``metrics`` as the CLI and the log say them."""
        raise NotImplementedError

    def ranking(self, figures: dict[str, float]) -> tuple[float, float]:
        """A sort key of a model's figures, higher is better: the two :attr:`lead_metrics`."""
        first, second = self.lead_metrics
        return (figures[first], figures[second])

    def gains(self, challenger: dict[str, float], champion: dict[str, float]) -> dict[str, float]:
        """The gains of a gate comparison (run metrics ``<figure>_gain``), each positive when better."""
        raise NotImplementedError

    def paired_auc(self, y: Any, a: Any, b: Any) -> Any:
        """The paired DeLong test (:class:`monitor.paired.PairedAuc`) of outputs ``b`` against ``a`` on
        labelled rows ``y``; None where the task has no ROC AUC or it is undefined."""
        return None

    def paired_tests(self, y: Any, a: Any, b: Any,
                     threshold: float) -> list[tuple[str, str, str, float, float, float | None, bool]]:
        """``(metric, label, test, a's, b's, p-value, higher is better)`` per paired test (monitor.paired)
        of two models' outputs ``a`` and ``b`` on the same labelled rows ``y``, :attr:`paired_metrics` order."""
        raise NotImplementedError

    def closeness(self, a: Any, b: Any, threshold: float) -> float:
        """How close two outputs on the same rows are (:attr:`closeness_figure`)."""
        raise NotImplementedError

    def drift_output(self, out: Any, threshold: float) -> tuple[np.ndarray, str]:
        """What the live output-drift test compares of an output, and its column kind for the drift runner."""
        return np.asarray(out), "numeric"

    def output_column(self, score: str, prediction: str) -> str:
        """The column that names the served output in drift reports (the score, or the prediction)."""
        return prediction

    def concept_holds(self, on_recent: float, on_reference: float, alerts: Any) -> bool:
        """Whether a champion's :meth:`reference_figure` on recent rows is within ``alerts``' tolerance of
        the same on its own reference sample (its concept still holds)."""
        raise NotImplementedError

    def output_classes(self, classes: Sequence[str] | None) -> Any:
        """What of ``classes`` decides a model's outputs, so two models of this task are comparable
        when it is equal: nothing, unless the outputs are one per class."""
        return None

    def of_classes(self, classes: Sequence[str] | None) -> str:
        """`` of classes [...]`` where the classes define this task's outputs, for messages; else ``""``."""
        return ""

    def int8_fp32_outputs(self, matmuls: list[str]) -> list[str]:
        """Of an exported model's MatMul/Gemm nodes (graph order), those of the output layer an INT8
        form keeps fp32: the last, whose output is the served output itself (logits, a value)."""
        return matmuls[-1:]

    def threshold_field(self, threshold: float) -> dict[str, float]:
        """The decision threshold an exported form's manifest records, where the task has one."""
        return {}

    def prediction_field(self, prediction: str) -> dict[str, str]:
        """The prediction column an exported form's manifest names (the pyfunc's), where it has one."""
        return {"prediction": prediction}

    def rule_figures(self, y_true: Any, out: Any, threshold: float,
                     classes: Sequence[str] | None = None) -> dict[str, float]:
        """What ``alerts.rules`` compare, by rule key, of a served output (NaN when undefined)."""
        raise NotImplementedError

    def signature_outputs(self, prediction: str, score: str | None,
                          classes: Sequence[str] | None) -> list[tuple[str, str | None]]:
        """The pyfunc's output columns as ``(MLflow DataType name, column)``; ``score``: the column a
        binary model's P(1) is named by when the output is a DataFrame (None: an unnamed series)."""
        return [("double", prediction)]

    def floor_figures(self, y_true: Any, scores: Any, threshold: float, level: float) -> dict[str, Any]:
        """A model's absolute quality on held-out rows (two-sided intervals at ``level``), as the gate's
        floors (trainer.gate.Floors / RegressionFloors) take them."""
        raise NotImplementedError

    @staticmethod
    def _or_nan(x: Any) -> float:
        """A figure as a float, NaN where undefined (None)."""
        return float("nan") if x is None else float(x)


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

    optional_outputs = ("prediction",)
    aliased_outputs = ("score", "prediction")

    def _target_classes(self, target: Any) -> list[str]:
        """The classes of ``target`` (a pandas Series) in their order."""
        from monitor.tasks.columns import sorted_classes
        return sorted_classes(target.dropna().unique())

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    stored_label = "class"

    def valid_targets(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        return np.isin(y, np.arange(n_classes, dtype=np.float64))

    def label_array(self, y: np.ndarray) -> np.ndarray:
        return y.astype(np.int64)

    def served_rows(self, score: np.ndarray, proba: np.ndarray | None, prediction: np.ndarray | None,
                    threshold: float) -> np.ndarray:
        """The prediction column's class where a row has one, else the class the outputs give."""
        derived = self._derived_class(score, proba, threshold)
        if prediction is None:
            return derived.astype(np.int64)
        return np.where(np.isnan(prediction), derived, prediction).astype(np.int64)

    def _derived_class(self, score: np.ndarray, proba: np.ndarray | None, threshold: float) -> np.ndarray:
        """The class served for outputs alone (no prediction column)."""
        raise NotImplementedError

    def row_outcomes(self, y: np.ndarray, served: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        return (served == np.nan_to_num(y, nan=-1)).astype(np.float64), None

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    estimation_source = "from the scores alone"
    estimation_source_detail = "from the scores alone"

    def default_rules(self, alerts: Any) -> tuple[tuple[str, float, str], ...]:
        return (("accuracy", alerts.accuracy_drop, alerts.mode), ("roc_auc", alerts.auc_drop, alerts.mode))

    def loss_figure(self, loss: np.ndarray) -> float:
        return float(1.0 - loss.mean())

    def proven_drop(self, y: np.ndarray, pred: np.ndarray, bar: float, confidence: float) -> float:
        from monitor.stats import wilson_interval
        interval = wilson_interval(int(np.sum(y == pred)), len(y), confidence)
        return bar - interval[1] if interval is not None else 0.0

    def reference_figures(self, metrics: Any) -> str:
        return f"accuracy {metrics.get('accuracy')}, ROC AUC {metrics.get('roc_auc')}"

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    def target_values(self, raw: Any, target: str, classes: Sequence[str] | None, what: str = "training data",
                      indices: bool = False) -> Any:
        """Class indices into ``classes`` (int64) from the classes' names or numbers, or from
        indices already (``indices``: a store window or reference sample)."""
        import pandas as pd

        from monitor.errors import DataError
        from monitor.tasks.columns import class_codes
        classes = list(classes or [])
        codes, bad_rows = self._index_codes(raw, len(classes)) if indices else class_codes(raw.tolist(), classes)
        codes, bad_rows = self._stored_codes(raw, codes, bad_rows)
        if bad_rows:
            bad = np.zeros(len(raw), dtype=bool)
            bad[bad_rows] = True
            n, row, first = self._first_bad(raw, bad)
            kind = "class indices" if indices else "classes"
            raise DataError(f"{what}: target {target!r} has {n} value(s) that are not known {kind} (first at row "
                            f"{row}: {first!r}); the model's classes are {', '.join(classes)} (model.classes)")
        y = pd.Series(codes, dtype="int64")
        if y.nunique() < 2:
            raise DataError(f"{what}: target {target!r} has a single class ({classes[int(y.iloc[0])]}); "
                            "need at least two to train")
        return y

    def _stored_codes(self, raw: Any, codes: np.ndarray, bad_rows: list[int]) -> tuple[np.ndarray, list[int]]:
        """The codes of a target some of whose values are no class name: those the store keeps
        for this task instead, else unchanged (with the bad rows)."""
        return codes, bad_rows

    @staticmethod
    def _index_codes(raw: Any, n_classes: int) -> tuple[np.ndarray, list[int]]:
        """Class indices of values that already are indices (-1 and a bad row where not one)."""
        import pandas as pd
        y = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
        ok = np.isfinite(y) & (y == np.round(y)) & (y >= 0) & (y < n_classes)
        return np.where(ok, y, -1).astype(np.int64), np.nonzero(~ok)[0].tolist()

    def hold_out(self, y: np.ndarray, fraction: float, rng: np.random.Generator, what: str,
                 part: str, names: Sequence[str] = ()) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Stratified: ``fraction`` of each class; a class too small for both sides stays on the
        training side unless fewer than two classes would then be on both."""
        from monitor.errors import DataError
        present = self._split_classes(y)
        held, kept = [], []
        for cls in present:
            idx = np.nonzero(y == cls)[0]
            k = int(round(len(idx) * fraction))
            if k < 1 or k >= len(idx):
                kept.append((cls, len(idx)))
                continue
            held.append(rng.choice(idx, size=k, replace=False))
        if kept and len(present) - len(kept) < 2:
            cls, n = kept[0]
            name = names[cls] if 0 <= cls < len(names) else cls
            raise DataError(f"{what}: too few rows to hold out a {part} set: class {name} has {n} row(s), "
                            f"a {fraction:.0%} split needs both sides non-empty; give more labelled rows")
        mask = np.zeros(len(y), dtype=bool)
        mask[np.concatenate(held)] = True
        return mask, kept

    def _split_classes(self, y: np.ndarray) -> list[int]:
        """The classes a stratified split divides: those present in ``y``."""
        return sorted(int(c) for c in np.unique(y))

    def held_out_refusal(self, figures: dict[str, float], torch_figures: dict[str, float], min_ratio: float) -> str:
        """Refused when its held-out accuracy is below ``min_ratio`` x PyTorch's."""
        accuracy, bar = figures.get("accuracy"), torch_figures.get("accuracy")
        if accuracy is not None and bar is not None and accuracy < min_ratio * bar:
            return f"held-out accuracy {accuracy:.4f} is below {min_ratio:g} x PyTorch's {bar:.4f}"
        return ""

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------

    paired_metrics = ("accuracy", "roc_auc")
    closeness_figure = ("agreement", "agreement")

    def reference_figure(self, y_true: Any, out: Any, threshold: float = 0.5) -> float:
        y = np.asarray(y_true, dtype=np.int64)
        return float(np.mean(self.served(out, threshold)[0] == y)) if len(y) else float("nan")

    def gains(self, challenger: dict[str, float], champion: dict[str, float]) -> dict[str, float]:
        return {"accuracy_gain": challenger["accuracy"] - champion["accuracy"],
                "roc_auc_gain": challenger["roc_auc"] - champion["roc_auc"]}

    def paired_tests(self, y: Any, a: Any, b: Any,
                     threshold: float) -> list[tuple[str, str, str, float, float, float | None, bool]]:
        from monitor.paired import mcnemar
        y = np.asarray(y).astype(np.int64)
        right_a, right_b = self.served(a, threshold)[0] == y, self.served(b, threshold)[0] == y
        out: list[tuple[str, str, str, float, float, float | None, bool]] = [
            ("accuracy", self.metric_label("accuracy"), "McNemar", float(right_a.mean()), float(right_b.mean()),
             mcnemar(right_a, right_b).p_value, True)]
        auc = self.paired_auc(y, a, b)
        if auc is not None:
            out.append(("roc_auc", self.metric_label("roc_auc"), "DeLong", auc.auc_a, auc.auc_b, auc.p_value, True))
        return out

    def closeness(self, a: Any, b: Any, threshold: float) -> float:
        return float(np.mean(self.served(a, threshold)[0] == self.served(b, threshold)[0]))

    def concept_holds(self, on_recent: float, on_reference: float, alerts: Any) -> bool:
        return bool(on_recent >= on_reference - alerts.accuracy_drop)

    def floor_figures(self, y_true: Any, scores: Any, threshold: float, level: float) -> dict[str, Any]:
        from monitor.stats import wilson_interval
        y = np.asarray(y_true, dtype=np.int64)
        s = np.asarray(scores, dtype=np.float64)
        right = int((self.served(s, threshold)[0] == y).sum()) if len(y) else 0
        acc = wilson_interval(right, len(y), level)
        auc_ci = self._auc_interval(y, s, level)
        return {"accuracy_lower": None if acc is None else acc[0], "majority_rate": self._majority_rate(y, s),
                "auc_lower": None if auc_ci is None else auc_ci[0], "accuracy_upper": None if acc is None else acc[1]}

    def _auc_interval(self, y: np.ndarray, scores: np.ndarray, level: float) -> tuple[float, float] | None:
        """The ROC AUC's interval at ``level`` (the gate's floor), None where undefined."""
        raise NotImplementedError

    def _majority_rate(self, y: np.ndarray, scores: np.ndarray) -> float:
        """The accuracy of always predicting the most frequent class (1.0 on no rows)."""
        raise NotImplementedError


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

    record_output = "score"
    output_text = "score: P(label = 1), float32 [batch]"
    label_text = "the true outcome"

    def fast_outputs(self, records: list, classes: list[str] | None, class_index: dict[str, int] | None,
                     threshold: float) -> tuple[list, list, list, list[list[float]] | None] | None:
        from monitor.records import fastpath
        return fastpath.binary_outputs(records, threshold)

    def fast_labels(self, raw: list, class_index: dict[str, int] | None) -> list | None:
        if set(map(type, raw)) == {int} and set(raw) <= {0, 1}:
            return raw
        return super().fast_labels(raw, class_index)

    def read_outputs(self, record: Any) -> tuple[Any, Any, bool, list[float] | None]:
        from monitor.records.fields import check_score
        score = record.required("score", check_score)
        pred = record.optional("prediction", record.binary_class)
        return score, pred, pred is not None, None

    def read_label(self, value: Any, classes: Any) -> Any:
        return classes.binary_class(value)

    def fit_target(self, target: Any) -> Any:
        import pandas as pd

        from monitor.errors import DataError
        from monitor.tasks.inference import InferredTask
        present = target.dropna()
        k = present.nunique()
        if k != 2:
            raise DataError(f"target {target.name!r} has {k} distinct values; a binary target has two: choose "
                            "multiclass" + (" or regression" if pd.api.types.is_numeric_dtype(present.dtype) else "")
                            + " (model.task, init --task)")
        classes = self._target_classes(target)
        return InferredTask(self.name, None if set(classes) == {"0", "1"} else classes,
                            f"chosen with --task; {classes[1]!r} is the positive class (label 1)")

    def target_comment(self, classes: Sequence[str] | None) -> str:
        return f"the outcome, {classes[0]} or {classes[1]}" if classes else "the 0/1 outcome"

    def classes_comment(self) -> str:
        return "[negative, positive]"

    def prediction_properties(self, model: Any, class_schema: Callable[[str], dict[str, Any]],
                              probabilities: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        binary: dict[str, Any] = {"type": "integer", "enum": [0, 1]}
        score = {"type": "number", "minimum": 0, "maximum": 1, "description": "P(target = 1)" + (
            f"; may be sent as {model.score!r}" if model.score != "score" else "")}
        prediction = {
            "anyOf": [binary, *([class_schema("the predicted class")] if model.classes else []), {"type": "null"}],
            "description": f"derived as score > {model.threshold} when absent or null" + (
                f"; may be sent as {model.prediction!r}" if model.prediction != "prediction" else "")}
        return {"score": score, "prediction": prediction}

    def label_schema(self, classes: Sequence[str] | None,
                     class_schema: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        binary = {"type": "integer", "enum": [0, 1]}
        return {"anyOf": [binary, class_schema("the true class")]} if classes else binary

    def example_outputs(self, classes: Sequence[str]) -> dict[str, Any]:
        return {"score": 0.81, "prediction": 1}

    def example_label(self, classes: Sequence[str]) -> Any:
        return 1

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    problem_type = "classification_binary"

    def expected_targets(self, n_classes: int) -> str:
        return "labels 0 or 1"

    def _derived_class(self, score: np.ndarray, proba: np.ndarray | None, threshold: float) -> np.ndarray:
        return self.served_output(score, threshold)

    def positive_labels(self, y: np.ndarray) -> np.ndarray:
        return y

    def served_figures(self, served: np.ndarray) -> dict[str, float]:
        return {"positive_rate": float(served.mean())}

    def report_frame(self, y: np.ndarray, pred: np.ndarray, score: np.ndarray, proba: np.ndarray | None,
                     names: list[str], columns: tuple[str, str, str]) -> dict[str, Any]:
        target, prediction, score_column = columns
        return {target: y, prediction: pred, score_column: score}

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    threshold_metrics = ("precision", "recall", "f1")

    def shown_interval(self, ci: Any) -> Any:
        return None  # binary's status lines predate intervals and stay as they were

    def status_estimates(self, others: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
        return others[:1]  # ROC AUC, shown even when undefined; precision, recall and F1 are the check's

    realised_figures = ("accuracy", "roc_auc")
    estimated_figures = ("accuracy", "roc_auc", "precision", "recall", "f1")

    def what_it_predicts(self, target: str, classes: Sequence[str] | None) -> str:
        return f"the probability that `{target}` is 1 (binary classification)"

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    parity_text = "max |score difference| vs PyTorch"

    def target_values(self, raw: Any, target: str, classes: Sequence[str] | None, what: str = "training data",
                      indices: bool = False) -> Any:
        """int64 0/1: the two ``classes`` [negative, positive] when named, else the numbers 0 and 1."""
        if classes is not None:
            return super().target_values(raw, target, classes, what, indices)
        import pandas as pd

        from monitor.errors import DataError
        zero_one = self._zero_one(raw)
        if zero_one is None:
            y = pd.to_numeric(raw, errors="coerce")
            n, row, first = self._first_bad(raw, ~y.isin([0, 1]).to_numpy())
            raise DataError(f"{what}: target {target!r} has {n} value(s) that are not 0 or 1 "
                            f"(first at row {row}: {first!r})")
        if len(np.unique(zero_one)) < 2:
            raise DataError(f"{what}: target {target!r} has a single class ({int(zero_one[0])}); "
                            "need both 0 and 1 to train")
        return pd.Series(zero_one, dtype="int64")

    def _stored_codes(self, raw: Any, codes: np.ndarray, bad_rows: list[int]) -> tuple[np.ndarray, list[int]]:
        """A store window of a binary model with named classes holds 0/1 (monitor/tasks/columns.py)."""
        zero_one = self._zero_one(raw) if bad_rows else None
        return (codes, bad_rows) if zero_one is None else (zero_one, [])

    @staticmethod
    def _zero_one(raw: Any) -> np.ndarray | None:
        """int64 0/1 of a column of only 0s and 1s (numbers or their text); None otherwise."""
        import pandas as pd
        y = pd.to_numeric(raw, errors="coerce")
        return y.to_numpy(dtype="int64") if bool(y.isin([0, 1]).all()) else None

    def _split_classes(self, y: np.ndarray) -> list[int]:
        """Both 0 and 1, present or not: a binary split needs both classes on both sides."""
        return [0, 1]

    def loss(self, raw: Any, y: Any, weight: Any = None) -> Any:
        """BCE with logits."""
        import torch.nn.functional as F
        return F.binary_cross_entropy_with_logits(raw.float(), y)

    def evaluation(self, logits: Any, y: Any, model: Any) -> dict[str, float]:
        """Log loss, accuracy and ROC AUC of P(1)."""
        import math

        import torch
        import torch.nn.functional as F
        loss = F.binary_cross_entropy_with_logits(logits, y.to(logits.device).float()).item() if len(y) else math.nan
        out = self.figures(y.numpy(), torch.sigmoid(logits).cpu().numpy())
        return {"loss": loss, "accuracy": out["accuracy"], "roc_auc": out["roc_auc"]}

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------

    def served(self, out: Any, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        out = np.asarray(out, dtype=np.float64)
        return (out > threshold).astype(np.int64), out, None

    def served_columns(self, out: Any, threshold: float, score: str, prediction: str) -> dict[str, Any]:
        return {score: out}

    def figures(self, y_true: Any, out: Any, threshold: float = 0.5) -> dict[str, float]:
        from monitor.stats import binary_metrics
        return binary_metrics(y_true, out, threshold)

    def reference_figure(self, y_true: Any, out: Any, threshold: float = 0.5) -> float:
        from monitor.stats import accuracy
        return accuracy(y_true, out, threshold)

    def headline(self, metrics: dict[str, float]) -> str:
        return f"accuracy {metrics['accuracy']:.4f}, ROC AUC {metrics['roc_auc']:.4f}"

    def paired_auc(self, y: Any, a: Any, b: Any) -> Any:
        from monitor.paired import paired_delong
        return paired_delong(np.asarray(y) == 1, np.asarray(a), np.asarray(b))

    def output_column(self, score: str, prediction: str) -> str:
        return score

    def int8_fp32_outputs(self, matmuls: list[str]) -> list[str]:
        return []  # a sigmoid flattens the output layer's rounding at the extremes: quantize it

    def threshold_field(self, threshold: float) -> dict[str, float]:
        return {"threshold": threshold}

    def prediction_field(self, prediction: str) -> dict[str, str]:
        return {}

    def rule_figures(self, y_true: Any, out: Any, threshold: float,
                     classes: Sequence[str] | None = None) -> dict[str, float]:
        from monitor.stats import performance
        y = np.asarray(y_true, dtype=np.int64)
        pred, s, _ = self.served(out, threshold)
        perf = performance(y, pred, s)
        return {"precision": self._or_nan(perf.precision), "recall": self._or_nan(perf.recall),
                "f1": self._or_nan(perf.f1), "positive_rate": float(pred.mean()) if len(pred) else float("nan")}

    def signature_outputs(self, prediction: str, score: str | None,
                          classes: Sequence[str] | None) -> list[tuple[str, str | None]]:
        return [("double", score)]

    def _auc_interval(self, y: np.ndarray, scores: np.ndarray, level: float) -> tuple[float, float] | None:
        from monitor.stats import delong_auc
        auc = delong_auc(y, scores)
        return None if auc is None else auc.interval(level)

    def _majority_rate(self, y: np.ndarray, scores: np.ndarray) -> float:
        return float(max(y.mean(), 1 - y.mean())) if len(y) else 1.0


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

    record_output = "probabilities"
    output_text = "probabilities: P(class) in the order of classes, float32 [batch, K]"
    label_text = "the true class"

    def batch_probas(self, n_classes: int) -> list[list[float]] | None:
        return [[] for _ in range(n_classes)]

    def fast_outputs(self, records: list, classes: list[str] | None, class_index: dict[str, int] | None,
                     threshold: float) -> tuple[list, list, list, list[list[float]] | None] | None:
        from monitor.records import fastpath
        return fastpath.multiclass_outputs(records, classes, class_index)

    def read_outputs(self, record: Any) -> tuple[Any, Any, bool, list[float] | None]:
        probas = record.required("probabilities", record.probabilities)
        pred = record.optional("prediction", record.class_of)
        given = pred is not None
        if record.failed():  # the batch is refused: nothing more to derive
            return None, pred, given, None
        if pred is None:  # the served class: the most probable one
            pred = max(range(len(probas)), key=probas.__getitem__)
        return probas[pred], pred, given, probas

    def output_array(self, out: np.ndarray) -> np.ndarray:
        return out.reshape(len(out), int(np.prod(out.shape[1:])))

    def service_output(self, output: np.ndarray, classes: Sequence[str] | None, index: Any,
                       prediction: str) -> Any:
        import pandas as pd

        from monitor.tasks.columns import proba_column
        names = np.asarray(classes, dtype=object)
        out = pd.DataFrame({proba_column(c): output[:, i] for i, c in enumerate(names)}, index=index)
        out.insert(0, prediction, names[np.argmax(output, axis=1)] if len(output) else names[:0])
        return out

    def fit_target(self, target: Any) -> Any:
        from monitor.errors import DataError
        from monitor.tasks.columns import MAX_CLASSES
        from monitor.tasks.inference import InferredTask
        k = target.dropna().nunique()
        if not 2 <= k <= MAX_CLASSES:
            raise DataError(f"target {target.name!r} has {k} distinct values; a multiclass target has 2 to "
                            f"{MAX_CLASSES}" + (": choose regression (model.task, init --task)" if k > MAX_CLASSES
                                                else ""))
        return InferredTask(self.name, self._target_classes(target), f"chosen with --task ({k} classes)")

    def target_comment(self, classes: Sequence[str] | None) -> str:
        return "the true class, one of classes"

    def classes_comment(self) -> str:
        return "in this order: a list of probabilities on the wire follows it"

    def summary(self, classes: Sequence[str] | None) -> str:
        return self.name + (f" ({len(classes)} classes)" if classes else "")

    def prediction_properties(self, model: Any, class_schema: Callable[[str], dict[str, Any]],
                              probabilities: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return {"probabilities": probabilities(),
                "prediction": {"anyOf": [class_schema("the served class"), {"type": "null"}],
                               "description": "the served class; the most probable one when absent or null"}}

    def example_classes(self, examples: list[str]) -> list[str] | None:
        return examples

    def example_outputs(self, classes: Sequence[str]) -> dict[str, Any]:
        share = round(1.0 / len(classes), 4)
        probabilities = {c: share for c in classes}
        probabilities[classes[0]] = round(1.0 - share * (len(classes) - 1), 4)
        return {"probabilities": probabilities, "prediction": classes[0]}

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    problem_type = "classification_multiclass"
    label_drift_kind = "categorical"

    def expected_targets(self, n_classes: int) -> str:
        return f"class indices 0-{n_classes - 1}"

    def _derived_class(self, score: np.ndarray, proba: np.ndarray | None, threshold: float) -> np.ndarray:
        """The most probable class (class 0 without probabilities)."""
        if proba is None or not proba.shape[0]:
            return np.zeros(len(score), dtype=np.int64)
        return self.served_output(proba, threshold)

    def check_fields(self, perf: Any, names: list[str], classes: Sequence[str] | None,
                     baseline: Any) -> dict[str, Any]:
        return {"classes": names, "macro_f1": perf.macro_f1, "weighted_f1": perf.weighted_f1,
                "class_precision": {names[k]: v for k, v in (perf.class_precision or {}).items()},
                "class_recall": {names[k]: v for k, v in (perf.class_recall or {}).items()},
                "class_rows": {names[k]: v for k, v in (perf.class_rows or {}).items()}}

    def report_class_columns(self, names: list[str]) -> list[str]:
        return list(names)

    def report_frame(self, y: np.ndarray, pred: np.ndarray, score: np.ndarray, proba: np.ndarray | None,
                     names: list[str], columns: tuple[str, str, str]) -> dict[str, Any]:
        """Target and served class by class name, and each class's probability under its name."""
        target, prediction, _ = columns
        classes = np.asarray(names, dtype=object)
        last = len(classes) - 1
        out: dict[str, Any] = {target: classes[np.clip(y, 0, last)], prediction: classes[np.clip(pred, 0, last)]}
        if proba is not None:
            for k, name in enumerate(names):
                out[name] = proba[:, k]
        return out

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    class_metrics = ("precision", "recall")

    def rule_class_problem(self, key: str, metric: str, class_name: str | None) -> str | None:
        if metric in self.class_metrics and class_name is None:
            return (f"{key} of a multiclass model needs the class it judges ({{metric: {metric}, "
                    "class: NAME, drop: ...}})")
        return None

    realised_figures = ("accuracy", "roc_auc", "macro_f1", "weighted_f1")
    estimated_figures = ("accuracy", "roc_auc", "macro_f1")
    status_keys = ("classes", "macro_f1", "weighted_f1", "class_precision", "class_recall", "estimated_macro_f1",
                   "baselines")

    def what_it_predicts(self, target: str, classes: Sequence[str] | None) -> str:
        return (f"the class of `{target}` ({', '.join(map(str, classes or []))}) with a probability per class "
                "(multiclass classification)")

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    parity_text = "max |class probability difference| vs PyTorch"
    # Class weights (inverse frequency, n / (K * n_k)) are clipped to this range: a class with 1 %
    # of the rows would otherwise weigh 20x-100x and its few rows (often noisy) would steer every
    # step; clipped, a rare class still counts up to 10x, and a balanced set gets 1 everywhere.
    class_weight_range: ClassVar[tuple[float, float]] = (0.1, 10.0)

    def factory_kwargs(self, n_outputs: int) -> dict[str, int]:
        """``n_outputs=K``: one logit per class."""
        return {"n_outputs": n_outputs}

    def target_tensor(self, model: Any, y: np.ndarray) -> Any:
        """int64 class indices."""
        import torch
        return torch.as_tensor(y, dtype=torch.int64)

    def loss(self, raw: Any, y: Any, weight: Any = None) -> Any:
        """Cross-entropy with the class weights."""
        import torch.nn.functional as F
        return F.cross_entropy(raw.float(), y, weight=weight)

    def loss_weight(self, labels: Callable[[], Any], n_classes: Callable[[Any], int], device: Any) -> Any:
        """Inverse-frequency class weights from every training label (:meth:`class_weights`)."""
        y = labels()
        return self.class_weights(y, n_classes(y)).to(device)

    def class_weights(self, y: Any, n_classes: int) -> Any:
        """Per-class weights of the loss from the training targets (see ``class_weight_range``)."""
        import torch
        counts = torch.bincount(y.reshape(-1).cpu(), minlength=n_classes)[:n_classes].to(torch.float64)
        weights = torch.where(counts > 0, len(y) / (n_classes * counts.clamp(min=1)), torch.ones_like(counts))
        return weights.clamp(*self.class_weight_range).to(torch.float32)

    def evaluation(self, logits: Any, y: Any, model: Any) -> dict[str, float]:
        """Cross-entropy (unweighted: the log loss of the probabilities served), accuracy and
        macro ROC AUC."""
        import math

        import torch
        import torch.nn.functional as F
        loss = F.cross_entropy(logits, y.to(logits.device)).item() if len(y) else math.nan
        out = self.figures(y.numpy(), torch.softmax(logits, dim=-1).cpu().numpy())
        return {"loss": loss, "accuracy": out["accuracy"], "roc_auc": out["roc_auc"]}

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------

    def served(self, out: Any, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        out = np.asarray(out, dtype=np.float64)
        pred = np.argmax(out, axis=1) if len(out) else np.zeros(0, dtype=np.int64)
        score = out[np.arange(len(out)), pred] if len(out) else np.zeros(0)
        return pred.astype(np.int64), score, out

    def served_columns(self, out: Any, threshold: float, score: str, prediction: str) -> dict[str, Any]:
        proba = np.asarray(out, dtype=np.float64)
        pred, value, _ = self.served(proba, threshold)
        return {score: value, prediction: pred,
                **{column: proba[:, i] for i, column in enumerate(self.proba_columns(proba.shape[1]))}}

    def window_output(self, window: Any, score: str, n_classes: int) -> np.ndarray | str:
        import pandas as pd
        columns = self.proba_columns(n_classes)
        absent = [c for c in columns if c not in window.columns]
        if absent:
            return f"the window carries no served class probabilities ({', '.join(absent[:3])} missing)"
        return np.column_stack([pd.to_numeric(window[c], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
                                for c in columns])

    def figures(self, y_true: Any, out: Any, threshold: float = 0.5) -> dict[str, float]:
        from monitor.taskstats import multiclass_performance
        y = np.asarray(y_true, dtype=np.int64)
        out = np.asarray(out, dtype=np.float64)
        pred, _, proba = self.served(out)
        perf = multiclass_performance(y, pred, proba, out.shape[1])
        return {"accuracy": self._or_nan(perf.accuracy), "roc_auc": self._or_nan(perf.roc_auc),
                "macro_f1": self._or_nan(perf.macro_f1), "weighted_f1": self._or_nan(perf.weighted_f1),
                "log_loss": self._log_loss(y, out)}

    @staticmethod
    def _log_loss(y: np.ndarray, proba: np.ndarray, eps: float = 1e-7) -> float:
        """Cross-entropy of the class probabilities (NaN on no rows)."""
        if not len(y):
            return float("nan")
        p = np.clip(proba[np.arange(len(y)), np.asarray(y, dtype=np.int64)], eps, 1.0)
        return float(-np.mean(np.log(p)))

    def headline(self, metrics: dict[str, float]) -> str:
        return (f"accuracy {metrics['accuracy']:.4f}, macro ROC AUC {metrics['roc_auc']:.4f}, "
                f"macro F1 {metrics['macro_f1']:.4f}")

    def paired_auc(self, y: Any, a: Any, b: Any) -> Any:
        from monitor.paired import paired_macro_delong
        return paired_macro_delong(np.asarray(y).astype(np.int64), a, b)

    def drift_output(self, out: Any, threshold: float) -> tuple[np.ndarray, str]:
        return self.served(out, threshold)[0].astype(str), "categorical"

    def output_classes(self, classes: Sequence[str] | None) -> Any:
        return classes

    def of_classes(self, classes: Sequence[str] | None) -> str:
        return f" of classes {classes}"

    def rule_figures(self, y_true: Any, out: Any, threshold: float,
                     classes: Sequence[str] | None = None) -> dict[str, float]:
        from monitor.taskstats import multiclass_performance
        proba = np.asarray(out, dtype=np.float64)
        y = np.asarray(y_true, dtype=np.int64)
        perf = multiclass_performance(y, np.argmax(proba, axis=1), proba, proba.shape[1])
        figures = {"accuracy": self._or_nan(perf.accuracy), "roc_auc": self._or_nan(perf.roc_auc),
                   "macro_f1": self._or_nan(perf.macro_f1), "weighted_f1": self._or_nan(perf.weighted_f1)}
        for i, name in enumerate(classes or []):
            figures[f"precision[{name}]"] = self._or_nan((perf.class_precision or {}).get(i))
            figures[f"recall[{name}]"] = self._or_nan((perf.class_recall or {}).get(i))
        return figures

    def signature_outputs(self, prediction: str, score: str | None,
                          classes: Sequence[str] | None) -> list[tuple[str, str | None]]:
        from monitor.tasks.columns import proba_column
        return [("string", prediction), *(("double", proba_column(c)) for c in classes or [])]

    def _auc_interval(self, y: np.ndarray, scores: np.ndarray, level: float) -> tuple[float, float] | None:
        from monitor.taskstats import macro_auc
        return macro_auc(y, scores, level)[1]

    def _majority_rate(self, y: np.ndarray, scores: np.ndarray) -> float:
        return float(np.bincount(y, minlength=scores.shape[1]).max() / len(y)) if len(y) else 1.0


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

    record_output = "prediction"
    output_text = "prediction: the predicted value in the target's units, float32 [batch]"
    label_text = "the true value"

    def fast_outputs(self, records: list, classes: list[str] | None, class_index: dict[str, int] | None,
                     threshold: float) -> tuple[list, list, list, list[list[float]] | None] | None:
        from monitor.records import fastpath
        return fastpath.regression_outputs(records)

    def fast_labels(self, raw: list, class_index: dict[str, int] | None) -> list | None:
        from monitor.records import fastpath
        return fastpath.numbers(raw)

    def read_outputs(self, record: Any) -> tuple[Any, Any, bool, list[float] | None]:
        return record.required("prediction", record.number), 0, True, None  # the value is the score

    def read_label(self, value: Any, classes: Any) -> Any:
        return classes.number(value)  # a finite number within model.max_abs_value

    def service_output(self, output: np.ndarray, classes: Sequence[str] | None, index: Any,
                       prediction: str) -> Any:
        import pandas as pd
        return pd.DataFrame({prediction: output}, index=index)

    def fit_target(self, target: Any) -> Any:
        import pandas as pd

        from monitor.errors import DataError
        from monitor.tasks.inference import InferredTask
        present = target.dropna()
        if not pd.api.types.is_numeric_dtype(present.dtype) or pd.api.types.is_bool_dtype(present.dtype):
            shown = ", ".join(map(repr, sorted(map(str, present.unique()))[:3]))
            raise DataError(f"target {target.name!r} holds values that are not numbers ({shown}, ...): a "
                            "regression target is a number; choose multiclass or binary (model.task, init --task)")
        return InferredTask(self.name, None, f"chosen with --task ({present.nunique()} distinct values)")

    def target_comment(self, classes: Sequence[str] | None) -> str:
        return "the true value, a number"

    def prediction_properties(self, model: Any, class_schema: Callable[[str], dict[str, Any]],
                              probabilities: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        return {"prediction": {"type": "number", "description": "the predicted value" + (
            f"; may be sent as {model.prediction!r}" if model.prediction != "prediction" else "")}}

    def label_schema(self, classes: Sequence[str] | None,
                     class_schema: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
        return {"type": "number"}

    def example_outputs(self, classes: Sequence[str]) -> dict[str, Any]:
        return {"prediction": 103.5}

    def example_label(self, classes: Sequence[str]) -> Any:
        return 98.2

    def labels_within(self, labels: list, limit: float) -> bool:
        from monitor.records import fastpath
        return fastpath.within([labels], limit)

    # -- store and drift (frames, columns, figures, estimation) -----------------------------------

    stored_label = "numeric"
    problem_type = "regression"
    label_drift_kind = "numeric"

    def valid_targets(self, y: np.ndarray, n_classes: int) -> np.ndarray:
        return np.isfinite(y)

    def expected_targets(self, n_classes: int) -> str:
        return "numbers"

    def row_outcomes(self, y: np.ndarray, served: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        return None, np.abs(np.asarray(served, dtype=np.float64) - np.asarray(y, dtype=np.float64))

    def check_fields(self, perf: Any, names: list[str], classes: Sequence[str] | None,
                     baseline: Any) -> dict[str, Any]:
        """The errors with their intervals, and the champion's logged MAE (None when not a number)."""
        try:
            baseline_mae = None if baseline.get("mae") is None else float(baseline.get("mae"))
        except (TypeError, ValueError):
            baseline_mae = None
        return {"mae": perf.mae, "mae_ci": perf.mae_ci, "rmse": perf.rmse, "rmse_ci": perf.rmse_ci, "mape": perf.mape,
                "r2": perf.r2, "r2_ci": perf.r2_ci, "baseline_mae": baseline_mae}

    def report_frame(self, y: np.ndarray, pred: np.ndarray, score: np.ndarray, proba: np.ndarray | None,
                     names: list[str], columns: tuple[str, str, str]) -> dict[str, Any]:
        target, prediction, _ = columns
        return {target: y, prediction: pred}


    def served_column(self, score: str, prediction: str) -> str:
        """The score: the predicted value is the score; the stored prediction is unused."""
        return score

    def reference_shift_fields(self, perf: Any, reference: Mapping[str, float]) -> dict[str, Any]:
        """The mean signed residual (``bias``) and how far it moved from the reference's, either way,
        in the reference's residual standard deviations (``residual_shift``, an ``alerts`` default)."""
        from monitor.taskstats import residual_shift
        return {"bias": perf.bias,
                "residual_shift": residual_shift(perf.bias, reference.get("bias"), reference.get("residual_sd"))}

    # -- daemon (rules, policy, views) -------------------------------------------------------------

    estimation_source = "direct loss estimation"
    estimation_source_detail = "direct loss estimation, no labels"

    def default_rules(self, alerts: Any) -> tuple[tuple[str, float, str], ...]:
        """The MAE's rise, headline (which the fast lane, segments and re-scans judge); and, as NannyML's
        two-sided thresholds see what one figure misses, the MAPE's rise (an error that grows on the
        small values while the MAE falls) and a shift of the mean signed residual either way (a model
        that starts to over- or under-predict). Relative rises, and a shift in residual standard
        deviations, whatever ``alerts.mode``."""
        return (("mae", alerts.mae_rise, "relative"), ("mape", alerts.mape_rise, "relative"),
                ("residual_shift", alerts.residual_shift, "absolute"))

    def label_values(self, column: Any) -> np.ndarray:
        import pandas as pd
        return np.asarray(pd.to_numeric(column, errors="coerce").to_numpy("float64"))

    def loss_figure(self, loss: np.ndarray) -> float:
        return float(np.nanmean(loss))

    def reference_figures(self, metrics: Any) -> str:
        return f"MAE {metrics.get('mae')}"

    realised_figures = ("mae", "rmse", "mape", "r2")
    estimated_figures = ("mae", "rmse")
    status_keys = ("mae", "mae_ci", "rmse", "rmse_ci", "mape", "r2", "r2_ci", "bias", "residual_shift", "baseline_mae",
                   "estimated_mae", "estimated_mae_ci", "estimated_rmse", "estimated_rmse_ci", "baselines")

    def what_it_predicts(self, target: str, classes: Sequence[str] | None) -> str:
        return f"the value of `{target}` (regression)"

    # -- trainer: data, model, loss and forms --------------------------------------------------------

    parity_text = "max |prediction difference| / the target's std vs PyTorch"
    # The loss is Huber on the standardised target (delta 1 standard deviation): quadratic near the
    # fit like MSE, linear in the tails so a few wild labels do not steer a step. Measured on
    # y = 3 sin(x0) + x1^2 + x2/2 + N(0, 0.5) (2000 rows, 6 features, the default MLP, 3 seeds),
    # test MAE on clean labels: 0.505 Huber vs 0.512 MSE; with 2 % of the training labels off by
    # 10 sd: 0.582 vs 0.775. So Huber: no worse on clean noise, far better on bad labels.
    huber_delta: ClassVar[float] = 1.0

    def target_values(self, raw: Any, target: str, classes: Sequence[str] | None, what: str = "training data",
                      indices: bool = False) -> Any:
        """float64 finite numbers, at least two different ones."""
        import pandas as pd

        from monitor.errors import DataError
        y = pd.to_numeric(raw.astype(object) if isinstance(raw.dtype, pd.CategoricalDtype) else raw, errors="coerce")
        values = y.to_numpy(dtype="float64", na_value=np.nan)
        bad = ~np.isfinite(values)
        if bad.any():
            n, row, first = self._first_bad(raw, bad)
            raise DataError(f"{what}: target {target!r} of a regression model has {n} value(s) that are not "
                            f"finite numbers (first at row {row}: {first!r})")
        if len(values) and np.all(values == values[0]):
            raise DataError(f"{what}: target {target!r} has a single value ({values[0]:g}); need at least two "
                            "different values to learn")
        return pd.Series(values, dtype="float64")

    def hold_out(self, y: np.ndarray, fraction: float, rng: np.random.Generator, what: str,
                 part: str, names: Sequence[str] = ()) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """Plain random: there are no classes to keep in proportion."""
        from monitor.errors import DataError
        k = int(round(len(y) * fraction))
        if k < 1 or k >= len(y):
            raise DataError(f"{what}: too few rows to hold out a {part} set: {len(y)} row(s), a {fraction:.0%} "
                            "split needs both sides non-empty; give more labelled rows")
        mask = np.zeros(len(y), dtype=bool)
        mask[rng.choice(len(y), size=k, replace=False)] = True
        return mask, []

    def target_scaling(self, y: np.ndarray) -> tuple[float, float]:
        """The training values' mean and std (std 1 for a constant target), so one learning rate
        suits a price in dollars and a rate in percent."""
        import math
        values = np.asarray(y, dtype=np.float64)
        mean = float(values.mean()) if len(values) else 0.0
        std = float(values.std()) if len(values) else 1.0
        return mean, (std if math.isfinite(std) and std > 1e-12 else 1.0)

    def target_tensor(self, model: Any, y: np.ndarray) -> Any:
        """The standardised target as float32 (the model's ``scaled_target``)."""
        import torch
        return torch.as_tensor(model.scaled_target(y), dtype=torch.float32)

    def loss(self, raw: Any, y: Any, weight: Any = None) -> Any:
        """Huber on the standardised target (``huber_delta``)."""
        import torch.nn.functional as F
        return F.huber_loss(raw.float(), y, delta=self.huber_delta)

    def evaluation(self, logits: Any, y: Any, model: Any) -> dict[str, float]:
        """The MSE on the standardised target; MAE and RMSE in the target's units."""
        import math

        import torch.nn.functional as F
        device = logits.device
        loss = F.mse_loss(logits, y.to(device).float()).item() if len(y) else math.nan
        scale = float(model.target_std)
        err = (logits - y.to(device).float()).abs() * scale
        mae = err.mean().item() if len(y) else math.nan
        return {"loss": loss, "mae": mae, "rmse": math.sqrt(loss) * scale if len(y) else math.nan}

    def parity_unit(self, model: Any, reference: Any, target: str) -> float | None:
        """The target's standard deviation on the reference rows, or the training target's
        (``target_std``) when those have no spread or no target."""
        import math

        import pandas as pd
        if target in reference.columns:
            values = pd.to_numeric(reference[target], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            values = values[np.isfinite(values)]
            if len(values) >= 2 and float(values.std()) > 1e-12:
                return float(values.std())
        fallback = float(getattr(model, "target_std", 1.0))
        return fallback if math.isfinite(fallback) and fallback > 1e-12 else 1.0

    def held_out_refusal(self, figures: dict[str, float], torch_figures: dict[str, float], min_ratio: float) -> str:
        """Refused when its held-out MAE is above PyTorch's / ``min_ratio``."""
        mae, bar = figures.get("mae"), torch_figures.get("mae")
        if mae is not None and bar is not None and not mae <= bar / min_ratio:
            return f"held-out MAE {mae:.4g} is above PyTorch's {bar:.4g} / {min_ratio:g}"
        return ""

    # -- trainer: figures, gate, comparisons and publishing ------------------------------------------

    paired_metrics = ("mae",)
    closeness_figure = ("mean_abs_difference", "mean |prediction difference|")

    def served(self, out: Any, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        out = np.asarray(out, dtype=np.float64)
        return out, out, None

    def figures(self, y_true: Any, out: Any, threshold: float = 0.5) -> dict[str, float]:
        from monitor.taskstats import regression_performance
        perf = regression_performance(np.asarray(y_true, dtype=np.float64), np.asarray(out, dtype=np.float64))
        figures = {"mae": self._or_nan(perf.mae), "rmse": self._or_nan(perf.rmse), "r2": self._or_nan(perf.r2)}
        if perf.mape is not None:
            figures["mape"] = perf.mape
        return figures

    def reference_figure(self, y_true: Any, out: Any, threshold: float = 0.5) -> float:
        y = np.asarray(y_true, dtype=np.float64)
        return float(np.mean(np.abs(np.asarray(out, dtype=np.float64) - y))) if len(y) else float("nan")

    def headline(self, metrics: dict[str, float]) -> str:
        return f"MAE {metrics['mae']:.4g}, RMSE {metrics['rmse']:.4g}, R² {metrics['r2']:.4f}"

    def ranking(self, figures: dict[str, float]) -> tuple[float, float]:
        return (-figures["mae"], -figures["rmse"])

    def gains(self, challenger: dict[str, float], champion: dict[str, float]) -> dict[str, float]:
        """``mae_gain``: the relative fall of the MAE (0.05 = 5 % lower); ``rmse_gain``: its fall."""
        old = champion["mae"]
        return {"mae_gain": (old - challenger["mae"]) / old if old > 0 else float("nan"),
                "rmse_gain": champion["rmse"] - challenger["rmse"]}

    def paired_tests(self, y: Any, a: Any, b: Any,
                     threshold: float) -> list[tuple[str, str, str, float, float, float | None, bool]]:
        from monitor.paired import paired_errors
        e = paired_errors(np.asarray(y).astype(np.float64), a, b)
        return [("mae", self.metric_label("mae"), "paired t", e.mae_a, e.mae_b, e.p_value, False)]

    def closeness(self, a: Any, b: Any, threshold: float) -> float:
        return float(np.mean(np.abs(np.asarray(a) - np.asarray(b))))

    def concept_holds(self, on_recent: float, on_reference: float, alerts: Any) -> bool:
        return bool(on_recent <= on_reference * (1 + alerts.mae_rise))

    def rule_figures(self, y_true: Any, out: Any, threshold: float,
                     classes: Sequence[str] | None = None) -> dict[str, float]:
        from monitor.taskstats import regression_performance
        perf = regression_performance(np.asarray(y_true, dtype=np.float64), np.asarray(out, dtype=np.float64))
        return {"mae": self._or_nan(perf.mae), "rmse": self._or_nan(perf.rmse), "mape": self._or_nan(perf.mape),
                "r2": self._or_nan(perf.r2)}

    def floor_figures(self, y_true: Any, scores: Any, threshold: float, level: float) -> dict[str, Any]:
        from monitor.taskstats import regression_performance
        perf = regression_performance(np.asarray(y_true, dtype=np.float64), np.asarray(scores, dtype=np.float64),
                                      level)
        return {"r2": perf.r2, "r2_lower": None if perf.r2_ci is None else perf.r2_ci[0]}


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
