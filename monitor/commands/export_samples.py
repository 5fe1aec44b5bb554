"""``driftloop export-samples``: the rows behind a check's embedding drift, and their inputs, for labelling."""
from __future__ import annotations

import click

from monitor.cli import config_from
from monitor.errors import UserInputError


@click.command("export-samples")
@click.option("--check", "check_id", default=None, metavar="ID",
              help="The check: its id in the store (as status and the incident's note name it) or the 12-hex id "
                   "of its report files.")
@click.option("--last", "last", is_flag=True, help="The last successful check (the default without --check).")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder to write samples.csv (or .parquet) and files/ into (created if missing; must not hold "
                   "an export already).")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]), default="csv", show_default=True,
              help="The table's format.")
@click.pass_context
def command(ctx: click.Context, check_id: str | None, last: bool, out: str, fmt: str) -> None:
    """Write the most atypical rows of a check's drifted embedding features (id, ts, cluster, distance,
    score, prediction, input_uri) to OUT/samples.csv, and copy each row's input into
    OUT/files/FEATURE/cluster-N/ where its input_uri is a file inside model.input_roots (nothing
    outside the roots is read: a link out of a root is refused; URIs such as s3:// are listed, not
    fetched). Reads the store under home; the daemon need not run."""
    if check_id is not None and last:
        raise UserInputError("give --check ID or --last, not both")
    cfg = config_from(ctx)
    from monitor.daemon.runtime.facade import read_check
    from monitor.drift import export_samples
    from monitor.records.inputs import InputRoots

    check = read_check(cfg, check_id)
    which = f"check {check_id}" if check_id is not None else "the last successful check"
    if check is None:
        missing = f"no check {check_id}" if check_id is not None else "no successful check yet"
        raise UserInputError(f"{missing} of model {cfg.model.name!r} in the store")
    drifted = (check.get("result") or {}).get("drifted_rows") or []
    if not any(block.get("rows") for block in drifted):
        raise UserInputError(f"{which} (id {check['id']}) lists no rows behind a drift: no embedding feature drifted, "
                             "or none of its rows lay beyond the reference; pick a drifted check with --check ID")
    done = export_samples(drifted, InputRoots.of(cfg.model), out, fmt=fmt)
    why = ", ".join(f"{kind.value} {n}" for kind, n in done.skipped.items())
    click.echo(f"Wrote {done.table}: {done.rows} rows of check {check['id']} "
               f"({', '.join(str(b.get('feature')) for b in drifted)}); copied {done.copied} input file(s)"
               + (f", {done.rows - done.copied} not copied ({why})" if why else ""))
