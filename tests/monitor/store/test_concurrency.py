"""Several writers at once, as threads of one process and as separate processes (replicas), on
overlapping ids: every id stored exactly once, nothing lost, no writer fails."""
from __future__ import annotations

import multiprocessing
import threading

from monitor.store import PredictionStore
from tests.monitor.store.factories import labels, predictions, small_model

WRITERS = 4
BATCHES = 6
BATCH = 50


def _batches(writer: int) -> list[list[dict]]:
    # Writer w sends ids [w*100, w*100 + 300): each id range overlaps the next writer's.
    out = []
    for b in range(BATCHES):
        start = writer * 100 + b * BATCH
        out.append(predictions(BATCH, prefix="c", start=start))
    return out


def _expected_ids() -> set[str]:
    return {r["id"] for w in range(WRITERS) for batch in _batches(w) for r in batch}


def _write(store: PredictionStore, writer: int) -> tuple[int, int]:
    stored = duplicates = 0
    for batch in _batches(writer):
        result = store.add_predictions(batch)
        stored, duplicates = stored + result.stored, duplicates + result.duplicates
        store.add_labels(labels([r["id"] for r in batch[::5]]))
    return stored, duplicates


def test_threads_lose_nothing(open_store):
    store = open_store()
    results, errors = [], []
    barrier = threading.Barrier(WRITERS)

    def run(w: int) -> None:
        barrier.wait()
        try:
            results.append(_write(store, w))
        except Exception as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    expected = _expected_ids()
    assert sum(s for s, _ in results) == len(expected)
    assert sum(s + d for s, d in results) == WRITERS * BATCHES * BATCH
    frame = store.window()
    assert set(frame["id"]) == expected and len(frame) == len(expected)
    assert frame["label"].notna().sum() == store.row_counts()["labels"]


def _process_writer(url: str, writer: int, start: multiprocessing.Event, out: multiprocessing.Queue) -> None:
    store = PredictionStore(url, small_model())
    try:
        start.wait(30)
        out.put(("ok", _write(store, writer)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out.put(("error", repr(exc)))
    finally:
        store.close()


def test_processes_lose_nothing(open_store, store_url):
    store = open_store()  # creates the schema before the replicas start
    ctx = multiprocessing.get_context("fork")  # no re-import in the children: fast
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process_writer, args=(store_url, w, start, out)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    reports = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert [kind for kind, _ in reports] == ["ok"] * WRITERS, reports
    expected = _expected_ids()
    assert sum(r[0] for _, r in reports) == len(expected)
    frame = store.window()
    assert set(frame["id"]) == expected and len(frame) == len(expected)


def test_racing_writers_with_different_content_one_wins(open_store):
    from monitor.errors import ConflictError
    from tests.monitor.store.factories import prediction

    store = open_store()
    outcomes: list[str] = []
    barrier = threading.Barrier(WRITERS)

    def run(w: int) -> None:
        barrier.wait()
        try:
            store.add_predictions([prediction(0, prefix="race", score=w / 10)])
            outcomes.append("stored")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes) == ["conflict"] * (WRITERS - 1) + ["stored"]
    assert store.row_counts()["predictions"] == 1
