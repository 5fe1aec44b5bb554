"""The promotion gate: does the challenger replace the champion?

Rule (all must hold; every failed condition becomes a reason recorded on the run):

1. On the held-out recent rows (the same rows for both models), the challenger's accuracy gain is
   at least ``training.gate.min_accuracy_gain`` AND its ROC AUC gain at least ``training.gate.min_auc_gain``.
   While the champion sits below the reference level there, a smaller accuracy gain passes when the
   paired McNemar test proves it (``training.gate.significant_gain``, :func:`significant_gain`): the
   bar is what the current evidence attains, not a fixed step.
   With a margin of 0 on a metric that reads "not worse", and for ROC AUC "not significantly
   worse": a loss within the paired DeLong test's one-sided margin at ``training.gate.confidence``
   (:func:`auc_noise`) is noise, not worse. (A prior shift moves the best threshold and not the
   ranking: a challenger fixing the accuracy by 15 points with the same ranking, ROC AUC -0.0002,
   was refused again and again.) Both margins 0 still need (2).
2. It is strictly better on at least one of the two: a tie everywhere keeps the champion (moving
   the alias costs a rollout and a new baseline, so change needs a reason).
3. It is good, not only better: on the held-out rows its ROC AUC's lower confidence bound
   (DeLong, ``training.gate.confidence``) is above 0.5 (it ranks better than chance, shown) and its accuracy
   is not shown worse than the majority-class rate (the upper Wilson bound reaches it), so a
   challenger that beats a broken champion by being less broken (4.7 % accuracy against 0.3 %, ROC
   AUC 0.25) is never promoted. Accuracy is not asked to *prove* it beats the majority rate: with
   10 % positives a good ranker's accuracy at the threshold sits near 90 %, and a few hundred
   held-out rows cannot show the difference, which refused good challengers again and again.
4. It has not forgotten the old data *while the old concept still holds*: on the champion's
   reference sample its accuracy is at most ``training.gate.reference_floor`` below the champion's. This applies
   only when the champion still does on the recent rows about what it did on its reference
   (within ``alerts.accuracy_drop``); after a real concept change (the champion fails on recent
   rows) the old labels are wrong now and forgetting them is the point, so the rule is skipped and
   the run says so.

Why both metrics: accuracy is what users feel at the configured threshold, ROC AUC is the ranking
quality that survives a threshold change; a model that buys accuracy by wrecking the ranking (or
the reverse) is not an improvement.

Per task (:func:`judge` picks the rule for the task's lead figures, ``Task.lead_metrics``):

- multiclass: the same rule on accuracy (the most probable class) and the one-vs-rest macro ROC
  AUC; floors: accuracy not shown worse than the majority-class rate (upper Wilson bound), macro
  ROC AUC lower bound above 0.5.
- regression (:func:`decide_regression`): the challenger's MAE is at least
  ``training.gate.min_mae_gain`` (relative, 0.02 = 2 % lower) below the champion's and its RMSE not
  higher; floor: its R² lower bound (``training.gate.confidence``, one-sided) above 0, i.e. shown better
  than predicting the mean; forgetting: its MAE on the champion's reference sample at most
  ``training.gate.reference_floor`` (relative) above the champion's, under the same concept condition as (4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from monitor.tasks import Task, task_of

# Metrics are ratios of row counts, so a gain of exactly the margin (9 more right of 900 for 0.01) can
# come out of the float subtraction a hair below it (0.57 - 0.56 = 0.00999...): compare with this slack.
_EPS = 1e-9


@dataclass
class Decision:
    promote: bool
    reasons: list[str] = field(default_factory=list)  # why not (or, when promoted, why yes)


@dataclass(frozen=True)
class Floors:
    """The challenger's absolute quality on the held-out rows, with confidence bounds."""
    accuracy_lower: float | None   # Wilson lower bound of its accuracy
    majority_rate: float           # accuracy of always predicting the more frequent class
    auc_lower: float | None        # DeLong lower bound of its ROC AUC (None: undefined)
    accuracy_upper: float | None = None  # Wilson upper bound of its accuracy (None: judged on the lower)


@dataclass(frozen=True)
class RegressionFloors:
    """A regression challenger's absolute quality on the held-out rows."""
    r2: float | None
    r2_lower: float | None   # lower bound of its R² (None: undefined, e.g. a constant target)


def floors_of(y_true, scores, threshold: float, confidence: float,
              task: str = "binary") -> Floors | RegressionFloors:
    """The floors of one model's served output (``predict_proba``) on held-out rows (two-sided
    interval at ``2c - 1``, i.e. one-sided bounds at ``confidence``): the task's figures
    (:meth:`monitor.tasks.Task.floor_figures`) in the floors of its rule."""
    kind = task_of(task)
    return _rule(kind).floors(**kind.floor_figures(y_true, scores, threshold, 2 * confidence - 1))


