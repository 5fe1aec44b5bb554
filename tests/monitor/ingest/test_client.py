"""monitor.client against the real API, and against a tiny real HTTP server that fails on purpose."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

import monitor.client as client_module
from monitor.client import DriftloopClient, RequestRejected, ServerUnavailable
from monitor.records.frames import label_records, prediction_records
from tests.monitor.ingest.conftest import TOKEN, free_port
from tests.monitor.store.factories import T0


def _frame(n: int, start: int = 0) -> pd.DataFrame:
    i = np.arange(start, start + n)
    return pd.DataFrame({
        "id": i,                                                     # ints: sent as strings
        "ts": pd.to_datetime(T0 + i, unit="s"),                      # naive: taken as UTC
        "x0": i * 0.5, "x1": i.astype(np.int64),
        "region": pd.Categorical(np.where(i % 2, "us", "eu")),
        "score": (i % 10) / 10,
        "label": i % 2,                                              # ignored by log_predictions
    })


def test_log_dataframes_in_batches(base_url, store):
    with DriftloopClient(base_url, token=TOKEN, batch_size=7) as dl:
        summary = dl.log_predictions(_frame(20))
        assert (summary.stored, summary.duplicates, summary.batches) == (20, 0, 3)
        again = dl.log_predictions(_frame(22))
        assert (again.stored, again.duplicates) == (2, 20)
        labelled = dl.log_labels(_frame(10)[["id", "label"]])
        assert labelled.stored == 10
        assert dl.health()["status"] == "ok"
    frame = store.window()
    assert frame["id"].tolist()[:3] == ["0", "1", "2"]
    assert frame["ts"].iloc[3] == pd.Timestamp(T0 + 3, unit="s", tz="UTC")
    assert frame["region"].tolist()[:2] == ["eu", "us"] and frame["x1"].iloc[5] == 5.0
    assert frame["label"].notna().sum() == 10


def test_rejection_carries_the_servers_errors_with_absolute_positions(base_url, store):
    frame = _frame(20)
    frame.loc[15, "score"] = 1.7
    with DriftloopClient(base_url, token=TOKEN, batch_size=7) as dl:
        with pytest.raises(RequestRejected) as info:
            dl.log_predictions(frame)
    exc = info.value
    assert exc.status_code == 422
    assert exc.errors == [{"index": 15, "field": "score", "message": "expected a finite number in [0, 1], got 1.7"}]
    assert "records 14-19" in str(exc) and "[15] score" in str(exc)
    assert exc.stored.stored == 14 and store.row_counts()["predictions"] == 14


def test_missing_values_are_stored_as_null(base_url, store):
    frame = _frame(4)
    frame.loc[1, "x0"] = np.nan
    frame["x1"] = frame["x1"].astype("Int64")
    frame.loc[2, "x1"] = pd.NA
    frame.loc[3, "region"] = None
    with DriftloopClient(base_url, token=TOKEN) as dl:
        assert dl.log_predictions(frame).stored == 4
    window = store.window()
    assert np.isnan(window["x0"].iloc[1]) and np.isnan(window["x1"].iloc[2]) and window["region"].iloc[3] is None
    assert window["x0"].notna().sum() == 3


def test_configured_names_are_honoured(tmp_path):
    """model.id / model.target / model.score name the frame's columns: the client learns them from
    GET /v1/schema; plain HTTP takes {"id", "<target>": 1}."""
    from monitor.ingest.app import create_app
    from monitor.store import PredictionStore
    from tests.monitor.ingest.conftest import make_config, serve
    cfg = make_config(tmp_path / "home")
    cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update={
        "id": "customer_id", "target": "churned", "score": "p_churn"})})
    store = PredictionStore.from_config(cfg)
    try:
        with serve(create_app(cfg, store)) as url, DriftloopClient(url, token=TOKEN) as dl:
            frame = _frame(6).rename(columns={"id": "customer_id", "label": "churned", "score": "p_churn"})
            frame["customer_id"] = [f"c{i}" for i in range(6)]
            frame["notes"] = "not a feature"  # columns outside the schema are left out
            assert dl.log_predictions(frame).stored == 6
            assert dl.log_labels(frame[["customer_id", "churned"]].head(3)).stored == 3
            import httpx
            r = httpx.post(f"{url}/v1/labels", json=[{"id": "c3", "churned": 1}],
                           headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200, r.text
            bad = httpx.post(f"{url}/v1/labels", json=[{"id": "c4", "churned": 2}],
                             headers={"Authorization": f"Bearer {TOKEN}"})
            assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "churned"
            assert "churned" in httpx.get(f"{url}/openapi.json").text
        window = store.window()
        assert window["churned"].notna().sum() == 4 and window["p_churn"].iloc[1] == 0.1
    finally:
        store.close()


def test_wrong_token_is_not_retried(base_url):
    sleeps: list[float] = []
    with DriftloopClient(base_url, token="nope", sleep=sleeps.append) as dl, pytest.raises(RequestRejected) as info:
        dl.log_labels([{"id": "a", "label": 1}])
    assert info.value.status_code == 401 and sleeps == []


class FlakyServer:
    """A real HTTP server answering the first ``failures`` requests with ``status``."""

    def __init__(self, failures: int, status: int = 503, retry_after: str | None = None):
        self.failures, self.status, self.retry_after = failures, status, retry_after
        self.bodies: list[bytes] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(body)
                if len(outer.bodies) <= outer.failures:
                    payload = json.dumps({"error": "busy"}).encode()
                    self.send_response(outer.status)
                    if outer.retry_after:
                        self.send_header("Retry-After", outer.retry_after)
                else:
                    payload = json.dumps({"stored": len(json.loads(body)), "duplicates": 0}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FlakyServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_retries_5xx_with_exponential_backoff_and_jitter():
    sleeps: list[float] = []
    with FlakyServer(failures=2) as flaky, DriftloopClient(flaky.url, sleep=sleeps.append, rng=lambda: 1.0,
                                                           backoff_seconds=0.2) as dl:
        summary = dl.log_labels([{"id": "a", "label": 1}, {"id": "b", "label": 0}])
    assert summary.stored == 2
    assert len(flaky.bodies) == 3 and len(set(flaky.bodies)) == 1  # the same batch each time
    assert sleeps == [0.2, 0.4]


def test_jitter_spreads_retries():
    sleeps: list[float] = []
    with FlakyServer(failures=2) as flaky, DriftloopClient(flaky.url, sleep=sleeps.append, rng=lambda: 0.0,
                                                           backoff_seconds=0.2) as dl:
        dl.log_labels([{"id": "a", "label": 1}])
    assert sleeps == [0.1, 0.2]


def test_retry_after_is_honoured():
    sleeps: list[float] = []
    with FlakyServer(failures=1, retry_after="3") as flaky, DriftloopClient(flaky.url, sleep=sleeps.append) as dl:
        dl.log_labels([{"id": "a", "label": 1}])
    assert sleeps == [3.0]


def test_gives_up_after_the_retries():
    sleeps: list[float] = []
    with FlakyServer(failures=10, status=502) as flaky, DriftloopClient(flaky.url, retries=3, sleep=sleeps.append,
                                                                        max_backoff_seconds=0.5) as dl:
        with pytest.raises(ServerUnavailable, match="after 4 attempt"):
            dl.log_labels([{"id": "a", "label": 1}])
    assert len(flaky.bodies) == 4 and len(sleeps) == 3 and max(sleeps) <= 0.5


def test_connection_refused_is_retried_then_raised():
    sleeps: list[float] = []
    with DriftloopClient(f"http://127.0.0.1:{free_port()}", retries=2, sleep=sleeps.append) as dl:
        with pytest.raises(ServerUnavailable, match="ConnectError"):
            dl.log_predictions([{"id": "a"}])
    assert len(sleeps) == 2


def test_4xx_is_not_retried():
    with FlakyServer(failures=5, status=422) as flaky, DriftloopClient(flaky.url, sleep=lambda s: None) as dl:
        with pytest.raises(RequestRejected) as info:
            dl.log_labels([{"id": "a", "label": 1}])
    assert len(flaky.bodies) == 1 and info.value.status_code == 422 and "busy" in str(info.value)


def test_module_level_functions(base_url, store):
    with pytest.raises(client_module.ClientError, match="configure"):
        client_module._client = None
        client_module.log_labels([])
    client_module.configure(base_url, token=TOKEN)
    try:
        assert client_module.log_predictions(_frame(2)).stored == 2
        assert client_module.log_labels([{"id": "0", "label": 1}]).stored == 1
    finally:
        client_module._client.close()
        client_module._client = None


def test_frames_to_records():
    frame = pd.DataFrame({"id": ["a", "b"], "ts": pd.to_datetime(["2026-01-01T00:00:00+01:00", None], utc=True),
                          "f": [1.5, np.nan], "g": pd.array(["x", pd.NA], dtype="string"), "flag": [True, False],
                          "score": [0.2, 0.9], "prediction": [1.0, np.nan], "label": [1, 0]})
    records = prediction_records(frame)
    assert records == [
        {"id": "a", "features": {"f": 1.5, "g": "x", "flag": 1}, "score": 0.2, "ts": 1767222000.0, "prediction": 1},
        {"id": "b", "features": {"f": None, "g": None, "flag": 0}, "score": 0.9},
    ]
    assert prediction_records(frame, features=["f"])[0]["features"] == {"f": 1.5}
    assert label_records(frame) == [{"id": "a", "label": 1, "ts": 1767222000.0}, {"id": "b", "label": 0}]
    with pytest.raises(KeyError, match="'proba' score column"):
        prediction_records(frame, score="proba")
    with pytest.raises(KeyError, match="no feature column"):
        prediction_records(frame, features=["nope"])


def test_a_frame_without_a_needed_column_raises_a_driftloop_error(base_url):
    # docs/parts/ingestion.md: "All client errors derive from monitor.errors.DriftloopError" (still a KeyError too).
    from monitor.errors import DriftloopError
    with DriftloopClient(base_url, token=TOKEN) as dl:
        with pytest.raises(DriftloopError, match="no 'id' column") as exc:
            dl.log_predictions(_frame(3).drop(columns=["id"]))
        assert isinstance(exc.value, KeyError)
        with pytest.raises(DriftloopError, match="no 'label' label column"):
            dl.log_labels(_frame(3)[["id"]])


def test_model_version_from_the_keyword_and_over_the_wire(base_url, store):
    with DriftloopClient(base_url, token=TOKEN) as dl:
        dl.log_predictions(_frame(3), model_version="4")
        dl.log_predictions(_frame(2, start=3).assign(model_version="5"), model_version="9")  # the column wins
    assert store.window()["model_version"].tolist() == ["4", "4", "4", "5", "5"]


def test_integer_category_codes_name_the_same_category_everywhere(base_url, store):
    """A categorical column of int codes (with a gap, so pandas made it float) is sent as "3",
    the text the trainer and the saved model use for it."""
    import torch  # noqa: F401  (the trainer's side of the rule)
    from trainer.model import category_text
    frame = _frame(4)
    frame["region"] = [3, 4, None, 3]
    assert _column_text(frame) == category_text(frame["region"]) == ["3", "4", None, "3"]
    with DriftloopClient(base_url, token=TOKEN) as dl:
        assert dl.log_predictions(frame).stored == 4
    assert store.window()["region"].tolist() == ["3", "4", None, "3"]


def _column_text(frame):
    from monitor.records.frames import _category_text
    return _category_text(frame, "region")


def test_a_boolean_column_with_missing_values_from_a_csv_is_sent_as_0_1(base_url, store, tmp_path):
    """read_csv leaves a bool column with blanks as object (True/False/NaN); the wire takes 0/1, and
    a JSON boolean for a numeric feature (records as dicts) is taken as 1/0 too."""
    import io
    csv = "id,ts,x0,x1,region,score\n" + "\n".join(
        f"b{i},2026-11-30T00:00:0{i}Z,1.5,{['True', 'False', ''][i % 3]},eu,0.5" for i in range(6))
    frame = pd.read_csv(io.StringIO(csv))
    assert frame["x1"].dtype == object
    with DriftloopClient(base_url, token=TOKEN) as dl:
        assert dl.log_predictions(frame).stored == 6
        assert dl.log_predictions([{"id": "b9", "features": {"x0": 1.0, "x1": True, "region": "eu"},
                                    "score": 0.5}]).stored == 1
    x1 = store.window()["x1"].tolist()
    assert x1[:2] == [1.0, 0.0] and x1[3:5] == [1.0, 0.0] and np.isnan(x1[2]) and np.isnan(x1[5])
    assert x1[6] == 1.0


def test_an_infinity_is_refused_before_anything_is_sent(base_url, store):
    """orjson writes an infinity as null: the row was stored with the feature missing, and a score
    of inf came back as a confusing "got null". The client now names the record and field and sends
    nothing; NaN is still a missing value."""
    from monitor.client import InvalidRecords

    frame = _frame(20)
    frame.loc[3, "x0"] = -np.inf
    frame.loc[12, "x0"] = np.nan
    with DriftloopClient(base_url, token=TOKEN, batch_size=7) as dl:
        with pytest.raises(InvalidRecords) as info:
            dl.log_predictions(frame)
        assert info.value.errors == [{"index": 3, "field": "features.x0", "message": info.value.errors[0]["message"]}]
        assert "got -inf" in str(info.value) and "[3] features.x0" in str(info.value)
        assert isinstance(info.value, ValueError) and info.value.stored.stored == 0
        assert store.row_counts()["predictions"] == 0
        records = prediction_records(_frame(3), features=["x0", "x1", "region"])
        records[2]["score"] = np.float32(np.inf)
        with pytest.raises(InvalidRecords) as info:
            dl.log_predictions(records)
        assert [(e["index"], e["field"]) for e in info.value.errors] == [(2, "score")]
        frame.loc[3, "x0"] = 1.0
        assert dl.log_predictions(frame).stored == 20   # NaN: sent as null, stored as missing
    assert store.window()["x0"].isna().sum() == 1
