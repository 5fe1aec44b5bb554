"""Descriptors (monitor/drift/descriptors.py, descriptor_values.py): text and image numbers measured on
real files inside ``model.input_roots``, through the whole check; unreadable and outside-root inputs
are counted, never fatal; off by default, a check is what it was."""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from examples.digits.data import read_image, write_digits, write_image
from examples.text.corpus import corpus
from monitor.config import load_config
from monitor.drift import DriftEvaluator, evaluate_window
from monitor.drift import descriptor_values as dv
from monitor.errors import ConfigError
from monitor.records.inputs import InputRoots
from tests.monitor.drift.test_metrics import promtool_check, samples, scrape

BRIGHTNESS, OOV = "descriptor:image_brightness", "descriptor:text_oov_ratio"


def config(root, descriptors=None, features=None, **drift):
    return load_config(path=None, environ={}, overrides={
        "model": {"features": features or [{"name": "x"}], "input_roots": [str(root)]},
        "drift": {"min_labels": 1000, **({"descriptors": descriptors} if descriptors is not None else {}), **drift}})


def frame(uris, seed, **columns) -> pd.DataFrame:
    """A window (or reference) as the store gives it: a numeric feature, the score, labels, input_uri."""
    rng = np.random.default_rng(seed)
    n = len(uris)
    return pd.DataFrame({"x": rng.normal(size=n), "score": rng.uniform(size=n), "label": rng.integers(0, 2, n),
                         "input_uri": list(uris), **columns})


def described(result):
    return {f.name: f for f in result.features if f.name.startswith("descriptor:")}


# ---- the values ------------------------------------------------------------------------------------
def test_text_values_count_characters_words_unknown_words_and_non_ascii():
    vocabulary = dv.Vocabulary(frozenset({"my", "invoice", "is", "late"}), "test")
    chars, words, oov, non_ascii = dv.text_values("My invoice is LATE, très late!", vocabulary)
    assert (chars, words) == (30, 6) and oov == pytest.approx(1 / 6) and non_ascii == pytest.approx(1 / 30)
    assert np.isnan(dv.text_values("", vocabulary)[2]) and np.isnan(dv.text_values("...", vocabulary)[2])
    assert dv.text_values(dv.decode_text(b"caf\xe9"), None)[3] == pytest.approx(1 / 4)  # not UTF-8: U+FFFD


def test_the_reference_vocabulary_leaves_each_text_out():
    """Against a vocabulary holding its own words every reference text would read 0; a word only
    one text has is unknown to the others."""
    vocabulary, shares = dv.leave_one_out(["a b c", "a b", "a rare", None])
    assert vocabulary.words == {"a", "b", "c", "rare"} and vocabulary.source == "reference"
    assert shares[0] == pytest.approx(1 / 3) and shares[1] == 0 and shares[2] == 0.5 and np.isnan(shares[3])


@pytest.mark.parametrize("name, body", [
    ("vocabulary.json", json.dumps({"words": ["Invoice", "parcel"]})),   # examples.text.network.TopicBag's
    ("vocab.json", json.dumps({"invoice": 0, "parcel": 1})),             # a tokenizer's {word: id}
    ("vocab.txt", "invoice\nparcel\n"),                                   # one a line
    ("vocabulary.json", json.dumps(["invoice", "parcel"])),
])
def test_the_champions_vocabulary_artifact_is_read_in_common_forms(tmp_path, name, body):
    (tmp_path / name).write_text(body)
    found = dv.artifact_vocabulary(tmp_path, None)
    assert isinstance(found, dv.Vocabulary) and found.words == {"invoice", "parcel"}
    assert found.source == f"artifact:{name}"


def test_without_a_usable_artifact_the_reason_is_given(tmp_path):
    assert "no training.entrypoint artifacts" in dv.artifact_vocabulary(None, None)
    assert "no vocab.json" in dv.artifact_vocabulary(tmp_path, "vocab.json")
    (tmp_path / "vocabulary.json").write_text('{"not": "words"}')
    assert "is not a list of words" in dv.artifact_vocabulary(tmp_path, None)


