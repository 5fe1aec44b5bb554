"""One atomic-write helper: explicit mode, all or nothing, no temporary file left behind."""
from __future__ import annotations

import json
import os
import stat

import pytest

from monitor.files import PRIVATE, READABLE, atomic_write_json, atomic_write_text, atomic_writer


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_with_the_mode_asked_for_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        atomic_write_text(tmp_path / "report.html", "<p>hi</p>", mode=READABLE)
    finally:
        os.umask(old)
    atomic_write_json(tmp_path / "sub" / "request.json", {"url": "postgresql://u:secret@h/db"}, mode=PRIVATE)
    assert _mode(tmp_path / "report.html") == 0o644
    assert _mode(tmp_path / "sub" / "request.json") == 0o600
    assert json.loads((tmp_path / "sub" / "request.json").read_text())["url"].endswith("/db")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "result.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_writer(target, mode=PRIVATE) as f:
            f.write("half of the new")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]


def test_binary_writes_replace_the_file(tmp_path):
    target = tmp_path / "ckpt.pt"
    with atomic_writer(target, mode=PRIVATE, binary=True) as f:
        f.write(b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01" and _mode(target) == 0o600
