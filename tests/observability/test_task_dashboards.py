"""The multiclass and regression panels of the Model health dashboard, the Fleet dashboard and the MAE
alert, against a real Prometheus (our prometheus.yml jobs and rule files) scraping the daemon's model
collector (monitor.drift.ModelMetricsCollector, as `driftloop serve` registers it) fed with real checks
of a multiclass and a regression model (monitor.drift.evaluate_window). Every panel query of each
task's row returns data for a model of that task; with both models chosen (the variable's All) every
series is named by its model and the fleet table gives each model its own primary figure; the binary
loop (test_live_daemon.py) covers the rest."""
from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from monitor.drift.metrics import ModelMetricsCollector
from tests.conftest import free_port
from tests.monitor.daemon.task_frames import checked, task_config
from tests.monitor.drift.task_frames import expected_mae, multiclass_frame, regression_frame
from tests.observability.live import (INTERVAL, RATE_INTERVAL, query_range, rule_selectors_without_data,
                                      start_like_ours, wait_rules_evaluated)
from tests.observability.promql import (all_selected, dashboard_queries, iter_panels, load_dashboards, load_rules,
                                         render, task_panels)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow
MODELS = {"multiclass": "digits", "regression": "demand"}


def scrapes(prom, model: str, start: float) -> int:
    """Points of ``model``'s labelled-rows series since ``start`` (one per scrape and step)."""
    found = query_range(prom, f'driftloop_model_labelled_rows{{model="{model}"}}', start, time.time())
    return len(found[0]["values"]) if found else 0


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    work = tmp_path_factory.mktemp("task-dashboards")
    mc = task_config("multiclass", work)
    reg = task_config("regression", work)
    reference = multiclass_frame(3000, 1, window=False)
    results = {  # drifted windows: the multiclass concept changed, the regression noise doubled
        "multiclass": checked(mc, reference, multiclass_frame(1500, 2, concept=True),
                              {"accuracy": 0.9, "roc_auc": 0.95}).result,
        "regression": checked(reg, regression_frame(3000, 1, window=False), regression_frame(1500, 2, noise=4.0),
                              {"mae": expected_mae(2.0)}).result,
    }
    served, targets = [], []
    for task, result in results.items():  # one daemon per model, as in production: two targets of the job
        registry = CollectorRegistry()
        registry.register(ModelMetricsCollector(MODELS[task], lambda r=result: r))
        port = free_port()
        served.append(start_http_server(port, addr="127.0.0.1", registry=registry))
        targets.append(f"127.0.0.1:{port}")
    prom = start_like_ours(work / "prometheus", {"driftloop": targets})
    try:
        start = time.time() - 5
        for model in MODELS.values():  # a few scrapes of each target, queryable over the range the tests read
            wait_until(lambda m=model: scrapes(prom, m, start) >= 3, 60, 0.5, f"no scrapes of model {model}")
        yield {"prom": prom, "start": start, "results": results}
    finally:
        prom.stop()
        for server, thread in served:
            server.shutdown()
            thread.join(5)


@pytest.mark.parametrize("task", sorted(MODELS))
def test_every_panel_of_a_task_row_has_data_for_that_task(scraped, task):
    prom, end = scraped["prom"], time.time()
    board = load_dashboards()["model-health.json"]
    panels = task_panels(board)[task]
    assert panels, f"no {task} row"
    queries = dashboard_queries("model-health.json", {"panels": panels})
    empty = []
    for q in queries:
        expr = render(q.expr, {"model": [MODELS[task]], "datasource": ["prometheus"]}, rate_interval=RATE_INTERVAL,
                      interval=INTERVAL, range_="60s")
        if not query_range(prom, expr, scraped["start"], end):
            empty.append(f"{q.where}: {expr}")
    series = 'count by (model) ({__name__=~"driftloop_model_.+"})'
    assert empty == [], (f"scrapes: {prom.query('up')}; series: {prom.query(series)}; over "
                         f"[{scraped['start']}, {end}]: {query_range(prom, series, scraped['start'], end)}")


