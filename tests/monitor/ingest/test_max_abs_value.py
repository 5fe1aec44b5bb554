"""Numbers beyond model.max_abs_value (float32's range by default) are refused at ingest, naming the
record and field, on the column-wise fast path and the record-by-record pass alike (issue 34, item 9)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.errors import ValidationError
from monitor.finite import FLOAT32_MAX
from monitor.records.validation import RecordValidator

FEATURES = [{"name": "x0"}, {"name": "x1"}, {"name": "region", "type": "categorical"}]


def _validator(task: str, **model) -> RecordValidator:
    return RecordValidator(ModelConfig.model_validate({"name": "m", "features": FEATURES, "task": task, **model}),
                           clock=lambda: 1.7e9)


def _record(i: int, x0: object = 1.0, **outputs) -> dict:
    return {"id": f"r{i}", "features": {"x0": x0, "x1": 2, "region": "eu"}, **outputs}


def _refused(call, records) -> list[dict]:
    with pytest.raises(ValidationError) as info:
        call(records)
    return info.value.errors


@pytest.mark.parametrize("value", [1e308, -3.5e38, 10**39])
def test_a_feature_beyond_float32_is_refused_naming_it(value):
    v = _validator("binary")
    records = [_record(0, score=0.5), _record(1, x0=value, score=0.5), _record(2, score=0.5)]
    assert [(e["index"], e["field"]) for e in _refused(v.predictions, records)] == [(1, "features.x0")]


def test_a_regression_prediction_and_label_beyond_float32_are_refused():
    v = _validator("regression")
    errors = _refused(v.predictions, [_record(0, prediction=1.0), _record(1, prediction=1e308)])
    assert [(e["index"], e["field"]) for e in errors] == [(1, "prediction")]
    errors = _refused(v.labels, [{"id": "a", "label": 2.0}, {"id": "b", "label": -1e308}])
    assert [(e["index"], e["field"]) for e in errors] == [(1, "label")]


def test_float32_edge_and_denormals_are_stored():
    v = _validator("regression")
    batch = v.predictions([_record(0, x0=FLOAT32_MAX, prediction=-FLOAT32_MAX), _record(1, x0=1e-310, prediction=0.0)])
    assert batch.features[0] == [FLOAT32_MAX, 1e-310] and batch.scores == [-FLOAT32_MAX, 0.0]
    assert v.labels([{"id": "a", "label": FLOAT32_MAX}]).labels == [FLOAT32_MAX]


def test_the_limit_is_configurable_and_bounded_by_float32():
    v = _validator("regression", max_abs_value=1e6)
    assert [(e["index"], e["field"]) for e in _refused(v.predictions, [_record(0, x0=2e6, prediction=1.0)])] \
        == [(0, "features.x0")]
    assert [(e["index"], e["field"]) for e in _refused(v.labels, [{"id": "a", "label": -1e7}])] == [(0, "label")]
    assert v.predictions([_record(0, x0=-1e6, prediction=1e6)]).scores == [1e6]
    with pytest.raises(ValueError):
        ModelConfig.model_validate({"max_abs_value": 1e39})


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-10**40, 10**40), min_size=1,
                max_size=5), st.sampled_from([FLOAT32_MAX, 1e3]))
def test_both_paths_draw_the_line_alike(values, limit):
    """The fast path declines a batch exactly when the record-by-record pass refuses it."""
    v = _validator("regression", max_abs_value=limit)
    records = [_record(i, x0=x, prediction=x) for i, x in enumerate(values)]
    fast = v._fast_predictions(records, 0)
    bad = [i for i, x in enumerate(values) if abs(float(x)) > limit]
    if bad:
        assert fast is None
        assert sorted({e["index"] for e in _refused(v.predictions, records)}) == bad
    else:
        assert fast is not None and fast == v.slow_predictions(records, 0)
