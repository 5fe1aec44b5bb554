"""A model's retrain child trains with the configuration its daemon sent (the whole of it, in
request.json), not with the deployment's file read again: that file holds every model, and a child
that validated it, with its own model's sections as overrides, failed every retrain of a daemon
started beside its ``driftloop.yaml`` (or with ``$DRIFTLOOP_CONFIG``) once another model's section
did not validate, e.g. a model added to the file and not yet reloaded.

The real child (``monitor.daemon.retraining.worker``) through the real launcher; there is no
champion, so it fails after loading its configuration, which is all this checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from monitor.config import load_config
from monitor.daemon.retraining.launcher import ProcessLauncher, RetrainJob


def _window(n: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(n)],
            "x0": rng.normal(size=n),
            "score": 0.5,
            "prediction": 0,
            "label": rng.integers(0, 2, n),
        }
    )


@pytest.mark.parametrize("how", ["cwd", "env"])
def test_the_retrain_child_does_not_validate_the_other_models_of_the_file(tmp_path, monkeypatch, how):
    file = tmp_path / "driftloop.yaml"
    fleet = {
        "home": str(tmp_path / "home"),
        "models": {"churn": {"model": {"task": "binary"}}, "fraud": {"model": {"task": "binary"}}},
    }
    file.write_text(yaml.safe_dump(fleet))
    cfg = load_config(file, environ={}).model_configs()["churn"]
    # The file is edited while the daemon runs (not reloaded yet): another model's section has a typo.
    fleet["models"]["fraud"]["alerts"] = {"acuracy_drop": 0.02}
    file.write_text(yaml.safe_dump(fleet))
    if how == "cwd":
        monkeypatch.chdir(tmp_path)
        monkeypatch.delenv("DRIFTLOOP_CONFIG", raising=False)
    else:
        monkeypatch.chdir(tmp_path.parent)
        monkeypatch.setenv("DRIFTLOOP_CONFIG", str(file))
    handle = ProcessLauncher(tmp_path / "retrains").launch(
        RetrainJob(
            attempt_id="att-1",
            incident_id="inc-1",
            trigger="manual",
            window=_window(),
            config=cfg.model_dump(mode="json"),
            data_window={},
        )
    )
    result = handle.wait(180)
    assert result is not None and result.error is not None  # no champion: the retrain cannot succeed
    assert "ConfigError" not in result.error and "invalid configuration" not in result.error, result.error
    assert "fraud" not in result.error, result.error
