"""What a person reads in the MLflow UI: run names in words, markdown descriptions on runs, the
registered model and its versions, the training window as a logged dataset, and the experiment
marked as classic machine learning so its link opens on the runs list.

MLflow 3 opens an experiment on its GenAI "Overview" (traces) unless the experiment's tag
``mlflow.experimentKind`` says ``custom_model_development`` ("Machine learning" in its kind
selector); with it the experiment page shows runs, not traces. The UI as a whole also starts in
its GenAI view unless the link says ``workflowType=machine_learning`` (:func:`runs_url`). Descriptions are MLflow's own
places for them: a run's tag ``mlflow.note.content`` (the run page's "Description"), the registered model's
and each version's description. Everything here only writes text; none of it is read back by
driftloop, which keeps its state in tags and aliases (trainer/registry.py).
"""
from __future__ import annotations

import math
from typing import Any

import pandas as pd

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
CLASSIC_ML = "custom_model_development"
NOTE_TAG = "mlflow.note.content"
TRIGGER_WORDS = {"alert": "after an alert", "schedule": "on schedule", "manual": "by hand"}
REASON_WORDS = {  # the daemon's incident reasons (monitor/daemon/state/incidents.py REASONS) in words
    "accuracy": "accuracy drop", "roc_auc": "ROC AUC drop", "precision": "precision drop", "recall": "recall drop",
    "f1": "F1 drop", "positive_rate": "positive rate shift", "macro_f1": "macro F1 drop",
    "weighted_f1": "weighted F1 drop", "mae": "MAE rise", "rmse": "RMSE rise", "mape": "MAPE rise", "r2": "R² drop",
    "drift": "data drift", "alertmanager": "an Alertmanager alert", "schedule": "schedule", "manual": "request",
    "review": "champion review"}


def runs_url(base: str, experiment_id: str) -> str:
    """The link to an experiment's runs on an MLflow UI at ``base``, in its "Model training" view:
    MLflow 3.17's UI starts in its GenAI view (a global switch kept in the browser), where even a
    ``/runs`` link shows GenAI navigation; ``workflowType=machine_learning`` switches a fresh browser."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """A run's page in the "Model training" view (without the switch it opens among GenAI "Evaluation runs")."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?workflowType=machine_learning"


def _words(reason: Any) -> str:
    text = str(reason or "")
    metric, _, cls = text.partition("[")  # a per-class reason: precision[cat]
    if cls and metric in REASON_WORDS:
        return f"{REASON_WORDS[metric]} ({cls.rstrip(']')})"
    return REASON_WORDS.get(text, text.replace("_", " "))


def readable_name(kind: str, trigger: str, *, reason: Any = None, incident_id: Any = None,
                  parent: str | None = None, version: str | None = None) -> str:
    """e.g. ``retrain after accuracy drop (incident 12) v3→v4`` or ``first model by hand v1``:
    what happened and why, in the words a person reads, short enough for the runs table."""
    head = "first model" if kind == "baseline" else ("reinstate" if kind == "reinstate" else "retrain")
    why = (f"after {_words(reason)}" if reason and reason not in TRIGGER_WORDS
           else TRIGGER_WORDS.get(trigger, trigger))
    parts = [head, why]
    if incident_id not in (None, ""):
        parts.append(f"(incident {incident_id})")
    if parent is not None and version is not None:
        parts.append(f"v{parent}→v{version}")
    elif version is not None:
        parts.append(f"v{version}")
    elif parent is not None:
        parts.append(f"from v{parent}")
    return " ".join(parts)[:250]


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return "—" if math.isnan(x) else f"{x:.4f}"
    return str(x)


def figures_table(challenger: dict[str, float], champion: dict[str, float] | None,
                  names: tuple[str, str] = ("challenger", "champion")) -> str:
    """A markdown table of the task's figures, side by side when there is a champion to compare."""
    keys = list(challenger)
    if champion is None:
        return "\n".join(["| metric | value |", "|---|---|", *(f"| {k} | {_fmt(challenger[k])} |" for k in keys)])
    rows = [f"| {k} | {_fmt(challenger[k])} | {_fmt(champion.get(k, math.nan))} |" for k in keys]
    return "\n".join([f"| metric | {names[0]} | {names[1]} |", "|---|---|---|", *rows])


