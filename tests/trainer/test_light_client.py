"""The light install for model services: ``driftloop-client`` (scripts/build_client.py) built from this
repository, installed into a fresh virtual environment that has no torch, scores the exported champion
exactly as the torch model does and turns a frame into the records the daemon takes."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from trainer.synthetic import make_dataset

REPO = Path(__file__).resolve().parents[2]


def test_the_client_closure_stays_light():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import build_client
    finally:
        sys.path.pop(0)
    modules = build_client.closure()
    assert {"monitor.client", "monitor.onnx_scoring", "monitor.records.frames"} <= set(modules)
    assert not [m for m in modules if m.startswith(("monitor.config", "monitor.daemon", "monitor.drift", "trainer"))]


def test_a_heavy_import_counts_only_when_the_module_is_imported(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import build_client
    finally:
        sys.path.pop(0)
    source = tmp_path / "m.py"
    source.write_text(textwrap.dedent("""
        import numpy
        try:
            import orjson
        except ImportError:
            orjson = None
        class Task:
            def loss(self):
                import torch
        def train():
            from trainer import loop
    """))
    assert build_client._imports(source, import_time=True) == {"numpy", "orjson"}
    assert {"torch", "trainer", "trainer.loop"} <= build_client._imports(source)


@pytest.fixture(scope="module")
def light_env(tmp_path_factory) -> Path:
    """A venv with only the built driftloop-client wheel and its dependencies (from the package index)."""
    root = tmp_path_factory.mktemp("light")
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_client.py"), "--out", str(root / "dist")],
                   check=True, capture_output=True)
    [wheel] = (root / "dist").glob("driftloop_client-*.whl")
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "--prefer-binary", str(wheel)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"installing the light client failed:\n{done.stdout}\n{done.stderr}")
    return python


def test_a_fresh_venv_without_torch_scores_the_exported_champion(light_env, tcfg, champion, tmp_path, monkeypatch):
    monkeypatch.setenv("DRIFTLOOP_HOME", str(tcfg.home))
    out = tmp_path / "served"
    assert main(["export", "--version", "champion", "--format", "onnx", "--out", str(out)]) == 0
    rows = make_dataset(300, seed=11)
    rows.insert(0, "id", [f"r{i}" for i in range(len(rows))])
    data = tmp_path / "rows.json"  # no pyarrow there: plain JSON records
    rows.to_json(data, orient="records")
    script = textwrap.dedent(f"""
        import importlib.util, json, sys
        import pandas as pd
        assert importlib.util.find_spec("torch") is None, "torch is installed"
        from monitor.onnx_scoring import OnnxScorer
        from monitor.records.frames import prediction_records
        frame = pd.DataFrame(json.load(open({str(data)!r})))
        scores = OnnxScorer.from_dir({str(out)!r}, "onnx").predict(frame)
        frame["score"] = scores
        records = prediction_records(frame, features={tcfg.model.feature_names!r})
        heavy = sorted(m for m in ("torch", "evidently", "pydantic", "sqlalchemy", "mlflow") if m in sys.modules)
        print(json.dumps({{"scores": [float(s) for s in scores], "first": records[0], "heavy": heavy}}))
    """)
    done = subprocess.run([str(light_env), "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)  # not the repository: its monitor/ must not shadow the installed one
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["heavy"] == []
    from trainer.registry import load_champion
    expected = load_champion(tcfg).predict_proba(rows)
    assert np.max(np.abs(np.asarray(got["scores"]) - expected)) < 1e-4
    first = got["first"]
    assert first["id"] == "r0" and set(first["features"]) == set(tcfg.model.feature_names)
    assert first["score"] == pytest.approx(got["scores"][0])
