"""The rows behind an embedding drift in the daemon: ``GET /v1/status``'s summary of the last check
(every input_uri hidden from an untrusted caller) and the note on the drift incident it opens."""
from __future__ import annotations

from types import SimpleNamespace

from monitor.config import load_config
from monitor.daemon.decisions.breach import Observation
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.runtime.controller import Controller
from monitor.daemon.runtime.views import HIDDEN, collect_status, public_status, render_status
from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.state.incidents import IncidentStore
from monitor.drift.drifted_rows import AtypicalRow, DriftedRows, RowCluster
from monitor.drift.result import CheckResult, FeatureDrift

URIS = ["file:///data/images/r0.png", "images/r1.png", None, "s3://bucket/r3.png"]


def drifted() -> DriftedRows:
    rows = tuple(AtypicalRow(f"r{i}", 1_700_000_000.0 + i, 9.0 - i, 0 if i < 3 else 1, 0.7, 1, uri)
                 for i, uri in enumerate(URIS))
    clusters = (RowCluster(0, 3, 7.5, 8.0, ("r0", "r1")), RowCluster(1, 1, 6.0, 6.0, ("r3",)))
    return DriftedRows("emb", scored_rows=1000, reference_rows=500, neighbours=10, threshold=4.0, atypical_rows=120,
                       rows=rows, clusters=clusters)


def result() -> CheckResult:
    score = FeatureDrift("score", "ks", 0.5, 0.05, False)
    return CheckResult(check_id="0123456789ab", model="demo", checked_at=1_700_000_100.0, window_rows=1000,
                       labelled_rows=0, features=[FeatureDrift("emb", "mmd", 0.001, 0.05, True)], drift_share=1.0,
                       drift_share_threshold=0.5, dataset_drift=True, prediction_drift=score, drifted_rows=[drifted()])


def test_status_summarises_the_rows_and_the_public_view_hides_every_uri(engine, clock):
    log = CheckLog(engine, "demo", clock)
    check = log.record(CheckOutcome(clock(), "ok", "checked", champion_version="1", result=result(), window_rows=1000))
    status = collect_status("demo", lambda: "1", log, IncidentStore(engine, "demo", clock),
                            AttemptStore(engine, "demo", clock))
    [summary] = status["last_check"]["drifted_rows"]
    assert (summary["feature"], summary["atypical_rows"], summary["listed"]) == ("emb", 120, 4)
    assert [c["size"] for c in summary["clusters"]] == [3, 1]
    assert [r["input_uri"] for r in summary["top"]] == URIS
    public = public_status(status)
    [hidden] = public["last_check"]["drifted_rows"]
    assert [r["input_uri"] for r in hidden["top"]] == [HIDDEN, HIDDEN, None, HIDDEN]  # a relative path too
    assert [r["id"] for r in hidden["top"]] == ["r0", "r1", "r2", "r3"] and hidden["clusters"] == summary["clusters"]
    assert not any(u in str(public) for u in URIS if u)
    text = render_status(status)
    assert "emb: 120 of 1000 beyond the reference" in text and f"export-samples --check {check}" in text


def obs() -> Observation:
    return Observation(labelled_rows=2000, accuracy=0.87, roc_auc=0.93, baseline_accuracy=0.87,
                       baseline_roc_auc=0.93, champion_version="1", dataset_drift=True)


def test_the_drift_incident_notes_its_clusters(engine, clock, tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"home": str(tmp_path / "home")})
    ctl = Controller(cfg, SimpleNamespace(engine=engine), None, None,  # type: ignore[arg-type]
                     IncidentStore(engine, cfg.model.name, clock), AttemptStore(engine, cfg.model.name, clock),
                     AlertPolicy(cfg.alerts, min_labels=1000), None, None, None, clock)  # type: ignore[arg-type]
    outcome = CheckOutcome(clock(), "ok", "checked", window_end=clock(), result=result(), id=42)
    action = ctl._act(outcome, ctl.policy.observe(obs()))
    events = ctl.incidents.events(action.incident_id)
    assert [e["kind"] for e in events] == ["opened", "drifted_rows"]
    note = events[1]
    assert note["data"]["check_id"] == 42
    [feature] = note["data"]["features"]
    assert feature["feature"] == "emb" and [c["size"] for c in feature["clusters"]] == [3, 1]
    assert "rows" not in feature and not any(u in str(note) for u in URIS if u)   # ids, never input_uris
    assert "export-samples --check 42" in note["message"]
