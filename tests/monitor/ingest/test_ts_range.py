"""A record's ``ts`` ends a little before pandas' last timestamp (2262-04-11T23:47:16Z): every check
reads its window into nanosecond timestamps, so a later time, once stored, would fail each check.
Refused in every accepted form, on the fast path and the record-by-record one, with a 422 naming
the record and field."""
from __future__ import annotations

import pandas as pd
import pytest

from monitor.errors import ValidationError
from monitor.records.fields import MAX_EPOCH_SECONDS, FieldError, check_ts
from monitor.records.validation import RecordValidator
from tests.monitor.store.factories import T0, labels, predictions, small_model

# Any time up to the bound (model.max_future_seconds off: the bound here is what pandas can hold).
validator = RecordValidator(small_model().model_copy(update={"max_future_seconds": None}), clock=lambda: T0)
LATEST = MAX_EPOCH_SECONDS - 1  # 2262-04-10T23:59:59Z


def test_the_bound_is_under_pandas_last_timestamp():
    assert pd.Timestamp("2262-04-11T00:00:00Z").timestamp() == MAX_EPOCH_SECONDS
    assert MAX_EPOCH_SECONDS * 10**9 < pd.Timestamp.max.value


@pytest.mark.parametrize("ts", [9_999_999_999, 9_999_999_999.5, MAX_EPOCH_SECONDS, float(MAX_EPOCH_SECONDS),
                                MAX_EPOCH_SECONDS - 1e-7,  # rounds onto the bound
                                "2270-01-01T00:00:00Z", "2262-04-11T00:00:00Z", "2262-04-11T01:00:00+01:00",
                                "2262-04-12T00:00:00Z", "9999-12-31T23:59:59+00:00"])
@pytest.mark.parametrize("kind", ["predictions", "labels"])
@pytest.mark.parametrize("alone", [True, False], ids=["every-record", "one-of-several"])
def test_a_time_from_2262_04_11_on_is_refused_naming_record_field_and_range(ts, kind, alone):
    records = predictions(4) if kind == "predictions" else labels([f"r{i}" for i in range(4)])
    if alone:
        for rec in records:
            rec["ts"] = ts
    else:
        records[2]["ts"] = ts
    with pytest.raises(ValidationError) as info:
        getattr(validator, kind)(records)
    errors = info.value.errors
    assert len(errors) == (4 if alone else 1)
    index = 0 if alone else 2
    assert (errors[0]["index"], errors[0]["field"]) == (index, "ts")
    assert "between 1970-01-01T00:00:00Z and 2262-04-11T00:00:00Z" in errors[0]["message"], errors[0]


@pytest.mark.parametrize("ts", [LATEST, float(LATEST), "2262-04-10T23:59:59.999999Z", "2262-04-11T00:59:59+01:00"])
@pytest.mark.parametrize("kind", ["predictions", "labels"])
def test_a_time_just_before_the_bound_is_taken_and_fits_a_pandas_timestamp(ts, kind):
    records = predictions(3) if kind == "predictions" else labels([f"r{i}" for i in range(3)])
    records[1]["ts"] = ts
    batch = getattr(validator, kind)(records)
    assert batch is not None
    assert pd.Timestamp(check_ts(ts), unit="us", tz="UTC") < pd.Timestamp("2262-04-11T00:00:00Z")


def test_milliseconds_are_still_named_as_such():
    records = predictions(2)
    records[1]["ts"] = 1_790_000_000_000
    with pytest.raises(ValidationError) as info:
        validator.predictions(records)
    assert "milliseconds? divide by 1000" in info.value.errors[0]["message"]


