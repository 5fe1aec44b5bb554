"""Multivariate drift (monitor/drift/multivariate.py): the tabular features together, by NannyML's PCA
reconstruction error, beside the per-feature tests."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from monitor.config import DriftConfig, ModelConfig
from monitor.drift import DriftEvaluator, ModelMetricsCollector, evaluate_window
from monitor.drift.multivariate import (MIN_CHUNKS, MultivariateReference, fit_reference, multivariate_drift,
                                        prepare_multivariate, reconstruction_errors)
from monitor.drift.summary import summary_html

NUMERIC = ["a", "b", "n0", "n1"]
MODEL = ModelConfig(features=[{"name": n} for n in NUMERIC] + [{"name": "c", "type": "categorical"}])
DRIFT = DriftConfig()


def rows(n: int, seed: int, *, rho: float = 0.8, missing: float = 0.0, flip_category: bool = False) -> pd.DataFrame:
    """``a`` and ``b`` standard normal with correlation ``rho`` (each keeps its marginal whatever ``rho``),
    two independent normals, a categorical ``c`` (70 % "hi", 30 % "lo") that follows ``n0``: "hi" on its
    top 70 % (``flip_category``: on its bottom 70 %, the same marginals of both), and a score."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 4))
    a = z[:, 0]
    b = rho * z[:, 0] + np.sqrt(1 - rho ** 2) * z[:, 1]
    n0 = z[:, 2]
    cut = np.quantile(n0, 0.7) if flip_category else np.quantile(n0, 0.3)
    high = n0 < cut if flip_category else n0 > cut
    frame = pd.DataFrame({"a": a, "b": b, "n0": n0, "n1": z[:, 3],
                          "c": pd.Series(np.where(high, "hi", "lo"), dtype=object)})
    if missing:
        for name in ("a", "c"):
            frame.loc[rng.uniform(size=n) < missing, name] = None
    frame["score"] = 1.0 / (1.0 + np.exp(-(z[:, 2] + z[:, 3])))
    frame["label"] = (rng.uniform(size=n) < frame["score"]).astype(int)
    return frame


def check(reference: pd.DataFrame, window: pd.DataFrame, **drift: object):
    return evaluate_window(reference, window, MODEL, DriftConfig(**drift), None)


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return rows(6000, seed=1)


@pytest.fixture(scope="module")
def prepared(reference) -> MultivariateReference:
    fitted = prepare_multivariate(reference, MODEL, DRIFT)
    assert isinstance(fitted, MultivariateReference)
    return fitted


# -- what it catches that per-feature drift misses ---------------------------------------------------
def test_a_flipped_correlation_is_caught_where_no_feature_drifted(reference):
    result = check(reference, rows(3000, seed=2, rho=-0.8))
    assert result.drifted_features == [] and result.drift_share == 0.0   # every marginal is unchanged
    mv = result.multivariate
    assert mv is not None and mv.drifted and mv.error > mv.upper
    assert (mv.features, mv.rows, mv.reference_rows) == (5, 3000, 6000)
    assert 1 <= mv.components < mv.features and mv.explained >= 0.65
    # Reported beside the drift share, not in it: the loop's dataset drift is unchanged by default ...
    assert not result.dataset_drift
    # ... and counts when asked to.
    assert check(reference, rows(3000, seed=2, rho=-0.8), multivariate_dataset_drift=True).dataset_drift


def test_a_categorical_whose_link_to_a_numeric_flips_is_caught(reference):
    result = check(reference, rows(3000, seed=3, flip_category=True))
    assert result.drifted_features == []
    assert result.multivariate is not None and result.multivariate.drifted


@pytest.mark.parametrize("seed", range(3))
def test_a_stationary_window_is_not_flagged_end_to_end(reference, seed):
    result = check(reference, rows(2000, seed=10 + seed))
    assert result.multivariate is not None and not result.multivariate.drifted
    assert result.multivariate.lower < result.multivariate.error < result.multivariate.upper


def test_few_false_alarms_over_many_stationary_windows():
    """30 references and windows drawn afresh, of the sizes a daemon sees: at 3 standard deviations a
    stationary window is flagged about 3 times in 1,000; allow one of 60."""
    flagged = 0
    for seed in range(30):
        reference = rows(1500, seed=100 + seed)
        fitted = prepare_multivariate(reference, MODEL, DRIFT, seed=seed)
        assert isinstance(fitted, MultivariateReference)
        for size in (300, 1500):
            verdict = multivariate_drift(fitted, rows(size, seed=200 + seed), DRIFT)
            assert verdict is not None and verdict.error is not None
            flagged += verdict.drifted
    assert flagged <= 1


