"""Why a prediction failed: an explanation beside the official verdict, never instead of it.

The verdict (``passed``, ``error_code``, ``error``) comes from :mod:`evaluator.task` and is
the official one; :func:`explain` only reads the same tables again and describes the
difference:

- **columns**: for each gold column, the prediction column that fits it best (the most
  values in common once canonicalized under the gold column's rule; ties go to the same
  header, then to the lower index), and, when even that one does not equal it, why:
  ``type`` (cells that do not read under the column's type, with the first one and the
  reader's message) or ``values`` (how many values differ, with examples); gold columns
  left without any partner (``missing_columns``) and prediction columns no gold column
  took (``extra_columns``);
- **rows**: under that best partial alignment, the first differing row (the first
  position for ordered tasks; for unordered tasks the first gold row without an equal
  prediction row, beside the prediction row closest to it), and the gold rows missing
  from the prediction and the prediction rows not in the gold;
- **near misses**: a difference that one usual slip explains: ``rounding`` (numbers within
  a rounding step of the gold), ``percent`` (a factor of 100, or a ``%`` sign the column
  does not accept), ``date_format`` (dates in a format other than ISO 8601, or with a time
  of day where a date is expected), ``whitespace_case`` (text equal up to case and
  inner whitespace), ``null_token`` (a word such as ``N/A`` or ``-`` where the gold is
  empty);
- **previews**: the first rows of the gold and of the prediction, for a side-by-side view.

``explain`` returns a JSON-ready dict whose ``summary`` is a list of one-line sentences,
the most useful first.

>>> from evaluator.config import parse_config
>>> cfg = parse_config({"schema_version": "1.0", "task_id": "task_1", "order_sensitive": False,
...     "columns": [{"gold_index": 0, "gold_name": "share", "type": "number",
...                  "comparison": {"mode": "decimal_places", "digits": 2}}]}, source="doc")
>>> e = explain(cfg, ["share"], [["0.25"], ["0.5"]], ["share"], [["25"], ["50"]])
>>> e["error_code"], [m["kind"] for m in e["near_misses"]]
('relation_mismatch', ['percent'])
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from evaluator.canonical import NULL, Canonical, CellError, converter
from evaluator.config import ColumnSpec, TaskConfig
from evaluator.errors import (
    COLUMN_COUNT_MISMATCH,
    INVALID_PREDICTION_CSV,
    MISSING_PREDICTION,
    ROW_COUNT_MISMATCH,
)

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 10
MAX_EXAMPLES = 3
MAX_ROWS_LISTED = 5
MAX_CELL = 200
NULL_WORDS = frozenset({"n/a", "na", "-", "--", "—", "null value", "missing", "无", "空", "?"})
DATE_FORMATS = (
    "%Y/%m/%d",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%Y.%m.%d",
    "%d.%m.%Y",
    "%Y年%m月%d日",
    "%d %b %Y",
    "%b %d, %Y",
    "%B %d, %Y",
    "%d %B %Y",
    "%Y/%m/%d %H:%M:%S",
    "%m/%d/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M",
)
_SPACES = re.compile(r"\s+")
_INVALID = object()


def _clip(cell: str) -> str:
    return cell if len(cell) <= MAX_CELL else cell[:MAX_CELL] + "…"


def _show(value: Any) -> str:
    if value is NULL:
        return "NULL"
    if value is _INVALID:
        return "(unreadable)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return _clip(str(value))


def _canon(spec: ColumnSpec, column: Sequence[str]) -> tuple[list[Any], list[tuple[int, str]]]:
    """Canonical values of a raw column under a gold column's rule, and the cells that fail."""
    convert = converter(spec)
    cache: dict[str, Any] = {}
    out: list[Any] = []
    bad: list[tuple[int, str]] = []
    for i, raw in enumerate(column):
        value = cache.get(raw, _INVALID if raw in cache else None)
        if raw not in cache:
            try:
                value = convert(raw)
            except CellError as exc:
                value = _INVALID
                if len(bad) < MAX_EXAMPLES:
                    bad.append((i, f"{raw!r}: {exc}"))
            cache[raw] = value
        elif value is _INVALID and len(bad) < MAX_EXAMPLES:
            bad.append((i, f"{raw!r}"))
        out.append(value)
    return out, bad