def test_a_frame_with_a_time_past_the_bound_is_refused():
    """The Python client's frames become epoch seconds, then the same check."""
    records = predictions(3)
    frame = pd.DataFrame([{"id": r["id"], **r["features"], "score": r["score"]} for r in records])
    # Microsecond timestamps reach past pandas' nanosecond ones: a frame can hold 2263.
    frame["ts"] = pd.Series(pd.to_datetime([T0, T0 + 1, T0 + 2], unit="s", utc=True)).astype("datetime64[us, UTC]")
    frame.loc[1, "ts"] = pd.Timestamp("2263-01-01T00:00:00", tz="UTC").as_unit("us")
    assert frame["ts"].dtype == "datetime64[us, UTC]"
    from monitor.records.frames import prediction_records
    with pytest.raises(ValidationError) as info:
        validator.predictions(prediction_records(frame, features=["x0", "x1", "region"], categorical=["region"]))
    assert (info.value.errors[0]["index"], info.value.errors[0]["field"]) == (1, "ts")


def test_over_http_a_late_ts_is_422_and_nothing_is_stored(api, store):
    records = predictions(2)
    records[1]["ts"] = 9_999_999_999
    response = api.post("/v1/predictions", json=records)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["errors"][0]["index"] == 1 and body["errors"][0]["field"] == "ts"
    assert "2262-04-11T00:00:00Z" in body["errors"][0]["message"]
    response = api.post("/v1/labels", json=[{"id": "r0", "label": 1, "ts": "2270-01-01T00:00:00Z"}])
    assert response.status_code == 422, response.text
    assert store.row_counts() == {"predictions": 0, "labels": 0}


@pytest.mark.parametrize("text, same_as", [
    ("2026-11-30t01:02:03z", "2026-11-30T01:02:03Z"),                 # RFC 3339 5.6: t and z in either case
    ("2026-11-30t01:02:03.250+01:00", "2026-11-30T00:02:03.25Z"),
    ("2026-11-30 01:02:03Z", "2026-11-30T01:02:03Z"),                 # the space RFC 3339 allows for T
    ("2016-12-31T23:59:60Z", "2017-01-01T00:00:00Z"),                 # a leap second: the next second, as POSIX
    ("2016-12-31T23:59:60.5Z", "2017-01-01T00:00:00.5Z"),
])
def test_every_rfc_3339_form_is_read_and_stored_alike_on_both_paths(text, same_as):
    assert check_ts(text) == check_ts(same_as)  # was: lower case refused, the leap second refused
    batch = validator.predictions([{**r, "ts": text} for r in predictions(3, ts=None)])
    assert batch.ts == [check_ts(same_as)] * 3
    batch = validator.labels([{"id": "r0", "label": 1, "ts": text}, {"id": "r1", "label": 1, "ts": same_as}])
    assert batch.ts[0] == batch.ts[1] == check_ts(same_as)


@pytest.mark.parametrize("text", ["2026-W48-1T00:00:00Z", "2026-330T00:00:00Z", "20261130T010203Z",
                                  "2026-11-30T01:02:03,5Z"])
def test_iso_8601_forms_outside_rfc_3339_are_refused(text):
    # Python's ISO reader took these: a week date was stored as 2026-11-23, a comma as a fraction.
    with pytest.raises(FieldError, match="RFC 3339"):
        check_ts(text)


@pytest.mark.parametrize("kind", ["predictions", "labels"])
def test_a_time_past_max_future_seconds_is_refused_naming_the_option(kind):
    # 5,000 rows stamped 2262 were the newest of every window: the live rows were never checked.
    strict = RecordValidator(small_model(), clock=lambda: T0)  # default: 366 days ahead at most
    records = predictions(4) if kind == "predictions" else labels([f"r{i}" for i in range(4)])
    records[1]["ts"] = "2262-04-10T00:00:00Z"
    records[2]["ts"] = T0 + 400 * 86_400
    with pytest.raises(ValidationError) as info:
        getattr(strict, kind)(records)
    errors = info.value.errors
    assert [(e["index"], e["field"]) for e in errors] == [(1, "ts"), (2, "ts")]
    assert "model.max_future_seconds" in errors[0]["message"] and "2026-09-21T14:13:20Z" in errors[0]["message"]
    records = predictions(4) if kind == "predictions" else labels([f"r{i}" for i in range(4)])
    records[1]["ts"] = T0 + 300 * 86_400  # within a year: a replay dated ahead is taken
    assert getattr(strict, kind)(records) is not None
