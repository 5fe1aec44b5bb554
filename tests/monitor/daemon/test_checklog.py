from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.drift.result import CheckResult, FeatureDrift


def result(acc: float, drift: bool = False) -> CheckResult:
    score = FeatureDrift("score", "ks", 0.5, 0.05, False)
    return CheckResult(check_id="c1", model="demo", checked_at=0.0, window_rows=100, labelled_rows=80,
                       features=[FeatureDrift("x0", "ks", 0.01 if drift else 0.4, 0.05, drift)],
                       drift_share=1.0 if drift else 0.0, drift_share_threshold=0.5, dataset_drift=drift,
                       prediction_drift=score, accuracy=acc, roc_auc=float("nan"), baseline_accuracy=0.9,
                       baseline_roc_auc=0.95)


def test_records_replays_and_prunes_without_losing_the_error_count(engine, clock):
    log = CheckLog(engine, "demo", clock)
    for i, (status, acc) in enumerate([("ok", 0.9), ("error", None), ("ok", 0.8), ("error", None), ("ok", 0.7)]):
        clock.advance(60)
        outcome = CheckOutcome(clock(), status, "boom" if status == "error" else "checked", champion_version="1",
                               result=result(acc, drift=i == 4) if acc else None, window_rows=100, labelled_rows=80)
        log.record(outcome, verdict="v")
    assert log.error_total() == 2
    obs = log.recent_observations(2)
    assert [o.accuracy for o in obs] == [0.8, 0.7] and obs[-1].dataset_drift and obs[-1].roc_auc is None
    last = log.last()
    assert last["status"] == "ok" and last["result"]["features"][0]["drifted"] and last["roc_auc"] is None
    assert log.prune(older_than=clock() - 90) == 3  # the three oldest rows, one of them an error
    assert log.error_total() == 2 and len(log.recent(10)) == 2
    assert log.prune(older_than=clock() + 1) == 2
    assert log.error_total() == 2  # counters never go down
