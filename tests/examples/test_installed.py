"""The examples ship in driftloop's wheel (the ``examples`` package): ``driftloop demo --example
digits`` and a configuration's ``training.entrypoint: examples.digits.model:Digits`` work from an
installed driftloop, in a folder that is not a checkout. The wheel is built offline from a copy of
the sources (so no build folder of the checkout leaks stale files into it), unpacked, and put on
``PYTHONPATH`` alone; the repository is on no path of the child processes."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_FILES = ("examples/__init__.py", "examples/stream.py", "examples/digits/__init__.py",
                 "examples/digits/data.py", "examples/digits/model.py", "examples/digits/loop.py",
                 "examples/digits/service.py", "examples/digits/driftloop.yaml", "examples/text/loop.py",
                 "examples/text/encoder.py", "examples/text/corpus.py", "examples/text/service.py")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for package in ("monitor", "trainer", "examples"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", str(src), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    return next(out.glob("driftloop-*.whl"))


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel's contents, as pip would lay them out in site-packages."""
    site = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    return site


def _env(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DRIFTLOOP_", "PYTHONPATH"))}
    return {**env, "PYTHONPATH": str(site), "PYTHONUNBUFFERED": "1", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def test_the_wheel_holds_the_examples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(EXAMPLE_FILES) <= names, sorted(set(EXAMPLE_FILES) - names)
    assert not any("__pycache__" in n or n.startswith(("tests/", "bench/")) for n in names)


def test_the_entrypoint_imports_from_the_installed_package(installed, tmp_path):
    """From a folder without ``examples/``: the digits configuration loads and its entrypoint
    resolves to the installed package, not the checkout's."""
    script = ("import examples, monitor, sys\n"
              "from pathlib import Path\n"
              "from monitor.config import load_config\n"
              "from trainer.entrypoint import load_entrypoint\n"
              "site = Path(sys.argv[1]).resolve()\n"
              "assert Path(examples.__file__).resolve().is_relative_to(site), examples.__file__\n"
              "assert Path(monitor.__file__).resolve().is_relative_to(site), monitor.__file__\n"
              "cfg = load_config(site / 'examples/digits/driftloop.yaml', environ={})\n"
              "user = load_entrypoint(cfg.training.entrypoint)\n"
              "import examples.digits.loop as loop\n"
              "assert loop.ENTRYPOINT == cfg.training.entrypoint\n"
              "print('entrypoint', cfg.training.entrypoint, type(user).__module__)\n")
    ran = subprocess.run([sys.executable, "-c", script, str(installed)], cwd=tmp_path, env=_env(installed),
                         capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "entrypoint examples.digits.model:Digits examples.digits.model" in ran.stdout


@pytest.mark.slow
def test_the_digits_demo_starts_from_an_installed_driftloop(installed, tmp_path):
    """``driftloop demo --example digits --fast`` from an empty folder: it writes the images and
    starts training the CNN through the installed entrypoint (stopped there: the whole demo is
    tests/examples/test_digits_loop.py's)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "demo", "--example", "digits", "--fast",
                             "--home", str(tmp_path / "home"), "--port", "0"], cwd=elsewhere, env=_env(installed),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip())
            if line.startswith("[1/4]"):
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    text = "\n".join(lines)
    assert any(line.startswith("[1/4] wrote") and "examples.digits.model:Digits" in line for line in lines), text
    assert "Error" not in text and "Traceback" not in text, text
    assert (tmp_path / "home" / "digits" / "index.csv").exists()
