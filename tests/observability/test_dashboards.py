"""Grafana dashboards and provisioning, statically: they load, ids and uids are unique, panels fit the
grid, every query goes through the datasource variable and names only metrics the contracts declare.
(That every query returns data is test_live.py's job.)"""
from __future__ import annotations

import pytest
import yaml

from tests.observability.promql import (DASHBOARDS, GRAFANA_BUILTINS, REPO, contract_metrics, dashboard_queries,
                                         iter_panels, load_dashboards, metric_names, referenced_variables,
                                         variable_queries)

BOARDS = load_dashboards()
EXPECTED = {"gpu-fleet.json", "model-health.json", "retraining.json"}


def test_the_three_dashboards_exist():
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


def test_provisioning_files():
    ds = yaml.safe_load((REPO / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert ds["apiVersion"] == 1
    (prom,) = [s for s in ds["datasources"] if s["type"] == "prometheus"]
    assert prom["isDefault"] and prom["access"] == "proxy"
    dash = yaml.safe_load((REPO / "grafana/provisioning/dashboards/driftloop.yml").read_text())
    (provider,) = dash["providers"]
    assert provider["type"] == "file" and provider["folder"] == "driftloop"
    assert len(DASHBOARDS) == len(EXPECTED)
