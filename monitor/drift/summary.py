"""A check's static summary page: ``<stem>.summary.html`` beside Evidently's interactive report.

Why it exists: MLflow's artifact viewer shows an HTML artifact in an ``<iframe sandbox="allow-scripts">``
loaded from a blob URL, so the page runs with an opaque origin. Evidently's interactive report is a
3-4 MB single-page app whose bundle reads ``window.localStorage`` without guarding it (material-table's
column groupings); in an opaque origin that throws a ``SecurityError`` and the app renders nothing, so
the report is a blank pane exactly where users look. This page needs no script at all: plain HTML
and inline CSS, readable in any sandbox, mail client or file browser.

Its size is bounded: at most ``MAX_FEATURES`` feature rows (drifted features first, then the rest
by name; the page says how many were left out) and every text cell cut to ``MAX_CELL`` characters,
so a summary stays well under ``MAX_BYTES`` whatever the model's width. The rows behind an
embedding drift show a thumbnail or a text snippet of their input where ``model.input_roots`` lets
it be read (monitor/drift/previews.py), at most ``previews.BUDGET`` characters more.
"""
from __future__ import annotations

from datetime import datetime, timezone
from html import escape
from typing import Any, Callable

MAX_FEATURES = 50        # feature rows shown; the interactive report and the JSON keep all of them
MAX_CELL = 120           # characters per text cell (names, methods, notes)
MAX_BYTES = 64 * 1024    # what a summary stays under (asserted by the tests at the row cap), previews aside
MAX_DRIFTED_ROWS = 20    # rows behind a drift shown, all embedding features together

_CSS = ("body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
        "th{background:#f3f3f3}.bad{color:#b00020;font-weight:600}.ok{color:#1b5e20}"
        "caption{text-align:left;font-weight:600;padding:.3em 0}"
        ".thumb{width:64px;height:auto;image-rendering:pixelated;display:block}"
        ".snippet{max-width:32em;font-size:.85em;color:#444}")


def _cell(value: Any) -> str:
    text = str(value)
    return escape(text if len(text) <= MAX_CELL else text[:MAX_CELL - 1] + "…")


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}g}" if isinstance(value, float) else str(value)
    return _cell(value)


def _ci(ci: Any) -> str:
    return f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else ""


