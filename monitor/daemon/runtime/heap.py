"""The daemon's long-lived heap, frozen out of the garbage collector's way.

The check path imports torch, MLflow, Evidently, scikit-learn, SciPy and plotly: about 700,000
objects the cyclic collector walks on every full collection, although nearly all of them are
modules, classes and functions that live as long as the process. A full collection then holds the
GIL for about 0.8 s on the 2-core reference machine, stalling every request, and one runs after
each body of 1 MiB or more (:func:`monitor.ingest.memory.release` gives its memory back) and
whenever the collector's own thresholds say so.

``driftloop serve`` (``serve(freeze_heap=True)``) therefore moves what is alive to the collector's
permanent generation (:func:`gc.freeze`) twice: the startup heap once it answers requests
(:func:`freeze_now`), and, after the first check that had a champion to judge (:class:`HeapFreezer`),
the check path: :func:`warm_and_freeze` imports what that check did not (a report's plotly, the
registry's stores), collects, and freezes. A full collection afterwards walks only what was
allocated since (about 40,000 objects after a check, 41 ms). A daemon with no champion never pays
for the check path's imports. Reference counting still frees frozen objects; only a frozen object
that later becomes part of an unreachable cycle would stay, and what is alive then (modules, the
config, the stores, the champion and its reference) lives until a promotion at the earliest. The
figures are in docs/parts/daemon.md (``bench/bench_daemon.py --only webhook``).
"""
from __future__ import annotations

import gc
import importlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from monitor.daemon.runtime.moves import CheckReport

log = logging.getLogger(__name__)

# What a check, a report and a champion load import (found by importing after a check what was
# not there before it). tests/monitor/daemon/test_heap.py holds that a check adds little after these.
WARM_MODULES: tuple[str, ...] = (
    "pandas",
    "pyarrow.parquet",
    "sklearn.decomposition", "sklearn.ensemble", "sklearn.isotonic", "sklearn.linear_model", "sklearn.metrics",
    "sklearn.model_selection",
    "evidently.presets", "evidently.metrics",
    "plotly.graph_objects", "plotly.offline",
    "mlflow", "mlflow.artifacts", "mlflow.pyfunc", "mlflow.pytorch",
    "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.model_registry.sqlalchemy_store",
    "trainer", "trainer.champion_load", "trainer.registry",
    "monitor.champion_client",
    "monitor.drift.evaluate", "monitor.drift.runner", "monitor.drift.reports", "monitor.drift.summary",
    "monitor.drift.workspace", "monitor.drift.calibration", "monitor.drift.changepoint",
    "monitor.drift.embedding_methods", "monitor.drift.loss_estimation",
)


@dataclass(frozen=True)
class HeapFreeze:
    imported: int  # modules of WARM_MODULES imported (or already there)
    frozen: int  # objects in the permanent generation afterwards
    seconds: float
    failed: dict[str, str] = field(default_factory=dict)  # module -> why it did not import


def warm_and_freeze(modules: tuple[str, ...] = WARM_MODULES) -> HeapFreeze:
    """Import ``modules`` (one that fails is logged and skipped: an optional extra not installed),
    collect, and freeze everything alive. Process-wide; call once, in the daemon's own process."""
    started = time.monotonic()
    failed: dict[str, str] = {}
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a module the check may never need; the check reports its own
            failed[name] = f"{type(exc).__name__}: {exc}"
    frozen = _collect_and_freeze()
    result = HeapFreeze(len(modules) - len(failed), frozen, time.monotonic() - started, failed)
    log.info("heap: imported the check path (%d modules) and froze %d objects in %.1f s; a full garbage "
             "collection now walks %d", result.imported, result.frozen, result.seconds, len(gc.get_objects()))
    for name, why in failed.items():
        log.debug("heap: %s not imported: %s", name, why)
    return result


def _collect_and_freeze() -> int:
    """Collect cyclic garbage first (frozen, it would never be), then freeze everything alive;
    returns the objects frozen in all."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def freeze_now() -> int:
    """Freeze the startup heap; returns the objects frozen in all."""
    started = time.monotonic()
    frozen = _collect_and_freeze()
    log.info("heap: froze %d objects of the startup heap in %.2f s", frozen, time.monotonic() - started)
    return frozen


class HeapFreezer:
    """A check listener (``Daemon.after_check``): after the first check that had a champion,
    :func:`warm_and_freeze`, in the check's own thread. Not on a thread of its own: importing the
    check path beside the next check imported the same package from two threads, and Evidently's
    circular imports then failed the check ("partially initialized module"); checks never overlap.
    Never raises: an optimisation, never a reason for a check or the daemon to fail."""

    def __init__(self, modules: tuple[str, ...] = WARM_MODULES):
        self.modules = modules
        self.done = False

    def __call__(self, report: CheckReport) -> None:
        if self.done or report.outcome.champion_version is None:
            return
        self.done = True
        try:
            warm_and_freeze(self.modules)
        except Exception:  # noqa: BLE001 - see the class docstring
            log.exception("heap: freezing the check path failed; full garbage collections stay slow")
