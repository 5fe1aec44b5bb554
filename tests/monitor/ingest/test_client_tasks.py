"""monitor.client per task against the real API: multiclass frames with one ``proba_<class>``
column per class or a ``probabilities`` list column (classes read once from ``GET /v1/schema``),
regression frames with a ``prediction`` column, labels as class names or numbers; frames shaped
like the pyfunc's output joined to the features go as they are."""
from __future__ import annotations

from typing import Iterator

import httpx
import numpy as np
import pandas as pd
import pytest

from monitor.client import DriftloopClient, RequestRejected
from monitor.ingest import create_app
from monitor.records.frames import MissingColumn, prediction_records
from monitor.store import PredictionStore
from monitor.tasks import internal_proba_column, proba_column
from tests.monitor.ingest.conftest import TOKEN, make_config, serve

CLASSES = ["bird", "cat", "dog"]


class CountingTransport(httpx.HTTPTransport):
    """A real transport that counts the requests per path."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


@pytest.fixture
def served(tmp_path, request) -> Iterator[tuple[str, PredictionStore]]:
    cfg = make_config(tmp_path / "home", model={"name": "t", **request.param})
    store = PredictionStore.from_config(cfg)
    try:
        with serve(create_app(cfg, store)) as url:
            yield url, store
    finally:
        store.close()


MULTICLASS = {"task": "multiclass", "classes": CLASSES, "target": "species", "id": "request_id"}
REGRESSION = {"task": "regression", "target": "price"}


def features(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"request_id": [f"q{i}" for i in range(n)], "x0": rng.normal(size=n),
                         "x1": rng.integers(0, 9, n), "region": rng.choice(["eu", "us"], n)})


def model_output(frame: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """What the registered multiclass pyfunc returns: ``prediction`` (class names) and one
    ``proba_<class>`` column per class, on the input's index."""
    proba = np.random.default_rng(seed).dirichlet(np.ones(len(CLASSES)), len(frame))
    out = pd.DataFrame(proba, columns=[proba_column(c) for c in CLASSES], index=frame.index)
    out.insert(0, "prediction", np.asarray(CLASSES, dtype=object)[proba.argmax(axis=1)])
    return out


@pytest.mark.parametrize("served", [MULTICLASS], indirect=True)
def test_multiclass_frames_go_as_the_pyfunc_returns_them(served):
    url, store = served
    transport = CountingTransport()
    rows = features(30)
    scored = rows.join(model_output(rows))
    with DriftloopClient(url, token=TOKEN, batch_size=8, transport=transport) as dl:
        assert dl.log_predictions(scored).stored == 30
        # A list column instead of one column per class; the prediction left out (the most probable).
        listed = features(5, seed=1).assign(request_id=[f"l{i}" for i in range(5)])
        listed["probabilities"] = [[0.2, 0.5, 0.3]] * 5
        assert dl.log_predictions(listed).stored == 5
        labels = scored[["request_id"]].assign(species=np.asarray(CLASSES, dtype=object)[np.arange(30) % 3])
        assert dl.log_labels(labels).stored == 30
    assert transport.paths.count("/v1/schema") == 1   # fetched once, cached
    window = store.window()
    first = window.set_index("id").loc[[f"q{i}" for i in range(30)]]
    served_index = [CLASSES.index(c) for c in scored["prediction"]]
    assert first["prediction"].tolist() == served_index
    assert np.allclose(first[internal_proba_column(2)], scored[proba_column("dog")])
    assert first["species"].tolist() == [i % 3 for i in range(30)]
    listed_rows = window.set_index("id").loc[[f"l{i}" for i in range(5)]]
    assert listed_rows["prediction"].tolist() == [1] * 5 and listed_rows["score"].tolist() == [0.5] * 5


@pytest.mark.parametrize("served", [MULTICLASS], indirect=True)
def test_multiclass_mistakes_are_named(served):
    url, store = served
    rows = features(4)
    scored = rows.join(model_output(rows))
    with DriftloopClient(url, token=TOKEN) as dl:
        with pytest.raises(MissingColumn, match=r"no column\(s\) \['proba_dog'\]"):
            dl.log_predictions(scored.drop(columns=["proba_dog"]))
        with pytest.raises(MissingColumn, match="neither proba_<class> columns"):
            dl.log_predictions(rows)
        wrong = scored.copy()
        wrong.loc[2, "prediction"] = "eel"
        with pytest.raises(RequestRejected) as info:
            dl.log_predictions(wrong)
        assert info.value.errors[0]["index"] == 2 and info.value.errors[0]["field"] == "prediction"
        with pytest.raises(RequestRejected) as info:
            dl.log_labels(pd.DataFrame({"request_id": ["q0", "q1"], "species": ["cat", "eel"]}))
        assert (info.value.errors[0]["index"], info.value.errors[0]["field"]) == (1, "species")
    assert store.row_counts() == {"predictions": 0, "labels": 0}


@pytest.mark.parametrize("served", [REGRESSION], indirect=True)
def test_regression_frames_and_numeric_labels(served):
    url, store = served
    rows = features(12).rename(columns={"request_id": "id"})
    scored = rows.join(pd.DataFrame({"prediction": np.linspace(90, 110, 12)}, index=rows.index))
    scored.loc[3, "x0"] = np.nan  # a missing feature: stored and counted
    with DriftloopClient(url, token=TOKEN) as dl:
        assert dl.log_predictions(scored).stored == 12
        assert dl.log_labels(scored[["id"]].assign(price=np.arange(12) * 2.5)).stored == 12
        with pytest.raises(MissingColumn, match="predicted value of a regression model"):
            dl.log_predictions(rows)
        with pytest.raises(RequestRejected) as info:
            dl.log_labels(pd.DataFrame({"id": ["id-0"], "price": ["cheap"]}))
        assert info.value.errors[0]["field"] == "price"
    window = store.window()
    assert window["prediction"].tolist() == pytest.approx(np.linspace(90, 110, 12).tolist())
    assert window["price"].tolist() == [i * 2.5 for i in range(12)]


def test_binary_records_are_unchanged():
    frame = pd.DataFrame({"id": ["a", "b"], "x0": [1.0, 2.0], "score": [0.2, 0.9], "prediction": [0.0, 1.0]})
    assert prediction_records(frame) == [{"id": "a", "features": {"x0": 1.0}, "score": 0.2, "prediction": 0},
                                         {"id": "b", "features": {"x0": 2.0}, "score": 0.9, "prediction": 1}]


def test_multiclass_records_without_known_classes_and_without_a_schema():
    """Against a server that does not say the classes, the proba_ columns name them; with no
    feature list, proba_ and probabilities columns are never features."""
    frame = pd.DataFrame({"id": ["a"], "x0": [1.0], "proba_cat": [0.25], "proba_dog": [0.75], "prediction": ["dog"]})
    assert prediction_records(frame, task="multiclass") == [
        {"id": "a", "features": {"x0": 1.0}, "probabilities": {"cat": 0.25, "dog": 0.75}, "prediction": "dog"}]
    listed = pd.DataFrame({"id": ["a", "b"], "x0": [1.0, 2.0], "probabilities": [np.array([0.5, 0.5]), None]})
    assert prediction_records(listed, task="multiclass", classes=["cat", "dog"]) == [
        {"id": "a", "features": {"x0": 1.0}, "probabilities": [0.5, 0.5]},
        {"id": "b", "features": {"x0": 2.0}, "probabilities": None}]
