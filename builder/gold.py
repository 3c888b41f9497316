r"""Gold answers: execute the task's SQL on its own database and write strict CSV.

The header comes from the cursor, values are written by ``format_cell`` (NULL as an empty
cell, floats in their shortest repr), and the CSV is produced by the csv module with
``QUOTE_MINIMAL``, ``\n`` line ends and UTF-8. ``gold_from_ledger`` re-derives a built
task's gold from its ledger, which is how anyone can check a release.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from builder.errors import Rejected
from builder.render.csv_renderer import write_csv
from builder.tables import Row

logger = logging.getLogger(__name__)

MAX_ROWS = 100_000
MAX_COLUMNS = 64
MAX_CELL_BYTES = 2 * 1024 * 1024
MAX_CSV_BYTES = 20 * 1024 * 1024


class GoldRejected(Rejected):
    """The query gives no usable gold answer; carries a one-line reason."""

    stage_name = "gold"


@dataclass(frozen=True, kw_only=True)
class GoldAnswer:
    """The executed answer of one task."""

    header: tuple[str, ...]
    rows: list[Row]
    csv: bytes

    @property
    def sha256(self) -> str:
        """SHA-256 of the CSV bytes."""
        return hashlib.sha256(self.csv).hexdigest()


def execute_gold(
    conn: sqlite3.Connection,
    sql: str,
    *,
    timeout: float = 60.0,
    max_rows: int = MAX_ROWS,
    max_columns: int = MAX_COLUMNS,
) -> GoldAnswer:
    """Execute ``sql`` and turn its result into a gold answer.

    Raises:
        GoldRejected: the SQL fails, is not a query, returns nothing, is too large, takes
            longer than ``timeout`` seconds, or returns values CSV cannot carry.
    """
    deadline = time.monotonic() + timeout
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cur = conn.execute(sql)
        if cur.description is None:
            raise GoldRejected("the SQL is not a query (it returns no columns)")
        header = tuple(str(d[0]) for d in cur.description)
        rows = cur.fetchmany(max_rows + 1)
    except sqlite3.OperationalError as exc:
        if str(exc) == "interrupted":
            raise GoldRejected(f"the query took longer than {timeout:g}s") from None
        raise GoldRejected(f"the SQL fails: {exc}") from None
    except sqlite3.Error as exc:
        raise GoldRejected(f"the SQL fails: {exc}") from None
    finally:
        conn.set_progress_handler(None, 0)
    if not rows:
        raise GoldRejected("the query returns no rows")
    if len(rows) > max_rows:
        raise GoldRejected(f"the query returns more than {max_rows} rows")
    if len(header) > max_columns:
        raise GoldRejected(f"the query returns {len(header)} columns (limit {max_columns})")
    if all(v is None for row in rows for v in row):
        raise GoldRejected("the query returns only NULLs")
    for row in rows:
        for value in row:
            if isinstance(value, bytes):
                raise GoldRejected("the answer holds binary values")
            if isinstance(value, float) and not math.isfinite(value):
                raise GoldRejected("the answer holds a non-finite number")
            if isinstance(value, str):
                if "\0" in value:
                    raise GoldRejected("the answer holds a NUL character")
                if len(value) * 4 > MAX_CELL_BYTES and len(value.encode()) > MAX_CELL_BYTES:
                    raise GoldRejected(f"the answer holds a cell over {MAX_CELL_BYTES} bytes")
    data = write_csv(header, rows)
    if len(data) > MAX_CSV_BYTES:
        raise GoldRejected(f"the answer CSV is {len(data)} bytes (limit {MAX_CSV_BYTES})")
    return GoldAnswer(header=header, rows=rows, csv=data)


def gold_from_database(db_path: Path, sql: str, *, timeout: float = 60.0) -> GoldAnswer:
    """Execute ``sql`` on a database file opened read-only."""
    conn = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
    try:
        return execute_gold(conn, sql, timeout=timeout)
    finally:
        conn.close()


def gold_from_ledger(ledger_dir: Path) -> GoldAnswer:
    """Re-derive a built task's gold from ``ledger.json`` and ``task_db.sqlite``."""
    ledger = json.loads((Path(ledger_dir) / "ledger.json").read_text(encoding="utf-8"))
    return gold_from_database(Path(ledger_dir) / "task_db.sqlite", ledger["sql"])


__all__ = ["GoldAnswer", "GoldRejected", "execute_gold", "gold_from_database", "gold_from_ledger"]
