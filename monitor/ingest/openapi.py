"""OpenAPI descriptions of the ingestion bodies, built from the configured model so that ``/docs``
shows the real feature names. The routes read raw bytes (see app.py), so FastAPI cannot infer these."""
from __future__ import annotations

from typing import Any

from monitor.config import ModelConfig
from monitor.records.fields import MAX_EPOCH_SECONDS

_TS = {"anyOf": [{"type": "string", "format": "date-time", "description": "RFC 3339 with a UTC offset, 1970-2286"},
                 {"type": "number", "minimum": 0, "exclusiveMaximum": MAX_EPOCH_SECONDS, "description": "epoch seconds"},
                 {"type": "null"}],
       "description": "event time; server time when absent or null"}
_ID = {"type": "string", "minLength": 1, "maxLength": 200, "description": "caller-given; re-sending it is idempotent"}


def prediction_schema(model: ModelConfig) -> dict[str, Any]:
    # null: a missing value, stored as NULL and counted (driftloop_feature_missing_ratio).
    features = {f.name: ({"type": ["number", "null"]} if f.type == "numeric" else {"type": ["string", "null"]})
                for f in model.features}
    return {
        "type": "object", "additionalProperties": False, "required": ["id", "features", "score"],
        "properties": {
            "id": _ID, "ts": _TS,
            "features": {"type": "object", "properties": features, "required": list(features),
                         "additionalProperties": False},
            "score": {"type": "number", "minimum": 0, "maximum": 1, "description": "P(target = 1)" + (
                f"; may be sent as {model.score!r}" if model.score != "score" else "")},
            "prediction": {"anyOf": [{"type": "integer", "enum": [0, 1]}, {"type": "null"}],
                           "description": f"derived as score > {model.threshold} when absent or null" + (
                               f"; may be sent as {model.prediction!r}" if model.prediction != "prediction" else "")},
            "model_version": {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 64},
                                        {"type": "integer", "minimum": 0}, {"type": "null"}],
                              "description": "the registry version that scored this row (e.g. the champion's "
                                             "version); 'unknown' when absent. Checks judge the current champion "
                                             "on the rows it scored."},
        },
    }


def label_schema(model: ModelConfig) -> dict[str, Any]:
    """``{"id", "<target>": 0|1, "ts"}``; the generic key ``label`` is accepted in place of the target's name."""
    binary = {"type": "integer", "enum": [0, 1]}
    properties: dict[str, Any] = {"id": _ID, model.target: {**binary, "description": "the true outcome (model.target)"},
                                  "ts": _TS}
    if model.target == "label":
        return {"type": "object", "additionalProperties": False, "required": ["id", "label"], "properties": properties}
    properties["label"] = {**binary, "description": f"the same as {model.target!r}, under the generic name"}
    return {"type": "object", "additionalProperties": False, "required": ["id"], "properties": properties,
            "oneOf": [{"required": [model.target]}, {"required": ["label"]}]}


def request_body(record: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    batch = {"oneOf": [{"type": "array", "items": record},
                       {"type": "object", "properties": {"records": {"type": "array", "items": record}},
                        "required": ["records"]}]}
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": batch, "example": [example]},
        "application/x-ndjson": {"schema": {"type": "string", "description": "one JSON record per line"}},
    }}}


def prediction_example(model: ModelConfig) -> dict[str, Any]:
    features = {f.name: (0.5 if f.type == "numeric" else "a") for f in model.features}
    return {"id": "req-123", "ts": "2026-11-30T01:02:03Z", "features": features, "score": 0.81, "prediction": 1,
            "model_version": "3"}


def label_example(model: ModelConfig) -> dict[str, Any]:
    return {"id": "req-123", model.target: 1, "ts": "2026-11-30T07:00:00Z"}

ERROR = {"application/json": {"schema": {"type": "object", "properties": {
    "error": {"type": "string"},
    "errors": {"type": "array", "items": {"type": "object", "properties": {
        "index": {"type": ["integer", "null"]}, "field": {"type": "string"}, "message": {"type": "string"},
        "id": {"type": "string"}}}}}}}}

HEALTH = {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {
    "status": {"type": "string", "enum": ["ok", "unavailable"]},
    "model": {"type": "string"}, "store": {"type": "string"},
    "checks": {"type": "object", "additionalProperties": {"type": "string"},
               "description": "each readiness check: 'ok' or the reason it fails"},
    "error": {"type": "string"}}}}}

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Stored (atomically)", "content": {"application/json": {"schema": {
        "type": "object", "properties": {"stored": {"type": "integer"}, "duplicates": {"type": "integer"}}}}}},
    400: {"description": "Malformed JSON or NDJSON, empty body, incomplete gzip stream or trailing data",
          "content": ERROR},
    401: {"description": "Missing or wrong bearer token", "content": ERROR},
    409: {"description": "An id is already stored with different content; nothing stored", "content": ERROR},
    413: {"description": "Body or batch too large", "content": ERROR},
    415: {"description": "Unsupported Content-Type or Content-Encoding", "content": ERROR},
    422: {"description": "Invalid records (index and field named); nothing stored", "content": ERROR},
    408: {"description": "The body did not arrive within server.body_timeout_seconds", "content": ERROR},
    503: {"description": "The store is unavailable, or too many bodies are being received; retry after "
                         "Retry-After seconds", "content": ERROR},
}


def model_body(model: Any, example: dict | None = None, *, required: bool = False) -> dict[str, Any]:
    """``openapi_extra`` describing a JSON request body by the pydantic ``model`` the route validates
    it with, its nested models inlined (pydantic's ``#/$defs/...`` references do not resolve from
    inside an operation)."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    content: dict[str, Any] = {"schema": inline(schema)}
    if example is not None:
        content["example"] = example
    return {"requestBody": {"required": required, "content": {"application/json": content}}}


def error_responses(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """``responses`` for a route: ``{status: when}``, each in the common error shape."""
    return {status: {"description": when, "content": ERROR} for status, when in described.items()}
