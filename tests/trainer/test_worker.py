import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.errors import UserInputError
from monitor.store import PredictionStore, labelled_window
from tests.support.waiting import wait_until
from tests.trainer.conftest import FAST_TRAINING
from trainer.loop import EXIT_INTERRUPTED
from trainer.synthetic import make_dataset
from trainer.worker import main, run_request

REPO = Path(__file__).resolve().parents[2]


def request_for(cfg, **extra):
    return {"config": {"home": str(cfg.home), "training": dict(FAST_TRAINING)}, "trigger": "alert",
            "incident_id": 7, **extra}


def test_worker_process_interrupted_by_sigterm_then_resumed(tcfg, champion, tmp_path):
    window = tmp_path / "window.parquet"
    make_dataset(1200, seed=21, concept_shift=1.0).to_parquet(window)
    request = request_for(tcfg, window={"source": "file", "path": str(window)}, data_window={"source": "file"})
    request["config"]["training"].update(retrain_epochs=60, patience=60)  # long enough to interrupt
    req, res = tmp_path / "req.json", tmp_path / "res.json"
    req.write_text(json.dumps(request))
    ckpt = tcfg.checkpoints_dir / f"retrain-{tcfg.model.name}.pt"

    proc = subprocess.Popen([sys.executable, "-m", "trainer.worker", str(req), str(res)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def training() -> bool:  # the first epoch-end checkpoint: training is under way
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        return ckpt.exists()

    wait_until(training, 120, message="no epoch-end checkpoint")
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == EXIT_INTERRUPTED, out[-3000:]
    result = json.loads(res.read_text())
    assert result["status"] == "interrupted" and result["checkpoint"] == str(ckpt)

    # The daemon runs the same request again with "resume": true (here in-process, to save a start-up).
    outcome = run_request({**request, "resume": True})
    assert outcome["outcome"] in ("promoted", "rejected") and outcome["challenger_version"] == "2"
    assert {"run_id", "metrics", "reasons", "duration_seconds", "samples_per_second"} <= set(outcome)
    assert not ckpt.exists()


def test_worker_reports_expected_failures_in_the_result(tcfg, tmp_path):
    res = tmp_path / "res.json"
    bad = tmp_path / "bad.csv"
    make_dataset(300).assign(label=0).to_csv(bad, index=False)
    cases = [
        (request_for(tcfg, window={"source": "file", "path": str(bad)}), "DataError", "single class"),
        (request_for(tcfg, window={"source": "kafka"}), "UserInputError", "window.source"),
        (request_for(tcfg, colour="blue"), "UserInputError", "unknown key(s) colour"),
        ({"config": {"training": {"epochs": 0}}}, "ConfigError", "training.epochs"),
    ]
    for request, error, message in cases:
        req = tmp_path / "req.json"
        req.write_text(json.dumps(request))
        assert main([str(req), str(res)]) == 2
        result = json.loads(res.read_text())
        assert (result["status"], result["error"]) == ("error", error), result
        assert message in result["message"]
    (tmp_path / "req.json").write_text("{not json")
    assert main([str(tmp_path / "req.json"), str(res)]) == 2
    assert "cannot read retrain request" in json.loads(res.read_text())["message"]


def test_worker_reads_the_labelled_window_from_the_store(tcfg, champion):
    rows = make_dataset(500, seed=41, concept_shift=1.0)
    features = tcfg.model.feature_names
    preds = [{"id": f"r{i}", "features": {k: (v.item() if hasattr(v, "item") else v) for k, v in r[features].items()},
              "score": 0.5} for i, (_, r) in enumerate(rows.iterrows())]
    with PredictionStore.from_config(tcfg) as store:
        store.add_predictions(preds + [{"id": "unlabelled", "features": preds[0]["features"], "score": 0.4}])
        store.add_labels([{"id": f"r{i}", "label": int(y)} for i, y in enumerate(rows["label"])])
    with pytest.raises(UserInputError, match="python -m trainer.worker alone reads window.source 'file'"):
        run_request(request_for(tcfg, window={"source": "store", "last_n": 1000}))  # the trainer alone
    outcome = run_request(request_for(tcfg, window={"source": "store", "last_n": 1000}), labelled_window)
    assert outcome["metrics"]["holdout_rows"] == 150  # 30% of the 500 labelled rows; the unlabelled one is left out
