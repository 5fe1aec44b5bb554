"""The check path frozen by ``driftloop serve`` after its first check with a champion
(monitor/daemon/runtime/heap.py): after it, a real check on a real champion leaves the garbage
collector little to walk (tests/monitor/daemon/test_serve.py checks that the CLI does it). Each case runs in its own
interpreter: freezing is process-wide, and this one has imported everything already."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.monitor.daemon.conftest import SMALL

SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from monitor.config import load_config
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.runtime.heap import WARM_MODULES, warm_and_freeze
    from tests.monitor.daemon.conftest import Traffic

    cfg = load_config(path=None, environ={}, overrides=json.loads(sys.argv[1]))
    daemon = Daemon(cfg, gpu=False)
    try:
        frozen = warm_and_freeze(WARM_MODULES if sys.argv[2] == "warm" else ())
        Traffic(cfg, daemon.store).send(600, seed=5)
        report = daemon.run_check_now()
    finally:
        daemon.stop()
    gc.collect()
    print(json.dumps({"frozen": frozen.frozen, "failed": frozen.failed, "tracked": len(gc.get_objects()),
                      "status": report.outcome.status}))
""")


def _after_a_check(cfg, mode: str) -> dict:
    overrides = {**SMALL, "home": str(cfg.home)}
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(overrides), mode], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_after_the_freeze_a_check_leaves_the_collector_little_to_walk(make_config, mode):
    cfg = make_config()
    seen = _after_a_check(cfg, mode)
    print(f"\n{mode}: {seen}")
    assert seen["status"] == "ok" and seen["failed"] == {}
    if mode == "warm":
        # The check path's modules were imported and frozen: what the check itself adds (its own
        # lazy imports, caches, the champion) is a small part of what a full collection skips.
        assert seen["frozen"] > 300_000
        assert seen["tracked"] < 0.15 * seen["frozen"], seen
    else:
        # The control: frozen before the check path was imported, the check's imports stay in the
        # collector's way (this is what WARM_MODULES is for; if it holds, the measure above can fail).
        assert seen["tracked"] > seen["frozen"], seen

