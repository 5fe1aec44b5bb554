"""``training``: the loop, and its sections ``gate``, ``export`` and ``shadow``; the flat keys of the
previous release are moved there with a warning (:data:`DEPRECATED_TRAINING_KEYS`)."""
from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from monitor.config.base import _Section


class GateConfig(_Section):
    """``training.gate``: when a challenger may replace the champion (trainer/gate.py, trainer/judge.py)."""
    min_accuracy_gain: float = Field(0.01, ge=0, description="accuracy gain the challenger needs on the held-out "
                                     "recent rows")
    min_auc_gain: float = Field(0.0, ge=0, description="ROC AUC gain the challenger needs (0 = not worse)")
    min_mae_gain: float = Field(0.02, ge=0, lt=1, description="regression: relative MAE fall the challenger needs on "
                                "the held-out recent rows (0.02 = 2 % lower MAE); its RMSE may not rise")
    reference_floor: float = Field(0.15, ge=0, le=1, description="max accuracy the challenger may lose vs the "
                                   "champion on the champion's reference sample (bounds forgetting; regression: max "
                                   "relative rise of its MAE there)")
    confidence: float = Field(0.95, gt=0.5, lt=1, description="confidence of the gate's absolute floors (the "
                              "challenger's ROC AUC and accuracy lower bounds must clear 0.5 and the majority-class "
                              "rate) and of the live, shadow and review comparisons (at 1 - this)")
    max_latency_ms: float | None = Field(None, gt=0, description="the challenger's exported form (INT8 if "
                                         "published, else fp32) must score one row within this p99 latency "
                                         "(milliseconds, on the training machine); null = no limit")
    max_model_mb: float | None = Field(None, gt=0, description="the challenger's exported form (INT8 if "
                                       "published, else fp32) must be at most this many megabytes; null = no limit")
    significant_gain: bool = Field(True, description="while the champion sits below the reference level on the "
                                   "held-out rows, a gain smaller than min_accuracy_gain / min_mae_gain passes "
                                   "when the paired test (McNemar; regression: paired t on absolute errors) shows "
                                   "it at 1 - confidence: the bar is what the current evidence attains, not a fixed "
                                   "step (small real gains were refused one after another)")
    requires_live_win: bool = Field(False, description="the challenger must also win the A/B on live traffic (the "
                                    "rows the champion served in the retrain window): better on accuracy (McNemar) or "
                                    "ROC AUC (DeLong) at 1 - training.gate.confidence, significantly worse on neither")


class ExportConfig(_Section):
    """``training.export``: the deployment forms of every registered version (trainer/deployment.py)."""
    onnx: bool = Field(True, description="export every registered version to ONNX (fp32 and INT8), checked against "
                       "PyTorch, as artifacts of its run (onnx/)")
    parity_tolerance: float = Field(1e-4, gt=0, description="max |score difference| between ONNX fp32 and PyTorch on "
                                    "the reference rows for the fp32 form to be published")
    int8_parity_tolerance: float = Field(0.05, gt=0, description="max |score difference| between ONNX INT8 and "
                                         "PyTorch on the reference rows for the INT8 form to be published")
    int8_min_accuracy_ratio: float = Field(0.98, gt=0, le=1, description="an ONNX form is published only if its "
                                           "held-out accuracy is at least this share of PyTorch's")


class ShadowConfig(_Section):
    """``training.shadow``: a challenger that passed the gate scores live traffic first (trainer/shadow.py)."""
    windows: int = Field(0, ge=0, description="a challenger that passes the gate stays under the 'challenger' alias "
                         "and scores this many check windows of live traffic beside the champion before it becomes "
                         "champion (rejected if significantly worse); 0 = off")


# The flat training keys of 0.x, accepted for one more release: old key -> (section, new key).
DEPRECATED_TRAINING_KEYS: dict[str, tuple[str, str]] = {
    "promote_min_accuracy_gain": ("gate", "min_accuracy_gain"),
    "promote_min_auc_gain": ("gate", "min_auc_gain"),
    "promote_min_mae_gain": ("gate", "min_mae_gain"),
    "reference_floor": ("gate", "reference_floor"),
    "gate_confidence": ("gate", "confidence"),
    "max_latency_ms": ("gate", "max_latency_ms"),
    "max_model_mb": ("gate", "max_model_mb"),
    "promote_requires_live_win": ("gate", "requires_live_win"),
    "export_onnx": ("export", "onnx"),
    "export_parity_tolerance": ("export", "parity_tolerance"),
    "int8_parity_tolerance": ("export", "int8_parity_tolerance"),
    "int8_min_accuracy_ratio": ("export", "int8_min_accuracy_ratio"),
    "shadow_windows": ("shadow", "windows"),
}


