"""Runbooks an on-call can act on: every alert has a page with Meaning, Impact, Diagnosis and
Mitigation; the rule's runbook_url points at it under a base set once at install (never localhost);
the PromQL a page asks you to run parses and names real metrics; what an alert says renders values."""
from __future__ import annotations

import re
import shutil

import pytest
import yaml

from scripts import docs_gen
from tests.observability.promql import contract_metrics, metric_names
from tests.support.prometheus import require

REPO = docs_gen.REPO
ALERTS = docs_gen.alerts()
SECTIONS = ["Meaning", "Impact", "Diagnosis", "Mitigation"]
IDS = [a["alert"] for a in ALERTS]


def sections(page: str) -> dict[str, str]:
    """``## Title`` → its body, in the order of the page."""
    parts = re.split(r"^## (.+)$", page, flags=re.M)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2])}


def promql_blocks(text: str) -> list[str]:
    return [line.strip() for block in re.findall(r"```promql\n(.*?)```", text, flags=re.S)
            for line in block.splitlines() if line.strip()]


def _page(alert: dict) -> str:
    return (REPO / "docs" / docs_gen.runbook_page(alert["alert"])).read_text()


@pytest.mark.parametrize("alert", ALERTS, ids=IDS)
def test_every_alert_has_a_runbook_with_the_four_sections(alert):
    page = _page(alert)
    assert page.startswith(f"# {alert['alert']}\n")
    found = sections(page)
    assert list(found)[:4] == SECTIONS, f"{alert['alert']}: sections {list(found)}"
    empty = [s for s in SECTIONS if len(found[s]) < 40]
    assert not empty, f"{alert['alert']}: empty sections {empty}"
    assert promql_blocks(found["Diagnosis"]), f"{alert['alert']}: Diagnosis has no PromQL to run"
    if alert["labels"]["team"] == "ml":
        # The exact commands: tests/docs/test_site.py checks each exists with the flags shown.
        assert re.search(r"^driftloop (status|check)\b", found["Diagnosis"], flags=re.M), alert["alert"]


@pytest.mark.parametrize("alert", ALERTS, ids=IDS)
def test_runbook_url_points_at_the_alerts_page(alert):
    url = alert["annotations"]["runbook_url"]
    assert url == docs_gen.runbook_url(alert["alert"])
    assert url.endswith("/" + docs_gen.runbook_page(alert["alert"]).removesuffix(".md") + "/")
    assert not re.search(r"//(127\.|localhost|0\.0\.0\.0|\[::1\])", url), "a deployed link must not open localhost"


def test_model_quality_runbooks_say_when_to_roll_back():
    model = [a for a in ALERTS if a["labels"]["component"] == "model" and a["labels"]["reason"] != "drift"]
    assert model
    for alert in model:
        mitigation = sections(_page(alert))["Mitigation"]
        assert "driftloop rollback" in mitigation and "retrain" in mitigation, alert["alert"]


def test_no_runbook_page_without_an_alert_and_every_page_in_the_nav():
    pages = {p.name for p in (REPO / "docs" / "runbooks").glob("*.md")} - {"index.md"}
    assert pages == {docs_gen.runbook_page(a["alert"]).split("/")[1] for a in ALERTS}
    nav = (REPO / "mkdocs.yml").read_text()
    assert not [p for p in pages if f"runbooks/{p}" not in nav]


def test_runbook_promql_names_only_real_metrics():
    known = contract_metrics() | {"up"}
    unknown = {}
    for alert in ALERTS:
        for expr in promql_blocks(_page(alert)):
            names = metric_names(expr) - known
            if names:
                unknown[f"{alert['alert']}: {expr}"] = names
    assert not unknown


def test_runbook_promql_parses(tmp_path):
    """promtool parses every query of every page (as the expression of a recording rule)."""
    promtool = require("promtool")
    import subprocess

    exprs = sorted({e.replace("MODEL", "m").replace("INSTANCE",
                                                    "i:1") for a in ALERTS for e in promql_blocks(_page(a))})
    rules = {"groups": [{"name": "runbooks", "rules": [{"record": f"runbook:q{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "runbooks.rules.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in proc.stdout
    # ... and the check can fail.
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b", "expr": "rate(x[5m]"}]}]}))
    assert subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, timeout=60).returncode != 0


# -- what an alert says ----------------------------------------------------------------------------
@pytest.mark.parametrize("alert", ALERTS, ids=IDS)
def test_what_the_alert_says_renders_values(alert):
    """Each alert's promtool unit test pins its rendered summary and description (promtool fails when
    Prometheus renders them differently), and every label the text uses is on the alert, so none
    renders empty; the docs show that rendering, not the template."""
    example = docs_gen.rendered_examples().get(alert["alert"])
    assert example, f"{alert['alert']}: no unit test in rules/tests/ expects its annotations"
    notes = example["exp_annotations"]
    assert set(notes) == {"summary", "description", "runbook_url"}
    assert not [k for k, v in notes.items() if "{{" in v or "<no value>" in v]
    text = alert["annotations"]["summary"] + alert["annotations"]["description"]
    used = set(re.findall(r"\$labels\.(\w+)", text))
    assert used <= {k for k, v in example.get("exp_labels", {}).items() if v}, alert["alert"]
    assert notes["runbook_url"] == docs_gen.runbook_url(alert["alert"], instance=example["exp_labels"].get("instance"))
    page = docs_gen.rule_markdown(alert)
    assert "{{" not in page.split("```", 2)[2] and " ".join(notes["summary"].split()) in page


def test_runbooks_table_lists_every_alert_with_a_rendered_summary():
    table = docs_gen.runbooks_markdown()
    rows = [r for r in table.splitlines()[2:]]
    assert len(rows) == len(ALERTS)
    assert all(f"[{a['alert']}]" in table for a in ALERTS)
    assert "{{" not in table


# -- the base URL, set once --------------------------------------------------------------------------
def test_shipped_rules_do_not_point_at_localhost():
    for path in [*(REPO / "rules").rglob("*.yml"), REPO / "mkdocs.yml"]:
        text = path.read_text()
        urls = re.findall(r'runbook_url: "([^"]+)"', text) + re.findall(r"^site_url:\s*(\S+)", text, flags=re.M)
        assert not [u for u in urls if re.search(r"//(127\.|localhost)", u)], path


def test_set_site_url_from_any_base_and_again(tmp_path, monkeypatch):
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    rules = tmp_path / "rules" / "driftloop.rules.yml"
    # A file an upgrade brought back with another base than mkdocs.yml's.
    rules.write_text(re.sub(r'runbook_url: "[^"]*?runbooks/', 'runbook_url: "http://old.example/x/runbooks/',
                            rules.read_text()))
    monkeypatch.setattr(docs_gen, "REPO", tmp_path)
    assert rules in docs_gen.set_site_url("https://wiki.example.org/ml/driftloop")
    for alert in docs_gen.alerts():
        assert alert["annotations"]["runbook_url"] == \
            f"https://wiki.example.org/ml/driftloop/runbooks/{alert['alert'].lower()}/"
    assert docs_gen.set_site_url("https://wiki.example.org/ml/driftloop/") == []
    with pytest.raises(ValueError):
        docs_gen.set_site_url("wiki.example.org")
