"""Human-readable output of one check (``driftloop check``)."""
from __future__ import annotations

from typing import Any

from monitor.daemon.checks import CheckOutcome
from monitor.daemon.policy import Breach
from monitor.daemon.segment_view import render_worst
from monitor.daemon.status import iso


def _f(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def _ci(ci: Any) -> str:
    if not ci or ci[0] is None:
        return "-"
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def render_check(outcome: CheckOutcome, breaches: list[Breach] | None, min_labels: int) -> str:
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
    breached = {b.reason: b for b in breaches or [] if not b.estimated}
    lines += ["", f"{'metric':<10} {'live':>8} {'CI':>18} {'baseline':>9} {'drop':>8}  verdict"]
    for name, live, ci, base in (("accuracy", r.accuracy, r.accuracy_ci, r.baseline_accuracy),
                                 ("roc_auc", r.roc_auc, r.roc_auc_ci, r.baseline_roc_auc)):
        drop = base - live if live is not None and base is not None else None
        if breaches is None:
            verdict = f"not judged: {outcome.labelled_rows} < {min_labels} labels"
        elif name in breached:
            verdict = f"BREACH (drop >= {breached[name].threshold:g})"
        else:
            verdict = "ok" if live is not None else "undefined"
        lines.append(f"{name:<10} {_f(live):>8} {_ci(ci):>18} {_f(base):>9} {_f(drop):>8}  {verdict}")
    lines += [f"{'rule':<10} BREACH {b.describe()} (alerts.rules)" for b in breaches or []
              if b.reason not in ("accuracy", "roc_auc")]
    lines += ["", f"{'estimated':<10} {'value':>8} {'band':>18}   (from the scores alone, all {r.estimated_rows} rows)"]
    for name, est, band in (("accuracy", r.estimated_accuracy, r.estimated_accuracy_ci),
                            ("roc_auc", r.estimated_roc_auc, r.estimated_roc_auc_ci),
                            ("precision", r.estimated_precision, None), ("recall", r.estimated_recall, None),
                            ("f1", r.estimated_f1, None)):
        lines.append(f"{name:<10} {_f(est):>8} {_ci(band):>18}")
    if r.estimation_error is not None:
        lines.append(f"realised - estimated accuracy on the labelled rows: {r.estimation_error:+.4f}")
    lines += ["", f"at threshold: precision {_f(r.precision)}, recall {_f(r.recall)}, f1 {_f(r.f1)} (labelled rows); "
              f"served positive rate {_f(r.predicted_positive_rate)}"]
    if r.segments:
        lines += [""] + render_worst([x.to_dict() for x in r.segments], r.baseline_accuracy, n=10)
    lines += ["", f"drift share {_f(r.drift_share, '.2f')} (dataset drift at >= {_f(r.drift_share_threshold, '.2f')}): "
              + ("DRIFT" if r.dataset_drift else "no dataset drift"),
              f"{'feature':<16} {'method':<16} {'score':>10} {'threshold':>10}  drifted"]
    for f in list(r.features) + [r.prediction_drift]:
        name = f.name if f is not r.prediction_drift else f"{f.name} (prediction)"
        mark = "YES" if f.drifted else ("skipped: " + f.skipped if f.skipped else "no")
        lines.append(f"{name:<16} {f.method or '-':<16} {_f(f.score):>10} {_f(f.threshold):>10}  {mark}")
    gaps = [(name, ratio, r.reference_missing_ratio.get(name)) for name, ratio in r.missing_ratio.items()
            if ratio or r.reference_missing_ratio.get(name)]
    if gaps:
        lines += ["", f"{'missing':<16} {'live':>8} {'baseline':>9}"]
        lines += [f"{name:<16} {ratio:>8.1%} {'-' if base is None else format(base, '.1%'):>9}" for name, ratio, base in gaps]
    for name, values in r.unseen_categories.items():
        lines.append(f"unseen  {name}: {len(values)} value(s) not in the champion's reference, scored as unknown: "
                     + ", ".join(values))
    if outcome.report_html:
        lines += ["", f"report  {outcome.report_html}"]
    return "\n".join(lines)
