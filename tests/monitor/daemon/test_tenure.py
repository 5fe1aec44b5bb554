"""A champion back on the throne (recalled by a retrain or reinstated by the champion review) is
judged on the rows it served since it came back, not on its earlier tenure: after an episode, v1's
rows from before its replacement are mostly episode rows, and judging it on them read a breach it
did not have and cost a retrain (bench_loop ``episode``)."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from monitor.daemon.runtime.checks import CheckJob, champion_rows
from monitor.daemon.state.attempts import returned_at
from monitor.daemon.state.attempts import AttemptStore


class _Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        self.t += 10.0
        return self.t


def _settle(attempts: AttemptStore, version: str) -> float:
    a = attempts.begin("inc-1", "alert")
    return attempts.finish(a.id, "promoted", challenger_version=version, champion_version=version).finished_at


def test_returned_at_tells_a_return_from_a_first_tenure(make_config):
    import monitor.daemon.state.tables  # noqa: F401  (registers the daemon's tables with the store)
    from monitor.store import PredictionStore
    cfg = make_config(with_champion=False)
    with PredictionStore.from_config(cfg) as store:
        attempts = AttemptStore(store.engine, cfg.model.name, _Clock(1_700_000_000.0))
        assert returned_at(attempts.recent(), "1") is None          # the first champion, never replaced
        _settle(attempts, "2")
        assert returned_at(attempts.recent(), "2") is None          # v2's first tenure: all its rows are its own
        assert returned_at(attempts.recent(), "1") is not None      # the alias back on v1 before its attempt settled
        assert returned_at(attempts.recent(), "7") is None          # a newer version aliased by hand: first tenure
        back = _settle(attempts, "1")                               # v1 recalled after the episode
        assert returned_at(attempts.recent(), "1") == back
        rejected = attempts.begin("inc-1", "alert")
        attempts.finish(rejected.id, "rejected", challenger_version="3", champion_version="1")
        assert returned_at(attempts.recent(), "1") == back          # a rejected challenger changes nothing
        _settle(attempts, "4")
        assert returned_at(attempts.recent(), "4") is None          # a new version: first tenure
        again = _settle(attempts, "2")                              # v2 promoted a second time
        assert returned_at(attempts.recent(), "2") == again


def _frame(start: float, n: int, version: str, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": [f"{version}-{seed}-{i}" for i in range(n)],
                         "ts": pd.to_datetime(start + np.arange(n), unit="s", utc=True),
                         "x0": rng.normal(size=n), "model_version": version})


def test_champion_rows_keeps_only_the_rows_served_since_the_return():
    t0 = 1_700_000_000.0
    window = pd.concat([_frame(t0, 50, "1", 1), _frame(t0 + 100, 30, "2", 2), _frame(t0 + 200, 20, "1", 3)],
                       ignore_index=True)
    assert len(champion_rows(window, "1")) == 70                    # both tenures in a first tenure's reading
    recent = champion_rows(window, "1", returned=True)              # after v2's last row, in the rows' own time
    assert len(recent) == 20 and recent["id"].str.startswith("1-3-").all()
    unknown = pd.concat([window, _frame(t0 + 300, 5, "unknown", 4)], ignore_index=True)
    assert len(champion_rows(unknown.drop(index=range(50, 80)), "1", returned=True)) == 70  # no other version seen
    assert len(champion_rows(window.drop(index=range(50, 80)), "1", returned=True)) == 70


def test_a_returned_champion_is_judged_on_its_new_rows_only(make_config):
    """A real check (real champion v1, real Evidently): v1's earlier tenure served rows whose labels
    it got wrong; after its return it serves rows it gets right. With the return time the check
    counts only the new rows, and says so when there are none yet."""
    from monitor.daemon.runtime.wiring import default_champion
    from monitor.drift import evaluate_window
    from monitor.store import PredictionStore
    from trainer.synthetic import make_dataset
    cfg = make_config({"drift": {"window_size": 3000, "min_labels": 200}})
    champion = default_champion(cfg)
    model = champion.get().model
    now = time.time()

    def served(n: int, start: float, seed: int, flip: bool) -> pd.DataFrame:
        df = make_dataset(n, seed=seed)
        df["score"] = model.predict_proba(df)
        df["id"] = [f"s{seed}-{i}" for i in range(n)]
        df["ts"] = start + np.arange(n) * 0.01
        df["model_version"] = "1"
        if flip:   # the episode: the world's labels moved away from what v1 learnt
            df["label"] = 1 - (df["score"] > cfg.model.threshold).astype(int)
        return df

    # v1's earlier tenure (rows it got wrong), v2's tenure, then v1 again (rows it gets right). The
    # rows carry the service's own times, an hour in the past: the tenure is read in them.
    old, middle, new = (served(600, now - 3600, 11, flip=True), served(300, now - 3000, 13, flip=False),
                        served(400, now - 2400, 12, flip=False))
    middle["model_version"] = "2"
    with PredictionStore.from_config(cfg) as store:
        for df in (old, middle, new):
            store.add_predictions(df.drop(columns=["label"]))
            store.add_labels(df[["id", "label", "ts"]])

        def check(tenure):
            return CheckJob(cfg, store, champion, evaluate_window, lambda r, t: (None, None), time.time,
                            tenure=tenure).run()

        both = check(None)
        assert both.labelled_rows == 1000 and both.result.accuracy < 0.5
        mine = check(lambda v: now if v == "1" else None)
        assert mine.labelled_rows == 400 and mine.result.accuracy > 0.7 and mine.other_version_rows == 900
        store.add_predictions(served(10, now - 60, 14, flip=False).assign(model_version="2").drop(columns=["label"]))
        waiting = check(lambda v: now)   # v2 scored rows after v1's: none of v1's rows are of its present
        assert waiting.status == "empty" and "since it is champion again (rows after" in waiting.message
