"""Review figures: what a reviewer does per task in the console, and the API's latency.

Usage:
    python scripts/bench_review.py [--tasks-from-fixture] [--shots DIR]   # the console
    python scripts/bench_review.py --api [--tasks 30] [--runs 3] [--db URL]

The console figure plays the reviewers' part of the walk-through in headless Chromium
(the fixture release of tests/review: CSV, JSON, SQLite, Markdown, PDF, video): two
reviewers each solve and verify three tasks (a correct answer, one evidence anchor on
the second data row, the grain, then Match / Pass with population compared as an
integer), and it counts, per task, the clicks, fields and keys a reviewer needs, the
script's wall seconds, and a keystroke-level estimate of a person's seconds. It drives
whichever console the server serves: the current one, or the console before issue 28
(run this script with that checkout's code on the path to get the "before" figure).
The API figure (--api) is the request latency of the protocol steps and replay speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "review"))
sys.path.insert(0, str(ROOT / "tests" / "report"))

PASSWORD = "bench-password-1"
THRESHOLDS = {"task_1": 210000, "task_2": 220000, "task_3": 230000}
_LOGOUT = (
    "fetch('/api/logout', {method: 'POST', headers: {'Content-Type': 'application/json'},"
    " body: '{}'}).then(r => r.status)"
)


# ---- the console ---------------------------------------------------------------------------


def _legacy_task(me: Any, task: str, rows: list[list[object]]) -> None:
    """The console before issue 28: sidebar, typed anchors, raw config choices."""
    me.click(f"#task-list [data-task={task}]")
    me.wait(f"document.body.dataset.task === '{task}' && T.visible('#phase1')")
    me.click('#file-list [data-path="cities.csv"]')
    me.wait("document.querySelector('#viewer').dataset.loaded === 'cities.csv'")
    me.fill("#row-anchor", "2")
    me.click("#viewer .anchor-btn")
    me.fill("#evidence-rows tr.evidence:last-child .ev-fact", "Graz, AT, 291000")
    me.fill("#p1-result", "city,population\n" + "".join(f"{c},{p}\n" for c, p in rows))
    me.fill("#sem-grain", "one row per city")
    me.eval("document.body.dataset.task = ''")
    me.click("#p1-submit")
    me.wait(f"document.body.dataset.task === '{task}' && T.visible('#phase2')")
    me.fill("#cfg-rows tr.cfg:nth-child(2) .cfg-type", "number")
    me.eval("document.body.dataset.task = ''")
    me.click("#p2-submit")
    me.wait(f"document.body.dataset.task === '{task}' && !T.visible('#phase2')")


def _current_task(me: Any, task: str, rows: list[list[object]], first: bool) -> None:
    """The current console: next task, click-to-anchor, suggestions, confirmations."""
    if first:
        me.click("#next-task")
        me.wait(f"document.body.dataset.task === '{task}'")
    else:
        me.next_task(task)
    me.wait("document.querySelector('#viewer').dataset.loaded === 'cities.csv'")
    me.click("#viewer tbody tr[data-row='2']")
    me.fill("#p1-result", "city,population\n" + "".join(f"{c},{p}\n" for c, p in rows))
    me.fill("#sem-grain", "one row per city")
    me.act("#p1-submit", "#p1-error")
    me.act("#p2-submit", "#p2-error")


def console_figures(shots: Path | None) -> dict[str, Any]:
    import report_browser
    from conftest import build_release, gold_rows
    from console_driver import Person, Tally

    from builder.review import Database, ReviewServer, ReviewService, load_release

    exe = report_browser.find_chromium()
    if exe is None:
        raise SystemExit("chromium is not installed (scripts/system-packages.txt lists it)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-review-console-"))
    rel = build_release(tmp / "release")
    db = Database(f"sqlite:///{tmp / 'review.db'}")
    load_release(db, rel)
    svc = ReviewService(db, tmp / "cache")
    for name in ("ana", "ben"):
        svc.add_user(name, "reviewer", PASSWORD)
    svc.assign_balanced(per_task=2, reviewers=["ana", "ben"])
    server = ReviewServer(svc).start()
    browser = report_browser.Browser(exe, allow_hosts=("127.0.0.1",))
    per_task: list[Tally] = []
    kind = "?"
    try:
        me = Person(browser.new_page(), server.url, PASSWORD, shots or tmp)
        for name in ("ana", "ben"):
            me.goto(server.url + "/")
            me.wait("T.visible('#login-form')")
            me.fill("#login-name", name)
            me.fill("#login-password", PASSWORD)
            me.click("#login-submit")
            me.wait("document.body.dataset.ready === '1'")
            kind = "current" if me.eval("!!document.getElementById('inbox')") else "legacy"
            for i, task in enumerate(THRESHOLDS):
                me.tally = Tally()
                rows = gold_rows(THRESHOLDS[task])
                if kind == "current":
                    _current_task(me, task, rows, first=i == 0)
                else:
                    _legacy_task(me, task, rows)
                me.finish()
                per_task.append(me.tally)
            if shots is not None and name == "ana":
                me.page.screenshot(str(shots / f"bench-{kind}.png"))
            me.page.b.send(
                "Runtime.evaluate",
                {"expression": _LOGOUT, "awaitPromise": True, "returnByValue": True},
                session=me.page.session,
            )
    finally:
        browser.close()
        server.stop()
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    return {
        "console": kind,
        "reviewer_tasks": len(per_task),
        "actions_per_task": med(t.actions for t in per_task),
        "clicks_per_task": med(t.clicks for t in per_task),
        "fields_per_task": med(t.fields for t in per_task),
        "keys_per_task": med(t.keys for t in per_task),
        "person_seconds_per_task_klm": med(t.klm_seconds for t in per_task),
        "script_seconds_per_task": med(t.seconds for t in per_task),
    }


# ---- the API ---------------------------------------------------------------------------------


def api_figures(tasks: int, url: str | None) -> dict[str, float]:
    from review_client import Client, config_body, phase1_body, phase2_body

    from builder.review import Database, ReviewServer, ReviewService, load_release, replay
    from dataspace.testing.releases import write_tiny_release

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
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "request_ms_median": 1000 * statistics.median(lat),
        "request_ms_p90": 1000 * sorted(lat)[int(0.9 * (len(lat) - 1))],
        "events": float(len(events)),
        "replay_events_per_s": len(events) / replay_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--api", action="store_true", help="the API latency figures instead")
    ap.add_argument("--tasks", type=int, default=30, help="tasks for --api")
    ap.add_argument("--runs", type=int, default=3, help="runs for --api (medians printed)")
    ap.add_argument("--db", help="a PostgreSQL URL for --api (default: temporary SQLite)")
    ap.add_argument("--shots", type=Path, help="a folder for a screenshot of each console")
    args = ap.parse_args()
    if args.api:
        results = [api_figures(args.tasks, args.db) for _ in range(args.runs)]
        for key in results[0]:
            print(f"{key}: {statistics.median(r[key] for r in results):.1f}")
        return
    if args.shots:
        args.shots.mkdir(parents=True, exist_ok=True)
    figures = console_figures(args.shots)
    for key, value in figures.items():
        print(f"{key}: {value:.1f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
