"""The strict CSV reader shared by gold and prediction files.

UTF-8 with an optional BOM, strict quoting, at most 20 MiB, 100,000 data rows, 64 columns
and 2 MiB per cell, no NUL character, a non-empty header and rectangular rows. Problems are
reported in the order a streaming reader meets them, with the official messages, so that a
prediction's ``error`` field is the same text. A prediction that is a symbolic link is
rejected; a gold file may be one.
"""

from __future__ import annotations

import csv
import io
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from evaluator.errors import INVALID_PREDICTION_CSV, MISSING_PREDICTION, CsvError, FatalError

logger = logging.getLogger(__name__)

MAX_CSV_BYTES = 20 * 1024 * 1024
MAX_CSV_ROWS = 100_000
MAX_CSV_COLUMNS = 64
MAX_CELL_CHARACTERS = 2 * 1024 * 1024

Role = Literal["prediction", "gold"]

# ``csv.field_size_limit`` is process-wide: readers in other threads must not see ours.
_FIELD_LIMIT_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True, slots=True)
class CsvTable:
    """A parsed CSV: the header row and the data rows, all cells as raw strings."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _raiser(role: Role) -> Callable[[str], Exception]:
    if role == "prediction":
        return lambda message: CsvError(INVALID_PREDICTION_CSV, message)
    if role == "gold":
        return FatalError
    raise ValueError(f"role must be 'prediction' or 'gold', not {role!r}")


def read_csv(
    path_or_bytes: str | Path | bytes, *, role: Role = "prediction", name: str | None = None
) -> CsvTable:
    """Read a CSV under the protocol's limits.

    Args:
        path_or_bytes: a file path, or the file's bytes.
        role: ``prediction`` (problems raise :class:`CsvError` with the verdict's error code)
            or ``gold`` (problems raise :class:`FatalError`).
        name: how messages name in-memory bytes (default ``<memory>``).

    Returns:
        The header and data rows.

    Raises:
        CsvError: a prediction problem (``missing_prediction`` or ``invalid_prediction_csv``).
        FatalError: a gold problem.
    """
    fail = _raiser(role)
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        data = bytes(path_or_bytes)
        label = name or "<memory>"
        if len(data) > MAX_CSV_BYTES:
            raise fail(f"CSV exceeds the {MAX_CSV_BYTES}-byte limit: {label} ({len(data)} bytes)")
        return _parse(
            lambda: io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", newline=""),
            label,
            fail,
        )

    path = Path(path_or_bytes)
    if not path.exists():
        if role == "prediction":
            raise CsvError(MISSING_PREDICTION, f"Missing prediction CSV: {path}")
        raise fail(f"Missing CSV file: {path}")
    if not path.is_file():
        raise fail(f"CSV path is not a regular file: {path}")
    if role == "prediction" and path.is_symlink():
        raise fail(f"Symbolic links are not allowed: {path}")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise fail(f"Cannot stat CSV file {path}: {exc}") from exc
    if size > MAX_CSV_BYTES:
        raise fail(f"CSV exceeds the {MAX_CSV_BYTES}-byte limit: {path} ({size} bytes)")
    return _parse(lambda: path.open(encoding="utf-8-sig", newline=""), str(path), fail)


def _parse(opener: Callable[[], IO[str]], label: str, fail: Callable[[str], Exception]) -> CsvTable:
    rows: list[list[str]] = []
    stop_after = MAX_CSV_ROWS + 2  # one header, the limit, and the row that breaks it
    parse_error: BaseException | None = None
    with _FIELD_LIMIT_LOCK:
        previous_limit = csv.field_size_limit(MAX_CELL_CHARACTERS)
        try:
            with opener() as handle:
                append = rows.append
                for row in csv.reader(handle, strict=True):
                    append(row)
                    if len(rows) >= stop_after:
                        break
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            parse_error = exc
        finally:
            csv.field_size_limit(previous_limit)

    # A streaming reader checks each row (row limit, then NUL) before asking for the next
    # one, so among the rows read, the earliest such problem wins over a later parse error.
    checked = rows[: MAX_CSV_ROWS + 1]
    if "\x00" in "".join(itertools.chain.from_iterable(checked)):
        for number, row in enumerate(checked, start=1):
            if any("\x00" in cell for cell in row):
                raise fail(f"NUL byte in CSV cell at row {number}: {label}")
    if len(rows) > MAX_CSV_ROWS + 1:
        raise fail(f"CSV exceeds the {MAX_CSV_ROWS}-data-row limit: {label}")
    if parse_error is not None:
        raise fail(f"Cannot parse CSV {label}: {parse_error}") from parse_error

    if not rows:
        raise fail(f"CSV is empty and has no header row: {label}")
    header = rows[0]
    width = len(header)
    if not width:
        raise fail(f"CSV header has zero columns: {label}")
    if width > MAX_CSV_COLUMNS:
        raise fail(f"CSV exceeds the {MAX_CSV_COLUMNS}-column limit: {label}")
    if len(set(map(len, rows))) > 1:
        for number, row in enumerate(rows[1:], start=2):
            if len(row) != width:
                raise fail(
                    f"Non-rectangular CSV {label}: row {number} has "
                    f"{len(row)} cells; expected {width}"
                )
    return CsvTable(header=tuple(header), rows=tuple(map(tuple, rows[1:])))


def check_table_shape(
    header: tuple[str, ...], rows: tuple[tuple[str, ...], ...], *, label: str, role: Role
) -> None:
    """Apply the reader's shape rules to rows that did not come from a file.

    Raises:
        CsvError: for a prediction (``invalid_prediction_csv``).
        FatalError: for gold.
    """
    fail = _raiser(role)
    if len(rows) > MAX_CSV_ROWS:
        raise fail(f"CSV exceeds the {MAX_CSV_ROWS}-data-row limit: {label}")
    for number, row in enumerate(itertools.chain((header,), rows), start=1):
        for cell in row:
            if not isinstance(cell, str):
                raise fail(f"Non-text cell in {label} at row {number}: {type(cell).__name__}")
            if "\x00" in cell:
                raise fail(f"NUL byte in CSV cell at row {number}: {label}")
            if len(cell) > MAX_CELL_CHARACTERS:
                raise fail(
                    f"Cannot parse CSV {label}: field larger than field limit "
                    f"({MAX_CELL_CHARACTERS})"
                )
    width = len(header)
    if not width:
        raise fail(f"CSV header has zero columns: {label}")
    if width > MAX_CSV_COLUMNS:
        raise fail(f"CSV exceeds the {MAX_CSV_COLUMNS}-column limit: {label}")
    for number, row in enumerate(rows, start=2):
        if len(row) != width:
            raise fail(
                f"Non-rectangular CSV {label}: row {number} has {len(row)} cells; expected {width}"
            )


__all__ = [
    "MAX_CELL_CHARACTERS",
    "MAX_CSV_BYTES",
    "MAX_CSV_COLUMNS",
    "MAX_CSV_ROWS",
    "CsvTable",
    "check_table_shape",
    "read_csv",
]
