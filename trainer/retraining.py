"""``retrain``: warm-start the champion on the recent labelled window plus a replay of its reference
sample, compare challenger and champion on held-out recent rows, promote through the gates. A
pipeline of named steps: :func:`prepare` (check and split the rows, decide replay, budget and cold
start) → :func:`train` → judge (trainer/publish.py ``examine`` measures the challenger,
trainer/judge.py ``run_gates`` returns one verdict per gate) → ``publish`` (trainer/publish.py: the
shadow hold or the alias move, and every record of it). ``rollback``: move ``champion`` back to the
previous champion.

Order matters: the data are checked and MLflow's reachability and the champion confirmed before
a single training step, so bad input or an outage fails in seconds with DataError/RegistryError.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import mlflow
import numpy as np
import pandas as pd

from monitor.config import DriftloopConfig
from monitor.errors import ConfigError
from monitor.retrain_contract import Series
from monitor.tasks import task_of
from trainer import distributed
from trainer import registry as reg
from trainer import run_data, story
from trainer.baseline_training import task_params
from trainer.data import check_frame, split
from trainer.entrypoint import checked_rows
from trainer.inputs import readable_rows
from trainer.judge import run_gates
from trainer.loop import FitResult, LoopConfig, LoopState, copy_model, peek_checkpoint
from trainer.metrics import ranking
from trainer.model import grow_vocabulary
from trainer.outcomes import Champion, RetrainOutcome
from trainer.previous import best_previous, recall_allowed, reinstate
from trainer.publish import Lineage, evaluate_model, examine, publish, reference_score
from trainer.retrain_progress import EpochSink
from trainer.runs import (check_reports, check_trigger, epoch_logger, fit_frames, lineage_tags, log_reports,
                          loop_params, mlflow_run)

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


def _concept_check(champion: Champion, recent: pd.DataFrame, reference: pd.DataFrame,
                   cfg: DriftloopConfig) -> dict[str, Any]:
    """Does the champion's concept hold on the recent rows? A classifier's holds when its accuracy
    there is within ``alerts.accuracy_drop`` of its accuracy on its own reference sample; a
    regressor's when its MAE there is at most ``alerts.mae_rise`` (relative) above it.

    When it does not, the recent rows comparable to the reference decide why (trainer/comparable.py):
    ``shift`` is ``covariate`` (the champion holds on the comparable rows, or too few are comparable:
    new inputs, same rule; the concept is kept, ``holds``) or ``concept`` (it fails on them too);
    ``none`` when it held on every recent row."""
    kind = cfg.model.kind
    on_recent = reference_score(cfg, champion.model, recent)
    on_reference = reference_score(cfg, champion.model, reference)
    out: dict[str, Any] = {"recent": float(on_recent), "reference": float(on_reference)}
    if kind.concept_holds(on_recent, on_reference, cfg.alerts):
        return {**out, "holds": True, "shift": "none"}
    from trainer.comparable import MIN_COMPARABLE, comparable_rows
    try:
        near = comparable_rows(cfg, recent, reference, seed=cfg.training.seed)
    except Exception as exc:  # a feature the measure cannot read: judge on every row, as before
        log.warning("comparable rows not measured (%s); judging the concept on every recent row", exc)
        near = None
    if near is None:
        return {**out, "holds": False, "shift": "concept"}
    out["comparable_share"] = near.share
    if len(near.recent) < MIN_COMPARABLE:
        log.info("the champion's concept fails on the recent rows, but only %.0f%% of them lie where its reference "
                 "does: covariate shift (the reference rows stay learned)", 100 * near.share)
        return {**out, "holds": True, "shift": "covariate"}
    on_near = reference_score(cfg, champion.model, near.recent)
    on_matched = reference_score(cfg, champion.model, near.matched)
    out.update({"comparable": float(on_near), "matched": float(on_matched)})
    holds = kind.concept_holds(on_near, on_matched, cfg.alerts)
    log.info("the champion's concept %s on the %d recent rows comparable to its reference (%.4f vs %.4f on the "
             "reference rows nearest them): %s", "holds" if holds else "fails", len(near.recent), on_near, on_matched,
             "covariate shift" if holds else "concept change")
    return {**out, "holds": holds, "shift": "covariate" if holds else "concept"}


def _fit_cold(cfg: DriftloopConfig, fit_rows: pd.DataFrame, val_rows: pd.DataFrame, checkpoint: Any,
              should_stop: Any, champion: Any = None, progress: EpochSink | None = None) -> tuple[Any, Any]:
    """A fresh model (preprocessing fitted on the new rows) trained like a baseline on the same rows;
    a user's network gets the champion's artifacts as ``previous`` (trainer/entrypoint.py)."""
    from trainer.build import build_model
    if cfg.training.entrypoint:
        from trainer.entrypoint import artifacts_folder, build_entrypoint_model
        fresh = build_entrypoint_model(cfg, fit_rows, previous=artifacts_folder(champion))
    else:
        fresh = build_model(cfg, fit_rows)
    loop = LoopConfig.from_training(cfg.training)
    path = checkpoint.with_name(checkpoint.stem + "-cold.pt")
    result = fit_frames(fresh, fit_rows, val_rows, cfg.model.target, loop, checkpoint_path=path, resume=False,
                        should_stop=should_stop, on_epoch_end=_epoch_hooks(None, progress, "cold", loop.epochs,
                                                                            len(fit_rows)))
    return fresh, result


def _epoch_hooks(logger: Callable[[dict[str, float]], None] | None, progress: EpochSink | None, series: Series,
                 epochs: int, rows: int) -> Callable[[dict[str, float]], None] | None:
    """The loop's ``on_epoch_end``: the MLflow run's per-epoch metrics and the retrain's progress."""
    if progress is None:
        return logger

    def each(record: dict[str, float]) -> None:
        if logger is not None:
            logger(record)
        progress.epoch(series, epochs, rows, record)
    return each


