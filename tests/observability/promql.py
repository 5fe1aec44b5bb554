"""Helpers for the observability tests: the PromQL inside dashboards and rules, Grafana variable
substitution, and the metric names that docs/CONTRACTS.md declares (and which of them carry `model`)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
RULE_FILES = sorted((REPO / "rules").glob("*.rules.yml"))
RULE_TESTS = sorted((REPO / "rules" / "tests").glob("*.test.yml"))

# Variables Grafana defines itself; a dashboard may use them without declaring them.
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms",
                    "__from", "__to", "__dashboard", "__org", "__user", "__name", "timeFilter"}
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_METRIC = re.compile(r"\b(driftloop_[a-z0-9_]+)\b")
_LABEL_VALUES = re.compile(r"^\s*label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)\s*$")
# A metric name and the label matchers right after it, if any (`driftloop_x{model=~"$model"}`).
_SELECTOR = re.compile(r"\b(driftloop_[a-z0-9_]+)\b(\s*\{[^}]*\})?")
# An aggregation and its grouping, written either way round: `sum by (a) (` or `sum(...) by (a)` is
# not used here; `topk by (model) (10, ...)` is.
_AGGREGATION = re.compile(r"\b(sum|min|max|avg|count|group|stddev|stdvar|topk|bottomk|quantile|count_values)\s*"
                          r"(?:(by|without)\s*\(([^)]*)\))?\s*\(")
# What a query that selects per-model series filters by: the model variable, All or some models.
MODEL_FILTER = 'model=~"$model"'


@dataclass(frozen=True)
class Query:
    """One PromQL expression and where it lives (for messages)."""
    where: str
    expr: str
    instant: bool = False


def load_dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in DASHBOARDS}


def iter_panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels", []))  # collapsed rows keep their panels inside


# Rows of model-health.json whose panels only a model of that task has series for.
TASK_ROWS = {"multiclass": "Multiclass models", "regression": "Regression models"}


def task_panels(dash: dict) -> dict[str, list[dict]]:
    """The panels inside each task's row (collapsed rows keep their panels inside), by task."""
    rows = {p["title"]: p for p in dash.get("panels", []) if p["type"] == "row"}
    return {task: list(rows[title].get("panels", [])) for task, title in TASK_ROWS.items() if title in rows}


def dashboard_queries(name: str, dash: dict) -> list[Query]:
    """Every Prometheus expression of a dashboard: panel targets and annotations."""
    out = []
    for panel in iter_panels(dash.get("panels", [])):
        for t in panel.get("targets", []):
            if t.get("expr"):
                out.append(Query(f"{name} panel {panel['id']} {panel['title']!r} target {t['refId']}", t["expr"],
                                 bool(t.get("instant")) and not t.get("range")))
    for ann in dash.get("annotations", {}).get("list", []):
        if ann.get("expr"):
            out.append(Query(f"{name} annotation {ann['name']!r}", ann["expr"]))
    return out


def variable_queries(dash: dict) -> list[tuple[str, str]]:
    """(name, query) of every Prometheus query variable."""
    out = []
    for var in dash.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var.get("query")
            out.append((var["name"], q["query"] if isinstance(q, dict) else q))
    return out


def label_values_promql(query: str) -> tuple[str, str]:
    """``label_values(metric{...}, label)`` as a PromQL expression returning one series per value."""
    m = _LABEL_VALUES.match(query)
    if not m:
        raise ValueError(f"not a label_values() query: {query!r}")
    selector = m.group("selector") or "{__name__=~'.+'}"
    return f"count by ({m.group('label')}) ({selector})", m.group("label")


def referenced_variables(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in _VAR.finditer(text)}


def all_selected(dash: dict) -> dict[str, list[str]]:
    """Each variable's value with *All* chosen where it can be (a query variable's ``allValue``, which
    Grafana sends instead of the list of values: ``$model`` becomes ``.*``), a textbox its text."""
    values = {}
    for var in dash.get("templating", {}).get("list", []):
        if var["type"] == "query":
            values[var["name"]] = [var["allValue"]] if var.get("includeAll") else []
        elif var["type"] == "textbox":
            values[var["name"]] = [var["query"]]
        elif var["type"] == "datasource":
            values[var["name"]] = [var["query"]]
    return {name: vals for name, vals in values.items() if vals}


