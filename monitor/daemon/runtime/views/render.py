"""Human-readable output of one check (``driftloop check``)."""
from __future__ import annotations

from typing import Any

from monitor.daemon.decisions.breach import Breach
from monitor.daemon.decisions.breach import level as _level
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.views.constraints import render_constraints
from monitor.daemon.runtime.views.segments import aggregate_bar, render_worst
from monitor.daemon.runtime.views.status import iso, labels_needed
from monitor.daemon.runtime.views.tasks import baseline_of, class_rows, estimated_rows, realised_rows, task_of, worse
from monitor.tasks import LOWER_IS_BETTER


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return "-"
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _bars(d: dict[str, Any], reference: Any) -> dict[str, float]:
    """The figures whose bar the reference level raises above the champion's baseline (lowers,
    for MAE): the daemon judges those against the level (monitor.daemon.decisions.policy)."""
    if reference is None:
        return {}
    out = {}
    for name, level in (("accuracy", reference.accuracy), ("roc_auc", reference.roc_auc), ("mae", reference.mae)):
        bar, against = _level(baseline_of(d, name), level, name in LOWER_IS_BETTER)
        if against == "reference level" and bar is not None:
            out[name] = bar
    return out


def render_check(outcome: CheckOutcome, breaches: list[Breach] | None, reference: Any = None) -> str:
    """``reference``: the reference level (monitor.daemon.state.levels.Level) the daemon judges this
    champion against; where it is above the baseline it is the bar shown and the drop is from it."""
    head = f"check {iso(outcome.ts)}  status {outcome.status}"
    if outcome.champion_version:
        head += f"  champion v{outcome.champion_version}"
    lines = [head]
    if outcome.window_rows:
        lines.append(f"window  {outcome.window_rows} rows, {outcome.labelled_rows} labelled, "
                     f"{iso(outcome.window_start)} .. {iso(outcome.window_end)}")
    r = outcome.result
    if r is None:
        lines.append(outcome.message)
        return "\n".join(lines)
    lines.append(f"labels  {labels_needed(r.min_labels, r.min_labels_auto)}")
    d = r.to_dict()
    task = task_of(d)
    breached = {b.key: b for b in breaches or [] if not b.estimated}
    w = max(10, *(len(name) for name, *_ in realised_rows(d)))  # 11 for multiclass's weighted_f1
    raised = _bars(d, reference)
    heading = "worse" if task.primary_metric in LOWER_IS_BETTER else "drop"  # an error's headline rises
    lines += ["", f"{'metric':<{w}} {'live':>8} {'CI':>18} {'bar':>9} {heading:>8}  verdict"]
    for name, live, ci, base, change in realised_rows(d):
        lower = name in LOWER_IS_BETTER
        if name in raised:
            base, change = raised[name], worse(name, live, raised[name])
        if breaches is None:
            verdict = f"not judged: {outcome.labelled_rows} < {r.min_labels} labels"
        elif name in breached:
            verdict = f"BREACH ({'rise' if lower else 'drop'} >= {breached[name].threshold:g})"
        else:
            verdict = "ok" if live is not None else "undefined"
        shown = "-" if change is None else format(change, "+.1%") if lower else _f(change)
        lines.append(f"{name:<{w}} {_f(live):>8} {_ci(ci):>18} {_f(base) + ('*' if name in raised else ''):>9} "
                     f"{shown:>8}  {verdict}")
    if raised:
        own = ", ".join(f"{n} {_f(baseline_of(d, n))}" for n in raised)
        lines.append(f"* the reference level, the daemon's bar: stricter than champion v{outcome.champion_version}'s "
                     f"own baseline ({own}) until the loop earns it back (POST /v1/reference/reset accepts the "
                     "baseline)")
    table = {name for name, *_ in realised_rows(d)}
    lines += [f"{'rule':<10} BREACH {b.describe()} (alerts.rules)" for b in breaches or []
              if b.key not in table]
    if task.class_metrics:  # the per-class figures (multiclass: precision and recall of each class)
        lines += ["", f"{'class':<16} {'precision':>9} {'recall':>8} {'baseline':>9}  (recall: share of the class's "
                  "labelled rows served that class)"]
        for c, p, rc, base in class_rows(d):
            marks = [m for m in task.class_metrics if f"{m}[{c}]" in breached]
            lines.append(f"{c:<16} {_f(p):>9} {_f(rc):>8} {_f(base):>9}"
                         + (f"  BREACH {', '.join(marks)}" if marks else ""))
    lines += ["", f"{'estimated':<10} {'value':>8} {'band':>18}   ({task.estimation_source_detail}, "
              f"all {r.estimated_rows} rows)"]
    for name, est, band in estimated_rows(d):
        lines.append(f"{name:<10} {_f(est):>8} {_ci(band):>18}")
    if r.estimation_error is not None:
        lines.append(f"realised - estimated {task.primary_metric} on the labelled rows: {r.estimation_error:+.4f}")
    at_threshold = ", ".join(f"{m} {_f(getattr(r, m))}" for m in task.threshold_metrics)  # binary's
    if at_threshold:
        lines += ["", f"at threshold: {at_threshold} (labelled rows); served positive rate "
                      f"{_f(r.predicted_positive_rate)}"]
    if r.segments:
        lines += [""] + render_worst([x.to_dict() for x in r.segments], aggregate_bar(d), n=10)
    lines += ["", f"drift share {_f(r.drift_share, '.2f')} (dataset drift at >= {_f(r.drift_share_threshold, '.2f')}): "
              + ("DRIFT" if r.dataset_drift else "no dataset drift"),
              f"{'feature':<16} {'method':<16} {'score':>10} {'threshold':>10}  drifted"]
    suffix = {id(r.prediction_drift): " (prediction)", **{id(f): " (output)" for f in r.output_drift}}
    if r.label_drift is not None:
        suffix[id(r.label_drift)] = " (labels)"
    for f in (list(r.features) + [r.prediction_drift] + list(r.output_drift)
              + ([r.label_drift] if r.label_drift else [])):
        name = f.name + suffix.get(id(f), "")
        mark = "YES" if f.drifted else ("skipped: " + f.skipped if f.skipped else "no")
        lines.append(f"{name:<16} {f.method or '-':<16} {_f(f.score):>10} {_f(f.threshold):>10}  {mark}")
    gaps = [(name, ratio, r.reference_missing_ratio.get(name)) for name, ratio in r.missing_ratio.items()
            if ratio or r.reference_missing_ratio.get(name)]
    if gaps:
        lines += ["", f"{'missing':<16} {'live':>8} {'baseline':>9}"]
        lines += [f"{name:<16} {ratio:>8.1%} {'-' if base is None else format(base, '.1%'):>9}"
                  for name, ratio, base in gaps]
    for name, values in r.unseen_categories.items():
        lines.append(f"unseen  {name}: {len(values)} value(s) not in the champion's reference, scored as unknown: "
                     + ", ".join(values))
    constraints = render_constraints(d.get("constraints"))
    if constraints:
        lines += [""] + constraints
    if outcome.report_html:
        lines += ["", f"report  {outcome.report_html}"]
    return "\n".join(lines)
