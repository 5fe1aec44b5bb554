"""Reference pages of the docs site, generated from the code that is their source of truth.

MkDocs loads this file as a hook (``hooks:`` in mkdocs.yml). A page asks for a generated part with a
marker line ``<!-- driftloop:generate NAME -->``; :func:`on_page_markdown` replaces the marker:

- ``config``: every key of :class:`monitor.config.DriftloopConfig` (type, default, environment variable,
  the field's description);
- ``cli``: every ``driftloop`` command's ``--help``, from the click commands in monitor/cli.py;
- ``commands``: the table of commands (name and one-line help), from the same click group;
- ``http-api``: the endpoints of the daemon's FastAPI app, from its OpenAPI schema (also published
  as ``reference/openapi.json``);
- ``metrics``: the metric tables of docs/CONTRACTS.md (a test checks them against a live /metrics);
- ``runbooks``: the alerts of rules/*.yml with links to their runbook pages.

A runbook page (``runbooks/<alert>.md``) also gets its rule appended, read from rules/*.yml, with its
summary and description as an alert shows them: the rendering that the rule's promtool unit test
(rules/tests/) expects, so the page shows values, not ``{{ $labels.model }}``.
Nothing here touches the network; the generators are plain functions that the tests call too.
"""
from __future__ import annotations

import json
import re
import tempfile
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- driftloop:generate ([a-z-]+) -->$", re.M)
_UNSET = "unset"


# -- configuration -------------------------------------------------------------------------------
def _type_name(annotation: Any) -> str:
    from pydantic import BaseModel

    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:  # one member of a union with its own bounds: int >= 1 or `auto`
        bounds = _bounds(SimpleNamespace(metadata=[m for meta in args[1:] for m in getattr(meta, "metadata", [meta])]))
        return _type_name(args[0]) + (f" ({bounds})" if bounds else "")
    if origin in (Union, UnionType):
        rest = [a for a in args if a is not type(None)]
        name = " or ".join(_type_name(a) for a in rest)
        return f"{name} or null" if len(rest) < len(args) else name
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"mapping {_type_name(args[0])} → {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "{" + ", ".join(annotation.model_fields) + "}"
    return {"str": "text", "int": "integer", "float": "number", "bool": "boolean", "Path": "path"}.get(
        getattr(annotation, "__name__", str(annotation)), str(annotation))


def _bounds(field: Any) -> str:
    ops = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    out = []
    for meta in field.metadata:
        for attr, sym in ops.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sym} {value}")
    return ", ".join(out)


def _default(field: Any) -> str:
    from pydantic import BaseModel

    value = field.get_default(call_default_factory=True)
    if value is None:
        return _UNSET
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return ", ".join(f"{v.name} ({v.type})" for v in value)  # type: ignore[attr-defined]
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value)}`"
    if isinstance(value, Path):
        return f"`{value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def config_keys() -> list[dict[str, str]]:
    """One row per configuration key: ``key``, ``type``, ``default``, ``env``, ``description``."""
    from pydantic import BaseModel

    from monitor.config import ENV_PREFIX, DriftloopConfig

    rows = []

    def walk(model: type[BaseModel], path: list[str]) -> None:
        for name, field in model.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation, path + [name])
                continue
            key = path + [name]
            bounds = _bounds(field)
            rows.append({
                "key": ".".join(key),
                "type": _type_name(annotation) + (f" ({bounds})" if bounds else ""),
                "default": _default(field),
                "env": ENV_PREFIX + "__".join(k.upper() for k in key),
                "description": (field.description or "").replace("|", "\\|"),
            })

    walk(DriftloopConfig, [])
    return rows


def config_markdown() -> str:
    sections: dict[str, list[dict[str, str]]] = {}
    for row in config_keys():
        section = row["key"].split(".")[0] if "." in row["key"] else "(top level)"
        sections.setdefault(section, []).append(row)
    out = []
    for section, rows in sections.items():
        title = f"`{section}`" if section != "(top level)" else "Top level"
        out += [f"### {title}", "", "| key and environment variable | type | default | description |",
                "| --- | --- | --- | --- |"]
        out += [f"| `{r['key']}`<br>`{r['env']}` | {r['type']} | {r['default']} | {r['description']} |" for r in rows]
        out.append("")
    return "\n".join(out)


