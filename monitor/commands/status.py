"""``driftloop status``: champion, last window's metrics, open incidents, recent retrains."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from monitor.cli import chosen_model, config_from
from monitor.errors import UserInputError


@click.command("status")
@click.option("--url", default=None, metavar="URL",
              help="Ask a running daemon (GET URL/v1/status, e.g. http://127.0.0.1:8470; with several models "
                   "GET URL/v1/models, or URL/v1/models/NAME/status with --model) instead of reading the store "
                   "and MLflow directly.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with several models and no --model: a list, "
              "one object per model).")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Recent incidents and retrains to show.")
@click.option("--incident", "incident_id", default=None, metavar="ID",
              help="Show one incident (open or closed) with its whole event trail and retrains.")
@click.pass_context
def command(ctx: click.Context, url: str | None, as_json: bool, limit: int, incident_id: str | None) -> None:
    """Show the champion version, the last check, open and recently closed incidents and recent retrains.

    Reads the store and MLflow under home (or the configured URLs) and creates nothing: without a
    store there it says where it looked and how to point it elsewhere. A configuration of several
    models gets one line per model (task, champion, last check, open incident, retrain running);
    --model NAME shows that model's whole status."""
    deployment = config_from(ctx, whole=True)
    models = deployment.model_configs()
    from monitor.daemon.runtime.facade import render_incident, render_status

    if len(models) > 1:  # several models and none chosen
        if incident_id is not None:
            if url:
                raise UserInputError("--incident reads the store directly; leave out --url")
            _require_store(ctx, deployment, f"the models {', '.join(models)}")
            detail = _find_incident(models, incident_id)
            click.echo(json.dumps(detail, indent=2, default=str) if as_json else render_incident(detail))
            return
        if url:
            listing = _fetch_models(url, deployment.server.token)
        else:
            _require_store(ctx, deployment, f"the models {', '.join(models)}")
            listing = [_summary(cfg) for cfg in models.values()]
        click.echo(json.dumps(listing, indent=2, default=str) if as_json else render_listing(listing))
        return
    cfg = next(iter(models.values()))
    if incident_id is not None:
        if url:
            raise UserInputError("--incident reads the store directly; leave out --url")
        _require_store(ctx, cfg)
        detail = _read_incident(cfg, incident_id)
        click.echo(json.dumps(detail, indent=2, default=str) if as_json else render_incident(detail))
        return
    if url:
        path = f"/v1/models/{cfg.model.name}/status" if chosen_model(ctx) else "/v1/status"
        status = _fetch(url, path, cfg.server.token, {"limit": limit})
    else:
        _require_store(ctx, cfg)
        status = _read(cfg, limit)
    click.echo(json.dumps(status, indent=2, default=str) if as_json else render_status(status))


