"""Starting a retrain, or saying why not: single-flight, new evidence since the last try (more after
each unsuccessful one), the cooldown after a failure, enough labelled rows after the change point.
A wait moves the incident to ``waiting`` (the lifecycle's ``wait`` event) with its reason as detail.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from monitor.daemon.runtime import rescan
from monitor.daemon.state.attempts import Attempt, BusyError, unsuccessful_in_a_row
from monitor.daemon.state.incidents import Incident, TransitionError
from monitor.daemon.retraining.launcher import RetrainJob
from monitor.daemon.retraining.slots import slot_severity
from monitor.daemon.decisions.actions import Action, ActionKind, StartKind, Wait, WaitKind
from monitor.daemon.decisions.kinds import Outcome, Reason, State
from monitor.daemon.decisions.lifecycle import Event
from monitor.daemon.decisions.policy import cooldown_remaining
from monitor.daemon.decisions.post_change import post_change_need
from monitor.daemon.runtime.views import iso
from monitor.daemon.runtime.moves import IncidentMoves

if TYPE_CHECKING:
    from monitor.drift.maturity import LabelMaturity

log = logging.getLogger(__name__)

QUEUED = "waiting: queued for a retrain slot"  # how a queued incident's detail begins (for people)


def _kind(wait: Wait | None) -> str | None:
    """What a waiting incident records it waits for (``Incident.waits_for``)."""
    return None if wait is None else str(wait.kind.value)


@dataclass
class Started:
    attempt: Attempt | None     # None: the retrain did not start, ``message`` says why
    message: str                # for people: the incident's detail, logs, the API
    kind: StartKind
    wait: Wait | None = None    # WAITING or DEFERRED: what for (the data of ``message``)

    def __str__(self) -> str:
        return self.message

    def action(self, kind: ActionKind, incident: Incident) -> Action:
        return Action(kind, incident.id, incident.state, retrain=self.kind,
                      attempt_id=self.attempt.id if self.attempt else None, detail=self.message,
                      wait=self.wait)


def _same_change(attempt: Attempt, change_ts: float | None) -> bool:
    """Did ``attempt`` learn from rows since a located change that the incident's change point
    ``change_ts`` still stands for? Not when a later change was located after the rows it learnt from
    (the concept moved again, or came back: those rows were another concept's); a change point
    refined within them (a batch boundary, a few seconds) is the same change."""
    window = attempt.data_window or {}
    since, end = window.get("since_change"), window.get("end")
    if not since or change_ts is None:
        return False
    return end is None or change_ts <= pd.Timestamp(end).timestamp()


class Retrains(IncidentMoves):
    # -- retrains -------------------------------------------------------------------------
    def maybe_retrain(self, incident: Incident, trigger: str, respect_cooldown: bool = True,
                      ignore_attempt_limit: bool = False) -> Started:
        """Start a retrain for ``incident`` when it may (single-flight; new evidence since the last
        try; enough labelled rows after the change point), or say in one line why not (also recorded
        on the incident). ``respect_cooldown=False`` (a person, the schedule) skips the evidence
        rules but not single-flight. ``ignore_attempt_limit`` is kept for callers; escalation
        never stops retraining."""
        with self.lock:
            self._claimed_slot = False
            started = self._maybe_retrain(incident, trigger, respect_cooldown)
            if self._claimed_slot and self.slots is not None and started.kind != StartKind.STARTED:
                self.slots.release(self.cfg.model.name)  # a slot claimed for a retrain that did not start
            return started

    def _slot_wait(self, incident: Incident, trigger: str) -> tuple[str, Wait] | None:
        """Why this model waits for one of the deployment's retrain slots (fleet.max_concurrent_retrains),
        or None once it holds one."""
        if self.slots is None:
            return None
        place = self.slots.claim(self.cfg.model.name, slot_severity(str(incident.reason), trigger))
        if place is None:
            self._claimed_slot = True
            return None
        return (f"{QUEUED}, position {place} ({self.slots.limit} retrain(s) at once across "
                "the deployment's models; fleet.max_concurrent_retrains)"), Wait(WaitKind.QUEUED)

    def _maybe_retrain(self, incident: Incident, trigger: str, respect_cooldown: bool) -> Started:
        forced = not respect_cooldown
        followed = not forced and self._after_promotion(incident)
        if followed:  # before the evidence rule: a concept that moved on since the promotion starts afresh
            incident = self._follow_after_promotion(incident)
        blocked = self._blocked(incident, forced) or self._slot_wait(incident, trigger)
        why_not, why = blocked if blocked else (None, None)
        if why_not and forced and why is not None and why.kind == WaitKind.QUEUED \
                and (incident.state in (State.FIRING, State.WAITING) or incident.state.is_outcome):
            # A person or the schedule asked while the deployment's retrain slots are taken: the
            # request keeps its place and its incident waits (checks claim again; it runs when its turn
            # comes), instead of being declined and resolved.
            return self._wait_for_slot(incident, why_not, why)
        if why_not and not forced and incident.state.is_outcome and not self._retrain_running(incident):
            # A breach after a promotion, rejection or failure that must wait for new evidence
            # (alerts.retry_rows, with labels arriving late that can take many checks) or the
            # cooldown: the incident says it waits, and for what, instead of sitting in its outcome.
            try:
                self.move(incident.id, Event.WAIT, why_not, detail=why_not, waits_for=_kind(why))
            except TransitionError as exc:
                log.info("%s", exc)
            return Started(None, why_not, StartKind.WAITING, why)
        if why_not and not forced and incident.state == State.WAITING:
            self.incidents.note(incident.id, "waiting_progress", why_not, coalesce=True)
            self.incidents.set_fields(incident.id, detail=why_not, waits_for=_kind(why))
            return Started(None, why_not, StartKind.WAITING, why)
        if why_not:
            # One row per wait since the last state change, updated with the newest count.
            self.incidents.note(incident.id, "retrain_deferred", why_not, coalesce=True)
            return Started(None, why_not, StartKind.DEFERRED, why)
        if not forced and not followed:  # the concept may have changed again since the incident's change point
            incident = rescan.follow(self.cfg, self.store, self.champion, self.incidents, self.attempts, incident)
        window, data_window, short = self.training_window(incident, forced=forced)
        wait, why = short if short else (None, None)
        if wait and forced:  # a person or the schedule asked: say why not, do not park the incident
            self.incidents.note(incident.id, "retrain_deferred", wait, coalesce=True)
            return Started(None, wait, StartKind.DEFERRED, why)
        if wait:
            if incident.state != State.WAITING:
                try:
                    incident = self.move(incident.id, Event.WAIT, wait, data=data_window, detail=wait,
                                         waits_for=_kind(why))
                except TransitionError as exc:
                    log.info("%s", exc)
            else:
                self.incidents.note(incident.id, "waiting_progress", wait, data_window, coalesce=True)
                self.incidents.set_fields(incident.id, detail=wait, waits_for=_kind(why))
            return Started(None, wait, StartKind.WAITING, why)
        self.move(incident.id, Event.START_RETRAIN, f"retrain ({trigger}) on {len(window)} rows", data=data_window)
        # The child needs no server token; keep it out of the files on disk.
        config = self.cfg.model_dump(mode="json", exclude={"server": {"token"}})
        # Reports are kept in the incident's folder while it is open; skip any removed by hand.
        reports = [p for p in incident.report_paths if Path(p).is_file()]
        job = RetrainJob("", incident.id, trigger, window, config, report_paths=reports,
                         data_window={**data_window, "reason": incident.reason,
                                      "reference_level": self.reference_figures()})
        try:
            attempt = self.supervisor.launch(job, rows=len(window), data_window=data_window)
        except BusyError as exc:  # another daemon on the same store got there first
            self.move(incident.id, Event.FAIL, f"not started: {exc}")
            return Started(None, f"not retraining: {exc}", StartKind.NOT_STARTED)
        if attempt.status != Outcome.RUNNING:  # the child could not even start; already settled as failed
            return Started(None, f"retrain {attempt.id} failed to start: {attempt.error}",
                           StartKind.FAILED_TO_START)
        return Started(attempt, f"retrain {attempt.id} started", StartKind.STARTED)

    def _wait_for_slot(self, incident: Incident, why_not: str, why: Wait) -> Started:
        if incident.state != State.WAITING:
            try:
                self.move(incident.id, Event.WAIT, why_not, detail=why_not, waits_for=_kind(why))
            except TransitionError as exc:
                log.info("%s", exc)
        else:
            self.incidents.note(incident.id, "waiting_progress", why_not, coalesce=True)
            self.incidents.set_fields(incident.id, detail=why_not, waits_for=_kind(why))
        return Started(None, why_not, StartKind.WAITING, why)

    def queued_request(self, incident: Incident) -> bool:
        """Is ``incident`` a person's or the schedule's retrain waiting for a retrain slot
        (:meth:`_wait_for_slot`)? Its checks retry it as asked, not resolve it when healthy."""
        return (incident.state == State.WAITING and incident.reason in (Reason.MANUAL, Reason.SCHEDULE)
                and incident.waits_for == WaitKind.QUEUED)

    def _after_promotion(self, incident: Incident) -> bool:
        """Does ``incident`` wait after a promotion (no retrain running)? Then the controller looks
        for a later change on the new champion's re-scored rows *before* the evidence rule: a
        promotion for a located change makes the next try wait until the rows since that change grow
        ``training.evidence_growth`` times (more of a concept that holds), but a concept that keeps
        moving (a gradual drift) leaves the new champion behind within a few hundred rows. Found
        first, the later change starts afresh (``retry_rows_needed``: the base count), and the
        retrain learns from the rows after it; found only after the wait, each step trailed the
        concept by 3 x the rows the last try learnt from (``bench_tasks.py mc_gradual``)."""
        if incident.change_ts is None or incident.state == State.RETRAINING or self._retrain_running(incident):
            return False
        tries = self.attempts.for_incident(incident.id)
        return bool(tries) and tries[-1].status == Outcome.PROMOTED

    def _follow_after_promotion(self, incident: Incident) -> Incident:
        """``rescan.follow`` for an incident waiting after a promotion; never raises: a wait (or the
        wait for the champion's own labels) is decided on the change point the incident has."""
        try:
            return rescan.follow(self.cfg, self.store, self.champion, self.incidents, self.attempts, incident)
        except Exception as exc:
            log.warning("incident %s: no re-scored change point after the promotion: %s", incident.id, exc)
            return incident

    def _retrain_running(self, incident: Incident) -> bool:
        return self.supervisor.busy or self.attempts.running() is not None or incident.state == State.RETRAINING

    def _blocked(self, incident: Incident, forced: bool = False) -> tuple[str, Wait] | None:
        """Why a retrain may not start now (what a person reads, and its data), or None."""
        if self.supervisor.busy or self.attempts.running() is not None:
            return "waiting: a retrain is already running", Wait(WaitKind.RETRAIN_RUNNING)
        if incident.state == State.RETRAINING:
            return "waiting: this incident is retraining", Wait(WaitKind.RETRAINING)
        if forced:
            return None
        tries = self.attempts.for_incident(incident.id)
        if not tries:
            return None
        last = tries[-1]
        if last.status == Outcome.INTERRUPTED:  # its leader died under it: retried at once (retraining.failover)
            return None
        if last.status == Outcome.SHADOW:
            return (f"waiting: challenger v{last.challenger_version} passed the gate and is scoring live windows "
                    "in shadow (training.shadow.windows)"), Wait(WaitKind.SHADOW)
        if last.status == Outcome.FAILED:
            left = cooldown_remaining(self.clock(), last.finished_at, self.cfg.alerts.cooldown_seconds)
            if left > 0:
                return (f"waiting: retry after the failed retrain at {iso(self.clock() + left)} "
                        "(alerts.cooldown_seconds)"), Wait(WaitKind.COOLDOWN)
            return None
        # Promoted or rejected: the next try needs new labelled rows, more after each rejection in a row.
        need = self.retry_rows_needed(tries, incident.change_ts)
        have, since = self._evidence_since(last)
        if have < need:
            promoted = last.status == Outcome.PROMOTED
            wait = Wait(WaitKind.NEW_CHAMPION if promoted else WaitKind.AFTER_REJECTION, have, need)
            what = "for the new champion to be judged" if promoted else "after a rejected retrain"
            return (f"waiting for {wait.more} more labelled rows {what} ({have}/{need} labelled rows newer than "
                    f"the last try's data, {since})"), wait
        return None

    def _evidence_since(self, attempt: Attempt) -> tuple[int, str]:
        """Labelled rows that the last try did not see: predictions newer than its data's end (or,
        without a recorded end, labels received since it started)."""
        end = (attempt.data_window or {}).get("end")
        if end:
            ts = pd.Timestamp(end) + pd.Timedelta(microseconds=1)
            return self.store.labelled_count(since=ts), f"after {end}"
        return self.store.labelled_count(received_after=attempt.started_at), f"since {iso(attempt.started_at)}"

    def reference_figures(self) -> dict[str, float]:
        """The reference level's figures (``{"accuracy": .., "roc_auc": ..}`` or ``{"mae": ..}``): what
        the retrain's gate measures the champion's shortfall against (trainer/gate.py
        ``significant_gain``); empty when no level is stored."""
        stored = self.levels.read() or {}
        return {k.removeprefix("reference_"): v for k, v in stored.items()
                if k in ("reference_accuracy", "reference_roc_auc", "reference_mae")}

    def retry_rows_needed(self, tries: list[Attempt], change_ts: float | None = None) -> int:
        """New labelled rows before the next try: ``alerts.retry_rows`` (default ``drift.min_labels``),
        doubled for each rejected or failed try in a row (at most 8x); after a promotion, enough that
        the rows since the change reach ``training.evidence_growth`` (4) times what the promoted try
        learnt from (when it learnt from the rows since a located change; a change located after those
        rows, such as a concept that came back, starts afresh). A retrain right after a
        promotion on barely more rows was one promotion or rejection more, not a better model: few,
        large steps (500 -> 2,000 -> 8,000 rows) keep promotions per change few."""
        base = self.cfg.alerts.retry_rows or self.policy.min_labels  # drift.min_labels, auto resolved
        need = base * min(8, 2 ** max(0, unsuccessful_in_a_row(tries) - 1))
        last = tries[-1] if tries else None
        learnt = int((last.data_window or {}).get("rows") or 0) if last is not None else 0
        if last is None or last.status != Outcome.PROMOTED or not _same_change(last, change_ts):
            return need  # growth counts rows since the same located change, not a window of recent rows
        return max(need, min(int((self.cfg.training.evidence_growth - 1) * learnt), self.cfg.training.max_rows))

    def training_window(self, incident: Incident,
                        forced: bool = False) -> tuple[pd.DataFrame, dict[str, Any], tuple[str, Wait] | None]:
        """The labelled rows to retrain on, and why to wait instead (what a person reads and its
        data; or None).

        With a change point on the incident: every labelled row from after it (the newest
        ``training.max_rows``), so a retry sees strictly more of the new concept than the try before,
        and a wait while fewer than ``training.post_change_rows`` exist (enough for the gate's
        held-out rows to decide). Without one (gradual drift, data drift): the rows after the last
        healthy window when there are that many, else the most recent ``alerts.retrain_rows``
        (default ``drift.window_size``) labelled rows."""
        recent = self.cfg.alerts.retrain_rows or self.cfg.drift.window_size
        n = self.cfg.training.max_rows
        need = self.cfg.training.post_change_rows
        maturity = self._label_maturity(recent)
        from monitor.drift.maturity import mature_rows

        def labelled(**kw: Any) -> pd.DataFrame:  # labels that arrive by outcome: only matured rows
            return mature_rows(self.store.window(labelled_only=True, **kw), maturity)

        since = None
        if incident.change_ts is not None:
            # A located step: rows before it are the old concept. Wait for enough rows after it.
            # Stored times are whole microseconds; float seconds can miss one by a fraction of a microsecond.
            since = pd.Timestamp(incident.change_ts, unit="s", tz="UTC").round("us")
            window = labelled(last_n=n, since=since)
            if len(window) < need and not forced:
                need = post_change_need(self.cfg, window, self.levels.read())
            if len(window) < need and not forced:
                wait = Wait(WaitKind.POST_CHANGE, len(window), need)
                msg = (f"waiting for {wait.more} more labelled rows after the change at "
                       f"{iso(incident.change_ts)} ({len(window)}/{need}; training.min_post_change_rows)")
                if maturity is not None:
                    msg += f"; {maturity.describe()}"
                return window, {"rows": int(len(window)), "since": since.isoformat()}, (msg, wait)
            if len(window) < self.cfg.training.min_rows:  # forced, and too few after the change: take recent rows
                since = None
        elif incident.window_start is not None:
            # No step located (a gradual decline): rows after the last healthy window when there are
            # enough of them, else the most recent rows. Waiting would only let the decline go on.
            since = pd.Timestamp(incident.window_start, unit="s", tz="UTC").round("us")
            window = labelled(last_n=n, since=since)
            window = window[window["ts"] > since]
            if len(window) < need:
                since = None
        if since is None:
            window = labelled(last_n=recent)
        span = {"rows": int(len(window)),
                "start": window["ts"].iloc[0].isoformat() if len(window) else None,
                "end": window["ts"].iloc[-1].isoformat() if len(window) else None,
                "since_change": since.isoformat() if since is not None else None}
        if maturity is not None:
            span["label_maturity"] = maturity.to_dict()
        if len(window) < self.cfg.training.min_rows:
            return window, span, (f"not retraining: {len(window)} labelled rows < training.min_rows="
                                  f"{self.cfg.training.min_rows}; waiting for more",
                                  Wait(WaitKind.MIN_ROWS, len(window), self.cfg.training.min_rows))
        broken = self._pipeline_wait(window) or self._class_wait(window, maturity)
        return window.reset_index(drop=True), span, broken

    def _label_maturity(self, recent: int) -> LabelMaturity | None:
        """Do labels arrive by outcome (monitor.drift.maturity)? Read on the most recent labelled
        rows, which hold every class even when the rows since a change do not yet."""
        if not self.cfg.drift.label_maturity:
            return None
        from monitor.drift.maturity import label_maturity  # scipy: loaded when a retrain is considered
        return label_maturity(self.store.window(last_n=recent, labelled_only=True), self.cfg.model)

    def _class_wait(self, window: pd.DataFrame, maturity: LabelMaturity | None) -> tuple[str, Wait] | None:
        """Why to wait when the rows to retrain on hold labels of one class only: a classifier cannot
        learn from them (the trainer refuses them), and the other classes' labels are usually late,
        not absent. Retraining resumes once they arrive, without a failed try and its cooldown."""
        target = self.cfg.model.target
        if not self.cfg.model.kind.classifier or target not in window.columns:
            return None
        classes = window[target].dropna().unique()
        if len(classes) != 1:
            return None
        msg = (f"waiting: the {len(window)} labelled rows to retrain on are all of class {classes[0]}; a classifier "
               "learns nothing from one class, so retraining resumes once labels of another class arrive")
        if maturity is not None:
            msg += f" ({maturity.describe()})"
        return msg, Wait(WaitKind.CLASSES, len(window))

    def _pipeline_wait(self, window: pd.DataFrame) -> tuple[str, Wait] | None:
        """Why to wait when a feature has no value in any row to retrain on: the upstream sends it
        missing (``DriftloopFeatureMissing``). The trainer refuses such rows (nothing to learn from
        the feature), so a retrain would only fail, once per ``alerts.cooldown_seconds``; the incident
        waits instead, saying which feature, until rows with its values arrive."""
        from trainer.data import empty_features  # the trainer's own rule: it refuses exactly these
        empty = empty_features(window, self.cfg.model.feature_names)
        if not empty:
            return None
        shown = ", ".join(empty[:5]) + (f" and {len(empty) - 5} more" if len(empty) > 5 else "")
        return (f"waiting: feature(s) {shown} have no value in any of the {len(window)} labelled rows to retrain "
                "on; the upstream sends them missing (DriftloopFeatureMissing), and no model learns from a "
                "feature that is not there. Retraining resumes once rows with their values arrive",
                Wait(WaitKind.PIPELINE, len(window)))