def _overlap(gold: Counter[Any], pred: Sequence[Any]) -> int:
    have = Counter(v for v in pred if v is not _INVALID)
    return sum((gold & have).values())


def _type_name(spec: ColumnSpec) -> str:
    if spec.type != "number":
        return spec.type
    mode = spec.comparison_mode
    if mode == "integer":
        return "number (integer)"
    if mode == "decimal_places":
        return f"number ({spec.comparison_digits} decimal places)"
    return f"number ({spec.comparison_digits} significant digits)"


def _decimal(raw: str) -> Decimal | None:
    text = raw.strip().replace(",", "")
    if text.endswith("%"):
        text = text[:-1].strip()
    try:
        value = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def _paired(gold: Sequence[str], pred: Sequence[str], ordered: bool) -> list[tuple[str, str]]:
    if ordered:
        return list(zip(gold, pred, strict=False))

    def key(s: str) -> Any:
        d = _decimal(s)
        return (0, d, "") if d is not None else (1, Decimal(0), s)

    return list(zip(sorted(gold, key=key), sorted(pred, key=key), strict=False))


def _near_miss(
    spec: ColumnSpec,
    gold_raw: Sequence[str],
    gold_values: list[Any],
    pred_raw: Sequence[str],
    ordered: bool,
) -> dict[str, str] | None:
    """The one usual slip that explains a column's difference, if any."""
    convert = converter(spec)
    gold_tally = Counter(gold_values)

    def fixed(transform: Any) -> bool:
        out = []
        for raw in pred_raw:
            try:
                out.append(convert(transform(raw)))
            except (CellError, ValueError, InvalidOperation, ArithmeticError):
                return False
        return Counter(out) == gold_tally if not ordered else out == gold_values

    if spec.type == "text":
        norm = [_SPACES.sub(" ", s.strip()).casefold() for s in gold_raw]
        if fixed(lambda s: s) is False and sorted(norm) == sorted(
            _SPACES.sub(" ", s.strip()).casefold() for s in pred_raw
        ):
            return {
                "kind": "whitespace_case",
                "detail": "the texts are equal up to letter case and inner whitespace "
                "(text is compared case-sensitively, trimmed only at the ends)",
            }
    if any(g is NULL for g in gold_values):
        words = {p.strip() for g, p in zip(gold_values, pred_raw, strict=False) if g is NULL}
        if words and words <= {w for w in words if w.strip().casefold() in NULL_WORDS}:
            null_fix = {w.casefold() for w in words}
            if fixed(lambda s: "" if s.strip().casefold() in null_fix else s):
                return {
                    "kind": "null_token",
                    "detail": f"the prediction writes {sorted(words)!r} where the gold is empty "
                    "(NULL is an empty cell, null, none, nan, nat or <NA>)",
                }
    if spec.type == "number":
        if any(p.strip().endswith("%") for p in pred_raw) and not spec.allow_percent_sign:
            if fixed(lambda s: s.strip()[:-1] if s.strip().endswith("%") else s) or fixed(
                lambda s: _scaled(s, Decimal(100)) if s.strip().endswith("%") else s
            ):
                return {
                    "kind": "percent",
                    "detail": "the prediction writes a % sign, which this column does not "
                    "accept; the numbers without it match",
                }
            return {
                "kind": "percent",
                "detail": "the prediction writes a % sign, which this column does not accept",
            }
        for factor, how in ((Decimal(100), "100 times"), (Decimal("0.01"), "a hundredth of")):
            if fixed(lambda s, f=factor: _scaled(s, f)):
                return {
                    "kind": "percent",
                    "detail": f"the prediction's numbers are {how} the gold's "
                    "(a percentage written as a fraction or the other way round)",
                }
        pairs = _paired(gold_raw, pred_raw, ordered)
        diffs: list[tuple[Decimal, Decimal]] = []
        for g, p in pairs:
            dg, dp = _decimal(g), _decimal(p)
            if dg is None or dp is None:
                if g.strip() or p.strip():
                    diffs = []
                    break
                continue
            diffs.append((dg, dp))
        if diffs and any(a != b for a, b in diffs):
            step = _step(spec, [a for a, _ in diffs])
            if step is not None and all(abs(a - b) <= step for a, b in diffs):
                example = next((a, b) for a, b in diffs if a != b)
                return {
                    "kind": "rounding",
                    "detail": f"the numbers are within one rounding step ({step}) of the "
                    f"gold but round differently, e.g. {_clip(str(example[1]))} against "
                    f"{_clip(str(example[0]))}; the column compares "
                    f"{_type_name(spec)[len('number (') : -1]}",
                }
    if spec.type in ("date", "datetime"):
        for fmt in DATE_FORMATS:

            def reformat(s: str, f: str = fmt) -> str:
                if not s.strip():
                    return s
                parsed = datetime.strptime(s.strip(), f)
                return parsed.date().isoformat() if spec.type == "date" else parsed.isoformat()

            if fixed(reformat):
                return {
                    "kind": "date_format",
                    "detail": f"the prediction writes dates as {fmt!r}; the evaluator reads ISO "
                    "8601 (YYYY-MM-DD)",
                }
        if spec.type == "date" and fixed(lambda s: s.strip()[:10]):
            return {
                "kind": "date_format",
                "detail": "the prediction adds a time of day to dates; the column holds "
                "dates (only midnight reads as a date)",
            }
    return None


