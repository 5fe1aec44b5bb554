"""The reference level: what good performance looked like, remembered across promotions.

Each champion brings its own baseline (its metrics on its held-out rows). After a concept change
a challenger can be promoted with a *lower* baseline than its predecessor (it was the best the
gate saw on few rows), and judging later windows against that lowered baseline would call a poor
model healthy. So the daemon keeps one level per model, persisted in ``daemon_counters``:

- it starts as the first champion's baseline;
- a champion promoted by the loop (a retrain attempt of ours made it) keeps the level: it has to
  earn "recovered" against the level its predecessor had before the drift;
- a champion set from outside the loop (``driftloop train``, a rollback to a version the loop did
  not promote, a manual alias move) resets the level to that champion's baseline: a person chose it;
- ``POST /v1/reference/reset`` (or ``driftloop status --reset-level``) accepts the current
  champion's baseline as the new level, for a concept that really became harder.

The alert policy judges every window against ``max(champion baseline, level)``; for a regression
model the level is an MAE and lower is better: ``min(champion baseline MAE, level)``, the lowest
MAE the loop has reached.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from monitor.daemon.state.tables import daemon_counters, retrain_attempts
from monitor.finite import finite
from monitor.store.engine import write_transaction

_KEYS = ("reference_accuracy", "reference_roc_auc", "reference_mae", "reference_version",
         "reference_attainable_version")


class Level(NamedTuple):
    """The reference level of one check's champion (None where the task has no such figure).
    ``attainable``: the level is the attainable one the loop decided for this champion after a
    change of concept (:mod:`monitor.daemon.decisions.attainable`); it replaces the champion's own
    baseline, which was measured on the old concept."""

    accuracy: float | None = None
    roc_auc: float | None = None
    mae: float | None = None
    attainable: bool = False


class ReferenceLevels:
    def __init__(self, engine: Engine, model: str):
        self._engine = engine
        self._model = model

    def read(self) -> dict[str, float] | None:
        q = select(daemon_counters.c.name, daemon_counters.c.value).where(
            daemon_counters.c.model == self._model, daemon_counters.c.name.in_(_KEYS))
        with self._engine.connect() as conn:
            found = {name: float(value) for name, value in conn.execute(q)}
        return found if "reference_version" in found else None

    def write(self, version: str, accuracy: float | None, roc_auc: float | None, mae: float | None = None, *,
              attainable: bool = False) -> None:
        values = {"reference_version": finite(version), "reference_accuracy": finite(accuracy),
                  "reference_roc_auc": finite(roc_auc), "reference_mae": finite(mae),
                  "reference_attainable_version": finite(version) if attainable else None}
        with write_transaction(self._engine) as conn:
            conn.execute(delete(daemon_counters).where(daemon_counters.c.model == self._model,
                                                       daemon_counters.c.name.in_(_KEYS)))
            for name, value in values.items():
                if value is not None:
                    conn.execute(insert(daemon_counters).values(model=self._model, name=name, value=value))

    def _retrain_running(self) -> bool:
        q = select(retrain_attempts.c.id).where(retrain_attempts.c.model == self._model,
                                                retrain_attempts.c.status == "running").limit(1)
        with self._engine.connect() as conn:
            return conn.execute(q).first() is not None

    def promoted_by_loop(self, version: str) -> bool:
        q = select(retrain_attempts.c.id).where(retrain_attempts.c.model == self._model,
                                                retrain_attempts.c.status == "promoted",
                                                retrain_attempts.c.challenger_version == str(version)).limit(1)
        with self._engine.connect() as conn:
            return conn.execute(q).first() is not None

    def current(self, outcome: Any) -> Level:
        """The level for a check's champion, set or reset by the rules in the module docstring."""
        level, reset = self._decide(outcome)
        if reset:
            self.write(outcome.champion_version, level.accuracy, level.roc_auc, level.mae)
        return level

    def peek(self, outcome: Any) -> Level:
        """The level :meth:`current` would judge ``outcome`` against, without writing it: for
        ``driftloop check``, which only reads, so it holds a window to the daemon's bar."""
        return self._decide(outcome)[0]

    def _decide(self, outcome: Any) -> tuple[Level, bool]:
        """The level for the check's champion, and whether it (re)sets the stored one."""
        version = outcome.champion_version
        result = outcome.result
        if version is None or result is None:
            return Level(), False
        stored = self.read()
        stored_version = None if stored is None else stored.get("reference_version")
        same = stored_version is not None and finite(version) == stored_version
        mae = getattr(result, "baseline_mae", None)
        if stored is not None and not same and not self.promoted_by_loop(version) and self._retrain_running():
            # The retrain child moves the alias before the daemon settles its attempt: a check in between
            # sees a new champion that no promoted attempt names yet. Keep the level, unwritten, until the
            # attempt is settled; a reset here lowered the bar to a challenger's baseline on 108 rows.
            return Level(stored.get("reference_accuracy"), stored.get("reference_roc_auc"),
                         stored.get("reference_mae")), False
        if stored is None or (not same and not self.promoted_by_loop(version)):
            return Level(finite(result.baseline_accuracy), finite(result.baseline_roc_auc), finite(mae)), True
        attainable = stored.get("reference_attainable_version") == finite(version)
        return Level(stored.get("reference_accuracy"), stored.get("reference_roc_auc"),
                     stored.get("reference_mae"), attainable), False

    def reset(self, version: str, accuracy: float | None, roc_auc: float | None, mae: float | None = None) -> None:
        """Accept ``version``'s baseline as the level (a person decided the old level is gone)."""
        self.write(version, accuracy, roc_auc, mae)
