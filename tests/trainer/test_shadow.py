"""Shadow mode (trainer/shadow.py): a challenger that passed the gate is promoted only after
``training.shadow.windows`` windows of live traffic, through real retrains and a real registry."""
from __future__ import annotations

import time

import pandas as pd
import pytest
from mlflow import MlflowClient

from tests.trainer.conftest import make_config
from trainer import registry as reg
from trainer.registry import load_champion
from trainer.retraining import retrain
from trainer.shadow import SHADOW_TAG, observe
from trainer.synthetic import make_dataset


def served(cfg, rows: pd.DataFrame, start: float, version: str = "1") -> pd.DataFrame:
    """A check window as the store returns it: rows that arrived one second apart from ``start``,
    scored by champion ``version`` (what it served), labelled."""
    scores = load_champion(cfg).predict_proba(rows)
    ts = pd.to_datetime([start + i for i in range(len(rows))], unit="s", utc=True)
    return rows.assign(ts=ts, **{cfg.model.score: scores, cfg.model.prediction: (scores > 0.5).astype(int),
                                 "model_version": version})


def aliases(cfg) -> tuple[str | None, str | None]:
    with reg.session(cfg):
        r = reg.Registry(cfg)
        return r.alias_version(reg.CHAMPION), r.alias_version(reg.CHALLENGER)


@pytest.fixture
def shadowed(tcfg, champion):
    """A concept change retrained with training.shadow.windows=2: the challenger (v2) passes the gate and waits."""
    cfg = make_config(tcfg.home, None, training={"shadow": {"windows": 2}}, drift={"min_rows": 200})
    out = retrain(cfg, make_dataset(1500, seed=21, concept_shift=1.0), trigger="alert")
    return cfg, out, time.time()


def test_a_shadow_challenger_is_not_promoted_before_its_windows(shadowed):
    cfg, out, started = shadowed
    assert out.outcome == "shadow" and out.champion_version == "1"
    assert out.reasons[0].startswith("held in shadow: challenger v2 scores 2 check window(s) of live traffic")
    assert aliases(cfg) == ("1", "2")

    before = served(cfg, make_dataset(300, seed=40, concept_shift=1.0), started - 3600)  # rows it trained on
    assert observe(cfg, before).message == ("shadow v2: window not counted (0 rows since the last one < drift.min_rows "
                                            "200); 0/2")
    other = served(cfg, make_dataset(300, seed=40, concept_shift=1.0), started + 5, version="7")
    assert observe(cfg, other).message == ("shadow v2: window not counted (no row of the window was served by champion "
                                           "v1); "
                                           "0/2")

    first = served(cfg, make_dataset(300, seed=41, concept_shift=1.0), started + 10)
    news = observe(cfg, first)
    assert (news.kind, news.version) == ("counted", "2") and not news.ended
    assert news.message.startswith("shadow v2: window 1/2 counted (300 rows")
    assert aliases(cfg) == ("1", "2")
    assert observe(cfg, first.tail(150)).message == ("shadow v2: window not counted (0 rows since the last one < "
                                                     "drift.min_rows 200); 1/2")  # the same rows again
    assert observe(cfg, served(cfg, make_dataset(100, seed=46, concept_shift=1.0), started + 500)).message.endswith(
        "(100 rows since the last one < drift.min_rows 200); 1/2")
    assert aliases(cfg) == ("1", "2")

    second = served(cfg, make_dataset(300, seed=42, concept_shift=1.0), started + 1000)
    news = observe(cfg, second)
    assert (news.kind, news.message) == ("promoted", "shadow v2: promoted after 2 live windows beside v1")
    assert aliases(cfg) == ("2", "2") and load_champion(cfg).version == "2"
    tags = MlflowClient(cfg.tracking_uri).get_model_version(cfg.registered_model_name, "2").tags
    assert tags[SHADOW_TAG] == "promoted after 2 live windows beside v1"
    assert observe(cfg, second) is None  # nothing pending any more


def test_a_shadow_challenger_worse_on_live_traffic_is_rejected(shadowed):
    cfg, out, started = shadowed
    # Live traffic went back to the old concept: the challenger, fitted to the new one, loses.
    window = served(cfg, make_dataset(400, seed=43), started + 10)
    news = observe(cfg, window)
    assert news.kind == "rejected" and news.message.startswith("shadow v2: rejected: worse than v1 on live traffic: "
                                                               "accuracy")
    assert aliases(cfg) == ("1", "2")
    assert observe(cfg, served(cfg, make_dataset(300, seed=44, concept_shift=1.0), started + 1000)) is None


def test_a_rollback_during_the_shadow_cancels_it(shadowed):
    cfg, out, started = shadowed
    with reg.session(cfg):
        reg.Registry(cfg).make_champion("2")   # moved by hand while the shadow waits
    news = observe(cfg, served(cfg, make_dataset(300, seed=45, concept_shift=1.0), started + 10, version="2"))
    assert news.kind == "cancelled" and news.message == "shadow v2: cancelled: the champion moved from v1 to v2"
