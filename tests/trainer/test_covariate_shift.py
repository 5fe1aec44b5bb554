"""Covariate shift is not concept change (issue 34, item 4): inputs that move into a region the champion
never saw, labelled by the same rule, are learned without forgetting the old region; labels that change
on the same inputs are a concept change, as before."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.trainer.conftest import make_config

FEATURES = [{"name": "x1"}, {"name": "x2"}]


def rows(n: int, seed: int, center: float, flip: bool = False) -> pd.DataFrame:
    """Inputs around ``center``; one rule everywhere (a tilted checkerboard), or its negation."""
    rng = np.random.default_rng(seed)
    x = rng.normal(center, 1.0, size=(n, 2))
    label = (np.sin(1.3 * x[:, 0]) * np.sin(1.3 * x[:, 1]) > 0).astype(int)
    return pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "label": 1 - label if flip else label})


@pytest.fixture
def cfg(tmp_path, mlflow_template):
    return make_config(tmp_path / "home", mlflow_template, model={"features": FEATURES},
                       training={"hidden": [64, 32], "epochs": 60, "retrain_epochs": 30})


def accuracy(champion, frame: pd.DataFrame) -> float:
    return float(((champion.predict_proba(frame) > 0.5).astype(int) == frame["label"]).mean())


def test_new_inputs_under_the_same_rule_are_covariate_shift_and_the_old_region_stays_learned(cfg):
    import trainer
    from trainer.retraining import _concept_check

    trainer.train_baseline(cfg, rows(3000, 1, center=0.0))
    before = trainer.load_champion(cfg)
    original = rows(2000, 9, center=0.0)
    upright = accuracy(before, original)
    moved = rows(3000, 2, center=4.0)  # the same rule, where the champion never was
    assert accuracy(before, moved) < upright - 0.1
    concept = _concept_check(before, moved, before.baseline.reference, cfg)
    assert concept["shift"] == "covariate" and concept["holds"], concept
    outcome = trainer.retrain(cfg, moved, trigger="manual")
    after = trainer.load_champion(cfg)
    assert outcome is not None
    # Whichever model is champion now keeps >= 95 % of the old region's accuracy.
    assert accuracy(after, original) >= 0.95 * upright, (outcome.outcome, accuracy(after, original), upright)
    if outcome.outcome == "promoted":
        assert accuracy(after, moved) > accuracy(before, moved)


def test_other_labels_on_the_same_inputs_are_a_concept_change(cfg):
    import trainer
    from trainer.retraining import _concept_check

    trainer.train_baseline(cfg, rows(3000, 1, center=0.0))
    champion = trainer.load_champion(cfg)
    concept = _concept_check(champion, rows(2000, 3, center=0.0, flip=True), champion.baseline.reference, cfg)
    assert concept["shift"] == "concept" and not concept["holds"], concept
    assert concept["comparable"] < concept["matched"] - 0.3
    unchanged = _concept_check(champion, rows(2000, 4, center=0.0), champion.baseline.reference, cfg)
    assert unchanged["shift"] == "none" and unchanged["holds"]
