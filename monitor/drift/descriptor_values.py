"""The numbers behind descriptors: reading a model's inputs safely and measuring a text or an image.

What is measured (each a float; NaN where a row has no value):

=========================  ==================================================================
``text_chars``             characters of the text (after UTF-8 decoding)
``text_words``             its words: whitespace-separated, lower-cased, surrounding punctuation
                           stripped (``"Late."`` is ``late``), empty ones dropped
``text_oov_ratio``         share of its words outside the vocabulary (NaN for a text without
                           words), counted on its first ``MAX_OOV_WORDS`` words
``text_non_ascii_ratio``   share of its characters beyond ASCII (bytes that are not UTF-8 count:
                           they decode to U+FFFD)
``image_brightness``       mean luminance, 0 (black) to 1 (white): ITU-R 601 luma of R, G, B
``image_contrast``         the luminance's standard deviation, 0 to 0.5
``image_width``,           pixels
``image_height``
``image_{red,green,blue}_mean``  each channel's mean, 0 to 1 (colour images)
=========================  ==================================================================

An image's pixel statistics are taken on a copy at most ``MAX_SIDE`` pixels wide and high
(Pillow's box reduction; JPEG decodes at that scale directly), so a 24-megapixel photo costs about
what a thumbnail does; images over ``MAX_PIXELS`` are not decoded at all (``too_large``).

**Reading.** An ``input_uri`` is resolved and opened as ``driftloop export-samples`` and the summary
page's previews do (:func:`monitor.drift.sample_export.input_file` and ``open_regular``, over
:class:`monitor.records.inputs.InputRoots`, the resolver of ingestion and the trainer): nothing
outside ``model.input_roots`` is opened (a ``..``, another absolute path or a link out of a root is
``outside_roots``), a URI of a listed scheme (``s3://``) is never fetched (``remote``), and the file
is opened by its real path without following a final link and must be a regular file of at most
``max_file_bytes``. Every row that yields no value says why (:class:`Unread`, in the words of
export-samples' ``skipped``); none of them fails a check.

**Cache.** :class:`ValueCache` keeps the values of the last ``cache_entries`` uris (least recently
used out), so a check whose window moved by a few hundred rows reads a few hundred files. It is
keyed by the uri as stored: a file rewritten in place under the same uri keeps its old values until
it leaves the cache (model inputs are usually written once, under a new name per request).
"""
from __future__ import annotations

import enum
import io
import json
import math
import string
import threading
import warnings
from collections import Counter, OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from monitor.drift.sample_export import Skip, input_file, open_regular
from monitor.records.inputs import InputRoots

TEXT = ("text_chars", "text_words", "text_oov_ratio", "text_non_ascii_ratio")
IMAGE = ("image_brightness", "image_contrast", "image_width", "image_height")
CHANNELS = ("image_red_mean", "image_green_mean", "image_blue_mean")
MAX_OOV_WORDS = 10_000       # words per text its out-of-vocabulary share is counted on
MAX_SIDE = 256               # pixel statistics on a copy at most this wide and high
MAX_PIXELS = 50_000_000      # larger images are not decoded (Pillow warns from 89 M)
MAX_VOCABULARY_BYTES = 64 * 1024 * 1024
VOCABULARY_FILES = ("vocabulary.json", "vocab.json", "vocab.txt")  # looked for in this order
_GREY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "I;16N", "F"})
_PUNCTUATION = string.punctuation + "\u201c\u201d\u2018\u2019\u00ab\u00bb"


class Unread(enum.Enum):
    """Why a row has no descriptor values (the report counts rows by these values)."""
    NO_INPUT = "no_input"              # no input_uri (or no text in the feature)
    OUTSIDE_ROOTS = "outside_roots"    # outside model.input_roots / input_schemes: never opened
    REMOTE = "remote"                  # a URI of a listed scheme (s3://...): driftloop never fetches it
    UNREADABLE = "unreadable"          # missing, not a regular file, a link at the last step, or not an image
    TOO_LARGE = "too_large"            # over max_file_bytes, or an image over MAX_PIXELS


# ---- text --------------------------------------------------------------------------------------
def words_of(text: str) -> list[str]:
    """The words of ``text`` as descriptors count them (module docstring)."""
    words = (w.strip(_PUNCTUATION) for w in text.lower().split())
    return [w for w in words if w]


@dataclass(frozen=True)
class Vocabulary:
    """The words a text's out-of-vocabulary share is measured against; ``source`` says whence
    (``artifact:<file>`` or ``reference``), ``note`` why an artifact was not used."""

    words: frozenset[str]
    source: str
    note: str | None = None

    def __len__(self) -> int:
        return len(self.words)


def text_values(text: str, vocabulary: Vocabulary | None) -> tuple[float, ...]:
    """``TEXT``'s four values for one text (``vocabulary`` None: the share is NaN)."""
    words = words_of(text)
    chars = len(text)
    non_ascii = chars - len(text.encode("ascii", "ignore"))
    counted = words[:MAX_OOV_WORDS]
    oov = (sum(w not in vocabulary.words for w in counted) / len(counted)
           if counted and vocabulary is not None else math.nan)
    return float(chars), float(len(words)), oov, non_ascii / chars if chars else math.nan


