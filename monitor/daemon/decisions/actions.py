"""What the controller did about one check or request: a kind and its data (:class:`Action` for a
check, :class:`TriggerAction` for ``POST /v1/alerts``, ``POST /v1/retrain`` and the schedule), and
whether a retrain started (:class:`StartKind`). Code dispatches and tests assert on these; the
sentence a person reads (logs, the API's ``action``, ``driftloop check``) is their ``describe()``.
Pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from monitor.daemon.decisions.kinds import State


class StartKind(StrEnum):
    """How an attempt to start a retrain ended."""

    STARTED = "started"                  # a child runs (attempt_id)
    WAITING = "waiting"                  # the incident waits for rows, the cooldown or a running retrain
    DEFERRED = "deferred"                # not now, noted on the incident (it keeps its state)
    NOT_STARTED = "not_started"          # another daemon's retrain got there first
    FAILED_TO_START = "failed_to_start"  # the child could not start; settled as failed


class WaitKind(StrEnum):
    """What a retrain that did not start waits for (:class:`Wait`)."""

    RETRAIN_RUNNING = "retrain_running"      # another retrain runs (single-flight)
    RETRAINING = "retraining"                # this incident is retraining
    SHADOW = "shadow"                        # its challenger scores live windows in shadow
    COOLDOWN = "cooldown"                    # alerts.cooldown_seconds after a failed retrain
    NEW_CHAMPION = "new_champion"            # new labelled rows for the promoted champion to be judged
    AFTER_REJECTION = "after_rejection"      # new labelled rows after a rejected retrain (alerts.retry_rows)
    POST_CHANGE = "post_change"              # labelled rows after the change point (training.min_post_change_rows)
    MIN_ROWS = "min_rows"                    # labelled rows for training.min_rows
    QUEUED = "queued"                        # a retrain slot of the deployment (need: its place in the queue)
    PIPELINE = "pipeline"                    # a feature has no value in any row to retrain on (a broken upstream)
    CLASSES = "classes"                      # the rows to retrain on hold labels of one class only


@dataclass(frozen=True)
class Wait:
    """Why a retrain did not start: a kind and, for a wait on rows, the rows there are and the rows
    needed. The sentence a person reads (the incident's detail, the action's) is made from these."""

    kind: WaitKind
    have: int | None = None
    need: int | None = None

    @property
    def more(self) -> int | None:
        """Rows still needed (None: not a wait on rows)."""
        return None if self.need is None else max(0, self.need - (self.have or 0))


class ActionKind(StrEnum):
    CHECK_NOT_OK = "check_not_ok"                      # the check was skipped or failed (detail says why)
    NONE = "none"                                      # healthy, no incident
    OPENED = "opened"                                  # a firing incident opened
    OPENED_SUSPECTED = "opened_suspected"              # an estimated drop, before labels
    CONFIRMED = "confirmed"                            # labels confirmed a suspected incident
    CLEARED = "cleared"                                # a suspected incident cleared (labels or the estimate)
    SUSPECT_LABELS_BREACH = "suspect_labels_breach"    # labels breach, not yet sustained
    SUSPECT_PERSISTS = "suspect_persists"              # the estimated drop persists, no labels
    SUSPECT_ESTIMATE_HEALTHY = "suspect_estimate_healthy"  # the estimate is back, progress counted
    SUSPECT_WAITING = "suspect_waiting"                # waiting for labels
    RESOLVED = "resolved"                              # healthy for alerts.healthy_windows checks
    RESOLVED_NO_IMPACT = "resolved_no_impact"          # drift without performance impact
    NO_IMPACT_PROGRESS = "no_impact_progress"          # drift goes on, performance within thresholds
    HEALTHY_PROGRESS = "healthy_progress"              # a healthy window counted
    HEALTHY_WHILE_RETRAINING = "healthy_while_retraining"
    STILL_BREACHING = "still_breaching"                # the breach stands: retrain, or say why not
    AWAITING_JUDGEMENT = "awaiting_judgement"          # a promoted champion waits for its own labels
    OPEN = "open"                                      # open, health unknown or unhealthy
    REOPENED = "reopened"                              # the same drift came back: its resolved incident continues
    DRIFT_CONTINUES = "drift_continues"                # a resolved drift incident's episode goes on: counted on it


@dataclass(frozen=True)
class Action:
    kind: ActionKind
    incident_id: str | None = None
    state: State | None = None          # the incident's state when the action was decided
    progress: tuple[int, int] | None = None  # (have, need): healthy windows, judged windows
    retrain: StartKind | None = None    # None: no retrain was asked for
    attempt_id: str | None = None       # the retrain that started
    healthy: bool | None = None         # OPEN: unhealthy (False) or not judged (None)
    detail: str | None = None           # what a person reads: why no retrain, what it waits for
    wait: Wait | None = None            # a retrain waiting or deferred: what for (the data of ``detail``)

    @property
    def started(self) -> bool:
        return self.retrain is StartKind.STARTED

    def describe(self) -> str:
        """The one line a person reads."""
        k, i = self.kind, self.incident_id
        have, need = self.progress or (0, 0)
        text = {
            ActionKind.CHECK_NOT_OK: self.detail or "check not run",
            ActionKind.NONE: "no incident",
            ActionKind.OPENED: f"opened incident {i}",
            ActionKind.OPENED_SUSPECTED: f"opened suspected incident {i}",
            ActionKind.CONFIRMED: f"confirmed suspected incident {i}",
            ActionKind.CLEARED: f"cleared suspected incident {i}",
            ActionKind.SUSPECT_LABELS_BREACH: f"incident {i} (suspected): labels breach, not yet sustained",
            ActionKind.SUSPECT_PERSISTS: f"incident {i} (suspected): estimated drop persists, waiting for labels",
            ActionKind.SUSPECT_ESTIMATE_HEALTHY: f"incident {i} (suspected): estimate healthy {have}/{need}",
            ActionKind.SUSPECT_WAITING: f"incident {i} (suspected): waiting for labels",
            ActionKind.RESOLVED: f"resolved incident {i}",
            ActionKind.RESOLVED_NO_IMPACT: f"resolved incident {i} (drift without performance impact)",
            ActionKind.NO_IMPACT_PROGRESS: f"incident {i}: drift goes on, performance within thresholds "
                                           f"{have}/{need} judged window(s)",
            ActionKind.HEALTHY_PROGRESS: f"incident {i}: healthy {have}/{need}",
            ActionKind.HEALTHY_WHILE_RETRAINING: f"incident {i}: healthy window while retraining",
            ActionKind.STILL_BREACHING: f"incident {i} ({self.state}) still breaching",
            ActionKind.AWAITING_JUDGEMENT: f"incident {i} (promoted): {self.detail}",
            ActionKind.OPEN: f"incident {i} ({self.state}) open; "
                             f"{'unknown health' if self.healthy is None else 'unhealthy'}",
            ActionKind.REOPENED: f"reopened incident {i} (the same drift is back)",
            ActionKind.DRIFT_CONTINUES: f"incident {i} (resolved): its drift goes on, counted on it",
        }[k]
        opening = (ActionKind.OPENED, ActionKind.OPENED_SUSPECTED, ActionKind.REOPENED)
        if k in opening and self.retrain is None and self.detail:
            text += f" ({self.detail})"
        elif self.retrain is not None and self.detail:
            text += f"; {self.detail}"
        return text

    __str__ = describe


class TriggerKind(StrEnum):
    """What a retrain asked for from outside the checks did to the incidents."""

    OPENED = "opened"                  # opened an incident
    ATTACHED = "attached"              # attached to the open incident
    RESOLVED = "resolved"              # Alertmanager resolved the incident it had opened
    NOTED = "noted"                    # a resolved alert noted on the open incident
    REPLAY_IGNORED = "replay_ignored"  # a firing alert delivered again after its resolution
    NOTHING = "nothing"                # no firing alert concerns this model
    QUEUED = "queued"                  # a follower held the alerts in the store for the model's leader


@dataclass(frozen=True)
class TriggerAction:
    kind: TriggerKind
    incident_id: str | None = None
    retrain: StartKind | None = None    # None: no retrain was asked for
    attempt_id: str | None = None       # the retrain that started
    detail: str | None = None           # what a person reads about the retrain: started, or why not

    @property
    def started(self) -> bool:
        return self.retrain is StartKind.STARTED

    def describe(self) -> str:
        """The one line a person reads (the ``action`` of the API's answer)."""
        i = self.incident_id
        text = {
            TriggerKind.OPENED: f"opened incident {i}",
            TriggerKind.ATTACHED: f"attached to incident {i}",
            TriggerKind.RESOLVED: f"resolved incident {i}",
            TriggerKind.NOTED: f"noted on incident {i}",
            TriggerKind.REPLAY_IGNORED: "recorded: replayed firing alert(s) already resolved; not acted upon",
            TriggerKind.NOTHING: "nothing to do: no firing alert concerns this model",
            TriggerKind.QUEUED: "held in the store for the daemon leading this model (it acts within seconds)",
        }[self.kind]
        return text if self.retrain is None else f"{text}; {self.detail or ''}"

    __str__ = describe
