"""The alert runbooks as HTML pages: the Markdown of docs/runbooks/, found at ``monitor/runbooks`` (a
link to docs/runbooks in a checkout; the files themselves in a wheel, as package data), each page
rendered once and kept. Both processes an alert's ``runbook_url``
(``http://{{ $labels.instance }}/runbooks/<alert>/`` in rules/*.yml) can point at serve them: the
daemon (:mod:`monitor.daemon.runtime.runbooks`) and the GPU exporter (:mod:`monitor.gpu.server`), so
the link opens on whichever instance the alert came from, without a docs site.

Why our own renderer: no Markdown library is a runtime dependency (``markdown`` comes with the
docs extra only), and the runbooks use a small subset: headings, paragraphs, lists, fenced code,
inline code, emphasis and links. Everything is escaped; a link keeps its target only when it is an
http(s) URL or another runbook.
"""
from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from pathlib import Path

from monitor.errors import DriftloopError

PAGES = Path(__file__).resolve().parent / "runbooks"
_NAME = re.compile(r"^[a-z0-9]{1,80}$")
_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)")


class RunbooksMissing(DriftloopError, LookupError):
    """The runbook pages are not installed next to the package."""


def _link(target: str) -> str | None:
    if target.startswith(("https://", "http://")):
        return target
    page = re.fullmatch(r"([a-z0-9]+)\.md(#[a-z0-9-]+)?", target)
    if page and page.group(1) != "index":
        return f"/runbooks/{page.group(1)}/{page.group(2) or ''}"
    return None


def _inline(text: str) -> str:
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(escape(text[pos:m.start()]))
        code, bold, em, label, target = m.groups()
        if code is not None:
            out.append(f"<code>{escape(code)}</code>")
        elif bold is not None:
            out.append(f"<strong>{_inline(bold)}</strong>")
        elif em is not None:
            out.append(f"<em>{_inline(em)}</em>")
        else:
            href = _link(target)
            out.append(f'<a href="{escape(href)}">{_inline(label)}</a>' if href else _inline(label))
        pos = m.end()
    out.append(escape(text[pos:]))
    return "".join(out)


def render(markdown: str) -> str:
    """The body HTML of a runbook page."""
    out: list[str] = []
    para: list[str] = []
    items: list[list[str]] = []
    lines = iter(markdown.splitlines())

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(' '.join(i))}</li>" for i in items) + "</ul>")
            items.clear()

    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            code = []
            for inner in lines:
                if inner.strip().startswith("```"):
                    break
                code.append(inner)
            out.append(f"<pre><code>{escape(chr(10).join(code))}</code></pre>")
        elif m := re.match(r"^(#{1,4})\s+(.*)$", line):
            flush()
            level = len(m.group(1))
            out.append(f"<h{level}>{_inline(m.group(2))}</h{level}>")
        elif m := re.match(r"^\s*(?:[-*]|\d+\.)\s+(.*)$", line):
            if para:
                flush()
            items.append([m.group(1)])
        elif not stripped:
            flush()
        elif items and line.startswith(" "):
            items[-1].append(stripped)
        else:
            if items:
                flush()
            para.append(stripped)
    flush()
    return "\n".join(out)


@lru_cache(maxsize=64)
def runbook_page(name: str, folder: Path = PAGES) -> str | None:
    """The HTML page of the alert ``name`` (lower case), or None when there is no such runbook.
    Raises :class:`RunbooksMissing` when no runbook is installed at all."""
    if not folder.is_dir():
        raise _missing(folder)
    path = folder / f"{name}.md"
    if not _NAME.match(name) or not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    title = text.splitlines()[0].lstrip("# ").strip() if text else name
    return (f"<!doctype html><html lang=en><meta charset=utf-8><title>{escape(title)} runbook</title>"
            "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 1em}"
            "pre{background:#f4f4f4;padding:.8em;overflow-x:auto}code{font-size:90%}</style>\n"
            f"{render(text)}\n<p><a href=\"/runbooks/\">All runbooks</a></p></html>\n")


def runbook_names(folder: Path = PAGES) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.md") if p.stem != "index") if folder.is_dir() else []


def index_page(folder: Path = PAGES) -> str:
    """The list of runbooks, each linked."""
    links = "".join(f'<li><a href="/runbooks/{n}/">{escape(n)}</a></li>' for n in runbook_names(folder))
    return f"<!doctype html><meta charset=utf-8><title>Runbooks</title><h1>Runbooks</h1><ul>{links}</ul>\n"


def missing_page(alert: str, folder: Path = PAGES) -> str:
    """The 404 page for an alert without a runbook (or an installation without any)."""
    if not folder.is_dir():
        return f"<!doctype html><meta charset=utf-8><title>No runbooks</title><p>{escape(str(_missing(folder)))}</p>\n"
    return ("<!doctype html><meta charset=utf-8><title>No such runbook</title>"
            f"<p>No runbook for alert {escape(alert)}. <a href=\"/runbooks/\">All runbooks</a></p>\n")


# How both servers answer a page: static text, cached an hour, never sniffed as another type.
HEADERS = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}


def answer(alert: str, folder: Path = PAGES) -> tuple[int, str, dict[str, str]]:
    """What ``GET /runbooks/<alert>`` answers on the daemon and on the exporter alike: status, HTML
    and headers. ``alert`` in any case, without slashes; empty for the list of runbooks."""
    if not alert:
        return 200, index_page(folder), HEADERS
    try:
        html = runbook_page(alert.lower(), folder)
    except RunbooksMissing:
        html = None
    if html is None:
        return 404, missing_page(alert, folder), {}
    return 200, html, HEADERS


def _missing(folder: Path) -> RunbooksMissing:
    return RunbooksMissing(f"no runbook pages at {folder}: this installation has no docs/runbooks; "
                           "publish the docs site and point the rules at it with scripts/docs_gen.py --set-site-url")
