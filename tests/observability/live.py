"""Helpers for the live tests: a Prometheus configured like ours (prometheus.yml's jobs and rules, our
targets, fast intervals), and running every dashboard and rule expression against it."""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml

from tests.observability.promql import (REPO, Query, dashboard_queries, label_values_promql, load_rules,
                                         metric_names, render, variable_queries)
from tests.support.prometheus import Alertmanager, Prometheus, start_alertmanager, start_prometheus
from tests.support.waiting import wait_until

# Grafana's $__rate_interval is at least 4 scrape intervals; a wider window keeps a scrape that a
# loaded 2-core machine delayed from emptying a rate() window.
RATE_INTERVAL = "15s"
INTERVAL = "2s"


def start_like_ours(workdir: Path, targets: dict[str, list[str]], alertmanager: str | None = None) -> Prometheus:
    """Prometheus with prometheus.yml's scrape jobs (targets replaced; jobs not in ``targets`` dropped,
    jobs in ``targets`` that are only commented examples there added), our rule files, 1 s intervals."""
    cfg = yaml.safe_load((REPO / "prometheus.yml").read_text())
    cfg["global"] = {**cfg["global"], "scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"}
    cfg["rule_files"] = [str(REPO / pattern) for pattern in cfg["rule_files"]]
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    cfg["scrape_configs"] = [{**jobs.get(name, {"job_name": name}), "static_configs": [{"targets": t}]}
                             for name, t in targets.items()]
    if alertmanager:
        cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] = [alertmanager]
    else:
        del cfg["alerting"]
    return start_prometheus(workdir, config=cfg)


