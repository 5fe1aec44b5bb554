"""What crosses the process boundary of a retrain: the request the daemon writes and the result the
retrain child writes back (docs/CONTRACTS.md, "Retrain worker"), as typed models checked on both
sides. The daemon builds a :class:`RetrainRequest` (a mistake of ours fails before a child is
started) and the child validates the JSON it reads; the child builds a :class:`RetrainResult`
and the daemon validates the JSON it reads back, so a child of another version, a truncated file
or a hand-edited request is a clear error naming the field, never a ``KeyError`` in the settlement.

Bottom layer (pydantic and the standard library only): the trainer's worker and the daemon's
launcher both import it; neither imports the other.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from monitor.errors import UserInputError

Trigger = Literal["manual", "alert", "schedule"]
TRIGGERS: tuple[str, ...] = ("manual", "alert", "schedule")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StoreWindow(_Strict):
    """The labelled rows of the store (read by the monitor's child or ``driftloop retrain``)."""

    source: Literal["store"] = "store"
    last_n: int | None = Field(None, ge=1)
    since: str | None = None
    until: str | None = None


class FileWindow(_Strict):
    """A CSV or Parquet file of labelled rows (what the daemon's launcher writes for its child)."""

    source: Literal["file"]
    path: str = Field(min_length=1)


Window = Annotated[Union[StoreWindow, FileWindow], Field(discriminator="source")]


class RetrainRequest(_Strict):
    """``request.json``: what one retrain is asked to do. Every key is optional."""

    config_path: str | None = None
    # Nested overrides on top of config_path / DRIFTLOOP_* (the daemon sends its whole configuration,
    # ``cfg.model_dump(mode="json")``, so the child trains exactly as configured there).
    config: dict[str, Any] = Field(default_factory=dict)
    trigger: Trigger = "manual"
    incident_id: str | int | None = None
    report_paths: list[str] = Field(default_factory=list)
    data_window: dict[str, Any] | None = None
    window: Window = Field(default_factory=StoreWindow)
    resume: bool = False

    @classmethod
    def parse(cls, body: Any, where: str = "retrain request") -> "RetrainRequest":
        """The request in ``body`` (a dict or JSON text); UserInputError naming each wrong field
        (the child was handed a bad request: an expected failure, exit 2)."""
        return _parse(cls, body, where, UserInputError)


class RetrainOutcomeBody(BaseModel):
    """``outcome`` of a successful result: trainer.outcomes.RetrainOutcome as a dict (a test holds
    the two field lists together)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Literal["promoted", "rejected", "shadow"]
    challenger_version: str
    champion_version: str
    run_id: str
    metrics: dict[str, float | None] = Field(default_factory=dict)
    reasons: list[str] = Field(default_factory=list)
    duration_seconds: float = 0.0
    samples_per_second: float = 0.0
    previous_champion_version: str | None = None
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    skipped_inputs: int = 0


class RetrainResult(_Strict):
    """``result.json``, written atomically by the child as its last act: ``ok`` with the outcome,
    ``error`` (our error's class name and message), or ``interrupted`` (after a checkpoint: the
    same request again with ``resume: true``)."""

    status: Literal["ok", "error", "interrupted"]
    outcome: RetrainOutcomeBody | None = None
    error: str | None = None
    message: str | None = None
    checkpoint: str | None = None

    @model_validator(mode="after")
    def _outcome_iff_ok(self) -> "RetrainResult":
        if (self.status == "ok") != (self.outcome is not None):
            raise ValueError("a result has an outcome exactly when its status is ok")
        return self

    @classmethod
    def parse(cls, body: Any, where: str = "retrain result") -> "RetrainResult":
        """The result in ``body`` (a dict or JSON text); ValueError naming each wrong field."""
        return _parse(cls, body, where, ValueError)


Series = Literal["warm", "cold"]
# What the child is doing: training its models, judging the challenger against the champion on the
# held-out rows (trainer/judge.py), or publishing it (registry, exports, champion alias).
Stage = Literal["training", "judging", "publishing"]
_STAGE_SAYS = {"judging": "judging the challenger", "publishing": "registering and exporting the challenger"}


class SeriesProgress(_Strict):
    """The latest epoch of one model a retrain trains: the champion's warm-started copy, or the fresh
    model competing with it (``training.cold_start``)."""

    epoch: int = Field(ge=1)
    epochs: int = Field(ge=1)            # the most this run may take (early stopping ends it sooner)
    rows: int = Field(ge=0)              # rows it trains on
    train_loss: float | None = None
    val_loss: float | None = None        # on the rows held out for early stopping
    seconds: float = Field(ge=0)         # since the retrain started, at the end of this epoch


class RetrainProgress(_Strict):
    """``progress.json``, rewritten by the child while it trains (at most about once a second, after
    an epoch): what a person watching the retrain is shown (``driftloop status``, the demos)."""

    started: float                       # epoch seconds, when the child started
    updated: float                       # epoch seconds, when this was written
    series: dict[Series, SeriesProgress] = Field(default_factory=dict)
    stage: Stage = "training"

    @classmethod
    def parse(cls, body: Any, where: str = "retrain progress") -> "RetrainProgress":
        """The progress in ``body`` (a dict or JSON text); ValueError naming each wrong field."""
        return _parse(cls, body, where, ValueError)

    def describe(self) -> str:
        """e.g. ``epoch 3/30, val_loss 0.4123, 600 rows``; each series named when a fresh model
        competes: ``warm epoch 10/10, val_loss 0.3120; cold epoch 4/30, val_loss 0.5230; 600 rows``;
        after training, what follows it: ``judging the challenger after epoch 12/30, ...``."""
        if not self.series:
            return _STAGE_SAYS.get(self.stage, "preparing")
        named = len(self.series) > 1
        parts = [f"{name + ' ' if named else ''}epoch {s.epoch}/{s.epochs}"
                 + (f", val_loss {s.val_loss:.4f}" if s.val_loss is not None else "")
                 for name, s in sorted(self.series.items(), key=lambda kv: kv[0] != "warm")]
        rows = max(s.rows for s in self.series.values())
        trained = ("; " if named else ", ").join(parts) + ("; " if named else ", ") + f"{rows} rows"
        return f"{_STAGE_SAYS[self.stage]} after {trained}" if self.stage in _STAGE_SAYS else trained


_Model = TypeVar("_Model", bound=BaseModel)


def _parse(model: type[_Model], body: Any, where: str, error: type[Exception]) -> _Model:
    try:
        if isinstance(body, (str, bytes)):
            return model.model_validate_json(body)
        return model.model_validate(body)
    except ValidationError as exc:
        raise error(_described(exc, where)) from None


def _described(exc: ValidationError, where: str) -> str:
    """``cannot read <where>: ...`` for text that is no JSON object, else ``<where>: <problems>``."""
    bad_json = [e for e in exc.errors() if e["type"] in ("json_invalid", "model_type")]
    if bad_json:
        return f"cannot read {where}: expected a JSON object ({bad_json[0]['msg']})"
    return f"{where}: {_problems(exc)}"


def _problems(exc: ValidationError) -> str:
    """Pydantic's errors as one line: unknown keys together, then ``field: what was expected``."""
    unknown = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "extra_forbidden"]
    out = [f"unknown key(s) {', '.join(sorted(unknown))}"] if unknown else []
    for e in exc.errors():
        if e["type"] == "extra_forbidden":
            continue
        loc = ".".join(str(p) for p in e["loc"] if p not in ("store", "file"))
        if e["type"] == "union_tag_invalid":
            out.append(f"{loc}.source must be 'store' or 'file', got {e['ctx']['tag']!r}")
        elif e["type"] == "union_tag_not_found":
            out.append(f"{loc}.source is required ('store' or 'file')")
        else:
            out.append(f"{loc or 'body'}: {e['msg']}")
    return "; ".join(out)
