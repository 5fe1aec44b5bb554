"""What kind of model a model is: its task (:class:`Task`: binary, multiclass or regression),
how its outputs and labels are carried (:mod:`monitor.tasks.columns`) and which task a target
asks for (:mod:`monitor.tasks.inference`). Bottom layer: every part asks the task."""
from monitor.tasks.columns import (HIGHER_IS_BETTER, INTERNAL_PROBA_PREFIX, LOWER_IS_BETTER, MAX_CLASSES,
                                   MAX_INTEGER_CLASSES, PROBA_PREFIX, PROBA_SUM_TOLERANCE, class_codes, class_name,
                                   internal_proba_column, internal_proba_columns, proba_column, sorted_classes)
from monitor.tasks.inference import InferredTask, infer_task
from monitor.tasks.task import BINARY, MULTICLASS, REGRESSION, TASKS, BinaryTask, MulticlassTask, RegressionTask, \
    Task, task_of

__all__ = [
    "BINARY", "HIGHER_IS_BETTER", "INTERNAL_PROBA_PREFIX", "LOWER_IS_BETTER", "MAX_CLASSES", "MAX_INTEGER_CLASSES",
    "MULTICLASS", "PROBA_PREFIX", "PROBA_SUM_TOLERANCE", "REGRESSION", "TASKS", "BinaryTask", "InferredTask",
    "MulticlassTask", "RegressionTask", "Task", "class_codes", "class_name", "infer_task", "internal_proba_column",
    "internal_proba_columns", "proba_column", "sorted_classes", "task_of",
]
