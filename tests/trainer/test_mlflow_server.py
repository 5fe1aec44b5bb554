"""The whole train -> retrain -> load -> rollback cycle against a real `mlflow server` over HTTP."""
import pytest

from monitor.errors import RegistryError
from tests.support.mlflow_server import start_mlflow_server
from tests.trainer.conftest import make_config
from trainer import load_champion, retrain, rollback, train_baseline
from trainer.registry import ChampionCache
from trainer.synthetic import make_dataset


@pytest.fixture
def server(tmp_path):
    srv = start_mlflow_server(tmp_path / "mlflow-server")
    yield srv
    srv.stop()


def test_against_a_tracking_server(tmp_path, server):
    cfg = make_config(tmp_path / "home", mlflow={"tracking_uri": server.url})
    baseline = train_baseline(cfg, make_dataset(1500, seed=1))
    assert baseline.version == "1" and baseline.champion
    out = retrain(cfg, make_dataset(1200, seed=21, concept_shift=1.0), trigger="alert", incident_id="inc-9")
    assert out.outcome == "promoted", out.reasons
    champion = load_champion(cfg, cache=ChampionCache())
    assert champion.version == "2" and len(champion.baseline.reference) > 0
    assert rollback(cfg) == ("2", "1")
    assert not (tmp_path / "home" / "mlflow.db").exists(), "nothing may fall back to a local store"

    server.stop()  # the daemon's retrain must fail fast and clearly when the server goes away
    with pytest.raises(RegistryError, match="unreachable"):
        retrain(cfg, make_dataset(400, seed=3))
