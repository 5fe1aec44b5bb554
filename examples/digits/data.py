"""The digits example's data: scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10
classes; nothing is downloaded) written out as real image files, an index of them, and the drifts
the loop is shown with.

    index = write_digits("digits-data")              # images/base/0000.png ... + index.csv
    stream = DigitStream("digits-data", index, seed=7)
    batch = stream.batch(0, 200)                     # request_id, input_uri, label (new files)
    batch = stream.batch(9, 200, drift="rotate")     # the same writers, rotated 20-30 degrees

Images are PNG when Pillow is importable (it comes with MLflow's dependencies), else binary PGM
written with numpy; :func:`read_image` reads either. Pixels are 8-bit grey: the dataset's 0..16
ink levels scaled to 0..255.

The index (``index.csv``) has one row per image: ``input_uri`` (a ``file://`` URI, what a service
sends and the trainer reads back), ``label`` (the digit as a class name, "0".."9") and ``split``:
``train`` (what the baseline is trained on, each image once with the stream's jitter; driftloop's
trainer holds out its own test rows from it) or ``stream`` (never trained on by the baseline;
live traffic is drawn from these).

Why a stream with jitter: 1,797 images are few for a streaming loop, so :class:`DigitStream`
samples ``stream`` images with replacement and gives each draw a light random change (ink scaled
by 0.85-1.15, a little noise on the strokes): every live request is a new file, and the stream can
be as long as the loop needs. A batch is deterministic given (seed, batch number). Because the
pool is small, traffic after a retrain holds near-copies of the rows it was retrained on; the
figures in docs/benchmarks.md say so next to them.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Sequence
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd

__all__ = ["CLASSES", "DRIFTS", "DigitStream", "add_noise", "image_format", "jitter", "read_image", "rotate",
           "thicken", "uri_of", "write_digits", "write_image"]

SIZE = 8
CLASSES = [str(d) for d in range(10)]
DRIFTS = ("rotate", "noise", "thick")  # the changes DigitStream.batch can apply
INDEX = "index.csv"


# ---- image files -----------------------------------------------------------------------------
def image_format() -> str:
    """``png`` when Pillow is importable, else ``pgm`` (binary greymap, written with numpy)."""
    return "png" if importlib.util.find_spec("PIL") is not None else "pgm"


def write_image(path: Path, pixels: np.ndarray) -> Path:
    """Write an 8-bit grey image; the suffix of ``path`` picks the format (.png or .pgm)."""
    pixels = np.asarray(pixels, dtype=np.uint8)
    if pixels.ndim != 2:
        raise ValueError(f"expected a 2-D grey image, got shape {pixels.shape}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".png":
        from PIL import Image
        Image.fromarray(pixels, mode="L").save(path)
    elif path.suffix == ".pgm":
        height, width = pixels.shape
        path.write_bytes(f"P5\n{width} {height}\n255\n".encode() + pixels.tobytes())
    else:
        raise ValueError(f"unknown image type {path.suffix!r} (expected .png or .pgm)")
    return path


def path_of(ref: str) -> Path:
    """The file behind a ``file://`` URI or a plain path."""
    if ref.startswith("file:"):
        return Path(unquote(urlparse(ref).path))
    return Path(ref)


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


def read_image(ref: str) -> np.ndarray:
    """The image behind ``ref`` (a ``file://`` URI or a path) as float32 ``[H, W]`` in 0..1."""
    path = path_of(ref)
    if path.suffix == ".pgm":
        data = path.read_bytes()
        fields = data.split(maxsplit=4)  # P5, width, height, maxval, pixels
        if len(fields) < 5 or fields[0] != b"P5":
            raise ValueError(f"{path} is not a binary PGM image")
        width, height, maxval = int(fields[1]), int(fields[2]), int(fields[3])
        pixels = np.frombuffer(data[len(data) - width * height:], dtype=np.uint8).reshape(height, width)
        return pixels.astype(np.float32) / maxval
    from PIL import Image
    with Image.open(path) as image:
        return np.asarray(image.convert("L"), dtype=np.float32) / 255.0


