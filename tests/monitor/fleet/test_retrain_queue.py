"""The deployment's retrain queue holds only models whose incident is open, and a retrain asked for is
never lost to it: with a slot free it starts; with the slots taken it waits its turn, its incident open.

Real daemons in one fleet, served over HTTP, with the stand-in retrain child
(tests/monitor/daemon/stub_worker.py) that hangs until its daemon stops it."""
from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from monitor.config import load_config
from tests.conftest import free_port
from tests.monitor.daemon.conftest import SMALL, STUB_WORKER, baseline_home, merge  # noqa: F401  (fixture)

MODELS = ("a", "b", "c")
ALERT = {"labels": {"alertname": "UpstreamOutage", "component": "model", "severity": "page"}, "annotations": {},
         "startsAt": "2024-05-01T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z", "fingerprint": "f00d"}


def webhook(status: str) -> dict:
    """One Alertmanager alert with no ``model`` label: it concerns every model."""
    return {"version": "4", "status": status, "receiver": "driftloop", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "groupKey": "{}:{}",
            "alerts": [{**ALERT, "status": status}]}


def register_champions(home, baseline_home) -> None:
    """Each model's registered model (driftloop-<name>) holds the baseline champion's model as its v1
    and ``champion``: in a copy of the baseline registry, through MLflow's own client."""
    import shutil

    from mlflow import MlflowClient

    home.mkdir(parents=True)
    shutil.copy(baseline_home / "mlflow.db", home / "mlflow.db")
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    base = client.get_model_version_by_alias("driftloop-demo", "champion")
    source = client.get_logged_model(base.source.rsplit("/", 1)[-1]).artifact_location  # models:/m-…
    for name in MODELS:
        client.create_registered_model(f"driftloop-{name}")
        version = client.create_model_version(f"driftloop-{name}", source, run_id=base.run_id)
        client.set_registered_model_alias(f"driftloop-{name}", "champion", version.version)


@pytest.fixture
def served_fleet(tmp_path, baseline_home):
    """Three binary models, one retrain slot, each with a champion and 300 labelled rows; no
    scheduled checks."""
    from trainer.synthetic import make_dataset

    from monitor.daemon.retraining.launcher import ProcessLauncher
    from monitor.daemon.runtime.fleet import Fleet
    from monitor.daemon.runtime.serve import serve

    home = tmp_path / "home"
    cfg = load_config(path=None, environ={}, overrides=merge(SMALL, {
        "home": str(home), "server": {"port": free_port()}, "fleet": {"max_concurrent_retrains": 1},
        "models": {name: {"model": {"task": "binary"}} for name in MODELS}}))
    register_champions(home, baseline_home)
    root = home / "retrains"
    root.mkdir(parents=True)
    (root / "behaviour").write_text("hang")
    fleet = Fleet(cfg, launcher=ProcessLauncher(root, module=STUB_WORKER))
    for i, name in enumerate(MODELS):
        df = make_dataset(300, seed=40 + i)
        df["score"] = np.random.default_rng(i).uniform(size=len(df))
        df["id"] = [f"{name}-{k}" for k in range(len(df))]
        df["ts"] = time.time() - 10_000 + np.arange(len(df))
        fleet.daemons[name].store.add_predictions(df.drop(columns=["label"]))
        fleet.daemons[name].store.add_labels(df[["id", "label", "ts"]])
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"fleet": fleet, "ready": ready,
                                                                       "scheduler": False}, daemon=True)
    thread.start()
    try:
        assert ready.wait(60), "the fleet did not start"
        yield fleet, f"http://127.0.0.1:{cfg.server.port}"
    finally:
        stop.set()
        thread.join(60)


def retrains(url: str) -> dict:
    return httpx.get(url + "/v1/models", timeout=10).json()["retrains"]


def queue_gauge(url: str) -> str:
    return next(line for line in httpx.get(url + "/metrics", timeout=10).text.splitlines()
                if line.startswith("driftloop_fleet_retrain_queue "))


def free_the_slot(fleet, name: str) -> None:
    """End ``name``'s hanging retrain (settled as interrupted): its slot is given back."""
    supervisor = fleet.daemons[name].controller.supervisor
    supervisor.stop(grace=2)
    supervisor.reopen()


