import dataclasses
import json
import re

import pytest

from monitor.drift import Cited, HistoryPolicy, evaluate_window, prune_history, save_report
from monitor.drift.reports import list_reports
from tests.monitor.drift.conftest import window

T0 = 1_764_460_800.0  # 2025-11-30T00:00:00Z


@pytest.fixture(scope="module")
def result(cfg, ref_frame):
    return evaluate_window(ref_frame, window(1500, seed=21, covariate_shift=1.0, labelled=0.5), cfg.model, cfg.drift,
                           {"accuracy": 0.8, "roc_auc": 0.85}, clock=lambda: T0)


def _strict(text):
    def no_constants(c):
        raise AssertionError(f"non-JSON constant {c}")
    return json.loads(text, parse_constant=no_constants)


def test_saves_html_and_json_named_by_model_time_and_check(tmp_path, result):
    paths = save_report(result, tmp_path / "reports")
    assert paths.html.name == f"demo-20251130T000000Z-{result.check_id}.html"
    assert paths.json.with_suffix(".html") == paths.html
    html = paths.html.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") or "<html" in html[:500].lower()
    assert "x0" in html and "Accuracy" in html
    body = _strict(paths.json.read_text())
    names = [m["metric_name"] for m in body["metrics"]]
    assert any(n.startswith("DriftedColumnsCount") for n in names)
    assert any(n.startswith("ValueDrift(column=region") for n in names)
    assert any(n.startswith("Accuracy") for n in names) and any(n.startswith("RocAuc") for n in names)
    assert body["driftloop"]["check_id"] == result.check_id
    assert body["driftloop"]["accuracy"] == pytest.approx(result.accuracy)
    assert not list(paths.html.parent.glob(".*.tmp"))  # no temporary files left behind


def test_history_pruning_deletes_old_uncited_checks_of_this_model_only(tmp_path, result):
    folder = tmp_path / "reports"
    folder.mkdir()
    unrelated = [folder / "notes.txt", folder / "demo-2-20240101T000000Z-abc.html",
                 folder / "other-20200101T000000Z-abc.json"]
    for f in unrelated:
        f.write_text("keep me")
    saved = [save_report(dataclasses.replace(result, check_id=f"c{i}", checked_at=T0 + 86400 * i), folder)
             for i in range(5)]
    now = T0 + 86400 * 4
    # Two days kept: c0 and c1 are older, but c0 is an incident's evidence.
    gone = prune_history("demo", HistoryPolicy(days=2.5), now, Cited(frozenset({"c0"})), reports_dir=folder)
    assert gone == ["c1"]
    remaining = list_reports(folder, "demo")
    assert [cid for _, cid, _ in remaining] == ["c0", "c2", "c3", "c4"]
    assert all(len(files) == 3 for _, _, files in remaining)  # html, summary, json
    assert not saved[1].html.exists() and not saved[1].json.exists() and saved[0].html.exists()
    assert all(f.exists() for f in unrelated)
    assert prune_history("demo", HistoryPolicy(days=None), now, reports_dir=folder) == []  # no limit: all stay


def test_no_snapshot_writes_nothing(tmp_path, result):
    assert save_report(dataclasses.replace(result, snapshot=None), tmp_path) == (None, None)
    assert list(tmp_path.iterdir()) == []


def test_stem_format_is_sortable_and_parsable(result, tmp_path):
    paths = save_report(result, tmp_path, checked_at=T0 + 59.9)
    assert re.fullmatch(r"demo-20251130T000059Z-[0-9a-f]{12}\.json", paths.json.name)


def test_a_report_past_max_bytes_keeps_our_figures_and_records_what_was_left_out(tmp_path, result):
    full = save_report(result, tmp_path / "full")
    html_size, json_size = full.html.stat().st_size, full.json.stat().st_size
    # Under the HTML's size but above the JSON's: the page is replaced, Evidently's JSON kept.
    limit = (json_size + html_size) // 2 if json_size < html_size else None
    assert limit is not None, (html_size, json_size)
    paths = save_report(result, tmp_path / "capped", max_bytes=limit)
    assert paths.html.stat().st_size < 2000
    assert "drift.report_max_bytes" in paths.html.read_text() and paths.html.with_suffix(".summary.html").exists()
    body = _strict(paths.json.read_text())
    assert body["driftloop"]["report_omitted"] == {"limit": limit, "html_bytes": html_size}
    assert body["metrics"] and body["driftloop"]["check_id"] == result.check_id
    # Below the JSON's size too: only driftloop's figures remain, and both files fit.
    limit = json_size // 2
    tiny = save_report(result, tmp_path / "tiny", max_bytes=limit)
    body = _strict(tiny.json.read_text())
    assert set(body) == {"driftloop"} and body["driftloop"]["report_omitted"]["json_bytes"] == json_size
    assert body["driftloop"]["accuracy"] == pytest.approx(result.accuracy)
    assert tiny.json.stat().st_size <= limit and tiny.html.stat().st_size <= limit