def test_image_values_grey_colour_and_broken(tmp_path):
    grey = np.full((8, 8), 128, dtype=np.uint8)
    grey[:4] = 0
    values, colour = _image(tmp_path / "g.png", Image.fromarray(grey, mode="L"))
    assert not colour and values[2:4] == (8.0, 8.0)
    assert values[0] == pytest.approx(64 / 255) and values[1] == pytest.approx(64 / 255)
    red = np.zeros((600, 900, 3), dtype=np.uint8)
    red[..., 0] = 255
    values, colour = _image(tmp_path / "r.jpg", Image.fromarray(red, mode="RGB"))  # reduced to <= 256 a side
    assert colour and values[2:4] == (900.0, 600.0)
    assert values[4] == pytest.approx(1.0, abs=0.02) and values[5] < 0.02
    assert values[0] == pytest.approx(0.299, abs=0.02)  # luma of pure red
    assert dv.image_values(b"not an image") is dv.Unread.UNREADABLE


def _image(path, image):
    image.save(path)
    got = dv.image_values(path.read_bytes())
    assert not isinstance(got, dv.Unread)
    return got


def test_reading_stays_inside_the_roots_and_says_why_not(tmp_path):
    root = tmp_path / "inputs"
    root.mkdir()
    (root / "a.txt").write_text("hello")
    (root / "big.txt").write_text("x" * 5000)
    (tmp_path / "secret.txt").write_text("not yours")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(root / "pipe")
    roots = InputRoots([str(root)], ["s3"])
    got = {uri: dv.read_input(uri, roots, 1024) for uri in
           ["a.txt", (root / "a.txt").as_uri(), None, "../secret.txt", str(tmp_path / "secret.txt"), "link.txt",
            "missing.txt", "big.txt", "s3://bucket/key.txt", "http://example.com/a.txt", "pipe"]}
    assert got == {"a.txt": b"hello", (root / "a.txt").as_uri(): b"hello", None: dv.Unread.NO_INPUT,
                   "../secret.txt": dv.Unread.OUTSIDE_ROOTS, str(tmp_path / "secret.txt"): dv.Unread.OUTSIDE_ROOTS,
                   "link.txt": dv.Unread.OUTSIDE_ROOTS, "missing.txt": dv.Unread.UNREADABLE,
                   "big.txt": dv.Unread.TOO_LARGE, "s3://bucket/key.txt": dv.Unread.REMOTE,
                   "http://example.com/a.txt": dv.Unread.OUTSIDE_ROOTS, "pipe": dv.Unread.UNREADABLE}


def test_the_cache_is_bounded_least_recently_used_first_out():
    cache = dv.ValueCache(2)
    cache.put("a", (1.0,))
    cache.put("b", (2.0,))
    assert cache.get("a") == (1.0,)
    cache.put("c", (3.0,))
    assert cache.get("b") is None and cache.get("a") == (1.0,) and len(cache) == 2
    off = dv.ValueCache(0)
    off.put("a", (1.0,))
    assert off.get("a") is None


# ---- text through the check --------------------------------------------------------------------------
def texts(folder, n, seed, shift=0.0):
    folder.mkdir(parents=True, exist_ok=True)
    uris = []
    for i, text in enumerate(corpus(n, seed=seed, shift=shift)["text"]):
        (folder / f"{seed}-{i}.txt").write_text(text)
        uris.append(str(folder / f"{seed}-{i}.txt"))
    return uris


@pytest.fixture(scope="module")
def messages(tmp_path_factory):
    root = tmp_path_factory.mktemp("messages")
    return root, frame(texts(root, 1200, seed=1), 1), frame(texts(root, 500, seed=2), 2), \
        frame(texts(root, 500, seed=3, shift=0.7), 3)


