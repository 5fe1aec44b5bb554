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


def test_a_grown_vocabulary_scores_as_before_until_it_trains(config, tmp_path):
    """A warm start adds the categories its rows hold (at least MIN_NEW_CATEGORY_ROWS times) to the
    vocabulary and grows that embedding table; each new row starts as the unknown bucket's, so every
    row scores exactly as before, old indices do not move, and a one-off value stays unknown. A
    user's network (not the MLP's layout) is left as it is."""
    import torch

    from trainer.model import MIN_NEW_CATEGORY_ROWS, grow_vocabulary
    data = make_dataset(300, seed=0)
    model = build_model(config, data)
    rows = make_dataset(60, seed=1)
    rows["region"] = ["mena"] * MIN_NEW_CATEGORY_ROWS + ["once"] + list(rows["region"][MIN_NEW_CATEGORY_ROWS + 1:])
    before, eu = model.predict_proba(rows), model.encode(data.head(1).assign(region="eu"))[1][0, 0]
    tables = model.net.embeddings[0].num_embeddings
    assert grow_vocabulary(model, rows) == {"region": ["mena"]}
    assert model.net.embeddings[0].num_embeddings == tables + 1
    assert model.vocab["region"][-1] == "mena" and model.encode(rows.head(1))[1][0, 0] == tables
    assert model.encode(data.head(1).assign(region="eu"))[1][0, 0] == eu
    assert model.encode(rows.iloc[[MIN_NEW_CATEGORY_ROWS]])[1][0, 0] == 0  # "once": still unknown
    np.testing.assert_array_equal(model.predict_proba(rows), before)
    assert grow_vocabulary(model, rows) == {}  # nothing new the second time
    torch.nn.init.normal_(model.net.embeddings[0].weight[-1:])
    assert not np.array_equal(model.predict_proba(rows.head(1)), before[:1])  # it is the row "mena" reads

    factory = {"model": {"factory": "tests.trainer.user_nets:build"}}
    user = build_model(load_config(path=None, environ={}, overrides=factory), data)
    assert grow_vocabulary(user, rows) == {} and "mena" not in user.vocab["region"]


def test_encode_names_the_bad_column(config):
    model = build_model(config, make_dataset(50, seed=0))
    with pytest.raises(ValueError, match="missing feature columns: x4"):
        model.encode(make_dataset(5).drop(columns="x4"))
    with pytest.raises(ValueError, match="feature 'x1' has 1 infinite"):
        model.encode(make_dataset(5).assign(x1=[0.1, float("inf"), 0.2, 0.3, 0.4]))
    with pytest.raises(ValueError, match="feature 'x2' must be numeric; row 1 holds 'high'"):
        model.encode(make_dataset(5).assign(x2=[0.1, "high", 0.2, 0.3, 0.4]))


def test_missing_values_are_imputed_and_flagged(config):
    data = make_dataset(300, seed=0)
    data.loc[::10, "x1"] = np.nan  # 10% missing in training: the mean skips them, the indicator learns them
    data.loc[::7, "region"] = None
    model = build_model(config, data)
    assert model.mean[1].item() == pytest.approx(data["x1"].mean(), rel=1e-5)
    assert model.indicated == [1] and model.vocab["device"][0] != "\x00missing"  # gaps only where there were
    rows = make_dataset(3, seed=1)
    gone = rows.assign(x1=[np.nan, 0.5, np.nan], region=[None, "eu", np.nan])
    x_num, x_cat = model.encode(gone)
    assert np.isnan(x_num[:, 1].numpy()).tolist() == [True, False, True]
    missing_index = model.vocab["region"].index("\x00missing") + 1
    assert x_cat[:, 0].tolist()[0] == missing_index and x_cat[2, 0] == missing_index
    proba = model.predict_proba(gone)
    assert np.all(np.isfinite(proba))
    # A missing value is not the same input as the mean: the indicator column tells them apart.
    at_mean = gone.assign(x1=[model.mean[1].item()] * 3, region=["eu"] * 3)
    assert model(*model.encode(gone)).shape == (3,)
    assert not np.allclose(model.predict_proba(gone), model.predict_proba(at_mean))


def test_user_frame_dtypes_score_alike(config):
    """int, bool, nullable Int64/boolean and pandas categories are read as the floats/strings they hold."""
    import pandas as pd
    data = make_dataset(200, seed=0)
    model = build_model(config, data)
    rows = data.head(6).copy()
    rows["x0"] = [1.0, 2.0, 3.0, 0.0, 1.0, 2.0]
    as_int = rows.assign(x0=rows["x0"].astype("int64"), region=rows["region"].astype("category"))
    nullable = rows.assign(x0=rows["x0"].astype("Int64"), x3=(rows["x3"] > 0).astype("boolean"))
    as_bool = rows.assign(x3=(rows["x3"] > 0))
    np.testing.assert_allclose(model.predict_proba(as_int), model.predict_proba(rows), rtol=1e-6)
    np.testing.assert_allclose(model.predict_proba(nullable), model.predict_proba(as_bool), rtol=1e-6)
    nullable.loc[0, "x0"] = pd.NA
    assert np.isfinite(model.predict_proba(nullable)).all()


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


def test_data_without_gaps_gets_the_network_it_always_had(config):
    """No missing values in training: no indicator inputs, no missing-category entries."""
    model = build_model(config, make_dataset(200, seed=0))
    assert model.indicated == [] and all("\x00missing" not in v for v in model.vocab.values())
    assert model.net.blocks[0][0].in_features == 8 + sum(e.embedding_dim for e in model.net.embeddings)
    gone = make_dataset(3, seed=1).assign(x1=[np.nan, 0.5, np.nan], region=[None, "eu", None])
    assert np.isfinite(model.predict_proba(gone)).all()  # imputed with the mean; unknown bucket
