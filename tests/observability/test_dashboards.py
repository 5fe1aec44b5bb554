"""Grafana dashboards and provisioning, statically: they load, ids and uids are unique, panels fit the
grid, every query goes through the datasource variable and names only metrics the contracts declare,
and every per-model series is filtered by the model variable and named by its model. (That every query
returns data is the live tests' job: test_live_daemon.py, test_task_dashboards.py.)"""
from __future__ import annotations

import pytest
import yaml

from tests.observability.promql import (DASHBOARDS, GRAFANA_BUILTINS, REPO, contract_metrics, dashboard_queries,
                                         iter_panels, keeps_model, label_values_promql, load_dashboards,
                                         metric_names, per_model_metrics, referenced_variables,
                                         unfiltered_model_selectors, variable_queries)

BOARDS = load_dashboards()
EXPECTED = {"fleet.json", "gpu-fleet.json", "model-health.json", "retraining.json"}
PER_MODEL = per_model_metrics()
# Series every monitored model has from the first scrape, before a champion or a check: what the model
# variable lists (the daemon's collector always serves driftloop_retrain_running, at 0 while idle;
# ingestion serves its counters at 0 from the start).
FROM_THE_FIRST_SCRAPE = {"driftloop_retrain_running", "driftloop_ingest_records_total"}


def per_model_queries(name: str) -> list:
    return [q for q in dashboard_queries(name, BOARDS[name]) if metric_names(q.expr) & PER_MODEL]


def test_the_dashboards_exist():
    assert set(BOARDS) == EXPECTED


