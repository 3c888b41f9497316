"""Small hand-made releases for tests and examples, in the official layout (and ours)."""

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


OFFICIAL_SCORED = (2, 5, 8, 11)


def write_official_release(
    dest: Path, *, tasks: int = 12, scored: tuple[int, ...] = OFFICIAL_SCORED
) -> Path:
    """Write a release in exactly the official layout, most of its tasks unscored.

    Like the official release (410 inputs, gold and configs for 60), every task has
    ``input/task_N/{task.json, context/}`` and only the tasks numbered in ``scored`` have
    ``output/task_N/gold.csv`` and ``evaluation/configs/task_N.json``. There is no
    ``release.json``, ``metadata/`` or ``ledger/``. Questions alternate between English and
    Chinese; workspaces hold a CSV, a JSON file and a Markdown note.

    Args:
        dest: the release folder to create (must not exist).
        tasks: how many tasks (``task_1`` ... ``task_<tasks>``).
        scored: the numbers of the tasks that get gold and a config.
    """
    if dest.exists():
        raise FileExistsError(dest)
    products: list[tuple[str, str, int]] = [
        ("tea", "drinks", 34),
        ("coffee", "drinks", 51),
        ("rice", "food", 12),
        ("noodles", "food", 27),
        ("茶叶", "drinks", 8),
    ]
    for k in range(1, tasks + 1):
        task_id = f"task_{k}"
        floor = 5 + 3 * k
        zh = k % 2 == 0
        question = (
            f"哪些产品的销量超过 {floor}？请给出产品名称和销量。"
            if zh
            else f"Which products sold more than {floor} units? Give the product and units."
        )
        ctx = dest / "input" / task_id / "context"
        (ctx / "notes").mkdir(parents=True)
        (dest / "input" / task_id / "task.json").write_text(
            json.dumps({"task_id": task_id, "question": question}, ensure_ascii=False, indent=2),
            encoding="utf-8",
        )
        (ctx / "sales.csv").write_bytes(
            _csv([["product", "category", "units"], *map(list, products)])
        )
        (ctx / "categories.json").write_text(
            json.dumps({"drinks": "饮料", "food": "食品"}, ensure_ascii=False), encoding="utf-8"
        )
        (ctx / "notes" / "README.md").write_text(
            "# Sales\n\nUnits sold last week, one row per product.\n", encoding="utf-8"
        )
        if k not in scored:
            continue
        answer: list[list[object]] = [[p, u] for p, _, u in products if u > floor]
        (dest / "output" / task_id).mkdir(parents=True)
        (dest / "output" / task_id / "gold.csv").write_bytes(_csv([["product", "units"], *answer]))
        config = {
            "schema_version": "1.0",
            "task_id": task_id,
            "order_sensitive": False,
            "columns": [
                {"gold_index": 0, "gold_name": "product", "type": "text"},
                {
                    "gold_index": 1,
                    "gold_name": "units",
                    "type": "number",
                    "comparison": {"mode": "integer"},
                },
            ],
        }
        cfg = dest / "evaluation" / "configs" / f"{task_id}.json"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return dest


__all__ = ["OFFICIAL_SCORED", "write_official_release", "write_tiny_release"]
