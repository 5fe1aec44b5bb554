"""The column-wise fast path for multiclass and regression records and labels (and binary labels
with named classes): it agrees with the record-by-record pass on valid batches, never accepts what
that pass refuses, and valid batches take it (property-tested, as tests/monitor/ingest/test_validation.py
does for binary predictions)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.errors import ValidationError
from monitor.finite import FLOAT32_MAX
from monitor.records.validation import RecordValidator
from tests.monitor.ingest.test_validation import assert_paths_agree

NOW = 1_790_000_123.5
CLASSES = ["bird", "cat", "dog"]
FEATURES = [{"name": "x0"}, {"name": "x1"}, {"name": "region", "type": "categorical"}]


def _validator(task: str, classes: list | None = None) -> RecordValidator:
    # Times against pandas' range only: the property tests pass a `now` of 7 or 123 µs.
    model = {"name": "m", "features": FEATURES, "task": task, "max_future_seconds": None}
    if classes is not None:
        model["classes"] = classes
    return RecordValidator(ModelConfig.model_validate(model), clock=lambda: NOW)


multiclass = _validator("multiclass", CLASSES)
numbered = _validator("multiclass", ["0", "1", "2"])  # classes that are numbers: labels may be ints
regression = _validator("regression")
named_binary = _validator("binary", ["no", "yes"])

# Within model.max_abs_value (float32's range): a larger number is refused (tests/monitor/ingest/test_max_abs_value.py).
finite = st.floats(-FLOAT32_MAX, FLOAT32_MAX, allow_nan=False, width=64) | st.integers(-2**53, 2**53)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
features = st.fixed_dictionaries({"x0": finite | st.none(), "x1": finite, "region": text | st.none()})
timestamps = st.none() | st.floats(0, 8e9) | st.integers(0, 9_000_000_000)


@st.composite
def probabilities(draw, classes=CLASSES):
    """A valid probability vector: floats summing to 1, a one-hot of ints, ties included."""
    kind = draw(st.sampled_from(["floats", "onehot", "tie"]))
    k = len(classes)
    if kind == "onehot":
        values: list = [0] * k
        values[draw(st.integers(0, k - 1))] = 1
    elif kind == "tie":
        values = [1 / k] * k
    else:
        weights = draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k).filter(lambda w: sum(w) > 0.01))
        values = [w / sum(weights) for w in weights]
    return draw(st.sampled_from([values, dict(zip(classes, values))]))


multiclass_record = st.fixed_dictionaries(
    {"id": text, "features": features, "probabilities": probabilities()},
    optional={"ts": timestamps, "prediction": st.none() | st.sampled_from(CLASSES),
              "model_version": st.none() | st.sampled_from(["3", "v4"])})
regression_record = st.fixed_dictionaries(
    {"id": text, "features": features, "prediction": finite},
    optional={"ts": timestamps, "model_version": st.none() | st.just("2")})
junk = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5)
        | st.lists(st.floats(), max_size=4)
        | st.dictionaries(st.sampled_from(CLASSES + ["owl"]), st.floats(), max_size=4))


def spoiled(record):
    """The record with some values (or the features' values) swapped for junk, or an extra field."""
    return record.flatmap(lambda r: st.fixed_dictionaries({
        k: (st.just(v) | junk) if k != "features" else st.fixed_dictionaries(
            {fk: st.just(fv) | junk for fk, fv in v.items()}) | junk
        for k, v in r.items()}, optional={"extra": junk}) | junk)


@pytest.mark.parametrize("validator, records", [(multiclass, multiclass_record), (regression, regression_record)],
                         ids=["multiclass", "regression"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_fast_and_slow_paths_build_the_same_batch(validator, records, data):
    batch = data.draw(st.lists(records, max_size=8, unique_by=lambda r: r["id"]))
    fast = validator._fast_predictions(batch, 123)
    assert fast is not None, "a valid batch must take the fast path"
    assert fast == validator.slow_predictions(batch, 123)


@pytest.mark.parametrize("validator, records", [(multiclass, multiclass_record), (regression, regression_record)],
                         ids=["multiclass", "regression"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_path_never_accepts_what_the_slow_path_rejects(validator, records, data):
    assert_paths_agree(validator, data.draw(st.lists(spoiled(records), max_size=6)))


@pytest.mark.parametrize("validator, values", [
    (multiclass, st.sampled_from(CLASSES)),
    (numbered, st.sampled_from(["0", "1", "2", 0, 1, 2])),
    (regression, finite),
    (named_binary, st.sampled_from(["no", "yes", 0, 1])),
], ids=["multiclass", "numbered-classes", "regression", "named-binary"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_label_paths_agree(validator, values, data):
    good = data.draw(st.lists(st.fixed_dictionaries({"id": text, "label": values}, optional={"ts": timestamps}),
                              max_size=6))
    if len({type(r["label"]) for r in good}) <= 1:  # one type per column: the fast path's case
        assert validator._fast_labels(good, 7) == validator.slow_labels(good, 7)
    mixed = data.draw(st.lists(st.fixed_dictionaries({"id": text, "label": values | junk},
                                                     optional={"ts": timestamps | junk}), max_size=6))
    assert_paths_agree(validator, mixed, "labels")


def test_valid_batches_of_every_task_take_the_fast_path():
    fresh = _validator("multiclass", CLASSES)
    records = [{"id": f"r{i}", "features": {"x0": 0.5, "x1": i, "region": "eu"},
                "probabilities": [0.2, 0.5, 0.3] if i % 2 else {"dog": 0.6, "bird": 0.1, "cat": 0.3},
                **({"prediction": "bird"} if i == 3 else {})} for i in range(6)]
    batch = fresh.predictions(records)
    assert fresh.paths == {("prediction", "fast"): 1}
    # The served class: the most probable one unless the record names it; its probability is the score.
    assert batch.predictions == [2, 1, 2, 0, 2, 1] and batch.scores == [0.6, 0.5, 0.6, 0.2, 0.6, 0.5]
    assert batch.prediction_given == [False, False, False, True, False, False]
    assert batch.probas == [[0.1, 0.2, 0.1, 0.2, 0.1, 0.2], [0.3, 0.5, 0.3, 0.5, 0.3, 0.5],
                            [0.6, 0.3, 0.6, 0.3, 0.6, 0.3]]
    assert fresh.labels([{"id": "r0", "label": "dog"}, {"id": "r1", "label": "cat"}]).labels == [2, 1]
    assert fresh.paths[("label", "fast")] == 1

    reg = _validator("regression")
    batch = reg.predictions([{"id": "a", "features": {"x0": 1, "x1": 2, "region": None}, "prediction": 3},
                             {"id": "b", "features": {"x0": 1, "x1": 2, "region": "us"}, "prediction": -0.25}])
    assert batch.scores == [3.0, -0.25] and type(batch.scores[0]) is float and batch.predictions == [0, 0]
    assert reg.labels([{"id": "a", "label": 7}, {"id": "b", "label": 1.5}]).labels == [7.0, 1.5]
    assert reg.paths == {("prediction", "fast"): 1, ("label", "fast"): 1}


@pytest.mark.parametrize("record, field, message", [
    ({"probabilities": [0.5, 0.6, -0.1]}, "probabilities", "class 'dog': expected a finite number in [0, 1]"),
    ({"probabilities": [0.5, 0.6, 0.1]}, "probabilities", "probabilities sum to 1.2000, expected 1"),
    ({"probabilities": [0.5, 0.5]}, "probabilities", "expected 3 probabilities"),
    ({"probabilities": {"bird": 0.5, "cat": 0.5, "owl": 0.0}}, "probabilities", "unknown class(es) 'owl'"),
    ({"probabilities": [0.2, 0.5, 0.3], "prediction": "owl"}, "prediction", "unknown class 'owl'"),
    ({"probabilities": [True, 0, 0]}, "probabilities", "class 'bird': expected a finite number in [0, 1], got true"),
])
def test_a_bad_multiclass_record_is_named_after_the_fast_path_declines(record, field, message):
    fresh = _validator("multiclass", CLASSES)
    good = {"id": "ok", "features": {"x0": 0.5, "x1": 1, "region": "eu"}, "probabilities": [0.2, 0.5, 0.3]}
    bad = {**good, "id": "bad", **record}
    with pytest.raises(ValidationError) as info:
        fresh.predictions([good, bad])
    assert [(e["index"], e["field"]) for e in info.value.errors] == [(1, field)]
    assert message in info.value.errors[0]["message"]
    assert not fresh.paths  # a refused batch is not counted