# -- command line --------------------------------------------------------------------------------
def cli_commands() -> list[str]:
    from monitor.cli import COMMANDS

    return list(COMMANDS)


def cli_help(args: list[str]) -> str:
    """What ``driftloop ARGS --help`` prints (without running a process)."""
    from click.testing import CliRunner

    from monitor.cli import cli

    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="driftloop", terminal_width=100)
    if result.exit_code != 0:
        raise RuntimeError(f"driftloop {' '.join(args)} --help failed: {result.output}")
    return result.output.rstrip()


def commands_markdown() -> str:
    """The table of commands: each one's name and the one line ``driftloop --help`` shows."""
    from monitor.cli import COMMANDS

    out = ["| command | what |", "| --- | --- |"]
    out += [f"| [`driftloop {name}`](reference/cli.md#driftloop-{name}) | {summary} |"
            for name, (_, summary) in COMMANDS.items()]
    return "\n".join(out)


def cli_markdown() -> str:
    from monitor.cli import COMMANDS

    out = ["## `driftloop`", "", "```text", cli_help([]), "```", ""]
    for name, (_, summary) in COMMANDS.items():
        out += [f"## `driftloop {name}`", "", summary, "", "```text", cli_help([name]), "```", ""]
    return "\n".join(out)


# -- HTTP API ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def openapi_schema() -> dict[str, Any]:
    """The OpenAPI schema of the app ``driftloop serve`` serves, built on the default config in a
    throw-away home (no GPU collector, no scheduler, nothing listening), with the paths a deployment
    of several models adds (``/v1/models``, each model's own under ``/v1/models/{name}/…``)."""
    from monitor.config import load_config
    from monitor.daemon import Daemon

    with tempfile.TemporaryDirectory(prefix="driftloop-docs-") as home:
        cfg = load_config(environ={}, overrides={"home": home, "server": {"gpu_metrics": False}})
        daemon = Daemon(cfg, gpu=False)
        try:
            spec = daemon.build_app().openapi()
        finally:
            store = getattr(daemon, "store", None)
            if store is not None and hasattr(store, "close"):
                store.close()
    spec["paths"].update({path: ops for path, ops in _fleet_schema()["paths"].items() if path.startswith("/v1/models")})
    return spec


def _fleet_schema() -> dict[str, Any]:
    """The OpenAPI document a daemon of two models serves (``GET /openapi.json``)."""
    from monitor.config import load_config
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    with tempfile.TemporaryDirectory(prefix="driftloop-docs-") as home:
        cfg = load_config(environ={}, overrides={"home": home, "server": {"gpu_metrics": False},
                                                 "models": {"first": {}, "second": {}}})
        fleet = Fleet(cfg)
        try:
            return FleetApp(fleet).front.openapi()
        finally:
            fleet.stop()


def http_markdown() -> str:
    spec = openapi_schema()
    out = [f"OpenAPI {spec.get('openapi', '')}, `{spec['info']['title']}` {spec['info'].get('version', '')}. "
           "The full schema: [openapi.json](openapi.json).", ""]
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            out += [f"## `{method.upper()} {path}`", ""]
            if op.get("summary"):
                out += [op["summary"], ""]
            if op.get("description"):
                out += [op["description"].strip(), ""]
            body = op.get("requestBody", {}).get("content", {})
            if body:
                out += ["Request body: " + ", ".join(f"`{c}`" for c in body), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | required | description |", "| --- | --- | --- | --- |"]
                out += [f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} | "
                        f"{p.get('description', '')} |" for p in params]
                out.append("")
            responses = op.get("responses", {})
            if responses:
                out += ["| status | meaning |", "| --- | --- |"]
                out += [f"| {code} | {r.get('description', '')} |" for code, r in responses.items()]
                out.append("")
    return "\n".join(out + _task_records(spec))


def _json_type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_json_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if "enum" in schema:
        kind += " (" + ", ".join(map(str, schema["enum"][:8])) + (", ..." if len(schema["enum"]) > 8 else "") + ")"
    return kind


