"""The docs site: it builds strictly, its generated reference covers the code, the alerts' runbook
links land on its pages, and every `driftloop …` command it shows exists with the flags it shows."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from scripts import docs_gen

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = sorted((REPO / "docs").rglob("*.md")) + [REPO / "README.md"]


def build(config: Path, out: Path) -> subprocess.CompletedProcess:
    # Not `-q`: a quiet build does not count warnings, so `--strict` would let a broken link pass.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(out)], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = build(REPO / "mkdocs.yml", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids |= {v for k, v in attrs if k == "id" and v}


def resolves(site: Path, url: str) -> bool:
    """Whether ``url`` (under mkdocs.yml's site_url) names a page of the built ``site``, and its
    fragment, if any, an element of that page."""
    base = docs_gen.site_url()
    if not url.startswith(base):
        return False
    parts = urlsplit(url[len(base):])
    page = site / parts.path / "index.html" if not parts.path.endswith(".html") else site / parts.path
    if not page.is_file():
        return False
    if parts.fragment:
        ids = _Ids()
        ids.feed(page.read_text())
        return parts.fragment in ids.ids
    return True


def _text(page: Path) -> str:
    return re.sub(r"<[^>]+>", "", page.read_text())


# -- the build -----------------------------------------------------------------------------------
def test_site_builds_with_the_generated_pages(site):
    for page in ("reference/configuration", "reference/cli", "reference/http-api", "reference/metrics"):
        html = (site / page / "index.html").read_text()
        assert "driftloop:generate" not in html, page
    assert (site / "reference" / "openapi.json").is_file()
    assert "/v1/predictions" in _text(site / "reference" / "http-api" / "index.html")


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The build test can fail: a link to an anchor that does not exist stops a strict build."""
    for name in ("docs", "scripts", "rules"):
        shutil.copytree(REPO / name, tmp_path / name)
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "troubleshooting.md"
    page.write_text(page.read_text() + "\nSee [nowhere](parts/drift.md#no-such-heading).\n")
    proc = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "no-such-heading" in proc.stdout + proc.stderr


# -- runbooks ------------------------------------------------------------------------------------
ALERTS = docs_gen.alerts()


@pytest.mark.parametrize("alert", ALERTS, ids=[a["alert"] for a in ALERTS])
def test_runbook_url_resolves_on_the_built_site(site, alert):
    assert alert["annotations"]["runbook_url"] == docs_gen.runbook_url(alert["alert"])
    url = docs_gen.runbook_url(alert["alert"], base=docs_gen.site_url())  # the site's copy (--set-site-url)
    assert resolves(site, url), f"{alert['alert']}: {url} is not a page of the built site"
    assert alert["alert"] in _text(site / urlsplit(url).path.lstrip("/") / "index.html")


def test_resolves_refuses_what_is_not_there(site):
    base = docs_gen.site_url()
    assert resolves(site, base + "runbooks/driftloopdown/")
    assert not resolves(site, base + "runbooks/driftloopnosuchalert/")
    assert not resolves(site, base + "runbooks/driftloopdown/#no-such-anchor")
    assert resolves(site, base + "runbooks/driftloopdown/#the-rule")
    assert not resolves(site, "https://elsewhere.example/runbooks/driftloopdown/")


def test_set_site_url_moves_the_runbook_links_with_the_site(tmp_path, monkeypatch):
    shutil.copytree(REPO / "rules", tmp_path / "rules")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    monkeypatch.setattr(docs_gen, "REPO", tmp_path)
    changed = docs_gen.set_site_url("https://docs.example.org/driftloop")
    assert tmp_path / "mkdocs.yml" in changed and tmp_path / "rules" / "driftloop.rules.yml" in changed
    assert docs_gen.site_url() == "https://docs.example.org/driftloop/"
    for alert in docs_gen.alerts():
        assert alert["annotations"]["runbook_url"] == docs_gen.runbook_url(alert["alert"])
    tests = "".join(p.read_text() for p in (tmp_path / "rules" / "tests").glob("*.yml"))
    assert "127.0.0.1:8000" not in tests and "https://docs.example.org/driftloop/runbooks/" in tests


# -- configuration -------------------------------------------------------------------------------
def _schema_keys() -> list[str]:
    """Every leaf key of the configuration, from its JSON schema (not from the generator's walk)."""
    from monitor.config import DriftloopConfig

    schema = DriftloopConfig.model_json_schema()
    defs = schema.get("$defs", {})
    keys: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        for name, prop in node["properties"].items():
            ref = prop.get("$ref") or next((a["$ref"] for a in prop.get("allOf", []) if "$ref" in a), None)
            target = defs.get(ref.split("/")[-1]) if ref else None
            if target and "properties" in target and name != "features":
                walk(target, f"{prefix}{name}.")
            else:
                keys.append(prefix + name)

    walk(schema, "")
    return keys


def test_configuration_page_covers_every_key(site):
    text = _text(site / "reference" / "configuration" / "index.html")
    keys = _schema_keys()
    assert len(keys) > 60 and "server.port" in keys and "training.hidden" in keys
    missing = [k for k in keys if k not in text]
    assert not missing, f"keys missing from the configuration page: {missing}"
    env = [f"DRIFTLOOP_{k.upper().replace('.', '__')}" for k in keys if "." in k]
    assert not [e for e in env if e not in text]


def test_every_configuration_key_is_described():
    undescribed = [r["key"] for r in docs_gen.config_keys() if not r["description"]]
    assert not undescribed, f"give these fields a description= in monitor/config.py: {undescribed}"


# -- commands shown in the docs ------------------------------------------------------------------
_GLOBAL_WITH_VALUE = {"--config", "-c", "--log-level"}
_STOP = {"|", "||", "&&", ";", ">", "2>&1", "\\"}


_WRAPPERS = {"exec", "time", "sudo", "env", "&&", ";", "|", "$"}


def _command_lines(path: Path) -> list[str]:
    """The lines of fenced code blocks, and the inline code spans of the prose."""
    lines, fence = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif fence:
            lines.append(line)
        else:
            lines += re.findall(r"`([^`]+)`", line)
    return lines


def documented_invocations(paths: list[Path]) -> list[tuple[str, str, list[str]]]:
    """(where, command, flags) for each `driftloop <command> …` in code of ``paths``: where the word
    `driftloop` is run (first on the line, or after `exec`, `sudo`, an environment assignment, …)."""
    found = []
    for path in paths:
        for line in _command_lines(path):
            code = line.split(" #", 1)[0].strip().removeprefix("$ ")
            try:
                tokens = shlex.split(code)
            except ValueError:
                tokens = code.split()
            for i, tok in enumerate(tokens):
                if tok != "driftloop" and not tok.endswith("/driftloop"):
                    continue
                if i > 0 and tokens[i - 1] not in _WRAPPERS and "=" not in tokens[i - 1]:
                    continue
                rest = tokens[i + 1:]
                while rest and rest[0] in _GLOBAL_WITH_VALUE:
                    rest = rest[2:]
                if not rest or rest[0] == "driftloop" or rest[0].startswith(("-", "<")):
                    continue
                args = []
                for t in rest[1:]:
                    if t in _STOP:
                        break
                    args.append(t)
                flags = [t.split("=")[0] for t in args if t.startswith("-") and t != "-"]
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                for name in rest[0].split("|"):  # `driftloop train|retrain`
                    found.append((f"{where}: {line.strip()}", name, flags))
    return found


INVOCATIONS = documented_invocations(DOC_FILES)


def test_the_docs_show_commands():
    assert {cmd for _, cmd, _ in INVOCATIONS} >= {"serve", "exporter", "train", "retrain", "check", "status",
                                                 "rollback", "demo"}


@pytest.mark.parametrize("command", sorted({cmd for _, cmd, _ in INVOCATIONS}))
def test_documented_command_exists_with_its_flags(command):
    from monitor.cli import COMMANDS, cli, main

    assert command in COMMANDS, f"`driftloop {command}` is shown in the docs but is no command"
    assert main([command, "--help"]) == 0
    import click
    cmd = cli.get_command(click.Context(cli), command)
    known = {"--help", "-h"} | {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    bad = [(where, f) for where, c, flags in INVOCATIONS if c == command for f in flags if f not in known]
    assert not bad, f"flags the command does not have: {bad}"


def test_the_invocation_check_can_fail(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text("```bash\ndriftloop serve --no-such-flag   # comment\n.venv/bin/driftloop frobnicate\n"
                   "└── x → driftloop   POST /v1/alerts\n```\nRun `driftloop demo --fast` once.\n")
    found = [(c, f) for _, c, f in documented_invocations([doc])]
    assert found == [("serve", ["--no-such-flag"]), ("frobnicate", []), ("demo", ["--fast"])]


def test_the_console_script_answers_help():
    exe = Path(sys.executable).parent / "driftloop"
    if not exe.exists():
        pytest.skip("driftloop console script not installed next to this Python")
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and all(c in proc.stdout for c in ("serve", "exporter", "demo"))


# -- the README ----------------------------------------------------------------------------------
def test_readme_is_a_front_page():
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    assert "make demo" in readme and "make test" in readme
    for target in re.findall(r"\]\((docs/[^)#\s]+)", readme):
        assert (REPO / target).is_file(), f"README links to missing {target}"
    assert "docs/" in readme
