"""Review server figures: request latency of the protocol steps and replay speed.

Usage: python scripts/bench_review.py [--tasks 30] [--runs 3] [--db URL]
(default: a temporary SQLite file). Prints medians over the runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "review"))

from review_client import Client, config_body, phase1_body, phase2_body

from builder.review import Database, ReviewServer, ReviewService, load_release, replay
from dataspace.testing.releases import write_tiny_release

PASSWORD = "bench-password-1"


def one(tasks: int, url: str | None) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-review-"))
    rel = write_tiny_release(tmp / "rel", tasks=tasks)
    db = Database(url or f"sqlite:///{tmp / 'review.db'}")
    load_release(db, rel)
    svc = ReviewService(db, tmp / "cache")
    for name in ("ana", "ben"):
        svc.add_user(name, "reviewer", PASSWORD)
    svc.assign_balanced(per_task=2)
    server = ReviewServer(svc).start()
    lat: list[float] = []
    try:
        for name in ("ana", "ben"):
            c = Client(server.url)
            c.login(name, PASSWORD)
            for k in range(1, tasks + 1):
                t0 = time.perf_counter()
                c.ok("POST", f"/api/tasks/task_{k}/phase1", phase1_body([["Lyon", 522000]]))
                c.ok("GET", f"/api/tasks/task_{k}/gold")
                c.ok("POST", f"/api/tasks/task_{k}/phase2", phase2_body(config_body()))
                lat.append((time.perf_counter() - t0) / 3)
        t0 = time.perf_counter()
        events = svc.events()
        replay(events)
        replay_s = time.perf_counter() - t0
    finally:
        server.stop()
        db.close()
    return {
        "request_ms_median": 1000 * statistics.median(lat),
        "request_ms_p90": 1000 * sorted(lat)[int(0.9 * (len(lat) - 1))],
        "events": float(len(events)),
        "replay_events_per_s": len(events) / replay_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--db", help="a PostgreSQL URL (default: temporary SQLite)")
    args = ap.parse_args()
    results = [one(args.tasks, args.db) for _ in range(args.runs)]
    for key in results[0]:
        print(f"{key}: {statistics.median(r[key] for r in results):.1f}")


if __name__ == "__main__":
    main()
