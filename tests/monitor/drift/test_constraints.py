"""Constraints and violations (monitor/drift/constraints.py, violations.py): the file suggested from a
baseline matches it; a window breaking each kind of constraint is reported naming the column; a file a
person edits changes what is reported; a malformed file is refused naming the column and field, and
the check goes on; the figures reach the check's JSON, its summary page and /metrics."""
from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import ModelConfig, load_config
from monitor.drift import ModelMetricsCollector, evaluate_window, save_report
from monitor.drift.constraints import (CheckKind, ConstraintsError, ConstraintsFile, constraints_for,
                                       load_constraints, parse_constraints, suggest_constraints, write_constraints)
from monitor.drift.violations import check_constraints
from tests.monitor.drift.conftest import reference, window
from tests.support.prometheus import require

CHECKS = {k.value for k in CheckKind}


@pytest.fixture(scope="module")
def baseline() -> pd.DataFrame:
    ref = reference(1000, seed=3)
    ref["prediction"] = (ref["score"] > 0.5).astype("int64")  # as the trainer's baseline carries it
    return ref


@pytest.fixture(scope="module")
def body(cfg, baseline) -> dict:
    return suggest_constraints(baseline, cfg.model, champion_version="7", window_rows=5000, clock=lambda: 0.0)


def as_file(body: dict, path: str = "constraints.json") -> ConstraintsFile:
    return ConstraintsFile(path, parse_constraints(json.dumps(body), path))


def edited(body: dict, column: str, **fields) -> dict:
    out = json.loads(json.dumps(body))
    out["columns"][column].update(fields)
    return out


def found(check) -> set[tuple[str, str]]:
    return {(v.column, v.check.value) for v in check.violations}


