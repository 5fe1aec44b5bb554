"""Child process: run one read-only query on a SQLite file through ADBC and stream the result to
stdout as Arrow IPC. Run by path (``python arrow_reader.py``), with ``{"path", "sql"}`` as JSON on stdin.

Why a separate process: the ADBC SQLite driver links its own copy of SQLite. Two copies of SQLite in
one process do not see each other's POSIX locks, so when one closes the database it can checkpoint
and truncate the WAL under the other's feet; we saw "database disk image is malformed" that way
(https://www.sqlite.org/howtocorrupt.html, "multiple copies of SQLite linked into the same
application"). Between processes the locking protocol holds whatever the versions. The connection
is read-only besides, so this process can never write.

Deliberately standalone (no ``monitor`` imports): it starts in about 0.2 s.
"""
from __future__ import annotations

import json
import sys
from urllib.parse import quote

import adbc_driver_manager
import adbc_driver_sqlite
import pyarrow as pa
import pyarrow.ipc

# One Arrow batch for the whole result: the driver infers each column's type from its first
# batch, and a column that is NULL throughout a smaller first batch would then fail on later rows.
BATCH_ROWS = str(2**30)


def main() -> int:
    spec = json.loads(sys.stdin.buffer.read())
    uri = f"file:{quote(spec['path'])}?mode=ro"
    with adbc_driver_sqlite.connect(uri) as db, adbc_driver_manager.AdbcConnection(db) as conn, \
            adbc_driver_manager.AdbcStatement(conn) as stmt:
        stmt.set_options(**{"adbc.sqlite.query.batch_rows": BATCH_ROWS})
        stmt.set_sql_query(spec["sql"])
        stream, _ = stmt.execute_query()
        reader = pa.RecordBatchReader._import_from_c(stream.address)
        with pa.ipc.new_stream(sys.stdout.buffer, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
