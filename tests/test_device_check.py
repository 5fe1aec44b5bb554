"""bench/device_check.sh, the one prepared run of every GPU claim, on the CPU side: it parses, its plan
fits the 8 minutes a device run is sized for, it refuses bad arguments, --pack's plan reads driftloop's
dependencies from pyproject.toml, and --wheels unpacks an archive like the one --pack writes. Running
the checks needs a GPU, and --pack itself the network: nothing here downloads anything."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "device_check.sh"


def run(*args: str, env: dict[str, str] | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, timeout=30).returncode == 0


def test_the_dry_run_writes_a_plan_that_fits_in_eight_minutes(tmp_path):
    proc = run("--dry-run", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    plan = (tmp_path / "device_check.md").read_text()
    rows = dict(re.findall(r"^\| (\w+) \| (\d+) \| `", plan, re.M))
    assert set(rows) == {"wheels", "gpu_tests", "amp_large", "amp_small", "exporter_load"}
    assert sum(map(int, rows.values())) <= 480
    assert "bench_trainer.py --only amp --cuda" in plan and "bench_exporter.py --nvml --load" in plan
    assert "tests/monitor/gpu/test_gpm_real.py" in plan and "tests/trainer/test_gpu.py" in plan  # found by marker


def test_the_plan_unpacks_an_archive_or_installs_a_folder_of_wheels(tmp_path):
    proc = run("--dry-run", "--out", str(tmp_path), "--wheels", "pack.tar.xz")
    assert proc.returncode == 0, proc.stderr
    wheels = re.search(r"^\| wheels \| \d+ \| `(.*)` \|$", (tmp_path / "device_check.md").read_text(), re.M).group(1)
    assert "pack.tar.xz" in wheels and "pip install" not in wheels
    assert "tar -xJf" in wheels or "tarfile" in wheels  # xz's tar, or Python's where xz is missing
    proc = run("--dry-run", "--out", str(tmp_path), "--wheels", "wheels")
    assert proc.returncode == 0, proc.stderr
    plan = (tmp_path / "device_check.md").read_text()
    assert "pip install --quiet --no-index --no-deps --no-compile --target $SITE" in plan


def test_bad_arguments_are_refused_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("not wheels")
    for args in (("--bogus",), ("--budget", "900"), ("--budget", "ten"), ("--out",), ("--pack",), ("--wheels",),
                 ("--wheels", str(tmp_path / "missing.tar.xz")), ("--wheels", str(tmp_path / "empty")),
                 ("--wheels", str(tmp_path / "notes.txt")),
                 ("--pack", str(tmp_path / "p.tar.xz"), "--wheels", str(tmp_path / "empty"))):
        proc = run("--out", str(tmp_path / "out"), *args)
        assert proc.returncode == 2 and proc.stderr.startswith("Error: "), (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, (args, proc.stderr)
        assert not (tmp_path / "out").exists(), args  # refused before anything was written


def test_the_pack_plan_reads_the_dependencies_from_pyproject_and_pins_this_venv(tmp_path):
    proc = run("--pack", str(tmp_path / "pack.tar.xz"), "--dry-run", "--python", sys.executable,
               env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    reqs = re.search(r"^requirements.*:\n((?:  .*\n)+)", proc.stdout, re.M).group(1).split()
    names = {re.match(r"[A-Za-z0-9._-]+", r).group().lower() for r in reqs}
    assert {"mlflow", "evidently", "fastapi", "pandas", "pydantic", "httpx", "onnxruntime"} <= names
    assert "pandas>=2.2,<3" in reqs and "mlflow==3.17.2" in reqs
    # what the device has is not packed
    assert not names & {"torch", "numpy", "pyarrow", "prometheus-client", "nvidia-ml-py", "pytest"}
    assert f"pandas=={metadata.version('pandas')}" in proc.stdout  # the version installed here
    assert "faker" in proc.stdout.split("not imported on this run's path:")[1]
    assert not (tmp_path / "pack.tar.xz").exists() and not list(tmp_path.glob("driftloop-pack.*"))


def fake_pack(path: Path) -> None:
    """An archive laid out as --pack writes one: a site folder with a module and the list of what it holds."""
    with tarfile.open(path, "w:xz") as tar:
        for name, text in (("./dc_fake_module/__init__.py", "VALUE = 42\n"),
                           ("./dc_fake_module-1.0.dist-info/METADATA", "Name: dc-fake-module\nVersion: 1.0\n"),
                           ("./DRIFTLOOP_PACK.txt", "dc-fake-module==1.0\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_wheels_unpacks_a_pack_archive_into_a_temporary_site_folder(tmp_path):
    fake_pack(tmp_path / "pack.tar.xz")
    out = tmp_path / "out"
    # An interpreter without site-packages (so the machine probe and any bench fail at once), and a budget
    # that the wheels step (40 s) fits in and the GPU tests (170 s) do not: they are skipped, and say so.
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    python.chmod(0o755)
    proc = run("--wheels", str(tmp_path / "pack.tar.xz"), "--out", str(out), "--budget", "59",
               "--python", str(python), env={"TMPDIR": str(tmp_path)}, timeout=120)
    assert proc.returncode == 1, proc.stderr  # the skipped steps fail the run
    figures = (out / "device_check.md").read_text()
    assert re.search(r"^## wheels: passed", figures, re.M), figures
    assert re.search(r"^## gpu_tests: skipped", figures, re.M), figures
    log = (out / "device_check_logs" / "wheels.log").read_text()
    assert "dc-fake-module==1.0" in log  # what the pack holds, as the figures file shows it
    site = Path(re.search(r"unpacked 1 distributions into (\S+?):", log).group(1))
    assert site.parent == tmp_path and site.name.startswith("driftloop-site.")
    assert (site / "dc_fake_module" / "__init__.py").read_text() == "VALUE = 42\n"
    probe = subprocess.run([sys.executable, "-c", "import dc_fake_module; print(dc_fake_module.VALUE)"],
                           env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=30)
    assert probe.stdout.strip() == "42", probe.stderr