def query_range(prom: Prometheus, expr: str, start: float, end: float, step: float = 1.0) -> list[dict]:
    r = httpx.get(f"{prom.url}/api/v1/query_range",
                  params={"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}, timeout=30)
    body = r.json()
    if body.get("status") != "success":
        raise AssertionError(f"query {expr!r} failed: {body.get('error', body)}")
    return body["data"]["result"]


def variable_values(prom: Prometheus, dash: dict) -> dict[str, list[str]]:
    """Each query variable's values, resolved in order like Grafana does (later ones may use earlier)."""
    values: dict[str, list[str]] = {}
    for var in dash["templating"]["list"]:
        if var["type"] == "textbox":
            values[var["name"]] = [var["query"]]
    for name, query in variable_queries(dash):
        expr, label = label_values_promql(render(query, values, rate_interval=RATE_INTERVAL, interval=INTERVAL,
                                                 range_="1h"))
        found = sorted({s["metric"][label] for s in prom.query(expr) if label in s["metric"]})
        assert found, f"variable ${name} ({query}) has no values"
        values[name] = found
    return values


def empty_queries(prom: Prometheus, name: str, dash: dict, start: float, end: float) -> list[str]:
    """Run every panel and annotation query of ``dash`` over [start, end]; return those with no data."""
    values = variable_values(prom, dash)
    range_ = f"{max(1, int(end - start))}s"

    def has_data(q: Query) -> tuple[Query, str, bool]:
        expr = render(q.expr, values, rate_interval=RATE_INTERVAL, interval=INTERVAL, range_=range_)
        result = prom.query(expr, time_=end) if q.instant else query_range(prom, expr, start, end)
        return q, expr, bool(result)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(has_data, dashboard_queries(name, dash)))
    return [f"{q.where}: {expr}" for q, expr, ok in results if not ok]


def rules_health(prom: Prometheus) -> dict[str, dict]:
    """Every loaded rule by name, with Prometheus' own evaluation health."""
    groups = httpx.get(f"{prom.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    return {r["name"]: r for g in groups for r in g["rules"]}


def wait_rules_evaluated(prom: Prometheus, timeout: float = 15) -> dict[str, dict]:
    def evaluated() -> dict[str, dict]:
        rules = rules_health(prom)
        return rules if rules and all(r.get("health") != "unknown" for r in rules.values()) else {}

    return wait_until(evaluated, timeout, 0.5, lambda: f"rules not evaluated: {rules_health(prom)}")


def alerts(prom: Prometheus) -> list[dict]:
    return httpx.get(f"{prom.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]


def unrendered_annotations(prom: Prometheus) -> list[str]:
    """What the active alerts say, as Prometheus rendered it: an annotation that still shows a
    template, or a label its text uses that the alert lacks (it would render empty)."""
    templates = {r["alert"]: r["annotations"] for r in load_rules() if "alert" in r}
    bad = []
    for alert in alerts(prom):
        name, labels = alert["labels"]["alertname"], alert["labels"]
        for key, template in templates.get(name, {}).items():
            text = alert["annotations"].get(key, "")
            used = re.findall(r"\{\{\s*\$labels\.(\w+)", template)  # not `{{ with $labels.x }}`
            if not text or "{{" in text or "<no value>" in text or [u for u in used if not labels.get(u)]:
                bad.append(f"{name} {key}: {text!r} (labels {labels})")
    return bad


def wait_alert(prom: Prometheus, name: str, timeout: float = 20, **labels: str) -> dict:
    """Wait until alert ``name`` (with ``labels``) is pending or firing, and return it."""
    def active() -> dict | None:
        return next((a for a in alerts(prom) if a["labels"]["alertname"] == name
                     and all(a["labels"].get(k) == v for k, v in labels.items())), None)

    return wait_until(active, timeout, 0.5, lambda: f"alert {name} {labels} not active; active: "
                      f"{[(a['labels']['alertname'], a['state']) for a in alerts(prom)]}")


def rule_selectors_without_data(prom: Prometheus, names: set[str], start: float, end: float) -> list[str]:
    """For the rules ``names``: the metrics they read that have no series over [start, end]."""
    missing = []
    for rule in load_rules():
        name = rule.get("alert") or rule.get("record")
        if name not in names:
            continue
        for metric in sorted(metric_names(rule["expr"])):
            if not query_range(prom, metric, start, end, step=2):
                missing.append(f"{name}: {metric}")
    return missing


def start_alertmanager_like_ours(workdir: Path, daemon_url: str, token_file: Path) -> Alertmanager:
    """Alertmanager with alertmanager.yml: the webhook pointed at ``daemon_url``, the token read from
    ``token_file``, and the model route's waits cut to a second so a test need not wait."""
    cfg = yaml.safe_load((REPO / "alertmanager.yml").read_text())
    (hook,) = next(r for r in cfg["receivers"] if r["name"] == "driftloop")["webhook_configs"]
    hook["url"] = f"{daemon_url}/v1/alerts"
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    model_route = next(r for r in cfg["route"]["routes"] if r["receiver"] == "driftloop")
    model_route.update(group_wait="1s", group_interval="1s")
    return start_alertmanager(workdir, cfg)


def image_script(tmp_path, name: str) -> str:
    """A script the Dockerfile writes into the image (a heredoc), as a file we can run here."""
    dockerfile = (REPO / "Dockerfile").read_text()
    body = re.search(rf"COPY --chmod=755 <<'EOF' /usr/local/bin/{name}\n(.*?)\nEOF\n", dockerfile, re.S)
    assert body, f"{name} heredoc not found"
    path = tmp_path / name
    path.write_text(body.group(1) + "\n")
    path.chmod(0o755)
    return str(path)


def entrypoint_script(tmp_path) -> str:
    return image_script(tmp_path, "driftloop-entrypoint")


__all__ = ["Alertmanager", "entrypoint_script", "image_script", "start_alertmanager_like_ours", "Query", "alerts",
           "empty_queries", "query_range", "rule_selectors_without_data", "rules_health",
           "start_like_ours", "unrendered_annotations", "variable_values", "wait_alert", "wait_rules_evaluated"]
