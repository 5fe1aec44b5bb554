"""Every value that reaches the store is bounded: a categorical value past ``model.max_value_chars``
is refused naming its record and feature; Alertmanager labels, annotations and their counts too;
bodies are parsed only when their parsed form stays a small multiple of their size."""
from __future__ import annotations

import copy

import pytest

from monitor.daemon.runtime.alertmanager import MAX_LABEL_CHARS, MAX_PAIRS, WebhookPayload, summarize
from monitor.daemon.runtime.api import BadRequest, parse_body
from monitor.errors import ValidationError
from monitor.ingest import parsing
from monitor.records.validation import RecordValidator
from tests.faults.conftest import FIRING
from tests.monitor.store.factories import T0, prediction, predictions, small_model

import orjson


def _validator(limit: int) -> RecordValidator:
    return RecordValidator(small_model().model_copy(update={"max_value_chars": limit}), clock=lambda: T0)


def test_a_categorical_value_past_the_limit_is_refused_naming_record_and_feature():
    records = predictions(5)
    records[3]["features"]["region"] = "x" * 33
    with pytest.raises(ValidationError) as info:
        _validator(32).predictions(records)
    (error,) = info.value.errors
    assert (error["index"], error["field"]) == (3, "features.region")
    assert "at most 32 characters" in error["message"] and "model.max_value_chars" in error["message"]
    assert "got a string of 33 characters" in error["message"]


def test_a_value_at_the_limit_takes_the_fast_path():
    validator = _validator(32)
    records = predictions(5)
    records[2]["features"]["region"] = "y" * 32
    batch = validator.predictions(records)
    assert batch.features[2][2] == "y" * 32
    assert validator.paths["prediction", "fast"] == 1 and not validator.paths["prediction", "slow"]


def test_the_default_limit_is_1024_characters():
    assert small_model().max_value_chars == 1024
    with pytest.raises(ValidationError):
        RecordValidator(small_model()).predictions([prediction(0, features={"x0": 1, "x1": 2, "region": "z" * 1025})])


def _alert_payload(**alert_over) -> bytes:
    base: dict = copy.deepcopy(FIRING)["alerts"][0]  # type: ignore[index,assignment]
    alert = {**base, **alert_over}
    return orjson.dumps({**FIRING, "alerts": [alert]})


def test_an_alertmanager_label_past_the_limit_is_a_422_naming_it():
    big = {"alertname": "ModelAccuracyDrop", "component": "model", "huge": "v" * (5 * 2**20)}
    with pytest.raises(BadRequest) as info:
        parse_body(_alert_payload(labels=big), WebhookPayload, "Alertmanager webhook payload (version 4)")
    assert info.value.status == 422
    assert [e["field"] for e in info.value.errors] == ["alerts.0.labels.huge"]
    assert str(MAX_LABEL_CHARS) in info.value.errors[0]["message"]


def test_too_many_labels_or_long_annotations_are_refused_and_summaries_are_bounded():
    many = {f"l{i}": "v" for i in range(MAX_PAIRS + 1)}
    with pytest.raises(BadRequest) as info:
        parse_body(_alert_payload(labels=many), WebhookPayload, "payload")
    assert info.value.errors[0]["field"] == "alerts.0.labels"
    with pytest.raises(BadRequest) as info:
        parse_body(_alert_payload(annotations={"description": "d" * 5000}), WebhookPayload, "payload")
    assert info.value.errors[0]["field"] == "alerts.0.annotations.description"
    many_alerts = orjson.loads(_alert_payload(annotations={"summary": "s" * 4000}))
    many_alerts["alerts"] *= 50
    payload = parse_body(orjson.dumps(many_alerts), WebhookPayload, "payload")
    text = summarize(payload.alerts)
    assert len(text) < 10 * 310 + 40 and text.endswith("and 40 more")


def test_a_body_dense_with_empty_objects_is_refused_before_parsing():
    with pytest.raises(parsing.BodyError) as info:
        parsing.parse_records(b"[" + b"{}," * 100_000 + b"{}]", "json")
    assert info.value.status == 413
    assert len(parsing.parse_records(orjson.dumps(predictions(2000)), "json")) == 2000


def test_ndjson_past_max_batch_records_is_refused_before_parsing():
    body = b"\n".join(orjson.dumps(r) for r in predictions(11))
    with pytest.raises(parsing.BodyError) as info:
        parsing.parse_records(body, "ndjson", max_records=10)
    assert info.value.status == 413 and "server.max_batch_records" in str(info.value)
    assert len(parsing.parse_records(body, "ndjson", max_records=11)) == 11


def test_gzip_output_is_bounded_by_the_limit():
    import gzip
    bomb = gzip.compress(b" " * (64 * 2**20))
    with pytest.raises(parsing.BodyError) as info:
        parsing.decode(bomb, "gzip", 2**20)
    assert info.value.status == 413 and "server.max_body_bytes" in str(info.value)
