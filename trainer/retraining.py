"""``retrain``: warm-start the champion on the recent labelled window plus a replay of its reference
sample, compare challenger and champion on held-out recent rows, promote through the gate
(trainer/gate.py). ``rollback``: move ``champion`` back to the previous champion.

Order matters: the data are checked and MLflow's reachability and the champion confirmed before
a single training step, so bad input or an outage fails in seconds with DataError/RegistryError.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Literal

import mlflow
import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.errors import ConfigError
from trainer import distributed
from trainer import registry as reg
from trainer import story
from trainer.baseline_training import reference_sample, task_params
from trainer.data import check_frame, split
from trainer.entrypoint import checked_rows, example_rows
from trainer.deployment import export_and_log
from trainer.gate import Decision, Floors, auc_noise, cost_refusals, floors_of, judge
from trainer.live import compare_and_log
from trainer.loop import LoopConfig, LoopState, copy_model, peek_checkpoint
from trainer.metrics import comparison, model_figures, ranking, reference_figure, task_metrics
from trainer.outcomes import Baseline, Champion, RetrainOutcome
from trainer.previous import best_previous, recall_allowed, reinstate
from trainer.rule_gate import rule_metrics, rule_regressions
from trainer.runs import (check_reports, check_trigger, epoch_logger, fit_frames, lineage_tags, log_reports,
                          loop_params, mlflow_run)
from trainer.shadow import hold

log = logging.getLogger(__name__)


def _replay(reference: pd.DataFrame, rows: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(replayed, kept_for_evaluation)``: a random sample of the champion's reference rows to train
    on, and the rest to check forgetting on (all rows when too few are left to mean anything)."""
    rng = np.random.default_rng(seed)
    rows = min(rows, len(reference))
    picked = np.zeros(len(reference), dtype=bool)
    picked[rng.choice(len(reference), size=rows, replace=False)] = True
    replayed, rest = reference[picked], reference[~picked]
    return replayed.reset_index(drop=True), (rest if len(rest) >= 100 else reference).reset_index(drop=True)


def evaluate_model(cfg: DriftloopConfig, model: Any, rows: pd.DataFrame) -> dict[str, float]:
    """The task's figures of ``model`` on labelled ``rows`` (checked): binary accuracy and roc_auc;
    multiclass also macro_f1 and weighted_f1; regression mae, rmse, r2 (and mape)."""
    m = cfg.model
    return model_figures(task_metrics(m.task, rows[m.target].to_numpy(), model.predict_proba(rows), m.threshold))


def reference_score(cfg: DriftloopConfig, model: Any, rows: pd.DataFrame) -> float:
    """Accuracy (classifiers) or MAE (regression) of ``model`` on ``rows``: the forgetting bound's figure."""
    m = cfg.model
    return reference_figure(m.task, rows[m.target].to_numpy(), model.predict_proba(rows), m.threshold)


def _with_rule_metrics(cfg: DriftloopConfig, model: Any, rows: pd.DataFrame, m: dict[str, float]) -> dict[str, float]:
    """``m`` plus what alerts.rules compare (binary: precision, recall, f1, positive_rate), when there are rules."""
    if not cfg.alerts.rules:
        return m
    mc = cfg.model
    return {**m, **rule_metrics(rows[mc.target].to_numpy(), model.predict_proba(rows), mc.threshold, mc.task,
                                mc.classes)}


def _concept_check(champion: Champion, recent: pd.DataFrame, reference: pd.DataFrame,
                   cfg: DriftloopConfig) -> dict[str, Any]:
    """Does the champion's concept hold on the recent rows? A classifier's holds when its accuracy
    there is within ``alerts.accuracy_drop`` of its accuracy on its own reference sample; a
    regressor's when its MAE there is at most ``alerts.mae_rise`` (relative) above it."""
    on_recent = reference_score(cfg, champion.model, recent)
    on_reference = reference_score(cfg, champion.model, reference)
    if cfg.model.task == "regression":
        holds = bool(on_recent <= on_reference * (1 + cfg.alerts.mae_rise))
    else:
        holds = bool(on_recent >= on_reference - cfg.alerts.accuracy_drop)
    return {"holds": holds, "recent": float(on_recent), "reference": float(on_reference)}


