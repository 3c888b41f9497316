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
import sys

from dataspace.cli.args import PORT, POSITIVE_INT


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
    from builder.review.admin import init_review

    out = init_review(args.db, args.release)
    rep = out.report
    print(
        f"{out.database}: loaded {len(rep.loaded)} tasks"
        + (f", {len(rep.already)} already loaded" if rep.already else "")
    )
    for tid, why in rep.skipped.items():
        print(f"  skipped {tid}: {why}")
    if not out.users:
        print("next: add users with `dataspace review user NAME --role reviewer --db ...`")
    return 0


def _user(args: argparse.Namespace) -> int:
    from builder.review.admin import add_user

    def password() -> str:
        if sys.stdin.isatty():
            return getpass.getpass(f"password for {args.name}: ")
        return sys.stdin.readline().rstrip("\n")

    add_user(args.db, args.name, args.role, password)
    print(f"user {args.name} ({args.role}) saved")
    return 0


def _assign(args: argparse.Namespace) -> int:
    from builder.review.admin import assign_reviewers

    pool = [r.strip() for r in args.reviewers.split(",")] if args.reviewers else None
    out = assign_reviewers(args.db, per_task=args.per_task, reviewers=pool)
    for tid, names in out.added.items():
        print(f"{tid}: {', '.join(names)}")
    print(
        f"assigned {sum(map(len, out.added.values()))} reviews over {len(out.added)} tasks; "
        "load " + ", ".join(f"{k}={v}" for k, v in out.load.items())
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from builder.review.admin import review_server

    server = review_server(args.db, host=args.host, port=args.port, cache=args.cache)
    print(
        f"review console on {server.url}/ (database {server.service.db.display_url}); Ctrl-C stops"
    )
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


def _status(args: argparse.Namespace) -> int:
    from builder.review.admin import review_status

    out = review_status(args.db)
    print(f"{'task':<10} {'state':<13} {'ver':>3}  reviewers (locked)")
    for r in out.rows:
        locked = ", ".join(f"{n}{'*' if n in r['locked'] else ''}" for n in r["reviewers"])
        print(f"{r['task_id']:<10} {r['state']:<13} {r['version']:>3}  {locked or '-'}")
    print("total: " + ", ".join(f"{k} {v}" for k, v in out.counts.items()))
    if out.differing:
        print(
            f"error: the stored state of {out.differing} differs from the event log's replay",
            file=sys.stderr,
        )
        return 1
    print("event log replays to the stored state: yes")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from builder.review.admin import statistics

    st = statistics(args.db)
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
    from builder.review.admin import write_event_log

    n = write_event_log(args.db, args.out)
    print(f"wrote {n} events to {args.out}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from builder.review.admin import replay_event_log

    out = replay_event_log(args.log)
    for f in out.folds:
        print(f"{f.task_id:<10} {f.state!s:<13} version {f.version}")
    print(f"replayed {out.events} events: every step follows the protocol")
    return 0


def _export(args: argparse.Namespace) -> int:
    from builder.review.admin import export_accepted

    rep = export_accepted(args.db, args.out, replace=args.replace)
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
