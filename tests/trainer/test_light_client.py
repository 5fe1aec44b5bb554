"""The light install for model services: ``driftloop-client`` (scripts/build_client.py) built from this
repository and installed into one fresh virtual environment that has no torch, MLflow or Evidently.
With ``[pandas]`` only (no onnxruntime) it sends a DataFrame's predictions and labels to a running
daemon, and the scorer says which extra it lacks; with ``[onnx]`` added to the same environment it
scores the exported champion exactly as the torch model does."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import venv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.ingest.app import create_app as create_ingest_app
from monitor.store import PredictionStore
from tests.monitor.ingest.conftest import serve
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


@dataclass
class LightEnv:
    python: Path
    wheel: Path
    extras: set[str] = field(default_factory=set)

    def install(self, extras: str) -> None:
        """``pip install wheel[extras]`` (packages from the index); one venv for the module: cheap to reuse."""
        done = subprocess.run([str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                               "--prefer-binary", f"{self.wheel}[{extras}]"], capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:
            pytest.fail(f"installing the light client failed:\n{done.stdout}\n{done.stderr}")
        self.extras |= set(extras.split(","))

    def run(self, script: str, cwd: Path) -> dict:
        """Run ``script`` there (not in the repository: its monitor/ must not shadow the installed one);
        the JSON its last line prints."""
        done = subprocess.run([str(self.python), "-c", textwrap.dedent(script)], capture_output=True, text=True,
                              timeout=300, cwd=cwd)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def light_env(tmp_path_factory) -> LightEnv:
    """A venv with the built driftloop-client wheel and its ``[pandas]`` extra: what a service that
    sends DataFrames installs. The scoring test adds ``[onnx]``."""
    root = tmp_path_factory.mktemp("light")
    subprocess.run([sys.executable, str(REPO / "scripts" / "build_client.py"), "--out", str(root / "dist")],
                   check=True, capture_output=True)
    [wheel] = (root / "dist").glob("driftloop_client-*.whl")
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    env = LightEnv(root / "venv" / "bin" / "python", wheel)
    env.install("pandas")
    return env


def test_a_fresh_venv_without_torch_mlflow_or_evidently_sends_records_to_a_running_daemon(light_env, tcfg, tmp_path):
    rows = make_dataset(120, seed=5)
    rows.insert(0, "id", [f"s{i}" for i in range(len(rows))])
    rows["score"] = np.linspace(0.05, 0.95, len(rows))
    data = tmp_path / "rows.json"
    rows.to_json(data, orient="records")
    store = PredictionStore.from_config(tcfg)
    try:
        with serve(create_ingest_app(tcfg, store)) as url:
            got = light_env.run(f"""
                import importlib.util, json, sys
                import pandas as pd
                absent = ("torch", "mlflow", "evidently", "pydantic", "sqlalchemy", "fastapi", "sklearn")
                installed = [m for m in (*absent, "onnxruntime") if importlib.util.find_spec(m) is not None]
                from monitor.client import DriftloopClient, MissingExtra
                frame = pd.DataFrame(json.load(open({str(data)!r})))
                with DriftloopClient({url!r}) as dl:
                    sent = dl.log_predictions(frame)
                    labelled = dl.log_labels(frame[["id", {tcfg.model.target!r}]])
                try:
                    from monitor.onnx_scoring import OnnxScorer
                    OnnxScorer(b"", {{"features": []}})
                    missing = None
                except MissingExtra as exc:
                    missing = [exc.module, exc.extra]
                print(json.dumps({{"installed": installed, "sent": [sent.stored, labelled.stored],
                                  "missing": missing}}))
            """, tmp_path)
        window = store.window()
    finally:
        store.close()
    assert got["installed"] == ([] if "onnx" not in light_env.extras else ["onnxruntime"])
    assert got["sent"] == [120, 120]
    if "onnx" not in light_env.extras:  # the plain install: the scorer names the extra it needs
        assert got["missing"] == ["onnxruntime", "onnx"]
    assert sorted(window["id"]) == sorted(rows["id"])
    assert np.allclose(window.set_index("id").loc[rows["id"], "score"], rows["score"])
    assert window[tcfg.model.target].notna().all()


def test_a_fresh_venv_without_torch_scores_the_exported_champion(light_env, tcfg, champion, tmp_path, monkeypatch):
    light_env.install("onnx")
    monkeypatch.setenv("DRIFTLOOP_HOME", str(tcfg.home))
    out = tmp_path / "served"
    assert main(["export", "--version", "champion", "--format", "onnx", "--out", str(out)]) == 0
    rows = make_dataset(300, seed=11)
    rows.insert(0, "id", [f"r{i}" for i in range(len(rows))])
    data = tmp_path / "rows.json"  # no pyarrow there: plain JSON records
    rows.to_json(data, orient="records")
    got = light_env.run(f"""
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
    """, tmp_path)
    assert got["heavy"] == []
    from trainer.registry import load_champion
    expected = load_champion(tcfg).predict_proba(rows)
    assert np.max(np.abs(np.asarray(got["scores"]) - expected)) < 1e-4
    first = got["first"]
    assert first["id"] == "r0" and set(first["features"]) == set(tcfg.model.feature_names)
    assert first["score"] == pytest.approx(got["scores"][0])
