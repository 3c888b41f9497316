"""The administrator's operations on a review database, one function each.

``dataspace review`` calls exactly one of these per subcommand and prints the record it
returns. The database is named by URL, or by ``$DATASPACE_REVIEW_DB`` when none is given
(:func:`open_database`); the service's overlay cache is a folder under ``cache`` (by
default the system's temporary folder).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.review.db import Database
from builder.review.export import ExportReport
from builder.review.load import LoadReport
from builder.review.protocol import Event, TaskFold
from builder.review.service import ReviewService
from dataspace.errors import ConfigError

if TYPE_CHECKING:
    from builder.review.app import ReviewServer

logger = logging.getLogger(__name__)

DB_ENV = "DATASPACE_REVIEW_DB"
"""The environment variable naming the review database when no URL is given."""


@dataclass(frozen=True, kw_only=True)
class InitOutcome:
    """What ``init`` did: the load report, the database and whether it has users yet."""

    database: str
    report: LoadReport
    users: int


@dataclass(frozen=True, kw_only=True)
class AssignOutcome:
    """What ``assign`` did.

    Attributes:
        added: task id -> the reviewers added to it now.
        load: reviewer -> how many tasks they review in all (after this assignment).
    """

    added: dict[str, list[str]]
    load: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class StatusOutcome:
    """Where every task stands, and whether the stored state is the event log's replay.

    Attributes:
        rows: one mapping per task (``ReviewService.status``).
        counts: state -> how many tasks are in it.
        differing: task ids whose stored state or version is not the replay's.
    """

    rows: list[dict[str, Any]]
    counts: dict[str, int]
    differing: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class ReplayOutcome:
    """An exported event log folded: how many events, and each task's fold in task order."""

    events: int
    folds: list[TaskFold]


def open_database(url: str | None) -> Database:
    """The review database at ``url``, else at ``$DATASPACE_REVIEW_DB``.

    Raises:
        ConfigError: neither is given.
    """
    url = url or os.environ.get(DB_ENV)
    if not url:
        raise ConfigError(f"--db: give the review database URL (or set {DB_ENV})")
    return Database(url)


def open_service(url: str | None, cache: str | Path | None = None) -> ReviewService:
    """The review service over :func:`open_database` with its overlay cache under ``cache``."""
    root = Path(cache) if cache else Path(tempfile.gettempdir())
    return ReviewService(open_database(url), root / "dataspace-review-cache")


def init_review(url: str | None, release: str | Path) -> InitOutcome:
    """Load a built release's tasks as review candidates (``load_release``)."""
    from builder.review.load import load_release

    db = open_database(url)
    report = load_release(db, release)
    users = int(db.query("SELECT COUNT(*) FROM review_users")[0][0])
    return InitOutcome(database=db.display_url, report=report, users=users)


def add_user(url: str | None, name: str, role: str, password: Callable[[], str]) -> None:
    """Add a user (or reset their password).

    ``password`` is asked for once the database is open, so a missing one is said first.
    """
    svc = open_service(url)
    svc.add_user(name, role, password())


def review_server(
    url: str | None, *, host: str, port: int, cache: str | Path | None = None
) -> ReviewServer:
    """The review console and API over the database (not yet serving)."""
    from builder.review.app import ReviewServer

    return ReviewServer(open_service(url, cache), host, port)


def assign_reviewers(
    url: str | None, *, per_task: int, reviewers: Sequence[str] | None = None
) -> AssignOutcome:
    """Assign reviewers to every pending task, balanced across the pool."""
    svc = open_service(url)
    added = svc.assign_balanced(per_task=per_task, reviewers=reviewers)
    load: dict[str, int] = {}
    for row in svc.status():
        for name in row["reviewers"]:
            load[name] = load.get(name, 0) + 1
    return AssignOutcome(added=added, load=dict(sorted(load.items())))


def review_status(url: str | None) -> StatusOutcome:
    """Every task's state, checked against the state stored beside the event log."""
    svc = open_service(url)
    rows = svc.status()
    stored = {
        str(t): (str(s), int(v))
        for t, s, v in svc.db.query("SELECT task_id, state, version FROM review_tasks")
    }
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    differing = [
        r["task_id"] for r in rows if stored.get(r["task_id"]) != (r["state"], r["version"])
    ]
    return StatusOutcome(rows=rows, counts=dict(sorted(counts.items())), differing=differing)


def statistics(url: str | None) -> dict[str, Any]:
    """Agreement, issue, repair and acceptance statistics from the event log."""
    from builder.review.stats import review_stats

    return review_stats(open_service(url).events())


def write_event_log(url: str | None, out: str | Path) -> int:
    """Write the event log as JSON lines to ``out``; returns the number of events."""
    events = open_service(url).events()
    with open(out, "w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(json.dumps(ev.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
    return len(events)


def replay_event_log(path: str | Path) -> ReplayOutcome:
    """Fold an exported event log under the protocol's rules.

    Raises:
        ConfigError: the file cannot be read, or a line is not an event.
        ProtocolError: a step breaks the protocol.
    """
    from builder.review.protocol import replay

    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the event log ({exc})") from exc
    events = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            events.append(Event(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as exc:
            raise ConfigError(f"{path}:{n}: not an event line ({exc})") from exc
    folds = replay(events)
    order = sorted(folds, key=lambda t: int(t.split("_")[1]))
    return ReplayOutcome(events=len(events), folds=[folds[t] for t in order])


def export_accepted(url: str | None, out: str | Path, *, replace: bool = False) -> ExportReport:
    """Write the accepted tasks as a release with the review record."""
    from builder.review.export import export_release

    return export_release(open_service(url), Path(out), replace=replace)


__all__ = [
    "DB_ENV",
    "AssignOutcome",
    "InitOutcome",
    "ReplayOutcome",
    "StatusOutcome",
    "add_user",
    "assign_reviewers",
    "export_accepted",
    "init_review",
    "open_database",
    "open_service",
    "replay_event_log",
    "review_server",
    "review_status",
    "statistics",
    "write_event_log",
]
