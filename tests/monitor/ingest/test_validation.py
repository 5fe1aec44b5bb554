"""Record validation: messages that name index and field, and a fast path that agrees with the
record-by-record one (property-tested)."""
from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.errors import ValidationError
from monitor.finite import FLOAT32_MAX
from monitor.records.fields import FieldError, check_ts
from monitor.records.validation import RecordValidator
from tests.monitor.store.factories import prediction, predictions, small_model

NOW = 1_790_000_123.5
# Times are checked against the range pandas holds, not the clock (model.max_future_seconds off):
# the property tests below stamp records years after the clock they pass (test_ts_range.py has the bound).
validator = RecordValidator(small_model().model_copy(update={"max_future_seconds": None}), clock=lambda: NOW)


def _errors(records, kind="predictions") -> list[dict]:
    with pytest.raises(ValidationError) as info:
        getattr(validator, kind)(records)
    return info.value.errors


def _with(**over) -> dict:
    rec = prediction(0)
    rec.update(over)
    return rec


def _with_feature(name, value) -> dict:
    rec = prediction(0)
    rec["features"][name] = value
    return rec


@pytest.mark.parametrize("record, field, message", [
    ("oops", "(record)", "expected an object, got 'oops'"),
    ({k: v for k, v in prediction(0).items() if k != "score"}, "score", "required field is missing"),
    (_with(extra=1), "extra", "unknown field (allowed: features, id, input_uri, model_version, prediction, score, ts)"),
    (_with(id=""), "id", "expected a string of 1-200 characters, got a string of 0 characters"),
    (_with(id="x" * 201), "id", "expected a string of 1-200 characters, got a string of 201 characters"),
    (_with(id=17), "id", "expected a string of 1-200 characters, got 17"),
    (_with(id="a\x00b"), "id", "without NUL characters"),
    (_with(score=1.5), "score", "expected a finite number in [0, 1], got 1.5"),
    (_with(score=True), "score", "expected a finite number in [0, 1], got true"),
    (_with(score=float("nan")), "score", "expected a finite number in [0, 1], got nan"),
    (_with(prediction=2), "prediction", "expected 0 or 1, got 2"),
    (_with(prediction=1.0), "prediction", "expected 0 or 1, got 1.0"),
    (_with(ts="yesterday"), "ts", "expected an RFC 3339 timestamp"),
    (_with(ts="2026-11-30T01:02:03"), "ts", "(no UTC offset)"),
    (_with(ts=1_790_000_000_000), "ts", "milliseconds? divide by 1000"),
    (_with(ts=-5), "ts", "between 1970-01-01T00:00:00Z and 2262-04-11T00:00:00Z"),
    (_with(features=[1, 2]), "features", "expected an object of feature values, got a list"),
    (_with_feature("x1", "abc"), "features.x1", "expected a finite number, got 'abc'"),
    (_with_feature("x1", float("inf")), "features.x1", "expected a finite number, got inf"),
    (_with_feature("region", 3), "features.region", "expected a string (categorical feature), got 3"),
    (_with_feature("color", "red"), "features.color", "unknown feature (model 'm' has: x0, x1, region)"),
])
def test_each_problem_names_index_and_field(record, field, message):
    errors = _errors([prediction(5), record])
    assert len(errors) == 1
    assert errors[0]["index"] == 1 and errors[0]["field"] == field
    assert message in errors[0]["message"]


def test_missing_feature_is_named():
    rec = prediction(0)
    del rec["features"]["x0"]
    assert _errors([rec]) == [{"index": 0, "field": "features.x0", "message": "missing feature (numeric)"}]


def test_all_problems_are_reported_and_the_list_is_capped():
    errors = _errors([_with(score=2, prediction=5)] + [{"id": i} for i in range(100)])
    assert errors[:2] == [{"index": 0, "field": "score", "message": "expected a finite number in [0, 1], got 2"},
                          {"index": 0, "field": "prediction", "message": "expected 0 or 1, got 5"}]
    assert len(errors) == 50
    with pytest.raises(ValidationError, match=r"^302 problem\(s\) in a batch of 101 .*first 50 listed"):
        validator.predictions([_with(score=2, prediction=5)] + [{"id": i} for i in range(100)])