def _table(caption: str, head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><caption>{caption}</caption><tr>{th}</tr>{body}</table>"


def _performance(result: Any) -> list[list[str]]:
    rows: list[list[str]] = []

    def add(name: str, value: Any, ci: Any = None, baseline: Any = None) -> None:
        if value is not None or baseline is not None:
            rows.append([name, _num(value) + _ci(ci), _num(baseline)])

    add("accuracy", result.accuracy, result.accuracy_ci, result.baseline_accuracy)
    add("ROC AUC", result.roc_auc, result.roc_auc_ci, result.baseline_roc_auc)
    add("precision", result.precision)
    add("recall", result.recall)
    add("MAE", result.mae, result.mae_ci, result.baseline_mae)
    add("RMSE", result.rmse, result.rmse_ci)
    add("estimated accuracy", result.estimated_accuracy, result.estimated_accuracy_ci)
    add("estimated ROC AUC", result.estimated_roc_auc, result.estimated_roc_auc_ci)
    add("estimated MAE", result.estimated_mae, result.estimated_mae_ci)
    return rows


def _feature_row(f: Any) -> list[str]:
    state = ('<span class="bad">drifted</span>' if f.drifted
             else f"skipped: {_cell(f.skipped)}" if f.skipped else '<span class="ok">stable</span>')
    note = ""
    if f.details:  # embedding features, descriptors, folded levels: say what was measured, briefly
        note = _cell(", ".join(_detail(k, v) for k, v in list(f.details.items())[:6]))
    return [_cell(f.name), state, _num(f.score), _num(f.threshold), _cell(f.method or "–"), note]


def _detail(key: str, value: Any) -> str:
    """One entry of a feature's details; a nested block (``folded``) as its own entries."""
    if isinstance(value, dict):
        return f"{key}: " + ", ".join(_detail(k, v) for k, v in list(value.items())[:6])
    return f"{key}={_num(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value}"


def _multivariate(block: Any) -> str:
    """The features-together verdict (:class:`monitor.drift.result.MultivariateDrift`) in one sentence."""
    if block.error is None:
        return f"<p>Features together (PCA reconstruction error): skipped: {_cell(block.skipped)}.</p>"
    state = '<span class="bad">drifted</span>' if block.drifted else '<span class="ok">stable</span>'
    return (f"<p>Features together (PCA reconstruction error): {state}, error {_num(block.error)} against the "
            f"reference's band [{_num(block.lower)}, {_num(block.upper)}] ({block.components} of {block.features} "
            f"components, {block.rows} rows).</p>")


def _descriptors(kind: Any) -> str:
    """One kind of ``drift.descriptors`` (:class:`monitor.drift.descriptors.KindReport`) in one sentence:
    its source, the inputs read on each side and why the others were not (the features table has
    the descriptors themselves)."""
    what = f"{_cell(kind.kind.capitalize())} descriptors ({_cell(kind.source)})"
    if kind.skipped:
        return f"<p>{what}: skipped: {_cell(kind.skipped)}.</p>"

    def side(count: Any) -> str:
        unread = ", ".join(f"{n} {_cell(k.value)}" for k, n in count.unread.items())
        return f"{count.read} of {count.rows} read" + (f' (<span class="bad">{unread}</span>)' if unread else "")

    vocabulary = kind.vocabulary
    words = f"; vocabulary: {_cell(vocabulary.source)}, {len(vocabulary)} words" if vocabulary is not None else ""
    return f"<p>{what}: window inputs {side(kind.current)}, reference {side(kind.reference)}{words}.</p>"


def summary_html(result: Any, *, interactive_name: str | None = None,
                 previews: Callable[[str | None], Any] | None = None) -> str:
    """The page for ``result`` (a :class:`monitor.drift.result.CheckResult`); no ``<script>``.
    ``previews``: a drifted row's input_uri to its :class:`monitor.drift.previews.Preview` (or None),
    asked in the page's order and bounded by itself (monitor/drift/previews.py)."""
    when = datetime.fromtimestamp(result.checked_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    share = (f'<span class="{"bad" if result.dataset_drift else "ok"}">{result.drift_share:.0%}</span> of features '
             f"drifted (threshold {result.drift_share_threshold:.0%}; "
             f"{'dataset drift' if result.dataset_drift else 'no dataset drift'})")
    head = [f"<h1>Drift check: {_cell(result.model)}</h1>",
            f"<p>Check <code>{_cell(result.check_id)}</code> at {when}: {result.window_rows} rows in the window, "
            f"{result.labelled_rows} labelled, reference {result.reference_rows} rows.</p>",
            f"<p>{share}.</p>"]
    if getattr(result, "multivariate", None) is not None:
        head.append(_multivariate(result.multivariate))
    if getattr(result, "descriptors", None) is not None:
        head += [_descriptors(kind) for kind in result.descriptors.kinds]
    if interactive_name:
        head.append(f"<p>Interactive Evidently report: <code>{_cell(interactive_name)}</code> (open it as a file "
                    "or in <code>evidently ui</code>; it needs scripts and local storage).</p>")
    parts = head
    perf = _performance(result)
    if perf:
        parts.append(_table("Performance (labelled rows; 95% interval)", ["metric", "value", "baseline"], perf))
    parts += _label_selection(getattr(result, "label_selection", None))
    parts += _label_maturity(getattr(result, "label_maturity", None))
    features = sorted(result.features, key=lambda f: (not f.drifted, f.name))
    shown = features[:MAX_FEATURES]
    rows = [_feature_row(f) for f in shown]
    cut = len(features) - len(shown)
    caption = f"Features ({len(features)})" + (f": {cut} stable ones not shown" if cut else "")
    parts.append(_table(caption, ["feature", "state", "score", "threshold", "method", "details"], rows))
    outputs = [result.prediction_drift, *result.output_drift[:MAX_FEATURES]]
    if result.label_drift is not None:
        outputs.append(result.label_drift)
    parts.append(_table("Model outputs and labels", ["column", "state", "score", "threshold", "method", "details"],
                        [_feature_row(f) for f in outputs]))
    parts += _drifted_rows(getattr(result, "drifted_rows", None) or [], previews)
    parts += _constraints(getattr(result, "constraints", None))
    body = "".join(parts)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Drift check '
            f"{_cell(result.model)} {when}</title><style>{_CSS}</style></head><body>{body}</body></html>")


def _label_selection(block: Any) -> list[str]:
    """One line when the labelled rows were chosen by the score (monitor.drift.selection): the bars
    of the realised figures moved by what the estimate expects of those rows."""
    if not isinstance(block, dict) or not block.get("chosen"):
        return []
    shift = block.get("shift") or {}
    moved = ", ".join(f"{_cell(k)} {float(v):+.4f}" for k, v in shift.items()) or "nothing (no estimate)"
    return [f"<p>Labels chosen by the score: the {block.get('labelled_rows')} labelled rows differ from the "
            f"{block.get('unlabelled_rows')} unlabelled rows of their period (score KS distance "
            f"{float(block.get('score_distance') or 0):.3f}); the bars of their realised figures moved by {moved}.</p>"]


def _label_maturity(block: Any) -> list[str]:
    """One line when labels arrive by outcome (monitor.drift.maturity): the young rows' labels wait."""
    if not isinstance(block, dict) or not block.get("immature_rows"):
        return []
    delays = ", ".join(f"{_cell(k)} {float(v):.1f} s" for k, v in (block.get("delays") or {}).items())
    return [f"<p>Labels arrive by outcome (95 % of each class within: {delays}): the labels of the "
            f"{int(block['immature_rows'])} rows made in the last {float(block.get('horizon_seconds') or 0):.1f} s "
            "before the newest label are not judged until the slower classes' labels have had time to arrive.</p>"]


def _constraints(block: Any) -> list[str]:
    """The window against the constraints file (:class:`monitor.drift.violations.ConstraintCheck`): its
    problem, or every violation (at most ``MAX_FEATURES`` rows)."""
    if block is None:
        return []
    if block.problem:
        return [f'<p>Constraints <code>{_cell(block.file)}</code>: <span class="bad">not checked</span>: '
                f"{_cell(block.problem)}</p>"]

    def plain(x: Any) -> str:
        if isinstance(x, dict):
            return ", ".join(f"{k} {_num(v)}" for k, v in x.items() if v is not None)
        return _num(x)

    rows = [[_cell(v.column), _cell(v.check.value), str(v.rows), f"{v.share:.2%}", plain(v.expected),
             plain(v.observed), _cell(", ".join(str(e) for e in v.examples))] for v in block.violations[:MAX_FEATURES]]
    state = (f'<span class="bad">{len(block.violations)} violation(s)</span>' if block.violations
             else '<span class="ok">no violation</span>')
    caption = f"Constraints ({block.columns} columns of {_cell(block.file)}): {state}"
    return [_table(caption, ["column", "check", "rows", "share", "expected", "observed", "examples"], rows)]


def _drifted_rows(blocks: list[Any], previews: Callable[[str | None], Any] | None = None) -> list[str]:
    """Each drifted embedding feature's clusters and its farthest rows
    (:class:`monitor.drift.drifted_rows.DriftedRows`): at most ``MAX_DRIFTED_ROWS`` rows on the page
    in all (the JSON has every listed row)."""
    parts, left = [], MAX_DRIFTED_ROWS
    for d in blocks:
        parts.append(_table(
            f"Rows behind the drift of {_cell(d.feature)}: {d.atypical_rows} of {d.scored_rows} scored rows beyond "
            f"the reference's {1 - d.tail:.0%} distance ({_num(d.threshold)}); the {len(d.rows)} farthest in "
            f"{len(d.clusters)} cluster(s)", ["cluster", "rows", "centroid distance", "mean distance", "examples"],
            [[str(c.cluster), str(c.size), _num(c.centroid_distance), _num(c.mean_distance),
              _cell(", ".join(str(e) for e in c.examples))] for c in d.clusters]))
        shown, left = d.rows[:left], max(0, left - len(d.rows))
        if shown:
            parts.append(_table(f"Farthest rows of {_cell(d.feature)} ({len(shown)} of {len(d.rows)} listed)",
                                ["id", "time", "distance", "cluster", "score", "prediction", "input_uri"],
                                [[_cell(r.id), _time(r.ts), _num(r.distance), str(r.cluster), _num(r.score),
                                  _num(r.prediction), _input(r.input_uri, previews)] for r in shown]))
    return parts


def _time(ts: float | None) -> str:
    return "–" if ts is None else datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _input(uri: str | None, previews: Callable[[str | None], Any] | None) -> str:
    """A row's input: its thumbnail or the start of its text above the uri, or the uri alone."""
    found = previews(uri) if previews is not None and uri else None
    text = _cell(uri or "–")
    if found is None:
        return text
    if found.kind == "image":  # a data: URI of base64 that previews.py built: no character to escape
        return f'<img class="thumb" alt="" src="{escape(found.content)}">{text}'
    return f'<div class="snippet">{escape(found.content)}</div>{text}'
