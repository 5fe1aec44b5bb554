"""The retrain request and result (monitor/retrain_contract.py) are checked on both sides of the
process boundary: the daemon's launcher writes what the trainer's worker accepts, the worker's
result is what the launcher reads, and a wrong file is an error naming its field."""
from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from monitor.daemon.retraining.launcher import ProcessLauncher, RetrainJob, read_result
from monitor.errors import UserInputError
from monitor.retrain_contract import FileWindow, RetrainOutcomeBody, RetrainRequest, RetrainResult, StoreWindow
from trainer.outcomes import RetrainOutcome

OUTCOME = {"outcome": "promoted", "challenger_version": "3", "champion_version": "3", "run_id": "r1",
           "metrics": {"accuracy": 0.91, "roc_auc": float("nan")}}


def test_the_result_body_has_exactly_the_trainer_outcome_fields():
    assert set(RetrainOutcomeBody.model_fields) == {f.name for f in dataclasses.fields(RetrainOutcome)}
    outcome = RetrainOutcome(**OUTCOME)
    assert RetrainOutcomeBody.model_validate(outcome.to_dict()).model_dump() == outcome.to_dict() | {
        "metrics": pytest.approx(outcome.metrics, nan_ok=True)}


def test_the_launcher_writes_a_request_the_worker_accepts(tmp_path):
    job = RetrainJob(attempt_id="att-1", incident_id="inc-1", trigger="alert", window=pd.DataFrame({"x": [1.0]}),
                     config={"home": str(tmp_path)}, report_paths=["reports/a.html"], data_window={"last_n": 10})
    job_dir = ProcessLauncher(tmp_path / "retrains").prepare(job)
    request = RetrainRequest.parse((job_dir / "request.json").read_text())
    assert request.trigger == "alert" and request.incident_id == "inc-1"
    assert isinstance(request.window, FileWindow) and pd.read_parquet(request.window.path)["x"].tolist() == [1.0]


def test_a_job_with_an_unknown_trigger_fails_before_a_child_starts(tmp_path):
    job = RetrainJob(attempt_id="att-2", incident_id="inc-1", trigger="cron", window=pd.DataFrame({"x": [1.0]}),
                     config={})
    with pytest.raises(ValueError, match="trigger"):
        ProcessLauncher(tmp_path / "retrains").prepare(job)


@pytest.mark.parametrize("body, needle", [
    ({"colour": "blue", "shade": 1}, "unknown key(s) colour, shade"),
    ({"window": {"source": "kafka"}}, "window.source must be 'store' or 'file', got 'kafka'"),
    ({"window": {"source": "file"}}, "window.path"),
    ({"window": {"source": "store", "last_n": 0}}, "window.last_n"),
    ({"trigger": "cron"}, "trigger"),
    ({"resume": "maybe"}, "resume"),
])
def test_a_wrong_request_names_its_field(body, needle):
    with pytest.raises(UserInputError) as exc:
        RetrainRequest.parse(body)
    assert needle in str(exc.value)


def test_a_request_of_defaults_reads_the_store():
    request = RetrainRequest.parse("{}")
    assert isinstance(request.window, StoreWindow) and request.trigger == "manual" and not request.resume


def test_the_launcher_reads_each_kind_of_result(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"status": "ok", "outcome": OUTCOME}))
    ok = read_result(tmp_path, 0)
    assert ok.ok and ok.outcome is not None and ok.outcome["champion_version"] == "3"
    (tmp_path / "result.json").write_text(json.dumps({"status": "error", "error": "DataError", "message": "few rows"}))
    failed = read_result(tmp_path, 2)
    assert not failed.ok and "DataError: few rows" in (failed.error or "")


@pytest.mark.parametrize("body, needle", [
    ({"status": "ok"}, "outcome exactly when"),
    ({"status": "ok", "outcome": {**OUTCOME, "run_id": None}}, "outcome.run_id"),
    ({"status": "ok", "outcome": {**OUTCOME, "outcome": "maybe"}}, "outcome.outcome"),
    ({"status": "done"}, "status"),
])
def test_a_wrong_result_is_an_error_naming_its_field(tmp_path, body, needle):
    (tmp_path / "result.json").write_text(json.dumps(body))
    result = read_result(tmp_path, 0)
    assert not result.ok and "unreadable result.json" in (result.error or "") and needle in (result.error or "")
    with pytest.raises(ValueError):
        RetrainResult.parse(body)


def test_a_truncated_result_is_unreadable(tmp_path):
    (tmp_path / "result.json").write_text('{"status": "ok", "outco')
    assert "unreadable result.json" in (read_result(tmp_path, 0).error or "")


@pytest.mark.parametrize("text", ['{not json', '[1, 2]', '"a string"'])
def test_a_request_that_is_no_json_object_cannot_be_read(text):
    with pytest.raises(UserInputError, match="cannot read retrain request: expected a JSON object"):
        RetrainRequest.parse(text)