def test_unseen_words_raise_the_oov_descriptor_and_a_stationary_window_does_not(messages):
    root, reference, steady, shifted = messages
    cfg = config(root, {"text": "input_uri"})
    evaluate = DriftEvaluator()
    before = evaluate(reference, steady, cfg.model, cfg.drift, {})
    after = evaluate(reference, shifted, cfg.model, cfg.drift, {})
    assert set(described(before)) == {"descriptor:text_chars", "descriptor:text_words", OOV,
                                      "descriptor:text_non_ascii_ratio"}
    assert not any(f.drifted for f in described(before).values()), described(before)
    assert described(after)[OOV].drifted and OOV in after.drifted_features
    assert after.drift_share == float(after.feature("x").drifted)  # beside the features, not in the share
    (kind,) = after.descriptors.kinds
    assert kind.vocabulary.source == "reference" and "no training.entrypoint artifacts" in kind.vocabulary.note
    assert kind.reference.read == 1200 and kind.current.read == 500
    # The per-feature series carry them, under their own names; the exposition stays valid.
    text = scrape(lambda: after)
    promtool_check(text)
    got = samples(text)
    assert got[("driftloop_model_feature_drifted", (("feature", OOV), ("model", "demo")))] == 1.0
    assert any(name == "driftloop_model_feature_drift_score" and ("feature", OOV) in labels
               for name, labels in got)


def test_counted_in_the_drift_share_only_when_asked(messages):
    root, reference, _, shifted = messages
    on = config(root, {"text": "input_uri", "drift_share": True})
    result = evaluate_window(reference, shifted, on.model, on.drift, {})
    assert result.drift_share == pytest.approx(sum(f.drifted for f in result.features) / 5)


def test_a_text_feature_is_a_source_too(tmp_path):
    features = [{"name": "x"}, {"name": "message", "type": "categorical"}]
    cfg = config(tmp_path, {"text": "message"}, features)
    reference = frame([None] * 1200, 1, message=corpus(1200, seed=1)["text"])
    shifted = frame([None] * 500, 3, message=corpus(500, seed=3, shift=0.7)["text"])
    result = evaluate_window(reference, shifted, cfg.model, cfg.drift, {})
    assert described(result)[OOV].drifted and result.feature("message").skipped is None
    assert result.descriptors.kinds[0].source == "message"


def test_the_source_must_be_input_uri_or_a_categorical_feature(tmp_path):
    with pytest.raises(ConfigError, match="drift.descriptors.text: 'x' is neither input_uri nor a categorical"):
        config(tmp_path, {"text": "x"})
    with pytest.raises(ConfigError, match="drift.descriptors.image"):
        config(tmp_path, {"image": "x"})


def test_each_model_of_a_fleet_chooses_its_own(tmp_path):
    path = tmp_path / "driftloop.yaml"
    path.write_text(json.dumps({"drift": {"min_labels": 1000}, "models": {
        "photos": {"model": {"features": [{"name": "x"}]}, "drift": {"descriptors": {"image": "input_uri"}}},
        "churn": {"model": {"features": [{"name": "x"}]}}}}))
    cfg = load_config(path, environ={})
    assert cfg.for_model("photos").drift.descriptors.image == "input_uri"
    assert not cfg.for_model("churn").drift.descriptors.enabled