def test_body_must_be_a_list():
    with pytest.raises(ValidationError) as info:
        validator.predictions({"id": "a"})
    assert info.value.errors[0]["field"] == "(body)"


@pytest.mark.parametrize("value, expected", [
    ("2026-11-30T01:02:03Z", datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc)),
    ("2026-11-30T02:02:03.25+01:00", datetime(2026, 11, 30, 1, 2, 3, 250000, tzinfo=timezone.utc)),
    (1_790_000_000, datetime(2026, 9, 21, 14, 13, 20, tzinfo=timezone.utc)),
    (1_790_000_000.000001, datetime(2026, 9, 21, 14, 13, 20, 1, tzinfo=timezone.utc)),
])
def test_timestamps(value, expected):
    micros = check_ts(value)
    assert micros == ((expected - datetime(1970, 1, 1, tzinfo=timezone.utc))
                      // (expected - expected + (datetime(1970, 1, 1, 0, 0, 0, 1) - datetime(1970, 1, 1))))


def test_timestamps_rejected():
    for bad in ("2026-11-30", "", "now", True, [1], float("nan"), 1e10, -1.8e302, -1):
        with pytest.raises(FieldError):
            check_ts(bad)


def test_server_time_and_derived_prediction():
    batch = validator.predictions([_with(score=0.9), _with(id="b", score=0.2, prediction=1)] + [
        {k: v for k, v in prediction(3).items() if k != "ts"}])
    assert batch.ts[2] == int(NOW * 1_000_000) and batch.ts_given == [True, True, False]
    assert batch.predictions == [1, 1, 0] and batch.prediction_given == [False, True, False]


def test_ints_are_normalised_to_floats():
    batch = validator.predictions([_with(score=1, features={"x0": 3, "x1": -2, "region": "eu"})])
    assert batch.features[0] == [3.0] and type(batch.features[0][0]) is float and type(batch.scores[0]) is float


def test_labels():
    batch = validator.labels([{"id": "a", "label": 1}, {"id": "b", "label": 0, "ts": 1_790_000_000}])
    assert batch.labels == [1, 0] and batch.ts_given == [False, True]
    errors = _errors([{"id": "a", "label": "yes"}, {"id": "b"}, {"id": "c", "label": 1, "score": 1}], "labels")
    assert errors == [
        {"index": 0, "field": "label", "message": "expected 0 or 1, got 'yes'"},
        {"index": 1, "field": "label", "message": "required field is missing"},
        {"index": 2, "field": "score", "message": "unknown field (allowed: id, label, ts)"},
    ]


def test_repeats_in_a_batch_keep_request_positions():
    batch = validator.predictions([prediction(0), prediction(1), prediction(0), prediction(2)])
    assert batch.ids == ["r0", "r1", "r2"] and batch.duplicates == 1
    assert [batch.position(i) for i in range(3)] == [0, 1, 3]


# ---- the fast path agrees with the slow one ------------------------------------------------------
# Within model.max_abs_value (float32's range): a larger number is refused (tests/monitor/ingest/test_max_abs_value.py).
finite = st.floats(-FLOAT32_MAX, FLOAT32_MAX, allow_nan=False, width=64) | st.integers(-2**53, 2**53)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
timestamps = st.none() | st.floats(0, 8e9) | st.integers(0, 9_000_000_000) | st.sampled_from(
    ["2026-11-30T01:02:03Z", "2026-11-30T01:02:03.123456+05:30", "1999-12-31T23:59:59.5-08:00"])
valid_record = st.fixed_dictionaries(
    {"id": text, "features": st.fixed_dictionaries({"x0": finite | st.none(), "x1": finite,
                                                    "region": text | st.none()}),
     "score": st.floats(0, 1) | st.sampled_from([0, 1])},
    optional={"ts": timestamps, "prediction": st.none() | st.sampled_from([0, 1])})


@settings(max_examples=150, deadline=None)
@given(st.lists(valid_record, max_size=8, unique_by=lambda r: r["id"]))
def test_fast_and_slow_paths_build_the_same_batch(records):
    fast = validator._fast_predictions(records, 123)
    slow = validator.slow_predictions(records, 123)
    assert fast == slow


junk = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
        | st.lists(st.integers(), max_size=2))
