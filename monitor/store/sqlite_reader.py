"""Large SQLite windows, read by child processes through ADBC (arrow_reader.py) in parallel.

The window is turned into a predicate on ``ts`` and ``seq`` (the newest-N boundary is looked up
first), its rowid range is split between ``parts`` children, each of which scans its range in rowid
order, with no ORDER BY. The parent concatenates the Arrow tables and sorts them by (ts, seq).
On two cores this halves the time of one ordered query; the result is the same rows in the same
order as :func:`monitor.store.window.build_query` gives (tested).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc
from sqlalchemy.engine import Connection

from monitor.config import ModelConfig
from monitor.errors import StoreError
from monitor.store.schema import ModelTables
from monitor.store.window import conform, select_list

CHILD = Path(__file__).with_name("arrow_reader.py")


@dataclass(frozen=True)
class Plan:
    rows: int                       # predictions in the window (labelled or not): an upper bound
    queries: list[str]              # one per child, parameters inlined (integers only)


def plan(conn: Connection, tables: ModelTables, model: ModelConfig, quote, *, last_n: int | None,
         since_us: int | None, until_us: int | None, labelled_only: bool, parts: int) -> Plan:
    p, lab = quote(tables.predictions.name), quote(tables.labels.name)
    join = f"JOIN {lab} l ON l.id = p.id" if labelled_only else f"LEFT JOIN {lab} l ON l.id = p.id"
    where = []
    if since_us is not None:
        where.append(f"p.ts >= {int(since_us)}")
    if until_us is not None:
        where.append(f"p.ts < {int(until_us)}")
    if last_n is not None:
        # The oldest row of the newest N is the window's lower (ts, seq) bound.
        probe = (f"SELECT p.ts, p.seq FROM {p} p {join if labelled_only else ''}"
                 f"{' WHERE ' + ' AND '.join(where) if where else ''}"
                 f" ORDER BY p.ts DESC, p.seq DESC LIMIT 1 OFFSET {int(last_n) - 1}")
        bound = conn.exec_driver_sql(probe).first()
        if bound is not None:
            ts0, seq0 = int(bound[0]), int(bound[1])
            where.append(f"p.ts >= {ts0} AND (p.ts > {ts0} OR p.seq >= {seq0})")
    condition = " AND ".join(where) if where else "1 = 1"
    lo, hi, rows = conn.exec_driver_sql(f"SELECT min(p.seq), max(p.seq), count(*) FROM {p} p WHERE {condition}").one()
    if not rows:
        return Plan(0, [])
    lo, hi = int(lo), int(hi)
    parts = max(1, min(parts, rows // 10_000 or 1))
    step = (hi - lo) // parts + 1
    select = f"SELECT {select_list(model, quote)} FROM {p} p {join} WHERE {condition}"
    queries = [f"{select} AND p.seq BETWEEN {lo + k * step} AND {min(hi, lo + (k + 1) * step - 1)}"
               for k in range(parts)]
    return Plan(rows, queries)


def run_child(path: Path, sql: str, timeout: float = 600.0) -> pa.Table:
    """One query in one child process; the result streams back as Arrow IPC over a pipe.
    (A pipe rather than a file in /dev/shm: containers often give /dev/shm only 64 MiB.)"""
    spec = json.dumps({"path": str(path), "sql": sql}).encode()
    with tempfile.TemporaryFile() as errors:
        try:
            proc = subprocess.Popen([sys.executable, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=errors)
        except OSError as exc:
            raise StoreError(f"window reader process failed to start: {exc}") from exc
        assert proc.stdin is not None and proc.stdout is not None  # both are pipes
        try:
            _widen_pipe(proc.stdout)
            proc.stdin.write(spec)
            proc.stdin.close()
            try:
                table = pa.ipc.open_stream(proc.stdout).read_all()
            except pa.ArrowInvalid:
                table = None  # nothing or a broken stream came back; the exit status and stderr say why
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise StoreError(f"window reader process took longer than {timeout:.0f} s") from exc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if code != 0 or table is None:
            errors.seek(0)
            lines = errors.read().decode(errors="replace").strip().splitlines()
            raise StoreError(f"window reader process failed (exit {code}): {lines[-1] if lines else 'no output'}")
    return table


def _widen_pipe(pipe) -> None:
    # Linux pipes hold 64 KiB; 1 MiB means fewer switches between child and parent per window.
    try:
        import fcntl
        fcntl.fcntl(pipe.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
    except (ImportError, OSError):
        pass


def read(path: Path, plan_: Plan, schema: pa.Schema) -> pa.Table:
    """Run the plan's queries in parallel children; one table ordered by (ts, seq)."""
    if not plan_.queries:
        return schema.empty_table()
    with ThreadPoolExecutor(max_workers=len(plan_.queries)) as pool:
        tables = list(pool.map(lambda sql: conform(run_child(path, sql), schema), plan_.queries))
    table = pa.concat_tables(tables)
    # Parts cover ascending seq ranges, each in seq order: when ts never decreases along them (rows
    # arrive in time order), the table is already in (ts, seq) order and the sort can be skipped.
    ts = table.column("ts")
    if len(ts) > 1 and pc.all(pc.greater_equal(ts.slice(1), ts.slice(0, len(ts) - 1))).as_py():
        return table
    return table.sort_by([("ts", "ascending"), ("seq", "ascending")])


def default_parts() -> int:
    return max(1, min(2, os.cpu_count() or 1))
