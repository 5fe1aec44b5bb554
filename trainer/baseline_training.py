"""``train_baseline``: the first model, trained from scratch on a file's rows, registered, and made
champion when there is none. Its baseline (a reference sample scored by the model, and its metrics
on held-out rows) is saved with the run for the drift job."""
from __future__ import annotations

import logging
import math
from typing import Any, Callable

import mlflow
import pandas as pd

from monitor.config import DriftloopConfig
from trainer import distributed
from trainer import registry as reg
from trainer import run_data, story
from trainer.build import build_model
from trainer.data import split
from trainer.deployment import export_and_log
from trainer.entrypoint import add_embeddings, checked_rows, example_rows
from trainer.inputs import readable_rows
from trainer.loop import LoopConfig, LoopState, peek_checkpoint
from trainer.metrics import headline, model_figures, task_metrics
from trainer.outcomes import Baseline, TrainOutcome
from trainer.runs import (check_reports, check_trigger, epoch_logger, finite_output, fit_frames, lineage_tags,
                          log_reports, loop_params, mlflow_run)

log = logging.getLogger(__name__)


def held_out_intervals(cfg: DriftloopConfig, output: Any, rows: pd.DataFrame) -> dict[str, Any]:
    """How precisely the held-out ``rows`` measured a model's figures (its ``output`` on them), at
    ``drift.confidence``: ``{"rows": n, "confidence": c, "accuracy": [low, high], "roc_auc": [...],
    "mae": [...]}``, each the task's own interval (Wilson, DeLong, the MAE's t interval) where defined.
    The figure a model is promoted on comes from a few hundred held-out rows after a change, and it
    won a comparison: the daemon judges its later windows against the end of this interval nearest
    a drop, not against the point (monitor/daemon/runtime/controller.py, ``observation``)."""
    m, confidence = cfg.model, cfg.drift.confidence
    pred, score, proba = m.kind.served(output, m.threshold)
    perf = m.kind.performance(rows[m.target].to_numpy(), pred, score, proba, m.n_classes, confidence)
    out: dict[str, Any] = {"rows": int(len(rows)), "confidence": float(confidence)}
    for figure in ("accuracy", "roc_auc", "mae"):
        ci = getattr(perf, f"{figure}_ci", None)
        if ci is not None and all(isinstance(v, (int, float)) and math.isfinite(v) for v in ci):
            out[figure] = [float(ci[0]), float(ci[1])]
    return out

def reference_sample(cfg: DriftloopConfig, preferred: pd.DataFrame, *others: pd.DataFrame, model: Any,
                     seed: int) -> pd.DataFrame:
    """Up to ``training.reference_sample`` rows, ``preferred`` (held-out) rows first so the scores
    look like live scores rather than scores on rows the model was fitted to; plus the model's
    output as a store window carries it (monitor/tasks.py), so checks compare windows with it:
    binary the score P(1); multiclass the score (the served class's probability), the prediction
    (its index), the target as an index and ``__proba_<i>`` per class; regression the predicted
    value as score and prediction. A ``training.entrypoint`` model's rows keep their ``input_uri``
    (a retrain replays them) and get the embedding ``embed`` gives, computed by ``model``: the
    baseline's embeddings change with the champion, as the served ones do."""
    from monitor.embeddings import INPUT_URI
    m = cfg.model
    rows = pd.concat([preferred, *others], ignore_index=True).iloc[: cfg.training.reference_sample]
    rows = rows.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    keep = [c for c in [*m.feature_names, INPUT_URI] if c in rows.columns]
    out = add_embeddings(model, rows[keep + [m.target]].copy())
    for column, values in m.kind.served_columns(model.predict_proba(out), m.threshold, m.score,
                                                m.prediction).items():
        out[column] = values
    return out


def task_params(cfg: DriftloopConfig) -> dict[str, str]:
    """The run params that say what kind of model it is: ``task`` and, when named, ``classes``."""
    import json
    m = cfg.model
    return {"task": m.task, **({"classes": json.dumps(m.classes)} if m.classes else {})}


