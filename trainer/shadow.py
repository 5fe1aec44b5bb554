"""Shadow mode: a challenger that passed the gate serves no one yet; it scores ``training.shadow.windows``
check windows of live traffic beside the champion before it may become champion.

A retrain whose challenger passes the gate with ``training.shadow.windows > 0`` does not move ``champion``:
it calls :func:`hold`, which records the pending shadow on the registered model (tag
``driftloop.shadow``, JSON) and on the version (tag ``driftloop.shadow``, its progress). The daemon
then hands every check's window to :func:`observe`: rows that arrived after the last counted window
(after the retrain, for the first; at least ``drift.min_rows`` of them), served by the champion the
shadow started against, are scored by the challenger and compared with what was served
(trainer/live.py, paired tests on every labelled one, per ``model.task``: accuracy and ROC AUC,
accuracy and macro ROC AUC, or MAE). A window where the challenger is significantly worse on any of
them (``1 - gate_confidence``) ends the shadow: rejected. Otherwise the window
counts; after ``training.shadow.windows`` of them ``champion`` moves to it, unless the champion changed
meanwhile (a rollback, another promotion), which cancels the shadow instead. One shadow at a
time: a newer one replaces an older one.

State lives in the registry, not the daemon, so a restarted daemon (or another leader) continues it.
:func:`observe` returns a :class:`ShadowNews`: its ``kind`` is what the daemon acts on (a ``promoted``
shadow settles the retrain attempt that held it as a promotion by the loop, which keeps the
reference level; ``rejected``/``cancelled`` settle it as rejected), its ``message`` is for people.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal

import pandas as pd

from monitor.config import DriftloopConfig
from trainer import registry as reg

log = logging.getLogger(__name__)

SHADOW_TAG = "driftloop.shadow"


@dataclass
class ShadowState:
    version: str                 # the challenger in shadow
    champion: str                # the champion it must beat; promotion is a compare-and-set against it
    needed: int                  # training.shadow.windows when it started
    seen: int = 0                # windows counted so far
    since_ns: int = 0            # only rows after this count (the last counted window's end), epoch nanoseconds


ShadowKind = Literal["skipped", "counted", "promoted", "rejected", "cancelled"]
ENDED: tuple[ShadowKind, ...] = ("promoted", "rejected", "cancelled")


@dataclass(frozen=True)
class ShadowNews:
    """What one observed window did to the pending shadow of challenger ``version``."""
    kind: ShadowKind
    version: str
    message: str

    @property
    def ended(self) -> bool:
        return self.kind in ENDED


def hold(registry: Any, version: str, champion: str, needed: int, now: float) -> ShadowState:
    """Start (or replace) the shadow of ``version`` against ``champion``."""
    state = ShadowState(str(version), str(champion), int(needed), 0, int(now * 1e9))
    _save(registry, state)
    return state


def pending(registry: Any) -> ShadowState | None:
    from mlflow.exceptions import MlflowException
    try:
        tags = registry.client.get_registered_model(registry.name).tags
    except MlflowException as exc:
        if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    raw = tags.get(SHADOW_TAG)
    return ShadowState(**json.loads(raw)) if raw else None


def _save(registry: Any, state: ShadowState) -> None:
    registry.client.set_registered_model_tag(registry.name, SHADOW_TAG, json.dumps(asdict(state)))
    registry.client.set_model_version_tag(registry.name, state.version, SHADOW_TAG,
                                          f"pending: {state.seen}/{state.needed} windows against v{state.champion}")


def _end(registry: Any, state: ShadowState, kind: ShadowKind, outcome: str) -> ShadowNews:
    registry.client.delete_registered_model_tag(registry.name, SHADOW_TAG)
    registry.client.set_model_version_tag(registry.name, state.version, SHADOW_TAG, outcome[:4900])
    from trainer.story import append_version_note
    append_version_note(registry, state.version, f"**Shadow:** {outcome}")
    message = f"shadow v{state.version}: {outcome}"
    log.info("%s", message)
    return ShadowNews(kind, state.version, message)


def observe(cfg: DriftloopConfig, window: pd.DataFrame, *,
            clock: Callable[[], float] = time.time) -> ShadowNews | None:
    """Count one check window of live traffic for the pending shadow challenger, and promote or
    reject it when it has seen enough. ``window``: the check's rows as the store returns them.
    Returns what happened, or None when no shadow is pending."""
    def skipped(state: ShadowState, why: str) -> ShadowNews:
        return ShadowNews("skipped", state.version, f"shadow v{state.version}: window not counted ({why}); "
                                                     f"{state.seen}/{state.needed}")

    from trainer.live import compare_live

    reg.check_reachable(cfg)
    with reg.session(cfg), reg.translating(cfg, "observing the shadow challenger"):
        registry = reg.Registry(cfg)
        state = pending(registry)
        if state is None:
            return None
        current = registry.alias_version(reg.CHAMPION)
        if current != state.champion:
            return _end(registry, state, "cancelled", f"cancelled: the champion moved from v{state.champion} to "
                                                      f"v{current}")
        ts = pd.to_datetime(window["ts"], utc=True).reset_index(drop=True)
        fresh = window.reset_index(drop=True)[(ts > pd.Timestamp(state.since_ns, tz="UTC")).to_numpy()]
        fresh = fresh.reset_index(drop=True)
        if len(fresh) < max(1, cfg.drift.min_rows):
            return skipped(state, f"{len(fresh)} rows since the last one < drift.min_rows {cfg.drift.min_rows}")
        challenger = reg.load_version(cfg, registry, state.version).model
        comparison, _ = compare_live(challenger, fresh, fresh, cfg, state.champion, clock=clock)
        if comparison.unavailable:
            return skipped(state, comparison.unavailable)
        _, worse = comparison.significant(1 - cfg.training.gate.confidence)
        if worse:
            return _end(registry, state, "rejected", f"rejected: worse than v{state.champion} on live traffic: "
                                                     f"{'; '.join(worse)}")
        state.seen += 1
        state.since_ns = int(pd.to_datetime(fresh["ts"], utc=True).max().value)
        if state.seen < state.needed:
            _save(registry, state)
            return ShadowNews("counted", state.version, f"shadow v{state.version}: window {state.seen}/{state.needed} "
                                                        f"counted ({comparison.rows} rows, {comparison.closeness()})")
        registry.make_champion(state.version)
        return _end(registry, state, "promoted", f"promoted after {state.needed} live windows beside v{state.champion}")
