"""Earlier champions first: a recurring concept (A -> B -> A) is served best by the model that was
fit for A, and that model is already registered.

Before a retrain trains anything, :func:`best_previous` scores up to ``training.try_previous_versions``
earlier champions (newest first, from the registry's champion history) on the held-out recent rows,
the rows the gate judges a challenger on, and puts each through the same gate against the current
champion (better, and good: the same floors; the forgetting rule as for a challenger). Of those
that pass, the best on the held-out rows (accuracy, then ROC AUC; regression: MAE, then RMSE) is returned; the retrain
then reinstates it (moves ``champion`` to it) instead of
training: no training time, and a model already proven on that concept. It is recorded like a
promotion: outcome ``promoted`` on the run, the attempt and the incident, with the reason
``earlier version N fits the current concept``; being a promotion by the loop, the reference level
is kept (``monitor.daemon.state.levels``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import pandas as pd

from monitor.tasks import task_of
from trainer.gate import Decision, floors_of, judge
from trainer.metrics import comparison, model_figures, ranking, reference_figure, task_metrics
from trainer.outcomes import Champion

log = logging.getLogger(__name__)


@dataclass
class Recalled:
    version: str
    metrics: dict[str, float]           # the earlier version's figures on the held-out rows (trainer.metrics)
    champion_metrics: dict[str, float]  # the current champion's on the same rows
    decision: Decision
    tried: list[str]                    # versions scored, newest first, with why each was not taken


def candidates(history: list[str], current: str, limit: int) -> list[str]:
    """Up to ``limit`` earlier champions, newest first, without the current one and repeats."""
    out: list[str] = []
    for v in reversed(history):
        if v != current and v not in out:
            out.append(v)
        if len(out) >= limit:
            break
    return out


def best_previous(cfg: Any, champion: Champion, holdout: pd.DataFrame, reference: pd.DataFrame,
                  concept_holds: bool, history: list[str],
                  load: Callable[[str], Champion]) -> Recalled | None:
    """The earlier champion that passes the gate against ``champion`` on ``holdout`` with the best
    held-out accuracy (then ROC AUC; regression: the lowest MAE, then RMSE), or None.
    ``load(version)`` gives a registered version (``trainer.registry.load_version``); a version
    that cannot be loaded is skipped."""
    t, target, threshold, task = cfg.training, cfg.model.target, cfg.model.threshold, task_of(cfg.model)
    limit = t.try_previous_versions
    if limit <= 0:
        return None
    y = holdout[target].to_numpy()
    champion_m = model_figures(task_metrics(task, y, champion.model.predict_proba(holdout), threshold))
    ref_y = reference[target].to_numpy()
    ref_cp = reference_figure(task, ref_y, champion.model.predict_proba(reference), threshold)
    tried: list[str] = []
    passed: list[Recalled] = []
    for version in candidates(history, str(champion.version), limit):
        try:
            earlier = load(version)
        except Exception as exc:  # removed artifacts, an old format: not a reason to fail the retrain
            tried.append(f"v{version}: not loadable ({type(exc).__name__}: {exc})")
            continue
        kind, classes = getattr(earlier.model, "task", "binary"), getattr(earlier.model, "classes", None)
        if kind != task:  # the same registered name once held another kind of model
            tried.append(f"v{version}: a {kind} model, not {task}")
            continue
        if task.output_classes(classes) != task.output_classes(cfg.model.classes):
            tried.append(f"v{version}: classes {classes} are not {cfg.model.classes}")
            continue
        scores = earlier.model.predict_proba(holdout)
        metrics = model_figures(task_metrics(task, y, scores, threshold))
        ref_ch = reference_figure(task, ref_y, earlier.model.predict_proba(reference), threshold)
        floors = floors_of(y, scores, threshold, t.gate.confidence, task)
        decision = judge(task, metrics, champion_m, ref_ch, ref_cp, t.gate, floors=floors, concept_holds=concept_holds)
        if decision.promote:
            passed.append(Recalled(version, metrics, champion_m, decision, tried))
            first, second = task.lead_metrics
            tried.append(f"v{version}: passes ({metrics[first]:.4f} / {metrics[second]:.4f})")
        else:
            tried.append(f"v{version}: {decision.reasons[0]}")
    if not passed:
        if tried:
            log.info("no earlier version fits the current concept: %s", "; ".join(tried))
        return None
    # The best of those that pass, not merely the newest: after A -> B -> A a model for B passes
    # against a worse model for B, and the model for A is older.
    best = max(passed, key=lambda r: ranking(task, r.metrics))
    best.tried = [t for t in tried if not t.startswith(f"v{best.version}:")]
    lead = task.primary_metric
    log.info("earlier version v%s fits the current concept (%s %.4f vs champion v%s %.4f)",
             best.version, lead, best.metrics[lead], champion.version, champion_m[lead])
    return best


@dataclass
class Scored:
    """One earlier version against the champion on the review's rows."""
    version: str
    metrics: dict[str, float]                  # its figures on the rows (trainer.metrics)
    better: list[str] = field(default_factory=list)  # where significantly better than the champion, with the test
    worse: list[str] = field(default_factory=list)   # where significantly worse
    note: str = ""                             # why it was not scored (not loadable, another task)
    # Significantly better on the headline figure (accuracy; regression: MAE) by at least the gate's
    # margin: what a reinstatement needs (a ROC AUC win alone made v1 and v3 swap back and forth).
    headline: bool = False


