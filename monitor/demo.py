"""``driftloop demo``: the whole loop on a laptop, with the real parts.

baseline → live traffic → drift → alert → incremental retraining → promotion → recovery:

1. a synthetic tabular dataset (``trainer.synthetic``; nothing is downloaded) trains the baseline,
   which MLflow registers as ``champion``;
2. the daemon (:class:`monitor.daemon.Daemon`) serves the real HTTP API on 127.0.0.1 and runs its
   scheduled check job on a short interval;
3. a "model service" scores traffic with the current champion loaded from MLflow and sends
   predictions through the real ingestion API (:class:`monitor.client.DriftloopClient`); the true
   labels follow one batch later;
4. after ``ticks_before`` batches the traffic drifts (covariate and concept drift); the check sees the
   accuracy drop, the alert policy opens an incident, the retrain worker fine-tunes a challenger in a
   child process, the promotion gate moves ``champion``, the service picks the new champion up and
   accuracy recovers.

Each batch waits for the next scheduled check that covers it, so the printed timeline has one row
per batch (what it prints and returns: demo_timeline.py). The run returns a :class:`DemoResult` whose
timeline the end-to-end test asserts on. ``driftloop demo --models 2`` (two models in one daemon, drift
in one of them) is :mod:`monitor.demo_models`, built on this module's settings and server.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig, load_config
from monitor.demo_timeline import DemoResult, Events, TimelineRow, fmt, print_summary, summarise
from monitor.errors import UserInputError

if TYPE_CHECKING:
    from trainer.outcomes import Champion

log = logging.getLogger(__name__)
MARKER = ".driftloop-demo"


@dataclass(frozen=True)
class DemoPlan:
    baseline_rows: int = 8000
    batch: int = 1500            # predictions per batch (one batch per check)
    ticks_before: int = 4        # stationary batches before the drift
    ticks_after: int = 14        # batches after the drift starts (retraining happens among them)
    recovery_ticks: int = 3      # batches served by the new champion needed before the demo may end
    check_interval: float = 1.5  # seconds between scheduled checks
    covariate_shift: float = 1.0
    concept_shift: float = 1.0
    seed: int = 7

    @classmethod
    def fast(cls) -> "DemoPlan":
        return cls(baseline_rows=6000, batch=1200, ticks_before=3, ticks_after=12, recovery_ticks=2,
                   check_interval=1.0)


def demo_settings(home: Path, port: int, plan: DemoPlan) -> dict[str, Any]:
    """The short intervals and small sizes the demo needs (``driftloop demo --models 2`` too)."""
    return {
        "home": str(home),
        "server": {"port": port},
        "exporter": {"simulate": 2},  # GPU panels have data on a laptop too
        "drift": {"interval_seconds": plan.check_interval, "window_size": 2 * plan.batch,
                  "min_labels": int(plan.batch * 0.8)},
        # Two bad windows in a row before retraining: the retrain then sees two batches of the new concept.
        "alerts": {"sustained_windows": 2, "cooldown_seconds": 0, "retrain_rows": 2 * plan.batch},
        "training": {"epochs": 20, "retrain_epochs": 20, "checkpoint_every_minutes": 60},
    }


def demo_config(home: Path, port: int, plan: DemoPlan, base: DriftloopConfig | None = None) -> DriftloopConfig:
    """Embedded defaults with the short intervals and small sizes the demo needs."""
    overrides = demo_settings(home, port, plan)
    if base is None:
        return load_config(path=None, environ={}, overrides=overrides)
    from monitor.config import _merge
    return DriftloopConfig.model_validate(_merge(base.model_dump(mode="json"), overrides))


def prepare_home(home: Path) -> None:
    """A fresh demo folder: one we made before is emptied, anything else is refused."""
    if home.exists() and any(home.iterdir()):
        if not (home / MARKER).exists():
            raise UserInputError(f"{home} exists and is not a driftloop demo folder; choose another --home")
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / MARKER).write_text("made by driftloop demo; emptied on the next run\n")


class ApiServer:
    """uvicorn in a thread, bound to 127.0.0.1."""

    def __init__(self, app: Any, host: str, port: int):
        import uvicorn
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                                    access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, name="demo-api", daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the demo API server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class ModelService:
    """Stands in for the user's model service: scores with the current champion from MLflow."""

    def __init__(self, cfg: DriftloopConfig):
        self.cfg = cfg
        self.champion: Champion | None = None

    def refresh(self) -> str:
        from trainer.registry import load_champion
        self.champion = champion = load_champion(self.cfg)  # cached by version; cheap when unchanged
        return champion.version

    def score(self, frame: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
        assert self.champion is not None, "refresh() first"
        features = frame[self.cfg.model.feature_names]
        scores = np.asarray(self.champion.predict_proba(features), dtype=np.float64)
        out = features.copy()
        out.insert(0, "id", ids)
        out[self.cfg.model.score] = scores
        out[self.cfg.model.prediction] = (scores >= self.cfg.model.threshold).astype(int)
        return out


def wait_for_check(daemon: Any, after_id: int | None, not_before: float, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = daemon.controller.checklog.last()
        if last and (after_id is None or last["id"] > after_id) and last["ts"] >= not_before:
            return last
        time.sleep(0.1)
    return None


def run_demo(cfg: DriftloopConfig, plan: DemoPlan, *, echo: Callable[[str], None] = print,
             keep_serving: bool = False) -> DemoResult:
    import trainer
    from monitor.client import DriftloopClient
    from monitor.daemon.runtime.daemon import Daemon

    started = time.monotonic()
    make = trainer.make_dataset
    echo(f"driftloop demo: everything lives in {cfg.home.resolve()}")
    echo(f"[1/4] training the baseline on {plan.baseline_rows} synthetic rows ...")
    base = trainer.train_baseline(cfg, make(plan.baseline_rows, seed=plan.seed), trigger="manual")
    echo(f"      registered {cfg.registered_model_name} v{base.version} as champion "
         f"(accuracy {base.metrics.get('accuracy', float('nan')):.3f}, ROC AUC "
         f"{base.metrics.get('roc_auc', float('nan')):.3f})")

    daemon = Daemon(cfg)
    server = ApiServer(daemon.build_app(), cfg.server.host, cfg.server.port)
    url = f"http://{cfg.server.host}:{cfg.server.port}"
    server.start()
    daemon.start(scheduler=True, check_interval=plan.check_interval)
    echo(f"[2/4] daemon serving {url} (API docs {url}/docs, metrics {url}/metrics); "
         f"checks every {plan.check_interval:g} s over the last {cfg.drift.window_size} predictions")
    echo(f"[3/4] replaying traffic: {plan.ticks_before} stationary batches of {plan.batch}, then drift "
         f"(covariate {plan.covariate_shift:g}, concept {plan.concept_shift:g}); labels arrive one batch late")
    header = f"{'batch':>5} {'phase':<10} {'served':>6} {'check':>5} {'base':>4} {'rows':>5} {'labelled':>8} " \
             f"{'accuracy':>8} {'roc_auc':>7} {'drift':>5}  events"
    echo(header)
    echo("-" * len(header))

    service = ModelService(cfg)
    events = Events(daemon)
    client = DriftloopClient(url, token=cfg.server.token)
    timeline: list[TimelineRow] = []
    served: dict[int, str] = {}
    pending_labels: list[pd.DataFrame] = []
    last_check_id = None
    promoted: list[str] = []
    total = plan.ticks_before + plan.ticks_after
    try:
        tick = 0
        while True:
            drifted = tick >= plan.ticks_before
            data = make(plan.batch, seed=plan.seed * 1000 + tick,
                        covariate_shift=plan.covariate_shift if drifted else 0.0,
                        concept_shift=plan.concept_shift if drifted else 0.0)
            version = service.refresh()
            served[tick] = version
            ids = [f"b{tick}-{i}" for i in range(len(data))]
            client.log_predictions(service.score(data, ids), model_version=version)
            for labels in pending_labels:
                client.log_labels(labels)
            pending_labels = [pd.DataFrame({"id": ids, "label": data[cfg.model.target].to_numpy()})]
            sent_at = time.time()
            check = wait_for_check(daemon, last_check_id, sent_at, timeout=max(60.0, 20 * plan.check_interval))
            if check is not None:
                last_check_id = check["id"]
            new_events = events.new()
            promoted_now = [e for e in new_events if "promoted" in e]
            row = TimelineRow(
                tick=tick, phase="drifted" if drifted else "stationary", served_by=version,
                check_id=check["id"] if check else None,
                champion_version=check.get("champion_version") if check else None,
                window_rows=(check or {}).get("window_rows") or 0,
                labelled_rows=(check or {}).get("labelled_rows") or 0,
                accuracy=check.get("accuracy") if check else None, roc_auc=check.get("roc_auc") if check else None,
                drift_share=check.get("drift_share") if check else None, events=new_events,
                labelled_tick=tick - 1 if tick > 0 else None)
            timeline.append(row)
            echo(f"{tick:>5} {row.phase:<10} {'v' + version:>6} {row.check_id or '-':>5} "
                 f"{'v' + str(row.champion_version) if row.champion_version else '-':>4} {row.window_rows:>5} "
                 f"{row.labelled_rows:>8} {fmt(row.accuracy):>8} {fmt(row.roc_auc):>7} "
                 f"{fmt(row.drift_share, '.2f'):>5}  "
                 + ("; ".join(new_events) if new_events else ""))
            if promoted_now or (service.champion and service.champion.version != base.version
                                and service.champion.version not in promoted):
                v = service.refresh()
                if v != base.version and v not in promoted:
                    promoted.append(v)
            tick += 1
            recovered = sum(1 for t, v in served.items() if promoted and v == promoted[-1] and t >= 1)
            if tick >= total and (recovered >= plan.recovery_ticks + 1 or tick >= total + 10):
                break
        daemon.wait_for_retrain(120)
    finally:
        client.close()
        if not keep_serving:
            daemon.stop()
            server.stop()

    result = summarise(cfg, plan, timeline, served, base.version, promoted, time.monotonic() - started, url)
    print_summary(cfg, result, echo)
    if keep_serving:
        keep_serving_until_interrupted(url, echo, daemon.stop, server.stop)
    return result


def keep_serving_until_interrupted(url: str, echo: Callable[[str], None], *stops: Callable[[], object]) -> None:
    """``--keep-serving``: serve until Ctrl-C, then call ``stops`` in order."""
    echo(f"--keep-serving: the daemon keeps serving {url}; Ctrl-C stops it.")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for stop in stops:
            stop()
