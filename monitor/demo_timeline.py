"""What ``driftloop demo`` prints and returns: a :class:`TimelineRow` per batch (its events column
from the daemon's incidents), and the :class:`DemoResult` with its printed summary."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from monitor.config import DriftloopConfig


@dataclass
class TimelineRow:
    tick: int
    phase: str                  # "stationary" or "drifted"
    served_by: str              # champion version that scored this batch
    check_id: int | None
    champion_version: str | None  # the baseline the check compared against
    window_rows: int
    labelled_rows: int
    accuracy: float | None
    roc_auc: float | None
    drift_share: float | None
    events: list[str] = field(default_factory=list)
    labelled_tick: int | None = None  # the batch whose labels the window's labelled part holds


@dataclass
class DemoResult:
    home: Path
    url: str
    timeline: list[TimelineRow]
    baseline_version: str
    final_champion: str | None
    promoted_versions: list[str]
    alerts: list[str]
    pre_drift_accuracy: float | None
    recovered_accuracy: float | None
    seconds: float


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "   -  " if x is None else format(x, spec)


class Events:
    """New incident events and retrain outcomes since the last call, as one-line strings."""

    SHOWN = {"opened", "firing", "retraining", "promoted", "rejected", "failed", "resolved"}

    def __init__(self, daemon: Any):
        self.daemon = daemon
        self.seen: set[tuple] = set()

    def new(self) -> list[str]:
        out = []
        incidents = self.daemon.controller.incidents
        for inc in reversed(incidents.recent(10)):
            for ev in incidents.events(inc.id):
                key = (inc.id, ev.get("id"), ev.get("ts"), ev.get("kind"), ev.get("message"))
                if key in self.seen:
                    continue
                self.seen.add(key)
                kind, message = ev.get("kind"), ev.get("message") or ""
                if kind in self.SHOWN:
                    message = message[len(kind) + 2:] if message.startswith(f"{kind}: ") else message
                    out.append(f"{inc.id[:8]} {kind}: {_short(message)}")
        return out


def _short(message: str, limit: int = 110) -> str:
    message = message.split(" (reference accuracy")[0]
    return message if len(message) <= limit else message[: limit - 1] + "…"


def summarise(cfg, plan, timeline, served, baseline_version, promoted, seconds, url) -> DemoResult:
    # A window's labelled part is the previous batch: attribute each check to the model that served it.
    pre = [r.accuracy for r in timeline
           if r.accuracy is not None and r.labelled_tick is not None and r.labelled_tick < plan.ticks_before]
    rec = [r.accuracy for r in timeline
           if r.accuracy is not None and promoted and r.labelled_tick is not None
           and served.get(r.labelled_tick) == promoted[-1]]
    alerts = [e for r in timeline for e in r.events if "opened" in e or "firing" in e]
    return DemoResult(home=cfg.home, url=url, timeline=timeline, baseline_version=baseline_version,
                      final_champion=promoted[-1] if promoted else baseline_version, promoted_versions=promoted,
                      alerts=alerts, pre_drift_accuracy=float(np.mean(pre)) if pre else None,
                      recovered_accuracy=float(np.mean(rec)) if rec else None, seconds=seconds)


def print_summary(cfg: DriftloopConfig, r: DemoResult, echo: Callable[[str], None]) -> None:
    home = cfg.home.resolve()
    echo("[4/4] summary")
    echo(f"      accuracy before the drift {fmt(r.pre_drift_accuracy)}; after recovery {fmt(r.recovered_accuracy)}"
         f"; champion v{r.baseline_version} -> v{r.final_champion}; {len(r.alerts)} alert event(s); {r.seconds:.0f} s")
    echo("Where to look:")
    from trainer.story import experiment_link
    echo(f"  MLflow runs and versions:  mlflow ui --backend-store-uri {cfg.tracking_uri} --port 5000")
    echo(f"                             then open {experiment_link(cfg)}")
    echo(f"  Evidently reports (HTML):  {(home / 'reports')}")
    echo(f"  Status and one check now:  DRIFTLOOP_HOME={home} driftloop status   (and ... driftloop check)")
    echo("  Prometheus + Grafana:      GF_ADMIN_PASSWORD=... docker compose up  (then http://127.0.0.1:3000)")


# -- driftloop demo --models 2 ------------------------------------------------------------------
@dataclass
class ModelTick:
    """One model's part of a batch row of ``driftloop demo --models 2``."""
    served_by: str                 # champion version that scored this model's batch
    check_id: int | None
    metric: float | None           # the task's primary metric (accuracy, MAE) over the window's labels
    drift_share: float | None
    events: list[str] = field(default_factory=list)


@dataclass
class ModelOutcome:
    """What happened to one model over the run."""
    name: str
    task: str
    metric: str                    # how a person reads its primary metric ("accuracy", "MAE")
    drifted: bool                  # whether its traffic drifted
    baseline_version: str
    final_champion: str
    promoted_versions: list[str]
    incidents: list[tuple[str, str]]  # (reason, state) of each incident, oldest first
    retrains: list[str]            # each retrain's outcome, oldest first
    before: float | None           # its metric over the checks labelled before the drift
    end: float | None              # over the last checks of the run


@dataclass
class ModelsResult:
    home: Path
    url: str
    ticks: list[dict[str, ModelTick]]   # per batch: model name -> its part
    models: dict[str, ModelOutcome]
    seconds: float


def print_models_summary(cfg: DriftloopConfig, result: ModelsResult, echo: Callable[[str], None],
                         config_file: Path) -> None:
    echo("[4/4] summary")
    for m in result.models.values():
        story = (f"{len(m.incidents)} incident(s) ({', '.join(f'{r}: {st}' for r, st in m.incidents)}), retrains: "
                 f"{', '.join(m.retrains) or 'none'}" if m.incidents else "no incident, no retrain")
        echo(f"      {m.name} ({m.task}, traffic {'drifted' if m.drifted else 'steady'}): {m.metric} "
             f"{fmt(m.before)} before the drift, {fmt(m.end)} at the end; {story}; champion "
             f"v{m.baseline_version} -> v{m.final_champion}")
    echo(f"      {result.seconds:.0f} s")
    echo("Where to look:")
    echo(f"  Every model, one line each:  driftloop --config {config_file} status")
    echo(f"  One model's incidents:       driftloop --config {config_file} --model NAME status")
    echo(f"  The models' API:             {result.url}/v1/models (each at {result.url}/v1/models/NAME/...)")
    echo(f"  MLflow, a registered model per model: mlflow ui --backend-store-uri {cfg.tracking_uri} --port 5000")
    echo(f"  Evidently reports (HTML):    {cfg.reports_dir.resolve()}")
