"""Benchmark stage 3: seconds per PDF page and per video second on this machine.

Documents: a synthetic clinical ledger sized to about ``--pages`` PDF pages, written by the
offline template writer, validated, assembled, converted to PDF and read back (the full
document branch). Video: a predicate-abstraction video of a bundled clinical task stretched
to about ``--video-seconds`` seconds, with narration when espeak-ng is installed, encoded
and checked (frames decoded and every constant read back).

    .venv/bin/python scripts/bench_stage3.py [--pages 22] [--video-seconds 100]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time

from builder.documents.assembly import DocumentOptions, render_document
from builder.tables import TableData, TableSchema


def synthetic_table(rows: int, seed: int = 0) -> TableData:
    """A LABEVENTS-like table: ids, a timestamp, an item code, a decimal, a unit, a flag."""
    rng = random.Random(seed)
    units = ["mg/dl", "meq/l", "iu/l", "g/dl", "%"]
    flags = ["normal", "abnormal", "delta", None]
    data = []
    for i in range(rows):
        data.append(
            (
                100000 + i,
                rng.randint(10000, 40000),
                rng.randint(100000, 199999),
                f"2105-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
                str(rng.randint(50800, 51300)),
                round(rng.uniform(0.1, 400), 2),
                rng.choice(units),
                rng.choice(flags),
            )
        )
    schema = TableSchema(
        name="LABEVENTS",
        columns=(
            "ROW_ID",
            "SUBJECT_ID",
            "HADM_ID",
            "CHARTTIME",
            "ITEMID",
            "VALUENUM",
            "VALUEUOM",
            "FLAG",
        ),
        declared_types=(
            "INT",
            "INT",
            "INT",
            "TIMESTAMP",
            "TEXT",
            "DOUBLE",
            "VARCHAR(20)",
            "VARCHAR(20)",
        ),
        ddl="CREATE TABLE LABEVENTS (ROW_ID INT PRIMARY KEY, SUBJECT_ID INT, HADM_ID INT, "
        "CHARTTIME TIMESTAMP, ITEMID TEXT, VALUENUM DOUBLE, VALUEUOM VARCHAR(20), "
        "FLAG VARCHAR(20))",
    )
    return TableData(schema=schema, rows=data)


def bench_pdf(pages: int) -> None:
    import pymupdf  # noqa: F401  (import cost is not part of a document's time)

    rows = max(10, pages * 5)
    for _ in range(6):
        table = synthetic_table(rows)
        t0 = time.perf_counter()
        doc = render_document(
            table,
            options=DocumentOptions(language="en", seed=1, max_cells=10**6),
            formats=("markdown", "pdf"),
        )
        total = time.perf_counter() - t0
        if doc.pages >= pages:
            break
        rows = int(rows * pages / max(doc.pages, 1)) + 5
    pdf = doc.seconds.get("pdf", 0.0)
    print(
        f"document: {len(table.rows)} rows x {len(table.schema.columns)} columns -> "
        f"{doc.pages} PDF pages, {doc.characters} Markdown characters, "
        f"{sum(b.attempts for b in doc.blocks)} writer calls"
    )
    print(
        f"  total {total:.2f} s  (write+validate {doc.seconds['write']:.2f} s, markdown "
        f"coverage {doc.seconds['markdown']:.2f} s, pdf layout+extraction+coverage "
        f"{pdf:.2f} s)"
    )
    print(
        f"  {total / doc.pages:.4f} s per PDF page (whole branch), "
        f"{pdf / doc.pages:.4f} s per page (PDF step)"
    )


def bench_video(seconds: float, width: int, height: int, fps: int) -> None:
    from builder.gold import execute_gold
    from builder.render.video import VideoOptions, build_video
    from builder.sources.base import load_source
    from builder.video.narration import espeak_path

    with tempfile.TemporaryDirectory() as tmp:
        items = load_source("bundled", "clinical", cache_dir=tmp)
        item = next(i for i in items if i.id == "0a1388be5658f90d64861c22")
        conn = sqlite3.connect(item.db_path)
        gold = execute_gold(conn, item.sql)
        opts = VideoOptions(
            width=width,
            height=height,
            fps=fps,
            target_seconds=seconds,
            narration=espeak_path() is not None,
        )
        t0 = time.perf_counter()
        video = build_video(
            item.sql,
            gold,
            conn,
            item.question,
            strategy="predicate_abstraction",
            seed=1,
            options=opts,
        )
        total = time.perf_counter() - t0
        conn.close()
    steps = ", ".join(f"{k} {v:.2f} s" for k, v in video.seconds.items())
    print(
        f"video: {width}x{height} @ {fps} fps, {video.duration:.1f} s, "
        f"{len(video.storyboard.scenes)} scenes, {len(video.video) / 1e6:.2f} MB, "
        f"narration {video.narration_engine}"
    )
    print(f"  total {total:.2f} s  ({steps})")
    print(f"  {total / video.duration:.4f} s per video second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=22)
    parser.add_argument("--video-seconds", type=float, default=100.0)
    args = parser.parse_args()
    bench_pdf(args.pages)
    bench_video(args.video_seconds, 640, 360, 8)
    bench_video(args.video_seconds, 1280, 720, 10)


if __name__ == "__main__":
    main()
