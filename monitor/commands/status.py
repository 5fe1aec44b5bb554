"""``driftloop status``: champion, last window's metrics, open incidents, recent retrains."""
from __future__ import annotations

import json

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
    """Show the champion version, the last check, open and recently closed incidents and recent retrains."""
    cfg = config_from(ctx)
    from monitor.daemon.facade import render_incident, render_status

    if incident_id is not None:
        if url:
            raise UserInputError("--incident reads the store directly; leave out --url")
        detail = _read_incident(cfg, incident_id)
        click.echo(json.dumps(detail, indent=2, default=str) if as_json else render_incident(detail))
        return
    if url:
        status = _fetch(url, cfg.server.token, limit)
    else:
        status = _read(cfg, limit)
    click.echo(json.dumps(status, indent=2, default=str) if as_json else render_status(status))


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
    from monitor.daemon.facade import read_status
    return read_status(cfg, limit)


def _read_incident(cfg, incident_id: str) -> dict:
    from monitor.daemon.facade import read_incident
    detail = read_incident(cfg, incident_id)
    if detail is None:
        raise UserInputError(f"no incident {incident_id!r} for model {cfg.model.name!r} in the store")
    return detail