def window_text(data_window: Any) -> str:
    """The data window in words: rows, first and last row, change point."""
    if not isinstance(data_window, dict):
        return str(data_window) if data_window else "—"
    bits = [f"{data_window['rows']} labelled rows" if "rows" in data_window else ""]
    if data_window.get("start") or data_window.get("end"):
        bits.append(f"from {data_window.get('start') or '?'} to {data_window.get('end') or '?'}")
    change = data_window.get("since_change") or data_window.get("since")
    bits.append(f"change point {change}" if change else "no change point located")
    return ", ".join(b for b in bits if b)


def export_text(exported: Any) -> str:
    """The ONNX export as a markdown table (or why there is none)."""
    if exported is None:
        return "ONNX export off (`training.export.onnx: false`)."
    if getattr(exported, "error", None):
        return f"ONNX export failed: {exported.error}"
    rows = ["| form | size | p99 latency, 1 row | published |", "|---|---|---|---|"]
    for f in exported.forms.values():
        p99 = f.latency_ms.get("p99_1")
        rows.append(f"| {f.name} | {f.size_bytes / 1e6:.2f} MB | {'—' if p99 is None else f'{p99:.2f} ms'} | "
                    f"{'yes' if f.published else 'no: ' + f.reason} |")
    return "\n".join(rows)


def model_description(cfg: Any) -> str:
    """What the registered model predicts and from which features (its description in the registry)."""
    m = cfg.model
    what = m.kind.what_it_predicts(m.target, m.classes)
    feats = [f"`{f.name}` ({f.type}{'' if f.dim is None else f', {f.dim} dims'})" for f in m.features]
    lines = [f"**{m.name}** predicts {what}.", "", f"Features: {', '.join(feats) or '—'}.", "",
             "Trained and watched by driftloop: alias `champion` is the serving version, `challenger` the last "
             "retrained candidate, `previous-champion` where `driftloop rollback` goes. Each version's run "
             "says why it exists."]
    if getattr(cfg.training, "entrypoint", None):
        lines.append(f"\nModel code: `{cfg.training.entrypoint}` (training.entrypoint).")
    return "\n".join(lines)


def retrain_note(*, trigger: str, incident_id: Any, reason: Any, data_window: Any, parent: str, version: str,
                 outcome: str, reasons: list[str], challenger: dict[str, float], champion: dict[str, float],
                 concept: dict[str, Any], figure: str, start: str, exported: Any, rows: dict[str, int]) -> str:
    """The retrain run's description: why it ran, on what, what the gate said with the numbers."""
    verdict = "**promoted**: champion moved to" if outcome == "promoted" else "**not promoted**: champion stays"
    cause = f"{_words(reason)}; " if reason else ""
    incident = f"incident `{incident_id}`" if incident_id not in (None, "") else "no incident"
    holds = "still holds" if concept.get("holds") else "no longer holds"
    if concept.get("shift") == "covariate":
        where = (f" ({_fmt(concept.get('comparable'))} on the comparable recent rows vs "
                 f"{_fmt(concept.get('matched'))})" if concept.get("comparable") is not None
                 else " (few recent rows lie there)")
        holds = f"holds where its reference lies{where}: covariate shift, the reference rows stay learned"
    return "\n".join([
        f"### Retrain of v{parent} → challenger v{version}: {outcome}", "",
        f"- **Trigger:** {trigger} ({cause or ''}{incident})",
        f"- **Why:** champion v{parent}'s {figure} on the recent rows {_fmt(concept.get('recent'))} vs "
        f"{_fmt(concept.get('reference'))} on its own reference sample: its concept {holds}",
        f"- **Data window:** {window_text(data_window)}",
        f"- **Rows:** {rows.get('train', 0)} to train (of which {rows.get('replay', 0)} replayed from the "
        f"reference), {rows.get('holdout', 0)} held out for the gate; {start} start",
        f"- **Gate:** {verdict} v{version if outcome == 'promoted' else parent}", "",
        "| reason |", "|---|", *(f"| {r.replace('|', '/')} |" for r in reasons or ["—"]), "",
        "#### Held-out figures (same rows for both)", "",
        figures_table(challenger, champion, (f"challenger v{version}", f"champion v{parent}")), "",
        "#### Export", "", export_text(exported)])