def test_an_ended_incident_leaves_the_queue_and_a_request_with_a_free_slot_starts(served_fleet):
    fleet, url = served_fleet
    answers = httpx.post(url + "/v1/alerts", json=webhook("firing"), timeout=60).json()["models"]
    assert answers["a"]["retrain"] == "started", answers["a"]
    assert all("queued for a retrain slot" in answers[n]["action"] for n in ("b", "c")), answers
    assert retrains(url) == {"limit": 1, "running": ["a"], "queue": ["b", "c"]}
    assert queue_gauge(url) == "driftloop_fleet_retrain_queue 2.0"

    # The alert resolves: b's and c's incidents end (a's is retraining: it runs on). Nothing of
    # theirs waits any more, so nothing of theirs holds a place.
    httpx.post(url + "/v1/alerts", json=webhook("resolved"), timeout=60).raise_for_status()
    assert all(fleet.daemons[n].controller.incidents.current() is None for n in ("b", "c"))
    assert retrains(url) == {"limit": 1, "running": ["a"], "queue": []}
    assert queue_gauge(url) == "driftloop_fleet_retrain_queue 0.0"

    free_the_slot(fleet, "a")
    assert retrains(url)["running"] == []
    # Nothing runs: a person's retrain of c takes the free slot (before: 409, "position 2", resolved).
    r = httpx.post(url + "/v1/models/c/retrain", json={"reason": "audit"}, timeout=60)
    assert r.status_code == 202, r.text
    assert r.json()["retrain"] == "started" and r.json()["attempt_id"]
    assert retrains(url) == {"limit": 1, "running": ["c"], "queue": []}


def test_a_request_while_the_slot_is_taken_waits_its_turn_with_its_incident_open(served_fleet):
    fleet, url = served_fleet
    first = httpx.post(url + "/v1/models/a/retrain", json={}, timeout=60)
    assert first.status_code == 202 and first.json()["retrain"] == "started", first.text
    r = httpx.post(url + "/v1/models/b/retrain", json={"reason": "audit"}, timeout=60)
    assert r.status_code == 202, r.text          # accepted: queued, not declined
    body = r.json()
    assert body["retrain"] == "waiting" and "queued for a retrain slot, position 1" in body["action"], body
    incident = fleet.daemons["b"].controller.incidents.current()
    assert incident is not None and incident.id == body["incident"]["id"] and incident.state == "waiting"
    assert incident.waits_for == "queued" and fleet.daemons["b"].controller.queued_request(incident)
    # What it waits for is data, not read back from the sentence people see.
    fleet.daemons["b"].controller.incidents.set_fields(incident.id, detail="waiting (reworded)")
    incident = fleet.daemons["b"].controller.incidents.get(incident.id)
    assert fleet.daemons["b"].controller.queued_request(incident)
    assert retrains(url) == {"limit": 1, "running": ["a"], "queue": ["b"]}

    # The slot frees: b, at the head of the queue, is told to try again; its try starts the retrain.
    told: list[str] = []
    fleet.slots.on_free.append(told.append)
    free_the_slot(fleet, "a")
    assert told == ["b"]
    again = fleet.daemons["b"].controller.maybe_retrain(incident, incident.trigger, respect_cooldown=False)
    assert again.attempt is not None, again
    assert retrains(url) == {"limit": 1, "running": ["b"], "queue": []}
    retraining = fleet.daemons["b"].controller.incidents.get(incident.id)
    assert retraining.state == "retraining" and retraining.waits_for is None  # a wait ends with its state


def test_the_slots_forget_a_model_and_call_the_new_head_when_a_slot_is_free():
    from monitor.daemon.retraining.slots import DRIFT, REQUESTED, RetrainSlots
    from tests.monitor.daemon.conftest import Clock

    slots = RetrainSlots(1, Clock(0.0))
    called: list[str] = []
    slots.on_free.append(called.append)
    assert slots.claim("busy", DRIFT) is None
    assert slots.claim("first", REQUESTED) == 1 and slots.claim("second", DRIFT) == 2
    slots.forget("second")
    assert [p.model for p in slots.snapshot()[1]] == ["first"] and called == []   # no slot free: nobody told
    assert slots.claim("second", DRIFT) == 2   # a new incident: a new place, at the back
    slots.release("busy")
    assert called == ["first"]
    slots.forget("first")              # its incident ended before its check claimed the slot: the next is told
    assert called == ["first", "second"] and [p.model for p in slots.snapshot()[1]] == ["second"]
    assert slots.claim("second", DRIFT) is None
    slots.forget("nobody")             # not queued: nothing happens
