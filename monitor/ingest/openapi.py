"""OpenAPI descriptions of the ingestion bodies, built from the configured model so that ``/docs``
shows the real feature names. The routes read raw bytes (see app.py), so FastAPI cannot infer these."""
from __future__ import annotations

from functools import partial
from typing import Any

from monitor.config import FeatureSpec, ModelConfig
from monitor.embeddings import INPUT_URI, MAX_INPUT_URI_CHARS
from monitor.errors import Outage
from monitor.records.fields import MAX_EPOCH_SECONDS, MAX_TS_TEXT
from monitor.tasks import PROBA_SUM_TOLERANCE, TASKS, task_of

_TS = {"anyOf": [{"type": "string", "format": "date-time",
                  "description": f"RFC 3339 with a UTC offset, from 1970 to before {MAX_TS_TEXT}"},
                 {"type": "number", "minimum": 0, "exclusiveMaximum": MAX_EPOCH_SECONDS,
                  "description": "epoch seconds"},
                 {"type": "null"}],
       "description": "event time; server time when absent or null"}
_ID = {"type": "string", "minLength": 1, "maxLength": 200, "description": "caller-given; re-sending it is idempotent"}


_VERSION = {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 64}, {"type": "integer", "minimum": 0},
                      {"type": "null"}],
            "description": "the registry version that scored this row (e.g. the champion's version); 'unknown' "
                           "when absent. Checks judge the current champion on the rows it scored."}
_PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
# Classes shown in the records of a task the configured model does not have (the component schemas).
EXAMPLE_CLASSES = ["cat", "dog", "eel"]


_INPUT_URI = {"type": "string", "minLength": 1, "maxLength": MAX_INPUT_URI_CHARS,
              "description": "the path or key of the raw input (an image, a document) the service keeps; stored "
                             "for the user's training code (training.entrypoint), never fetched by driftloop"}


def _feature(f: FeatureSpec) -> dict[str, Any]:
    # null: a missing value (a missing vector), stored as NULL and counted (driftloop_model_feature_missing_ratio).
    if f.type == "embedding":
        return {"type": ["array", "null"], "items": {"type": "number"}, "minItems": f.dim, "maxItems": f.dim,
                "description": f"an embedding: {f.dim} finite numbers (stored as float32)"}
    return {"type": ["number", "null"]} if f.type == "numeric" else {"type": ["string", "null"]}


def _features(model: ModelConfig) -> dict[str, Any]:
    features = {f.name: _feature(f) for f in model.features}
    return {"type": "object", "properties": features, "required": list(features), "additionalProperties": False}


def _class(model: ModelConfig, description: str) -> dict[str, Any]:
    """A class on the wire: its name (one of model.classes), or a number equal to one."""
    if not model.classes:
        return {"type": ["string", "integer"], "description": f"{description}; one of the model's classes "
                "(model.classes, GET /v1/schema)"}
    numeric = [int(c) for c in model.classes if c.lstrip("-").isdigit()]
    names: dict[str, Any] = {"type": "string", "enum": list(model.classes)}
    return {"anyOf": [names, {"type": "integer", "enum": numeric}]} if numeric else names


def _probabilities(model: ModelConfig) -> dict[str, Any]:
    k = len(model.classes) if model.classes else None
    mapping: dict[str, Any] = {"type": "object", "description": "class -> probability"}
    listed: dict[str, Any] = {"type": "array", "items": _PROBABILITY,
                              "description": "one probability per class, in the order of model.classes"}
    if model.classes:
        mapping.update(properties={c: _PROBABILITY for c in model.classes}, required=list(model.classes),
                       additionalProperties=False)
        listed.update(minItems=k, maxItems=k)
    else:
        mapping["additionalProperties"] = _PROBABILITY
    return {"anyOf": [mapping, listed], "description": "the probability of every class, summing to 1 (within "
            f"{PROBA_SUM_TOLERANCE}): an object class -> probability, or a list in the order of model.classes"}


def prediction_schema(model: ModelConfig) -> dict[str, Any]:
    """A prediction record of ``model``'s task (monitor.tasks): binary ``score`` (P(1)) and optional
    ``prediction`` 0/1; multiclass ``probabilities`` and optional ``prediction`` (a class); regression
    ``prediction`` (the predicted number)."""
    task = task_of(model)
    properties: dict[str, Any] = {"id": _ID, "ts": _TS, "features": _features(model),
                                  **task.prediction_properties(model, partial(_class, model),
                                                               partial(_probabilities, model))}
    required = ["id", "features", task.record_output]
    properties["model_version"] = _VERSION
    properties[INPUT_URI] = _INPUT_URI
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


def _label_value(model: ModelConfig) -> dict[str, Any]:
    return task_of(model).label_schema(model.classes, partial(_class, model))


def label_schema(model: ModelConfig) -> dict[str, Any]:
    """``{"id", "<target>": value, "ts"}``; the generic key ``label`` is accepted in place of the
    target's name. The value: 0/1 (binary, or one of its two classes), a class (multiclass), a
    number (regression)."""
    value = _label_value(model)
    what = task_of(model).label_text
    properties: dict[str, Any] = {"id": _ID, model.target: {**value, "description": f"{what} (model.target)"},
                                  "ts": _TS}
    if model.target == "label":
        return {"type": "object", "additionalProperties": False, "required": ["id", "label"], "properties": properties}
    properties["label"] = {**value, "description": f"the same as {model.target!r}, under the generic name"}
    return {"type": "object", "additionalProperties": False, "required": ["id"], "properties": properties,
            "oneOf": [{"required": [model.target]}, {"required": ["label"]}]}