def test_cross_fitted_reference_errors_match_new_rows_where_in_sample_ones_run_low():
    """Fitted and measured on the same rows, the components keep part of each row's residual: a small
    reference with many features then reads lower errors than any new window (module docstring)."""
    wide = [f"x{i}" for i in range(20)]
    mixing = np.random.default_rng(99).standard_normal((4, 20))   # 4 factors behind 20 features

    def draw(n: int, rng: np.random.Generator) -> pd.DataFrame:
        return pd.DataFrame(rng.standard_normal((n, 4)) @ mixing + rng.standard_normal((n, 20)), columns=wide)

    in_sample_gap, cross_gap = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        reference = draw(300, rng)
        fitted = fit_reference(reference, wide, [], seed)
        x = fitted.encoding.matrix(reference)
        in_sample = reconstruction_errors(x, fitted.mean, fitted.components).mean()
        new = fitted.errors_of(draw(3000, rng)).mean()
        in_sample_gap.append(new / in_sample - 1)
        cross_gap.append(new / fitted.errors.mean() - 1)
    assert np.median(in_sample_gap) > 0.01                           # in-sample: new rows read 1.5 % higher
    assert abs(np.median(cross_gap)) < np.median(in_sample_gap) / 2    # cross-fitted: closer


# -- the band ------------------------------------------------------------------------------------------
def test_the_band_comes_from_window_sized_chunks_when_the_reference_has_enough(prepared):
    small = prepared.band(500, 3.0)                       # 12 chunks of 500 in 6,000 rows
    assert small.chunks == 12 >= MIN_CHUNKS
    chunk_means = prepared.errors[:6000].reshape(12, 500).mean(axis=1)
    floor = prepared.errors.std() * np.sqrt(1 / 500 + 1 / 6000)
    assert small.sd == pytest.approx(max(chunk_means.std(), floor))
    assert small.upper == pytest.approx(small.centre + 3 * small.sd)
    big = prepared.band(3000, 3.0)                        # 2 chunks: the floor alone
    assert big.chunks == 2 and big.sd == pytest.approx(prepared.errors.std() * np.sqrt(1 / 3000 + 1 / 6000))
    assert big.upper - big.lower < small.upper - small.lower   # a larger window is judged more tightly


def test_a_reference_that_varies_over_time_widens_its_band(prepared):
    """NannyML's rule keeps what the reference's chunks vary by: a level that moves chunk by chunk
    widens the band beyond the spread of independent rows."""
    wavy = prepared.errors + np.repeat(np.tile([0.0, 0.15], 6), 500)
    moved = MultivariateReference(prepared.encoding, prepared.mean, prepared.components, prepared.explained, wavy)
    band, calm = moved.band(500, 3.0), prepared.band(500, 3.0)
    assert band.sd > 2 * calm.sd
    assert band.lower >= 0.0