def _task_records(spec: dict[str, Any]) -> list[str]:
    """The prediction and label records of every task (``components/schemas`` marked ``x-task``)."""
    records = {n: s for n, s in spec.get("components", {}).get("schemas", {}).items() if "x-task" in s}
    if not records:
        return []
    out = ["## Records per task", "", "The bodies of `POST /v1/predictions` and `POST /v1/labels` follow the "
           "model's task (`GET /v1/schema` says which, with the exact record schemas).", ""]
    for name, schema in records.items():
        out += [f"### `{name}`", "", schema.get("description", ""), "",
                "| field | required | type | description |", "| --- | --- | --- | --- |"]
        for field, prop in schema["properties"].items():
            if field == "features":
                kind = "object: " + ", ".join(f"`{f}`" for f in prop.get("properties", {}))
            else:
                kind = _json_type(prop).replace("|", "\\|")
            required = "yes" if field in schema.get("required", []) else "no"
            out.append(f"| `{field}` | {required} | {kind} | {prop.get('description', '')} |")
        out += ["", "```json", json.dumps(schema["example"]), "```", ""]
    return out


# -- metrics -------------------------------------------------------------------------------------
def metrics_markdown() -> str:
    """The ``## Metrics`` section of docs/CONTRACTS.md, the one table of metric names."""
    text = (REPO / "docs" / "CONTRACTS.md").read_text()
    match = re.search(r"^## Metrics.*?\n(.*?)(?=^## )", text, flags=re.M | re.S)
    if not match:
        raise RuntimeError("docs/CONTRACTS.md has no '## Metrics' section")
    return re.sub(r"^(.+):\n\|", r"### \1\n\n|", match.group(1).strip(), flags=re.M)