maybe_bad_record = valid_record.flatmap(lambda r: st.fixed_dictionaries({
    k: (st.just(v) | junk) if k != "features" else st.fixed_dictionaries(
        {fk: st.just(fv) | junk for fk, fv in v.items()}) | junk
    for k, v in r.items()}, optional={"extra": junk}) | junk)


def assert_paths_agree(v: RecordValidator, records: list, kind: str = "predictions"):
    """The fast path accepts only what the record-by-record pass accepts, and then builds the same
    batch; a refusal names each problem's field. Returns the slow pass's batch (None if refused)."""
    slow_pass, fast_pass = ((v.slow_predictions, v._fast_predictions) if kind == "predictions"
                            else (v.slow_labels, v._fast_labels))
    try:
        slow = slow_pass(records, 123)
    except ValidationError as exc:
        assert exc.errors and all(isinstance(e["field"], str) and e["message"] for e in exc.errors)
        assert fast_pass(records, 123) is None
        return None
    assert fast_pass(records, 123) in (None, slow)
    return slow


@settings(max_examples=300, deadline=None)
@given(st.lists(maybe_bad_record, max_size=6))
def test_fast_path_never_accepts_what_the_slow_path_rejects(records):
    assert_paths_agree(validator, records)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"id": text, "label": st.sampled_from([0, 1]) | junk},
                                      optional={"ts": timestamps | junk}), max_size=6))
def test_label_paths_agree(records):
    slow = assert_paths_agree(validator, records, "labels")
    assert slow is None or all(isinstance(t, int) and not math.isnan(t) for t in slow.ts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({"id": text, "label": st.sampled_from([0, 1])}, optional={"ts": timestamps}),
                max_size=6))
def test_valid_label_batches_always_take_the_fast_path(records):
    assert validator._fast_labels(records, 7) == validator.slow_labels(records, 7)


def test_a_json_boolean_for_a_numeric_feature_is_1_or_0_on_both_paths():
    """A boolean column of the user's data is a numeric 0/1 feature (driftloop init says so), and a
    service serialising its values sends JSON true/false: stored as 1.0/0.0 by the fast and the
    slow path alike. A score, a regression label or a category stays strict."""
    records = [_with_feature("x1", True), {**_with_feature("x1", False), "id": "other"}]
    fresh = RecordValidator(small_model(), clock=lambda: NOW)
    batch = fresh.predictions(records)
    assert fresh.paths["prediction", "fast"] == 1
    assert batch == fresh.slow_predictions(records, int(NOW * 1_000_000))
    x1 = batch.features[small_model().feature_names.index("x1")]
    assert x1 == [1.0, 0.0] and all(type(v) is float for v in x1)
    mixed = [_with_feature("x1", True), {**_with_feature("x1", None), "id": "b"}, {**_with_feature("x1", 2), "id": "c"}]
    assert fresh.predictions(mixed).features[small_model().feature_names.index("x1")] == [1.0, None, 2.0]
    assert _errors([_with(score=True)])[0]["message"] == "expected a finite number in [0, 1], got true"
    assert "got true" in _errors([_with_feature("region", True)])[0]["message"]


def test_valid_batch_takes_the_fast_path():
    fresh = RecordValidator(small_model(), clock=lambda: NOW)
    records = predictions(20)
    assert fresh.predictions(records) == fresh.slow_predictions(records, int(NOW * 1_000_000))
    assert fresh.paths == {("prediction", "fast"): 1}
    with pytest.raises(ValidationError):
        fresh.predictions([_with(id=17)])
    assert fresh.paths == {("prediction", "fast"): 1}  # a rejected batch is not counted
    assert fresh.predictions([_with(model_version=7)]).model_versions == ["7"]  # the slow path normalises ints
    assert fresh.paths == {("prediction", "fast"): 1, ("prediction", "slow"): 1}