def test_the_mae_alert_evaluates_on_a_regression_model(scraped):
    prom, end = scraped["prom"], time.time()
    rules = wait_rules_evaluated(prom)
    assert rules["DriftloopModelMaeRise"]["health"] == "ok", rules["DriftloopModelMaeRise"].get("lastError")
    assert rule_selectors_without_data(prom, {"DriftloopModelMaeRise"}, scraped["start"], end) == []
    rule = next(r for r in load_rules() if r.get("alert") == "DriftloopModelMaeRise")
    reg = scraped["results"]["regression"]
    assert reg.mae >= reg.baseline_mae * 1.1 and reg.labelled_rows >= 1000
    (met,) = prom.query(rule["expr"])
    assert met["metric"]["model"] == MODELS["regression"]
    assert float(met["value"][1]) == pytest.approx((reg.mae - reg.baseline_mae) / reg.baseline_mae, rel=1e-6)
    # the accuracy alert concerns the multiclass model (its concept changed), not the regressor
    accuracy = next(r for r in load_rules() if r.get("alert") == "DriftloopModelAccuracyDrop")
    assert {s["metric"]["model"] for s in prom.query(accuracy["expr"])} == {MODELS["multiclass"]}


def _render_all(expr: str, board: dict) -> str:
    return render(expr, all_selected(board), rate_interval=RATE_INTERVAL, interval=INTERVAL, range_="60s")


def test_with_every_model_chosen_each_series_is_named_by_its_model(scraped):
    """What a person sees with Model = All: no two models' series share a name ("live", "baseline")."""
    prom, end = scraped["prom"], time.time()
    unnamed, both = [], set()
    for name, board in load_dashboards().items():
        for panel in iter_panels(board["panels"]):
            if panel["type"] in ("row", "table"):
                continue
            for t in panel["targets"]:
                found = query_range(prom, _render_all(t["expr"], board), scraped["start"], end)
                models = {s["metric"]["model"] for s in found if "model" in s["metric"]}
                if len(models) > 1:
                    both.add(f"{name} {panel['title']}")
                if models and "{{model}}" not in t["legendFormat"]:
                    unnamed.append(f"{name} {panel['title']!r} {t['refId']}: {t['legendFormat']!r}")
    assert unnamed == []
    assert {"model-health.json Drift share", "fleet.json Performance loss vs baseline"} <= both


def test_the_fleet_table_gives_each_model_its_primary_figure(scraped):
    """Realised, estimated and baseline: accuracy for the classifier, MAE for the regressor, one
    series per model that Grafana's merge joins with the other columns on `model`."""
    prom = scraped["prom"]
    board = load_dashboards()["fleet.json"]
    (table,) = [p for p in iter_panels(board["panels"]) if p["type"] == "table"]
    queries = {t["refId"]: _render_all(t["expr"], board) for t in table["targets"]}
    mc, reg = scraped["results"]["multiclass"], scraped["results"]["regression"]
    expected = {"E": {MODELS["multiclass"]: ("accuracy", mc.accuracy), MODELS["regression"]: ("mae", reg.mae)},
                "F": {MODELS["multiclass"]: ("accuracy", mc.estimated_accuracy),
                      MODELS["regression"]: ("mae", reg.estimated_mae)},
                "G": {MODELS["multiclass"]: ("accuracy", mc.baseline_accuracy),
                      MODELS["regression"]: ("mae", reg.baseline_mae)}}
    for ref, want in expected.items():
        found = prom.query(queries[ref])
        assert [set(s["metric"]) for s in found] == [{"model", "figure"}] * 2, (ref, found)
        got = {s["metric"]["model"]: (s["metric"]["figure"], float(s["value"][1])) for s in found}
        assert {m: f for m, (f, _) in got.items()} == {m: f for m, (f, _) in want.items()}, ref
        for model, (_, value) in want.items():
            assert got[model][1] == pytest.approx(value, rel=1e-6), (ref, model)
    for ref in ("H", "I"):  # drift share, since the last check: one series per model, labelled only so
        found = prom.query(queries[ref])
        assert sorted(s["metric"]["model"] for s in found) == sorted(MODELS.values()), ref
        assert all(set(s["metric"]) == {"model"} for s in found), ref
