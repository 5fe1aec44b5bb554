"""What every training run shares: lineage tags, params, live epoch metrics,
and an MLflow run that ends FINISHED, KILLED (interrupted, resumable) or FAILED."""
from __future__ import annotations

import dataclasses
import json
import math
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from monitor.config import DriftloopConfig
from monitor.errors import UserInputError
from trainer.loop import LoopConfig, TrainingInterrupted
from trainer.outcomes import TRIGGERS


def check_trigger(trigger: str) -> None:
    if trigger not in TRIGGERS:
        raise UserInputError(f"trigger must be one of {', '.join(TRIGGERS)}, got {trigger!r}")


def check_reports(report_paths: Any) -> list[Path]:
    paths = [Path(p) for p in report_paths or ()]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise UserInputError(f"report file(s) not found: {', '.join(missing)}")
    return paths


def lineage_tags(cfg: DriftloopConfig, kind: str, trigger: str, incident_id: Any = None,
                 parent_version: str | None = None, data_window: Any = None) -> dict[str, str]:
    tags = {"driftloop.kind": kind, "driftloop.trigger": trigger, "driftloop.model": cfg.model.name,
            "driftloop.incident_id": "" if incident_id is None else str(incident_id),
            "driftloop.parent_version": parent_version or ""}
    if data_window is not None:
        tags["driftloop.data_window"] = data_window if isinstance(data_window, str) else json.dumps(
            data_window, default=str, sort_keys=True)
    return tags


def loop_params(loop: LoopConfig, **extra: Any) -> dict[str, Any]:
    params = {f"loop.{k}": v for k, v in dataclasses.asdict(loop).items() if k not in ("progress",)}
    return {**params, **extra}


def epoch_logger() -> Callable[[dict[str, float]], None]:
    import mlflow

    def log_epoch(record: dict[str, float]) -> None:
        step = int(record["epoch"])
        mlflow.log_metrics({k: float(v) for k, v in record.items()
                            if k != "epoch" and not math.isnan(float(v))}, step=step)
    return log_epoch


@contextmanager
def mlflow_run(experiment_id: str, name: str, tags: dict[str, str], run_id: str | None = None) -> Iterator[Any]:
    """Start (or, when resuming, re-open) a run; end it KILLED when training was interrupted so
    that ``--resume`` continues the same run, FAILED on any other error. MLflow's UserWarnings are
    not shown while the run is open (:func:`quiet_mlflow_hints`)."""
    import mlflow
    with quiet_mlflow_hints():
        if run_id is not None:
            run = mlflow.start_run(run_id=run_id)
        else:
            run = mlflow.start_run(experiment_id=experiment_id, run_name=name, tags=tags)
        try:
            yield run
        except TrainingInterrupted:
            mlflow.end_run("KILLED")
            raise
        except BaseException:
            mlflow.end_run("FAILED")
            raise
        mlflow.end_run("FINISHED")


@contextmanager
def quiet_mlflow_hints() -> Iterator[None]:
    """No UserWarning from MLflow's own modules inside: its hints about what it infers while
    logging (each dataset's schema "contains integer column(s)", twice per run) are about MLflow's
    schemas, which driftloop does not use (the model types and checks its own columns), and they
    buried the epoch lines of ``driftloop train`` and of a retrain child's log. MLflow's errors, its
    logged warnings and every other warning still show."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"mlflow(\.|$)")
        yield


def log_reports(paths: list[Path]) -> None:
    import mlflow
    for p in paths:
        mlflow.log_artifact(str(p), "reports")


def finite_output(output: Any, what: str) -> Any:
    """``output`` (a model's ``predict_proba``) as it is when every value is finite; DataError otherwise:
    a model whose held-out figures cannot be computed is never registered nor promoted."""
    import numpy as np
    values = np.asarray(output, dtype=np.float64)
    bad = int(values.size - np.isfinite(values).sum())
    if bad:
        from monitor.errors import DataError
        raise DataError(f"the trained model's outputs on the {what} are not finite ({bad} NaN or infinite "
                        f"value(s) of {values.size}); nothing was registered")
    return output


def fit_checked(*args: Any, **kwargs: Any):
    """:func:`trainer.loop.fit`, with its setting errors translated to ours. A ``training.entrypoint``
    model's failures in the user's code (its forward, dataset items, collate; a ``sys.exit`` there)
    become one :class:`~trainer.entrypoint.EntrypointError` naming the spec, and a non-finite loss
    names the spec too."""
    from monitor.errors import ConfigError, DriftloopError
    from trainer.entrypoint import user_failure
    from trainer.loop import CheckpointMismatch, NonFiniteLoss, fit
    spec = _entrypoint_spec(args[0] if args else kwargs.get("model"))
    try:
        return fit(*args, **kwargs)
    except CheckpointMismatch as exc:
        raise UserInputError(str(exc)) from exc
    except NonFiniteLoss as exc:
        if spec is not None:
            exc.args = (f"training.entrypoint {spec!r}: {exc}",)
        raise
    except (TrainingInterrupted, DriftloopError):
        raise
    except ValueError as exc:
        if str(exc).startswith("training."):
            raise ConfigError(str(exc)) from exc
        if spec is None:
            raise
        raise user_failure(spec, "training", exc) from exc
    except (Exception, SystemExit) as exc:  # KeyboardInterrupt still interrupts
        if spec is None:
            raise
        raise user_failure(spec, "training", exc) from exc


def _entrypoint_spec(model: Any) -> str | None:
    """A ``training.entrypoint`` model's spec; None for driftloop's own model."""
    return str(model.spec) if hasattr(model, "training_data") and getattr(model, "spec", None) else None


def fit_frames(model: Any, fit: Any, val: Any, target: str, loop: Any, *, checkpoint_path: Path, resume: bool,
             **kwargs: Any):
    """:func:`fit_checked` on DataFrames: the tensors (a ``training.entrypoint`` model: its Dataset of
    the rows' inputs) and the checkpoint fingerprint come from the rows (every torchrun rank, and
    rank 0 inside its MLflow run, train through here)."""
    from trainer.data import fingerprint, tensors
    if hasattr(model, "training_data"):  # a training.entrypoint model: its Dataset, keyed by input_uri and target
        from monitor.embeddings import INPUT_URI
        from trainer.entrypoint import running_user_code
        keys = [INPUT_URI, target]
        with running_user_code(_entrypoint_spec(model), "making the training data's dataset(refs, train)"):
            train_data, val_data = model.training_data(fit, target, True), model.training_data(val, target, False)
        return fit_checked(model, train_data, val_data,
                           loop, checkpoint_path=checkpoint_path, resume=resume,
                           fingerprint=fingerprint(fit[keys], val[keys]), **kwargs)
    return fit_checked(model, tensors(model, fit, target), tensors(model, val, target), loop,
                       checkpoint_path=checkpoint_path, resume=resume, fingerprint=fingerprint(fit, val), **kwargs)