def _move_deprecated_training_keys(data: Any) -> Any:
    """The old flat keys moved to their sections, one FutureWarning per key used; a key given both
    ways with different values is an error naming both."""
    if not isinstance(data, dict) or not any(k in DEPRECATED_TRAINING_KEYS for k in data):
        return data
    out = {k: v for k, v in data.items() if k not in DEPRECATED_TRAINING_KEYS}
    for old, value in data.items():
        if old not in DEPRECATED_TRAINING_KEYS:
            continue
        section, new = DEPRECATED_TRAINING_KEYS[old]
        given = out.get(section)
        if given is None:
            given = {}
        if not isinstance(given, dict):
            continue  # the section's own validation reports it
        if new in given and given[new] != value:
            raise ValueError(f"training.{old} ({value!r}) and training.{section}.{new} ({given[new]!r}) are both "
                             f"given and differ: keep only training.{section}.{new}")
        warnings.warn(f"training.{old} is deprecated: use training.{section}.{new}", FutureWarning, stacklevel=2)
        out[section] = {**given, new: value}
    return out


class TrainingConfig(_Section):
    epochs: int = Field(60, ge=1, description="upper bound; early stopping usually ends sooner")
    retrain_epochs: int | None = Field(None, ge=1, description="cap on a warm retrain's epochs; null (the "
                                       "default): until its validation loss stops improving for "
                                       "training.patience epochs, training.epochs at most (a fixed cap of 8 "
                                       "stopped most retrains while they still improved)")
    batch_size: int = Field(64, ge=1, description="rows per micro-batch and process")
    learning_rate: float = Field(2e-3, gt=0, description="AdamW learning rate; cosine decay to 10 %")
    retrain_lr_factor: float = Field(0.5, gt=0, le=1, description="retrain LR = learning_rate * this")
    weight_decay: float = Field(1e-4, ge=0, description="AdamW weight decay")
    hidden: list[int] = Field(default_factory=lambda: [64, 32], description="hidden layer widths of the default MLP")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout of the default MLP")
    patience: int = Field(5, ge=1, description="epochs without validation improvement before stopping")
    seed: int = Field(42, description="seed of the Python, numpy and torch RNGs")
    deterministic: bool = Field(False, description="torch's deterministic algorithms (slower; bitwise repeatable)")
    amp: Literal["auto", "off", "bf16", "fp16"] = Field("auto", description="auto (fp16 on CUDA, off on CPU), off, "
                                                                            "bf16 or fp16")
    grad_accum_steps: int = Field(1, ge=1, description="micro-batches per optimizer step")
    grad_clip: float | None = Field(1.0, gt=0, description="max gradient norm; null disables clipping")
    num_workers: int = Field(0, ge=0, description="DataLoader worker processes; 0 (the fastest for tensors in memory) "
                                                  "indexes batches directly, on the GPU when the rows fit in a quarter "
                                                  "of its free memory")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N")
    checkpoint_every_minutes: float = Field(5.0, gt=0, description="how often a checkpoint is written, plus one at "
                                                                   "every epoch end")
    validation_fraction: float = Field(0.2, gt=0, lt=1,
                                       description="share of the training rows used for early stopping")
    replay_ratio: float = Field(0.5, ge=0, description="reference rows replayed per recent row")
    holdout_fraction: float = Field(0.3, gt=0, lt=1, description="test rows (train), or held-out recent rows for the "
                                                                 "promotion gate (retrain)")
    min_rows: int = Field(200, ge=10, description="fewer labelled rows is a DataError")
    gradient_checkpointing: bool = Field(False,
                                         description="recompute activations in backward (models that support it)")
    threads: int = Field(0, ge=0, description="CPU threads for training; 0: one for a small dense network on the "
                         "CPU (under 1e9 FLOP per micro-batch: the default MLP), torch's default (one per core) "
                         "otherwise")
    progress: bool = Field(True, description="a log line per epoch at INFO (false: at DEBUG), and a progress bar on "
                          "stderr when it is a terminal")
    entrypoint: str | None = Field(None, description="'package.module:Object': your own PyTorch model and data "
                                   "code (build_model(task, n_outputs[, artifacts]), dataset(refs, train"
                                   "[, artifacts]), optional embed(model, x), collate, input_spec, "
                                   "prepare_artifacts(refs, previous, out), param_groups(model, lr)), trained by "
                                   "driftloop's loop on the rows' input_uri; default: the tabular MLP "
                                   "(docs/parts/trainer.md, 'Your own training code')")
    compile: bool = Field(False, description="torch.compile the model for training: faster steps on a GPU once "
                                             "compiled, "
                          "but the first steps wait for compilation (tens of seconds) and it needs a C++ compiler; "
                          "worth it for long runs, not for short retrains")
    reference_sample: int = Field(5000, ge=100,
                                  description="rows in a baseline's reference sample, held-out rows first")
    max_rows: int = Field(50_000, ge=100, description="labelled rows a retrain learns from at most: every row since "
                          "the incident's change point (or its last healthy window), newest first up to this many, so "
                          "each retry of an incident sees all the evidence gathered since the change")
    min_post_change_rows: int | None = Field(None, ge=10, description="labelled rows after the detected change point "
                                             "before retraining starts (fewer means wait, not train on the old "
                                             "concept); "
                                             "default max(training.min_rows, 300 / training.holdout_fraction), fewer "
                                             "for a "
                                             "classifier whose drop the rows after the change prove large (down to "
                                             "100 held-out rows)")
    try_previous_versions: int = Field(3, ge=0, description="before training, score this many earlier champions "
                                       "(newest first) on the held-out recent rows and reinstate the first that "
                                       "passes the same gate against the champion (a recurring concept: no "
                                       "training, recorded as a promotion); 0 = off")
    review_interval_checks: int = Field(10, ge=0, description="champion review: every this many successful checks "
                                        "(also while an incident is open but not retraining, its promotion then; and "
                                        "after every incident ends), the champion, the last "
                                        "training.review_versions champions and the first champion are scored on the "
                                        "latest training.review_rows labelled rows; an earlier version significantly "
                                        "better by the paired tests (McNemar / DeLong / paired t at 1 - "
                                        "training.gate.confidence, "
                                        "Bonferroni over the versions) is reinstated; 0 = off")
    review_versions: int = Field(3, ge=1, le=10, description="champion review: how many earlier champions "
                                 "(newest first) it scores besides the first champion; bounded, as each costs one "
                                 "model load (once, then cached) and one scoring of training.review_rows rows")
    review_rows: int | None = Field(None, ge=100, description="champion review: the latest labelled rows every "
                                    "version is scored on; default drift.window_size")
    gate: GateConfig = Field(default_factory=GateConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    shadow: ShadowConfig = Field(default_factory=ShadowConfig)
    cold_start: Literal["auto", "always", "never"] = Field("auto", description="also train a fresh model beside the "
                                                           "warm start and keep the better on validation: 'auto' when "
                                                           "the champion's concept no longer holds on recent rows, or "
                                                           "when the retrain learns from at least "
                                                           "training.cold_start_rows recent rows")
    cold_start_rows: int = Field(2000, ge=1, description="with cold_start: auto, recent rows (the held-out ones "
                                 "excluded) from which a fresh model also competes with the warm start: large "
                                 "evidence on the new concept can teach a fresh model more than fine-tuning does")
    evidence_growth: float = Field(4.0, ge=1.5, description="after a promoted retrain, the next retrain of the "
                                   "same change (a retry, or an improvement) waits until the labelled rows since "
                                   "the change are this many times what the promoted one learnt from: few, large "
                                   "steps instead of a promotion per batch of labels")
    improve_margin: float = Field(2 / 3, ge=0, le=1, description="improvement retrains: the share of the alert "
                                  "threshold (alerts.accuracy_drop, or alerts.mae_rise) by which the champion's "
                                  "whole interval must fall short of the reference level (2/3: more than 2 "
                                  "points of accuracy with the default 3-point threshold)")
    improve_below_reference: int = Field(2, ge=0, description="after an incident ends with the champion still "
                                         "significantly below the reference level (or the attainable level decided "
                                         "for it), retrain it again on every row since the change once those rows "
                                         "reached training.evidence_growth times what its last retrain learnt "
                                         "from (incident reason 'improve'), at most this many times per change; "
                                         "0 = off")

    @property
    def post_change_rows(self) -> int:
        import math
        if self.min_post_change_rows is not None:
            return self.min_post_change_rows
        return max(self.min_rows, math.ceil(300 / self.holdout_fraction))

    @model_validator(mode="before")
    @classmethod
    def _deprecated_keys(cls, data: Any) -> Any:
        return _move_deprecated_training_keys(data)

    @model_validator(mode="after")
    def _costs_need_export(self) -> "TrainingConfig":
        if not self.export.onnx and (self.gate.max_latency_ms is not None or self.gate.max_model_mb is not None):
            raise ValueError("gate.max_latency_ms / gate.max_model_mb are measured on the exported model: they need "
                             "export.onnx: true")
        return self

    @field_validator("amp", mode="before")
    @classmethod
    def _amp_off(cls, v: Any) -> Any:
        return "off" if v is False else v  # YAML reads an unquoted `amp: off` as false
