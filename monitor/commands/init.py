"""``driftloop init``: a commented ``driftloop.yaml`` for a user's data file, its feature types inferred."""
from __future__ import annotations

import re
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from monitor.cli import chosen_model
from monitor.dataschema import Omission
from monitor.errors import UserInputError
from monitor.commands.fleet_file import FleetFile, entry_lines, yaml_name as _yaml_name
from monitor.tasks import TASKS, InferredTask, task_of

# Columns init leaves out that --keep turns back into features.
_KEEPABLE = (Omission.MODEL_OUTPUT, Omission.RECORD_ID)


def _target_comment(target: str, task: InferredTask) -> str:
    return f"{task_of(task.task).target_comment(task.classes)}; label records may send it as \"{target}\""


def _task_lines(task: InferredTask, chosen: bool) -> list[str]:
    lines = [f"  task: {task.task}    # {task.reason}{'' if chosen else '; init --task chooses another'}"]
    if task.classes:
        names = ", ".join(_yaml_name(c) for c in task.classes)
        lines.append(f"  classes: [{names}]    # {task_of(task.task).classes_comment()}")
    return lines


def render(*, data_path: str, rows: int, name: str, target: str, id: str | None, ignore: list[str],
           features: list, left_out: list | None = None, task: InferredTask | None = None,
           task_chosen: bool = False, id_why: str | None = None, min_labels: tuple[int, str] | None = None) -> str:
    """The file's text: every choice on its own line with the reason as a comment."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Written by `driftloop init` from {data_path} ({rows} rows looked at) on {now}.",
        "# Check the inferred feature types below, then:",
        f"#   driftloop train --data {data_path}   # trains, registers and makes the model champion",
        "#   driftloop serve                       # ingestion API, /metrics, drift checks, retraining",
        *_RULES,
    ]
    return "\n".join(lines + sections(name=name, target=target, id=id, ignore=ignore, features=features,
                                       left_out=left_out, task=task, task_chosen=task_chosen, id_why=id_why,
                                       min_labels=min_labels)) + "\n"


# How init decided, written once at the head of the file.
_RULES = [
    "# Rules: booleans and numbers are numeric; text is categorical; text unique on most rows",
    "# is refused as an id (--id) or free text (--ignore); constant and all-missing columns are",
    "# left out (listed under ignore: no signal to learn, and drift on them would mean nothing), and so",
    "# are a model's outputs (y_pred, score, proba_<class>...): --keep COLUMN keeps one as a feature.",
    "# Without --id, a column unique on every row that is integers named like an id (PassengerId) or",
    "# counting up by one, or text named like an id (customerID), is taken as the record id; another",
    "# such integer column (a second id, a saved index \"Unnamed: 0\") is left out (--keep keeps it).",
    "# A column of equal-length numeric vectors is an embedding (dim: its length); input_uri and",
    "# columns of paths or URIs are the raw inputs' references, sent as input_uri, not features.",
    "# Any key can be overridden by an environment variable DRIFTLOOP_SECTION__KEY.",
]


def sections(*, name: str | None, target: str, id: str | None, ignore: list[str], features: list,
             left_out: list | None = None, task: InferredTask | None = None, task_chosen: bool = False,
             id_why: str | None = None, min_labels: tuple[int, str] | None = None) -> list[str]:
    """The model's sections (``model:``, and ``drift:`` when the data asks), one choice a line with
    its reason; ``name`` None leaves ``model.name`` out (an entry of ``models:``, named by its key)."""
    lines = [
        "model:",
        *([f"  name: {_yaml_name(name)}"] if name is not None else []),
        *(_task_lines(task, task_chosen) if task else []),
        f"  target: {_yaml_name(target)}    # {_target_comment(target, task or InferredTask('binary', None, ''))}",
    ]
    if id:
        chosen = f"taken by init: {id_why}; --id chooses another. " if id_why else ""
        lines.append(f"  id: {_yaml_name(id)}    # {chosen}record id column of files and frames; not a feature")
    left_out = left_out or []
    if ignore or left_out:
        names = [*ignore, *(c.name for c in left_out)]
        lines.append(f"  ignore: [{', '.join(_yaml_name(c) for c in names)}]    # in the file, not features")
        for c in left_out:
            keep = f"; --keep {shlex.quote(c.name)} to use it as a feature" if c.kind in _KEEPABLE else ""
            lines.append(f"  #   {c.name}: left out by init, {c.why}{keep}")
    lines.append("  features:")
    entries = [f"    - {{name: {_yaml_name(f.name)}, type: {f.type}{'' if f.dim is None else f', dim: {f.dim}'}}}"
               for f in features]
    width = max(map(len, entries))
    for f, entry in zip(features, entries):
        lines.append(f"{entry.ljust(width)}  # {f.note}")
    if min_labels:
        value, why = min_labels
        lines += ["drift:", f"  min_labels: {value}    # {why}"]
    return lines


# Words a data file's name carries about its role, not about the model: stripped from the end.
_ROLE_WORDS = ("reference", "ref", "train", "training", "trainset", "test", "testing", "valid", "validation",
               "val", "eval", "holdout", "data", "dataset", "sample", "full", "clean", "raw", "final")


def _name_part(text: str) -> str:
    """Lower case, runs of anything but letters and digits as one ``_``: a table-safe name."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _without_roles(name: str) -> str:
    words = name.split("_")
    while words and (words[-1] in _ROLE_WORDS or words[-1].isdigit()):
        words.pop()
    while words and words[0] in _ROLE_WORDS:
        words.pop(0)
    return "_".join(words)