def _sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL (``sqlite:///path``), None for an in-memory or another database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).resolve()


def _require_store(ctx: click.Context, cfg, whose: str | None = None) -> None:
    """UserInputError saying where status looked when the embedded store does not exist: a read
    command must not create ``./driftloop-data/`` (with an empty store and registry) in whatever
    directory it was run from. ``whose``: the models it was looking for [default: cfg's model]."""
    from monitor.cli import _State
    from monitor.config import DEFAULT_CONFIG_FILE, ENV_PREFIX

    db = _sqlite_file(cfg.store_url)
    if db is None or db.exists():
        return
    state = ctx.find_object(_State)
    given = (state.config_path if state else None) or os.environ.get(ENV_PREFIX + "CONFIG")
    config = (f"config {given}" if given else f"config ./{DEFAULT_CONFIG_FILE}" if Path(DEFAULT_CONFIG_FILE).exists()
              else f"no config (no --config, no ${ENV_PREFIX}CONFIG, no ./{DEFAULT_CONFIG_FILE} in {Path.cwd()})")
    where = "store.url" if cfg.store.url else f"home {cfg.home}" + (f" from ${ENV_PREFIX}HOME"
                                                                   if ENV_PREFIX + "HOME" in os.environ else "")
    raise UserInputError(
        f"no driftloop store for {whose or f'model {cfg.model.name!r}'}: looked for {db} ({where}; {config}); "
        "nothing created. Run status where you ran `driftloop train` or `serve`, point it at that setup with "
        f"--config FILE or ${ENV_PREFIX}HOME, or ask a running daemon with --url http://HOST:8470")


def _fetch(url: str, path: str, token: str | None, params: dict | None = None) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    target = url.rstrip("/") + path
    try:
        r = httpx.get(target, params=params, headers=headers, timeout=10)
    except httpx.InvalidURL as exc:
        raise UserInputError(f"--url {url!r} is not a URL ({exc}): e.g. http://127.0.0.1:8470") from exc
    except httpx.HTTPError as exc:
        raise UserInputError(f"cannot reach the daemon at {target}: {exc}") from exc
    if r.status_code != 200:
        raise UserInputError(f"{target} answered HTTP {r.status_code}: {r.text[:200]}")
    return r.json()


def _read(cfg, limit: int) -> dict:
    from monitor.daemon.runtime.facade import read_status
    return read_status(cfg, limit)


def _model_incident(cfg, incident_id: str) -> dict | None:
    """Incident ``incident_id`` of cfg's model, None when it has none of that id (the store is shared
    by every model of a deployment, and its lookup by id does not ask whose the incident is)."""
    from monitor.daemon.runtime.facade import read_incident
    detail = read_incident(cfg, incident_id)
    return detail if detail is not None and detail["incident"].get("model") == cfg.model.name else None


def _read_incident(cfg, incident_id: str) -> dict:
    detail = _model_incident(cfg, incident_id)
    if detail is None:
        raise UserInputError(f"no incident {incident_id!r} for model {cfg.model.name!r} in the store")
    return detail


def _find_incident(models: dict[str, Any], incident_id: str) -> dict:
    """The incident ``incident_id`` of whichever model has it."""
    for cfg in models.values():
        detail = _model_incident(cfg, incident_id)
        if detail is not None:
            return detail
    raise UserInputError(f"no incident {incident_id!r} for any of the models {', '.join(models)} in the store")


# -- several models: one line each -----------------------------------------------------------------
# An entry has the keys of GET /v1/models' (name, task, champion, last_check {state, at}, incident
# {id, state, reason}, retraining), so the listing reads the same from the store and from a daemon.

def _summary(cfg) -> dict[str, Any]:
    """One model's entry, read from the store and the registry; a model whose store tables cannot
    be read is an entry with its error, not the end of the listing."""
    from monitor.errors import DriftloopError

    name = cfg.model.name
    try:
        status = _read(cfg, 1)
    except DriftloopError as exc:
        return {"name": name, "task": _configured_task(cfg), "error": str(exc)}
    check = status.get("last_check")
    current = status["open_incidents"][0] if status["open_incidents"] else None
    champion = status["champion"]
    return {"name": name, "task": _task(cfg, status), "champion": champion.get("version"),
            **({"champion_error": champion["error"]} if champion.get("error") else {}),
            "last_check": {"state": check["status"], "at": check["ts"]} if check else None,
            "incident": ({"id": current["id"], "state": current["state"], "reason": current["reason"]}
                         if current else None),
            "open_incidents": len(status["open_incidents"]),
            "retraining": status.get("retrain_running") is not None}


def _configured_task(cfg) -> str | None:
    return str(cfg.model.task) if cfg.model.task_configured else None


def _task(cfg, status: dict[str, Any]) -> str | None:
    """The model's task: configured, else the last check's, else the champion's recorded one
    (``driftloop train`` infers it from the target); None before any of them exists."""
    from monitor.errors import DriftloopError

    found = _configured_task(cfg) or (status.get("last_check") or {}).get("task")
    if found or not status["champion"].get("version"):
        return found
    from trainer import champion_schema
    try:
        _, _, recorded = champion_schema(cfg)
    except DriftloopError:
        return None
    return str(recorded[1].get("task", "binary")) if recorded else None


def _fetch_models(url: str, token: str | None) -> list[dict[str, Any]]:
    """GET /v1/models' entries (check times in ISO 8601, UTC, as status writes them)."""
    return _fetch(url, "/v1/models", token).get("models", [])


def render_listing(entries: list[dict[str, Any]]) -> str:
    """One line per model: name, task, champion, last check, open incident, retrain running."""
    rows = [("MODEL", "TASK", "CHAMPION", "LAST CHECK", "INCIDENT", "RETRAIN")]
    for e in entries:
        if e.get("error") and "champion" not in e:
            rows.append((e["name"], e.get("task") or "-", "-", "-", "-", f"failed: {e['error']}"))
            continue
        check = e.get("last_check")
        incident = e.get("incident")
        more = e.get("open_incidents", 1 if incident else 0) - 1
        rows.append((
            e["name"], e.get("task") or "-",
            (f"v{e['champion']}" if e.get("champion") else "none") + (" (registry error)" if e.get("champion_error")
                                                                       else ""),
            f"{check['state']} {check['at']}" if check else "never",
            _incident_cell(incident, more),
            "running" if e.get("retraining") else "-"))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)) + "  " + str(r[-1]) for r in rows)


def _incident_cell(incident: dict[str, Any] | None, more: int) -> str:
    if not incident:
        return "none"
    if "id" not in incident:  # the daemon could not read its store: it says so instead
        return f"unknown ({incident.get('error', 'no answer')})"
    return f"{incident['id']} {incident['state']} ({incident['reason']})" + (f" +{more} more" if more > 0 else "")
