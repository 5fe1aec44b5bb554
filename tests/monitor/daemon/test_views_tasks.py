"""What `driftloop check` and `driftloop status` / GET /v1/status show per task: the task and its
metrics by their names, and breaches that name the metric (real evaluation, real check log)."""
from __future__ import annotations

import json

from monitor.daemon.state.attempts import AttemptStore
from monitor.daemon.state.checklog import CheckLog
from monitor.daemon.runtime.controller import observation
from monitor.daemon.state.incidents import IncidentStore
from monitor.daemon.decisions.policy import AlertPolicy
from monitor.daemon.runtime.views import collect_status, render_check, render_status
import numpy as np

from tests.monitor.daemon.task_frames import checked, task_config
from tests.monitor.drift.task_frames import CLASSES, expected_mae, multiclass_frame, regression_frame

NIGHT = CLASSES.index("car")  # the class whose recall drops


def missed(frame, cls: int, share: float, seed: int):
    """``frame`` with ``share`` of the labelled rows served another class relabelled ``cls``: rows of
    that class the model misses, so its recall drops and the other figures barely move."""
    rng = np.random.default_rng(seed)
    out = frame.copy()
    label = out["label"].to_numpy(dtype="float64", na_value=np.nan)
    served = out["prediction"].to_numpy(dtype="float64", na_value=np.nan)
    hit = (label != cls) & (served != cls) & ~np.isnan(label) & (rng.uniform(size=len(out)) < share)
    out.loc[hit, "label"] = cls
    return out


def status_of(engine, outcome, verdict: str) -> dict:
    log = CheckLog(engine, "demo", lambda: 1.7e9)
    log.record(outcome, verdict)
    status = collect_status("demo", lambda: "1", log, IncidentStore(engine, "demo", lambda: 1.7e9),
                            AttemptStore(engine, "demo", lambda: 1.7e9))
    return json.loads(json.dumps(status))  # what /v1/status sends


def test_regression_check_and_status_show_mae_rmse_mape_r2(engine, tmp_path):
    cfg = task_config("regression", tmp_path, alerts={"rules": [{"metric": "r2", "drop": 0.05}]})
    reference = regression_frame(2000, 1, noise=2.0, window=False)
    outcome = checked(cfg, reference, regression_frame(1500, 2, noise=4.0), {"mae": expected_mae(2.0)})
    policy = AlertPolicy(cfg.alerts, cfg.drift.min_labels)
    breaches = policy.performance_breaches(observation(outcome))
    # twice the noise: the MAPE doubles too (a default since issue 34); the residuals' mean stays put
    assert breaches is not None and [b.key for b in breaches] == ["mae", "mape", "r2"]

    text = render_check(outcome, breaches)
    realised = text.split("estimated")[0].splitlines()   # the realised table comes before the estimates
    rows = {line.split()[0]: line for line in realised if line.split()[:1] in (["mae"], ["rmse"], ["mape"], ["r2"])}
    assert set(rows) == {"mae", "rmse", "mape", "r2"}
    assert "BREACH" in rows["mae"] and "BREACH" in rows["r2"] and "BREACH" not in rows["rmse"]
    assert "BREACH" in rows["mape"]
    assert not [line for line in realised if line.startswith("accuracy")]   # a regression model has no accuracy
    assert outcome.result.estimation_error is not None
    assert "realised - estimated mae on the labelled rows" in text and "estimated accuracy" not in text

    body = outcome.to_dict()["result"]
    assert body["task"] == "regression" and body["mae"] > body["baseline_mae"] * 1.1

    verdict = policy.observe(observation(outcome))
    status = status_of(engine, outcome, verdict.message)
    last = status["last_check"]
    assert last["task"] == "regression" and verdict.reason == "mae"
    for key in ("mae", "mae_ci", "rmse", "mape", "r2", "r2_ci", "bias", "residual_shift", "baseline_mae",
                "estimated_mae"):
        assert key in last, key
    assert last["mae"] == body["mae"] and "class_recall" not in last
    lines = render_status(status).splitlines()
    assert any(line.split()[:2] == ["mae", f"{body['mae']:.4f}"] for line in lines)
    assert any(line.split()[:1] == ["r2"] for line in lines)


def test_multiclass_check_and_status_show_f1_and_per_class_recall(engine, tmp_path):
    night = CLASSES[NIGHT]
    cfg = task_config("multiclass", tmp_path, alerts={"rules": [{"metric": "recall", "class": night, "drop": 0.05}]})
    reference = multiclass_frame(3000, 1, window=False)
    outcome = checked(cfg, reference, missed(multiclass_frame(3000, 2), NIGHT, 0.05, seed=3),
                      {"accuracy": 0.0, "roc_auc": 0.0})   # bars of the pair out of reach: the rule alone speaks
    policy = AlertPolicy(cfg.alerts, cfg.drift.min_labels)
    breaches = policy.performance_breaches(observation(outcome))
    assert breaches is not None and [b.key for b in breaches] == [f"recall[{night}]"]

    text = render_check(outcome, breaches)
    named = {line.split()[0] for line in text.splitlines() if line.split()}
    assert {"accuracy", "roc_auc", "macro_f1", "weighted_f1"} <= named and set(CLASSES) <= named
    (row,) = [line for line in text.splitlines() if line.startswith(f"{night} ")]
    assert row.split()[-2:] == ["BREACH", "recall"]

    status = status_of(engine, outcome, policy.observe(observation(outcome)).message)
    last = status["last_check"]
    assert last["task"] == "multiclass" and last["classes"] == CLASSES
    assert set(last["class_recall"]) == set(CLASSES) and last["macro_f1"] is not None and "mae" not in last
    assert f"recall[{night}]" in last["verdict"]
    text = render_status(status)
    assert "macro_f1" in text and night in text


def test_binary_status_keeps_its_keys(engine, tmp_path):
    """A binary check's status summary carries its task, and none of the other tasks' figures."""
    cfg = task_config("binary", tmp_path)
    frame = regression_frame(1000, 3)
    frame["label"] = (frame["label"] > 50).astype("int64")
    frame["score"] = 1 / (1 + np.exp(-(frame["score"] - 50)))
    frame["prediction"] = (frame["score"] > 0.5).astype("int64")
    outcome = checked(cfg, frame, frame, {"accuracy": 0.9, "roc_auc": 0.9})
    last = status_of(engine, outcome, "ok")["last_check"]
    assert last["task"] == "binary" and not {"macro_f1", "class_recall", "mae", "r2", "baselines"} & set(last)
