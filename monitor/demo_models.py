"""``driftloop demo --models 2``: two models in one daemon, drift in one of them only.

1. two baselines are trained and registered, each as ``champion`` of its own registered model: a
   binary classifier, ``churn`` (the demo's synthetic rows, ``trainer.synthetic``), and a regressor,
   ``demand`` (a numeric target on the same features, :func:`make_demand`);
2. one daemon serves both (:class:`~monitor.daemon.runtime.fleet.Fleet`, configured by the
   ``models:`` file written to the demo folder): ``/v1/models/churn/...`` and ``/v1/models/demand/...``,
   each model checked on its own schedule by the shared check pool;
3. a model service per model scores its own traffic with its champion from MLflow
   (:class:`monitor.client.Champion`, following promotions) and sends it with a
   :class:`~monitor.client.DriftloopClient` naming the model; the labels follow one batch later;
4. after ``ticks_before`` batches ``churn``'s traffic drifts (covariate and concept drift, as in
   the one-model demo) and ``demand``'s does not: only ``churn`` opens an incident, retrains and
   promotes a new champion; ``demand`` keeps its champion and opens nothing.

What differs between the two models is data (:class:`DemoModel`); their metrics are each task's
primary metric (accuracy, MAE), asked of the task. The timeline and the summary are printed by
:mod:`monitor.demo_timeline`; the run returns a :class:`~monitor.demo_timeline.ModelsResult`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig, load_config
from monitor.demo import ApiServer, DemoPlan, demo_settings, keep_serving_until_interrupted, wait_for_check
from monitor.demo_timeline import Events, ModelOutcome, ModelsResult, ModelTick, fmt, print_models_summary
from monitor.tasks import task_of

if TYPE_CHECKING:
    from monitor.daemon.runtime.daemon import Daemon

CONFIG_FILE = "driftloop.yaml"


def make_demand(n: int, seed: int = 0, covariate_shift: float = 0.0, concept_shift: float = 0.0) -> pd.DataFrame:
    """``n`` rows of the demo's features with a numeric ``demand`` (about 100 ± 20): linear terms,
    an interaction, a periodic term, a log term and per-region offsets, Gaussian noise (sd 4).
    ``covariate_shift`` moves the features as :func:`trainer.synthetic.make_dataset` does;
    ``concept_shift`` (0..1) turns the ``x1`` term around."""
    from trainer.synthetic import make_dataset

    frame = make_dataset(n, seed=seed, covariate_shift=covariate_shift).drop(columns=["label"])
    rng = np.random.default_rng(seed + 1)
    region = frame["region"].map({"eu": 6.0, "us": -4.0, "apac": 9.0, "latam": -8.0}).to_numpy(dtype=float)
    x = {c: frame[c].to_numpy(dtype=float) for c in ("x0", "x1", "x2", "x3", "x4", "x5", "x6")}
    frame["demand"] = (100.0 + 12.0 * x["x0"] + (-8.0 + 16.0 * concept_shift) * x["x1"] + 6.0 * x["x2"] * x["x3"]
                       + 10.0 * np.sin(2.0 * x["x4"]) + 8.0 * np.log(x["x5"]) + 3.0 * x["x6"] + region
                       + rng.normal(0.0, 4.0, n))
    return frame


@dataclass(frozen=True)
class DemoModel:
    name: str
    model: dict[str, Any]                                  # its own ``model:`` section
    rows: Callable[[int, int, float, float], pd.DataFrame]  # (n, seed, covariate, concept) -> features + target
    drifts: bool                                           # whether its traffic drifts after ticks_before


def demo_models() -> tuple[DemoModel, ...]:
    from trainer.synthetic import make_dataset
    return (DemoModel("churn", {}, make_dataset, drifts=True),
            DemoModel("demand", {"task": "regression", "target": "demand"}, make_demand, drifts=False))


def models_config(home: Path, port: int, plan: DemoPlan, base: DriftloopConfig | None = None) -> DriftloopConfig:
    """The demo's settings for both models, written to ``home/driftloop.yaml`` (so that
    ``driftloop --config`` reads the same deployment afterwards), then loaded. From ``base``
    (the user's configuration) only the server's address and token and the logging are kept; the
    token is not written to the file."""
    import yaml

    data = demo_settings(home, port, plan)
    data["fleet"] = {"check_workers": 2}  # both models' checks at once: neither waits for the other
    data["models"] = {m.name: {"model": m.model} for m in demo_models()}
    path = home / CONFIG_FILE
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    carried: dict[str, Any] = {}
    if base is not None:
        carried = {"server": {k: v for k, v in base.server.model_dump(mode="json").items() if k != "port"},
                   "logging": base.logging.model_dump(mode="json")}
    return load_config(path, environ={}, overrides=carried)


def _served(cfg: DriftloopConfig, features: pd.DataFrame, output: Any, ids: list[str]) -> pd.DataFrame:
    """What a model service sends: the features joined with the champion's output as the pyfunc
    serves it (a frame of output columns, or a bare array: a binary model's P(1), the score column)."""
    out = output if isinstance(output, pd.DataFrame) else pd.DataFrame({cfg.model.score: np.asarray(output, float)},
                                                                           index=features.index)
    frame = features.join(out)
    frame.insert(0, cfg.model.id, ids)
    return frame


def run_models_demo(cfg: DriftloopConfig, plan: DemoPlan, *, echo: Callable[[str], None] = print,
                    keep_serving: bool = False) -> ModelsResult:
    from monitor.client import Champion, DriftloopClient
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.fleet_http import FleetApp

    started = time.monotonic()
    models = demo_models()
    configs = cfg.model_configs()
    echo(f"driftloop demo --models 2: everything lives in {cfg.home.resolve()} (configuration: "
         f"{cfg.home / CONFIG_FILE})")
    echo(f"[1/4] training a baseline per model on {plan.baseline_rows} synthetic rows ...")
    baselines = {m.name: _train_baseline(m, configs[m.name], plan, echo) for m in models}

    fleet = Fleet(cfg)
    server = ApiServer(FleetApp(fleet), cfg.server.host, cfg.server.port)
    url = f"http://{cfg.server.host}:{cfg.server.port}"
    server.start()
    fleet.start(scheduler=True)
    echo(f"[2/4] one daemon serving both models at {url}/v1/models/<name>/... (list: {url}/v1/models, metrics "
         f"{url}/metrics); each checked every {plan.check_interval:g} s over its last {cfg.drift.window_size} "
         "predictions")
    drifting = ", ".join(m.name for m in models if m.drifts)
    echo(f"[3/4] replaying traffic to both: {plan.ticks_before} stationary batches of {plan.batch} each, then "
         f"{drifting}'s traffic drifts (covariate {plan.covariate_shift:g}, concept {plan.concept_shift:g}) and the "
         "other's does not; labels arrive one batch late")
    header = f"{'batch':>5} {'phase':<10}" + "".join(
        f" | {m.name + ':'} {'served':>6} {'check':>5} {_label(configs[m.name]):>8} {'drift':>5}" for m in models) \
        + "  events"
    echo(header)
    echo("-" * len(header))

    services: dict[str, Champion] = {}
    clients: dict[str, DriftloopClient] = {}
    events = {m.name: Events(fleet.daemons[m.name]) for m in models}
    promoted: dict[str, list[str]] = {m.name: [] for m in models}
    served: dict[str, dict[int, str]] = {m.name: {} for m in models}
    pending: dict[str, pd.DataFrame | None] = {m.name: None for m in models}
    last_check: dict[str, int | None] = {m.name: None for m in models}
    ticks: list[dict[str, ModelTick]] = []
    total = plan.ticks_before + plan.ticks_after
    try:
        for m in models:  # the model services: each scores with its own champion and sends to its own path
            services[m.name] = Champion.for_model(m.name, config=cfg, interval=0)
            clients[m.name] = DriftloopClient(url, token=cfg.server.token, model=m.name)
        tick = 0
        while True:
            drifted = tick >= plan.ticks_before
            for k, m in enumerate(models):
                _send_batch(m, configs[m.name], plan, tick, drifted and m.drifts, k, services[m.name],
                            clients[m.name], served[m.name], pending)
            sent_at = time.time()
            row: dict[str, ModelTick] = {}
            for m in models:
                daemon = fleet.daemons[m.name]
                check = wait_for_check(daemon, last_check[m.name], sent_at,
                                       timeout=max(60.0, 20 * plan.check_interval))
                if check is not None:
                    last_check[m.name] = check["id"]
                row[m.name] = _tick(configs[m.name], check, served[m.name][tick], events[m.name].new())
                if services[m.name].refresh():  # a promotion: the service scores with it from the next batch
                    promoted[m.name].append(services[m.name].version)
            ticks.append(row)
            echo(_row_text(tick, "drifted" if drifted else "stationary", models, row))
            tick += 1
            recovered = min(sum(1 for t, v in served[m.name].items() if promoted[m.name] and v == promoted[m.name][-1])
                            for m in models if m.drifts)
            if tick >= total and (recovered >= plan.recovery_ticks + 1 or tick >= total + 10):
                break
        for daemon in fleet.daemons.values():
            daemon.wait_for_retrain(120)
        outcomes = {m.name: _outcome(m, configs[m.name], fleet.daemons[m.name], plan, ticks, baselines[m.name],
                                     promoted[m.name]) for m in models}
    finally:
        for client in clients.values():
            client.close()
        for service in services.values():
            service.close()
        if not keep_serving:
            fleet.stop()
            server.stop()

    result = ModelsResult(home=cfg.home, url=url, ticks=ticks, models=outcomes, seconds=time.monotonic() - started)
    print_models_summary(cfg, result, echo, cfg.home / CONFIG_FILE)
    if keep_serving:
        keep_serving_until_interrupted(url, echo, fleet.stop, server.stop)
    return result


def _train_baseline(m: DemoModel, cfg: DriftloopConfig, plan: DemoPlan, echo: Callable[[str], None]) -> str:
    """Train ``m``'s baseline on its stationary rows, registered as its champion; its version."""
    import trainer

    task = task_of(cfg.model)
    outcome = trainer.train_baseline(cfg, m.rows(plan.baseline_rows, plan.seed, 0.0, 0.0), trigger="manual")
    assert outcome is not None  # None only on the other ranks under torchrun
    echo(f"      {m.name} ({task}): registered {cfg.registered_model_name} v{outcome.version} as champion "
         f"({task.metric_label(task.primary_metric)} {fmt(outcome.metrics.get(task.primary_metric))})")
    return str(outcome.version)


def _label(cfg: DriftloopConfig) -> str:
    task = task_of(cfg.model)
    return task.metric_label(task.primary_metric)


def _send_batch(m: DemoModel, cfg: DriftloopConfig, plan: DemoPlan, tick: int, drifted: bool, k: int,
                service: Any, client: Any, served: dict[int, str], pending: dict[str, pd.DataFrame | None]) -> None:
    """Score one batch of ``m``'s traffic with its champion, send it, and send the previous batch's labels."""
    data = m.rows(plan.batch, plan.seed * 1000 + 500 * k + tick,
                  plan.covariate_shift if drifted else 0.0, plan.concept_shift if drifted else 0.0)
    features = data[cfg.model.feature_names]
    version, output = service.score(features)
    ids = [f"{m.name}-b{tick}-{i}" for i in range(len(data))]
    served[tick] = str(version)
    client.log_predictions(_served(cfg, features, output, ids), model_version=version)
    if pending[m.name] is not None:
        client.log_labels(pending[m.name])
    pending[m.name] = pd.DataFrame({"id": ids, "label": data[cfg.model.target].to_numpy()})


def _tick(cfg: DriftloopConfig, check: dict | None, served_by: str, events: list[str]) -> ModelTick:
    result = (check or {}).get("result") or {}
    metric = result.get(task_of(cfg.model).primary_metric) if check and check.get("status") == "ok" else None
    return ModelTick(served_by=served_by, check_id=check["id"] if check else None, metric=metric,
                     drift_share=check.get("drift_share") if check else None, events=events)


def _row_text(tick: int, phase: str, models: tuple[DemoModel, ...], row: dict[str, ModelTick]) -> str:
    text = f"{tick:>5} {phase:<10}"
    for m in models:
        t = row[m.name]
        text += (f" | {'':<{len(m.name) + 1}} {'v' + t.served_by:>6} {t.check_id or '-':>5} {fmt(t.metric):>8} "
                 f"{fmt(t.drift_share, '.2f'):>5}")
    shown = [f"{name}: {e}" for name, t in row.items() for e in t.events]
    return text + ("  " + "; ".join(shown) if shown else "")


def _outcome(m: DemoModel, cfg: DriftloopConfig, daemon: Daemon, plan: DemoPlan, ticks: list[dict[str, ModelTick]],
             baseline: str, promoted: list[str]) -> ModelOutcome:
    # The check after batch t judges the labels of batch t - 1: t <= ticks_before is before the drift.
    before = [r[m.name].metric for t, r in enumerate(ticks) if 1 <= t <= plan.ticks_before]
    end = [r[m.name].metric for r in ticks[-(plan.recovery_ticks + 1):]]
    ctl = daemon.controller
    return ModelOutcome(
        name=m.name, task=str(cfg.model.task), metric=_label(cfg), drifted=m.drifts, baseline_version=baseline,
        final_champion=promoted[-1] if promoted else baseline, promoted_versions=list(promoted),
        incidents=[(str(inc.reason), str(inc.state)) for inc in reversed(ctl.incidents.recent(20))],
        retrains=[str(a.status) for a in reversed(ctl.attempts.recent(20))],
        before=_mean(before), end=_mean(end))


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None
