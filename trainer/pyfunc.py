"""The saved MLflow model: a pyfunc that takes a raw feature DataFrame and returns, per task:

- binary: P(label = 1) as a numpy array, as always;
- multiclass: a DataFrame with the served class's *name* in the prediction column (``model.prediction``,
  default ``prediction``) and one ``proba_<class>`` column per class;
- regression: a DataFrame with the predicted value in the prediction column.

Those columns are what ``monitor.client.log_predictions`` takes, so a service sends
``features.join(model.predict(features))`` as it is.

The model object, with its preprocessing, is cloudpickled *by value* (its classes travel with it),
so ``mlflow.pyfunc.load_model(uri).predict(df)`` works wherever torch, pandas and mlflow are
installed, without driftloop or the factory module of a user's network.

A ``training.entrypoint`` model (trainer/entrypoint_model.py) takes a frame with ``input_uri`` (or
the id) and needs the user's module importable where it is loaded (it is logged with MLflow's
``code_paths`` when local). With the user's ``embed``, the output also holds the embedding as a
list column named after the feature, and a binary model's P(1) is then the ``model.score`` column
of a DataFrame.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, cast

import cloudpickle
from mlflow.pyfunc.model import PythonModel  # where mlflow.pyfunc re-exports it from
import numpy as np
import pandas as pd

from trainer.task_head import head_for, output_proba_column as output_proba_column


class TabularPyfunc(PythonModel):
    def __init__(self, model: Any, prediction: str = "prediction", score: str = "score"):
        self.model = model
        self.prediction = prediction  # the prediction column's name (model.prediction)
        self.score = score  # binary with an embedding: P(1)'s column (model.score)

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict | None = None) -> np.ndarray | pd.DataFrame:
        frame = pd.DataFrame(model_input)
        out = self.model.predict_proba(frame)
        task = getattr(self.model, "task", "binary")  # a model pickled before tasks is binary
        embedding = getattr(self.model, "embedding_feature", None)  # a training.entrypoint model with embed
        result = head_for(task).served(out, frame.index, getattr(self.model, "classes", None),
                                       getattr(self, "prediction", "prediction"), getattr(self, "score", "score"),
                                       bool(embedding))
        if embedding:  # one list of floats per row, as a service sends it (monitor.client)
            cast(pd.DataFrame, result)[embedding] = [v.tolist() for v in self.model.embeddings(frame)]
        return result


@contextmanager
def pickled_by_value(model: Any) -> Iterator[None]:
    """While logging, make cloudpickle embed the code of the model's classes (ours and a user's
    factory module) instead of referencing modules the serving side may not have."""
    # trainer.model with its two parts (trainer/features.py, trainer/task_head.py), whose names it uses
    names = {"trainer.model", "trainer.features", "trainer.task_head", "trainer.pyfunc", "trainer.entrypoint_model"}
    # A training.entrypoint model pickles its spec and weights, not the user's classes (they are
    # imported where it is loaded): trainer/entrypoint_model.py.
    nets = () if getattr(model, "spec", None) else (type(getattr(model, "net", None)),)
    for module in (type(model), *nets):
        name = getattr(module, "__module__", None)
        if name and not name.startswith(("torch", "builtins")) and name in sys.modules:
            names.add(name)
    registered = []
    try:
        for name in sorted(names):
            if name in sys.modules and name not in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.register_pickle_by_value(sys.modules[name])
                registered.append(name)
        yield
    finally:
        for name in registered:
            cloudpickle.unregister_pickle_by_value(sys.modules[name])
