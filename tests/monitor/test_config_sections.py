"""training.gate, training.export and training.shadow: the sections, and the flat keys of the
previous release still accepted with one deprecation warning naming the new key."""
import warnings

import pytest

from monitor.config import DEPRECATED_TRAINING_KEYS, load_config
from monitor.errors import ConfigError


def test_the_sections_are_read_from_the_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("training:\n  gate: {min_auc_gain: 0.02, confidence: 0.9, requires_live_win: true}\n"
                 "  export: {onnx: false}\n  shadow: {windows: 3}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keys warn of nothing
        t = load_config(path=f, environ={}).training
    assert (t.gate.min_auc_gain, t.gate.confidence, t.gate.requires_live_win) == (0.02, 0.9, True)
    assert t.export.onnx is False and t.shadow.windows == 3
    assert t.gate.min_accuracy_gain == 0.01 and t.export.int8_min_accuracy_ratio == 0.98  # defaults kept


@pytest.mark.parametrize("old, section, new, value", [
    ("promote_min_auc_gain", "gate", "min_auc_gain", 0.03), ("gate_confidence", "gate", "confidence", 0.9),
    ("export_onnx", "export", "onnx", False), ("shadow_windows", "shadow", "windows", 2)])
def test_an_old_flat_key_still_works_with_one_warning_naming_the_new_key(tmp_path, old, section, new, value):
    f = tmp_path / "c.yaml"
    f.write_text(f"training:\n  {old}: {str(value).lower()}\n")
    with pytest.warns(FutureWarning) as caught:
        t = load_config(path=f, environ={}).training
    assert getattr(getattr(t, section), new) == value
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert messages == [f"training.{old} is deprecated: use training.{section}.{new}"]


def test_an_old_key_from_the_environment_is_moved_too():
    with pytest.warns(FutureWarning, match="training.shadow_windows is deprecated: use training.shadow.windows"):
        cfg = load_config(path=None, environ={"DRIFTLOOP_TRAINING__SHADOW_WINDOWS": "4"})
    assert cfg.training.shadow.windows == 4


def test_the_new_key_from_the_environment():
    cfg = load_config(path=None, environ={"DRIFTLOOP_TRAINING__GATE__MAX_MODEL_MB": "5"})
    assert cfg.training.gate.max_model_mb == 5.0


def test_old_and_new_key_with_different_values_is_an_error_naming_both():
    with pytest.raises(ConfigError) as err, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        load_config(path=None, environ={}, overrides={"training": {"export_onnx": True, "export": {"onnx": False}}})
    assert "training.export_onnx" in str(err.value) and "training.export.onnx" in str(err.value)


def test_old_and_new_key_with_the_same_value_is_accepted():
    with pytest.warns(FutureWarning):
        t = load_config(path=None, environ={}, overrides={"training": {"reference_floor": 0.1,
                                                                       "gate": {"reference_floor": 0.1}}}).training
    assert t.gate.reference_floor == 0.1


def test_an_unknown_key_in_a_section_is_named():
    with pytest.raises(ConfigError, match="training.gate.min_auc_gian: unknown key"):
        load_config(path=None, environ={}, overrides={"training": {"gate": {"min_auc_gian": 0.1}}})


def test_cost_limits_need_the_export():
    with pytest.raises(ConfigError, match="export.onnx"):
        load_config(path=None, environ={}, overrides={"training": {"export": {"onnx": False},
                                                                   "gate": {"max_latency_ms": 5}}})


def test_every_old_key_names_an_existing_new_key():
    t = load_config(path=None, environ={}).training
    for old, (section, new) in DEPRECATED_TRAINING_KEYS.items():
        assert hasattr(getattr(t, section), new), old
        assert old not in type(t).model_fields