#: A categorical feature whose values on at least this share of the recent rows are outside the
#: champion's vocabulary makes a fresh model compete (:func:`cold_start`).
UNSEEN_COLD_SHARE = 0.2


def cold_start(t: Any, concept_holds: bool, rows: int, champion_rows: int | None = None,
               unseen: float = 0.0) -> bool:
    """Does a fresh model compete with the warm start? ``training.cold_start``: always, never, or
    (auto) when the champion's concept no longer holds on the recent rows, or when the evidence is
    large: the retrain learns from at least ``training.cold_start_rows`` recent rows, or from twice
    the rows the champion knew (``champion_rows``: its reference sample, its held-out and training
    rows up to ``training.reference_sample``; a champion fitted on the first 500 rows after a change
    has a 500-row reference). With that much more evidence a fresh model can beat a fine-tuned
    one; the better on validation is kept. Also when ``unseen`` (:func:`unseen_share`) reaches
    :data:`UNSEEN_COLD_SHARE`: a warm start keeps the champion's vocabulary, so categories it never
    saw all fall into one unknown bucket it cannot tell apart (an upstream that renamed every
    category: +0.05 accuracy from a warm start on 500 rows, where a fresh vocabulary learns them)."""
    if t.cold_start != "auto":
        return bool(t.cold_start == "always")
    large = rows >= t.cold_start_rows or (champion_rows is not None and rows >= 2 * champion_rows)
    return not concept_holds or large or unseen >= UNSEEN_COLD_SHARE


def unseen_share(model: Any, rows: pd.DataFrame) -> tuple[str | None, float]:
    """The categorical feature with the largest share of ``rows`` whose value (present) is not in
    ``model``'s vocabulary, and that share; ``(None, 0.0)`` for a model without one (a user's network)."""
    from trainer.features import category_text
    vocab = getattr(model, "vocab", None)
    if not isinstance(vocab, dict) or not len(rows):
        return None, 0.0
    worst: tuple[str | None, float] = (None, 0.0)
    for name, values in vocab.items():
        if name not in rows.columns:
            continue
        known = set(values)
        share = sum(1 for v in category_text(rows[name]) if v is not None and v not in known) / len(rows)
        if share > worst[1]:
            worst = (name, share)
    return worst