def task_components(model: ModelConfig) -> dict[str, dict[str, Any]]:
    """The prediction and label records of every task, for ``components/schemas`` of the OpenAPI
    document (``x-task`` names the task): the configured model's own, and the other tasks' records
    with its features (and, for classes, ``EXAMPLE_CLASSES``), so one document shows them all."""
    out: dict[str, dict[str, Any]] = {}
    for task in map(task_of, TASKS):
        own = task == model.task
        classes = model.classes if own else task.example_classes(EXAMPLE_CLASSES)
        shaped = model.model_copy(update={"task": task, "classes": classes})
        note = "this model's records" if own else \
            f"the records of a {task} model with these features" + (" (example classes)" if classes else "")
        title = task.capitalize()
        out[f"{title}Prediction"] = {**prediction_schema(shaped), "x-task": task,
                                     "description": f"A {task} prediction record: {note}.",
                                     "example": prediction_example(shaped)}
        out[f"{title}Label"] = {**label_schema(shaped), "x-task": task,
                                "description": f"A {task} label record: {note}.", "example": label_example(shaped)}
    return out


def schema_response(model: ModelConfig) -> dict[str, Any]:
    """``GET /v1/schema``'s answer: the model's columns, task, classes and its exact record shapes."""
    m = model
    return {"model": m.name, "task": m.task, "classes": m.classes,
            "features": [{"name": f.name, "type": f.type, **({"dim": f.dim} if f.dim else {})} for f in m.features],
            "id": m.id, "target": m.target, "score": m.score, "prediction": m.prediction, "threshold": m.threshold,
            "records": {"prediction": prediction_schema(m), "label": label_schema(m)}}


SCHEMA_RESPONSE = {"application/json": {"schema": {
    "type": "object", "required": ["model", "task", "classes", "features", "id", "target", "records"],
    "properties": {
        "model": {"type": "string"}, "task": {"type": "string", "enum": list(TASKS)},
        "classes": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                    "description": "class names in order (multiclass; binary with a non-0/1 target); null otherwise"},
        "features": {"type": "array", "items": {"type": "object", "required": ["name", "type"], "properties": {
            "name": {"type": "string"}, "type": {"type": "string", "enum": ["numeric", "categorical", "embedding"]},
            "dim": {"type": "integer", "description": "an embedding's length (only for type embedding)"}}}},
        "id": {"type": "string", "description": "model.id: the id column of files and frames"},
        "target": {"type": "string"}, "score": {"type": "string"}, "prediction": {"type": "string"},
        "threshold": {"type": "number"},
        "records": {"type": "object", "required": ["prediction", "label"],
                    "description": "JSON Schemas of this model's prediction and label records",
                    "properties": {"prediction": {"type": "object"}, "label": {"type": "object"}}}}}}}


def request_body(record: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    batch = {"oneOf": [{"type": "array", "items": record},
                       {"type": "object", "properties": {"records": {"type": "array", "items": record}},
                        "required": ["records"]}]}
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": batch, "example": [example]},
        "application/x-ndjson": {"schema": {"type": "string", "description": "one JSON record per line"}},
    }}}


def prediction_example(model: ModelConfig) -> dict[str, Any]:
    features = {f.name: (0.5 if f.type == "numeric" else "a" if f.type == "categorical"
                         else [round(0.1 * (k % 7) - 0.3, 1) for k in range(f.dim or 0)]) for f in model.features}
    record: dict[str, Any] = {"id": "req-123", "ts": "2026-11-30T01:02:03Z", "features": features}
    record.update(task_of(model).example_outputs(model.classes or EXAMPLE_CLASSES))
    return {**record, "model_version": "3"}


def label_example(model: ModelConfig) -> dict[str, Any]:
    value: Any = task_of(model).example_label(model.classes or EXAMPLE_CLASSES)
    return {"id": "req-123", model.target: value, "ts": "2026-11-30T07:00:00Z"}

ERROR = {"application/json": {"schema": {"type": "object", "properties": {
    "error": {"type": "string"},
    "kind": {"type": "string", "description": "in a 503, what is down: " + ", ".join(o.value for o in Outage)
             + " (`error` names paths and exception texts only for the bearer token's holders)"},
    "errors": {"type": "array", "items": {"type": "object", "properties": {
        "index": {"type": ["integer", "null"]}, "field": {"type": "string"}, "message": {"type": "string"},
        "id": {"type": "string"}}}}}}}}

HEALTH = {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {
    "status": {"type": "string", "enum": ["ok", "unavailable"]},
    "model": {"type": "string"}, "store": {"type": "string"},
    "checks": {"type": "object", "additionalProperties": {"type": "string", "enum": [
        "ok", *(o.value for o in Outage)]},
               "description": "each readiness check: 'ok' or the kind of its failure"},
    "reasons": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "each failing check's reason (paths, exception texts): only with the bearer "
                               "token, or when no token is configured"},
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
