"""A recurring concept (A -> B -> A) through the real loop: store, Evidently, MLflow on SQLite and
the trainer retraining in a child process. After the return to A the incident's change point
moves to the second change, and the loop ends on a model fit for A: the earlier champion is
reinstated (``training.try_previous_versions``), or, with that off, a retrain on rows after the
return only."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.monitor.daemon.conftest import Traffic
from tests.monitor.daemon.test_loop import champion_history, daemon_for  # noqa: F401  (a fixture)

FAST = {"training": {"epochs": 30, "retrain_epochs": 30, "patience": 5, "min_post_change_rows": 600},
        "drift": {"window_size": 3000}}


def _accuracy(cfg, rows: pd.DataFrame) -> float:
    import trainer
    champion = trainer.load_champion(cfg)
    return float(((champion.predict_proba(rows) > cfg.model.threshold).astype(int) == rows["label"]).mean())


def _a_to_b(daemon, traffic):
    """A (healthy), then B until the loop promotes a model for B (v2); returns the incident."""
    traffic.send(1500, 90, tag_version=True)
    assert daemon.run_check_now().incident is None
    first_change = traffic.t
    traffic.send(700, 91, concept=1.0, tag_version=True)
    report = daemon.run_check_now()
    incident = report.incident
    assert incident is not None and incident.change_ts is not None
    assert abs(incident.change_ts - first_change) < 60
    if incident.state == "waiting":
        traffic.send(300, 92, concept=1.0, tag_version=True)
        daemon.run_check_now()
    assert daemon.wait_for_retrain(300)
    incident = daemon.controller.incidents.get(incident.id)
    assert incident.state == "promoted", incident.outcome_reasons
    assert daemon.champion.get().version == "2"
    return incident, first_change


@pytest.mark.parametrize("try_previous", [3, 0])
def test_a_recurring_concept_ends_on_a_model_fit_for_it(make_config, daemon_for, try_previous):
    cfg = make_config({**FAST, "training": {**FAST["training"], "try_previous_versions": try_previous}})
    daemon = daemon_for(cfg)
    daemon.start(scheduler=False)
    traffic = Traffic(cfg, daemon.store)
    incident, first_change = _a_to_b(daemon, traffic)

    traffic.send(600, 93, concept=1.0, tag_version=True)   # v2 serves B well for a while
    second_change = traffic.t
    traffic.send(1100, 94, tag_version=True)               # then A comes back
    report = daemon.run_check_now()
    incident = daemon.controller.incidents.get(incident.id)
    # The change point found on the new champion's rows moved the incident's change_ts forward.
    assert incident.change_ts is not None and abs(incident.change_ts - second_change) < 60, (
        incident.change_ts, first_change, second_change, report.action)
    if incident.state == "waiting":
        traffic.send(400, 95, tag_version=True)
        daemon.run_check_now()
    assert daemon.wait_for_retrain(300)
    tries = daemon.controller.attempts.for_incident(incident.id)
    last = tries[-1]
    # The retrain after the return trained (or judged) on rows after the second change only.
    assert pd.Timestamp(last.data_window["since_change"]).timestamp() >= second_change - 60
    assert pd.Timestamp(last.data_window["start"]).timestamp() >= second_change - 60
    assert last.status == "promoted", (last.reasons, last.error)
    incident = daemon.controller.incidents.get(incident.id)
    assert incident.state == "promoted"
    if try_previous:
        assert last.challenger_version == "1"   # the champion fit for A, reinstated without training
        assert any("earlier version 1 fits the current concept" in r for r in last.reasons), last.reasons
        assert daemon.champion.get().version == "1" and champion_history(cfg)[-1] == "1"
    else:
        assert last.challenger_version == "3"
    from trainer.synthetic import make_dataset
    fresh_a = make_dataset(2000, seed=96)
    assert _accuracy(cfg, fresh_a) > 0.80     # fit for A (v1 about 0.83; a model for B about 0.75 on A)

    # The loop promotion keeps the reference level; the model fit for A is judged healthy and resolves.
    traffic.send(1500, 97, tag_version=True)
    report = daemon.run_check_now()
    assert report.outcome.champion_version == last.challenger_version
    assert report.verdict.healthy_for("accuracy") is True, report.verdict.message
    assert daemon.controller.incidents.get(incident.id).state == "resolved"
