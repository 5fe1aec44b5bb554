"""A model service that never sends ``model_version``, through the daemon's own HTTP app, with the
real retrain child, MLflow and Evidently: after a promotion the new champion is judged on the rows it
scored, not on its predecessor's failures still in the window (which used to retrain it again and
again, rejected every time, until the incident escalated)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from fastapi.testclient import TestClient

from monitor.daemon.runtime.daemon import Daemon
from monitor.records.frames import prediction_records


@pytest.fixture
def unversioned(make_config):
    # A window twice a batch: after the promotion it still holds the old champion's drifted rows.
    cfg = make_config({"training": {"epochs": 30, "retrain_epochs": 30, "patience": 5},
                       "drift": {"window_size": 3000}})
    daemon = Daemon(cfg)
    daemon.start(scheduler=False)
    ids = itertools.count()
    clock = [1_700_000_000.0]

    with TestClient(daemon.build_app()) as api:
        def send(n: int, seed: int, concept: float = 0.0):
            """``n`` rows scored by the champion of the moment, sent as a service that does not say
            which version scored them, then their labels."""
            import trainer
            from trainer.synthetic import make_dataset
            df = make_dataset(n, seed=seed, concept_shift=concept)
            df["score"] = trainer.load_champion(cfg).predict_proba(df)
            df["id"] = [f"u-{next(ids)}" for _ in range(n)]
            df["ts"] = clock[0] + np.arange(n) * 0.5
            clock[0] += n * 0.5
            records = prediction_records(df.drop(columns=["label"]), features=cfg.model.feature_names)
            assert all("model_version" not in r for r in records)
            assert api.post("/v1/predictions", json=records).status_code == 200
            labels = [{"id": i, "label": int(y)} for i, y in zip(df["id"], df["label"])]
            assert api.post("/v1/labels", json=labels).status_code == 200
            return records
        yield daemon, api, send
    daemon.stop(grace=5)


def test_a_promoted_champion_is_judged_on_its_own_unversioned_rows(unversioned):
    daemon, api, send = unversioned
    send(1500, 80)
    assert daemon.run_check_now().incident is None   # the check also learns the champion: v1

    drifted = send(1500, 81, concept=1.0)            # v1 scores a changed world
    incident = daemon.run_check_now().incident
    assert incident is not None and incident.state == "retraining"
    assert daemon.wait_for_retrain(300)
    attempt = daemon.controller.attempts.for_incident(incident.id)[0]
    assert attempt.status == "promoted", attempt.reasons

    # Stored as the champion that served when they arrived; a re-send after the promotion is the
    # same rows (duplicates), not a conflict with the server's own guess.
    window = daemon.store.window()
    assert set(window["model_version"].iloc[1500:3000]) == {"1"}
    again = api.post("/v1/predictions", json=drifted[:10])
    assert again.status_code == 200 and again.json()["duplicates"] == 10

    send(1500, 82, concept=1.0)                      # v2 scores the same changed world
    report = daemon.run_check_now()
    assert report.outcome.champion_version == "2"
    assert report.outcome.result.labelled_rows == 1500      # v1's drifted rows are not v2's
    assert report.verdict.healthy_for("accuracy") is True, report.verdict.message
    incident = daemon.controller.incidents.get(incident.id)
    assert incident.state == "resolved"
    assert len(daemon.controller.attempts.for_incident(incident.id)) == 1
