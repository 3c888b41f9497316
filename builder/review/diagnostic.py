"""The diagnostic table difference shown in phase 2 (not the benchmark's scoring).

It runs the evaluator on the reviewer's locked answer against the gold, and lists the
rows that differ after canonicalizing each cell under the gold column's rule, so a
reviewer sees *where* the two tables part, not only that they do.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

MAX_DIFF_ROWS = 50


def _canon(text: str, column: Any) -> str:
    import evaluator

    try:
        value = evaluator.canonicalize(text, column)
    except evaluator.CellError:
        return f"⟂{text.strip()}"
    return "∅" if value is evaluator.NULL else str(value)


def diagnose(
    *,
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """Compare a candidate table with the gold under a config.

    Returns:
        ``{"verdict": <evaluator verdict dict>, "mapping": [...], "missing_rows": [...],
        "extra_rows": [...], "gold_shape": [r, c], "candidate_shape": [r, c]}``; the row
        lists hold canonical cells in gold column order (``⟂`` marks a cell that does not
        fit the gold column's rule, ``∅`` a NULL).
    """
    import evaluator

    cfg = evaluator.parse_config(dict(config), source="config")
    verdict = evaluator.evaluate_rows(
        gold_header=gold_header,
        gold_rows=gold_rows,
        prediction_header=header,
        prediction_rows=rows,
        config=cfg,
    )
    out: dict[str, Any] = {
        "verdict": verdict.to_dict(),
        "gold_shape": [len(gold_rows), len(gold_header)],
        "candidate_shape": [len(rows), len(header)],
        "missing_rows": [],
        "extra_rows": [],
        "mapping": None,
    }
    if len(header) != len(gold_header):
        return out
    if verdict.column_mapping is not None:
        mapping = [pair.prediction_index for pair in verdict.column_mapping]
    else:
        mapping = _mapping_by_header(gold_header, header)
    out["mapping"] = mapping
    cols = cfg.columns
    gold_c = [tuple(_canon(r[j], cols[j]) for j in range(len(cols))) for r in gold_rows]
    cand_c = [tuple(_canon(r[mapping[j]], cols[j]) for j in range(len(cols))) for r in rows]
    if cfg.order_sensitive:
        missing, extra = [], []
        for i in range(max(len(gold_c), len(cand_c))):
            g = gold_c[i] if i < len(gold_c) else None
            c = cand_c[i] if i < len(cand_c) else None
            if g != c:
                if g is not None:
                    missing.append({"row": i + 1, "cells": list(g)})
                if c is not None:
                    extra.append({"row": i + 1, "cells": list(c)})
    else:
        gc, cc = Counter(gold_c), Counter(cand_c)
        missing = [{"cells": list(r), "count": n} for r, n in (gc - cc).items()]
        extra = [{"cells": list(r), "count": n} for r, n in (cc - gc).items()]
    out["missing_rows"] = missing[:MAX_DIFF_ROWS]
    out["extra_rows"] = extra[:MAX_DIFF_ROWS]
    return out


def _mapping_by_header(gold_header: Sequence[str], header: Sequence[str]) -> list[int]:
    """Gold column j -> candidate column with the same (case-folded) name, else position."""
    names = [h.strip().casefold() for h in header]
    used: set[int] = set()
    mapping: list[int] = []
    for j, name in enumerate(gold_header):
        key = name.strip().casefold()
        p = next((i for i, n in enumerate(names) if n == key and i not in used), None)
        if p is None:
            p = next(i for i in [j, *range(len(header))] if i not in used)
        used.add(p)
        mapping.append(p)
    return mapping


__all__ = ["diagnose"]