@dataclass
class Review:
    """The champion review (``training.review_interval_checks``): the champion and earlier
    versions scored on the same latest labelled rows."""
    champion: str
    rows: int
    alpha: float                               # per comparison: (1 - training.gate.confidence) / versions scored
    champion_metrics: dict[str, float]
    scored: list[Scored]
    best: Scored | None                        # the earlier version to reinstate, if any
    seconds: float = 0.0                       # scoring time, loads included

    @property
    def reason(self) -> str | None:
        if self.best is None:
            return None
        return (f"earlier version {self.best.version} is better on the last {self.rows} labelled rows: "
                + "; ".join(self.best.better))

    def summary(self) -> str:
        lead = "mae" if "mae" in self.champion_metrics else "accuracy"
        parts = [f"v{self.champion} (champion) {lead} {self.champion_metrics.get(lead, float('nan')):.4f}"]
        for s in self.scored:
            parts.append(f"v{s.version}: {s.note}" if s.note else
                         f"v{s.version} {lead} {s.metrics.get(lead, float('nan')):.4f}"
                         + (f", better: {'; '.join(s.better)}" if s.better else "")
                         + (f", worse: {'; '.join(s.worse)}" if s.worse else ""))
        return f"on the last {self.rows} labelled rows at p<{self.alpha:.3g}: " + "; ".join(parts)


def review_versions(history: list[str], current: str, limit: int) -> list[str]:
    """The last ``limit`` earlier champions, newest first, then the first champion (the
    never-retrained baseline) when it is not among them: at most ``limit + 1`` versions."""
    out = candidates(history, current, limit)
    if history and history[0] != current and history[0] not in out:
        out.append(history[0])
    return out


def review(cfg: Any, champion: Champion, rows: pd.DataFrame, versions: list[str],
           load: Callable[[str], Champion]) -> Review:
    """Score ``champion`` and each of ``versions`` on ``rows`` (labelled) and compare each earlier
    version with the champion by the paired tests of :mod:`monitor.paired`: accuracy (exact
    McNemar) and ROC AUC (DeLong; multiclass: macro), or MAE (paired t) for regression. A version
    is better when it wins on the headline figure (accuracy; regression: MAE) at ``alpha`` by at
    least the gate's margin (``training.gate.min_accuracy_gain``; ``training.gate.min_mae_gain``,
    relative) and loses on none; ``alpha`` is ``1 - gate_confidence`` divided by the versions compared
    (Bonferroni), because a review runs every few checks and must not churn on chance (a ROC AUC win
    of 0.004 alone, significant on 5,000 correlated rows, swapped two versions back and forth). Of
    those better, the best (accuracy then ROC AUC; MAE then RMSE) is ``best``."""
    import time

    import numpy as np

    started = time.perf_counter()
    m = cfg.model
    task = task_of(m)
    y = rows[m.target].to_numpy()
    ours = champion.model.predict_proba(rows)
    champion_m = model_figures(task_metrics(m.task, y, ours, m.threshold))
    alpha = (1 - cfg.training.gate.confidence) / max(1, len(versions))
    scored: list[Scored] = []
    for version in versions:
        try:
            earlier = load(version)
        except Exception as exc:  # removed artifacts, an old format: the review goes on without it
            scored.append(Scored(version, {}, note=f"not loadable ({type(exc).__name__}: {exc})"[:300]))
            continue
        kind, classes = getattr(earlier.model, "task", "binary"), getattr(earlier.model, "classes", None)
        if kind != task or task.output_classes(classes) != task.output_classes(m.classes):
            scored.append(Scored(version, {}, note=f"a {kind} model with classes {classes}, not comparable"))
            continue
        theirs = earlier.model.predict_proba(rows)
        found = Scored(version, model_figures(task_metrics(m.task, y, theirs, m.threshold)))
        t = cfg.training
        for i, (_, name, test, a, b, p, higher) in enumerate(task.paired_tests(np.asarray(y), ours, theirs,
                                                                                m.threshold)):
            if p is None or p >= alpha or a == b:
                continue
            better = (b > a) == higher
            (found.better if better else found.worse).append(f"{name} {b:.4f} vs {a:.4f} ({test} p={p:.2g})")
            if better and i == 0:  # the headline figure, by the gate's margin
                gain = (a - b) / a if not higher and a > 0 else b - a
                found.headline = gain >= (t.gate.min_accuracy_gain if higher else t.gate.min_mae_gain) - 1e-9
        scored.append(found)
    winners = [s for s in scored if s.headline and not s.worse]
    best = max(winners, key=lambda s: ranking(m.task, s.metrics)) if winners else None
    return Review(str(champion.version), len(rows), alpha, champion_m, scored, best, time.perf_counter() - started)


