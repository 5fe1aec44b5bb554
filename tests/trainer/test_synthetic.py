import numpy as np
import pytest
from scipy.stats import ks_2samp

from trainer.synthetic import DEVICES, DRIFTING_FEATURES, NUMERIC, REGIONS, make_dataset


def test_schema_and_determinism():
    a, b = make_dataset(500, seed=7), make_dataset(500, seed=7)
    assert list(a.columns) == [*NUMERIC, "region", "device", "label"]
    assert a.equals(b)
    assert not a.equals(make_dataset(500, seed=8))
    assert set(a["region"]) <= set(REGIONS) and set(a["device"]) <= set(DEVICES)
    assert a["label"].dtype == np.int64 and set(a["label"]) == {0, 1}
    assert all(a[c].dtype == np.float64 for c in NUMERIC)
    assert 0.3 < a["label"].mean() < 0.7


def test_covariate_shift_moves_exactly_the_documented_features():
    base, shifted = make_dataset(4000, seed=3), make_dataset(4000, seed=4, covariate_shift=1.0)
    for col in NUMERIC:
        p = ks_2samp(base[col], shifted[col]).pvalue
        if col in DRIFTING_FEATURES:
            assert p < 1e-6, col
        elif col != "x6":  # x6 is correlated with x0 by construction
            assert p > 1e-3, col
    assert abs(base["region"].eq("apac").mean() - shifted["region"].eq("apac").mean()) > 0.1
    assert abs(base["device"].eq("mobile").mean() - shifted["device"].eq("mobile").mean()) < 0.05


def test_concept_shift_changes_labels_not_features():
    base, shifted = make_dataset(3000, seed=5), make_dataset(3000, seed=5, concept_shift=1.0)
    features = [c for c in base.columns if c != "label"]
    assert base[features].equals(shifted[features])
    assert 0.1 < (base["label"] != shifted["label"]).mean() < 0.3


def test_rejects_out_of_range_knobs():
    with pytest.raises(ValueError, match="concept_shift"):
        make_dataset(10, concept_shift=1.5)
    with pytest.raises(ValueError, match="covariate_shift"):
        make_dataset(10, covariate_shift=-1)


def test_good_mlp_learns_it_and_concept_shift_costs_it_accuracy(config):
    from trainer.build import build_model
    from trainer.data import check_frame, split, tensors
    from trainer.loop import LoopConfig, fit
    from monitor.stats import accuracy

    rows = check_frame(make_dataset(3000, seed=1), config.model)
    fit_rows, val_rows = split(rows, 0.2, "label", seed=0)
    model = build_model(config, fit_rows)
    fit(model, tensors(model, fit_rows, "label"), tensors(model, val_rows, "label"),
        LoopConfig.from_training(config.training, progress=False))
    same, drifted = make_dataset(4000, seed=2), make_dataset(4000, seed=2, concept_shift=1.0)
    base_acc = accuracy(same["label"], model.predict_proba(same))
    drift_acc = accuracy(drifted["label"], model.predict_proba(drifted))
    assert 0.83 <= base_acc <= 0.92
    assert base_acc - drift_acc >= 0.05
