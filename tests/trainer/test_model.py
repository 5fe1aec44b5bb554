import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from monitor.config import load_config
from monitor.errors import ConfigError
from trainer.build import build_model
from trainer.synthetic import make_dataset

REPO = Path(__file__).resolve().parents[2]


def test_unknown_categories_go_to_the_unknown_bucket(config):
    data = make_dataset(200, seed=0)
    model = build_model(config, data)
    odd = data.head(3).assign(region=["mars", "eu", None], device=["watch", "tablet", "mobile"])
    _, x_cat = model.encode(odd)
    assert x_cat[0].tolist() == [0, 0]
    assert x_cat[1, 0] == model.vocab["region"].index("eu") + 1
    proba = model.predict_proba(odd)
    assert proba.shape == (3,) and np.all((proba > 0) & (proba < 1))


def test_encode_names_the_bad_column(config):
    model = build_model(config, make_dataset(50, seed=0))
    with pytest.raises(ValueError, match="missing feature columns: x4"):
        model.encode(make_dataset(5).drop(columns="x4"))
    with pytest.raises(ValueError, match="feature 'x1' has 1 missing"):
        model.encode(make_dataset(5).assign(x1=[0.1, None, 0.2, 0.3, 0.4]))


def test_user_factory_and_its_errors(tmp_path):
    cfg = load_config(path=None, environ={}, overrides={"model": {"factory": "tests.trainer.user_nets:build"}})
    model = build_model(cfg, make_dataset(100))
    assert type(model.net).__name__ == "WideLinear"
    assert model.predict_proba(make_dataset(4)).shape == (4,)
    for spec, message in [("nocolon", "must look like"), ("no.such.module:f", "cannot import"),
                          ("tests.trainer.user_nets:missing", "no callable 'missing'"),
                          ("tests.trainer.user_nets:not_a_module", "expected a torch.nn.Module")]:
        bad = load_config(path=None, environ={}, overrides={"model": {"factory": spec}})
        with pytest.raises(ConfigError, match=message):
            build_model(bad, make_dataset(100))


def test_saved_pyfunc_serves_without_driftloop_installed(tmp_path):
    """The pickled model carries its own classes: load it where `trainer` (and the user's
    factory module) cannot be imported, and get the same probabilities."""
    import mlflow.pyfunc
    from trainer.pyfunc import TabularPyfunc, pickled_by_value

    data = make_dataset(300, seed=2)
    expected = {}
    for name, factory in [("mlp", None), ("user", "tests.trainer.user_nets:build")]:
        cfg = load_config(path=None, environ={}, overrides={"model": {"factory": factory}})
        model = build_model(cfg, data)
        with pickled_by_value(model):
            mlflow.pyfunc.save_model(tmp_path / name, python_model=TabularPyfunc(model),
                                     input_example=data.drop(columns="label").head(3),
                                     pip_requirements=["torch", "pandas"])
        expected[name] = model.predict_proba(data)
    data.to_parquet(tmp_path / "data.parquet")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["trainer"] = None  # `import trainer` now fails, as on a serving box without driftloop
        sys.modules["tests"] = None
        import numpy as np, pandas as pd, mlflow.pyfunc
        df = pd.read_parquet({str(tmp_path / 'data.parquet')!r}).drop(columns="label")
        for name in ("mlp", "user"):
            proba = mlflow.pyfunc.load_model({str(tmp_path)!r} + "/" + name).predict(df)
            np.save({str(tmp_path)!r} + "/" + name + ".npy", np.asarray(proba))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, want in expected.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), want, rtol=1e-6)