def _scaled(raw: str, factor: Decimal) -> str:
    """``raw`` divided by ``factor`` (unchanged when it is not a number)."""
    value = _decimal(raw)
    return raw if value is None else str(value / factor)


def _step(spec: ColumnSpec, gold: Sequence[Decimal]) -> Decimal | None:
    """One rounding step of the column's comparison, near the gold's magnitude."""
    if spec.comparison_mode == "decimal_places":
        return Decimal(1).scaleb(-(spec.comparison_digits or 0))
    if spec.comparison_mode == "integer":
        return Decimal(1)
    if spec.comparison_mode == "significant_digits":
        biggest = max((abs(g) for g in gold if g != 0), default=Decimal(0))
        if biggest == 0:
            return None
        return Decimal(1).scaleb(biggest.adjusted() - (spec.comparison_digits or 1) + 1)
    return None


def _preview(header: Sequence[str], rows: Sequence[Sequence[str]]) -> dict[str, Any]:
    return {
        "header": [_clip(h) for h in header],
        "rows": [[_clip(c) for c in r] for r in rows[:PREVIEW_ROWS]],
        "row_count": len(rows),
    }


def _assign(scores: list[list[tuple[int, int, int]]], width_gold: int) -> list[int | None]:
    """Greedy one-to-one assignment of prediction columns to gold columns by best score."""
    triples = sorted(
        ((s, j, p) for j, row in enumerate(scores) for p, s in enumerate(row)),
        key=lambda x: (-x[0][0], -x[0][1], -x[0][2], x[1], x[2]),
    )
    partner: list[int | None] = [None] * width_gold
    used: set[int] = set()
    for score, j, p in triples:
        if partner[j] is not None or p in used or not any(score):
            continue
        partner[j] = p
        used.add(p)
    width_pred = len(scores[0]) if scores else 0
    if width_pred == width_gold:  # same width: what is left pairs up in order
        free = iter(p for p in range(width_pred) if p not in used)
        for j in range(width_gold):
            if partner[j] is None:
                partner[j] = next(free)
    return partner


