"""The worst segment values of a check, as text (``driftloop check`` and ``driftloop status``).

Works on the JSON form of a segment (``SegmentPerformance.to_dict()``), which is what ``status``
reads back from the check log. *Worst* is the largest gap between a value's bar (its accuracy on
the reference, or for time buckets the aggregate bar) and the upper end of its accuracy interval,
judged values first: the ranking the segment alert uses, so the top line is the one closest to
paging. Values without labels rank by their estimated accuracy's gap instead. A regression
model's values carry MAE in place of accuracy: worst is the largest relative rise of the lower end
of a value's MAE interval over its bar (its MAE on the reference, or the baseline MAE).
"""
from __future__ import annotations

import math
from typing import Any

from monitor.daemon.runtime.views.tasks import task_of

WORST_SHOWN = 5


def _regression(s: dict[str, Any]) -> bool:
    return s.get("mae") is not None or s.get("reference_mae") is not None


def aggregate_bar(result: dict[str, Any]) -> float | None:
    """The bar of values the reference cannot have (time buckets): the baseline accuracy, or MAE."""
    return result.get(f"baseline_{task_of(result).primary_metric}")


def _gap(s: dict[str, Any], aggregate: float | None) -> float:
    if _regression(s):
        bar = s.get("reference_mae")
        bar = aggregate if bar is None else bar
        ci = s.get("mae_ci") or [None, None]
        return (ci[0] - bar) / bar if bar and ci[0] is not None else -math.inf
    bar = s.get("reference_accuracy")
    bar = aggregate if bar is None else bar
    if bar is None:
        return -math.inf
    ci = s.get("accuracy_ci") or [None, None]
    if ci[1] is not None:
        return bar - ci[1]
    est = s.get("estimated_accuracy_ci") or [None, None]
    return bar - est[1] if est[1] is not None else -math.inf


def worst_segments(segments: list[dict[str, Any]], aggregate: float | None,
                   n: int = WORST_SHOWN) -> list[dict[str, Any]]:
    """The ``n`` values closest to (or past) their bar, judged values first."""
    ranked = sorted(segments, key=lambda s: (not s.get("judged"), -_gap(s, aggregate)))
    return ranked[:n]


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def _ci(ci: Any, spec: str = ".3f") -> str:
    return "" if not ci or ci[0] is None else f" [{ci[0]:{spec}}, {ci[1]:{spec}}]"


def segment_line(s: dict[str, Any], aggregate: float | None) -> str:
    """``hour_of_day=2  400 rows, 400 labelled; accuracy 0.2100 [0.171, 0.254] vs 0.8900; ...``"""
    label = f"{s['segment']}={s['value']}"
    regression = _regression(s)
    bar = s.get("reference_mae" if regression else "reference_accuracy")
    bar_text = f" vs {_f(bar)} (its reference)" if bar is not None else (
        f" vs {_f(aggregate)}" if aggregate is not None else "")
    parts = [f"{label:<22} {s['rows']:>7} rows, {s['labelled_rows']:>6} labelled"]
    if regression:
        parts.append(f"mae {_f(s.get('mae'))}{_ci(s.get('mae_ci'))}{bar_text}")
    else:
        parts += [f"accuracy {_f(s.get('accuracy'))}{_ci(s.get('accuracy_ci'))}{bar_text}",
                  f"recall {_f(s.get('recall'))}{_ci(s.get('recall_ci'))}"]
    if s.get("estimated_accuracy") is not None:
        parts.append(f"estimated {_f(s.get('estimated_accuracy'))}{_ci(s.get('estimated_accuracy_ci'))}")
    if s.get("drift_share") is not None:
        parts.append(f"drift share {s['drift_share']:.2f}")
    return "; ".join(parts) + ("" if s.get("judged") else "  (too few labels to judge)")


def render_worst(segments: list[dict[str, Any]], aggregate: float | None, n: int = WORST_SHOWN,
                 indent: str = "", total: int | None = None) -> list[str]:
    """A heading and one line per worst value; ``total``: how many values there were, when
    ``segments`` is already a selection (status keeps only the worst)."""
    if not segments:
        return []
    shown = worst_segments(segments, aggregate, n)
    total = len(segments) if total is None else total
    head = f"{indent}segments: the {len(shown)} worst of {total} values"
    head += " (all of them: driftloop check --json)" if total > len(shown) else ""
    return [head] + [f"{indent}  {segment_line(s, aggregate)}" for s in shown]