@pytest.mark.parametrize("records", [
    [{"id": "a", "label": 1}, {"id": "b", "label": 0}],
    [{"id": "a", "label": 1, "ts": 1_790_000_000}, {"id": "b", "label": 0, "ts": "2026-11-30T01:02:03Z"}],
    [{"id": "a", "churned": 1}, {"id": "b", "label": 0}],  # the target's own name is renamed before either path
])
def test_valid_labels_take_the_fast_path(records):
    fresh = RecordValidator(small_model().model_copy(update={"target": "churned"}), clock=lambda: NOW)
    batch = fresh.labels(records)
    assert batch.labels == [1, 0]
    assert fresh.paths == {("label", "fast"): 1}


def test_null_features_are_missing_values_on_both_paths():
    records = predictions(4)
    records[1]["features"]["x0"] = None
    records[2]["features"]["region"] = None
    records[3]["features"]["x1"] = 3  # an int next to a null: stored as float
    fast = validator._fast_predictions(records, 1)
    assert fast is not None and fast == validator.slow_predictions(records, 1)
    assert fast.features[0][1] is None and fast.features[2][2] is None and fast.features[1][3] == 3.0


def test_target_name_is_accepted_for_label():
    named = RecordValidator(small_model().model_copy(update={"target": "churned"}), clock=lambda: NOW)
    batch = named.labels([{"id": "a", "churned": 1}, {"id": "b", "label": 0}])
    assert batch.labels == [1, 0]
    with pytest.raises(ValidationError) as info:
        named.labels([{"id": "a", "churned": "yes"}])
    assert info.value.errors[0]["field"] == "churned"
    # Both names in one record: the same field twice, said so (it was "unknown field" for the target's name).
    with pytest.raises(ValidationError) as info:
        named.labels([{"id": "a", "label": 0}, {"id": "b", "label": 1, "churned": 1}])
    assert info.value.errors == [{"index": 1, "field": "churned", "message": "the same field as 'label' (the "
                                  "model's name for it), which the record also holds: send one of them"}]
    scored = RecordValidator(small_model().model_copy(update={"score": "p_churn"}), clock=lambda: NOW)
    with pytest.raises(ValidationError) as info:
        scored.predictions([{**prediction(1), "p_churn": 0.5}])
    assert info.value.errors[0]["field"] == "p_churn" and "same field as 'score'" in info.value.errors[0]["message"]


@pytest.mark.parametrize("drop", [(), ("x1", "region")], ids=["three features", "one feature"])
def test_the_fast_path_reads_features_in_the_configured_order_whatever_the_records_order(drop):
    """The fast path looks up every configured name in each record at once (one feature: one
    name); the records' own key order does not matter, and a record lacking a feature is named."""
    model = small_model(drop=drop)
    fresh = RecordValidator(model, clock=lambda: NOW)
    records = [{**rec, "features": {k: rec["features"][k] for k in reversed(model.feature_names)}}
               for rec in predictions(5)]
    batch = fresh.predictions(records)
    assert fresh.paths == {("prediction", "fast"): 1}
    assert batch.features == [[rec["features"][name] for rec in records] for name in model.feature_names]
    assert batch == fresh.slow_predictions(records, int(NOW * 1_000_000))
    records[3]["features"] = {"x9": 1.0, **{k: v for k, v in records[3]["features"].items() if k != "x0"}}
    with pytest.raises(ValidationError) as info:
        fresh.predictions(records)
    assert {(e["index"], e["field"]) for e in info.value.errors} == {(3, "features.x9"), (3, "features.x0")}


def test_a_made_up_field_name_is_echoed_shortened():
    # A 1 MB unknown field name was echoed whole in the 422 (a 10 MB request, a 10 MB answer).
    long_name = "f" * 1_000_000
    [error] = _errors([_with(**{long_name: 1})])
    assert len(error["field"]) <= 200 and error["field"].endswith("...")
    assert len(error["message"]) <= 2000 and "unknown field" in error["message"]