def reference_levels(data_window: Any) -> dict[str, float]:
    """The daemon's reference level sent with the retrain, per figure (``data_window``'s
    ``reference_level``, monitor/daemon/runtime/retrains.py: ``{"accuracy": .., "roc_auc": ..}``;
    empty when absent)."""
    found = (data_window or {}).get("reference_level") if isinstance(data_window, dict) else None
    return {k: float(v) for k, v in (found or {}).items() if isinstance(v, (int, float))}


@dataclass
class Prepared:
    """The retrain's inputs, checked before a single training step."""
    recent: pd.DataFrame          # the window's labelled rows
    rest: pd.DataFrame            # ...less the held-out rows: what it learns from
    holdout: pd.DataFrame         # the gate's rows, the same for challenger and champion
    champion: Champion
    reference: pd.DataFrame       # the champion's reference sample
    concept: dict[str, Any]       # does the champion's concept hold on the recent rows (_concept_check)
    replayed: pd.DataFrame        # reference rows trained on (none once the concept changed)
    reference_eval: pd.DataFrame  # reference rows forgetting is checked on
    fit_rows: pd.DataFrame
    val_rows: pd.DataFrame
    loop: LoopConfig
    checkpoint: Path
    cold: bool                    # also train a fresh model and keep the better
    # Rows left out because their input no longer resolves inside model.input_roots or cannot be
    # read (trainer/inputs.py), by kind: {"refused": n, "unreadable": m}; window and reference.
    skipped_inputs: dict[str, int] = field(default_factory=dict)


@dataclass
class Trained:
    model: Any
    result: FitResult
    start: str                    # "warm" or "cold"


def prepare(cfg: DriftloopConfig, window: pd.DataFrame) -> Prepared:
    """Check the rows and the champion, split, and decide replay, budget and cold start."""
    t, target, task = cfg.training, cfg.model.target, cfg.model.task
    usable = readable_rows(cfg, window, what="recent window", required=True)  # inputs resolved again; bad ones left out
    recent = checked_rows(cfg, usable.rows, what="recent window", min_rows=t.min_rows)
    rest, holdout = split(recent, t.holdout_fraction, target, t.seed, what="recent window", part="holdout", task=task)
    champion: Champion = reg.load_champion(cfg)  # checks reachability; RegistryError if no champion
    kind, expected = task_of(getattr(champion.model, "task", "binary")), cfg.model.kind
    classes = getattr(champion.model, "classes", None)
    if kind != expected or expected.output_classes(classes) != expected.output_classes(cfg.model.classes):
        raise ConfigError(f"champion v{champion.version} is a {kind} model{kind.of_classes(classes)}"
                          f", but the configuration says {expected}{expected.of_classes(cfg.model.classes)}"
                          + "; unset model.task / model.classes (the champion says) or train a new model")
    kept = readable_rows(cfg, champion.baseline.reference, what=f"champion v{champion.version}'s reference")
    reference = check_frame(kept.rows, cfg.model, what=f"champion v{champion.version}'s reference")
    # Does the champion's concept still hold? Its accuracy (regression: MAE) on the recent training
    # rows against the same on its own reference sample. When it no longer does, the old rows teach the old
    # labels: no replay, forgetting is not limited, and a fresh model competes with the warm start.
    concept = _concept_check(champion, rest, reference, cfg)
    replay_rows = int(round(t.replay_ratio * len(rest))) if concept["holds"] else 0
    replayed, reference_eval = _replay(reference, replay_rows, t.seed)
    train_rows = pd.concat([rest, replayed], ignore_index=True)
    fit_rows, val_rows = split(train_rows, t.validation_fraction, target, t.seed + 1, what="retraining data",
                               task=task)
    # A warm start that only fine-tunes suits a concept that still holds (a lower learning rate);
    # after a change it must move far, so it gets the full learning rate. Under covariate shift the
    # new inputs must be learned too (the reference stays replayed and its loss limited). Either way
    # it trains until its validation loss stops improving (training.patience), not for a fixed
    # count: capped at 8 epochs, 7 of 9 retrains of a long switch were still improving when stopped.
    loop = (LoopConfig.from_training(t, epochs=t.retrain_epochs or t.epochs,
                                     learning_rate=t.learning_rate * t.retrain_lr_factor)
            if concept["shift"] == "none" else LoopConfig.from_training(t))
    unseen_feature, unseen = unseen_share(champion.model, rest)
    cold = cold_start(t, concept["holds"], len(rest), champion_rows=len(reference), unseen=unseen)
    if unseen >= UNSEEN_COLD_SHARE and t.cold_start == "auto":
        log.info("%.0f %% of the recent rows carry %s values champion v%s never saw: a fresh model competes",
                 100 * unseen, unseen_feature, champion.version)
    return Prepared(recent, rest, holdout, champion, reference, concept, replayed, reference_eval, fit_rows,
                    val_rows, loop, cfg.checkpoints_dir / f"retrain-{cfg.model.name}.pt", cold,
                    {k: usable.counts()[k] + kept.counts()[k] for k in usable.counts()} if t.entrypoint else {})


