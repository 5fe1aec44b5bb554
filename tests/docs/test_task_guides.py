"""docs/guide/multiclass.md and docs/guide/regression.md, run: every block in page order, in a fresh
folder, by the conventions of test_own_model_guide.py (whose helpers this reuses): ```python and
```bash blocks run (a block titled "Terminal 2" in the background), ```yaml blocks are excerpts of
what ``init`` wrote, checked line by line. Two more, for these pages: a ```yaml block titled
"append to driftloop.yaml" is appended to the written file, and a ```json block titled "Answer" is
what the command before it prints (compared as JSON), so the error answers shown are real."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_own_model_guide import FENCE, _commands, _matches_written_config, _run, _wait
from tests.support.services import free_port

REPO = Path(__file__).resolve().parents[2]
PAGES = {"multiclass": REPO / "docs" / "guide" / "multiclass.md",
         "regression": REPO / "docs" / "guide" / "regression.md"}
# What each page's `driftloop check` must show: its task's metrics, as the page says.
CHECK_SHOWS = {"multiclass": ["macro_f1", "weighted_f1", "billing", "proba_bug"],
               "regression": ["mae", "rmse", "r2", "mape", r"price \(labels\)"]}


def blocks(page: Path) -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in FENCE.finditer(page.read_text())]


@pytest.mark.parametrize("task", list(PAGES))
def test_the_page_has_what_the_test_runs(task):
    found = blocks(PAGES[task])
    langs = [lang for lang, _, _ in found]
    assert langs.count("python") == 2 and langs.count("bash") >= 5 and langs.count("yaml") == 2
    assert {info for _, info, _ in found} >= {'title="Terminal 2"', 'title="append to driftloop.yaml"',
                                              'title="Answer"'}
    assert set(langs) <= {"python", "bash", "yaml", "json"}  # every block is one the test runs or checks


@pytest.mark.slow
@pytest.mark.parametrize("task", list(PAGES))
def test_every_command_of_the_guide_runs(task, tmp_path: Path):
    port = free_port()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "driftloop").write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from monitor.cli import "
                                       f"main; sys.exit(main(sys.argv[1:]))' \"$@\"\n")
    (bin_dir / "driftloop").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRIFTLOOP_", "MLFLOW_"))}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", "PYTHONPATH": str(REPO),
                "DRIFTLOOP_SERVER__PORT": str(port), "DRIFTLOOP_TRAINING__EPOCHS": "8",
                "DRIFTLOOP_TRAINING__THREADS": "1", "DRIFTLOOP_LOGGING__LEVEL": "WARNING"})
    background: list[subprocess.Popen] = []
    outputs: dict[str, str] = {}
    page = blocks(PAGES[task])
    try:
        for i, (lang, info, code) in enumerate(page):
            code = code.replace("8470", str(port))
            following = page[i + 1] if i + 1 < len(page) else ("", "", "")
            answer = following[2] if following[:2] == ("json", 'title="Answer"') else None
            if lang == "python":
                _run([sys.executable, "-c", code], tmp_path, env)
            elif lang == "bash" and 'title="Terminal 2"' in info:
                background.append(subprocess.Popen(["bash", "-c", f"exec {code.strip()}"], cwd=tmp_path, env=env,
                                                   stdout=open(tmp_path / "serve.log", "wb"), stderr=subprocess.STDOUT))
                _wait(f"http://127.0.0.1:{port}/healthz", background[-1], tmp_path / "serve.log")
            elif lang == "bash":
                commands = _commands(code)
                for k, command in enumerate(commands):
                    out = outputs[command] = _run(["bash", "-euo", "pipefail", "-c", command], tmp_path, env)
                    if answer is not None and k == len(commands) - 1:
                        assert json.loads(out) == json.loads(answer), out  # the answer the page shows
                    elif command.startswith("curl"):
                        assert '"stored":1' in out.replace(" ", ""), out  # curl -s exits 0 on HTTP errors
            elif lang == "yaml" and 'title="append to driftloop.yaml"' in info:
                with open(tmp_path / "driftloop.yaml", "a") as config:
                    config.write(code)
            elif lang == "yaml":
                _matches_written_config(code, (tmp_path / "driftloop.yaml").read_text())
            elif lang == "json":
                assert 'title="Answer"' in info and page[i - 1][0] == "bash"  # checked with the command before it
    finally:
        for proc in background:
            proc.terminate()
            proc.wait(30)
    check = outputs["driftloop check"]
    for word in CHECK_SHOWS[task]:
        assert re.search(rf"\b{word}", check), f"{word!r} not in:\n{check}"