def explain(
    config: TaskConfig,
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    prediction_header: Sequence[str] | None,
    prediction_rows: Sequence[Sequence[str]] | None,
    *,
    error_code: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """Describe how a prediction differs from the gold (see the module docstring).

    Args:
        config: the task config.
        gold_header: the gold header.
        gold_rows: the gold data rows (raw strings).
        prediction_header: the prediction header, or None when it is missing or unreadable.
        prediction_rows: the prediction data rows, or None likewise.
        error_code: the official verdict's code when the prediction could not be read;
            otherwise the verdict is computed here.
        error: the official verdict's message in that case.
    """
    if prediction_header is not None and prediction_rows is not None:
        from evaluator.task import evaluate_rows

        verdict = evaluate_rows(
            gold_header=gold_header,
            gold_rows=gold_rows,
            prediction_header=prediction_header,
            prediction_rows=prediction_rows,
            config=config,
        )
        error_code, error = verdict.error_code, verdict.error
    elif error_code is None:
        error_code = MISSING_PREDICTION
    specs = config.columns
    out: dict[str, Any] = {
        "error_code": error_code,
        "summary": [],
        "columns": [],
        "missing_columns": [],
        "extra_columns": [],
        "near_misses": [],
        "first_differing_row": None,
        "missing_rows": [],
        "extra_rows": [],
        "missing_row_count": 0,
        "extra_row_count": 0,
        "gold_preview": _preview(gold_header, gold_rows),
        "prediction_preview": None,
    }
    summary: list[str] = out["summary"]
    if (
        prediction_header is None
        or prediction_rows is None
        or error_code
        in (
            MISSING_PREDICTION,
            INVALID_PREDICTION_CSV,
        )
    ):
        if error_code == MISSING_PREDICTION:
            summary.append("No prediction file was submitted, so nothing was compared.")
        elif error_code == INVALID_PREDICTION_CSV:
            summary.append(f"The prediction could not be read as CSV: {error or 'invalid'}.")
        elif error:
            summary.append(error)
        return out
    out["prediction_preview"] = _preview(prediction_header, prediction_rows)
    if error_code is None:
        summary.append("The prediction equals the gold relation.")
        return out
    ordered = config.order_sensitive
    gw, pw = len(specs), len(prediction_header)
    gold_cols = [[r[j] for r in gold_rows] for j in range(gw)]
    pred_cols = [[r[p] for r in prediction_rows] for p in range(pw)]
    gold_vals = [_canon(spec, col)[0] for spec, col in zip(specs, gold_cols, strict=True)]
    tallies = [Counter(v) for v in gold_vals]
    canon: dict[tuple[int, int], tuple[list[Any], list[tuple[int, str]]]] = {}
    scores: list[list[tuple[int, int, int]]] = []
    for j, spec in enumerate(specs):
        row = []
        for p in range(pw):
            vals, bad = canon[(j, p)] = _canon(spec, pred_cols[p])
            same_name = int(
                prediction_header[p].strip().casefold() == spec.gold_name.strip().casefold()
            )
            readable = len(vals) - sum(v is _INVALID for v in vals)
            row.append((_overlap(tallies[j], vals), same_name, readable))
        scores.append(row)
    partner = _assign(scores, gw)
    used = {p for p in partner if p is not None}
    out["missing_columns"] = [
        {"gold_index": j, "gold_name": specs[j].gold_name} for j in range(gw) if partner[j] is None
    ]
    out["extra_columns"] = [
        {"prediction_index": p, "prediction_name": _clip(prediction_header[p])}
        for p in range(pw)
        if p not in used
    ]
    same_rows = len(gold_rows) == len(prediction_rows)
    for j, spec in enumerate(specs):
        pj = partner[j]
        entry: dict[str, Any] = {
            "gold_index": j,
            "gold_name": spec.gold_name,
            "type": _type_name(spec),
            "prediction_index": pj,
            "prediction_name": None if pj is None else _clip(prediction_header[pj]),
            "status": "no_partner",
            "reason": None,
            "detail": None,
        }
        if pj is None:
            entry["reason"] = "missing"
            entry["detail"] = "no prediction column is left for it"
            out["columns"].append(entry)
            continue
        vals, bad = canon[(j, pj)]
        tally = Counter(v for v in vals if v is not _INVALID)
        invalid = sum(v is _INVALID for v in vals)
        column_equal = (vals == gold_vals[j]) if ordered else (not invalid and tally == tallies[j])
        if column_equal and same_rows:
            entry["status"] = "matched"
        elif invalid:
            entry["reason"] = "type"
            first = bad[0] if bad else (0, "")
            entry["detail"] = (
                f"{invalid} of {len(vals)} cells do not read as {_type_name(spec)}; "
                f"first, data row {first[0] + 1}: {first[1]}"
            )
        else:
            lost = tallies[j] - tally
            gained = tally - tallies[j]
            n_diff = sum(lost.values())
            if ordered and not n_diff and not sum(gained.values()):
                n_diff = sum(a != b for a, b in zip(gold_vals[j], vals, strict=False))
                entry["detail"] = (
                    f"the same values, but {n_diff} of {len(vals)} rows hold them in another order"
                )
            else:
                entry["detail"] = (
                    f"{n_diff} of {len(gold_vals[j])} gold values have no equal in this column"
                    + (
                        f"; e.g. gold {', '.join(_show(v) for v in list(lost)[:MAX_EXAMPLES])}"
                        f" against {', '.join(_show(v) for v in list(gained)[:MAX_EXAMPLES])}"
                        if lost and gained
                        else ""
                    )
                )
            entry["reason"] = "values"
        if entry["status"] != "matched" or not same_rows:
            miss = _near_miss(spec, gold_cols[j], gold_vals[j], pred_cols[pj], ordered)
            if miss is not None and entry["status"] != "matched":
                entry["near_miss"] = miss["kind"]
                out["near_misses"].append(
                    {
                        "kind": miss["kind"],
                        "gold_index": j,
                        "gold_name": spec.gold_name,
                        "prediction_index": pj,
                        "detail": miss["detail"],
                    }
                )
        out["columns"].append(entry)
    _rows(out, config, gold_rows, prediction_rows, gold_vals, partner, canon)
    _summarize(out, config, error_code, gw, pw, len(gold_rows), len(prediction_rows))
    return out


def _rows(
    out: dict[str, Any],
    config: TaskConfig,
    gold_rows: Sequence[Sequence[str]],
    prediction_rows: Sequence[Sequence[str]],
    gold_vals: list[list[Any]],
    partner: list[int | None],
    canon: dict[tuple[int, int], tuple[list[Any], list[tuple[int, str]]]],
) -> None:
    """Row differences under the best partial alignment (the partnered columns only)."""
    cols = [j for j, p in enumerate(partner) if p is not None]
    if not cols:
        return
    names = [config.columns[j].gold_name for j in cols]
    gold_keys: list[tuple[Canonical, ...]] = [
        tuple(gold_vals[j][i] for j in cols) for i in range(len(gold_rows))
    ]
    pred_keys = [
        tuple(canon[(j, partner[j])][0][i] for j in cols)  # type: ignore[index]
        for i in range(len(prediction_rows))
    ]

    def cells(row: Sequence[str], idx: list[int]) -> list[str]:
        return [_clip(row[k]) for k in idx]

    pred_idx = [p for p in partner if p is not None]
    if config.order_sensitive:
        for i, (g, p) in enumerate(zip(gold_keys, pred_keys, strict=False)):
            if g != p:
                out["first_differing_row"] = {
                    "gold_row": i + 1,
                    "prediction_row": i + 1,
                    "columns": names,
                    "gold": cells(gold_rows[i], cols),
                    "prediction": cells(prediction_rows[i], pred_idx),
                    "differs_in": [n for n, a, b in zip(names, g, p, strict=True) if a != b],
                }
                break
    have = Counter(pred_keys)
    want = Counter(gold_keys)
    missing = want - have
    extra = have - want
    out["missing_row_count"] = sum(missing.values())
    out["extra_row_count"] = sum(extra.values())
    left = Counter(missing)
    for i, key in enumerate(gold_keys):
        if left[key] > 0 and len(out["missing_rows"]) < MAX_ROWS_LISTED:
            left[key] -= 1
            out["missing_rows"].append({"gold_row": i + 1, "cells": cells(gold_rows[i], cols)})
    seen: Counter[tuple[Canonical, ...]] = Counter()
    extra_rows: list[int] = []
    for i, key in enumerate(pred_keys):
        seen[key] += 1
        if seen[key] > want[key]:  # the occurrences beyond the gold's count are extra
            extra_rows.append(i)
            if len(out["extra_rows"]) < MAX_ROWS_LISTED:
                out["extra_rows"].append(
                    {"prediction_row": i + 1, "cells": cells(prediction_rows[i], pred_idx)}
                )
    if not config.order_sensitive and out["missing_rows"] and extra_rows:
        first = out["missing_rows"][0]
        g = gold_keys[first["gold_row"] - 1]
        best = max(
            extra_rows,
            key=lambda i: (sum(a == b for a, b in zip(g, pred_keys[i], strict=True)), -i),
            default=None,
        )
        if best is not None:
            out["first_differing_row"] = {
                "gold_row": first["gold_row"],
                "prediction_row": best + 1,
                "columns": names,
                "gold": first["cells"],
                "prediction": cells(prediction_rows[best], pred_idx),
                "differs_in": [
                    n for n, a, b in zip(names, g, pred_keys[best], strict=True) if a != b
                ],
            }


def _summarize(
    out: dict[str, Any], config: TaskConfig, code: str, gw: int, pw: int, gr: int, pr: int
) -> None:
    summary: list[str] = out["summary"]
    if code == COLUMN_COUNT_MISMATCH:
        summary.append(f"The prediction has {pw} columns; the gold has {gw}.")
    if code == ROW_COUNT_MISMATCH:
        summary.append(f"The prediction has {pr} data row(s); the gold has {gr}.")
    for m in out["near_misses"]:
        summary.append(f"Near miss ({m['kind']}) in gold column {m['gold_name']!r}: {m['detail']}.")
    for c in out["columns"]:
        if c["status"] == "matched" or c["reason"] == "missing":
            continue
        if code == ROW_COUNT_MISMATCH and c["reason"] == "values":
            continue  # with fewer or more rows every column differs: the rows say more
        summary.append(
            f"Gold column {c['gold_name']!r} ({c['type']}) found no partner; closest is "
            f"prediction column {c['prediction_name']!r}: {c['detail']}."
        )
    if out["missing_columns"]:
        summary.append(
            "Gold columns without any prediction column: "
            + ", ".join(repr(c["gold_name"]) for c in out["missing_columns"])
            + "."
        )
    if out["extra_columns"]:
        summary.append(
            "Prediction columns not in the gold: "
            + ", ".join(repr(c["prediction_name"]) for c in out["extra_columns"])
            + "."
        )
    if out["missing_row_count"]:
        summary.append(
            f"{out['missing_row_count']} gold row(s) have no equal prediction row"
            + (
                f"; {out['extra_row_count']} prediction row(s) are not in the gold."
                if out["extra_row_count"]
                else "."
            )
        )
    elif out["extra_row_count"]:
        summary.append(f"{out['extra_row_count']} prediction row(s) are not in the gold.")
    diff = out["first_differing_row"]
    if diff:
        where = ", ".join(diff["differs_in"]) or "the pairing of values across columns"
        summary.append(
            f"First differing row: gold row {diff['gold_row']} {diff['gold']} against "
            f"prediction row {diff['prediction_row']} {diff['prediction']} (differs in {where})."
        )
    all_matched = out["columns"] and all(c["status"] == "matched" for c in out["columns"])
    if all_matched and code not in (COLUMN_COUNT_MISMATCH, ROW_COUNT_MISMATCH):
        if not out["missing_row_count"] and config.order_sensitive:
            summary.insert(0, "Every row is there, but in another order (this task is ordered).")
        else:
            summary.insert(
                0,
                "Every column matches the gold on its own, but the values are paired "
                "differently across rows.",
            )
    if not summary:
        summary.append("The prediction does not equal the gold.")


def explain_files(
    *, prediction_path: Any, gold_path: Any, config: TaskConfig, verdict: Any
) -> dict[str, Any]:
    """:func:`explain` for files, given the official verdict on them."""
    from evaluator.csvfile import read_csv
    from evaluator.errors import CsvError

    gold = read_csv(gold_path, role="gold")
    try:
        pred = read_csv(prediction_path, role="prediction")
        header, rows = pred.header, pred.rows
    except CsvError:
        header, rows = None, None
    code = verdict.error_code if hasattr(verdict, "error_code") else verdict.get("error_code")
    err = verdict.error if hasattr(verdict, "error") else verdict.get("error")
    if header is None:
        return explain(config, gold.header, gold.rows, None, None, error_code=code, error=err)
    return explain(config, gold.header, gold.rows, header, rows)


__all__ = ["explain", "explain_files"]
