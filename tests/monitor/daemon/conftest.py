"""Fixtures of the daemon tests. The clock is injected wherever a test needs to move time.

A baseline model is trained once per session (real PyTorch, real MLflow on SQLite) into a
template home; each test gets its own home with a copy of that registry, so tests never see
each other's retrains.
"""
from __future__ import annotations

import itertools
import shutil
import time

import numpy as np
import pandas as pd
import pytest

import monitor.daemon.state.tables  # noqa: F401  (registers the daemon's migrations with the store)
from monitor.config import DriftloopConfig, load_config
from monitor.store.engine import make_engine
from monitor.store.migrations import migrate

STUB_WORKER = "tests.monitor.daemon.stub_worker"

# Small and fast: a few thousand rows, a handful of epochs. Cooldown 0 unless a test sets it.
SMALL = {
    "training": {"epochs": 6, "retrain_epochs": 5, "min_rows": 100, "reference_sample": 1000, "patience": 3},
    "drift": {"window_size": 1500, "min_labels": 300, "interval_seconds": 3600},
    "alerts": {"cooldown_seconds": 0},
    "server": {"gpu_metrics": False},
    "logging": {"level": "INFO"},
}


def merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


class Clock:
    def __init__(self, t: float | None = None):
        self.t = time.time() if t is None else t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(tmp_path):
    """A store's engine with every migration applied (the daemon's tables included)."""
    eng = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    migrate(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def baseline_home(tmp_path_factory):
    """A home whose MLflow registry holds champion v1, trained on stationary synthetic data."""
    import trainer
    from trainer.synthetic import make_dataset

    home = tmp_path_factory.mktemp("baseline-home")
    cfg = load_config(path=None, environ={}, overrides=merge(SMALL, {"home": str(home)}))
    trainer.train_baseline(cfg, make_dataset(3000, seed=1))
    return home


@pytest.fixture
def make_config(tmp_path, request):
    """``make_config(overrides)``: a config whose home holds a copy of the baseline registry
    (trained on first use), or no registry at all with ``with_champion=False``."""
    def make(overrides: dict | None = None, *, with_champion: bool = True, name: str = "home") -> DriftloopConfig:
        home = tmp_path / name
        if with_champion and not (home / "mlflow.db").exists():
            home.mkdir(parents=True, exist_ok=True)
            shutil.copy(request.getfixturevalue("baseline_home") / "mlflow.db", home / "mlflow.db")
        return load_config(path=None, environ={}, overrides=merge(SMALL, {"home": str(home), **(overrides or {})}))
    return make


class Traffic:
    """Synthetic predictions scored by the current champion, written to the store with labels."""

    def __init__(self, cfg: DriftloopConfig, store, start: float | None = None, spacing: float = 0.5):
        self.cfg = cfg
        self.store = store
        self.t = (time.time() - 20_000) if start is None else start
        self.spacing = spacing
        self._ids = itertools.count()
        self._late: list[pd.DataFrame] = []   # labels stamped after the last row sent (outcome_delay)

    def send(self, n: int, seed: int, *, concept: float = 0.0, covariate: float = 0.0,
             labelled: float = 1.0, tag_version: bool = False, near_boundary: float | None = None,
             missing: tuple[str, ...] = (), reviewed: bool = False,
             outcome_delay: tuple[float, float] | None = None) -> pd.DataFrame:
        """``n`` rows scored by the champion; ``tag_version``: say which version scored them;
        ``near_boundary``: only rows whose score is within that of 0.5 (chosen by their features, so
        a covariate shift that hurts: ``P(label | features)`` is unchanged); ``missing``: features
        the upstream sends as null (scored and stored without them); ``reviewed``: only the rows a
        person reviews get a label, every row the champion scored 0.5 or more and every 10th other
        row (labels chosen by the score); ``outcome_delay``: seconds after its prediction a label of
        class 0, and of class 1, is stamped (labels that arrive by outcome), each stored once the
        traffic's clock has passed it."""
        import trainer
        from trainer.synthetic import make_dataset

        pool = n if near_boundary is None else 20 * n
        df = make_dataset(pool, seed=seed, concept_shift=concept, covariate_shift=covariate)
        for name in missing:
            df[name] = np.nan
        champion = trainer.load_champion(self.cfg)
        df["score"] = champion.predict_proba(df)
        if near_boundary is not None:
            df = df[(df["score"] - 0.5).abs() < near_boundary].head(n).reset_index(drop=True)
            assert len(df) == n, "too few rows near the boundary"
        df["id"] = [f"req-{seed}-{next(self._ids)}" for _ in range(n)]
        df["ts"] = self.t + np.arange(n) * self.spacing
        self.t += n * self.spacing
        self.store.add_predictions(df.drop(columns=["label"]), model_version=champion.version if tag_version else None)
        k = int(round(n * labelled))
        rows = df[["id", "label", "ts"]].tail(k)
        if reviewed:
            rows = rows[(df["score"].tail(k) >= 0.5) | (np.arange(len(rows)) % 10 == 0)]
        if outcome_delay is not None:
            rows = rows.assign(ts=rows["ts"] + np.where(rows["label"] == 1, outcome_delay[1], outcome_delay[0]))
            waiting = pd.concat([*self._late, rows], ignore_index=True)
            due = waiting["ts"] <= self.t
            rows, self._late = waiting[due], [waiting[~due]]
        if len(rows):
            self.store.add_labels(rows)
        return df


@pytest.fixture
def live_daemon(make_config):
    """``live_daemon(token=None, overrides=None, behaviour="promote", with_champion=True)`` -> (Daemon,
    base URL): the daemon served over real HTTP (uvicorn on 127.0.0.1) in this process, with 300
    labelled rows in its store (none, and no registry, without a champion), no scheduled checks,
    and the stand-in retrain child told to ``behaviour``."""
    import threading

    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher
    from monitor.daemon.runtime.serve import serve
    from monitor.store import PredictionStore
    from tests.conftest import free_port

    running = []

    def start(token: str | None = None, overrides: dict | None = None, behaviour: str = "promote",
              with_champion: bool = True):
        cfg = make_config(merge(overrides or {}, {"server": {"token": token, "port": free_port()}}),
                          with_champion=with_champion)
        root = cfg.home / "retrains"
        root.mkdir(parents=True, exist_ok=True)
        (root / "behaviour").write_text(behaviour)
        if with_champion:  # the rows are the champion's scores
            with PredictionStore.from_config(cfg) as store:
                Traffic(cfg, store).send(300, 5)
        daemon = Daemon(cfg, launcher=ProcessLauncher(root, module=STUB_WORKER))
        stop, ready = threading.Event(), threading.Event()
        thread = threading.Thread(target=serve, args=(cfg, stop), kwargs={"daemon": daemon, "ready": ready,
                                                                           "scheduler": False}, daemon=True)
        thread.start()
        assert ready.wait(60), "the daemon did not start"
        running.append((stop, thread))
        return daemon, f"http://127.0.0.1:{cfg.server.port}"
    yield start
    for stop, thread in running:
        stop.set()
        thread.join(60)


@pytest.fixture
def make_daemon(make_config, clock):
    """``make_daemon(overrides=None, behaviour="promote")`` -> (Daemon, Traffic): in process, the
    injected clock, the scripted stand-in retrain child (tests/monitor/daemon/stub_worker.py)."""
    from monitor.daemon.runtime.daemon import Daemon
    from monitor.daemon.retraining.launcher import ProcessLauncher
    made = []

    def make(overrides=None, *, with_champion=True, behaviour="promote", name="home"):
        cfg = make_config(overrides, with_champion=with_champion, name=name)
        root = cfg.home / "retrains"
        root.mkdir(parents=True, exist_ok=True)
        (root / "behaviour").write_text(behaviour)
        daemon = Daemon(cfg, clock=clock, launcher=ProcessLauncher(root, module=STUB_WORKER))
        made.append(daemon)
        return daemon, Traffic(cfg, daemon.store) if with_champion else None
    yield make
    for d in made:
        d.stop(grace=2)
