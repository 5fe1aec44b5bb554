"""examples/digits/data.py: the digits as real image files, their index, and the drifts."""
from __future__ import annotations

import numpy as np
import pytest

from examples.digits import data


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("digits")
    return folder, data.write_digits(folder, seed=0)


def test_the_files_are_images_of_the_bundled_digits(written):
    from sklearn.datasets import load_digits
    folder, index = written
    assert len(index) == 1797 and list(index.columns) == ["input_uri", "label", "split"]
    first = data.path_of(index["input_uri"].iloc[0])
    magic = first.read_bytes()[:8]
    assert magic == b"\x89PNG\r\n\x1a\n" if data.image_format() == "png" else magic.startswith(b"P5\n8 8\n")
    digits = load_digits()
    for i in (0, 100, 1796):
        pixels = data.read_image(index["input_uri"].iloc[i])
        assert pixels.shape == (8, 8) and pixels.dtype == np.float32
        np.testing.assert_allclose(pixels * 16, digits.images[i], atol=16 / 255)
        assert index["label"].iloc[i] == str(digits.target[i])
    assert (folder / "index.csv").exists() and data.read_index(folder).equals(index)


def test_the_split_is_stratified_and_repeatable(written, tmp_path):
    _, index = written
    assert index["split"].value_counts().to_dict() == {"train": 1078, "stream": 719}
    shares = index[index["split"] == "stream"]["label"].value_counts() / index["label"].value_counts()
    assert shares.between(0.35, 0.45).all()
    again = data.write_digits(tmp_path, seed=0)
    assert (again["split"] == index["split"]).all() and (again["label"] == index["label"]).all()


def test_pgm_files_read_back_as_written(tmp_path):
    pixels = np.arange(64, dtype=np.uint8).reshape(8, 8) * 3
    path = data.write_image(tmp_path / "x.pgm", pixels)
    assert path.read_bytes().startswith(b"P5\n8 8\n255\n")
    np.testing.assert_allclose(data.read_image(data.uri_of(path)), pixels / 255.0)


def test_stream_batches_are_new_files_and_deterministic(written):
    folder, index = written
    stream = data.DigitStream(folder, index, seed=3)
    a, b = stream.batch(5, 40), data.DigitStream(folder, index, seed=3).batch(5, 40)
    assert list(a.columns) == ["request_id", "input_uri", "label"] and len(a) == 40
    assert a["request_id"].is_unique and not set(a["input_uri"]) & set(index["input_uri"])
    assert (a["label"] == b["label"]).all()
    np.testing.assert_array_equal(data.pixels_of(a["input_uri"]), data.pixels_of(b["input_uri"]))
    assert not np.array_equal(data.pixels_of(stream.batch(6, 40)["input_uri"]), data.pixels_of(a["input_uri"]))


def test_rotation_changes_the_pixels_deterministically(written):
    folder, index = written
    stream = data.DigitStream(folder, index, seed=3)
    plain, turned = stream.batch(7, 30), stream.batch(7, 30, drift="rotate")
    assert (plain["label"] == turned["label"]).all()  # the same draws and jitter, then turned
    before, after = data.pixels_of(plain["input_uri"]), data.pixels_of(turned["input_uri"])
    assert np.abs(before - after).mean() > 0.05
    np.testing.assert_array_equal(after, data.pixels_of(stream.batch(7, 30, drift="rotate")["input_uri"]))
    img = (np.eye(8) * 255).astype(np.uint8)
    assert np.array_equal(data.rotate(img, 0.0), img) and not np.array_equal(data.rotate(img, 25.0), img)


def test_noise_and_thicker_strokes(written):
    folder, index = written
    stream = data.DigitStream(folder, index, seed=3)
    plain = data.pixels_of(stream.batch(8, 30)["input_uri"])
    noisy = data.pixels_of(stream.batch(8, 30, drift="noise")["input_uri"])
    thick = data.pixels_of(stream.batch(8, 30, drift="thick")["input_uri"])
    assert np.abs(noisy - plain).mean() > 0.05
    assert (thick >= plain - 1e-6).all() and thick.sum() > plain.sum() * 1.2  # dilation only adds ink
    with pytest.raises(ValueError, match="drift must be one of"):
        stream.batch(0, 3, drift="sideways")


def test_every_writes_each_image_of_a_split_once_jittered(written):
    folder, index = written
    train = data.DigitStream(folder, index, split="train", seed=3).every()
    originals = index[index["split"] == "train"]
    assert len(train) == len(originals) and (train["label"].to_numpy() == originals["label"].to_numpy()).all()
    jittered, plain = data.pixels_of(train["input_uri"][:50]), data.pixels_of(originals["input_uri"][:50])
    assert 0 < np.abs(jittered - plain).mean() < 0.1  # changed a little, not a different digit