def decode_text(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


def leave_one_out(texts: Sequence[str | None]) -> tuple[Vocabulary, list[float]]:
    """The reference texts' vocabulary and each text's out-of-vocabulary share against the *other*
    texts' words. Against a vocabulary it is part of, every reference text would read 0 and any new
    text its rare words: stationary windows would drift. A word is out of the others' vocabulary
    exactly when no other text has it (its document frequency is 1)."""
    counted = [None if t is None else Counter(words_of(t)[:MAX_OOV_WORDS]) for t in texts]
    frequency: Counter[str] = Counter()
    for words in counted:
        if words is not None:
            frequency.update(words.keys())
    shares = []
    for words in counted:
        total = 0 if words is None else sum(words.values())
        unknown = 0 if words is None else sum(n for w, n in words.items() if frequency[w] == 1)
        shares.append(unknown / total if total else math.nan)
    return Vocabulary(frozenset(frequency), "reference"), shares


def artifact_vocabulary(folder: Path | None, name: str | None) -> Vocabulary | str:
    """The champion's vocabulary from its ``training.entrypoint`` artifacts: file ``name``, or the
    first of ``VOCABULARY_FILES`` present; or why there is none (then the reference's own is used)."""
    if folder is None:
        return "the champion has no training.entrypoint artifacts"
    names = [name] if name else list(VOCABULARY_FILES)
    found = next((folder / n for n in names if (folder / n).is_file()), None)
    if found is None:
        return f"no {' or '.join(names)} among the champion's artifacts"
    try:
        if found.stat().st_size > MAX_VOCABULARY_BYTES:
            return f"artifact {found.name} is larger than {MAX_VOCABULARY_BYTES // 2 ** 20} MiB"
        text = found.read_text(encoding="utf-8", errors="replace")
        entries = _entries(json.loads(text)) if found.suffix == ".json" else text.splitlines()
    except (OSError, ValueError) as exc:
        return f"artifact {found.name} cannot be read: {exc}"
    if entries is None:
        return (f"artifact {found.name} is not a list of words, {{\"words\": [...]}}, {{\"vocab\": ...}} "
                "or {word: id}")
    return Vocabulary(frozenset(w for e in entries for w in words_of(str(e))), f"artifact:{found.name}")


def _entries(body: Any) -> Iterable[Any] | None:
    if isinstance(body, dict):
        for key in ("words", "vocab", "vocabulary"):
            if key in body:
                return _entries(body[key])
        return body.keys() if all(isinstance(v, (int, float)) for v in body.values()) else None
    if isinstance(body, list):
        return [e[0] if isinstance(e, list) and e else e for e in body]  # [[word, score], ...] too
    return None


# ---- images ------------------------------------------------------------------------------------
def image_values(data: bytes) -> tuple[tuple[float, ...], bool] | Unread:
    """``IMAGE`` + ``CHANNELS`` values of one encoded image and whether it has colour; or why not.
    A grey image's channel means are its brightness."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DecompressionBombWarning: MAX_PIXELS decides below
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
                if width * height > MAX_PIXELS:
                    return Unread.TOO_LARGE
                colour = im.mode not in _GREY_MODES
                im.draft("RGB" if colour else "L", (MAX_SIDE, MAX_SIDE))  # JPEG: decode at a smaller scale
                small = im.convert("RGB" if colour else "L")
    except Exception:  # noqa: BLE001  any decoder's error on a broken or foreign file: a row, not the check
        return Unread.UNREADABLE
    factor = math.ceil(max(small.size) / MAX_SIDE)
    if factor > 1:
        small = small.reduce(factor)
    pixels = np.asarray(small, dtype=np.float32) / 255.0
    if colour:
        channels = pixels.reshape(-1, 3).mean(axis=0)
        luma = pixels @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    else:
        luma = pixels
        channels = np.repeat(pixels.mean(), 3)
    values = (float(luma.mean()), float(luma.std()), float(width), float(height), *map(float, channels))
    return values, colour


# ---- reading -------------------------------------------------------------------------------------
_WHY = {Skip.NO_URI: Unread.NO_INPUT, Skip.OUTSIDE_ROOTS: Unread.OUTSIDE_ROOTS, Skip.REMOTE: Unread.REMOTE}


def read_input(uri: Any, roots: InputRoots, limit: int) -> bytes | Unread:
    """The bytes of the file ``uri`` names inside the roots, or why not (module docstring)."""
    real, why = input_file(uri, roots)
    if real is None:
        return _WHY.get(why, Unread.UNREADABLE) if why is not None else Unread.UNREADABLE
    handle, info = open_regular(real)
    if handle is None or info is None:
        return Unread.UNREADABLE
    with handle:
        if info.st_size > limit:
            return Unread.TOO_LARGE
        try:
            data = handle.read(limit + 1)
        except OSError:
            return Unread.UNREADABLE
    return Unread.TOO_LARGE if len(data) > limit else data


class ValueCache:
    """A bounded least-recently-used map of descriptor values (module docstring); thread-safe."""

    def __init__(self, entries: int):
        self.entries = entries
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: Hashable) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: Hashable, value: Any) -> None:
        if self.entries <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
