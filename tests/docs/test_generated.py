"""Docs that cannot drift: what comes from the code (commands, alerts) is generated from it or
checked against it, and what the docs repeat by hand (the demo's duration) says the same everywhere.
Fast: no site build (tests/docs/test_site.py builds it)."""
from __future__ import annotations

import re

import click

from monitor.cli import cli
from scripts import docs_gen

REPO = docs_gen.REPO
PAGES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]


def click_commands() -> list[str]:
    """The commands of the click group itself (what `driftloop --help` lists)."""
    return cli.list_commands(click.Context(cli))


def test_the_commands_table_is_generated_from_click():
    table = docs_gen.commands_markdown()
    rows = table.splitlines()[2:]
    assert [re.search(r"`driftloop ([\w-]+)`", r).group(1) for r in rows] == click_commands()
    assert "export" in click_commands()
    page = (REPO / "docs" / "getting-started.md").read_text()
    assert "<!-- driftloop:generate commands -->" in page
    assert not re.search(r"^\| `driftloop \w+", page, flags=re.M), "a hand-written commands table is back"


def test_the_cli_reference_covers_every_command():
    text = docs_gen.cli_markdown()
    assert [m for m in re.findall(r"^## `driftloop ([\w-]+)`$", text, flags=re.M)] == click_commands()


def test_the_readme_commands_table_lists_every_command():
    """The README is read on the forge, where no generator runs: it is checked instead."""
    readme = (REPO / "README.md").read_text()
    listed = set(re.findall(r"^\| `driftloop ([\w-]+)", readme, flags=re.M))
    assert listed == set(click_commands()), f"README's table: missing {set(click_commands()) - listed}"


_COUNT = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|twenty\w*|thirty\w*)\s+"
                    r"(alert rules|alerts|alerting rules)\b", re.I)


def test_no_page_counts_the_alerts_by_hand():
    counted = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in PAGES for m in _COUNT.finditer(p.read_text())]
    assert not counted, f"alert counts drift with the rule files; link the generated list instead: {counted}"


def test_the_count_check_can_fail(tmp_path):
    assert _COUNT.search("The file holds 27 alert rules.") and _COUNT.search("twenty-eight alerts")
    assert not _COUNT.search("alerts.max_attempts retrains, 3 in a row")


_DEMO = re.compile(r"(?:takes|finishes in)\s+(about [a-z]+ minutes?)", re.I)


def test_the_demo_duration_is_said_the_same_everywhere():
    from monitor.commands.demo import command

    said = {p.relative_to(REPO).as_posix(): _DEMO.findall(" ".join(p.read_text().split())) for p in PAGES}
    said["driftloop demo --help"] = _DEMO.findall(" ".join((command.help or "").split()))
    said = {k: v for k, v in said.items() if v}
    assert "driftloop demo --help" in said and len(said) >= 3
    assert len({d.lower() for v in said.values() for d in v}) == 1, said


def test_the_benchmarks_page_shows_current_figures_with_their_commands():
    """History (issue numbers, before/after rows) lives in the changelog; every row of the summary
    table names the command that reproduces it."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert not re.findall(r"\bissues? \d+|\(issue", text, flags=re.I)
    assert not re.findall(r"^\|[^|\n]*\((?:rerun )?(?:before|after)\b[^|\n]*\|", text, flags=re.M)
    summary = text.split("\n\n")[2].splitlines()[2:]
    assert summary and all("bench/" in row.split("|")[2] or "make " in row.split("|")[2] for row in summary), summary
    assert "changelog.md" in text and "Changelog: changelog.md" in (REPO / "mkdocs.yml").read_text()