# ---- images through the check -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The digits example's images: the train split as the reference, the stream split's images as
    they are, and the same images at half the brightness."""
    root = tmp_path_factory.mktemp("digits")
    index = write_digits(root, seed=0)
    reference = index[index["split"] == "train"].reset_index(drop=True)
    steady = index[index["split"] == "stream"].head(400).reset_index(drop=True)
    darkened = [str(write_image(root / "dark" / f"{i:04d}.png", read_image(uri) * 255 * 0.5))
                for i, uri in enumerate(steady["input_uri"])]
    return root, frame(reference["input_uri"], 1), frame(steady["input_uri"], 2), frame(darkened, 3)


def test_darkened_images_are_flagged_by_brightness_and_a_stationary_batch_is_not(digits):
    root, reference, steady, dark = digits
    cfg = config(root, {"image": "input_uri"})
    evaluate = DriftEvaluator()
    before = evaluate(reference, steady, cfg.model, cfg.drift, {})
    after = evaluate(reference, dark, cfg.model, cfg.drift, {})
    # Grey images: no channel means (they would repeat the brightness).
    assert set(described(before)) == {BRIGHTNESS, "descriptor:image_contrast", "descriptor:image_width",
                                      "descriptor:image_height"}
    assert not any(f.drifted for f in described(before).values()), described(before)
    assert described(after)[BRIGHTNESS].drifted and described(after)["descriptor:image_contrast"].drifted
    assert not described(after)["descriptor:image_width"].drifted
    assert described(after)[BRIGHTNESS].details["current_mean"] < 0.6 * described(before)[BRIGHTNESS].details[
        "current_mean"]
    # The window's files are read once: the same window again comes from the cache.
    again = evaluate(reference, dark, cfg.model, cfg.drift, {})
    assert again.descriptors.kinds[0].current.cached == 400 and evaluate.hits == 2


def test_unreadable_and_outside_root_inputs_are_counted_not_fatal(digits, tmp_path):
    root, reference, _, dark = digits
    (tmp_path / "secret.png").write_bytes((root / "dark" / "0000.png").read_bytes())
    (root / "escape.png").unlink(missing_ok=True)
    (root / "escape.png").symlink_to(tmp_path / "secret.png")
    (root / "notes.png").write_text("not an image")
    broken = dark.copy()
    broken.loc[:4, "input_uri"] = ["../secret.png", str(tmp_path / "secret.png"), "escape.png",
                                   str(root / "missing.png"), str(root / "notes.png")]
    broken.loc[5, "input_uri"] = None
    cfg = config(root, {"image": "input_uri"})
    result = evaluate_window(reference, broken, cfg.model, cfg.drift, {})
    (kind,) = result.descriptors.kinds
    assert kind.current.read == 394 and dict(kind.current.unread) == {
        dv.Unread.OUTSIDE_ROOTS: 3, dv.Unread.UNREADABLE: 2, dv.Unread.NO_INPUT: 1}
    assert result.to_dict()["descriptors"]["kinds"][0]["current"]["unread"] == {
        "no_input": 1, "outside_roots": 3, "unreadable": 2}
    assert described(result)[BRIGHTNESS].drifted and described(result)[BRIGHTNESS].details["current_rows"] == 394
    from monitor.drift.summary import summary_html
    page = summary_html(result)
    assert "Image descriptors (input_uri): window inputs 394 of 400 read" in page and "3 outside_roots" in page
    # /metrics: the rows sampled and those that gave no value, per kind, side and reason (0 when none).
    got = descriptor_series(result)
    assert got["rows"] == {("image", "current"): 400, ("image", "reference"): kind.reference.rows}
    assert kind.reference.rows > 0 and not kind.reference.unread
    assert got["unread"] == {**{("image", side, r.value): 0 for side in ("reference", "current") for r in dv.Unread},
                             ("image", "current", "outside_roots"): 3, ("image", "current", "unreadable"): 2,
                             ("image", "current", "no_input"): 1}
    assert got["skipped"] == {"image": 0}
    # The check's JSON form of the block reads the same.
    assert descriptor_series(dataclasses.replace(result, descriptors=result.to_dict()["descriptors"])) == got


def test_a_wrong_input_root_shows_in_the_metrics(digits, tmp_path):
    """Every window input outside the configured root (a root that does not hold them): the current
    side's unread rows equal its rows, which is what DriftloopDescriptorInputsUnreadable pages on."""
    root, reference, steady, _ = digits
    elsewhere = steady.copy()
    elsewhere["input_uri"] = [str(tmp_path / "moved" / f"{i}.png") for i in range(len(steady))]
    cfg = config(root, {"image": "input_uri"})
    got = descriptor_series(evaluate_window(reference, elsewhere, cfg.model, cfg.drift, {}))
    assert got["rows"][("image", "current")] == got["unread"][("image", "current", "outside_roots")] == 400
    assert sum(v for (_, side, _), v in got["unread"].items() if side == "reference") == 0