def _prom_regex_escape(value: str) -> str:
    # What Grafana does for a multi-value variable inside =~"...": regex-escape, then escape the
    # backslashes for the PromQL string literal.
    return re.sub(r"([\\.*+?^$()\[\]{}|])", r"\\\\\1", value)


def render(expr: str, values: dict[str, list[str]], *, rate_interval: str, interval: str, range_: str) -> str:
    """Substitute dashboard variables the way Grafana does for a Prometheus query."""
    builtins = {"__rate_interval": rate_interval, "__interval": interval, "__range": range_}

    def sub(m: re.Match) -> str:
        name = next(g for g in m.groups() if g)
        if name in builtins:
            return builtins[name]
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        vals = values[name]
        return vals[0] if len(vals) == 1 else "(" + "|".join(_prom_regex_escape(v) for v in vals) + ")"

    return _VAR.sub(sub, expr)


def load_rules() -> list[dict]:
    """Every rule (alerting or recording) of every rule file, with its group name under ``_group``."""
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                out.append({**rule, "_group": group["name"], "_file": path.name})
    return out


def metric_names(expr: str) -> set[str]:
    return set(_METRIC.findall(expr))


def _contract_rows() -> Iterator[tuple[str, str, set[str]]]:
    """(the line that heads the row's table, the row, the series names of its first cell) for each
    metric row of docs/CONTRACTS.md's tables; a histogram's series names are added.

    A cell may abbreviate siblings: ``driftloop_gpu_memory_used_bytes`` / ``_free_bytes`` means
    ``driftloop_gpu_memory_free_bytes`` too (the suffix replaces as many trailing words as it has)."""
    heading = ""
    for line in (REPO / "docs" / "CONTRACTS.md").read_text().splitlines():
        if not line.startswith("|"):
            heading = line if line.strip() else heading
            continue
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        names: set[str] = set()
        base = None
        for token in re.findall(r"`([a-z0-9_]+)`", cells[0]):
            if token.startswith("driftloop_"):
                base = token
                names.add(token)
            elif token.startswith("_") and base:
                n = token.count("_")
                names.add("_".join(base.split("_")[:-n]) + token)
        if len(cells) > 1 and "histogram" in cells[1] and base:
            names |= {base + "_bucket", base + "_sum", base + "_count"}
        yield heading, line, names


def contract_metrics() -> set[str]:
    """Metric names declared in docs/CONTRACTS.md's tables, with a histogram's series names added."""
    return set().union(*(names for _, _, names in _contract_rows()))


def per_model_metrics() -> set[str]:
    """The contract's metrics that carry the `model` label: those of the tables headed as labelled
    `model` ("Model (label `model`)", "Ingestion (labels `model` and `kind`)"), less the rows marked
    "(no `model`)"."""
    return set().union(*(names for heading, row, names in _contract_rows()
                         if "`model`" in heading and "no `model`" not in heading and "no `model`" not in row))


def unfiltered_model_selectors(expr: str, per_model: set[str]) -> list[str]:
    """The selectors of per-model metrics in ``expr`` that do not filter by the model variable."""
    return [m.group(0).strip() for m in _SELECTOR.finditer(expr)
            if m.group(1) in per_model and MODEL_FILTER not in (m.group(2) or "")]


def keeps_model(expr: str) -> bool:
    """Whether the series ``expr`` returns still carry `model`: no aggregation in it drops the label
    (``sum(...)``, ``avg by (instance) (...)``, ``... without (model)``). A syntactic check, enough
    for the expressions of our dashboards and rules, whose live tests see the real labels."""
    for m in _AGGREGATION.finditer(expr):
        kind, labels = m.group(2), {x.strip() for x in (m.group(3) or "").split(",")}
        if kind != "by" or "model" not in labels:
            return False
    return True
