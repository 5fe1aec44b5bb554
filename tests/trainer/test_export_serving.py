"""Serving the exported forms: `driftloop export` through the real CLI, and `Champion(runtime="onnx")`
following the alias with ONNX Runtime in a process that has no torch; for every task, the same
output from every runtime."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from monitor.cli import main
from monitor.onnx_scoring import OnnxScorer
from trainer.synthetic import make_dataset


@pytest.fixture
def cli_env(tcfg, monkeypatch):
    monkeypatch.setenv("DRIFTLOOP_HOME", str(tcfg.home))
    return tcfg


@pytest.mark.parametrize("fmt, file, tolerance", [("onnx", "model.onnx", 1e-4), ("onnx-int8", "model.int8.onnx", 0.05)])
def test_export_writes_the_form_and_a_manifest_that_score_like_the_champion(cli_env, champion, tmp_path, capsys,
                                                                             fmt, file, tolerance):
    out = tmp_path / "served"
    assert main(["export", "--version", "champion", "--format", fmt, "--out", str(out)]) == 0
    assert f"v{champion.version}, {fmt}" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted([file, "manifest.json"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["version"] == champion.version and manifest["format"] == fmt and manifest["file"] == file
    assert {f["name"]: f["type"] for f in manifest["features"]} == {f.name: f.type for f in cli_env.model.features}
    rows = make_dataset(200, seed=5)
    from trainer.registry import load_champion
    expected = load_champion(cli_env).predict_proba(rows)
    assert np.max(np.abs(OnnxScorer.from_dir(out, fmt).predict(rows) - expected)) < tolerance


def test_export_refuses_what_is_not_there(cli_env, champion, tmp_path, capsys):
    assert main(["export", "--version", "7", "--out", str(tmp_path / "x")]) == 2
    assert "has no version '7'" in capsys.readouterr().err
    assert main(["export", "--version", "challenger", "--out", str(tmp_path / "x")]) == 2
    assert "no version or alias 'challenger'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_export_says_why_a_refused_form_is_missing(tmp_path, mlflow_template, monkeypatch, capsys):
    from tests.trainer.conftest import make_config
    from trainer import train_baseline
    cfg = make_config(tmp_path / "home", mlflow_template, model={"factory": "tests.trainer.broken_nets:branchy"})
    train_baseline(cfg, make_dataset(1500, seed=1))
    monkeypatch.setenv("DRIFTLOOP_HOME", str(cfg.home))
    monkeypatch.setenv("DRIFTLOOP_MODEL__FACTORY", "tests.trainer.broken_nets:branchy")
    assert main(["export", "--format", "onnx", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "has no published onnx form: refused: parity" in err


def test_champion_follows_the_alias_with_onnx_runtime_and_without_torch(tcfg, champion, tmp_path):
    """A model service's process: torch made unimportable, the champion scored by ONNX Runtime."""
    rows = make_dataset(100, seed=6)
    rows.to_parquet(tmp_path / "rows.parquet")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any `import torch` now fails
        import pandas as pd
        from monitor.client import Champion
        with Champion({tcfg.tracking_uri!r}, {tcfg.registered_model_name!r}, interval=0, runtime="onnx-int8") as c:
            scores = c.predict(pd.read_parquet({str(tmp_path / "rows.parquet")!r}))
            print(c.version, ",".join(repr(float(s)) for s in scores))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    version, scores = done.stdout.strip().splitlines()[-1].split(" ")
    from trainer.registry import load_champion
    expected = load_champion(tcfg).predict_proba(rows)
    assert version == champion.version
    assert np.max(np.abs(np.array([float(s) for s in scores.split(",")]) - expected)) < 0.05


def test_champion_rejects_an_unknown_runtime(tcfg, champion):
    from monitor.client import Champion
    with pytest.raises(ValueError, match="runtime must be one of torch, onnx, onnx-int8"):
        Champion(tcfg.tracking_uri, tcfg.registered_model_name, interval=0, runtime="tensorrt")


@pytest.fixture(scope="module", params=["multiclass", "regression"])
def task_champion(request, tmp_path_factory, mlflow_template):
    """A champion of each other task, trained and registered through the real path (class names in
    the training file, as a user's); once per task for the module."""
    import torch

    from tests.trainer.task_data import ROWS, task_config
    from trainer import train_baseline
    task = request.param
    cfg = task_config(tmp_path_factory.mktemp(task) / "home", task, mlflow_template)
    rows = ROWS[task](2000, seed=1, **({"names": True} if task == "multiclass" else {}))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        outcome = train_baseline(cfg, rows)
    finally:
        torch.set_num_threads(before)
    return cfg, outcome