# -- alerts and runbooks -------------------------------------------------------------------------
def alerts() -> list[dict[str, Any]]:
    out = []
    for path in sorted((REPO / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [{**r, "_file": f"rules/{path.name}"} for r in group["rules"] if "alert" in r]
    return out


def runbook_page(alert_name: str) -> str:
    """The docs page (relative to docs/) of an alert's runbook."""
    return f"runbooks/{alert_name.lower()}.md"


def rendered_examples() -> dict[str, dict[str, Any]]:
    """Per alert, the first firing alert its promtool unit test expects (``exp_labels``,
    ``exp_annotations``): the summary and description as Prometheus renders them, checked by
    ``promtool test rules``."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((REPO / "rules" / "tests").glob("*.yml")):
        for case in yaml.safe_load(path.read_text()).get("tests", []):
            for check in case.get("alert_rule_test", []):
                for exp in check.get("exp_alerts") or []:
                    if exp.get("exp_annotations"):
                        out.setdefault(check["alertname"], exp)
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def runbooks_markdown() -> str:
    examples = rendered_examples()
    out = ["| alert | severity | team | component | for | summary (an example) |",
           "| --- | --- | --- | --- | --- | --- |"]
    for a in alerts():
        summary = examples.get(a["alert"], {}).get("exp_annotations", {}).get("summary", "")
        out.append(f"| [{a['alert']}]({a['alert'].lower()}.md) | {a['labels']['severity']} | "
                   f"{a['labels']['team']} | {a['labels']['component']} | {a.get('for', '–')} | {_cell(summary)} |")
    return "\n".join(out)


def rule_markdown(alert: dict[str, Any]) -> str:
    labels = ", ".join(f"`{k}={v}`" for k, v in alert.get("labels", {}).items())
    out = ["## The rule", "", f"From `{alert['_file']}`; labels {labels}; fires after `{alert.get('for', '0s')}`.", "",
           "```promql", alert["expr"].strip(), "```", ""]
    example = rendered_examples().get(alert["alert"])
    if example:
        series = ", ".join(f"`{k}={v}`" for k, v in example.get("exp_labels", {}).items())
        notes = example["exp_annotations"]
        out += ["What the alert says, for example (the rendering its unit test in `rules/tests/` expects, "
                f"for an alert with {series}):", "",
                f"**Summary:** {_cell(notes['summary'])}", "",
                f"**Description:** {_cell(notes['description'])}", ""]
    return "\n".join(out)


# -- MkDocs hooks --------------------------------------------------------------------------------
GENERATORS = {"config": config_markdown, "cli": cli_markdown, "commands": commands_markdown, "http-api": http_markdown,
              "metrics": metrics_markdown, "runbooks": runbooks_markdown}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_uri}: unknown generated part {name!r}")
        return GENERATORS[name]()

    markdown = MARKER.sub(replace, markdown)
    src = page.file.src_uri
    if src.startswith("runbooks/") and src != "runbooks/index.md":
        rule = next((a for a in alerts() if runbook_page(a["alert"]) == src), None)
        if rule is None:
            raise ValueError(f"{src}: no alert in rules/*.yml has this runbook page")
        markdown = markdown.rstrip() + "\n\n" + rule_markdown(rule)
    return markdown


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/openapi.json", content=json.dumps(openapi_schema(), indent=1)))
    return files


# -- where the site is published -----------------------------------------------------------------
def site_url() -> str:
    """``site_url`` of mkdocs.yml: the base every alert's ``runbook_url`` starts with."""
    # mkdocs.yml may hold !!python tags in general; ours is plain, and only this key is read.
    match = re.search(r"^site_url:\s*(\S+)\s*$", (REPO / "mkdocs.yml").read_text(), flags=re.M)
    if not match:
        raise RuntimeError("mkdocs.yml has no site_url")
    return match.group(1)


# Where a rule's runbook_url points until the docs site is published: the daemon that was scraped
# serves its runbooks itself (monitor/daemon/runtime/runbooks.py), so the link opens wherever it runs.
DAEMON_BASE = "http://{{ $labels.instance }}/"
# Alerts whose scraped target is down (or is not the daemon) cannot open a page there: they link to
# the docs site even before it is set (PLACEHOLDER fails visibly rather than opening localhost).
SITE_ONLY = ("DriftloopDown", "DriftloopGpuExporterDown")
# The base the docs site ships with: no site answers there (.invalid is reserved, RFC 2606).
PLACEHOLDER = "https://driftloop-docs.invalid/"
_RUNBOOK_URL = re.compile(r'^(\s*runbook_url: ")[^"]*?(runbooks/[a-z0-9]+/")', re.M)


def runbook_url(alert_name: str, base: str | None = None, *, instance: str | None = None) -> str:
    """The rule's ``runbook_url`` of ``alert_name``: under ``base``, else the daemon that was scraped
    (``DAEMON_BASE``) until ``--set-site-url`` publishes the site, after that the site. ``instance``:
    the link as Prometheus renders it for an alert with that ``instance`` label."""
    if base is None:
        published = site_url() != PLACEHOLDER
        base = site_url() if published or alert_name in SITE_ONLY else DAEMON_BASE
    url = f"{base}runbooks/{alert_name.lower()}/"
    return url if instance is None else url.replace("{{ $labels.instance }}", instance)


def set_site_url(new: str) -> list[Path]:
    """Publish the site at ``new``: rewrite site_url in mkdocs.yml and every runbook_url in rules/
    (the rule files and their unit tests), whatever base they had. Idempotent; returns the files
    changed."""
    if not new.startswith(("https://", "http://")):
        raise ValueError(f"{new!r} is not an http(s) URL")
    if not new.endswith("/"):
        new += "/"
    changed = []
    for path in [REPO / "mkdocs.yml", *sorted((REPO / "rules").rglob("*.yml"))]:
        text = path.read_text()
        if path.name == "mkdocs.yml":
            updated = re.sub(r"^site_url:.*$", f"site_url: {new}", text, count=1, flags=re.M)
        else:
            updated = _RUNBOOK_URL.sub(lambda m: f"{m.group(1)}{new}{m.group(2)}", text)
        if updated != text:
            path.write_text(updated)
            changed.append(path)
    return changed


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Docs site helpers (the generators run inside mkdocs build).")
    parser.add_argument("--set-site-url", metavar="URL", required=True,
                        help="where the docs site (or your wiki's copy of the runbooks) is published: rewrites "
                             "site_url in mkdocs.yml and every rule's runbook_url (run once at install)")
    args = parser.parse_args()
    try:
        changed = set_site_url(args.set_site_url)
    except ValueError as exc:
        raise SystemExit(f"Error: {exc}") from None
    for path in changed:
        print(f"updated {path.relative_to(REPO)}")
    print(f"runbook_url base: {site_url()}")