# ---- changes to an image ---------------------------------------------------------------------
def _to_uint8(pixels: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def rotate(pixels: np.ndarray, degrees: float) -> np.ndarray:
    """The image turned by ``degrees`` (counter-clockwise) about its centre, same size."""
    from scipy import ndimage
    return _to_uint8(ndimage.rotate(pixels.astype(np.float64), degrees, reshape=False, order=1, mode="constant"))


def add_noise(pixels: np.ndarray, rng: np.random.Generator, sigma: float = 60.0) -> np.ndarray:
    """Gaussian noise of ``sigma`` grey levels on every pixel (a worse scanner)."""
    return _to_uint8(pixels.astype(np.float64) + rng.normal(0.0, sigma, size=pixels.shape))


def thicken(pixels: np.ndarray) -> np.ndarray:
    """Strokes one pixel thicker (a writer with a broader pen): a 2x2 grey dilation."""
    from scipy import ndimage
    return ndimage.grey_dilation(pixels, size=(2, 2))


def jitter(pixels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A light random change that keeps the digit and how hard it is to read: ink scaled by
    0.85..1.15 and a little sensor noise (4 grey levels). No shift: on an 8x8 image a one-pixel
    shift costs a CNN a few points, and live traffic is meant to look like the held-out digits the
    baseline is judged on, or the loop would alarm on the jitter."""
    scaled = pixels.astype(np.float64) * rng.uniform(0.85, 1.15)
    return _to_uint8(scaled + rng.normal(0.0, 4.0, size=pixels.shape) * (pixels > 0))


# ---- the dataset on disk ---------------------------------------------------------------------
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    bunch = load_digits()
    pixels = _to_uint8(bunch.images * (255.0 / 16.0))  # ink levels 0..16 -> grey 0..255
    return pixels, bunch.target.astype(np.int64)


def write_digits(folder: str | Path, *, stream_fraction: float = 0.4, seed: int = 0) -> pd.DataFrame:
    """Write the 1,797 digits under ``folder/images/base/`` and the index (``folder/index.csv``);
    return the index. ``stream_fraction`` of each class goes to the ``stream`` split (stratified,
    by ``seed``). Writing again into the same folder gives the same files and index."""
    from sklearn.model_selection import train_test_split
    folder = Path(folder)
    pixels, target = _digits()
    suffix = image_format()
    uris = [uri_of(write_image(folder / "images" / "base" / f"{i:04d}.{suffix}", img)) for i, img in enumerate(pixels)]
    _, stream_idx = train_test_split(np.arange(len(target)), test_size=stream_fraction, stratify=target,
                                     random_state=seed)
    split = np.full(len(target), "train", dtype=object)
    split[stream_idx] = "stream"
    index = pd.DataFrame({"input_uri": uris, "label": [CLASSES[t] for t in target], "split": split})
    index.to_csv(folder / INDEX, index=False)
    return index


def read_index(folder: str | Path) -> pd.DataFrame:
    return pd.read_csv(Path(folder) / INDEX, dtype={"label": str})


class DigitStream:
    """Traffic from one split's images (``stream`` by default), each jittered and written as a new
    file, optionally changed by a drift. ``batch(number, n)`` draws with replacement and is the
    same for the same seed; ``every()`` is each image of the split once, jittered the same way
    (what the baseline is trained on, so its reference looks like live traffic)."""

    def __init__(self, folder: str | Path, index: pd.DataFrame, *, split: str = "stream", seed: int = 0,
                 angle: tuple[float, float] = (20.0, 30.0), noise_sigma: float = 60.0):
        self.folder = Path(folder)
        pool = index[index["split"] == split].reset_index(drop=True)
        if pool.empty:
            raise ValueError(f"the index has no {split!r} rows to draw traffic from")
        self.pool, self.split = pool, split
        self.images = [np.rint(read_image(uri) * 255.0).astype(np.uint8) for uri in pool["input_uri"]]
        self.seed, self.angle, self.noise_sigma = seed, angle, noise_sigma
        self.suffix = image_format()

    def batch(self, number: int, n: int, drift: str | None = None) -> pd.DataFrame:
        """``n`` requests: ``request_id``, ``input_uri`` (a new file), ``label``; ``drift`` is one
        of :data:`DRIFTS` or None (the writers the baseline was trained on)."""
        rng = np.random.default_rng([self.seed, number])
        return self._write(f"{drift or 'base'}-{number:05d}", rng.integers(0, len(self.pool), size=n), rng,
                           np.random.default_rng([self.seed, number, 1]), drift)

    def every(self, drift: str | None = None) -> pd.DataFrame:
        """Each image of the split once, jittered (and changed by ``drift``)."""
        rng = np.random.default_rng([self.seed, 1 << 30])
        return self._write(f"{self.split}-{drift or 'base'}", np.arange(len(self.pool)), rng,
                           np.random.default_rng([self.seed, 1 << 30, 1]), drift)

    def _write(self, name: str, picks: np.ndarray, rng: np.random.Generator, changes: np.random.Generator,
               drift: str | None) -> pd.DataFrame:
        """``changes`` has its own draws, so a drifted batch has the same picks and jitter as the
        plain batch of the same number."""
        if drift is not None and drift not in DRIFTS:
            raise ValueError(f"drift must be one of {', '.join(DRIFTS)} or None, got {drift!r}")
        out = self.folder / "images" / "stream" / name
        uris = []
        for i, k in enumerate(picks):
            img = jitter(self.images[k], rng)
            if drift == "rotate":
                img = rotate(img, changes.uniform(*self.angle))
            elif drift == "noise":
                img = add_noise(img, changes, self.noise_sigma)
            elif drift == "thick":
                img = thicken(img)
            uris.append(uri_of(write_image(out / f"{i:05d}.{self.suffix}", img)))
        return pd.DataFrame({"request_id": [f"{name}-{i}" for i in range(len(picks))],
                             "input_uri": uris, "label": self.pool["label"].to_numpy()[picks]})


def pixels_of(refs: Sequence[str]) -> np.ndarray:
    """Many images as one float32 ``[N, 8, 8]`` array (tests and quick looks)."""
    return np.stack([read_image(r) for r in refs]) if len(refs) else np.zeros((0, SIZE, SIZE), np.float32)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m examples.digits.data FOLDER``: the images, ``index.csv``, and ``train.csv`` (the
    ``train`` split jittered as live traffic is: ``request_id``, ``input_uri``, ``label``), the
    table ``driftloop train --data`` takes with ``training.entrypoint``."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m examples.digits.data", description=main.__doc__)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    index = write_digits(args.folder, seed=args.seed)
    train = DigitStream(args.folder, index, split="train", seed=args.seed).every()
    train.to_csv(args.folder / "train.csv", index=False)
    print(f"{len(index)} images under {args.folder / 'images'}; {args.folder / INDEX}; "
          f"{args.folder / 'train.csv'} ({len(train)} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