def decide(challenger: dict[str, float], champion: dict[str, float], challenger_reference_accuracy: float,
           champion_reference_accuracy: float, *, min_accuracy_gain: float, min_auc_gain: float,
           reference_floor: float, floors: Floors | None = None, concept_holds: bool = True,
           auc_noise: float = 0.0, significant: str | None = None) -> Decision:
    """The rule of accuracy and ROC AUC (module doc). ``significant``: set (a sentence saying why)
    when a gain is proven by a paired test while the champion sits below the reference level of that
    figure (:func:`significant_gain`); then an accuracy gain under ``min_accuracy_gain`` passes, as
    long as the accuracy does not fall by ``min_accuracy_gain`` or more (a proven ROC AUC gain)."""
    acc_gain = challenger["accuracy"] - champion["accuracy"]
    auc_gain = challenger["roc_auc"] - champion["roc_auc"]
    ref_loss = champion_reference_accuracy - challenger_reference_accuracy
    failed: list[str] = []
    if floors is not None:
        if floors.auc_lower is None or not floors.auc_lower > 0.5:
            failed.append("not good: ROC AUC lower bound "
                          + ("undefined" if floors.auc_lower is None else f"{floors.auc_lower:.4f}")
                          + f" is not above 0.5 (ROC AUC {challenger['roc_auc']:.4f})")
        which, bound = (("upper", floors.accuracy_upper) if floors.accuracy_upper is not None
                        else ("lower", floors.accuracy_lower))
        if bound is None or bound < floors.majority_rate - _EPS:
            failed.append(f"not good: accuracy {which} bound "
                          + ("undefined" if bound is None else f"{bound:.4f}")
                          + f" is below the majority-class rate {floors.majority_rate:.4f} "
                          f"(accuracy {challenger['accuracy']:.4f})")
    if any(math.isnan(v) for v in (acc_gain, auc_gain)):
        failed.append("held-out metrics are undefined (NaN); cannot compare")
    else:
        need = -min_accuracy_gain if significant else min_accuracy_gain
        if acc_gain < need - _EPS:
            failed.append(f"accuracy gain {acc_gain:+.4f} < required {need:.4f} "
                          f"({challenger['accuracy']:.4f} vs champion {champion['accuracy']:.4f})")
        if auc_gain < min_auc_gain - _EPS and not (min_auc_gain == 0 and auc_gain >= -auc_noise):
            failed.append(f"ROC AUC gain {auc_gain:+.4f} < required {min_auc_gain:.4f} "
                          f"({challenger['roc_auc']:.4f} vs champion {champion['roc_auc']:.4f})")
        if acc_gain <= 0 and auc_gain <= 0:
            failed.append("not better than the champion on accuracy or ROC AUC")
    if concept_holds and (math.isnan(ref_loss) or ref_loss > reference_floor + _EPS):
        failed.append(f"forgets the reference data: accuracy on the champion's reference sample "
                      f"{challenger_reference_accuracy:.4f} vs {champion_reference_accuracy:.4f} "
                      f"(loss {ref_loss:.4f} > reference_floor {reference_floor:.4f})")
    if failed:
        return Decision(False, _dedupe(failed))
    forgetting = (f"reference accuracy loss {ref_loss:.4f} <= {reference_floor:.4f}" if concept_holds else
                  f"reference accuracy loss {ref_loss:.4f} not limited: the champion's concept no longer holds "
                  "on recent rows")
    why = (f"; under min_accuracy_gain {min_accuracy_gain:.4f} but {significant}"
           if significant and acc_gain < min_accuracy_gain - _EPS else "")
    return Decision(True, [f"accuracy {acc_gain:+.4f}, ROC AUC {auc_gain:+.4f} on held-out recent rows{why}; "
                           f"{forgetting}"])