def _fit_cold(cfg: DriftloopConfig, fit_rows: pd.DataFrame, val_rows: pd.DataFrame, checkpoint: Any,
              should_stop: Any) -> tuple[Any, Any]:
    """A fresh model (preprocessing fitted on the new rows) trained like a baseline on the same rows."""
    from trainer.build import build_model
    fresh = build_model(cfg, fit_rows)
    loop = LoopConfig.from_training(cfg.training)
    path = checkpoint.with_name(checkpoint.stem + "-cold.pt")
    result = fit_frames(fresh, fit_rows, val_rows, cfg.model.target, loop, checkpoint_path=path, resume=False,
                        should_stop=should_stop)
    return fresh, result


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _floor_metrics(floors: Any) -> dict[str, float]:
    if isinstance(floors, Floors):
        return {"challenger_accuracy_lower": _nan(floors.accuracy_lower),
                "challenger_roc_auc_lower": _nan(floors.auc_lower), "majority_rate": floors.majority_rate}
    return {"challenger_r2": _nan(floors.r2), "challenger_r2_lower": _nan(floors.r2_lower)}


def retrain(cfg: DriftloopConfig, window: pd.DataFrame, *, trigger: str = "manual", incident_id: Any = None,
            report_paths: Any = (), data_window: Any = None, resume: bool = False,
            should_stop: Callable[[LoopState], bool] | None = None) -> RetrainOutcome | None:
    """One incremental retrain on ``window`` (recent labelled rows; store-window columns allowed).
    The challenger is registered either way (alias ``challenger``); ``champion`` moves only when
    the gate says so. Plain picklable inputs and output: the daemon runs this in a child process.
    Under torchrun every rank calls this; only rank 0 talks to MLflow (the others return None)."""
    started = time.perf_counter()
    check_trigger(trigger)
    t, target, task = cfg.training, cfg.model.target, cfg.model.task
    reports = check_reports(report_paths)
    recent = checked_rows(cfg, window, what="recent window", min_rows=t.min_rows)
    rest, holdout = split(recent, t.holdout_fraction, target, t.seed, what="recent window", part="holdout", task=task)
    champion: Champion = reg.load_champion(cfg)  # checks reachability; RegistryError if no champion
    kind = getattr(champion.model, "task", "binary")
    if kind != cfg.model.task or (kind == "multiclass" and champion.model.classes != cfg.model.classes):
        raise ConfigError(f"champion v{champion.version} is a {kind} model"
                          + (f" of classes {champion.model.classes}" if kind == "multiclass" else "")
                          + f", but the configuration says {cfg.model.task}"
                          + (f" of classes {cfg.model.classes}" if cfg.model.task == "multiclass" else "")
                          + "; unset model.task / model.classes (the champion says) or train a new model")
    reference = check_frame(champion.baseline.reference, cfg.model, what=f"champion v{champion.version}'s reference")
    # Does the champion's concept still hold? Its accuracy (regression: MAE) on the recent training
    # rows against the same on its own reference sample. When it no longer does, the old rows teach the old
    # labels: no replay, forgetting is not limited, and a fresh model competes with the warm start.
    concept = _concept_check(champion, rest, reference, cfg)
    replay_rows = int(round(t.replay_ratio * len(rest))) if concept["holds"] else 0
    replayed, reference_eval = _replay(reference, replay_rows, t.seed)
    train_rows = pd.concat([rest, replayed], ignore_index=True)
    fit_rows, val_rows = split(train_rows, t.validation_fraction, target, t.seed + 1, what="retraining data",
                               task=task)

    model = copy_model(champion.model)  # warm start; the cached champion stays untouched
    # A warm start that only fine-tunes suits a concept that still holds; after a change it must move
    # far, so it gets the full budget (training.epochs, early stopping ends it) and learning rate.
    loop = (LoopConfig.from_training(t, epochs=t.retrain_epochs, learning_rate=t.learning_rate * t.retrain_lr_factor)
            if concept["holds"] else LoopConfig.from_training(t))
    checkpoint = cfg.checkpoints_dir / f"retrain-{cfg.model.name}.pt"
    cold = t.cold_start == "always" or (t.cold_start == "auto" and not concept["holds"])
    if not distributed.from_env().is_main:  # other torchrun ranks train their shard; rank 0 does the rest
        fit_frames(model, fit_rows, val_rows, target, loop, checkpoint_path=checkpoint, resume=resume,
                   should_stop=should_stop)
        if cold:
            _fit_cold(cfg, fit_rows, val_rows, checkpoint, should_stop)
        return None
    saved = peek_checkpoint(checkpoint) if resume else None
    with reg.session(cfg), reg.translating(cfg, "logging the retraining run"):
        registry = reg.Registry(cfg)
        recalled = None
        if saved is None and recall_allowed(cfg):  # an earlier champion fit for this concept: no training
            recalled = best_previous(cfg, champion, holdout, reference, concept["holds"], registry.history(),
                                     lambda v: reg.load_version(cfg, registry, v))
        if recalled is not None:
            return reinstate(cfg, registry, recalled, champion, trigger, incident_id,
                             data_window if data_window is not None else {"rows": len(recent)},
                             len(holdout), started)
        tags = lineage_tags(cfg, "retrain", trigger, incident_id, champion.version,
                            data_window if data_window is not None else {"rows": len(recent)})
        reason = story.reason_of(data_window)
        name = story.readable_name("retrain", trigger, reason=reason, incident_id=incident_id,
                                   parent=champion.version)
        with mlflow_run(registry.experiment_id(), name, tags, run_id=(saved or {}).get("run_id")) as run:
            if saved is None:
                mlflow.log_params(loop_params(loop, window_rows=len(recent), holdout_rows=len(holdout),
                                              recent_train_rows=len(rest), replay_rows=len(replayed),
                                              parent_version=champion.version, **task_params(cfg),
                                              **({"entrypoint": t.entrypoint} if t.entrypoint else {})))
                source = story.window_source(cfg, data_window)
                story.log_dataset(rest, name=f"{cfg.model.name} recent window", source=source, context="training",
                                  target=target)
                story.log_dataset(holdout, name=f"{cfg.model.name} gate holdout", source=source, context="holdout",
                                  target=target)
            log_reports(reports)
            result = fit_frames(model, fit_rows, val_rows, target, loop, checkpoint_path=checkpoint, resume=resume,
                                 extra={"run_id": run.info.run_id}, on_epoch_end=epoch_logger(),
                                 should_stop=should_stop)
            start_kind = "warm"
            if cold:
                fresh, fresh_result = _fit_cold(cfg, fit_rows, val_rows, checkpoint, should_stop)
                warm_val = evaluate_model(cfg, model, val_rows)
                cold_val = evaluate_model(cfg, fresh, val_rows)
                lead = ("mae", "rmse") if task == "regression" else ("accuracy", "roc_auc")
                mlflow.log_metrics({f"{kind}_val_{k}": m[k] for k in lead
                                    for kind, m in (("warm", warm_val), ("cold", cold_val))})
                if ranking(task, cold_val) > ranking(task, warm_val):
                    model, result, start_kind = fresh, fresh_result, "cold"
            mlflow.set_tags({"driftloop.start": start_kind, "driftloop.concept_holds": str(concept["holds"]).lower()})
            challenger_m = evaluate_model(cfg, model, holdout)
            champion_m = evaluate_model(cfg, champion.model, holdout)
            ref_ch = reference_score(cfg, model, reference_eval)
            ref_cp = reference_score(cfg, champion.model, reference_eval)
            challenger_out = model.predict_proba(holdout)
            floors = floors_of(holdout[target].to_numpy(), challenger_out, cfg.model.threshold,
                               t.gate.confidence, task)
            noise = auc_noise(task, holdout[target].to_numpy(), champion.model.predict_proba(holdout), challenger_out,
                              t.gate.confidence)
            decision = judge(task, challenger_m, champion_m, ref_ch, ref_cp, t.gate, floors=floors,
                             concept_holds=concept["holds"], auc_noise=noise)
            regressions = rule_regressions(_with_rule_metrics(cfg, model, holdout, challenger_m),
                                           _with_rule_metrics(cfg, champion.model, holdout, champion_m),
                                           cfg.alerts.rules, cfg.alerts.mode)
            if regressions:  # alerts.rules (trainer/rule_gate.py): not promoted when worse on a rule's metric
                decision = Decision(False, ([] if decision.promote else decision.reasons) + regressions)

            # The baseline a promoted challenger brings: the recent rows (the new normal), held-out first.
            new_reference = reference_sample(cfg, holdout, rest, model=model, seed=t.seed)
            reg.log_baseline(Baseline(reference=new_reference, metrics=challenger_m))
            version = reg.log_model(model, example_rows(cfg, model, holdout), registry)
            registry.client.set_registered_model_alias(registry.name, reg.CHALLENGER, version)

            exported = export_and_log(model, new_reference, holdout, cfg, version)  # never raises
            promote, reasons = decision.promote, list(decision.reasons)
            too_costly = cost_refusals(None if exported is None else exported.deployed(),
                                       max_latency_ms=t.gate.max_latency_ms, max_model_mb=t.gate.max_model_mb)
            if too_costly:  # better but not deployable: the cost reasons replace a "why yes"
                reasons = (reasons if not promote else []) + too_costly
                promote = False
            live = compare_and_log(model, recent, window, cfg, champion.version)  # never raises
            wins, why = live.verdict(1 - t.gate.confidence)
            if t.gate.requires_live_win and promote and not wins:
                promote, reasons = False, [why]
            elif promote and live.unavailable is None:
                reasons.append(why)
            held = promote and t.shadow.windows > 0
            if held:  # passed: now it must hold its own on live traffic first
                hold(registry, version, champion.version, t.shadow.windows, time.time())
                promote, reasons = False, [f"held in shadow: challenger v{version} scores {t.shadow.windows} check "
                                           "window(s) of live traffic before it can become champion "
                                           f"(training.shadow.windows); passed the gate: {'; '.join(reasons)}"]
            current = registry.alias_version(reg.CHAMPION)
            if promote and current != champion.version:  # moved under us (rollback, manual edit): don't clobber
                promote = False
                reasons.append(f"champion changed during retraining (v{champion.version} -> v{current}); not promoted")
            previous = registry.make_champion(version) if promote else None
            outcome: Literal["promoted", "rejected", "shadow"] = (
                "promoted" if promote else "shadow" if held else "rejected")
            figure = "mae" if task == "regression" else "accuracy"  # of the reference and concept checks
            metrics = {
                **comparison(task, challenger_m, champion_m),
                f"challenger_reference_{figure}": ref_ch, f"champion_reference_{figure}": ref_cp,
                "holdout_rows": float(len(holdout)), "train_rows": float(len(fit_rows)),
                "replay_rows": float(len(replayed)), "epochs_run": float(result.epochs_run),
                f"champion_recent_{figure}": concept["recent"],
                f"champion_reference_self_{figure}": concept["reference"],
                **_floor_metrics(floors),
                "best_epoch": float(result.best_epoch), "samples_per_second": result.samples_per_second,
                "promoted": 1.0 if promote else 0.0,
            }
            mlflow.log_metrics(metrics)
            outcome_tags = {"driftloop.outcome": outcome, "driftloop.reasons": "\n".join(reasons)[:4900],
                            "driftloop.version": version, "driftloop.champion_before": champion.version,
                            "driftloop.champion_after": version if promote else (current or "")}
            mlflow.set_tags(outcome_tags)
            for key in ("driftloop.outcome", "driftloop.reasons", "driftloop.champion_before"):
                registry.client.set_model_version_tag(registry.name, version, key, outcome_tags[key])
            registry.client.set_model_version_tag(registry.name, version, "driftloop.kind", "retrain")
            story.record(registry, run.info.run_id, version, story.retrain_note(
                trigger=trigger, incident_id=incident_id, reason=reason,
                data_window=data_window or {"rows": len(recent)},
                parent=champion.version, version=version, outcome=outcome, reasons=reasons, challenger=challenger_m,
                champion=champion_m, concept=concept, figure=figure, start=start_kind, exported=exported,
                rows={"train": len(fit_rows), "replay": len(replayed), "holdout": len(holdout)}),
                story.readable_name("retrain", trigger, reason=reason, incident_id=incident_id,
                                    parent=champion.version, version=version))
    duration = time.perf_counter() - started
    log.info("retrain v%s -> v%s: %s (%s)", champion.version, version, outcome, "; ".join(reasons))
    return RetrainOutcome(outcome=outcome, challenger_version=version,
                          champion_version=version if promote else (current or champion.version),
                          run_id=run.info.run_id, metrics=metrics, reasons=reasons, duration_seconds=duration,
                          samples_per_second=result.samples_per_second, previous_champion_version=previous)


def rollback(cfg: DriftloopConfig) -> tuple[str, str]:
    """Move ``champion`` back to the previous champion: ``(from_version, to_version)``."""
    reg.check_reachable(cfg)
    with reg.translating(cfg, "rolling back"):
        registry = reg.Registry(cfg)
        moved = registry.roll_back()
    log.info("rolled back champion v%s -> v%s", *moved)
    return moved

