"""The promotion gate: does the challenger replace the champion?

Rule (all must hold; every failed condition becomes a reason recorded on the run):

1. On the held-out recent rows (the same rows for both models), the challenger's accuracy gain is
   at least ``promote_min_accuracy_gain`` AND its ROC AUC gain at least ``promote_min_auc_gain``.
   With a margin of 0 on a metric that reads "not worse"; both margins 0 still need (2).
2. It is strictly better on at least one of the two: a tie everywhere keeps the champion (moving
   the alias costs a rollout and a new baseline, so change needs a reason).
3. It has not forgotten the old data: on the champion's reference sample its accuracy is at most
   ``reference_floor`` below the champion's. Under concept drift some loss there is expected (the
   old labels are partly wrong now), so the floor bounds forgetting rather than forbidding change.

Why both metrics: accuracy is what users feel at the configured threshold, ROC AUC is the ranking
quality that survives a threshold change; a model that buys accuracy by wrecking the ranking (or
the reverse) is not an improvement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

# Metrics are ratios of row counts, so a gain of exactly the margin (9 more right of 900 for 0.01) can
# come out of the float subtraction a hair below it (0.57 - 0.56 = 0.00999...): compare with this slack.
_EPS = 1e-9


@dataclass
class Decision:
    promote: bool
    reasons: list[str] = field(default_factory=list)  # why not (or, when promoted, why yes)


def decide(challenger: dict[str, float], champion: dict[str, float], challenger_reference_accuracy: float,
           champion_reference_accuracy: float, *, min_accuracy_gain: float, min_auc_gain: float,
           reference_floor: float) -> Decision:
    acc_gain = challenger["accuracy"] - champion["accuracy"]
    auc_gain = challenger["roc_auc"] - champion["roc_auc"]
    ref_loss = champion_reference_accuracy - challenger_reference_accuracy
    failed: list[str] = []
    if any(math.isnan(v) for v in (acc_gain, auc_gain)):
        failed.append("held-out metrics are undefined (NaN); cannot compare")
    else:
        if acc_gain < min_accuracy_gain - _EPS:
            failed.append(f"accuracy gain {acc_gain:+.4f} < required {min_accuracy_gain:.4f} "
                          f"({challenger['accuracy']:.4f} vs champion {champion['accuracy']:.4f})")
        if auc_gain < min_auc_gain - _EPS:
            failed.append(f"ROC AUC gain {auc_gain:+.4f} < required {min_auc_gain:.4f} "
                          f"({challenger['roc_auc']:.4f} vs champion {champion['roc_auc']:.4f})")
        if acc_gain <= 0 and auc_gain <= 0:
            failed.append("not better than the champion on accuracy or ROC AUC")
    if math.isnan(ref_loss) or ref_loss > reference_floor + _EPS:
        failed.append(f"forgets the reference data: accuracy on the champion's reference sample "
                      f"{challenger_reference_accuracy:.4f} vs {champion_reference_accuracy:.4f} "
                      f"(loss {ref_loss:.4f} > reference_floor {reference_floor:.4f})")
    if failed:
        return Decision(False, _dedupe(failed))
    return Decision(True, [f"accuracy {acc_gain:+.4f}, ROC AUC {auc_gain:+.4f} on held-out recent rows; "
                           f"reference accuracy loss {ref_loss:.4f} <= {reference_floor:.4f}"])


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
