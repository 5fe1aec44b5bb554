"""The summary page shows what a drifted row's input looks like (monitor/drift/previews.py): a
thumbnail of an image or the start of a text inside ``model.input_roots``, never a file outside
them (a path elsewhere, a ``..``, a link out of a root), bounded in count and bytes."""
from __future__ import annotations

import base64
import dataclasses
import io
import re

import numpy as np
import pytest

from monitor.drift import evaluate_window, save_report
from monitor.drift.drifted_rows import AtypicalRow, DriftedRows, RowCluster
from monitor.drift.previews import (MAX_PREVIEWS, MAX_THUMBNAIL_BYTES, SNIPPET_CHARS, THUMBNAIL_PX, InputPreviews,
                                    preview)
from monitor.drift.reports import summary_path
from monitor.drift.summary import summary_html
from monitor.records.inputs import InputRoots
from tests.monitor.drift.conftest import window

Image = pytest.importorskip("PIL.Image")
SECRET = "top secret, outside the roots"


def png(path, size: int, seed: int = 0) -> None:
    pixels = np.random.default_rng(seed).integers(0, 255, size=(size, size, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


@pytest.fixture
def files(tmp_path):
    """A root with a small image, a large image, a text and a binary file; a folder outside it with
    an image and a text; a link inside the root to the outside text."""
    root, outside = tmp_path / "inputs", tmp_path / "elsewhere"
    root.mkdir(), outside.mkdir()
    png(root / "digit.png", 8)
    png(root / "photo.png", 600, seed=1)
    (root / "note.txt").write_text("<b>Parcel</b> & late again\n" + "word " * 200)
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4)
    png(outside / "private.png", 8, seed=2)
    (outside / "secret.txt").write_text(SECRET)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    return root, outside


def _image_of(found) -> Image.Image:
    assert found is not None and found.kind == "image" and found.content.startswith("data:image/png;base64,")
    data = base64.b64decode(found.content.split(",", 1)[1])
    assert len(data) <= MAX_THUMBNAIL_BYTES
    return Image.open(io.BytesIO(data))


def test_images_are_thumbnails_and_texts_snippets_inside_the_roots(files):
    root, outside = files
    roots = InputRoots([str(root)])
    small = _image_of(preview(f"file://{root}/digit.png", roots))
    assert small.size == (8, 8)  # never enlarged: the page scales it
    large = _image_of(preview(str(root / "photo.png"), roots))
    assert max(large.size) <= THUMBNAIL_PX
    text = preview("note.txt", roots)  # relative to the first root, as ingestion takes it
    assert text is not None and text.kind == "text"
    assert text.content.startswith("<b>Parcel</b> & late again word") and len(text.content) == SNIPPET_CHARS + 1
    assert text.content.endswith("…")
    assert preview(str(root / "blob.bin"), roots) is None  # binary, not text
    assert preview(str(root / "missing.png"), roots) is None


def test_nothing_outside_the_roots_is_read(files):
    root, outside = files
    roots = InputRoots([str(root)])
    for uri in (str(outside / "private.png"), f"file://{outside}/secret.txt", str(root / "../elsewhere/secret.txt"),
                str(root / "link.txt"), "s3://bucket/key.png"):
        assert preview(uri, roots) is None, uri
    assert preview(str(root / "digit.png"), InputRoots([])) is None  # no roots configured: nothing is read


def test_previews_on_a_page_are_bounded(files):
    root, _ = files
    previews = InputPreviews(InputRoots([str(root)]))
    for i in range(MAX_PREVIEWS + 5):
        png(root / f"img{i}.png", 8, seed=10 + i)
    found = [previews(str(root / f"img{i}.png")) for i in range(MAX_PREVIEWS + 5)]
    assert sum(f is not None for f in found) == MAX_PREVIEWS
    assert previews(str(root / "img0.png")) is found[0]  # the same input again costs nothing
    tight = InputPreviews(InputRoots([str(root)]), budget=300)
    assert tight(str(root / "note.txt")) is not None and tight(str(root / "photo.png")) is None


def _row(i: int, uri: str) -> AtypicalRow:
    return AtypicalRow(id=f"r-{i}", ts=1_764_460_800.0 + i, distance=9.0 - i, cluster=0, score=0.5, prediction=1,
                       input_uri=uri)


@pytest.fixture(scope="module")
def checked(cfg, ref_frame):
    return evaluate_window(ref_frame, window(600, seed=3), cfg.model, cfg.drift, {"accuracy": 0.8, "roc_auc": 0.85})


def test_the_summary_page_shows_thumbnails_and_snippets_escaped_and_no_outside_file(files, checked, tmp_path):
    root, outside = files
    uris = [f"file://{root}/digit.png", str(root / "note.txt"), str(outside / "private.png"),
            str(outside / "secret.txt"), str(root / "link.txt"), "s3://bucket/x.png"]
    rows = tuple(_row(i, u) for i, u in enumerate(uris))
    block = DriftedRows(feature="emb", scored_rows=600, reference_rows=1000, neighbours=5, threshold=1.0,
                        atypical_rows=len(rows), rows=rows,
                        clusters=(RowCluster(0, len(rows), 3.0, 3.0, ("r-0", "r-1")),))
    result = dataclasses.replace(checked, drifted_rows=[block])
    paths = save_report(result, tmp_path / "reports", roots=InputRoots([str(root)]))
    page = summary_path(paths.html).read_text()
    assert len(re.findall(r'<img class="thumb" alt="" src="data:image/png;base64,', page)) == 1
    assert "&lt;b&gt;Parcel&lt;/b&gt; &amp; late again" in page and "<b>Parcel" not in page
    assert SECRET not in page and page.count('class="snippet"') == 1
    for uri in uris:  # every row still names its input
        assert uri in page
    assert "<script" not in page
    # Without roots (or through summary_html alone) the rows show their uris only.
    assert "<img" not in summary_html(result) and "snippet\"" not in summary_html(result)
