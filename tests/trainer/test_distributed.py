import json
import math
import subprocess
import sys
from pathlib import Path

import torch
from mlflow import MlflowClient

from tests.conftest import free_port
from tests.trainer.conftest import make_config

REPO = Path(__file__).resolve().parents[2]


def test_ddp_two_gloo_processes(tmp_path, mlflow_template):
    home = tmp_path / "home"
    cfg = make_config(home, mlflow_template)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
         "--master_port", str(free_port()), "-m", "tests.trainer.ddp_job", str(tmp_path), str(home)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]

    # Only rank 0 writes checkpoints; a finished run removes it.
    assert [r["wrote_checkpoint"] for r in ranks] == [True, False]
    assert not (tmp_path / "ckpt-rank0.pt").exists()
    # Each rank trained on its half of the 600 training rows: 300 / 32 -> 10 steps per epoch.
    assert [r["steps"] for r in ranks] == [4 * math.ceil(300 / 32)] * 2
    assert ranks[0]["val_accuracy"] > 0.7
    # DistributedDataParallel kept the replicas identical, through the interruption and resume.
    w0, w1 = (torch.load(tmp_path / f"weights-rank{r}.pt") for r in (0, 1))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    # Only rank 0 talked to MLflow: one run, one version.
    assert [r["version"] for r in ranks] == ["1", None]
    client = MlflowClient(tracking_uri=cfg.tracking_uri, registry_uri=cfg.tracking_uri)
    exp = client.get_experiment_by_name(cfg.experiment_name)
    assert len(client.search_runs([exp.experiment_id])) == 1
    assert len(client.search_model_versions(f"name = '{cfg.registered_model_name}'")) == 1
