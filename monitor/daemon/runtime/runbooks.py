"""The alert runbooks, served by the daemon itself at ``GET /runbooks/<alert>`` (no token: static,
read-only text), so an alert's ``runbook_url`` (``http://{{ $labels.instance }}/runbooks/<alert>/``
in rules/*.yml) opens where the daemon runs, without a docs site. The pages themselves:
:mod:`monitor.runbook_pages` (the GPU exporter serves the same).
"""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.runbook_pages import PAGES, RunbooksMissing, answer, render, runbook_names, runbook_page

__all__ = ["PAGES", "RunbooksMissing", "build_router", "render", "runbook_names", "runbook_page"]


def build_router(folder: Path = PAGES) -> APIRouter:
    """``GET /runbooks/`` (the list) and ``GET /runbooks/<alert>`` (one page, any case, with or
    without the trailing slash); no authentication: the pages are the project's public docs."""
    router = APIRouter(tags=["runbooks"])

    @router.get("/runbooks/", response_class=HTMLResponse, summary="The alerts' runbooks")
    def index() -> HTMLResponse:
        status, html, headers = answer("", folder)
        return HTMLResponse(html, status_code=status, headers=headers)

    @router.get("/runbooks/{alert}", response_class=HTMLResponse, summary="One alert's runbook",
                responses={404: {"description": "no runbook for that alert (or none installed)",
                                 "content": {"text/html": {}}}})
    @router.get("/runbooks/{alert}/", response_class=HTMLResponse, include_in_schema=False)
    def page(alert: str) -> HTMLResponse:
        status, html, headers = answer(alert, folder)
        return HTMLResponse(html, status_code=status, headers=headers)

    return router
