"""``drift.min_labels: auto`` (monitor/drift/min_labels.py): the labelled rows a window needs follow the
task and the champion's baseline: an accurate image classifier is judged on about 300, a tabular
classifier near 0.8 on 1000 as before, a regressor on its MAE's spread; a number is kept as it is."""
from __future__ import annotations

import numpy as np
import pandas as pd

from monitor.config import AlertsConfig, DriftConfig
from monitor.config.checks import MIN_LABELS_AUTO
from monitor.drift.min_labels import MinLabels, resolve_min_labels
from monitor.tasks import internal_proba_columns
from tests.monitor.drift.task_frames import K, multiclass_model, regression_frame, regression_model

AUTO = DriftConfig()


def sharp_reference(n: int, accuracy: float, seed: int = 3) -> pd.DataFrame:
    """A multiclass reference sample as the trainer saves it, served right on ``accuracy`` of its rows
    with confident probabilities (an image model's)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, size=n)
    served = np.where(rng.uniform(size=n) < accuracy, y, (y + rng.integers(1, K, size=n)) % K)
    proba = np.full((n, K), 0.02 / (K - 1))
    proba[np.arange(n), served] = 0.98
    frame = pd.DataFrame({"x0": rng.normal(size=n), "label": y, "score": proba[np.arange(n), served]})
    for column, values in zip(internal_proba_columns(K), proba.T):
        frame[column] = values
    return frame


def test_auto_is_the_default_and_a_number_is_kept():
    assert AUTO.min_labels == "auto" and AUTO.min_labels_at_most == MIN_LABELS_AUTO[1] == 1000
    fixed = resolve_min_labels(DriftConfig(min_labels=450), AlertsConfig(), multiclass_model(), {"accuracy": 0.97},
                               sharp_reference(2000, 0.97))
    assert (fixed.value, fixed.auto, dict(fixed.needs)) == (450, False, {})
    assert DriftConfig(min_labels=450).min_labels_at_most == 450


def test_an_accurate_classifier_needs_about_300_labels():
    need = resolve_min_labels(AUTO, AlertsConfig(), multiclass_model(), {"accuracy": 0.97, "roc_auc": 0.995},
                              sharp_reference(2000, 0.97))
    # binomial: 9 x 0.97 x 0.03 / 0.03^2 = 291; ROC AUC's bootstrap asks for fewer
    assert need.auto and need.needs["accuracy"] == 291 and need.needs["roc_auc"] < 291
    assert need.value == 291


def test_a_classifier_near_0_8_keeps_1000():
    need = resolve_min_labels(AUTO, AlertsConfig(), multiclass_model(), {"accuracy": 0.8},
                              sharp_reference(2000, 0.8))
    assert need.needs["accuracy"] == 1600 and need.value == 1000  # clamped to the ceiling


def test_the_threshold_and_its_mode_scale_the_need():
    ref = sharp_reference(2000, 0.9)
    wide = resolve_min_labels(AUTO, AlertsConfig(accuracy_drop=0.05), multiclass_model(), {"accuracy": 0.9}, ref)
    assert wide.needs["accuracy"] == 324  # 9 x 0.09 / 0.05^2
    relative = resolve_min_labels(AUTO, AlertsConfig(mode="relative"), multiclass_model(), {"accuracy": 0.9}, ref)
    assert relative.needs["accuracy"] == 1112  # the bar is 3 % of 0.9: 0.027
    easy = resolve_min_labels(AUTO, AlertsConfig(accuracy_drop=0.2, auc_drop=0.3), multiclass_model(),
                              {"accuracy": 0.9}, ref)
    assert easy.value == MIN_LABELS_AUTO[0]  # never below the floor


def test_a_regressor_is_sized_by_its_error_spread():
    model, ref = regression_model(), regression_frame(3000, 1, noise=2.0, window=False)
    need = resolve_min_labels(AUTO, AlertsConfig(), model, {}, ref)
    # |normal residual|: CV 0.756, so 9 x 0.756^2 / 0.10^2 = 514 rows for the MAE, give or take the bootstrap
    assert need.auto and set(need.needs) >= {"mae"} and 400 <= need.needs["mae"] <= 650
    assert need.value == max(MIN_LABELS_AUTO[0], min(MIN_LABELS_AUTO[1], max(need.needs.values())))
    # deterministic: the bootstrap is seeded
    assert resolve_min_labels(AUTO, AlertsConfig(), model, {}, ref) == need


def test_without_a_baseline_the_need_is_the_ceiling():
    need = resolve_min_labels(AUTO, AlertsConfig(), multiclass_model(), {}, None)
    assert (need.value, need.auto, dict(need.needs)) == (1000, True, {})
    assert "no baseline" in need.describe()


def test_the_need_is_resolved_once_per_champion_version():
    labels = MinLabels(AUTO, AlertsConfig(), multiclass_model())
    assert labels.last.value == 1000  # before any champion: the ceiling
    ref = sharp_reference(2000, 0.97)
    first = labels.of("1", {"accuracy": 0.97}, ref)
    assert labels.of("1", {"accuracy": 0.5}, ref) is first  # cached by version
    assert labels.last is first and first.value == 291
    assert labels.of("2", {"accuracy": 0.8}, ref).value == 1000 and labels.last.value == 1000


def test_describe_names_each_figure():
    need = resolve_min_labels(AUTO, AlertsConfig(), multiclass_model(), {"accuracy": 0.97},
                              sharp_reference(1000, 0.97))
    assert need.describe().startswith("291 (auto: accuracy 291, roc_auc ")
    assert need.to_dict()["needs"]["accuracy"] == 291
