"""docs/guide/own-model.md, run: every ```bash and ```python block, in page order, in a fresh folder.

Conventions of the page, kept by this test: a block titled "Terminal 2" is a long-running command,
started in the background and stopped at the end; ```yaml blocks are excerpts of what ``init``
writes (checked line by line against the real file, bar the counted details in comments). The only
change made to the commands is the daemon's port (a free one instead of 8470), so runs in parallel
do not collide; training is shortened through the environment."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.services import free_port, wait_answering

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guide" / "own-model.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)


def blocks() -> list[tuple[str, str, str]]:
    """``(language, fence info after the language, code)`` in page order."""
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in FENCE.finditer(GUIDE.read_text())]


def test_the_page_has_what_the_test_runs():
    langs = [lang for lang, _, _ in blocks()]
    assert langs.count("bash") >= 5 and langs.count("python") == 2 and "yaml" in langs
    assert any('title="Terminal 2"' in info for _, info, _ in blocks())


@pytest.mark.slow
def test_every_command_of_the_guide_runs(tmp_path: Path):
    port = free_port()
    bin_dir = tmp_path / "bin"  # `driftloop` on PATH, as after `pip install driftloop`
    bin_dir.mkdir()
    (bin_dir / "driftloop").write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from monitor.cli import "
                                       f"main; sys.exit(main(sys.argv[1:]))' \"$@\"\n")
    (bin_dir / "driftloop").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRIFTLOOP_", "MLFLOW_"))}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", "PYTHONPATH": str(REPO),
                "DRIFTLOOP_SERVER__PORT": str(port), "DRIFTLOOP_TRAINING__EPOCHS": "8",
                "DRIFTLOOP_TRAINING__RETRAIN_EPOCHS": "6", "DRIFTLOOP_TRAINING__THREADS": "1",
                "DRIFTLOOP_LOGGING__LEVEL": "WARNING"})
    background: list[subprocess.Popen] = []
    outputs: dict[str, str] = {}
    try:
        for lang, info, code in blocks():
            code = code.replace("8470", str(port))
            if lang == "python":
                _run([sys.executable, "-c", code], tmp_path, env)
            elif lang == "bash" and 'title="Terminal 2"' in info:
                background.append(subprocess.Popen(["bash", "-c", f"exec {code.strip()}"], cwd=tmp_path, env=env,
                                                   stdout=open(tmp_path / "serve.log", "wb"), stderr=subprocess.STDOUT))
                _wait(f"http://127.0.0.1:{port}/healthz", background[-1], tmp_path / "serve.log")
            elif lang == "bash":
                for command in _commands(code):
                    outputs[command] = _run_command(command, tmp_path, env, outputs)
            elif lang == "yaml":
                _matches_written_config(code, (tmp_path / "driftloop.yaml").read_text())
    finally:
        for proc in background:
            proc.terminate()
            proc.wait(30)
    assert "missing" in outputs["driftloop check"] and "monthly_charges" in outputs["driftloop check"]
    assert "champion     v" in outputs["driftloop status"]


def _commands(code: str) -> list[str]:
    """Shell commands of a block: a line at column 0 and the indented lines that continue it."""
    commands: list[str] = []
    for line in code.splitlines():
        if line.startswith((" ", "\t")) and commands:
            commands[-1] += "\n" + line
        elif line.strip() and not line.startswith("#"):
            commands.append(line)
    return commands


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{argv[-1][:200]}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _run_command(command: str, cwd: Path, env: dict[str, str], earlier: dict[str, str]) -> str:
    if command == "driftloop rollback" and not earlier.get("driftloop retrain", "").startswith("PROMOTED"):
        # The page rolls back "after a promotion": without one there is nothing to go back to.
        proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and "has no previous champion" in proc.stderr, proc.stderr
        return proc.stdout
    out = _run(["bash", "-euo", "pipefail", "-c", command], cwd, env)
    if command.startswith("curl"):
        assert '"stored":1' in out.replace(" ", ""), out  # curl -s exits 0 on HTTP errors
    return out


def _wait(url: str, proc: subprocess.Popen, log: Path) -> None:
    wait_answering(url, proc, lambda: log.read_text()[-3000:], 90, name="serve")


def _matches_written_config(excerpt: str, written: str) -> None:
    """Each line of the page's excerpt is in the written file (comments compared up to numbers)."""
    def norm(line: str) -> str:
        return re.sub(r"\d+", "N", line.rstrip())
    lines = {norm(line) for line in written.splitlines()}
    for line in excerpt.splitlines():
        assert norm(line) in lines, f"{line!r} is not what `driftloop init` writes:\n{written}"
