"""docs/guide/images-text.md, run: every ```bash and ```python block, in page order, in a fresh folder
with the repository on PYTHONPATH (the page's entrypoint is examples.digits.model:Digits).

Conventions of the page, kept by this test: a block titled "Terminal 2" is a long-running command,
started in the background and stopped at the end; a ```yaml block titled with a file name is what
the reader writes to that file (written here, and loaded as a driftloop configuration); a ```python
block titled with a file name is a listing of the reader's module (written and compiled here, not
run: it imports torchvision, which driftloop does not install). The only
change made to the commands is the daemon's port (a free one instead of 8470); training is
shortened through the environment."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import load_config
from tests.docs.test_own_model_guide import FENCE, _commands, _run, _wait
from tests.support.services import free_port

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "guide" / "images-text.md"


def blocks() -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in FENCE.finditer(GUIDE.read_text())]


def _title(info: str) -> str | None:
    return info.split('title="', 1)[1].split('"', 1)[0] if 'title="' in info else None


def test_the_page_has_what_the_test_runs():
    found = blocks()
    langs = [lang for lang, _, _ in found]
    assert langs.count("bash") >= 4 and langs.count("python") == 6
    assert [_title(info) for lang, info, _ in found if lang == "python" and _title(info)] == ["my_model/pretrained.py"]
    assert [_title(info) for lang, info, _ in found if lang == "yaml"] == ["driftloop.yaml", "topics.yaml"]
    assert any(_title(info) == "Terminal 2" for _, info, _ in found)


def test_the_pages_configurations_load(tmp_path: Path):
    for lang, info, code in blocks():
        if lang == "yaml":
            (tmp_path / "c.yaml").write_text(code)
            cfg = load_config(tmp_path / "c.yaml", environ={})
            assert cfg.model.embedding_features, info


@pytest.mark.slow
def test_every_command_of_the_guide_runs(tmp_path: Path):
    port = free_port()
    bin_dir = tmp_path / "bin"  # `driftloop` and `python` on PATH, as in the reader's virtual environment
    bin_dir.mkdir()
    (bin_dir / "driftloop").write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import sys; from monitor.cli import "
                                       f"main; sys.exit(main(sys.argv[1:]))' \"$@\"\n")
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRIFTLOOP_", "MLFLOW_"))}
    env.update({"PATH": f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", "PYTHONPATH": str(REPO),
                "DRIFTLOOP_SERVER__PORT": str(port), "DRIFTLOOP_TRAINING__EPOCHS": "12",
                "DRIFTLOOP_TRAINING__THREADS": "1", "DRIFTLOOP_TRAINING__EXPORT__ONNX": "false",
                "DRIFTLOOP_LOGGING__LEVEL": "WARNING", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"})
    background: list[subprocess.Popen] = []
    outputs: dict[str, str] = {}
    try:
        for lang, info, code in blocks():
            code = code.replace("8470", str(port))
            if lang == "python" and _title(info):
                listing = tmp_path / str(_title(info))
                listing.parent.mkdir(parents=True, exist_ok=True)
                listing.write_text(code)
                compile(code, str(listing), "exec")
            elif lang == "python":
                outputs[code] = _run([sys.executable, "-c", code], tmp_path, env)
            elif lang == "bash" and _title(info) == "Terminal 2":
                background.append(subprocess.Popen(["bash", "-c", f"exec {code.strip()}"], cwd=tmp_path, env=env,
                                                   stdout=open(tmp_path / "serve.log", "wb"), stderr=subprocess.STDOUT))
                _wait(f"http://127.0.0.1:{port}/healthz", background[-1], tmp_path / "serve.log")
            elif lang == "bash":
                for command in _commands(code):
                    outputs[command] = _run(["bash", "-euo", "pipefail", "-c", command], tmp_path, env)
            elif lang == "yaml" and _title(info):
                (tmp_path / str(_title(info))).write_text(code)
    finally:
        for proc in background:
            proc.terminate()
            proc.wait(30)
    shapes = next(out for code, out in outputs.items() if "entry.embed" in code)
    assert "[3, 1, 8, 8]" in shapes and "[3, 10]" in shapes and "[3, 32]" in shapes
    assert "image_emb" in outputs["driftloop check"], outputs["driftloop check"]
    assert "driftloop-topics" in outputs["DRIFTLOOP_CONFIG=topics.yaml driftloop train --data topics.parquet"]
