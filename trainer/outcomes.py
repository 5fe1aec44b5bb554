"""Plain, picklable results of the trainer's public functions (the retrain worker ships them
across a process boundary, so they hold only built-in types, numpy arrays and DataFrames)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

import numpy as np
import pandas as pd

from monitor.retrain_contract import TRIGGERS, Trigger  # noqa: F401  (the one definition; re-exported here)


@dataclass
class Baseline:
    """What the drift job compares live traffic with: a reference sample of the data the champion
    was fitted for (features + target + the champion's output as a store window carries it, per
    task: trainer.baseline_training.reference_sample) and its metrics on held-out rows."""

    reference: pd.DataFrame
    metrics: dict[str, float]  # binary {"accuracy", "roc_auc"}; trainer/metrics.py lists each task's
    # How precisely those held-out rows measured them (trainer.baseline_training.held_out_intervals):
    # {"rows": n, "confidence": 0.95, "accuracy": [low, high], ...}; empty for a baseline logged
    # before it was recorded. The daemon judges against the interval's end nearest a drop.
    intervals: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainOutcome:
    version: str
    run_id: str
    metrics: dict[str, float]
    champion: bool = False  # whether this version became champion (it does when there was none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RetrainOutcome:
    # "shadow": passed the gate and is held in shadow (trainer.shadow) until live windows decide.
    outcome: Literal["promoted", "rejected", "shadow"]
    challenger_version: str
    champion_version: str  # the champion after the decision (the challenger when promoted)
    run_id: str
    metrics: dict[str, float]
    reasons: list[str] = field(default_factory=list)
    duration_seconds: float = 0.0
    samples_per_second: float = 0.0
    previous_champion_version: str | None = None
    # One per gate that ran (trainer/judge.py Verdict.to_dict: gate, passed, kind, message, data).
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    # training.entrypoint: rows left out because their input no longer resolved inside
    # model.input_roots or could not be read (trainer/inputs.py); counted, never a failure.
    skipped_inputs: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Champion:
    """The model behind alias ``champion``. ``predict_proba(df)`` takes raw features (a DataFrame
    with the configured feature columns; extra columns are ignored) and returns the model's output:
    P(label = 1) (binary), class probabilities ``(n, K)`` (multiclass) or the value (regression)."""

    version: str
    run_id: str
    predict_proba: Callable[[pd.DataFrame], np.ndarray]
    baseline: Baseline
    model: Any = None  # the torch module (preprocessing inside), for warm starts