def train_baseline(cfg: DriftloopConfig, data: pd.DataFrame, *, trigger: str = "manual",
                   report_paths: Any = (), resume: bool = False, data_source: str | None = None,
                   should_stop: Callable[[LoopState], bool] | None = None) -> TrainOutcome | None:
    """Train from scratch on ``data`` (features + target), register a version, make it champion if
    the registered model has none. ``data_source``: the file the rows were read from, the logged
    datasets' source (without one the rows are exported with the run: trainer/run_data.py).
    DataError before anything starts when the data are unusable.
    Under torchrun every rank calls this; only rank 0 talks to MLflow (the others return None)."""
    check_trigger(trigger)
    t = cfg.training
    reports = check_reports(report_paths)
    usable = readable_rows(cfg, data, what="training data", required=True)  # inputs inside model.input_roots that read
    rows = checked_rows(cfg, usable.rows, what="training data", min_rows=t.min_rows)
    target, task = cfg.model.target, cfg.model.task
    rest, test = split(rows, t.holdout_fraction, target, t.seed, what="training data", part="test", task=task)
    fit_rows, val_rows = split(rest, t.validation_fraction, target, t.seed + 1, what="training data", task=task)
    model = build_model(cfg, fit_rows)
    loop = LoopConfig.from_training(t)
    checkpoint = cfg.checkpoints_dir / f"train-{cfg.model.name}.pt"
    if not distributed.from_env().is_main:  # other torchrun ranks train their shard; rank 0 does the rest
        fit_frames(model, fit_rows, val_rows, target, loop, checkpoint_path=checkpoint, resume=resume,
                   should_stop=should_stop)
        return None
    reg.check_reachable(cfg)
    saved = peek_checkpoint(checkpoint) if resume else None
    with reg.session(cfg), reg.translating(cfg, "logging the training run"):
        registry = reg.Registry(cfg)
        experiment = registry.experiment_id()
        tags = lineage_tags(cfg, "baseline", trigger, data_window={"rows": len(rows)})
        with mlflow_run(experiment, story.readable_name("baseline", trigger), tags,
                        run_id=(saved or {}).get("run_id")) as run:
            if saved is None:
                mlflow.log_params(loop_params(loop, rows=len(rows), fit_rows=len(fit_rows), val_rows=len(val_rows),
                                              test_rows=len(test), features=",".join(cfg.model.feature_names),
                                              factory=cfg.model.factory or "mlp", **task_params(cfg),
                                              **({"entrypoint": t.entrypoint} if t.entrypoint else {})))
                run_data.log_datasets(cfg, {"training": (f"{cfg.model.name} training data", rest),
                                            "holdout": (f"{cfg.model.name} test rows", test)},
                                      target=target, path=data_source)
            log_reports(reports)
            result = fit_frames(model, fit_rows, val_rows, target, loop, checkpoint_path=checkpoint, resume=resume,
                                 extra={"run_id": run.info.run_id}, on_epoch_end=epoch_logger(),
                                 should_stop=should_stop)
            test_out = finite_output(model.predict_proba(test), f"{len(test)} held-out test rows")
            test_metrics = task_metrics(task, test[target].to_numpy(), test_out, cfg.model.threshold)
            metrics = model_figures(test_metrics)
            mlflow.log_metrics({**{f"test_{k}": v for k, v in test_metrics.items()}, "best_epoch": result.best_epoch,
                                "epochs_run": result.epochs_run, "train_seconds": result.train_seconds,
                                "samples_per_second": result.samples_per_second})
            reference = reference_sample(cfg, test, val_rows, fit_rows, model=model, seed=t.seed)
            reg.log_baseline(Baseline(reference=reference, metrics=metrics,
                                      intervals=held_out_intervals(cfg, test_out, test)))
            version = reg.log_model(model, example_rows(cfg, model, test), registry)
            exported = export_and_log(model, reference, test, cfg, version)  # records its own failures; never raises
            became_champion = registry.alias_version(reg.CHAMPION) is None
            if became_champion:
                registry.make_champion(version)
            mlflow.set_tags({"driftloop.version": version, "driftloop.champion": str(became_champion).lower()})
            registry.client.set_model_version_tag(registry.name, version, "driftloop.kind", "baseline")
            story.record(registry, run.info.run_id, version, story.baseline_note(
                trigger=trigger, version=version, metrics=metrics, champion=became_champion, exported=exported,
                rows={"rows": len(rows), "fit": len(fit_rows), "val": len(val_rows), "test": len(test)},
                features=list(cfg.model.feature_names)), story.readable_name("baseline", trigger, version=version))
    log.info("trained v%s (%s): test %s%s", version, task, headline(task, metrics),
             " (champion)" if became_champion else "")
    return TrainOutcome(version=version, run_id=run.info.run_id,
                        metrics={**metrics, "samples_per_second": result.samples_per_second,
                                 "epochs_run": float(result.epochs_run), "best_epoch": float(result.best_epoch)},
                        champion=became_champion)
