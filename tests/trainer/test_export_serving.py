"""Serving the exported forms: `driftloop export` through the real CLI, and `Champion(runtime="onnx")`
following the alias with ONNX Runtime in a process that has no torch."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
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