def descriptor_series(result) -> dict[str, dict]:
    """The descriptor families of a scrape (promtool-clean) by their labels, less model."""
    text = scrape(lambda: result)
    promtool_check(text)
    families = {"driftloop_model_descriptor_rows": "rows", "driftloop_model_descriptor_unread_rows": "unread",
                "driftloop_model_descriptor_skipped": "skipped"}
    out: dict[str, dict] = {short: {} for short in families.values()}
    for (name, labels), value in samples(text).items():
        if name in families:
            got = dict(labels)
            assert got.pop("model") == "demo"
            key = tuple(got[k] for k in ("kind", "side", "reason") if k in got)
            out[families[name]][key[0] if len(key) == 1 else key] = value
    return out


def test_a_reference_without_input_uri_skips_them_with_the_reason(digits):
    root, reference, steady, _ = digits
    cfg = config(root, {"image": "input_uri"})
    result = evaluate_window(reference.drop(columns="input_uri"), steady, cfg.model, cfg.drift, {})
    skipped = described(result)
    assert skipped and all(f.skipped == "the reference has no input_uri column" for f in skipped.values())
    assert result.feature("x").skipped is None
    got = descriptor_series(result)
    assert got["skipped"] == {"image": 1} and set(got["rows"].values()) == {0}
    assert len(got["unread"]) == 2 * len(dv.Unread) and set(got["unread"].values()) == {0}


def test_off_by_default_a_check_is_unchanged(digits):
    root, reference, steady, _ = digits
    off = config(root)
    assert not off.drift.descriptors.enabled
    plain = evaluate_window(reference, steady, off.model, off.drift, {})
    on = config(root, {"image": "input_uri"})
    with_descriptors = evaluate_window(reference, steady, on.model, on.drift, {})
    assert [f.name for f in plain.features] == ["x"] and plain.descriptors is None
    assert plain.to_dict()["descriptors"] is None
    assert "driftloop_model_descriptor" not in scrape(lambda: plain)
    assert plain.drift_share == with_descriptors.drift_share
    assert plain.feature("x") == with_descriptors.feature("x")


def test_the_dashboards_descriptor_panels_select_the_descriptor_series():
    """The Model health dashboard's Descriptors row reads the per-feature series of ``descriptor:*``
    features and the descriptor row counts the collector serves (the live loop has none to show:
    tests/observability/test_live_daemon.py skips them)."""
    import re
    from collections import Counter

    from monitor.drift.descriptors import DescriptorReport, KindReport, SideCount, column
    from tests.monitor.drift.task_frames import filled_result
    from tests.observability.promql import iter_panels, load_dashboards, metric_names
    board = load_dashboards()["model-health.json"]
    (row,) = [p for p in board["panels"] if p["type"] == "row" and p["title"].startswith("Descriptors")]
    exprs = [t["expr"] for p in iter_panels(row["panels"]) for t in p["targets"]]
    assert {p["title"] for p in row["panels"]} == {"Descriptor drift", "Drifted descriptors",
                                                   "Descriptor inputs unread"}
    per_feature = [e for e in exprs if "driftloop_model_feature_" in e]
    for expr in per_feature:
        (pattern,) = re.findall(r'feature=~"([^"]+)"', expr)
        assert re.fullmatch(pattern, column("image_brightness")) and not re.fullmatch(pattern, "x")
    assert any("driftloop_model_feature_drift_score" in e for e in per_feature)
    unread = SideCount(rows=4, read=1, unread=Counter({dv.Unread.UNREADABLE: 3}))
    report = DescriptorReport((KindReport("image", "input_uri", ["image_brightness"], SideCount(4, 4), unread),),
                              0.1, False)
    served = {name for name, _ in samples(scrape(lambda: dataclasses.replace(filled_result("binary"),
                                                                               descriptors=report)))}
    counts = [e for e in exprs if e not in per_feature]
    assert counts and all(metric_names(e) <= served and "driftloop_model_descriptor_" in e for e in counts)
