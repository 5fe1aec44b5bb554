"""A trained challenger's last steps in a retrain (trainer/retraining.py): :func:`examine` measures
it (held-out figures against the champion, its floors, registration, export, the live A/B) into the
:class:`~trainer.judge.Evidence` the gates weigh; :func:`publish` carries out the judgement (the
shadow hold, the champion alias) and records it: run metrics and tags, the version's tags, the run's
story, and the :class:`RetrainOutcome` the daemon reads from the retrain child's result.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

import mlflow
import pandas as pd

from monitor.config import DriftloopConfig
from trainer import registry as reg
from trainer import story
from trainer.baseline_training import held_out_intervals, reference_sample
from trainer.deployment import export_and_log
from trainer.entrypoint import example_rows
from trainer.gate import Floors, auc_noise, floors_of, significant_gain
from trainer.judge import Evidence, GateName, Judgement, Ruling
from trainer.live import compare_and_log
from trainer.metrics import comparison, model_figures, reference_figure, task_metrics
from trainer.outcomes import Baseline, RetrainOutcome
from trainer.rule_gate import rule_metrics
from trainer.runs import finite_output
from trainer.shadow import hold

if TYPE_CHECKING:
    from trainer.retraining import Prepared, Trained


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


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _floor_metrics(floors: Any) -> dict[str, float]:
    if isinstance(floors, Floors):
        return {"challenger_accuracy_lower": _nan(floors.accuracy_lower),
                "challenger_roc_auc_lower": _nan(floors.auc_lower), "majority_rate": floors.majority_rate}
    return {"challenger_r2": _nan(floors.r2), "challenger_r2_lower": _nan(floors.r2_lower)}


@dataclass
class Examined:
    evidence: Evidence
    exported: Any                 # trainer.forms' export result (None when export is off)


def examine(cfg: DriftloopConfig, p: Prepared, trained: Trained, registry: reg.Registry,
            window: pd.DataFrame, levels: Mapping[str, float] | None = None) -> Examined:
    """Score challenger and champion on the held-out rows, register the challenger (alias
    ``challenger``, with the baseline it would bring), export it, and compare it on live traffic.
    ``levels``: the daemon's reference level of each figure (``{"accuracy": .., "roc_auc": ..}``: what
    the champion must recover to), for the gate's significant-gain rule; a figure without one keeps
    the fixed margins."""
    t, target, task = cfg.training, cfg.model.target, cfg.model.task
    model, champion, holdout = trained.model, p.champion, p.holdout
    challenger_out = finite_output(model.predict_proba(holdout), f"{len(holdout)} gate holdout rows")
    challenger_m = evaluate_model(cfg, model, holdout)
    champion_m = evaluate_model(cfg, champion.model, holdout)
    floors = floors_of(holdout[target].to_numpy(), challenger_out, cfg.model.threshold, t.gate.confidence, task)
    champion_out = champion.model.predict_proba(holdout)
    noise = auc_noise(task, holdout[target].to_numpy(), champion_out, challenger_out, t.gate.confidence)
    primary = cfg.model.kind.primary_metric
    significant = significant_gain(task, holdout[target].to_numpy(), champion_out, challenger_out,
                                   champion_m.get(primary, float("nan")), (levels or {}).get(primary), t.gate,
                                   cfg.model.threshold, levels=levels)
    # The baseline a promoted challenger brings: the recent rows (the new normal), held-out first.
    new_reference = reference_sample(cfg, holdout, p.rest, model=model, seed=t.seed)
    reg.log_baseline(Baseline(reference=new_reference, metrics=challenger_m,
                              intervals=held_out_intervals(cfg, challenger_out, holdout)))
    version = reg.log_model(model, example_rows(cfg, model, holdout), registry)
    registry.client.set_registered_model_alias(registry.name, reg.CHALLENGER, version)
    exported = export_and_log(model, new_reference, holdout, cfg, version)  # never raises
    live = compare_and_log(model, p.recent, window, cfg, champion.version)  # never raises
    evidence = Evidence(
        task=task, gate=t.gate, shadow_windows=t.shadow.windows, challenger=challenger_m, champion=champion_m,
        challenger_reference=reference_score(cfg, model, p.reference_eval),
        champion_reference=reference_score(cfg, champion.model, p.reference_eval), floors=floors, auc_noise=noise,
        concept_holds=bool(p.concept["holds"]),
        challenger_rules=_with_rule_metrics(cfg, model, holdout, challenger_m),
        champion_rules=_with_rule_metrics(cfg, champion.model, holdout, champion_m),
        rules=cfg.alerts.rules, rules_mode=cfg.alerts.mode,
        deployed=None if exported is None else exported.deployed(), live=live, version=version,
        champion_version=champion.version, current_champion=lambda: registry.alias_version(reg.CHAMPION),
        significant=significant)
    return Examined(evidence, exported)


_OUTCOMES: dict[Ruling, Literal["promoted", "rejected", "shadow"]] = {
    Ruling.PROMOTED: "promoted", Ruling.REJECTED: "rejected", Ruling.SHADOW: "shadow"}


@dataclass(frozen=True)
class Lineage:
    trigger: str
    incident_id: Any
    reason: Any                   # story.reason_of(data_window)
    data_window: Any


def publish(cfg: DriftloopConfig, registry: reg.Registry, run_id: str, p: Prepared, trained: Trained,
            examined: Examined, judgement: Judgement, lineage: Lineage) -> RetrainOutcome:
    """Carry out ``judgement`` (hold in shadow, or move ``champion``) and record it."""
    e, task = examined.evidence, cfg.model.kind
    ruling, reasons, version = judgement.ruling, judgement.reasons, e.version
    if ruling is Ruling.SHADOW:  # passed: now it must hold its own on live traffic first
        hold(registry, version, e.champion_version, e.shadow_windows, time.time())
    alias = judgement.verdict(GateName.ALIAS)
    current = alias.data["current"] if alias is not None else registry.alias_version(reg.CHAMPION)
    promote = ruling is Ruling.PROMOTED
    previous = registry.make_champion(version) if promote else None
    figure = task.primary_metric  # of the reference and concept checks
    result = trained.result
    metrics = {
        **comparison(task, e.challenger, e.champion),
        f"challenger_reference_{figure}": e.challenger_reference, f"champion_reference_{figure}": e.champion_reference,
        "holdout_rows": float(len(p.holdout)), "train_rows": float(len(p.fit_rows)),
        "replay_rows": float(len(p.replayed)), "epochs_run": float(result.epochs_run),
        f"champion_recent_{figure}": p.concept["recent"], f"champion_reference_self_{figure}": p.concept["reference"],
        **_floor_metrics(e.floors),
        "best_epoch": float(result.best_epoch), "samples_per_second": result.samples_per_second,
        "promoted": 1.0 if promote else 0.0,
    }
    mlflow.log_metrics(metrics)
    outcome_tags = {"driftloop.outcome": str(ruling), "driftloop.reasons": "\n".join(reasons)[:4900],
                    "driftloop.version": version, "driftloop.champion_before": e.champion_version,
                    "driftloop.champion_after": version if promote else (current or ""),
                    "driftloop.gates": ", ".join(f"{v.gate}={'pass' if v.passed else v.kind}"
                                                 for v in judgement.verdicts)}
    mlflow.set_tags(outcome_tags)
    for key in ("driftloop.outcome", "driftloop.reasons", "driftloop.champion_before"):
        registry.client.set_model_version_tag(registry.name, version, key, outcome_tags[key])
    registry.client.set_model_version_tag(registry.name, version, "driftloop.kind", "retrain")
    named = dict(reason=lineage.reason, incident_id=lineage.incident_id, parent=e.champion_version)
    story.record(registry, run_id, version, story.retrain_note(
        trigger=lineage.trigger, data_window=lineage.data_window, version=version, outcome=str(ruling),
        reasons=reasons, challenger=e.challenger, champion=e.champion, concept=p.concept, figure=figure,
        start=trained.start, exported=examined.exported,
        rows={"train": len(p.fit_rows), "replay": len(p.replayed), "holdout": len(p.holdout)}, **named),
        story.readable_name("retrain", lineage.trigger, version=version, **named))
    return RetrainOutcome(outcome=_OUTCOMES[ruling], challenger_version=version,
                          champion_version=version if promote else (current or e.champion_version),
                          run_id=run_id, metrics=metrics, reasons=reasons,
                          samples_per_second=result.samples_per_second, previous_champion_version=previous,
                          verdicts=[v.to_dict() for v in judgement.verdicts])
