"""``driftloop status`` is a read: run where there is no driftloop home, it says where it looked and
how to point it elsewhere, and creates nothing (issue 24: it used to leave ``./driftloop-data/``
with an empty store and registry behind)."""
from __future__ import annotations

from monitor.cli import main
from monitor.config import load_config
from monitor.store import PredictionStore


def test_status_without_a_home_says_where_it_looked_and_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in [k for k in __import__("os").environ if k.startswith("DRIFTLOOP_")]:
        monkeypatch.delenv(name)
    for argv in (["status"], ["status", "--json"], ["status", "--incident", "abc"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"Error: no driftloop store for model 'demo': looked for "
                              f"{tmp_path / 'driftloop-data' / 'driftloop.db'} (home driftloop-data; no config")
        assert "nothing created" in err and "--config FILE" in err and "--url http://HOST:8470" in err
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setenv("DRIFTLOOP_HOME", str(tmp_path / "elsewhere"))
    assert main(["status"]) == 2
    assert f"looked for {tmp_path / 'elsewhere' / 'driftloop.db'} (home {tmp_path / 'elsewhere'} from " \
           "$DRIFTLOOP_HOME" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_status_with_a_store_but_no_registry_yet_reads_without_creating_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "driftloop.yaml").write_text(f"home: {tmp_path / 'home'}\nmodel: {{name: churn}}\n")
    PredictionStore.from_config(load_config("driftloop.yaml", environ={})).close()  # serve ran, no train yet
    before = sorted(p.name for p in (tmp_path / "home").iterdir())
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "churn" in out and "champion     none" in out
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == before  # no mlflow.db, no mlartifacts/
