"""``driftloop init``: a commented ``driftloop.yaml`` for a user's data file, its feature types inferred."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import click

from monitor.errors import UserInputError


def _yaml_name(value: str) -> str:
    # JSON strings are YAML strings: quote anything YAML might read as another type or syntax.
    plain = re.fullmatch(r"[A-Za-z_][\w.-]*", value) and value.lower() not in ("true", "false", "yes", "no",
                                                                                "on", "off", "null")
    return value if plain else json.dumps(value)


def render(*, data_path: str, rows: int, name: str, target: str, id: str | None, ignore: list[str],
           features: list, left_out: list | None = None) -> str:
    """The file's text: every choice on its own line with the reason as a comment."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Written by `driftloop init` from {data_path} ({rows} rows looked at) on {now}.",
        "# Check the inferred feature types below, then:",
        f"#   driftloop train --data {data_path}   # trains, registers and makes the model champion",
        "#   driftloop serve                       # ingestion API, /metrics, drift checks, retraining",
        "# Rules: booleans and numbers are numeric; text is categorical; text unique on most rows",
        "# is refused as an id (--id) or free text (--ignore); constant and all-missing columns are",
        "# left out (listed under ignore: no signal to learn, and drift on them would mean nothing).",
        "# Any key can be overridden by an environment variable DRIFTLOOP_SECTION__KEY.",
        "model:",
        f"  name: {_yaml_name(name)}",
        f"  target: {_yaml_name(target)}    # the 0/1 outcome; label records may send it as \"{target}\"",
    ]
    if id:
        lines.append(f"  id: {_yaml_name(id)}    # record id column of files and frames; not a feature")
    left_out = left_out or []
    if ignore or left_out:
        names = [*ignore, *(c.name for c in left_out)]
        lines.append(f"  ignore: [{', '.join(_yaml_name(c) for c in names)}]    # in the file, not features")
        for c in left_out:
            lines.append(f"  #   {c.name}: left out by init, {c.why}")
    lines.append("  features:")
    width = max(len(f"    - {{name: {f.name}, type: {f.type}}}") for f in features)
    for f in features:
        entry = f"    - {{name: {_yaml_name(f.name)}, type: {f.type}}}"
        lines.append(f"{entry.ljust(width)}  # {f.note}")
    return "\n".join(lines) + "\n"


def default_name(path: str) -> str:
    stem = Path(path).name.split(".")[0]
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip("_.-")[:48]
    return cleaned or "model"


@click.command("init")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False),
              help="CSV (.csv, .csv.gz) or Parquet file with the feature columns and the target.")
@click.option("--target", required=True, help="The 0/1 outcome column.")
@click.option("--id", "id_column", default=None, help="Record id column (e.g. customer_id): kept out of the features.")
@click.option("--ignore", multiple=True, help="A column that is not a feature (repeat for several).")
@click.option("--name", default=None, help="Model name [default: the data file's name].")
@click.option("--output", "-o", default="driftloop.yaml", show_default=True, type=click.Path(dir_okay=False),
              help="Where to write the config.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
def command(data_path: str, target: str, id_column: str | None, ignore: tuple[str, ...], name: str | None,
            output: str, force: bool) -> None:
    """Write a commented driftloop.yaml for DATA: feature types inferred, ready for train and serve.

    Integers and booleans become numeric features, text becomes categorical. A text column with
    a different value on (almost) every row is refused with a hint: it is an id (--id) or free
    text (--ignore). Edit the file afterwards to make integer codes categorical.
    """
    from monitor.config import ModelConfig
    from monitor.dataschema import SAMPLE_ROWS, infer_schema, with_features
    from trainer import read_table

    out = Path(output)
    if out.exists() and not force:
        raise UserInputError(f"{out} exists; pass --force to overwrite it")
    data = read_table(data_path)
    id_name = id_column or ("id" if "id" in data.columns else None)
    schema = infer_schema(data, target, id=id_name, ignore=list(ignore))
    features, left_out = schema.features, schema.left_out
    model_name = name or default_name(data_path)
    settings = {"name": model_name, "target": target, "ignore": [*ignore, *(c.name for c in left_out)],
                **({"id": id_name} if id_name else {})}
    try:  # the file must load: the same validation `train` and `serve` will run
        with_features(ModelConfig.model_validate(settings), [f.spec() for f in features])
    except ValueError as exc:
        raise UserInputError(f"cannot write a valid config: {str(exc).splitlines()[-1].strip()}") from None
    text = render(data_path=data_path, rows=min(len(data), SAMPLE_ROWS), name=model_name, target=target,
                  id=id_column, ignore=list(ignore), features=features, left_out=left_out)
    out.write_text(text, encoding="utf-8")
    kinds = {t: sum(f.type == t for f in features) for t in ("numeric", "categorical")}
    click.echo(f"Wrote {out}: model {model_name!r}, target {target!r}, {kinds['numeric']} numeric and "
               f"{kinds['categorical']} categorical feature(s). Next: driftloop train --data {data_path}")
    for c in left_out:
        click.echo(f"Left out column {c.name!r}: {c.why}; no signal to learn, and drift on it would mean "
                   "nothing (listed under ignore in the file)", err=True)
