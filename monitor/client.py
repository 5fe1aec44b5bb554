"""Python client for model services: send predictions and, later, their true labels to driftloop.

    from monitor.client import DriftloopClient
    with DriftloopClient("http://127.0.0.1:8470", token="...") as dl:
        dl.log_predictions(frame)            # DataFrame: id, [ts], features..., the model's outputs
        dl.log_labels(labels_frame)          # DataFrame: id, label, [ts]

An embedding feature (an image or text model's vector) is a column holding one vector per row (a
list or a 1-D array, None where missing), or, when the vectors are one ``(rows, dim)`` array, pass
``log_predictions(frame, embeddings={"image_emb": array})``. An ``input_uri`` column (the path or
key of each row's raw input, which driftloop stores and never fetches) goes with each record.

The outputs follow the server's model (``GET /v1/schema``): binary ``score`` [``prediction`` 0/1];
multiclass one ``proba_<class>`` column per class or a ``probabilities`` list column [``prediction``,
a class]; regression ``prediction``. These are the columns the registered pyfunc returns, so a
service sends ``features.join(model.predict(features))`` as it is. Labels: 0/1, class names or numbers.

A daemon that hosts several models (``models:`` in its configuration) serves each at
``/v1/models/<name>/...``: name the model and every per-model call goes there::

    with DriftloopClient(url, token="...", model="churn") as churn:
        churn.log_predictions(frame)         # POST /v1/models/churn/predictions, columns from its schema
    DriftloopClient(url).models()            # GET /v1/models: the models it hosts

Without ``model`` the paths are ``/v1/predictions`` ..., which a daemon of one model answers.

or, module-level: ``monitor.client.configure(url, token=...)`` then ``monitor.client.log_predictions(...)``.

To score with whatever model is champion now, following promotions and rollbacks:
``from monitor.client import Champion`` (:mod:`monitor.champion_client`); ``Champion.for_model("churn", ...)``
finds a monitored model's registered model as the daemon does.

Data goes in batches of ``batch_size`` records, each stored atomically by the server. Connection
errors, 429 and 5xx answers are retried with exponential backoff and jitter; that is safe because
the server treats a re-sent id with the same content as a duplicate, not a new row. A 4xx answer
raises :class:`RequestRejected` carrying the server's error list, with each ``index`` shifted to the
record's position in what you passed; batches before it are stored, so re-sending everything after
fixing the data is fine.

Exceptions (:mod:`monitor.client_errors`, all :class:`ClientError`, a :class:`monitor.errors.DriftloopError`):
:class:`RequestRejected` (4xx), :class:`ServerUnavailable` (retries exhausted) and :class:`MissingExtra`
(a scorer or :class:`Champion` without the ``driftloop-client`` extra that installs its dependency).
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import quote

import httpx
import orjson

from monitor.champion_client import RUNTIMES as RUNTIMES, Champion  # RUNTIMES: still importable from here
from monitor.client_errors import ClientError, InvalidRecords, MissingExtra, RequestRejected, ServerUnavailable
from monitor.client_values import unsendable

__all__ = ["Champion", "ClientError", "DriftloopClient", "IngestSummary", "InvalidRecords", "MissingExtra",
           "RequestRejected", "ServerUnavailable", "configure", "log_labels", "log_predictions"]

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MODELS_PATH = "/v1/models"  # a daemon's models: GET lists them, /v1/models/<name>/... is each one's API
_DUMPS_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z


@dataclass
class IngestSummary:
    stored: int = 0
    duplicates: int = 0
    batches: int = 0

    def add(self, body: dict) -> None:
        self.stored += int(body.get("stored", 0))
        self.duplicates += int(body.get("duplicates", 0))
        self.batches += 1


def _default(value: Any) -> Any:
    if isinstance(value, datetime):  # pandas.Timestamp too
        return value.isoformat() if value.tzinfo else value.isoformat() + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars orjson does not take natively
        return value.item()
    raise TypeError(f"cannot send a value of type {type(value).__name__}")


class DriftloopClient:
    """Sends one model's predictions and labels (see the module doc). ``model``: the name of one
    model of a daemon that hosts several; its calls go to ``/v1/models/<model>/...`` and its errors
    name it. None: the plain paths (``/v1/predictions`` ...), which a daemon of one model answers."""

    def __init__(self, base_url: str = "http://127.0.0.1:8470", token: str | None = None, *,
                 model: str | None = None, batch_size: int = 1000, retries: int = 5, timeout: float = 30.0,
                 backoff_seconds: float = 0.2, max_backoff_seconds: float = 30.0,
                 transport: httpx.BaseTransport | None = None, sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random):
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        if model is not None and (not isinstance(model, str) or not model):
            raise ValueError(f"model must be a model's name, got {model!r}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)
        self.batch_size = batch_size
        self.retries = retries
        self.backoff = backoff_seconds
        self.max_backoff = max_backoff_seconds
        self._sleep = sleep
        self._rng = rng
        self._schema: dict | None = None
        self.model = model
        # The model's API: a path segment, so any character outside the name pattern is quoted.
        self._api = f"{MODELS_PATH}/{quote(model, safe='')}" if model else "/v1"

    # ---- public ------------------------------------------------------------------------------
    def log_predictions(self, data: Any, *, features: Sequence[str] | None = None, id: str | None = None,
                        ts: str = "ts", score: str | None = None, prediction: str | None = None,
                        model_version: str | int | None = None,
                        embeddings: Mapping[str, Any] | None = None) -> IngestSummary:
        """Send predictions: a DataFrame or a list of API records. A frame's columns default to the
        server's model (``GET /v1/schema``): its id column (``model.id``), features, and the outputs
        of its task (binary: score [prediction]; multiclass: ``proba_<class>`` per class or a
        ``probabilities`` list [prediction, a class name]; regression: prediction); other columns
        (the target, anything else) are left out. Missing values (NaN, None, pd.NA) are sent as
        null: stored and counted, not refused. ``model_version``: the registry version that scored
        them (e.g. ``Champion.version``), for records that do not say; the daemon judges each
        champion on the rows it scored. ``embeddings``: ``{feature: (rows, dim) array}``, one row per
        record (frame row or list item), for embedding features not in the frame as a column of
        vectors (NaN rows: missing)."""
        if embeddings:
            data = _with_embeddings(data, embeddings)
        if _is_frame(data):
            from monitor.records.frames import prediction_records
            schema = self.schema()
            if features is None and schema.get("features"):
                features = [f["name"] for f in schema["features"]]
            data = prediction_records(data, features=features, id=_column_name(data, id, schema.get("id")),
                                      ts=ts, score=score or schema.get("score", "score"),
                                      prediction=prediction or schema.get("prediction", "prediction"),
                                      exclude=("label", schema.get("target", "label")),
                                      categorical=[f["name"] for f in schema.get("features", [])
                                                   if f.get("type") == "categorical"],
                                      embedding=[f["name"] for f in schema.get("features", [])
                                                 if f.get("type") == "embedding"],
                                      task=schema.get("task", "binary"), classes=schema.get("classes"))
        if model_version is not None:
            from monitor.records.frames import with_model_version
            data = with_model_version(list(data), model_version)
        return self._send(self._api + "/predictions", data)

    def log_labels(self, data: Any, *, id: str | None = None, label: str | None = None,
                   ts: str = "ts") -> IngestSummary:
        """Send true labels: a DataFrame with the id column, the target (``model.target``, e.g.
        ``churned``, or ``label``) and an optional ts column, or a list of records. The target holds
        0/1 (binary), class names (multiclass, or a binary model's two classes) or numbers (regression)."""
        if _is_frame(data):
            from monitor.records.frames import label_records
            schema = self.schema()
            if label is None:
                target = schema.get("target", "label")
                label = target if target in data.columns or "label" not in data.columns else "label"
            data = label_records(data, id=_column_name(data, id, schema.get("id")), label=label, ts=ts)
        return self._send(self._api + "/labels", data)

    def schema(self) -> dict:
        """The server's model (``GET /v1/schema``: task, classes, columns, record schemas), fetched
        once and cached; {} from a server without it (then frames are read as a binary model's).
        :class:`RequestRejected` (404) when the daemon has no such model, or hosts several and
        ``model`` names none of them: a frame is not read as some other model's."""
        if self._schema is None:
            response = self._request("GET", self._api + "/schema", None, IngestSummary(), self._about("schema"))
            if response.status_code == 404 and _our_error(response):
                raise _rejected(response, 0, self._about("schema"), IngestSummary())
            self._schema = response.json() if response.status_code == 200 else {}
        return self._schema

    def status(self) -> dict:
        """The daemon's status of the model (``GET /v1/status``): champion, last check, incidents,
        retrains; the public part without the token."""
        return self._get(self._api + "/status", self._about("status"))

    def models(self) -> list[dict]:
        """The models the daemon hosts (``GET /v1/models``), whichever ``model`` this client sends
        for: each a dict with ``name``, ``task``, ``state``, ``champion`` (its version), ``last_check``,
        ``incident``, ``retraining`` and ``url`` (its API's path)."""
        return list(self._get(MODELS_PATH, "model listing")["models"])

    def health(self) -> dict:
        response = self._request("GET", "/healthz", None, IngestSummary(), "health check")
        return response.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "DriftloopClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ---------------------------------------------------------------------------
    def _send(self, path: str, records: Any) -> IngestSummary:
        if not isinstance(records, (list, tuple)):
            raise TypeError(f"expected a DataFrame or a list of records, got {type(records).__name__}")
        summary = IngestSummary()
        errors = unsendable(records)
        if errors:
            shown = "; ".join(f"[{e['index']}] {e['field']}: {e['message']}" for e in errors[:5])
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise InvalidRecords(f"{self._about('records')}: nothing sent: {shown}{more}", errors, summary)
        for start in range(0, len(records), self.batch_size):
            batch = records[start:start + self.batch_size]
            body = orjson.dumps(batch, default=_default, option=_DUMPS_OPTIONS)
            what = self._about(f"records {start}-{start + len(batch) - 1}")
            response = self._request("POST", path, body, summary, what)
            if response.status_code >= 400:
                raise _rejected(response, start, what, summary)
            summary.add(response.json())
        return summary

    def _about(self, what: str) -> str:
        """``what`` a request is about, with the model's name when the client has one."""
        return f"model {self.model!r}, {what}" if self.model else what

    def _get(self, path: str, what: str) -> dict:
        response = self._request("GET", path, None, IngestSummary(), what)
        if response.status_code >= 400:
            raise _rejected(response, 0, what, IngestSummary())
        return response.json()

    def _request(self, method: str, path: str, body: bytes | None, summary: IngestSummary, what: str) -> httpx.Response:
        headers = {"Content-Type": "application/json"} if body is not None else None
        response: httpx.Response | None
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(method, path, content=body, headers=headers)
            except httpx.TransportError as exc:
                problem, response = f"{type(exc).__name__}: {exc}", None
            else:
                if response.status_code not in _RETRY_STATUSES:
                    return response
                problem = f"HTTP {response.status_code}: {_message(response)}"
            if attempt == self.retries:
                break
            self._sleep(self._delay(attempt, response))
        raise ServerUnavailable(f"{method} {self._http.base_url}{path} ({what}) failed after "
                                f"{self.retries + 1} attempt(s); last: {problem}", summary)

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        delay = min(self.max_backoff, self.backoff * 2 ** attempt)
        delay = delay / 2 + self._rng() * delay / 2  # "equal jitter": replicas do not retry in lockstep
        if response is not None:
            try:
                delay = max(delay, min(self.max_backoff, float(response.headers.get("retry-after", 0))))
            except ValueError:
                pass  # an HTTP-date Retry-After; our server sends seconds
        return delay


def _column_name(frame: Any, given: str | None, configured: str | None) -> str:
    """The id column: as given, else the model's (``model.id``) when the frame has it, else ``id``."""
    if given is not None:
        return given
    return configured if configured and configured in frame.columns else "id"


def _with_embeddings(data: Any, embeddings: Mapping[str, Any]) -> Any:
    """``data`` (a frame or a list of records) with each ``(rows, dim)`` block's rows as its feature."""
    import numpy as np

    rows = len(data)
    blocks = {}
    for name, block in embeddings.items():
        block = np.asarray(block, dtype=np.float32)
        if block.ndim != 2 or len(block) != rows:
            raise ValueError(f"embeddings[{name!r}] must be a (rows, dim) array with one row per record ({rows}), "
                             f"got shape {block.shape}")
        blocks[name] = [None if np.isnan(row).all() else row for row in block]
    if _is_frame(data):
        return data.assign(**{name: _object_column(data, values) for name, values in blocks.items()})
    records = []
    for i, record in enumerate(data):
        record = {**record, "features": {**record.get("features", {}), **{n: v[i] for n, v in blocks.items()}}}
        records.append(record)
    return records


def _object_column(frame: Any, values: list) -> Any:
    import numpy as np
    import pandas as pd

    column = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        column[i] = value
    return pd.Series(column, index=frame.index, dtype=object)


def _is_frame(data: Any) -> bool:
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns")


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("error") or body.get("detail") or body)[:500] if isinstance(body, dict) else str(body)[:200]