def decide_regression(challenger: dict[str, float], champion: dict[str, float], challenger_reference_mae: float,
                      champion_reference_mae: float, *, min_mae_gain: float, reference_floor: float,
                      floors: RegressionFloors | None = None, concept_holds: bool = True,
                      significant: str | None = None) -> Decision:
    """The gate for regression (module doc): ``challenger`` / ``champion`` hold ``mae`` and ``rmse``
    on the same held-out rows; ``significant`` as in :func:`decide` (a proven MAE fall under
    ``min_mae_gain``)."""
    failed: list[str] = []
    if floors is not None and (floors.r2_lower is None or not floors.r2_lower > 0):
        failed.append("not good: R² lower bound "
                      + ("undefined" if floors.r2_lower is None else f"{floors.r2_lower:.4f}")
                      + " is not above 0: not shown better than predicting the mean"
                      + ("" if floors.r2 is None else f" (R² {floors.r2:.4f})"))
    mae, old_mae, rmse, old_rmse = challenger["mae"], champion["mae"], challenger["rmse"], champion["rmse"]
    if any(math.isnan(v) for v in (mae, old_mae, rmse, old_rmse)):
        failed.append("held-out metrics are undefined (NaN); cannot compare")
    else:
        gain = _relative_fall(mae, old_mae)
        if gain < min_mae_gain - _EPS and not significant:
            failed.append(f"MAE gain {gain:+.2%} < required {min_mae_gain:.2%} "
                          f"({mae:.4g} vs champion {old_mae:.4g})")
        if rmse > old_rmse * (1 + _EPS) + _EPS:
            failed.append(f"RMSE rises: {rmse:.4g} vs champion {old_rmse:.4g}")
        if gain <= 0 and rmse >= old_rmse:
            failed.append("not better than the champion on MAE or RMSE")
    rise = -_relative_fall(challenger_reference_mae, champion_reference_mae)
    if concept_holds and (math.isnan(rise) or rise > reference_floor + _EPS):
        failed.append(f"forgets the reference data: MAE on the champion's reference sample "
                      f"{challenger_reference_mae:.4g} vs {champion_reference_mae:.4g} "
                      f"(rise {rise:.2%} > reference_floor {reference_floor:.2%})")
    if failed:
        return Decision(False, _dedupe(failed))
    forgetting = (f"reference MAE rise {rise:+.2%} <= {reference_floor:.2%}" if concept_holds else
                  f"reference MAE rise {rise:+.2%} not limited: the champion's concept no longer holds on recent rows")
    why = (f"; under min_mae_gain {min_mae_gain:.2%} but {significant}"
           if significant and _relative_fall(mae, old_mae) < min_mae_gain - _EPS else "")
    return Decision(True, [f"MAE {-_relative_fall(mae, old_mae):+.2%} ({mae:.4g} vs {old_mae:.4g}), RMSE "
                           f"{rmse:.4g} vs {old_rmse:.4g} on held-out recent rows{why}; {forgetting}"])


def _relative_fall(new: float, old: float) -> float:
    """How much lower ``new`` is than ``old``, relative to ``old`` (an error; 0.1 = 10 % lower)."""
    if math.isnan(new) or math.isnan(old):
        return math.nan
    if old > 0:
        return (old - new) / old
    return 0.0 if new <= old else -math.inf  # a perfect champion: nothing to gain, any error is a rise


def auc_noise(task: str, y: Any, champion_output: Any, challenger_output: Any, confidence: float) -> float:
    """The ROC AUC loss that is not significantly worse: the one-sided margin of the paired DeLong
    test of challenger - champion on the same held-out rows (binary: scores; multiclass: class
    probabilities, macro one-vs-rest; ``y`` as the gate's rows hold it). 0 when it cannot be
    computed (a class with fewer than two rows), which keeps the strict "not lower" reading."""
    from monitor.stats import _z
    try:
        found = task_of(task).paired_auc(y, champion_output, challenger_output)  # None: the task has no ROC AUC
    except (ValueError, IndexError, TypeError):
        return 0.0
    if found is None or not math.isfinite(found.variance):
        return 0.0
    return float(_z(2 * confidence - 1) * math.sqrt(found.variance))


def judge(task: str, challenger: dict[str, float], champion: dict[str, float], challenger_reference: float,
          champion_reference: float, gate: Any, *, floors: Floors | RegressionFloors | None = None,
          concept_holds: bool = True, auc_noise: float = 0.0, significant: str | None = None) -> Decision:
    """The gate of ``task`` with the margins of ``gate`` (training.gate, a GateConfig). The reference
    figures are accuracy (classifiers) or MAE (regression) on the champion's reference sample."""
    return _rule(task_of(task)).judge(challenger, champion, challenger_reference, champion_reference, gate,
                                      floors, concept_holds, auc_noise, significant)


