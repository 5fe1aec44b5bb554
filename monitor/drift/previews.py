"""What a drifted row's input looks like, for the check's summary page (monitor/drift/summary.py):
a small thumbnail of an image, or the start of a text, so a person sees the rows behind an
embedding drift without opening files one by one.

An input is read only where :func:`monitor.drift.sample_export.input_file` allows it, the resolver
``driftloop export-samples`` copies by (:class:`monitor.records.inputs.InputRoots`: inside
``model.input_roots``, links resolved, a ``..`` or a link out of a root refused; a URI of a listed
scheme such as ``s3://`` is never fetched), opened without following a final link, and only a
regular file of at most :data:`MAX_SOURCE_BYTES`. Everything is bounded per page: at most
:data:`MAX_PREVIEWS` previews and :data:`BUDGET` characters of them together, a thumbnail of at most
:data:`THUMBNAIL_PX` pixels a side and :data:`MAX_THUMBNAIL_BYTES` bytes, a snippet of
:data:`SNIPPET_CHARS` characters. A row without a preview shows its ``input_uri`` alone.

Images are decoded and scaled down with Pillow when it is importable (it comes with MLflow's
dependencies; PNG, JPEG, GIF, BMP, WebP, PGM ...) and re-encoded as PNG; without Pillow a PNG, GIF
or JPEG small enough is shown as it is. Anything else that decodes as UTF-8 text is a snippet,
which the page escapes (an SVG or HTML input is shown as its text, never rendered).
"""
from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Literal

from monitor.drift.sample_export import input_file, open_regular
from monitor.records.inputs import InputRoots

MAX_PREVIEWS = 12                 # rows with a preview on one page; the others show their input_uri
MAX_SOURCE_BYTES = 8 * 1024 ** 2  # an input larger than this is not opened for a preview
MAX_PIXELS = 40_000_000           # an image declaring more pixels is not decoded (a decompression bomb)
THUMBNAIL_PX = 64                 # a thumbnail's longer side, at most
MAX_THUMBNAIL_BYTES = 6 * 1024    # encoded; a larger thumbnail is tried smaller, then left out
SNIPPET_CHARS = 200
BUDGET = 40 * 1024                # characters of all previews on one page together

# Magic numbers of the formats a browser shows as they are (without Pillow: shown only when small).
_SHOWN_AS_IS = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"),
                (b"\xff\xd8\xff", "image/jpeg"))
# ... and of other images (Pillow decodes them; without it they are no text either).
_OTHER_IMAGES = (b"BM", b"P5", b"P6", b"P4", b"II*\x00", b"MM\x00*", b"\x00\x00\x01\x00")


@dataclass(frozen=True)
class Preview:
    """One input's preview: an image as a ``data:`` URI of base64 (``src``), or a text's start."""

    kind: Literal["image", "text"]
    content: str

    @property
    def size(self) -> int:
        return len(self.content)


class InputPreviews:
    """The previews of one page, asked for row by row (``previews(uri)``) in the order the page
    shows them, until :data:`MAX_PREVIEWS` or :data:`BUDGET` is spent. ``roots``: the model's
    :class:`~monitor.records.inputs.InputRoots`; with none configured nothing is read."""

    def __init__(self, roots: InputRoots, *, max_previews: int = MAX_PREVIEWS, budget: int = BUDGET):
        self._roots = roots
        self._left = max_previews
        self._budget = budget
        self._seen: dict[str, Preview | None] = {}

    def __call__(self, uri: str | None) -> Preview | None:
        if not uri:
            return None
        if uri in self._seen:
            return self._seen[uri]
        if self._left <= 0 or self._budget <= 0:
            return None
        found = preview(uri, self._roots)
        if found is not None and found.size > self._budget:
            found = None
        self._seen[uri] = found
        if found is not None:
            self._left -= 1
            self._budget -= found.size
        return found


def preview(uri: str, roots: InputRoots) -> Preview | None:
    """``uri``'s preview, or None: refused by the roots, not a regular file, too large, neither an
    image that can be shown nor text."""
    real, _ = input_file(uri, roots)
    if real is None:
        return None
    source, info = open_regular(real)
    if source is None or info is None:
        return None
    with source:
        if info.st_size > MAX_SOURCE_BYTES:
            return None
        data = source.read(MAX_SOURCE_BYTES + 1)
    if any(data.startswith(magic) for magic, _ in _SHOWN_AS_IS) or data.startswith(_OTHER_IMAGES) or \
            (data[:4] == b"RIFF" and data[8:12] == b"WEBP"):
        return _image(data)
    return _text(data)


def _image(data: bytes) -> Preview | None:
    try:
        from PIL import Image
    except ImportError:
        mime = next((m for magic, m in _SHOWN_AS_IS if data.startswith(magic)), None)
        return _data_uri(mime, data) if mime is not None else None
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
            if width * height > MAX_PIXELS:
                return None
            img.draft("RGB", (THUMBNAIL_PX, THUMBNAIL_PX))  # JPEG: decode at a reduced scale
            picture = img.convert("RGBA" if "A" in img.getbands() or "transparency" in img.info
                                  else "L" if img.mode in ("1", "L", "I", "I;16", "F") else "RGB")
    except Exception:  # Pillow raises many kinds on a corrupt or unsupported file: no preview, the uri stays
        return None
    for side in (THUMBNAIL_PX, THUMBNAIL_PX // 2):
        small = picture.copy()
        small.thumbnail((side, side))
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
        found = _data_uri("image/png", out.getvalue())
        if found is not None:
            return found
    return None


def _data_uri(mime: str, data: bytes) -> Preview | None:
    if len(data) > MAX_THUMBNAIL_BYTES:
        return None
    return Preview("image", f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}")


def _text(data: bytes) -> Preview | None:
    """The first :data:`SNIPPET_CHARS` characters of UTF-8 text; None for binary data (a NUL byte,
    or more than a few undecodable bytes, at its start)."""
    head = data[:4 * SNIPPET_CHARS + 4]
    if b"\x00" in head:
        return None
    text = head.decode("utf-8", errors="replace")
    if text.count("\ufffd") > 4:
        return None
    text = " ".join(text.split())  # one line: newlines and runs of spaces as one space
    if not text:
        return None
    cut = len(text) > SNIPPET_CHARS or len(data) > len(head)
    return Preview("text", text[:SNIPPET_CHARS] + ("…" if cut else ""))