def baseline_note(*, trigger: str, version: str, rows: dict[str, int], metrics: dict[str, float],
                  champion: bool, exported: Any, features: list[str]) -> str:
    return "\n".join([
        f"### First model v{version} ({trigger})", "",
        f"- **Data:** {rows.get('rows', 0)} labelled rows: {rows.get('fit', 0)} to fit, {rows.get('val', 0)} "
        f"for early stopping, {rows.get('test', 0)} held out for the figures below",
        f"- **Features:** {', '.join(features)}",
        f"- **Champion:** {'yes, the first one' if champion else 'no, the registry already had one'}", "",
        "#### Held-out figures", "", figures_table(metrics, None), "", "#### Export", "", export_text(exported)])


def reinstate_note(*, trigger: str, incident_id: Any, reason: Any, data_window: Any, parent: str, version: str,
                   outcome: str, reasons: list[str], challenger: dict[str, float],
                   champion: dict[str, float]) -> str:
    incident = f"incident `{incident_id}`" if incident_id not in (None, "") else "no incident"
    return "\n".join([
        f"### Earlier version v{version} reinstated over v{parent}: {outcome}", "",
        f"- **Trigger:** {trigger} ({(_words(reason) + '; ') if reason else ''}{incident})",
        f"- **Data window:** {window_text(data_window)}",
        "- **No training:** an earlier champion passed the gate on the held-out recent rows", "",
        "| reason |", "|---|", *(f"| {r.replace('|', '/')} |" for r in reasons or ["—"]), "",
        figures_table(challenger, champion, (f"v{version}", f"champion v{parent}"))])


def log_dataset(frame: pd.DataFrame, *, name: str, source: Any, context: str, target: str | None = None) -> None:
    """The rows as an MLflow dataset input of the active run: source, digest, schema and profile
    (row count) only, never the rows (``source``: a path or URI, an MLflow ``DatasetSource``, or None
    for MLflow's code source; trainer/run_data.py chooses one that reloads the rows). Columns MLflow
    cannot type (embedding arrays) are left out of the schema. Never raises: a description must not
    cost the run."""
    import logging
    import warnings

    import mlflow
    from mlflow.data.pandas_dataset import from_pandas
    try:
        arrays = [c for c in frame.columns if frame[c].dtype == object
                  and frame[c].map(lambda v: v is not None and not isinstance(v, str)).any()]
        flat = frame.drop(columns=arrays).reset_index(drop=True)
        with warnings.catch_warnings():  # "source can be interpreted in multiple ways", the int-column hint
            warnings.simplefilter("ignore", UserWarning)
            ds = from_pandas(flat, source=source, name=name, targets=target if target in flat.columns else None)
        mlflow.log_input(ds, context=context)
    except Exception as exc:  # the description is a courtesy; the run is the point
        logging.getLogger(__name__).warning("could not log dataset %s: %s", name, exc)


def reason_of(data_window: Any) -> Any:
    """The incident's reason (``accuracy_drop``...) the daemon puts in the data window, if any."""
    return data_window.get("reason") if isinstance(data_window, dict) else None


def record(registry: Any, run_id: str, version: str | None, note: str, name: str) -> None:
    """Put ``note`` on the run (its Description) and, with ``version``, on the version; rename the run."""
    registry.client.set_tag(run_id, NOTE_TAG, note[:7900])
    registry.client.update_run(run_id, name=name)
    if version is not None:
        registry.client.update_model_version(registry.name, version, description=note[:4900])


def experiment_link(cfg: Any, base: str = "http://127.0.0.1:5000") -> str:
    """The runs list of the model's experiment on an MLflow UI at ``base`` (the experiments list when
    the experiment does not exist yet); reads the store, creates nothing, never raises."""
    try:
        from mlflow import MlflowClient
        exp = MlflowClient(tracking_uri=cfg.tracking_uri).get_experiment_by_name(cfg.experiment_name)
    except Exception:
        exp = None
    return runs_url(base, exp.experiment_id) if exp is not None else f"{base.rstrip('/')}/#/experiments"


def append_version_note(registry: Any, version: str, line: str) -> None:
    """Add ``line`` (what happened to the version later: shadow verdict, reinstatement) to its description."""
    current = registry.client.get_model_version(registry.name, version).description or ""
    text = f"{current}\n\n{line}" if current else line
    registry.client.update_model_version(registry.name, version, description=text[-4900:])
