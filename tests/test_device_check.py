"""bench/device_check.sh, the one prepared run of every GPU claim, on the CPU side: it parses, its plan
fits the 8 minutes a device run is sized for, and it refuses bad arguments. Running it needs a GPU."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "device_check.sh"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


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


def test_bad_arguments_are_refused_with_one_line(tmp_path):
    for args in (("--bogus",), ("--budget", "900"), ("--budget", "ten"), ("--out",)):
        proc = run(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("Error: "), (args, proc.stderr)