def default_name(path: str) -> str:
    """The model's name from the data file's: lower case and table-safe, without the words that say
    the file's role (``Titanic_reference.csv`` -> ``titanic``, ``churn-train-2024.parquet`` ->
    ``churn``); a file named only by its role (``data/titanic/train.csv``) takes its folder's name;
    ``model`` when nothing is left."""
    file = Path(path)
    for part in (file.name.split(".")[0], file.resolve().parent.name):
        name = _without_roles(_name_part(part))[:48].strip("_")
        if name:
            return name
    return "model"


def _min_labels(rows: int, data_path: str) -> tuple[int, str] | None:
    """A ``drift.min_labels`` that data of ``rows`` rows can reach, with why, when the default cannot."""
    from monitor.config import DriftConfig

    default = DriftConfig().min_labels_at_most  # auto: at most this many, sized from the champion's baseline
    if rows >= default:
        return None
    value = max(30, min(rows, rows // 2 // 50 * 50 or rows // 2))
    margin = 1.96 * (0.25 / value) ** 0.5
    return value, (f"{data_path} has {rows} rows, fewer than the {default} labelled rows a window may need "
                   f"before performance (accuracy, ROC AUC) is judged; {value} labels judge accuracy "
                   f"within about +-{margin:.2f} (95%): raise it as labels allow")


@click.command("init")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="CSV (.csv, .csv.gz) or Parquet file with the feature columns and the target.")
@click.option("--target", required=True,
              help="The outcome column: 0/1 or two values (binary), 3-100 classes (multiclass) or a number "
                   "(regression).")
@click.option("--task", type=click.Choice(TASKS), default=None,
              help="binary, multiclass or regression [default: inferred from the target].")
@click.option("--id", "id_column", default=None,
              help="Record id column (e.g. customer_id): kept out of the features [default: a column named id, "
                   "else one unique on every row that is integers named like an id or counting up by one, or "
                   "text named like an id (PassengerId, customerID)].")
@click.option("--ignore", multiple=True, help="A column that is not a feature (repeat for several).")
@click.option("--keep", multiple=True,
              help="A column named or shaped like a model output (score, y_pred, proba_*), or a second record id, "
                   "to use as a feature anyway.")
@click.option("--name", default=None, help="Model name [default: the data file's name in lower case, without "
              "words like _reference, _train, _test, _data; e.g. titanic_reference.csv: titanic].")
@click.option("--output", "-o", default="driftloop.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the config; with --model, the file to add the model to (the --config file, "
                   "when given and --output is not).")
@click.option("--force", is_flag=True, help="Overwrite an existing output file; with --model, replace that model's "
              "sections when the file has a model of that name.")
@click.pass_context
def command(ctx: click.Context, data_path: str, target: str, task: str | None, id_column: str | None,
            ignore: tuple[str, ...], keep: tuple[str, ...], name: str | None, output: str, force: bool) -> None:
    """Write a commented driftloop.yaml for DATA: task and feature types inferred, ready for train and serve.

    The task follows from the target: two values are binary, 3-100 classes multiclass (the class
    list is written down), a continuous number regression; --task chooses. Integers and booleans
    become numeric features, text becomes categorical. A text column with a different value on
    (almost) every row is refused with a hint: it is an id (--id) or free text (--ignore).
    Columns that look like a model's outputs (y_pred, score, proba_<class>, probabilities that
    sum to 1) are left out with a warning; --keep keeps one. Without --id, a passenger or customer
    number (unique on every row, named like an id or counting up by one) is taken as the record
    id, said so; another such column (a second id, a saved index "Unnamed: 0") is left out, said
    so. Data smaller than drift.min_labels gets a smaller value written, said so. Edit the file
    afterwards to make integer codes categorical.

    With --model NAME and an existing file, the model is added to it instead: under its models:
    (or as NAME.yaml in its models_dir:), or, in a file of one model, after moving that model's
    own sections (model, training, alerts, drift, mlflow's names) under models: by its name; the
    shared sections (home, server, store, ...) stay at the top, the file's comments are kept.
    """
    from monitor.config import DriftConfig, ModelConfig
    from monitor.dataschema import SAMPLE_ROWS, infer_schema, propose_id, resolve_task, with_features
    from trainer import read_table

    chosen = chosen_model(ctx)
    if chosen and name and name != chosen:
        raise UserInputError(f"--name {name} and --model {chosen} name different models; give one of them")
    out = Path(output if not chosen or _given(ctx, "output") else _config_path(ctx) or output)
    fleet_file = FleetFile.read(out) if chosen is not None and out.exists() else None
    if fleet_file is not None and chosen is not None:  # refused before the data is read
        fleet_file.check_new(chosen, force)
    elif out.exists() and not force:
        raise UserInputError(f"{out} exists; pass --force to overwrite it")
    data = read_table(data_path)
    id_name = id_column or ("id" if "id" in data.columns else None)
    proposed = None
    if id_name is None:
        proposed = propose_id(data, skip=[target, *ignore, *keep])
        id_name = proposed.name if proposed else None
    inferred = resolve_task(data[target], task) if target in data.columns else None
    schema = infer_schema(data, target, id=id_name, ignore=list(ignore), keep=list(keep),
                          classes=inferred.classes if inferred else None)
    assert inferred is not None  # infer_schema refused a data file without the target
    features, left_out = schema.features, schema.left_out
    model_name = chosen or name or default_name(data_path)
    settings = {"name": model_name, "target": target, "ignore": [*ignore, *(c.name for c in left_out)],
                "task": inferred.task, **({"classes": inferred.classes} if inferred.classes else {}),
                **({"id": id_name} if id_name else {})}
    try:  # the file must load: the same validation `train` and `serve` will run
        with_features(ModelConfig.model_validate(settings), [f.spec() for f in features])
    except ValueError as exc:
        raise UserInputError(f"cannot write a valid config: {_reasons(exc)}") from None
    min_labels = _min_labels(len(data), data_path)
    rows = min(len(data), SAMPLE_ROWS)
    choices: dict[str, Any] = dict(target=target, id=proposed.name if proposed else id_column, ignore=list(ignore),
                   features=features, left_out=left_out, task=inferred, task_chosen=task is not None,
                   id_why=proposed.why if proposed else None, min_labels=min_labels)
    kinds = {t: sum(f.type == t for f in features) for t in ("numeric", "categorical", "embedding")}
    what = task_of(inferred.task).summary(inferred.classes)
    counts = [f"{n} {t}" for t, n in kinds.items() if n or t != "embedding"]  # embeddings only when there are some
    summary = (f"{what}, target {target!r}, {', '.join(counts[:-1])} and {counts[-1]} feature(s)")
    if fleet_file is not None:
        entry = entry_lines(model_name, data_path, rows, sections(name=None, **choices))
        done = fleet_file.add(model_name, entry, force)
        click.echo(f"{done}: model {model_name!r}, {summary}. Next: driftloop train --model {shlex.quote(model_name)} "
                   f"--data {shlex.quote(data_path)}")
    else:
        out.write_text(render(data_path=data_path, rows=rows, name=model_name, **choices), encoding="utf-8")
        click.echo(f"Wrote {out}: model {model_name!r}, {summary}. Next: driftloop train "
                   f"--data {shlex.quote(data_path)}")
    if proposed:
        click.echo(f"Using column {proposed.name!r} as the record id ({proposed.why}; not a feature). "
                   "Pass --id COLUMN to choose another", err=True)
    if min_labels:
        click.echo(f"Note: {len(data)} rows are fewer than the most drift.min_labels' default (auto) may ask "
                   f"for ({DriftConfig().min_labels_at_most}, labelled rows before performance alerts can fire); wrote "
                   f"drift.min_labels: {min_labels[0]} (set it in the file or as DRIFTLOOP_DRIFT__MIN_LABELS)",
                   err=True)
    for column in schema.kept_outputs:
        click.echo(f"Warning: column {column!r} looks like a model output; kept as a feature (--keep)", err=True)
    for c in left_out:
        if c.kind == Omission.INPUT_REFERENCE:
            click.echo(f"Left out column {c.name!r}: {c.why} (listed under ignore in the file)", err=True)
        elif c.kind == Omission.MODEL_OUTPUT:
            click.echo(f"Warning: column {c.name!r} looks like {c.why}: left out of the features (listed under "
                       f"ignore in the file). To use it as a feature, pass --keep {shlex.quote(c.name)} or move it "
                       "from ignore to features in the file", err=True)
        elif c.kind == Omission.RECORD_ID:
            click.echo(f"Left out column {c.name!r}: {c.why} (listed under ignore in the file). To use it as a "
                       f"feature, pass --keep {shlex.quote(c.name)}", err=True)
        else:
            click.echo(f"Left out column {c.name!r}: {c.why}; no signal to learn, and drift on it would mean "
                       "nothing (listed under ignore in the file)", err=True)


def _given(ctx: click.Context, param: str) -> bool:
    from click.core import ParameterSource
    return ctx.get_parameter_source(param) not in (ParameterSource.DEFAULT, None)


def _config_path(ctx: click.Context) -> str | None:
    """The file ``--config`` (or ``$DRIFTLOOP_CONFIG``) names: the one ``--model`` adds to."""
    import os

    from monitor.cli import _State
    from monitor.config import ENV_PREFIX

    state = ctx.find_object(_State)
    return (state.config_path if state else None) or os.environ.get(ENV_PREFIX + "CONFIG")


def _reasons(exc: ValueError) -> str:
    """What a pydantic error says, without its type names and documentation links."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in errors())
    return str(exc).splitlines()[-1].strip()
