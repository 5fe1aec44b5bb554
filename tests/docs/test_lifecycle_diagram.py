"""The state diagram of docs/parts/lifecycle.md is the lifecycle's table, rendered
(``python -m monitor.daemon.decisions.lifecycle`` prints it)."""
from __future__ import annotations

from pathlib import Path

from monitor.daemon.decisions import lifecycle
from monitor.daemon.decisions.kinds import State

PAGE = Path(__file__).resolve().parents[2] / "docs" / "parts" / "lifecycle.md"


def test_the_docs_diagram_is_generated_from_the_table():
    page = PAGE.read_text()
    assert f"```mermaid\n{lifecycle.mermaid()}\n```" in page, \
        "the diagram differs from the table: paste `python -m monitor.daemon.decisions.lifecycle` into the page"


def test_the_docs_table_of_states_names_every_state():
    page = PAGE.read_text()
    assert all(f"| `{s}` |" in page for s in State)