def significant_gain(task: str, y: Any, champion_output: Any, challenger_output: Any, champion_figure: float,
                     level: float | None, gate: Any, threshold: float, *,
                     levels: Mapping[str, float] | None = None) -> str | None:
    """Why a gain under the fixed margin still counts, or None: with ``gate.significant_gain``, the
    champion's task figure on the held-out rows (``champion_figure``: accuracy, or MAE) is worse
    than the reference ``level`` (what the loop once reached, or the attainable level it decided)
    and the paired test of the two models on those rows (McNemar; regression: paired t on the
    absolute errors) shows the challenger better at one-sided ``1 - gate.confidence``. The bar is
    what the evidence shows attainable, not a fixed step: small real gains toward a level the
    champion has not recovered are taken, noise is not, and a champion at its level keeps the
    fixed margin (no churn).

    ``levels``: the reference level of the task's other paired figures (``{"roc_auc": 0.92}``). Each
    is tried after the first the same way, the champion's figure read from its test: a model whose
    ranking broke while its accuracy barely moved (a feature sent in other units) is recovered by a
    challenger that proves its ROC AUC back, not by an accuracy step it never lost. :func:`decide`
    then asks only that the accuracy does not fall by the margin."""
    if not gate.significant_gain:
        return None
    kind = task_of(task)
    try:
        tests = kind.paired_tests(y, champion_output, challenger_output, threshold)
    except (ValueError, IndexError, TypeError):
        return None
    for i, (metric, _, test, a, b, p, higher) in enumerate(tests):
        figure, bar = (champion_figure, level) if i == 0 else (a, (levels or {}).get(metric))
        if bar is None or not math.isfinite(bar) or figure is None or not math.isfinite(figure):
            continue
        below = figure < bar - _EPS if higher else figure > bar + _EPS
        better = b > a if higher else b < a
        if not (below and better) or p is None or not math.isfinite(p):
            continue
        one_sided = p / 2
        if one_sided >= 1 - gate.confidence:
            continue
        return (f"significant ({test} one-sided p = {one_sided:.4f} < {1 - gate.confidence:.2f}) while the champion's "
                f"{metric} {figure:.4g} is below the reference level {bar:.4g}")
    return None


def _judge_gains(challenger: dict[str, float], champion: dict[str, float], challenger_reference: float,
                 champion_reference: float, gate: Any, floors: Any, concept_holds: bool, auc_noise: float,
                 significant: str | None = None) -> Decision:
    """:func:`decide` with the margins of ``gate``: the rule of accuracy and ROC AUC."""
    return decide(challenger, champion, challenger_reference, champion_reference,
                  min_accuracy_gain=gate.min_accuracy_gain, min_auc_gain=gate.min_auc_gain,
                  reference_floor=gate.reference_floor, floors=floors if isinstance(floors, Floors) else None,
                  concept_holds=concept_holds, auc_noise=auc_noise, significant=significant)


def _judge_errors(challenger: dict[str, float], champion: dict[str, float], challenger_reference: float,
                  champion_reference: float, gate: Any, floors: Any, concept_holds: bool, auc_noise: float,
                  significant: str | None = None) -> Decision:
    """:func:`decide_regression` with the margins of ``gate``: the rule of MAE and RMSE."""
    return decide_regression(challenger, champion, challenger_reference, champion_reference,
                             min_mae_gain=gate.min_mae_gain, reference_floor=gate.reference_floor,
                             floors=floors if isinstance(floors, RegressionFloors) else None,
                             concept_holds=concept_holds, significant=significant)


@dataclass(frozen=True)
class _Rule:
    """One promotion rule: the floors it reads and the decision it makes."""
    floors: Callable[..., Floors | RegressionFloors]
    judge: Callable[..., Decision]


#: The rule for a task's lead figures (:attr:`monitor.tasks.Task.lead_metrics`): a task whose
#: headline is accuracy and ROC AUC is judged by :func:`decide`, one of MAE and RMSE by
#: :func:`decide_regression`.
_RULES = {("accuracy", "roc_auc"): _Rule(Floors, _judge_gains), ("mae", "rmse"): _Rule(RegressionFloors, _judge_errors)}


def _rule(task: Task) -> _Rule:
    return _RULES[task.lead_metrics]


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def cost_refusals(deployed: dict[str, Any] | None, *, max_latency_ms: float | None,
                  max_model_mb: float | None) -> list[str]:
    """Why the challenger is too slow or too big for its deployment target (empty: it fits, or no
    limit is set). ``deployed``: ``{"form", "size_bytes", "p99_1_ms"}`` of the form that would be
    served (INT8 when published, else ONNX fp32); None when no form was published, which fails
    any limit that is set, since nothing deployable was measured."""
    if max_latency_ms is None and max_model_mb is None:
        return []
    if deployed is None:
        return ["cost limits are set (training.gate.max_latency_ms / max_model_mb) but no exported form was "
                "published to measure"]
    failed = []
    if max_latency_ms is not None and deployed["p99_1_ms"] > max_latency_ms:
        failed.append(f"too slow: {deployed['form']} p99 single-row latency {deployed['p99_1_ms']:.3f} ms > "
                      f"training.gate.max_latency_ms {max_latency_ms:g}")
    size_mb = deployed["size_bytes"] / 1e6
    if max_model_mb is not None and size_mb > max_model_mb:
        failed.append(f"too big: {deployed['form']} is {size_mb:.3f} MB > training.gate.max_model_mb {max_model_mb:g}")
    return failed
