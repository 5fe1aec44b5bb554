"""The daemon's default collaborators, each built on first use so start-up stays fast: the champion
(loaded from MLflow), the drift evaluator (Evidently), the report saver and the shadow observer.
:class:`monitor.daemon.runtime.daemon.Daemon` takes each of them injected instead (the tests do)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd

from monitor.config import DriftloopConfig
from monitor.daemon.retraining.champion import ChampionCache, mlflow_alias_lookup

if TYPE_CHECKING:
    from monitor.drift import DriftEvaluator
    from monitor.drift.history import Cited
    from monitor.drift.result import CheckResult
    from trainer import Champion
    from trainer.shadow import ShadowNews

log = logging.getLogger(__name__)


def default_champion(cfg: DriftloopConfig, served: Callable[[], str | None] = lambda: None) -> ChampionCache:
    """``served()``: a champion version a check on record judged (see :func:`mlflow_alias_lookup`)."""
    def load() -> Champion:
        import trainer
        return trainer.load_champion(cfg)
    return ChampionCache(load, mlflow_alias_lookup(cfg, served))


class LazyEvaluator:
    """``monitor.drift.DriftEvaluator`` (which caches the prepared reference per champion), built
    on the first check: importing Evidently takes seconds, and start-up should not wait for it."""

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self._evaluator: DriftEvaluator | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> CheckResult:
        if self._evaluator is None:
            from monitor.drift import DriftEvaluator
            self._evaluator = DriftEvaluator(clock=self._clock)
        return self._evaluator(*args, **kwargs)


class ReportSaver:
    """A check's report files (``drift.report_max_bytes``) and its snapshot in the Evidently
    workspace, then the model's history pruned by age and size (``drift.history_days``,
    ``drift.history_max_bytes``), keeping the checks ``cited()`` names (incidents', retrains')."""

    def __init__(self, cfg: DriftloopConfig, cited: Callable[[], Cited]):
        self.cfg = cfg
        self._cited = cited

    def __call__(self, result: CheckResult, ts: float) -> tuple[Path | None, Path | None]:
        from monitor.drift import save_report
        from monitor.records.inputs import InputRoots
        # The summary page previews the drifted rows' inputs that model.input_roots lets be read.
        paths = save_report(result, self.cfg.reports_dir, max_bytes=self.cfg.drift.report_max_bytes,
                            roots=InputRoots.of(self.cfg.model))
        self._add_to_workspace(result)
        self._prune(ts)
        return paths.html, paths.json

    def _add_to_workspace(self, result: CheckResult) -> None:
        """Best effort: a workspace that cannot be written is logged and the check goes on (the
        report files are the record)."""
        folder = self.cfg.evidently_workspace
        if folder is None:
            return
        from monitor.drift.workspace import add_snapshot
        try:
            add_snapshot(result, folder)
        except Exception as exc:
            log.warning("could not add check %s to the Evidently workspace %s: %s", result.check_id, folder, exc)

    def _prune(self, now: float) -> None:
        """Best effort too: history that cannot be pruned now is pruned after a later check."""
        from monitor.drift.history import HistoryPolicy, prune_history
        try:
            prune_history(self.cfg.model.name, HistoryPolicy.from_config(self.cfg.drift), now, self._cited(),
                          reports_dir=self.cfg.reports_dir, workspace=self.cfg.evidently_workspace)
        except Exception as exc:
            log.warning("could not prune the check history of model %s: %s", self.cfg.model.name, exc)


def shadow_observer(cfg: DriftloopConfig) -> Callable[[pd.DataFrame], ShadowNews | None]:
    """training.shadow.windows: each check window goes to the pending shadow challenger (trainer/shadow.py)."""
    def observe(window: pd.DataFrame) -> ShadowNews | None:
        from trainer.shadow import observe as observe_shadow
        return observe_shadow(cfg, window)
    return observe
