"""The champion review: never keep a model worse than one the loop had.

A champion is only ever compared with earlier versions when an incident retrains
(``trainer.previous.best_previous``). A model promoted during a passing episode (the positive
rate halves for a while, then comes back) stays "healthy" afterwards when it is within the alert
thresholds of the reference level, and then nothing would ever bring back the better model the
loop had before. So, on a schedule (every ``training.review_interval_checks`` successful checks)
and after every incident ends, the leader scores the champion, the last
``training.review_versions`` champions and the first champion (the never-retrained baseline) on
the same latest ``training.review_rows`` labelled rows after the change the champion stands for,
when one was located (``trainer.previous.review``: paired tests
at ``1 - training.gate.confidence``, Bonferroni over the versions). An earlier version that is
significantly better is reinstated through the normal promotion path:

- an incident (reason ``review``) and a retrain attempt are written first (the attempt's row is
  the single-flight lock: no retrain can run beside it), then the alias moves by
  ``trainer.previous.reinstate`` (compare-and-set against the champion that was scored; the run
  names the version before the alias moves), then the attempt settles as ``promoted`` with the
  reason, and the incident resolves. Being a promotion by the loop (an attempt of ours made it),
  the reference level is kept (``monitor.daemon.state.levels``).
- Restart safety: the champion is one alias, so there are never two. A daemon killed mid-way
  leaves a running attempt, which start-up recovery settles against the registry (promoted if the
  alias points at the reinstated version, else failed), and :func:`recover` resolves the review
  incident, whatever step it stopped at. Nothing is half recorded after the next start.

It also runs every ``review_interval_checks`` checks while an incident is open, unless it is
retraining or holding a challenger in shadow: an incident whose retrains keep being rejected (a
champion promoted during a passing episode, judged against the reference level once the world
returned) would otherwise keep the worse model until it resolved. A reinstatement then belongs to
that incident (its attempt, its ``promoted`` state, judged by the next checks like any promotion)
instead of opening one of its own. No retrain may be running, and it runs only on the leader
(the daemon's checks run there). Cost: one scoring
of ``review_rows`` rows per version plus, once per version, loading it from MLflow (cached);
docs/benchmarks.md gives the measured share of a check.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from monitor.daemon.decisions.kinds import Reason, State
from monitor.daemon.state.attempts import BusyError
from monitor.daemon.state.incidents import TransitionError
from monitor.daemon.retraining.launcher import ChildResult

if TYPE_CHECKING:  # the controller is handed in; the room below runtime imports it for annotations only
    from monitor.daemon.runtime.controller import CheckReport, Controller

log = logging.getLogger(__name__)

REASON = Reason.REVIEW


class ChampionReview:
    def __init__(self, ctl: Controller, clock: Callable[[], float] = time.time):
        self.ctl = ctl
        self.cfg = ctl.cfg
        self.clock = clock
        self._checks = 0
        self._incident_seen = False
        self._models: dict[str, Any] = {}  # version -> trainer Champion; versions never change
        self.last: str | None = None        # what the latest review found, one line

    def after_check(self, report: CheckReport) -> str | None:
        """Run the review when it is due: every ``review_interval_checks`` successful checks, and at
        the first check after an incident ended. Never raises: the check stands whatever happens."""
        interval = self.cfg.training.review_interval_checks
        if interval <= 0 or report.outcome.status != "ok":
            return None
        self._checks += 1
        ended = self._incident_seen and report.incident is None
        self._incident_seen = report.incident is not None
        if not (ended or self._checks >= interval):
            return None
        try:
            message = self.run("an incident ended" if ended else f"every {interval} checks")
        except Exception as exc:  # the registry is down, a model will not load: try again next time
            log.warning("champion review failed: %s", exc, exc_info=True)
            return None
        self._checks = 0
        return message

    def _busy(self) -> str | None:
        ctl = self.ctl
        current = ctl.incidents.current()
        if current is not None and current.state in (State.RETRAINING, State.SHADOW):
            return f"incident {current.id} is {current.state}"
        if ctl.supervisor.busy or ctl.attempts.running() is not None:
            return "a retrain is running"
        return None

    def run(self, why: str) -> str:
        """Score, and reinstate an earlier version that is significantly better. Returns what it did."""
        from trainer import registry as reg
        from trainer.inputs import readable_rows
        from trainer.previous import review, review_versions

        busy = self._busy()
        if busy:
            return f"champion review skipped: {busy}"
        cfg, t = self.cfg, self.cfg.training
        want = t.review_rows or cfg.drift.window_size
        # Only rows after the located change the champion stands for: during an incident, its change
        # (the evidence its retrains use); after it, the change of the incident that promoted the
        # champion. Rows from before the change would favour the pre-change model and undo a
        # promotion fitted to the new concept (observed: v1 reinstated mid-episode, then retrained
        # away again; and on a recurring concept A -> B -> A, B's model reinstated over the recalled
        # A's, and back, after each incident ended, on the last rows straddling the change).
        current = self.ctl.incidents.current()
        change_ts = current.change_ts if current is not None else self._promoted_for()
        since = None if change_ts is None else pd.Timestamp(change_ts, unit="s", tz="UTC").round("us")
        rows = self.ctl.store.window(last_n=want, since=since, labelled_only=True)
        if cfg.drift.label_maturity:  # labels that arrive by outcome: only rows whose labels have all arrived
            from monitor.drift.maturity import label_maturity, mature_rows
            recent = self.ctl.store.window(last_n=cfg.drift.window_size, labelled_only=True)
            rows = mature_rows(rows, label_maturity(recent, cfg.model))
        # training.entrypoint: inputs resolved again inside model.input_roots, unreadable ones left out
        rows = readable_rows(cfg, rows, what="champion review rows").rows.reset_index(drop=True)
        need = self.ctl.policy.min_labels  # drift.min_labels (auto: resolved for the champion at the last check)
        if len(rows) < need:
            return f"champion review skipped: {len(rows)} labelled rows < drift.min_labels {need}"
        champion = self.ctl.champion.get()
        reg.check_reachable(cfg)
        with reg.session(cfg), reg.translating(cfg, "reviewing the champion"):
            registry = reg.Registry(cfg)
            versions = review_versions(registry.history(), str(champion.version), t.review_versions)
            if not versions:
                return "champion review: no earlier version to compare"
            found = review(cfg, champion, rows, versions, lambda v: self._load(registry, v))
        self.last = f"champion review ({why}): " + found.summary() + f"; {found.seconds:.2f} s"
        if found.best is None:
            log.info("%s; champion v%s kept", self.last, champion.version)
            return self.last
        log.warning("%s", self.last)
        return self._reinstate(champion, found, rows)

    def _promoted_for(self) -> float | None:
        """The located change of the incident whose latest attempt promoted the serving champion (a
        retrain, a recall or a reinstatement into it), or None: a first champion never promoted by the
        loop, an incident with no located change, a pruned incident. A version rolled back to keeps its
        earlier promotion's change, older than the review's rows, so it limits nothing. The review then
        judges on the rows of that concept only."""
        ctl = self.ctl
        champion = str(ctl.champion.get().version)
        for attempt in ctl.attempts.recent(50):  # newest first
            if str(attempt.challenger_version) == champion and attempt.status == "promoted":
                try:
                    return ctl.incidents.get(attempt.incident_id).change_ts
                except TransitionError:  # a pruned incident: no change to hold to
                    return None
        return None

    def _load(self, registry: Any, version: str) -> Any:
        from trainer import registry as reg
        if version not in self._models:
            if len(self._models) > 2 * self.cfg.training.review_versions + 2:
                self._models.pop(next(iter(self._models)))
            self._models[version] = reg.load_version(self.cfg, registry, version)
        return self._models[version]

    def _reinstate(self, champion: Any, found: Any, rows: Any) -> str:
        """The records first, then the alias, then the outcome (module doc: restart safety)."""
        from trainer import registry as reg
        from trainer.gate import Decision
        from trainer.previous import Recalled, reinstate

        ctl, best, reason = self.ctl, found.best, found.reason
        assert best is not None and reason is not None
        window = {"rows": len(rows), "start": rows["ts"].iloc[0].isoformat(), "end": rows["ts"].iloc[-1].isoformat(),
                  "reason": REASON, "review": {"champion": str(champion.version), "version": best.version}}
        with ctl.lock:
            busy = self._busy()
            if busy or str(ctl.champion.get().version) != str(champion.version):
                return f"champion review: not reinstating v{best.version}: {busy or 'the champion changed'}"
            # An open incident owns the reinstatement (it is judged by the next checks); else one of its own.
            incident = ctl.incidents.current() or ctl.incidents.open(REASON, "schedule", reason, retrain=False,
                                                                      data={"review": found.summary()})
            try:  # the attempt before the incident's "retraining": recovery settles an attempt, never guesses
                attempt = ctl.attempts.begin(incident.id, "schedule", rows=len(rows), data_window=window)
            except BusyError as exc:
                if incident.reason == REASON:
                    ctl.resolve(incident, f"champion review not applied: {exc}")
                return f"champion review: {exc}"
            ctl.incidents.transition(incident.id, State.RETRAINING, f"reinstating earlier version {best.version}",
                                     data=window)
            recalled = Recalled(best.version, best.metrics, found.champion_metrics, Decision(True, [reason]),
                                [line for line in found.summary().split("; ") if line])
            try:
                reg.check_reachable(self.cfg)
                with reg.session(self.cfg), reg.translating(self.cfg, f"reinstating v{best.version}"):
                    outcome = reinstate(self.cfg, reg.Registry(self.cfg), recalled, champion, "schedule", incident.id,
                                        window, len(rows), time.perf_counter(), reason=reason)
                result = ChildResult(0, outcome.to_dict())
            except Exception as exc:  # settled against the registry: the alias may have moved
                log.warning("champion review: reinstating v%s failed: %s", best.version, exc)
                result = ChildResult(None, error=f"reinstating v{best.version} failed: {exc}")
            ctl.settle(attempt, result)  # promoted -> the cache drops the champion, the incident resolves
            settled = ctl.attempts.get(attempt.id)
        return f"champion review: {settled.status} v{best.version} ({'; '.join(settled.reasons)})"


def recover(ctl: Controller) -> list[str]:
    """Resolve the review incidents a killed daemon left open, once start-up recovery has settled
    their attempt against the registry (promoted when the alias points at the reinstated version):
    nothing stays half recorded, and an interrupted review is not retried as a retrain (the next
    review scores afresh)."""
    done: list[str] = []
    if ctl.attempts.running() is not None:
        return done
    for incident in ctl.incidents.open_incidents():
        if incident.reason != REASON:
            continue
        tries = ctl.attempts.for_incident(incident.id)
        what = (f"champion review {tries[-1].status}: {'; '.join(tries[-1].reasons)[:300]}" if tries
                else "champion review interrupted before it reinstated anything")
        try:
            ctl.incidents.transition(incident.id, State.RESOLVED, f"{what} (settled at start-up)")
            done.append(f"review incident {incident.id}: {what}; resolved")
        except TransitionError as exc:
            log.warning("%s", exc)
    return done
