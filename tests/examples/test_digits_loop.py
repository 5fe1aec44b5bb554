"""The digits example end to end through a real ``driftloop serve`` (a child process) and the real
digits service: a CNN trained through ``training.entrypoint`` on image files, probabilities,
``image_emb`` and ``input_uri`` on the wire, labels one batch late; rotated digits are detected,
the entrypoint fine-tunes, the gate promotes and served accuracy recovers."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from examples.digits.data import write_digits
from examples.digits.loop import DigitsPlan, run_loop, train_baseline, write_config
from monitor.config import load_config
from tests.support.services import Service, free_port, start_service

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_rotated_digits_are_detected_retrained_on_and_recovered(tmp_path, mlflow_template):
    plan = DigitsPlan.fast()
    home, port = tmp_path / "home", free_port()
    home.mkdir()
    shutil.copy(mlflow_template, home / "mlflow.db")
    config = write_config(home, port, plan)
    cfg = load_config(config, environ={})
    index = write_digits(home / "digits", seed=plan.seed)
    base = train_baseline(cfg, home / "digits", index, plan.seed)
    assert base.metrics["accuracy"] >= 0.9, base.metrics  # held-out, unrotated digits

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DRIFTLOOP_")},
           "DRIFTLOOP_CONFIG": str(config), "PYTHONPATH": str(REPO)}
    url = f"http://127.0.0.1:{port}"
    daemon = Service(url, start_service([sys.executable, "-m", "monitor.cli", "serve"], url, home / "serve.log",
                                        "driftloop serve", ready_path="/healthz", timeout=90, env=env,
                                        new_session=True))
    lines: list[str] = []
    try:
        result = run_loop(cfg, plan, url, home / "digits", index, echo=lines.append)
    finally:
        daemon.stop()
    timeline = "\n".join(lines)
    log = (home / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]

    assert result.incidents_before_onset == 0, timeline
    assert result.detection_rows is not None and result.detection_rows <= 500, timeline
    assert 1 <= len(result.promotions) <= 2, (result.retrains, timeline)
    drifted = [s for s in result.steps if s.drifted and s.served_by == "1"]
    pre = result.served_accuracy("pre")
    assert min(s.served_accuracy for s in drifted) < pre - 0.15, timeline  # the rotation hurt
    assert result.steps[-1].served_by in result.promotions, timeline  # the service follows the alias
    assert result.served_accuracy("last") >= pre - 0.03, timeline
    # The embedding is what drifted before any label said so.
    assert any("image_emb" in (s.check.get("drifted_features") or []) for s in drifted), timeline

    from monitor.store import PredictionStore
    store = PredictionStore.from_config(cfg)
    try:
        window = store.window()
    finally:
        store.close()
    assert window["input_uri"].str.startswith("file://").all()
    vectors = np.stack(window["image_emb"].to_numpy())
    assert vectors.shape == (len(window), 32) and np.isfinite(vectors).all()