def recall_allowed(cfg: Any) -> bool:
    """Earlier versions are tried unless off, or unless promotion needs live evidence that a
    reinstated version has not gathered (``training.gate.requires_live_win``, ``training.shadow.windows``), or
    under torchrun (the other ranks train; rank 0 must too)."""
    from trainer import distributed
    t = cfg.training
    return (t.try_previous_versions > 0 and not t.gate.requires_live_win and t.shadow.windows == 0
            and not distributed.from_env().enabled)


def reinstate(cfg: Any, registry: Any, recalled: Recalled, champion: Champion, trigger: str, incident_id: Any,
              data_window: Any, holdout_rows: int, started: float, reason: str | None = None) -> Any:
    """Move ``champion`` back to the recalled version, recorded like a promotion: a retrain run
    (tag ``driftloop.start = previous``, metrics as a challenger's) and version tags. Returns the
    :class:`~trainer.outcomes.RetrainOutcome`; when the alias moved under us, ``rejected``.
    ``reason``: why, in words (default: it passed the gate on the held-out rows).

    The run is tagged with the version it reinstates *before* the alias moves, so a process killed
    between the two is settled from the registry (``monitor.daemon.retraining.registry``): the alias decides
    whether the reinstatement happened, and the run says whose it was."""
    import time

    import mlflow

    from trainer import registry as reg
    from trainer import story
    from trainer.outcomes import RetrainOutcome
    from trainer.runs import lineage_tags, mlflow_run

    version = recalled.version
    reasons = [reason or f"earlier version {version} fits the current concept: {recalled.decision.reasons[0]}"]
    tags = lineage_tags(cfg, "retrain", trigger, incident_id, champion.version, data_window)
    reason = story.reason_of(data_window)
    name = story.readable_name("reinstate", trigger, reason=reason, incident_id=incident_id, parent=champion.version,
                               version=version)
    with mlflow_run(registry.experiment_id(), name, tags) as run:
        mlflow.set_tags({"driftloop.start": "previous", "driftloop.version": version})  # the intent, first
        current = registry.alias_version(reg.CHAMPION)
        promote = current == champion.version
        if not promote:
            reasons = [f"champion changed during retraining (v{champion.version} -> v{current}); "
                       f"earlier version {version} not reinstated"]
        previous = registry.make_champion(version) if promote else None
        outcome: Literal["promoted", "rejected"] = "promoted" if promote else "rejected"
        metrics = {**comparison(cfg.model.task, recalled.metrics, recalled.champion_metrics),
                   "holdout_rows": float(holdout_rows), "previous_versions_tried": float(len(recalled.tried) + 1),
                   "promoted": 1.0 if promote else 0.0}
        mlflow.log_metrics(metrics)
        mlflow.set_tags({"driftloop.start": "previous", "driftloop.outcome": outcome,
                         "driftloop.reasons": "\n".join(reasons + recalled.tried)[:4900],
                         "driftloop.version": version, "driftloop.champion_before": champion.version,
                         "driftloop.champion_after": version if promote else (current or "")})
        note = story.reinstate_note(trigger=trigger, incident_id=incident_id, reason=reason, data_window=data_window,
                                    parent=champion.version, version=version, outcome=outcome,
                                    reasons=reasons + recalled.tried, challenger=recalled.metrics,
                                    champion=recalled.champion_metrics)
        story.record(registry, run.info.run_id, None, note, name)
        if promote:
            registry.client.set_model_version_tag(registry.name, version, "driftloop.reinstated_from", champion.version)
            registry.client.set_model_version_tag(registry.name, version, "driftloop.reinstated_by_run",
                                                  run.info.run_id)
            story.append_version_note(registry, version, f"**Reinstated** as champion over v{champion.version} "
                                      f"({name}; run `{run.info.run_id}`)")
    log.info("retrain v%s: %s earlier version v%s (%s)", champion.version,
             "reinstated" if promote else "did not reinstate", version, "; ".join(reasons))
    return RetrainOutcome(outcome=outcome, challenger_version=version,
                          champion_version=version if promote else (current or champion.version),
                          run_id=run.info.run_id, metrics=metrics, reasons=reasons,
                          duration_seconds=time.perf_counter() - started, samples_per_second=0.0,
                          previous_champion_version=previous)