def relative(a, b, task: str, cfg) -> float:
    """max |a - b| over the served numbers, relative to the target's spread for regression."""
    numbers = [c for c in a.columns if c != cfg.model.prediction or task == "regression"]
    diff = np.max(np.abs(a[numbers].to_numpy(float) - b[numbers].to_numpy(float)))
    return float(diff / (a[cfg.model.prediction].std() if task == "regression" else 1.0))


def test_other_tasks_export_and_serve_alike_in_every_runtime(task_champion, tmp_path, monkeypatch, capsys):
    from monitor.client import Champion
    from tests.trainer.task_data import ROWS
    cfg, outcome = task_champion
    task = cfg.model.task
    rows = ROWS[task](200, seed=5).drop(columns="label").set_axis(pd.RangeIndex(500, 700))
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0) as torch_champion:
        expected = torch_champion.predict(rows)
    assert expected.index.equals(rows.index)
    monkeypatch.setenv("DRIFTLOOP_HOME", str(cfg.home))
    for fmt, file, tolerance in (("onnx", "model.onnx", 1e-4), ("onnx-int8", "model.int8.onnx", 0.05)):
        out = tmp_path / fmt
        assert main(["export", "--format", fmt, "--out", str(out)]) == 0
        assert f"v{outcome.version}, {fmt}" in capsys.readouterr().out
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["task"] == task and manifest["file"] == file
        assert manifest["classes"] == (cfg.model.classes if task == "multiclass" else None)
        from_dir = OnnxScorer.from_dir(out, fmt).predict(rows)
        with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0, runtime=fmt) as champion:
            served = champion.predict(rows)
        for got in (from_dir, served):
            assert list(got.columns) == list(expected.columns) and got.index.equals(rows.index)
            assert relative(got, expected, task, cfg) < tolerance
            if task == "multiclass":   # the served class: the same but where INT8 moved a near-tie
                agree = (got[cfg.model.prediction] == expected[cfg.model.prediction]).mean()
                assert agree == 1.0 if fmt == "onnx" else agree >= 0.97
    table = json.loads(open(_export_table(cfg, outcome.run_id, tmp_path)).read())
    assert table["task"] == task and [f["name"] for f in table["forms"]] == ["torch", "onnx", "onnx-int8"]


def _export_table(cfg, run_id: str, tmp_path) -> str:
    from mlflow import MlflowClient
    return MlflowClient(cfg.tracking_uri).download_artifacts(run_id, "onnx/export.json", str(tmp_path / "table"))


@pytest.mark.parametrize("task_champion", ["multiclass"], indirect=True)
def test_a_multiclass_champion_serves_without_torch(task_champion, tmp_path):
    """The model service's process for a multiclass model: torch unimportable, the ONNX form
    returns the class names and probabilities the pyfunc returns."""
    cfg, outcome = task_champion
    from monitor.client import Champion
    from tests.trainer.task_data import ROWS
    rows = ROWS["multiclass"](100, seed=6).drop(columns="label")
    rows.to_parquet(tmp_path / "rows.parquet")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any `import torch` now fails
        import pandas as pd
        from monitor.client import Champion
        with Champion({cfg.tracking_uri!r}, {cfg.registered_model_name!r}, interval=0, runtime="onnx") as c:
            frame = pd.read_parquet({str(tmp_path / "rows.parquet")!r})
            frame.join(c.predict(frame)).to_parquet({str(tmp_path / "served.parquet")!r})
            print(c.version)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == outcome.version
    served = pd.read_parquet(tmp_path / "served.parquet")
    with Champion(cfg.tracking_uri, cfg.registered_model_name, interval=0) as torch_champion:
        expected = rows.join(torch_champion.predict(rows))
    assert list(served.columns) == list(expected.columns)
    assert (served[cfg.model.prediction] == expected[cfg.model.prediction]).all()
    probabilities = [f"proba_{c}" for c in cfg.model.classes]
    assert np.max(np.abs(served[probabilities].to_numpy() - expected[probabilities].to_numpy())) < 1e-4