def train(cfg: DriftloopConfig, p: Prepared, *, resume: bool, should_stop: Any, logged: bool = True,
          extra: dict[str, Any] | None = None, progress: EpochSink | None = None) -> Trained:
    """Warm-start the champion's copy (and, when ``p.cold``, a fresh model; the better on validation
    wins). ``logged``: in the MLflow run (rank 0), with per-epoch metrics and the warm/cold figures.
    ``progress``: told each epoch of each (trainer/retrain_progress.py)."""
    model = copy_model(p.champion.model)  # warm start; the cached champion stays untouched
    if cfg.training.entrypoint:  # artifacts prepared for these rows; checked against today's config
        from trainer.entrypoint import warm_start
        model = warm_start(cfg, model, p.fit_rows)
    else:  # categories the champion never saw get their own embedding (a TabularModel's network)
        grown = grow_vocabulary(model, p.fit_rows)
        if grown:
            shown = "; ".join(f"{c}: {len(v)} ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''})"
                              for c, v in grown.items())
            log.info("warm start: categories champion v%s never saw added to its vocabulary: %s",
                     p.champion.version, shown)
    result = fit_frames(model, p.fit_rows, p.val_rows, cfg.model.target, p.loop, checkpoint_path=p.checkpoint,
                        resume=resume, extra=extra, should_stop=should_stop,
                        on_epoch_end=_epoch_hooks(epoch_logger() if logged else None, progress, "warm",
                                                  p.loop.epochs, len(p.fit_rows)))
    trained = Trained(model, result, "warm")
    if p.cold:
        fresh, fresh_result = _fit_cold(cfg, p.fit_rows, p.val_rows, p.checkpoint, should_stop, p.champion.model,
                                        progress)
        if not logged:
            return trained
        warm_val, cold_val = evaluate_model(cfg, model, p.val_rows), evaluate_model(cfg, fresh, p.val_rows)
        lead = cfg.model.kind.lead_metrics
        mlflow.log_metrics({f"{kind}_val_{k}": m[k] for k in lead for kind, m in (("warm", warm_val),
                                                                                  ("cold", cold_val))})
        if ranking(cfg.model.task, cold_val) > ranking(cfg.model.task, warm_val):
            trained = Trained(fresh, fresh_result, "cold")
    return trained


