"""Small hand-made releases for tests and examples (official layout plus our additions)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from dataspace.release import ReleaseWriter, TaskArtifacts


def _csv(rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def write_tiny_release(dest: Path, *, tasks: int = 3) -> Path:
    """Write a release of ``tasks`` small tasks with CSV/JSON workspaces and gold answers.

    Task k asks for the cities whose population is above a threshold; the gold has one
    text and one integer column, order-insensitive, except task 2 which orders the rows.
    """
    header: list[object] = ["city", "country", "population"]
    cities: list[tuple[str, str, int]] = [
        ("Lyon", "FR", 522000),
        ("Graz", "AT", 291000),
        ("Porto", "PT", 232000),
        ("Turku", "FI", 195000),
        ("杭州", "CN", 11940000),
    ]
    with ReleaseWriter(dest, manifest={"name": "tiny"}) as w:
        for k in range(1, tasks + 1):
            threshold = 200000 + 10000 * k
            ans: list[list[object]] = [[c, p] for c, _, p in cities if p > threshold]
            ordered = k == 2
            if ordered:
                ans.sort(key=lambda r: -int(str(r[1])))
            cfg = {
                "schema_version": "1.0",
                "task_id": f"task_{k}",
                "order_sensitive": ordered,
                "columns": [
                    {"gold_index": 0, "gold_name": "city", "type": "text"},
                    {
                        "gold_index": 1,
                        "gold_name": "population",
                        "type": "number",
                        "comparison": {"mode": "integer"},
                    },
                ],
            }
            gold = _csv([["city", "population"], *ans])
            w.add_task(
                TaskArtifacts(
                    task_id=f"task_{k}",
                    question=f"Which cities have a population above {threshold}?"
                    + (" Order by population, largest first." if ordered else ""),
                    context={
                        "cities.csv": _csv([header, *map(list, cities)]),
                        "notes/countries.json": json.dumps(
                            [{"code": "FR", "name": "France"}]
                        ).encode(),
                    },
                    gold_csv=gold,
                    config=cfg,
                    metadata={
                        "domain": "geo",
                        "languages": {"question": "en", "workspace": "en"},
                        "modalities_present": ["csv", "json"],
                        "modalities_required": ["csv"],
                        "answer_rows": len(ans),
                        "answer_columns": 2,
                        "order_sensitive": ordered,
                    },
                )
            )
    return dest


__all__ = ["write_tiny_release"]
