"""``driftloop train``: the baseline model from a CSV/Parquet file, registered in MLflow."""
from __future__ import annotations

from typing import Any

import click

from monitor.cli import config_from
from monitor.commands._training import run_training
from monitor.config import ModelConfig
from monitor.tasks import TASKS

# The task a config without model.task has (binary, 0/1): the one a summary does not name.
_DEFAULT_TASK = ModelConfig.model_fields["task"].default


@click.command("train")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="CSV (.csv, .csv.gz) or Parquet file with the feature columns and the target.")
@click.option("--target", default=None, help="Target column (0/1, a class, or a number; see model.task) "
              "[default: model.target, 'label'].")
@click.option("--task", type=click.Choice(TASKS), default=None,
              help="binary, multiclass or regression [default: model.task, else inferred from the target].")
@click.option("--id", "id_column", default=None, help="Record id column, not a feature [default: model.id, 'id'].")
@click.option("--ignore", multiple=True, help="A column that is not a feature (repeat for several) [default: "
                                              "model.ignore].")
@click.option("--resume", is_flag=True, help="Continue an interrupted run from its last checkpoint.")
@click.option("--epochs", type=int, default=None, help="Override training.epochs.")
@click.option("--quiet", "-q", is_flag=True, help="No progress: the per-epoch lines go to DEBUG, no bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def command(ctx: click.Context, data_path: str, target: str | None, task: str | None, id_column: str | None,
            ignore: tuple[str, ...], resume: bool, epochs: int | None, quiet: bool, as_json: bool) -> None:
    """Train the baseline model on a file and register it; it becomes champion if there is none.

    Without model.task configured, the task is inferred from the target (two values: binary;
    3-100 classes: multiclass, the classes recorded; a continuous number: regression). Without
    model.features configured, the features are inferred from the file by the rules of
    `driftloop init`. Both are recorded with the model version, which serve, check and retrain
    then follow. The saved model holds its preprocessing (scaling, imputation and missing indicators,
    category vocabularies) and takes a raw DataFrame:
    mlflow.pyfunc.load_model("models:/<name>@champion").predict(df).

    Exit status 75: interrupted (SIGTERM/SIGINT) after a checkpoint; run again with --resume.
    """
    overrides: dict[str, Any] = {}
    model = {k: v for k, v in {"target": target, "task": task, "id": id_column,
                               "ignore": list(ignore) or None}.items() if v}
    if model:
        overrides["model"] = model
    training = {k: v for k, v in {"epochs": epochs, "progress": False if quiet else None}.items() if v is not None}
    if training:
        overrides["training"] = training
    cfg = config_from(ctx, overrides)

    from trainer import headline, read_table, train_baseline

    # Configured categorical features are read as the file's text ("01001" stays "01001").
    data = read_table(data_path, text=cfg.model.categorical_features if cfg.model.features_configured else ())
    cfg = _with_task(cfg, data)
    if not cfg.model.features_configured:
        # No features configured: the rules of `driftloop init`, recorded with the model version.
        from monitor.dataschema import infer_schema, with_features
        cfg = _with_id(cfg, data)
        schema = infer_schema(data, cfg.model.target, id=cfg.model.id, ignore=cfg.model.ignore,
                              classes=cfg.model.classes)
        inferred = schema.features
        model_cfg = cfg.model.model_copy(update={"ignore": [*cfg.model.ignore, *(c.name for c in schema.left_out)]})
        cfg = cfg.model_copy(update={"model": with_features(model_cfg, [f.spec() for f in inferred])})
        click.echo("Features inferred from the data (write them down with `driftloop init`): "
                   + ", ".join(f"{f.name} ({f.type})" for f in inferred)
                   + "".join(f"; left out {c.name}: {c.why}" for c in schema.left_out), err=True)
    outcome = run_training(ctx, lambda: train_baseline(cfg, data, resume=resume, data_source=data_path), as_json)
    if outcome is None:
        return
    role = " (champion)" if outcome.champion else ""
    kind = "" if cfg.model.task == _DEFAULT_TASK else f" ({cfg.model.task})"  # the default task goes unsaid
    click.echo(f"Registered {cfg.registered_model_name} v{outcome.version}{role}{kind}: test "
               f"{headline(cfg.model.task, outcome.metrics)} (run {outcome.run_id}, {cfg.tracking_uri})")


def _with_id(cfg: Any, data: Any) -> Any:
    """``cfg`` with the record id ``driftloop init`` would take when none is configured or given
    and the file has no column ``id``: a column unique on every row that is integers named like an
    id or counting up by one, or text named like an id (:func:`monitor.dataschema.propose_id`), said
    on stderr as init says it."""
    from monitor.dataschema import propose_id

    m = cfg.model
    if "id" in m.model_fields_set or m.id in data.columns:
        return cfg
    proposed = propose_id(data, skip=[m.target, *m.ignore])
    if proposed is None:
        return cfg
    click.echo(f"Using column {proposed.name!r} as the record id ({proposed.why}; not a feature). "
               "Pass --id COLUMN to choose another", err=True)
    return cfg.model_copy(update={"model": m.model_copy(update={"id": proposed.name})})


def _with_task(cfg: Any, data: Any) -> Any:
    """``cfg`` with the task and classes the target asks for: inferred when model.task is not
    configured (said on stderr unless it is the default, binary 0/1), checked against the values
    when it is (a regression target that is text is a DataError). Configured classes are kept; a
    target missing from the file is check_frame's error to name."""
    from monitor.dataschema import resolve_task

    m = cfg.model
    if m.target not in data.columns:
        return cfg
    found = resolve_task(data[m.target], m.task if m.task_configured else None)
    if not m.task_configured and (found.task, found.classes) != (_DEFAULT_TASK, None):  # 0/1: as always
        click.echo(f"Task inferred from the target {m.target!r}: {found.task} ({found.reason})"
                   + (f"; classes {', '.join(found.classes)}" if found.classes else ""), err=True)
    classes = m.classes if "classes" in m.model_fields_set else found.classes
    if (found.task, classes) == (m.task, m.classes):
        return cfg
    data_ = {**m.model_dump(exclude_unset=True), "task": found.task, "classes": classes}
    return cfg.model_copy(update={"model": ModelConfig.model_validate(data_)})
