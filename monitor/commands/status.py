"""``driftloop status``: champion, last window's metrics, open incidents, recent retrains."""
from __future__ import annotations

import json
import os
from pathlib import Path

import click

from monitor.cli import config_from
from monitor.errors import UserInputError


@click.command("status")
@click.option("--url", default=None, metavar="URL",
              help="Ask a running daemon (GET URL/v1/status, e.g. http://127.0.0.1:8470) instead of "
                   "reading the store and MLflow directly.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--limit", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Recent incidents and retrains to show.")
@click.option("--incident", "incident_id", default=None, metavar="ID",
              help="Show one incident (open or closed) with its whole event trail and retrains.")
@click.pass_context
def command(ctx: click.Context, url: str | None, as_json: bool, limit: int, incident_id: str | None) -> None:
    """Show the champion version, the last check, open and recently closed incidents and recent retrains.

    Reads the store and MLflow under home (or the configured URLs) and creates nothing: without a
    store there it says where it looked and how to point it elsewhere."""
    cfg = config_from(ctx)
    from monitor.daemon.runtime.facade import render_incident, render_status

    if incident_id is not None:
        if url:
            raise UserInputError("--incident reads the store directly; leave out --url")
        _require_store(ctx, cfg)
        detail = _read_incident(cfg, incident_id)
        click.echo(json.dumps(detail, indent=2, default=str) if as_json else render_incident(detail))
        return
    if url:
        status = _fetch(url, cfg.server.token, limit)
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


def _require_store(ctx: click.Context, cfg) -> None:
    """UserInputError saying where status looked when the embedded store does not exist: a read
    command must not create ``./driftloop-data/`` (with an empty store and registry) in whatever
    directory it was run from."""
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
        f"no driftloop store for model {cfg.model.name!r}: looked for {db} ({where}; {config}); nothing "
        "created. Run status where you ran `driftloop train` or `serve`, point it at that setup with --config "
        f"FILE or ${ENV_PREFIX}HOME, or ask a running daemon with --url http://HOST:8470")


def _fetch(url: str, token: str | None, limit: int) -> dict:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    target = url.rstrip("/") + "/v1/status"
    try:
        r = httpx.get(target, params={"limit": limit}, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise UserInputError(f"cannot reach the daemon at {target}: {exc}") from exc
    if r.status_code != 200:
        raise UserInputError(f"{target} answered HTTP {r.status_code}: {r.text[:200]}")
    return r.json()


def _read(cfg, limit: int) -> dict:
    from monitor.daemon.runtime.facade import read_status
    return read_status(cfg, limit)


def _read_incident(cfg, incident_id: str) -> dict:
    from monitor.daemon.runtime.facade import read_incident
    detail = read_incident(cfg, incident_id)
    if detail is None:
        raise UserInputError(f"no incident {incident_id!r} for model {cfg.model.name!r} in the store")
    return detail
