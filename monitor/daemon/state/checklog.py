"""The check log: one row per drift/performance check in the store's ``check_results`` table.

It is the daemon's memory across restarts: the last window's metrics for ``status``, the
policy's streaks (replayed from the latest rows on start-up), and the check-error counter.
"""
from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Callable

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Engine

from monitor.daemon.decisions.breach import Observation, selection_shift
from monitor.daemon.decisions.rules import rule_inputs_from
from monitor.daemon.state.tables import check_results, daemon_counters
from monitor.finite import finite
from monitor.store.engine import write_transaction

if TYPE_CHECKING:  # the check's outcome is handed in; state sits below runtime
    from monitor.daemon.runtime.checks import CheckOutcome

_ERRORS_PRUNED = "check_errors_pruned"


def _row(row) -> dict[str, Any]:
    m = dict(row._mapping)
    m["result"] = json.loads(m["result"]) if m["result"] else None
    if m["dataset_drift"] is not None:
        m["dataset_drift"] = bool(m["dataset_drift"])
    return m


class CheckLog:
    def __init__(self, engine: Engine, model: str, clock: Callable[[], float]):
        self._engine = engine
        self._model = model
        self._clock = clock

    def record(self, outcome: CheckOutcome, verdict: str | None = None) -> int:
        r = outcome.result
        values: dict[str, Any] = dict(
            model=self._model, ts=outcome.ts, status=outcome.status, message=outcome.message,
            champion_version=outcome.champion_version, window_rows=outcome.window_rows,
            labelled_rows=outcome.labelled_rows, window_start=outcome.window_start,
            window_end=outcome.window_end, duration_seconds=outcome.duration_seconds,
            report_html=str(outcome.report_html) if outcome.report_html else None,
            report_json=str(outcome.report_json) if outcome.report_json else None, verdict=verdict)
        if r is not None:
            values.update(accuracy=finite(r.accuracy), roc_auc=finite(r.roc_auc),
                          baseline_accuracy=finite(r.baseline_accuracy), baseline_roc_auc=finite(r.baseline_roc_auc),
                          drift_share=finite(r.drift_share), dataset_drift=bool(r.dataset_drift),
                          result=json.dumps({**r.to_dict(), "versions": outcome.versions,
                                             "other_version_rows": outcome.other_version_rows,
                                             "change": outcome.change.to_dict() if outcome.change else None,
                                             "change_ts": outcome.change_ts}, default=str))
        with write_transaction(self._engine) as conn:
            key = conn.execute(insert(check_results).values(**values)).inserted_primary_key
            assert key is not None  # a single-row insert
            return int(key[0])

    def set_verdict(self, check_id: int, verdict: str) -> None:
        with write_transaction(self._engine) as conn:
            conn.execute(update(check_results).where(check_results.c.id == check_id).values(verdict=verdict))

    def last(self, status: str | None = None) -> dict[str, Any] | None:
        q = select(check_results).where(check_results.c.model == self._model)
        if status is not None:
            q = q.where(check_results.c.status == status)
        with self._engine.connect() as conn:
            row = conn.execute(q.order_by(check_results.c.id.desc()).limit(1)).first()
        return _row(row) if row else None

    def get(self, check_id: int | str) -> dict[str, Any] | None:
        """One check of this model: by its row id (an int, as status and incidents name it) or by
        the check id of its result and report files (12 hex digits); None when there is none."""
        q = select(check_results).where(check_results.c.model == self._model)
        if isinstance(check_id, int) or str(check_id).isdigit():
            q = q.where(check_results.c.id == int(check_id))
        elif re.fullmatch(r"[0-9a-f]{12}", str(check_id)):
            q = q.where(check_results.c.result.like(f'%"check_id": "{check_id}"%'))  # as record() writes it
        else:
            return None
        with self._engine.connect() as conn:
            row = conn.execute(q.order_by(check_results.c.id.desc()).limit(1)).first()
        return _row(row) if row else None

    def last_champion(self) -> str | None:
        """The champion version the last successful check judged, if any; None when the store
        cannot answer (the store's own health check says so)."""
        try:
            last = self.last("ok")
        except Exception:
            return None
        return last.get("champion_version") if last else None

    def recent(self, limit: int = 10) -> list[dict[str, Any]]:
        q = (select(check_results).where(check_results.c.model == self._model)
             .order_by(check_results.c.id.desc()).limit(limit))
        with self._engine.connect() as conn:
            return [_row(r) for r in conn.execute(q)]

    def recent_observations(self, limit: int) -> list[Observation]:
        """The policy's view of the latest ``limit`` successful checks, oldest first."""
        q = (select(check_results).where(check_results.c.model == self._model, check_results.c.status == "ok")
             .order_by(check_results.c.id.desc()).limit(limit))
        with self._engine.connect() as conn:
            rows = list(conn.execute(q))
        out = []
        for r in reversed(rows):
            result = json.loads(r.result) if r.result else {}
            out.append(Observation(labelled_rows=r.labelled_rows, task=result.get("task") or "binary",
                                   accuracy=r.accuracy, roc_auc=r.roc_auc,
                                   baseline_accuracy=r.baseline_accuracy, baseline_roc_auc=r.baseline_roc_auc,
                                   dataset_drift=bool(r.dataset_drift), champion_version=r.champion_version,
                                   mae=finite(result.get("mae")), baseline_mae=finite(result.get("baseline_mae")),
                                   min_labels=(result.get("min_labels") if result.get("min_labels_auto") is not None
                                               else None),
                                   selection=selection_shift(result),
                                   **rule_inputs_from(result)))
        return out

    def error_total(self) -> int:
        with self._engine.connect() as conn:
            n = conn.execute(select(func.count()).select_from(check_results).where(
                check_results.c.model == self._model, check_results.c.status == "error")).scalar_one()
            pruned = conn.execute(select(daemon_counters.c.value).where(
                daemon_counters.c.model == self._model, daemon_counters.c.name == _ERRORS_PRUNED)).scalar()
        return int(n) + int(pruned or 0)

    def prune(self, older_than: float) -> int:
        """Delete check rows older than ``older_than`` (epoch seconds), keeping the error tally."""
        old = (check_results.c.model == self._model) & (check_results.c.ts < older_than)
        with write_transaction(self._engine) as conn:
            errors = conn.execute(select(func.count()).select_from(check_results)
                                  .where(old, check_results.c.status == "error")).scalar_one()
            if errors:
                current = conn.execute(select(daemon_counters.c.value).where(
                    daemon_counters.c.model == self._model, daemon_counters.c.name == _ERRORS_PRUNED)).scalar()
                if current is None:
                    conn.execute(insert(daemon_counters).values(model=self._model, name=_ERRORS_PRUNED, value=errors))
                else:
                    conn.execute(update(daemon_counters).where(
                        daemon_counters.c.model == self._model, daemon_counters.c.name == _ERRORS_PRUNED)
                        .values(value=current + errors))
            return int(conn.execute(delete(check_results).where(old)).rowcount)
