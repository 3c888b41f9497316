"""``dataspace review``: load candidates, manage users, assign, serve, report, export.

::

    dataspace review init RELEASE --db URL
    dataspace review user NAME --role reviewer|repairer|admin --db URL   (password on stdin)
    dataspace review assign --db URL [--per-task 2] [--reviewers a,b,c]
    dataspace review serve --db URL [--host 127.0.0.1] [--port 8765]
    dataspace review status --db URL
    dataspace review stats --db URL [--json]
    dataspace review log --db URL --out events.jsonl
    dataspace review replay events.jsonl
    dataspace review export --db URL --out DIR [--replace]

``--db`` defaults to ``$DATASPACE_REVIEW_DB``; a URL is ``sqlite:///file`` (or a path) or
``postgresql://user@host:port/db``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from dataspace.cli.args import PORT, POSITIVE_INT
from dataspace.errors import ConfigError


def _db(args: argparse.Namespace) -> Any:
    from builder.review.db import Database

    url = args.db or os.environ.get("DATASPACE_REVIEW_DB")
    if not url:
        raise ConfigError("--db: give the review database URL (or set DATASPACE_REVIEW_DB)")
    return Database(url)


def _service(args: argparse.Namespace) -> Any:
    from builder.review.service import ReviewService

    cache = Path(args.cache) if getattr(args, "cache", None) else Path(tempfile.gettempdir())
    return ReviewService(_db(args), cache / "dataspace-review-cache")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataspace review", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def cmd(name: str, text: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=text)
        c.add_argument("--db", help="review database URL (default $DATASPACE_REVIEW_DB)")
        return c

    c = cmd("init", "load a built release's tasks as review candidates")
    c.add_argument("release")
    c = cmd("user", "add a user (or reset a password); the password is read from stdin")
    c.add_argument("name")
    c.add_argument("--role", required=True, choices=["reviewer", "repairer", "admin"])
    c = cmd("assign", "assign reviewers to every pending task, balanced across the pool")
    c.add_argument("--per-task", type=POSITIVE_INT, default=2)
    c.add_argument("--reviewers", help="comma-separated pool (default: every reviewer)")
    c = cmd("serve", "serve the review console and API")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=PORT, default=8765)
    c.add_argument("--cache", help="folder for materialized overlay files (default: temp)")
    cmd("status", "where every task stands (and whether the log replays to it)")
    c = cmd("stats", "agreement, issue, repair and acceptance statistics from the log")
    c.add_argument("--json", action="store_true")
    c = cmd("log", "write the event log as JSON lines")
    c.add_argument("--out", required=True)
    c = sub.add_parser("replay", help="fold an exported event log and print each task's state")
    c.add_argument("log")
    c = cmd("export", "write the accepted tasks as a release with the review record")
    c.add_argument("--out", required=True)
    c.add_argument("--replace", action="store_true")
    return p


def main(argv: list[str]) -> int:
    """Run one ``dataspace review`` subcommand."""
    args = _parser().parse_args(argv)
    return int(_COMMANDS[args.command](args))


def _init(args: argparse.Namespace) -> int:
    from builder.review.load import load_release

    db = _db(args)
    rep = load_release(db, args.release)
    print(
        f"{db.display_url}: loaded {len(rep.loaded)} tasks"
        + (f", {len(rep.already)} already loaded" if rep.already else "")
    )
    for tid, why in rep.skipped.items():
        print(f"  skipped {tid}: {why}")
    users = db.query("SELECT COUNT(*) FROM review_users")[0][0]
    if not users:
        print("next: add users with `dataspace review user NAME --role reviewer --db ...`")
    return 0


def _user(args: argparse.Namespace) -> int:
    svc = _service(args)
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.name}: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    svc.add_user(args.name, args.role, password)
    print(f"user {args.name} ({args.role}) saved")
    return 0


def _assign(args: argparse.Namespace) -> int:
    svc = _service(args)
    pool = [r.strip() for r in args.reviewers.split(",")] if args.reviewers else None
    added = svc.assign_balanced(per_task=args.per_task, reviewers=pool)
    for tid, names in added.items():
        print(f"{tid}: {', '.join(names)}")
    load: dict[str, int] = {}
    for row in svc.status():
        for name in row["reviewers"]:
            load[name] = load.get(name, 0) + 1
    print(
        f"assigned {sum(map(len, added.values()))} reviews over {len(added)} tasks; load "
        + ", ".join(f"{k}={v}" for k, v in sorted(load.items()))
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from builder.review.app import ReviewServer

    svc = _service(args)
    server = ReviewServer(svc, args.host, args.port)
    print(f"review console on {server.url}/ (database {svc.db.display_url}); Ctrl-C stops")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


def _status(args: argparse.Namespace) -> int:
    svc = _service(args)
    rows = svc.status()
    stored = {
        str(t): (str(s), int(v))
        for t, s, v in svc.db.query("SELECT task_id, state, version FROM review_tasks")
    }
    bad = []
    print(f"{'task':<10} {'state':<13} {'ver':>3}  reviewers (locked)")
    for r in rows:
        locked = ", ".join(f"{n}{'*' if n in r['locked'] else ''}" for n in r["reviewers"])
        print(f"{r['task_id']:<10} {r['state']:<13} {r['version']:>3}  {locked or '-'}")
        if stored.get(r["task_id"]) != (r["state"], r["version"]):
            bad.append(r["task_id"])
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    print("total: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if bad:
        print(
            f"error: the stored state of {bad} differs from the event log's replay", file=sys.stderr
        )
        return 1
    print("event log replays to the stored state: yes")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from builder.review.stats import review_stats

    svc = _service(args)
    st = review_stats(svc.events())
    if args.json:
        print(json.dumps(st, indent=2, ensure_ascii=False))
        return 0
    a, r, c = st["agreement"], st["repairs"], st["acceptance"]

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    print(f"tasks: {st['tasks']} ({', '.join(f'{k} {v}' for k, v in st['states'].items())})")
    print(
        f"agreement over {a['judged_tasks']} independently judged tasks: verdict "
        f"{pct(a['verdict_agreement'])}, disposition {pct(a['disposition_agreement'])}, "
        f"config {pct(a['config_agreement'])}, first-pass consensus "
        f"{pct(a['first_pass_consensus'])}"
    )
    print(
        f"issues: {sum(st['issues']['flags'].values())} flags "
        + ", ".join(f"{k} {v}" for k, v in st["issues"]["categories"].items())
    )
    print(
        f"repairs: {r['repairs']} on {r['repaired_tasks']} tasks, by scope "
        + (", ".join(f"{k} {v}" for k, v in r["by_scope"].items()) or "-")
    )
    print(
        f"acceptance: {c['accepted']} accepted ({c['accepted_first_pass']} first pass, "
        f"{c['accepted_after_repair']} after repair; post-repair acceptance "
        f"{pct(c['post_repair_acceptance'])}), {c['removed']} removed"
    )
    return 0


def _log(args: argparse.Namespace) -> int:
    svc = _service(args)
    events = svc.events()
    with open(args.out, "w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(json.dumps(ev.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {len(events)} events to {args.out}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from builder.review.protocol import Event, replay

    events = []
    with open(args.log, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                events.append(Event(**obj))
            except (json.JSONDecodeError, TypeError) as exc:
                raise ConfigError(f"{args.log}:{n}: not an event line ({exc})") from exc
    folds = replay(events)
    for tid in sorted(folds, key=lambda t: int(t.split("_")[1])):
        f = folds[tid]
        print(f"{tid:<10} {f.state!s:<13} version {f.version}")
    print(f"replayed {len(events)} events: every step follows the protocol")
    return 0


def _export(args: argparse.Namespace) -> int:
    from builder.review.export import export_release

    svc = _service(args)
    rep = export_release(svc, Path(args.out), replace=args.replace)
    print(f"exported {len(rep.tasks)} accepted tasks to {rep.out}")
    for tid, v in rep.tasks.items():
        print(f"  {tid}: version {v}")
    if rep.left_out:
        print("not exported: " + ", ".join(f"{t} ({s})" for t, s in rep.left_out.items()))
    return 0


_COMMANDS = {
    "init": _init,
    "user": _user,
    "assign": _assign,
    "serve": _serve,
    "status": _status,
    "stats": _stats,
    "log": _log,
    "replay": _replay,
    "export": _export,
}

__all__ = ["main"]
