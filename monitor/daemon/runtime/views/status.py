"""``driftloop status`` and ``GET /v1/status``: champion, last window's metrics, open incidents,
recent retrains. Built from the store and the registry only, so the CLI can answer with the
daemon stopped, and both answers agree. :func:`public_status` is the answer for a caller without
the bearer token."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Callable

from monitor.daemon.state.attempts import AttemptStore
from monitor.retrain_contract import RetrainProgress
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.state.incidents import IncidentStore
from monitor.daemon.runtime.views.constraints import render_constraints
from monitor.daemon.runtime.views.drifted_rows import drifted_summary, render_drifted
from monitor.daemon.runtime.views.segments import aggregate_bar, render_worst, worst_segments
from monitor.daemon.runtime.views.tasks import class_rows, estimated_rows, realised_rows, task_of

_TIME_KEYS = ("ts", "opened_at", "updated_at", "resolved_at", "started_at", "finished_at", "window_start", "window_end",
              "change_ts")


def iso(t: float | None) -> str | None:
    return None if t is None else (datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")
                                   .replace("+00:00", "Z"))


def _times(d: dict[str, Any]) -> dict[str, Any]:
    return {k: iso(v) if k in _TIME_KEYS and isinstance(v, (int, float)) else v for k, v in d.items()}


# Free text that may name the host (retrain errors, incident details, a check's message, the
# registry's error): hidden whole from untrusted callers, whatever it says.
# An input_uri names a file of the host or a bucket's key, whatever its form.
_TEXT_KEYS = frozenset({"error", "detail", "message", "estimation_error", "input_uri",
                        "problem", "example_values"})  # a constraints file's problem, the values that broke it
# Lists of files: untrusted callers get their count (the list's length), not the paths.
_PATH_LIST_KEYS = frozenset({"report_paths"})
# Any other text with an absolute or home path, or a URL (an MLflow URI), in it.
_HOST_TEXT = re.compile(r"""(?:^|[\s'"(=:,\[])(?:/|~/)[^\s/]|[A-Za-z][\w+.-]*://""")
HIDDEN = "hidden"


def public_status(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` (from :func:`collect_status`) as a caller without the bearer token may read it:
    the same structure, with states, outcomes, counts, versions, ids and figures kept, and every
    error text, incident detail, check message, path and URI replaced by ``"hidden"`` (a list of
    paths by as many); ``hidden`` counts the values hidden. The one place this is decided."""
    hidden = 0

    def walk(value: Any, key: str | None) -> Any:
        nonlocal hidden
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if key in _PATH_LIST_KEYS:
                hidden += len(value)
                return [HIDDEN] * len(value)
            return [walk(v, key) for v in value]
        if isinstance(value, str) and value and (key in _TEXT_KEYS or _HOST_TEXT.search(value)):
            hidden += 1
            return HIDDEN
        return value

    public = walk(status, None)
    public["hidden"] = hidden
    return public


def _check_summary(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    result = row.pop("result", None) or {}
    features = result.get("features") or []
    row["drifted_features"] = [f.get("name") for f in features if isinstance(f, dict) and f.get("drifted")]
    for key in ("accuracy_ci", "roc_auc_ci", "min_labels", "min_labels_auto", "versions", "other_version_rows",
                "change", "change_ts",
                "precision", "recall", "f1", "predicted_positive_rate", "estimated_rows", "estimated_accuracy",
                "estimated_accuracy_ci", "estimated_roc_auc", "estimated_roc_auc_ci", "estimated_precision",
                "estimated_recall", "estimated_f1", "estimation_error", "label_selection", "label_maturity", "task",
                "constraints",
                *task_of(result).status_keys):
        if key in result:
            row[key] = result[key]
    drifted = drifted_summary(result)
    if drifted:
        row["drifted_rows"] = drifted
    segments = result.get("segments") or []
    if segments:
        row["segments_total"] = len(segments)
        row["worst_segments"] = worst_segments(segments, aggregate_bar(result))
    if row.get("status") == "ok" and row.get("verdict") is None:
        row["verdict"] = "judging"  # recorded before its verdict (a store written by an older release)
    return _times(row)


def collect_status(model: str, champion_version: Callable[[], str | None], checklog: CheckLog,
                   incidents: IncidentStore, attempts: AttemptStore, *, limit: int = 5,
                   extra: dict[str, Any] | None = None, levels: Any = None,
                   progress: Callable[[str], RetrainProgress | None] | None = None) -> dict[str, Any]:
    """``progress(attempt_id)``: a running retrain's progress (its job folder's ``progress.json``)."""
    try:
        version = champion_version()
        champion_error = None
    except Exception as exc:  # the registry being down must not hide the rest
        version, champion_error = None, str(exc)
    running = attempts.running()
    return {
        "model": model,
        "champion": {"version": version, **({"error": champion_error} if champion_error else {})},
        "last_check": _check_summary(checklog.last()),
        "open_incidents": [_times(i.to_dict()) for i in incidents.open_incidents()],
        "recent_incidents": [_times(i.to_dict()) for i in incidents.recent(limit)],
        "retrain_running": _running(running.to_dict(), progress) if running else None,
        "recent_retrains": [_times(a.to_dict()) for a in attempts.recent(limit)],
        "reference_level": _level(levels),
        **(extra or {}),
    }


def _running(attempt: dict[str, Any], progress: Callable[[str], RetrainProgress | None] | None) -> dict[str, Any]:
    found = progress(attempt["id"]) if progress is not None else None
    return {**_times(attempt), **({"progress": found.model_dump(mode="json")} if found is not None else {})}


def _level(levels: Any) -> dict[str, Any] | None:
    found = levels.read() if levels is not None else None
    if not found:
        return None
    version = found.get("reference_version")
    mae = {"mae": found["reference_mae"]} if found.get("reference_mae") is not None else {}
    # The attainable level decided after a change of concept (monitor.daemon.decisions.attainable):
    # a recorded decision, shown as one, not a silent lower bar.
    attainable = found.get("reference_attainable_version") is not None
    return {"accuracy": found.get("reference_accuracy"), "roc_auc": found.get("reference_roc_auc"), **mae,
            "set_by_version": str(int(version)) if version is not None and float(version).is_integer() else version,
            "attainable": attainable}


def _task_lines(c: dict[str, Any]) -> list[str]:
    """The last check's figures by their names, per task (binary: accuracy and ROC AUC as ever)."""
    task = task_of(c)
    lines = []
    for name, live, ci, base, _ in realised_rows(c):
        shown = task.shown_interval(ci)
        band = f" [{_fmt(shown[0])}, {_fmt(shown[1])}]" if shown else ""
        lines.append(f"  {name:<10} {_fmt(live)}{band} (baseline {_fmt(base)})")
    per_class = class_rows(c)  # a multiclass result's classes (no other task's result has per-class figures)
    if per_class:
        lines.append("  recall     " + ", ".join(f"{k} {_fmt(r, '.3f')}" for k, _, r, _ in per_class)
                     + " (per class)")
    (head, value, est_band), *others = estimated_rows(c)
    if value is not None:
        lo, hi = est_band or (None, None)
        lines.append(f"  estimated  {head} {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]"
                     + "".join(f", {name} {_fmt(est)}" for name, est, _ in task.status_estimates(others))
                     + f" ({task.estimation_source})")
    return lines


def labels_needed(need: int, auto: dict[str, int] | None) -> str:
    """The labelled rows a check needed before judging performance, and why: ``performance judged
    from 300 labelled rows (drift.min_labels auto: accuracy 291, roc_auc 12)``."""
    why = ("auto: " + ", ".join(f"{k} {v}" for k, v in auto.items()) if auto
           else "auto: no baseline to size it from" if auto is not None else "configured")
    return f"performance judged from {need} labelled rows (drift.min_labels {why})"


def _running_line(running: dict[str, Any]) -> str:
    """``running: att-... (epoch 3/30, val_loss 0.4123, 600 rows; 45 s)`` from the job folder's progress."""
    found = running.get("progress")
    if not found:
        return f"running: {running['id']}"
    progress = RetrainProgress.parse(found)
    return f"running: {running['id']} ({progress.describe()}; {progress.updated - progress.started:.0f} s)"


def _fmt(x: Any, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec) if isinstance(x, (int, float)) else str(x)


def render_status(s: dict[str, Any]) -> str:
    lines = [f"model        {s['model']}",
             f"champion     {'v' + s['champion']['version'] if s['champion'].get('version') else 'none'}"
             + (f"  ({s['champion']['error']})" if s["champion"].get("error") else "")]
    c = s.get("last_check")
    if c is None:
        lines.append("last check   never")
    else:
        lines.append(f"last check   {c['ts']}  {c['status']}  {c.get('message') or ''}".rstrip())
        if c["status"] == "ok":
            lines.append(f"  window     {c['window_rows']} rows, {c['labelled_rows']} labelled"
                         + (f"; {labels_needed(c['min_labels'], c.get('min_labels_auto'))}"
                            if c.get("min_labels") else ""))
            lines += _task_lines(c)
            if c.get("precision") is not None or c.get("recall") is not None:
                lines.append(f"  at thresh  precision {_fmt(c.get('precision'))}, recall {_fmt(c.get('recall'))}, "
                             f"f1 {_fmt(c.get('f1'))}")
            drifted = ", ".join(c.get("drifted_features") or []) or "none"
            lines.append(f"  drift      share {_fmt(c.get('drift_share'), '.2f')}; drifted: {drifted}")
            lines += render_drifted(c.get("drifted_rows") or [], c.get("id"))
            lines += render_constraints(c.get("constraints"), indent="  ")
            others = {v: d for v, d in (c.get("versions") or {}).items() if v != c.get("champion_version")}
            if others:
                lines.append("  others     " + "; ".join(
                    f"v{v}: {d['rows']} rows, accuracy {_fmt(d.get('accuracy'))}" for v, d in others.items())
                    + " (not judged against the champion)")
            if c.get("worst_segments"):
                lines += render_worst(c["worst_segments"], aggregate_bar(c), indent="  ",
                                      total=c.get("segments_total"))
            if c.get("verdict"):
                lines.append(f"  verdict    {c['verdict']}")
    level = s.get("reference_level")
    if level:
        what = (f"mae {_fmt(level.get('mae'))}" if level.get("mae") is not None and level.get("accuracy") is None
                else f"accuracy {_fmt(level.get('accuracy'))}, roc_auc {_fmt(level.get('roc_auc'))}")
        how = ("the attainable level decided after a change of concept; checks are judged against it"
               if level.get("attainable") else "recovery is judged against it")
        lines.append(f"reference    {what} (set by v{level.get('set_by_version')}; {how})")
    lines.append(f"incidents    {len(s['open_incidents'])} open")
    for i in s["open_incidents"]:
        flag = "  ESCALATED" if i.get("escalated") else ""
        drifted = f"  drifted checks {i['drifted_checks']}" if i.get("drifted_checks") else ""
        lines.append(f"  {i['id']}  {i['state']:<10} {i['reason']:<12} opened {i['opened_at']}  attempts "
                     f"{i['attempts']}{drifted}{flag}")
        if i.get("detail"):
            lines.append(f"    {i['detail']}")
        if i.get("change_ts"):
            lines.append(f"    performance changed at {i['change_ts']}; retraining data starts there")
    open_ids = {i["id"] for i in s["open_incidents"]}
    closed = [i for i in s.get("recent_incidents") or [] if i["id"] not in open_ids]
    if closed:
        lines.append("  recent closed (driftloop status --incident ID for the trail):")
        for i in closed:
            drifted = f"  drifted checks {i['drifted_checks']}" if i.get("drifted_checks") else ""
            lines.append(f"  {i['id']}  {i['state']:<10} {i['reason']:<12} opened {i['opened_at']}  attempts "
                         f"{i['attempts']}{drifted}")
    running = s.get("retrain_running")
    lines.append("retrains     " + (_running_line(running) if running else "none running"))
    for a in s["recent_retrains"]:
        what = a["challenger_version"] and f"v{a['challenger_version']}" or "-"
        why = "; ".join(a.get("reasons") or [])
        lines.append(f"  {a['id']}  {a['status']:<9} {a['trigger']:<8} {a['started_at']}  {what}  {why}".rstrip())
    return "\n".join(lines)


def collect_incident(incidents: IncidentStore, attempts: AttemptStore, incident_id: str) -> dict[str, Any]:
    """One incident with its event trail and retrain attempts (TransitionError when there is none)."""
    incident = incidents.get(incident_id)
    return {"incident": _times(incident.to_dict()),
            "events": [_times({k: v for k, v in e.items() if k != "incident_id"})
                       for e in incidents.events(incident_id)],
            "retrains": [_times(a.to_dict()) for a in attempts.for_incident(incident_id)]}


def render_incident(detail: dict[str, Any]) -> str:
    """One incident (from :func:`collect_incident`): its fields, every event in order, its retrains."""
    incident, events, attempts = detail["incident"], detail["events"], detail["retrains"]
    lines = [f"incident     {incident['id']}  {incident['state']}  ({incident['reason']}, {incident['trigger']})",
             f"opened       {incident['opened_at']}"]
    if incident.get("detail"):
        lines.append(f"detail       {incident['detail']}")
    lines.append("events")
    for e in events:
        lines.append(f"  {e['ts']}  {e['kind']:<22} {e['message']}".rstrip())
    if attempts:
        lines.append("retrains")
        for a in attempts:
            what = a["challenger_version"] and f"v{a['challenger_version']}" or "-"
            lines.append(f"  {a['id']}  {a['status']:<9} {a['started_at']}  {what}  "
                         f"{'; '.join(a.get('reasons') or [])}".rstrip())
    return "\n".join(lines)
