"""Labels that arrive by outcome, through a real check and the retrain's rows: positives are
labelled seconds after the prediction, negatives ten minutes after (chargebacks and closed dispute
windows). The young rows' labels are then nearly all positives; the check withholds them and a
retrain learns only from rows whose labels have all had time to arrive (monitor.drift.maturity).

Real store, Evidently and MLflow champion; the retrain child is the scripted stand-in."""
from __future__ import annotations

import pandas as pd
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.drift.summary import summary_html

DELAY = (600.0, 5.0)   # seconds until a label of class 0, of class 1, is stamped; rows 0.5 s apart


def test_young_rows_labels_wait_and_a_retrain_learns_from_matured_rows_only(make_daemon):
    daemon, traffic = make_daemon({"drift": {"window_size": 6000}})
    daemon.start(scheduler=False)
    for seed in (80, 81):
        traffic.send(2000, seed, tag_version=True, outcome_delay=DELAY)
        report = daemon.run_check_now()
        assert report.incident is None, report.verdict.message
    result = report.outcome.judged
    m = result.label_maturity
    assert m is not None and m["delays"]["0"] > 500 > 10 > m["delays"]["1"], m
    window = daemon.controller.check_job.current_window()
    labelled = window[window["label"].notna()]
    young = labelled["ts"] > pd.Timestamp(m["cut"], unit="s", tz="UTC")
    assert abs(m["immature_rows"] - int(young.sum())) <= 1 and m["immature_rows"] > 500   # (a row on the cut)
    assert labelled.loc[young, "label"].mean() > 0.9          # what the young rows' labels are: positives
    assert result.labelled_rows == len(labelled) - m["immature_rows"]   # judged: the matured rows only
    assert daemon.status()["last_check"]["label_maturity"] == m
    assert "Labels arrive by outcome" in summary_html(result)
    served = {s.name: s.value for fam in text_string_to_metric_families(generate_latest(daemon.registry).decode())
              for s in fam.samples}
    assert served["driftloop_model_labels_immature"] == m["immature_rows"]

    opened = None
    for seed in (82, 83, 84, 85):
        traffic.send(1500, seed, concept=1.0, tag_version=True, outcome_delay=DELAY)
        report = daemon.run_check_now()
        opened = report.incident or opened
    assert opened is not None, report.verdict.message
    ctl = daemon.controller
    attempts = ctl.attempts.for_incident(opened.id)
    assert attempts and all(a.status != "failed" for a in attempts), attempts
    span = attempts[0].data_window
    cut = span["label_maturity"]["cut"]
    assert pd.Timestamp(span["end"]).timestamp() <= cut, span   # no young row among the rows learnt from


def test_with_the_switch_off_the_young_rows_are_judged_as_they_are(make_daemon):
    daemon, traffic = make_daemon({"drift": {"window_size": 6000, "label_maturity": False}})
    daemon.start(scheduler=False)
    traffic.send(2000, 80, tag_version=True, outcome_delay=DELAY)
    report = daemon.run_check_now()
    window = daemon.controller.check_job.current_window()
    assert report.outcome.judged.label_maturity is None
    assert report.outcome.judged.labelled_rows == int(window["label"].notna().sum())
    assert "driftloop_model_labels_immature{model" in generate_latest(daemon.registry).decode()  # 0, served


def test_rows_of_one_class_hold_the_retrain_until_another_class_arrives(make_daemon):
    """Without the maturity rule (or before labels of the slow class were ever seen) the rows since a
    change can hold positives only. A classifier learns nothing from them and the trainer refuses
    them: before, the retrain failed and was tried again only after alerts.cooldown_seconds. It now
    waits, saying so, and starts as soon as negatives arrive."""
    from monitor.daemon.decisions.actions import WaitKind

    daemon, traffic = make_daemon({"drift": {"label_maturity": False},
                                   "training": {"min_post_change_rows": 200, "min_rows": 100}})
    ctl = daemon.controller
    traffic.send(1000, 86, tag_version=True)
    step = traffic.t
    traffic.send(1000, 87, concept=1.0, tag_version=True, outcome_delay=(10_000.0, 1.0))
    incident = ctl.incidents.open("accuracy", "alert", "dropped", change_ts=step)
    held = ctl.maybe_retrain(incident, "alert")
    assert held.wait is not None and held.wait.kind is WaitKind.CLASSES, held.message
    assert "all of class 1" in held.message and ctl.attempts.for_incident(incident.id) == []
    assert "all of class 1" in (ctl.incidents.get(incident.id).detail or "")
    traffic.send(1000, 88, concept=1.0, tag_version=True)   # labels of both classes, on time
    started = ctl.maybe_retrain(ctl.incidents.get(incident.id), "alert")
    assert started.attempt is not None, started.message