def broken_window(n: int = 5000, seed: int = 11) -> pd.DataFrame:
    """A window with 5 % of x0 far out of range, 3 % of region an unknown category, 10 % of x1 missing
    and device dropped (no value in any row)."""
    w = window(n, seed)
    w.loc[: n // 20 - 1, "x0"] = 40.0 + np.arange(n // 20)
    w.loc[n // 2: n // 2 + 3 * n // 100 - 1, "region"] = "mars"
    w.loc[n // 4: n // 4 + n // 10 - 1, "x1"] = np.nan
    w["device"] = None
    return w


# -- suggesting --------------------------------------------------------------------------------------
def test_the_suggestion_matches_the_baseline(cfg, baseline, body):
    assert (body["version"], body["model"], body["champion_version"]) == (1, "demo", "7")
    assert body["baseline_rows"] == 1000 and body["created_at"] == "1970-01-01T00:00:00Z"
    columns = body["columns"]
    assert list(columns) == [*cfg.model.feature_names, "score", "prediction", "label"]
    for name in ["x0", "x5", "score"]:
        c = columns[name]
        assert c["inferred_type"] == "fractional" and c["completeness"] == 1.0
        assert (c["min"], c["max"]) == (baseline[name].min(), baseline[name].max())
    assert columns["x5"]["is_non_negative"] and not columns["x0"]["is_non_negative"]
    assert columns["region"]["inferred_type"] == "string"
    assert columns["region"]["categories"] == sorted(baseline["region"].unique())
    assert columns["device"]["categories"] == sorted(baseline["device"].unique())
    # A classifier's prediction and label are its classes by name, whichever the baseline holds.
    assert columns["prediction"]["categories"] == columns["label"]["categories"] == ["0", "1"]
    assert columns["label"]["completeness"] is None  # labels arrive late: not a quality of the window
    assert all(c["monitoring"] and c["checks"] == {} for c in columns.values())
    assert body["monitoring_config"]["range_threshold"] == 0.01
    parse_constraints(json.dumps(body), "round trip")


def test_completeness_is_relaxed_by_its_noise_types_inferred_and_categories_capped(cfg):
    ref = reference(1000, seed=4)
    ref["x3"] = np.round(ref["x3"] * 10)  # whole numbers
    ref.loc[:99, "x1"] = np.nan           # 90 % complete
    body = suggest_constraints(ref, cfg.model, champion_version=None, window_rows=5000, max_categories=3)
    c = body["columns"]
    expected = 0.9 - 3 * math.sqrt(0.9 * 0.1 * (1 / 1000 + 1 / 5000))
    assert c["x1"]["completeness"] == pytest.approx(expected, abs=1e-4) and c["x1"]["completeness"] <= expected
    assert c["x1"]["baseline"]["completeness"] == 0.9
    assert c["x3"]["inferred_type"] == "integral" and isinstance(c["x3"]["min"], int)
    assert "categories" not in c["region"] and c["region"]["baseline"]["distinct"] == 4  # more than 3
    assert c["device"]["categories"] == ["desktop", "mobile", "tablet"]


def test_a_multiclass_model_names_its_classes_and_an_embedding_its_dim():
    model = ModelConfig(name="mc", task="multiclass", classes=["bus", "car", "walk"],
                        features=[{"name": "x"}, {"name": "emb", "type": "embedding", "dim": 3}])
    rng = np.random.default_rng(0)
    ref = pd.DataFrame({"x": rng.normal(size=50), "emb": [rng.normal(size=3).astype(np.float32) for _ in range(50)],
                        "score": rng.uniform(0.4, 1, 50), "prediction": rng.integers(0, 2, 50),
                        "label": rng.integers(0, 3, 50)})
    body = suggest_constraints(ref, model, champion_version="1", window_rows=100)
    c = body["columns"]
    assert (c["emb"]["inferred_type"], c["emb"]["dim"]) == ("embedding", 3)
    assert c["prediction"]["categories"] == c["label"]["categories"] == ["bus", "car", "walk"]
    # The window's class indices are read as names: index 5 is no class, a vector of 4 is not dim 3.
    w = ref.copy()
    w.loc[:9, "prediction"] = 5
    w.loc[:4, "emb"] = pd.Series([np.zeros(4, np.float32)] * 5)
    check = check_constraints(as_file(body), w, model)
    assert found(check) >= {("prediction", "categorical_values_check"), ("emb", "data_type_check")}
    v = next(v for v in check.violations if v.column == "prediction")
    assert (v.rows, v.examples) == (10, ("5",))


# -- checking ----------------------------------------------------------------------------------------
def test_a_window_like_the_baseline_breaks_nothing(cfg, body):
    check = check_constraints(as_file(body), window(5000, 12), cfg.model)
    assert check.valid and check.violations == () and check.columns == 13
    assert {k.value for k in check.kinds} == CHECKS


def test_each_kind_of_violation_names_its_column(cfg, body):
    w = broken_window()
    check = check_constraints(as_file(body), w, cfg.model)
    assert found(check) == {("x0", "range_check"), ("region", "categorical_values_check"),
                            ("x1", "completeness_check"), ("device", "missing_column_check")}
    by = {v.column: v for v in check.violations}
    low, high = body["columns"]["x0"]["min"], body["columns"]["x0"]["max"]
    outside = int(((w["x0"] < low) | (w["x0"] > high)).sum())  # the 250 set far out, and a few by chance
    assert 250 <= outside < 300 and (by["x0"].rows, by["x0"].share) == (outside, outside / 5000)
    assert by["x0"].examples == (289.0, 288.0, 287.0, 286.0, 285.0)  # the farthest out first
    assert by["x0"].observed["max"] == 289.0 and by["x0"].expected["max"] == body["columns"]["x0"]["max"]
    assert (by["region"].rows, by["region"].share, by["region"].examples) == (150, 0.03, ("mars",))
    assert (by["x1"].rows, by["x1"].observed, by["x1"].expected) == (500, 0.9, 1.0)
    assert by["device"].rows == 5000 and by["device"].share == 1.0
    # Text in a numeric column, and a column the window lacks altogether.
    w = w.drop(columns=["x7"])
    w["x6"] = w["x6"].astype(object)
    w.loc[:9, "x6"] = "n/a"
    check = check_constraints(as_file(body), w, cfg.model)
    by = {(v.column, v.check.value): v for v in check.violations}
    assert by[("x6", "data_type_check")].rows == 10 and by[("x6", "data_type_check")].examples == ("n/a",)
    assert by[("x7", "missing_column_check")].observed == "absent"
    json.dumps([v.to_dict() for v in check.violations])  # plain JSON


def test_a_column_the_file_does_not_list_is_an_extra_one_unless_turned_off(cfg, body):
    dropped = json.loads(json.dumps(body))
    del dropped["columns"]["x2"]
    check = check_constraints(as_file(dropped), window(2000, 13), cfg.model)
    assert found(check) == {("x2", "extra_column_check")}
    dropped["monitoring_config"]["checks"] = {"extra_column_check": False}
    assert check_constraints(as_file(dropped), window(2000, 13), cfg.model).violations == ()
    quiet = edited(body, "x2", monitoring=False)  # the way to stop checking a column without an extra one
    assert check_constraints(as_file(quiet), window(2000, 13), cfg.model).violations == ()


def test_an_edited_file_changes_what_is_reported(cfg, body):
    w = broken_window()
    widened = edited(body, "x0", max=1000.0)
    assert ("x0", "range_check") not in found(check_constraints(as_file(widened), w, cfg.model))
    more = edited(body, "region", categories=[*body["columns"]["region"]["categories"], "mars"])
    assert ("region", "categorical_values_check") not in found(check_constraints(as_file(more), w, cfg.model))
    off = edited(body, "x1", checks={"completeness_check": False})
    assert ("x1", "completeness_check") not in found(check_constraints(as_file(off), w, cfg.model))
    relaxed = edited(body, "x1", completeness=0.85)
    assert ("x1", "completeness_check") not in found(check_constraints(as_file(relaxed), w, cfg.model))
    # Under the threshold: 5 % out of range passes a 10 % tolerance, and fails a 0 % one at 1 row.
    tolerant = json.loads(json.dumps(body))
    tolerant["monitoring_config"]["range_threshold"] = 0.1
    assert ("x0", "range_check") not in found(check_constraints(as_file(tolerant), w, cfg.model))
    strict = json.loads(json.dumps(body))
    strict["monitoring_config"]["range_threshold"] = 0.0
    one = window(2000, 12)
    one.loc[0, "x3"] = 99.0
    assert ("x3", "range_check") in found(check_constraints(as_file(strict), one, cfg.model))
    negative = edited(body, "x0", min=None, max=None, is_non_negative=True)
    v = next(v for v in check_constraints(as_file(negative), w, cfg.model).violations if v.column == "x0")
    assert v.check is CheckKind.RANGE and v.share == pytest.approx((w["x0"] < 0).mean())
    nothing = json.loads(json.dumps(body))
    nothing["monitoring_config"]["evaluate_constraints"] = False
    check = check_constraints(as_file(nothing), w, cfg.model)
    assert check.valid and check.violations == () and check.kinds == ()


@pytest.mark.parametrize("change, where", [
    ({"min": "abc"}, "columns.x0.min"),
    ({"mni": 1.0}, "columns.x0.mni"),
    ({"categories": ["a"]}, "columns.x0"),
    ({"min": 5.0, "max": 1.0}, "columns.x0"),
    ({"inferred_type": "decimal"}, "columns.x0.inferred_type"),
    ({"completeness": 1.5}, "columns.x0.completeness"),
    ({"checks": {"range_chek": False}}, "columns.x0.checks"),
])
def test_a_malformed_file_names_the_column_and_field(body, change, where):
    with pytest.raises(ConstraintsError) as caught:
        parse_constraints(json.dumps(edited(body, "x0", **change)), "c.json")
    assert f"constraints file c.json: {where}" in str(caught.value)


def test_a_file_that_is_no_constraints_file_says_why(tmp_path):
    for text, said in [("{not json", "is not JSON"), ("[]", "expected a JSON object"),
                       ('{"version": 2, "columns": {}}', "version"), ('{"version": 1}', "columns")]:
        path = tmp_path / "c.json"
        path.write_text(text)
        with pytest.raises(ConstraintsError, match=said):
            load_constraints(path)
    with pytest.raises(ConstraintsError, match="cannot read"):
        load_constraints(tmp_path / "absent.json")


def test_the_model_finds_its_file_by_configuration(tmp_path, cfg, body):
    home = tmp_path / "home"
    default = load_config(path=None, environ={}, overrides={"home": str(home)})
    assert default.constraints_path == home / "constraints" / "demo.json" and constraints_for(default) is None
    write_constraints(body, default.constraints_path)
    found_file = constraints_for(default)
    assert found_file.problem is None and found_file.constraints.champion_version == "7"
    named = load_config(path=None, environ={}, overrides={"home": str(home), "drift": {"constraints": "mine.json"}})
    problem = constraints_for(named)  # configured but absent: a problem, not silence
    assert problem.constraints is None and "cannot read" in problem.problem
    off = load_config(path=None, environ={}, overrides={"home": str(home), "drift": {"constraints": ""}})
    assert off.constraints_path is None and constraints_for(off) is None
    # Per model in a fleet, as the other drift keys.
    fleet = tmp_path / "driftloop.yaml"
    fleet.write_text(f"home: {home}\nmodels:\n  churn: {{drift: {{constraints: /etc/churn.json}}}}\n  price: {{}}\n")
    models = load_config(fleet, environ={}).model_configs()
    assert str(models["churn"].constraints_path) == "/etc/churn.json"
    assert models["price"].constraints_path == home / "constraints" / "price.json"


# -- through the check -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checked(cfg, baseline, body):
    return evaluate_window(baseline, broken_window(), cfg.model, cfg.drift, {}, constraints=as_file(body),
                           clock=lambda: 1_764_460_800.0)


def test_the_check_reports_them_in_its_result_summary_and_json(checked, tmp_path):
    block = checked.to_dict()["constraints"]
    assert block["valid"] and block["champion_version"] == "7" and block["columns"] == 13
    assert {(v["column"], v["check"]) for v in block["violations"]} == {
        ("x0", "range_check"), ("region", "categorical_values_check"), ("x1", "completeness_check"),
        ("device", "missing_column_check")}
    paths = save_report(checked, tmp_path)
    assert json.loads(paths.json.read_text())["driftloop"]["constraints"] == block
    page = paths.html.with_suffix(".summary.html").read_text()
    assert "Constraints (13 columns of constraints.json)" in page and "categorical_values_check" in page


def test_a_bad_file_is_a_problem_of_the_check_not_its_failure(cfg, baseline, body):
    bad = ConstraintsFile("c.json", None, "constraints file c.json: columns.x0.min: Input should be a valid number")
    result = evaluate_window(baseline, window(1000, 14), cfg.model, cfg.drift, {}, constraints=bad)
    block = result.to_dict()["constraints"]
    assert block["valid"] is False and "columns.x0.min" in block["problem"] and block["violations"] == []
    assert result.features and result.prediction_drift.score is not None  # the rest of the check ran
    got = scrape(result)
    assert got[("driftloop_model_constraints_valid", (("model", "demo"),))] == 0
    assert not [k for k in got if k[0] == "driftloop_model_constraint_violations"]


def scrape(result) -> dict:
    registry = CollectorRegistry()
    registry.register(ModelMetricsCollector("demo", lambda: result))
    text = generate_latest(registry).decode()
    proc = subprocess.run([require("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_the_violations_are_exported(checked):
    got = scrape(checked)
    m = ("model", "demo")
    assert got[("driftloop_model_constraints_valid", (m,))] == 1
    counts = {dict(k[1])["check"]: v for k, v in got.items() if k[0] == "driftloop_model_constraint_violations"}
    assert counts == {"data_type_check": 0, "completeness_check": 1, "range_check": 1,
                      "categorical_values_check": 1, "missing_column_check": 1, "extra_column_check": 0}
    ratio = {(dict(k[1])["column"], dict(k[1])["check"]): v for k, v in got.items()
             if k[0] == "driftloop_model_constraint_violation_ratio"}
    x0 = next(v for v in checked.constraints.violations if v.column == "x0")
    assert ratio == {("x0", "range_check"): x0.share, ("region", "categorical_values_check"): 0.03,
                     ("x1", "completeness_check"): pytest.approx(0.1), ("device", "missing_column_check"): 1.0}


def test_the_cost_on_a_large_window_is_small(cfg, body):
    """One pass per column over the whole window (no sample): 100,000 rows of the demo schema."""
    big = broken_window(100_000, 15)
    file = as_file(body)
    check_constraints(file, big, cfg.model)
    check = check_constraints(file, big, cfg.model)  # the cost: bench/bench_constraints.py
    assert len(check.violations) == 4
