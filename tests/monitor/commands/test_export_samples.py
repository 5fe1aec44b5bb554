"""``driftloop export-samples``: a recorded check's rows behind an embedding drift written out for
labelling, with copies of their inputs made only inside ``model.input_roots``."""
from __future__ import annotations

import os

import pandas as pd
import pytest
import yaml

import monitor.daemon.state.tables  # noqa: F401  (registers the daemon's tables with the store)
from monitor.cli import main
from monitor.config import load_config
from monitor.daemon.runtime.checks import CheckOutcome
from monitor.daemon.state.checklog import CheckLog
from monitor.drift.drifted_rows import AtypicalRow, DriftedRows, RowCluster
from monitor.drift.result import CheckResult, FeatureDrift
from monitor.store import PredictionStore


def drifted_result(uris: list[str | None], check_id: str = "0123456789ab") -> CheckResult:
    rows = tuple(AtypicalRow(f"r{i}", 1_700_000_000.0 + i, 9.0 - i * 0.1, i % 2, 0.7, 1, uri)
                 for i, uri in enumerate(uris))
    block = DriftedRows("emb", scored_rows=1000, reference_rows=500, neighbours=10, threshold=4.0,
                        atypical_rows=120, rows=rows,
                        clusters=(RowCluster(0, (len(rows) + 1) // 2, 7.5, 8.0, ("r0", "r2")),
                                  RowCluster(1, len(rows) // 2, 6.0, 7.9, ("r1",))))
    score = FeatureDrift("score", "ks", 0.5, 0.05, False)
    return CheckResult(check_id=check_id, model="demo", checked_at=1_700_000_100.0, window_rows=1000,
                       labelled_rows=0, features=[FeatureDrift("emb", "mmd", 0.001, 0.05, True)], drift_share=1.0,
                       drift_share_threshold=0.5, dataset_drift=True, prediction_drift=score, drifted_rows=[block])


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A home with a store, an input root holding two files, a secret outside it and a link to it."""
    for name in [k for k in os.environ if k.startswith("DRIFTLOOP_")]:
        monkeypatch.delenv(name)
    root, home = tmp_path / "inputs", tmp_path / "home"
    (root / "sub").mkdir(parents=True)
    (root / "a.png").write_bytes(b"\x89PNG a")
    (root / "sub" / "b.txt").write_text("a message")
    (tmp_path / "secret.txt").write_text("not yours")
    (root / "link.png").symlink_to(tmp_path / "secret.txt")
    cfg = load_config(path=None, environ={}, overrides={
        "home": str(home), "model": {"features": [{"name": "emb", "type": "embedding", "dim": 4}],
                                     "input_roots": [str(root)]}})
    path = tmp_path / "driftloop.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    return cfg, str(path), tmp_path


def record(cfg, result: CheckResult | None, ts: float = 1_700_000_100.0) -> int:
    with PredictionStore.from_config(cfg) as store:
        return CheckLog(store.engine, cfg.model.name, lambda: ts).record(
            CheckOutcome(ts, "ok", "checked", champion_version="1", result=result, window_rows=1000))


URIS = ["a.png", None, "file://{root}/sub/b.txt", "link.png", "../secret.txt", "s3://bucket/key.png",
        "missing.png"]


def test_writes_the_table_and_copies_only_files_inside_the_root(setup, capsys):
    cfg, path, tmp = setup
    uris = [u.format(root=tmp / "inputs") if u else u for u in URIS]
    check = record(cfg, drifted_result(uris))
    out = tmp / "labelling"
    assert main(["--config", path, "export-samples", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"7 rows of check {check}" in said and "copied 2 input file(s)" in said
    table = pd.read_csv(out / "samples.csv", keep_default_na=False)
    assert list(table.columns) == ["feature", "id", "ts", "cluster", "distance", "score", "prediction", "input_uri",
                                   "file", "skipped"]
    assert table["id"].tolist() == [f"r{i}" for i in range(7)] and table["ts"][0] == "2023-11-14T22:13:20Z"
    assert table["skipped"].tolist() == ["", "no_uri", "", "outside_roots", "outside_roots", "outside_roots",
                                         "unreadable"]
    copied = [out / f for f in table["file"] if f]
    assert [p.relative_to(out).as_posix() for p in copied] == ["files/emb/cluster-0/000-a.png",
                                                                "files/emb/cluster-0/002-b.txt"]
    assert copied[0].read_bytes() == b"\x89PNG a" and copied[1].read_text() == "a message"
    # Nothing outside the root was read: the link's target is nowhere in the export.
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) == 3 and all(b"not yours" not in p.read_bytes() for p in written)
    assert not any(p.is_symlink() for p in out.rglob("*"))
    # An export is never overwritten.
    assert main(["--config", path, "export-samples", "--out", str(out)]) == 2
    assert "already holds an export" in capsys.readouterr().err


def test_a_listed_scheme_is_listed_not_fetched_and_parquet_works(setup, capsys):
    cfg, path, tmp = setup
    cfg_s3 = yaml.safe_load(open(path))
    cfg_s3["model"]["input_schemes"] = ["s3"]
    with open(path, "w") as f:
        yaml.safe_dump(cfg_s3, f)
    record(cfg, drifted_result(["s3://bucket/key.png", "a.png"]))
    assert main(["--config", path, "export-samples", "--last", "--format", "parquet", "--out", str(tmp / "o")]) == 0
    table = pd.read_parquet(tmp / "o" / "samples.parquet")
    assert table["skipped"].tolist() == ["remote", None] and table["input_uri"][0] == "s3://bucket/key.png"


def test_a_check_is_found_by_its_row_id_or_its_report_id(setup, capsys):
    cfg, path, tmp = setup
    first = record(cfg, drifted_result(["a.png"], check_id="aaaaaaaaaaaa"), ts=1_700_000_000.0)
    record(cfg, None, ts=1_700_000_200.0)  # a later check that listed nothing
    record(cfg, drifted_result([], check_id="bbbbbbbbbbbb"), ts=1_700_000_300.0)
    assert main(["--config", path, "export-samples", "--out", str(tmp / "o1")]) == 2
    assert "lists no rows behind a drift" in capsys.readouterr().err
    for n, ref in enumerate((str(first), "aaaaaaaaaaaa")):
        assert main(["--config", path, "export-samples", "--check", ref, "--out", str(tmp / f"o{n + 2}")]) == 0
        assert f"1 rows of check {first}" in capsys.readouterr().out
    assert main(["--config", path, "export-samples", "--check", "999", "--out", str(tmp / "o9")]) == 2
    assert "no check 999" in capsys.readouterr().err
    assert main(["--config", path, "export-samples", "--check", "1", "--last", "--out", str(tmp / "o9")]) == 2
