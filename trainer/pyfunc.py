"""The saved MLflow model: a pyfunc that takes a raw feature DataFrame and returns P(label = 1).

The model object, with its preprocessing, is cloudpickled *by value* (its classes travel with it),
so ``mlflow.pyfunc.load_model(uri).predict(df)`` works wherever torch, pandas and mlflow are
installed, without driftloop or the factory module of a user's network.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator

import cloudpickle
from mlflow.pyfunc.model import PythonModel  # where mlflow.pyfunc re-exports it from
import numpy as np
import pandas as pd


class TabularPyfunc(PythonModel):
    def __init__(self, model: Any):
        self.model = model

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict | None = None) -> np.ndarray:
        return self.model.predict_proba(pd.DataFrame(model_input))


@contextmanager
def pickled_by_value(model: Any) -> Iterator[None]:
    """While logging, make cloudpickle embed the code of the model's classes (ours and a user's
    factory module) instead of referencing modules the serving side may not have."""
    names = {"trainer.model", "trainer.pyfunc"}
    for module in (type(model), type(getattr(model, "net", None))):
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
