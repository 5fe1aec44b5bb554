"""Labels chosen by the score, through a real check and the alert policy: a service whose people
review only the rows the model flagged (and every 10th other row) must not read as a drop, and a
change of concept on those rows must still open an incident (monitor.drift.selection).

Real store, Evidently and MLflow champion; the retrain child is the scripted stand-in."""
from __future__ import annotations

import dataclasses

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.daemon.runtime.controller import observation
from monitor.drift.summary import summary_html


def test_reviewed_labels_are_judged_against_what_those_rows_realise_and_a_change_still_opens(make_daemon):
    daemon, traffic = make_daemon({"drift": {"window_size": 4000}})
    daemon.start(scheduler=False)
    policy = daemon.controller.policy
    for seed in (70, 71):
        traffic.send(2000, seed, tag_version=True, reviewed=True)
        report = daemon.run_check_now()
        assert report.incident is None, report.verdict.message
    result = report.outcome.judged
    chosen = result.label_selection
    assert chosen is not None and chosen["chosen"] and chosen["shift"]["roc_auc"] < -0.02, chosen
    assert chosen["unlabelled_rows"] > 1000 and result.labelled_rows == chosen["labelled_rows"]
    obs = observation(report.outcome)
    assert obs.selection == chosen["shift"]
    assert daemon.status()["last_check"]["label_selection"] == chosen   # what /v1/status shows
    page = summary_html(result)
    assert "Labels chosen by the score" in page and f"roc_auc {chosen['shift']['roc_auc']:+.4f}" in page
    served = {(s.name, s.labels.get("metric")): s.value
              for fam in text_string_to_metric_families(generate_latest(daemon.registry).decode()) for s in fam.samples}
    assert served[("driftloop_model_labels_chosen", None)] == 1.0
    assert served[("driftloop_model_label_selection_shift", "roc_auc")] == chosen["shift"]["roc_auc"]
    # Against the level on all rows the same window is a ROC AUC drop: the incident the shift spares.
    unmoved = policy.performance_breaches(dataclasses.replace(obs, selection={}))
    assert unmoved and unmoved[0].reason == "roc_auc", unmoved
    assert policy.performance_breaches(obs) == []
    # The concept changes on the reviewed rows: they realise less than they were expected to.
    opened = None
    for seed in (72, 73, 74):
        traffic.send(2000, seed, concept=1.0, tag_version=True, reviewed=True)
        opened = daemon.run_check_now().incident or opened
    assert opened is not None
    events = daemon.controller.incidents.events(opened.id)
    assert "moved" in events[0]["message"] and "labels chosen by the score" in events[0]["message"], events[0]


def test_with_the_switch_off_the_same_labels_read_as_a_drop(make_daemon):
    daemon, traffic = make_daemon({"drift": {"window_size": 4000, "label_selection": False}})
    daemon.start(scheduler=False)
    opened = None
    for seed in (70, 71):
        traffic.send(2000, seed, tag_version=True, reviewed=True)
        report = daemon.run_check_now()
        opened = report.incident or opened
    assert report.outcome.judged.label_selection is None
    assert "driftloop_model_labels_chosen{model" in generate_latest(daemon.registry).decode()  # 0, served
    assert "driftloop_model_label_selection_shift" not in generate_latest(daemon.registry).decode()
    assert opened is not None and opened.reason == "roc_auc", report.verdict.message