def _our_error(response: httpx.Response) -> bool:
    """Whether an error answer is driftloop's own (``{"error": ...}``), not a bare 404 from an older
    server that lacks the route (``{"detail": "Not Found"}``)."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and "error" in body


def _rejected(response: httpx.Response, offset: int, what: str, summary: IngestSummary) -> RequestRejected:
    try:
        body = response.json()
    except ValueError:
        body = {}
    errors = []
    for err in (body.get("errors") or []) if isinstance(body, dict) else []:
        err = dict(err)
        if isinstance(err.get("index"), int):
            err["index"] += offset
        errors.append(err)
    first = "; ".join(f"[{e.get('index')}] {e.get('field')}: {e.get('message')}" for e in errors[:3])
    message = f"HTTP {response.status_code} for {what}: {_message(response)}" + (f" -- {first}" if first else "")
    return RequestRejected(message, response.status_code, errors, summary)


_client: DriftloopClient | None = None


def configure(base_url: str = "http://127.0.0.1:8470", token: str | None = None, **kwargs: Any) -> DriftloopClient:
    """Set up the client the module-level functions use."""
    global _client
    if _client is not None:
        _client.close()
    _client = DriftloopClient(base_url, token, **kwargs)
    return _client


def _default_client() -> DriftloopClient:
    if _client is None:
        raise ClientError("call monitor.client.configure(base_url, token=...) first")
    return _client


def log_predictions(data: Any, **kwargs: Any) -> IngestSummary:
    return _default_client().log_predictions(data, **kwargs)


def log_labels(data: Any, **kwargs: Any) -> IngestSummary:
    return _default_client().log_labels(data, **kwargs)