def test_two_uncorrelated_features_keep_one_component():
    """65 % of two independent features' variance needs both components, and with both kept every
    error is 0: at most all but one are kept."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"u": rng.standard_normal(1000), "v": rng.standard_normal(1000)})
    fitted = fit_reference(frame, ["u", "v"], [])
    assert len(fitted.components) == 1 and fitted.errors.mean() > 0.3


# -- missing values, categoricals, extremes -----------------------------------------------------------
def test_missing_values_are_imputed_and_a_feature_gone_missing_is_flagged():
    reference = rows(4000, seed=4, missing=0.1)
    fitted = prepare_multivariate(reference, MODEL, DRIFT)
    assert isinstance(fitted, MultivariateReference)
    assert np.isfinite(fitted.errors).all()
    same = multivariate_drift(fitted, rows(2000, seed=5, missing=0.1), DRIFT)
    assert same is not None and same.error is not None and not same.drifted
    # A feature that stops arriving is filled with the reference's mean. Correlated with another (a
    # with b), the pair no longer lies on its component: the error rises. On its own (n1, in the
    # residual), the rows lose its variation: the error falls below the band.
    for name, above in (("a", True), ("n1", False)):
        gone = rows(2000, seed=6, missing=0.1)
        gone[name] = np.nan
        verdict = multivariate_drift(fitted, gone, DRIFT)
        assert verdict is not None and verdict.drifted
        assert (verdict.error > verdict.upper) if above else (verdict.error < verdict.lower)


def test_missing_values_through_the_check():
    result = check(rows(4000, seed=4, missing=0.1), rows(2000, seed=5, missing=0.1))
    assert result.multivariate is not None and not result.multivariate.drifted
    assert result.missing_ratio["a"] == pytest.approx(0.1, abs=0.03)


def test_categories_are_frequency_encoded_and_an_unseen_one_is_zero(prepared, reference):
    encoding = prepared.encoding
    assert encoding.categorical == ("c",)
    shares = dict(zip(["hi", "lo"], [0.7, 0.3]))
    raw = encoding.raw(pd.DataFrame({**{n: [0.0] * 4 for n in NUMERIC}, "c": ["hi", "lo", "new", None]}))
    assert raw[:, -1] == pytest.approx([shares["hi"], shares["lo"], 0.0, shares["hi"]], abs=0.01)  # None: the mode
    window = rows(2000, seed=7)
    window.loc[window.index[:600], "c"] = "new"
    verdict = multivariate_drift(prepared, window, DRIFT)
    assert verdict is not None and verdict.drifted


def test_a_stored_extreme_value_keeps_the_figures_finite(prepared):
    window = rows(2000, seed=8)
    window.loc[0, "a"] = 3.4e38
    verdict = multivariate_drift(prepared, window, DRIFT)
    assert verdict is not None and np.isfinite([verdict.error, verdict.lower, verdict.upper]).all()
    json.dumps(verdict.to_dict(), allow_nan=False)


def test_a_feature_without_reference_values_is_left_out():
    reference = rows(1000, seed=9)
    reference["n1"] = np.nan
    fitted = prepare_multivariate(reference, MODEL, DRIFT)
    assert isinstance(fitted, MultivariateReference) and "n1" not in fitted.encoding.columns


# -- when it does not run ------------------------------------------------------------------------------
def test_off_or_with_one_tabular_feature_there_is_no_block(reference):
    assert check(reference, rows(1000, seed=11), multivariate=False).multivariate is None
    one = ModelConfig(features=[{"name": "a"}])
    assert prepare_multivariate(reference, one, DRIFT) is None
    embedded = ModelConfig(features=[{"name": "a"}, {"name": "e", "type": "embedding", "dim": 4}])
    assert prepare_multivariate(reference, embedded, DRIFT) is None


def test_too_few_rows_skip_with_the_reason(prepared):
    too_small = prepare_multivariate(rows(30, seed=12), MODEL, DRIFT)
    assert isinstance(too_small, str)
    assert multivariate_drift(too_small, rows(100, seed=13), DRIFT).skipped == too_small
    verdict = multivariate_drift(prepared, rows(10, seed=14), DRIFT)
    assert verdict is not None and verdict.error is None and verdict.skipped and not verdict.drifted


# -- cost: bounded by drift.sample_size, prepared once per champion ---------------------------------
def test_rows_are_capped_by_the_drift_sample_and_the_reference_is_fitted_once():
    reference, window = rows(7000, seed=15), rows(9000, seed=16)
    drift = DriftConfig(sample_size=5000)
    evaluator = DriftEvaluator()
    first = evaluator(reference, window, MODEL, drift, None, reference_key="v1")
    assert first.multivariate is not None
    assert (first.multivariate.rows, first.multivariate.reference_rows) == (5000, 5000)
    prepared = evaluator.prepared(reference, MODEL, drift, "v1")
    assert isinstance(prepared.multivariate, MultivariateReference)
    evaluator(reference, window, MODEL, drift, None, reference_key="v1")
    assert (evaluator.misses, evaluator.hits) == (1, 2)
    # Turning the test on or off is a different preparation, not a stale one.
    assert evaluator.prepared(reference, MODEL, DriftConfig(sample_size=5000, multivariate=False),
                              "v1").multivariate is None


# -- where it is reported ------------------------------------------------------------------------------
def test_metrics_json_and_summary(reference):
    result = check(reference, rows(3000, seed=2, rho=-0.8))
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("m", lambda: result))
    text = generate_latest(registry).decode()
    mv = result.multivariate
    assert mv is not None
    for name, value in (("error", mv.error), ("threshold_upper", mv.upper), ("threshold_lower", mv.lower)):
        line = next(x for x in text.splitlines() if x.startswith(f'driftloop_model_multivariate_drift_{name}{{'))
        assert float(line.split()[-1]) == pytest.approx(value)
    assert 'driftloop_model_multivariate_drifted{model="m"} 1.0' in text
    block = json.loads(json.dumps(result.to_dict(), allow_nan=False))["multivariate"]
    assert block["drifted"] is True and block["error"] == pytest.approx(mv.error)
    assert {"lower", "upper", "components", "rows", "features", "reference_chunks"} <= set(block)
    assert "Features together" in summary_html(result) and "drifted" in summary_html(result)


def test_a_skipped_test_serves_no_series(prepared):
    from dataclasses import replace

    from tests.monitor.drift.task_frames import filled_result
    result = replace(filled_result("binary"), multivariate=multivariate_drift(prepared, rows(5, seed=1), DRIFT))
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("m", lambda: result))
    assert "multivariate" not in generate_latest(registry).decode()
    assert "skipped" in summary_html(result)