def retrain(cfg: DriftloopConfig, window: pd.DataFrame, *, trigger: str = "manual", incident_id: Any = None,
            report_paths: Any = (), data_window: Any = None, resume: bool = False,
            should_stop: Callable[[LoopState], bool] | None = None,
            progress: EpochSink | None = None) -> RetrainOutcome | None:
    """One incremental retrain on ``window`` (recent labelled rows; store-window columns allowed):
    prepare → train → judge (trainer/judge.py) → publish. The challenger is registered either way
    (alias ``challenger``); ``champion`` moves only when every gate passed. Plain picklable inputs and
    output: the daemon runs this in a child process. Under torchrun every rank calls this; only rank 0
    talks to MLflow (the others return None)."""
    started = time.perf_counter()
    check_trigger(trigger)
    t, target = cfg.training, cfg.model.target
    reports = check_reports(report_paths)
    p = prepare(cfg, window)
    if not distributed.from_env().is_main:  # other torchrun ranks train their shard; rank 0 does the rest
        train(cfg, p, resume=resume, should_stop=should_stop, logged=False)
        return None
    saved = peek_checkpoint(p.checkpoint) if resume else None
    data_window = data_window if data_window is not None else {"rows": len(p.recent)}
    with reg.session(cfg), reg.translating(cfg, "logging the retraining run"):
        registry = reg.Registry(cfg)
        recalled = None
        if saved is None and recall_allowed(cfg):  # an earlier champion fit for this concept: no training
            recalled = best_previous(cfg, p.champion, p.holdout, p.reference, p.concept["holds"], registry.history(),
                                     lambda v: reg.load_version(cfg, registry, v))
        if recalled is not None:
            return reinstate(cfg, registry, recalled, p.champion, trigger, incident_id, data_window, len(p.holdout),
                             started)
        tags = lineage_tags(cfg, "retrain", trigger, incident_id, p.champion.version, data_window)
        reason = story.reason_of(data_window)
        name = story.readable_name("retrain", trigger, reason=reason, incident_id=incident_id,
                                   parent=p.champion.version)
        with mlflow_run(registry.experiment_id(), name, tags, run_id=(saved or {}).get("run_id")) as run:
            if saved is None:
                mlflow.log_params(loop_params(p.loop, window_rows=len(p.recent), holdout_rows=len(p.holdout),
                                              recent_train_rows=len(p.rest), replay_rows=len(p.replayed),
                                              parent_version=p.champion.version, **task_params(cfg),
                                              **({"entrypoint": t.entrypoint} if t.entrypoint else {}),
                                              **{f"skipped_inputs_{k}": n for k, n in p.skipped_inputs.items()}))
                run_data.log_datasets(cfg, {"training": (f"{cfg.model.name} recent window", p.rest),
                                            "holdout": (f"{cfg.model.name} gate holdout", p.holdout)},
                                      target=target, data_window=data_window, from_store=True)
            log_reports(reports)
            trained = train(cfg, p, resume=resume, should_stop=should_stop, extra={"run_id": run.info.run_id},
                            progress=progress)
            if progress is not None:
                progress.stage("judging")
            mlflow.set_tags({"driftloop.start": trained.start,
                             "driftloop.concept_holds": str(p.concept["holds"]).lower(),
                             "driftloop.shift": str(p.concept.get("shift", ""))})
            examined = examine(cfg, p, trained, registry, window, levels=reference_levels(data_window))
            judgement = run_gates(examined.evidence)
            if progress is not None:
                progress.stage("publishing")
            out = publish(cfg, registry, run.info.run_id, p, trained, examined, judgement,
                          Lineage(trigger, incident_id, reason, data_window))
    out.duration_seconds = time.perf_counter() - started
    out.skipped_inputs = sum(p.skipped_inputs.values())
    log.info("retrain v%s -> v%s: %s (%s)", p.champion.version, out.challenger_version, out.outcome,
             "; ".join(out.reasons))
    return out


def rollback(cfg: DriftloopConfig) -> tuple[str, str]:
    """Move ``champion`` back to the previous champion: ``(from_version, to_version)``."""
    reg.check_reachable(cfg)
    with reg.translating(cfg, "rolling back"):
        registry = reg.Registry(cfg)
        moved = registry.roll_back()
    log.info("rolled back champion v%s -> v%s", *moved)
    return moved