def test_uids_and_titles_are_unique_and_stable():
    uids = [d["uid"] for d in BOARDS.values()]
    assert len(set(uids)) == len(uids)
    assert all(uid.startswith("driftloop-") and len(uid) <= 40 for uid in uids)
    titles = [d["title"] for d in BOARDS.values()]
    assert len(set(titles)) == len(titles)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_dashboard_shape(name):
    d = BOARDS[name]
    assert d["schemaVersion"] == 39
    assert "driftloop" in d["tags"]
    panels = list(iter_panels(d["panels"]))
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids), "duplicate panel ids"
    for p in panels:
        assert p.get("title"), p["id"]
        if p["type"] != "row":
            assert p.get("description"), f"panel {p['title']!r} has no description"
            assert p.get("targets"), f"panel {p['title']!r} has no query"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels_fit_the_grid_without_overlap(name):
    boxes = []
    for p in iter_panels(BOARDS[name]["panels"]):
        g = p["gridPos"]
        assert 0 <= g["x"] and g["w"] > 0 and g["h"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        for other_title, o in boxes:
            overlap = (g["x"] < o["x"] + o["w"] and o["x"] < g["x"] + g["w"]
                       and g["y"] < o["y"] + o["h"] and o["y"] < g["y"] + g["h"])
            assert not overlap, f"{p['title']!r} overlaps {other_title!r}"
        boxes.append((p["title"], g))


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_queries_use_the_datasource_variable(name):
    d = BOARDS[name]
    (ds_var,) = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
    assert ds_var["query"] == "prometheus"
    expected = {"type": "prometheus", "uid": f"${{{ds_var['name']}}}"}
    for p in iter_panels(d["panels"]):
        if p["type"] == "row":
            continue
        assert p["datasource"] == expected, p["title"]
        for t in p["targets"]:
            assert t["datasource"] == expected, (p["title"], t["refId"])
    for var in d["templating"]["list"]:
        if var["type"] == "query":
            assert var["datasource"] == expected, var["name"]
    for ann in d["annotations"]["list"]:
        if not ann.get("builtIn"):
            assert ann["datasource"] == expected, ann["name"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_variable_used_is_defined(name):
    d = BOARDS[name]
    defined = {v["name"] for v in d["templating"]["list"]}
    text_with_vars = [q.expr for q in dashboard_queries(name, d)] + [q for _, q in variable_queries(d)]
    text_with_vars += [link.get("url", "") for link in d.get("links", [])]
    used = set().union(*(referenced_variables(t) for t in text_with_vars))
    assert used - defined - GRAFANA_BUILTINS == set()


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_queries_name_only_contract_metrics(name):
    known = contract_metrics()
    d = BOARDS[name]
    exprs = [(q.where, q.expr) for q in dashboard_queries(name, d)] + variable_queries(d)
    unknown = {where: metric_names(e) - known for where, e in exprs if metric_names(e) - known}
    assert not unknown


def test_model_dashboards_mark_incidents_retrains_and_promotions():
    for name in ("model-health.json", "retraining.json"):
        exprs = " ".join(a.get("expr", "") for a in BOARDS[name]["annotations"]["list"])
        for metric in ("driftloop_incidents_total", "driftloop_retrains_total", "driftloop_model_champion_info"):
            assert metric in exprs, (name, metric)


def test_retraining_dashboard_links_to_mlflow():
    d = BOARDS["retraining.json"]
    (var,) = [v for v in d["templating"]["list"] if v["name"] == "mlflow_url"]
    assert var["type"] == "textbox" and var["query"].startswith("http")
    assert any(link["url"] == "${mlflow_url}" for link in d["links"])
    data_links = [link["url"] for p in iter_panels(d["panels"])
                  for link in p.get("fieldConfig", {}).get("defaults", {}).get("links", [])]
    assert any(url.startswith("${mlflow_url}/#/models/") for url in data_links)


def test_gpu_dashboard_filters_by_instance_and_gpu():
    d = BOARDS["gpu-fleet.json"]
    names = {v["name"] for v in d["templating"]["list"]}
    assert {"instance", "gpu"} <= names
    for q in dashboard_queries("gpu-fleet.json", d):
        assert 'instance=~"$instance"' in q.expr, q.where


def test_the_contract_says_which_metrics_carry_model():
    assert {"driftloop_model_accuracy", "driftloop_model_champion_info", "driftloop_incidents_total",
            "driftloop_retrain_running", "driftloop_ingest_records_total",
            "driftloop_ingest_batch_duration_seconds_bucket", "driftloop_store_rows"} <= PER_MODEL
    assert not {"driftloop_gpu_up", "driftloop_gpu_info", "driftloop_daemon_store_up", "driftloop_daemon_leader",
                "driftloop_build_info"} & PER_MODEL


def test_only_the_gpu_dashboard_has_no_per_model_series():
    assert {name for name in BOARDS if not per_model_queries(name)} == {"gpu-fleet.json"}


@pytest.mark.parametrize("name", sorted(n for n in BOARDS if per_model_queries(n)))
def test_per_model_dashboards_choose_models_with_a_variable(name):
    """One model, several or All; listed from a series every model has before its first check."""
    (var,) = [v for v in BOARDS[name]["templating"]["list"] if v["name"] == "model"]
    assert var["type"] == "query" and var["multi"] and var["includeAll"] and var["allValue"] == ".*"
    (query,) = [q for n, q in variable_queries(BOARDS[name]) if n == "model"]
    expr, label = label_values_promql(query)
    assert label == "model" and metric_names(expr) <= FROM_THE_FIRST_SCRAPE and metric_names(expr)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_per_model_selector_filters_by_the_model_variable(name):
    unfiltered = {q.where: bad for q in per_model_queries(name)
                  if (bad := unfiltered_model_selectors(q.expr, PER_MODEL))}
    assert not unfiltered


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_legends_name_the_model_of_each_series(name):
    """A series that keeps its `model` label is named by it: with several models chosen, "live" or
    "baseline" alone would not say whose. Tables show the label as a column."""
    unnamed = []
    for panel in iter_panels(BOARDS[name]["panels"]):
        if panel["type"] in ("row", "table"):
            continue
        for t in panel["targets"]:
            if metric_names(t["expr"]) & PER_MODEL and keeps_model(t["expr"]) and "{{model}}" not in t["legendFormat"]:
                unnamed.append(f"{panel['title']!r} {t['refId']}: {t['legendFormat']!r}")
    assert not unnamed


def test_annotations_name_the_model():
    for name, board in BOARDS.items():
        for ann in board["annotations"]["list"]:
            if metric_names(ann.get("expr", "")) & PER_MODEL:
                assert "{{model}}" in ann["titleFormat"] and "model" in ann["tagKeys"].split(","), (name, ann["name"])


def test_keeps_model_reads_aggregations():
    assert keeps_model('time() - driftloop_x{model=~"$model"}')
    assert keeps_model("histogram_quantile(0.5, sum by (le, model, kind) (rate(x[1m])))")
    assert keeps_model("topk by (model) (10, x)")
    assert not keeps_model("sum(x)") and not keeps_model("avg by (instance) (x and on (job) y)")
    assert not keeps_model("sum by (model) (max without (model) (x))")
    assert unfiltered_model_selectors('driftloop_a{model=~"$model"} - driftloop_a{x="1"} / driftloop_b',
                                      {"driftloop_a"}) == ['driftloop_a{x="1"}']


def test_fleet_table_has_one_row_per_model():
    """Instant queries joined on `model` (Grafana's merge joins rows on the fields all frames share:
    the time and `model`), each aggregated to one series per model, whatever daemons serve it."""
    (table,) = [p for p in iter_panels(BOARDS["fleet.json"]["panels"]) if p["type"] == "table"]
    assert table["transformations"][0]["id"] == "merge"
    for t in table["targets"]:
        assert t["instant"] and not t["range"] and t["format"] == "table", t["refId"]
        assert keeps_model(t["expr"]) and "by (model" in t["expr"], t["refId"]
    shown = " ".join(t["expr"] for t in table["targets"])
    for metric in ("driftloop_model_champion_info", "driftloop_model_check_state", "driftloop_incidents_open",
                   "driftloop_model_accuracy", "driftloop_model_estimated_accuracy", "driftloop_model_mae",
                   "driftloop_model_estimated_mae", "driftloop_ingest_records_total"):
        assert metric in shown, metric
    over_time = " ".join(t["expr"] for p in iter_panels(BOARDS["fleet.json"]["panels"]) if p["type"] == "timeseries"
                         for t in p["targets"])
    for metric in ("driftloop_model_last_check_timestamp_seconds", "driftloop_incidents_total",
                   "driftloop_retrains_total"):
        assert metric in over_time, metric


def test_provisioning_files():
    ds = yaml.safe_load((REPO / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["apiVersion"] == 1
    (prom,) = [s for s in ds["datasources"] if s["type"] == "prometheus"]
    assert prom["isDefault"] and prom["access"] == "proxy"
    dash = yaml.safe_load((REPO / "grafana/provisioning/dashboards/driftloop.yml").read_text())
    (provider,) = dash["providers"]
    assert provider["type"] == "file" and provider["folder"] == "driftloop"
    assert len(DASHBOARDS) == len(EXPECTED)
