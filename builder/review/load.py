"""Loading candidate tasks from a built release into a review database."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from builder.review.db import Database
from builder.review.workspace import sha256
from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class LoadReport:
    """What ``review init`` did.

    Attributes:
        loaded: task ids loaded now.
        already: task ids that were loaded before (left as they are).
        skipped: task id -> why it cannot be reviewed (e.g. no gold).
    """

    loaded: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def load_release(db: Database, release_root: Path | str) -> LoadReport:
    """Create the schema and load every task of a release as version 1, ``pending``.

    The release folder stays read-only: the database records its path and reads the base
    workspace from there; gold answers are stored in the database (repairs add new ones).

    Raises:
        ConfigError: the database already reviews another release.
        ReleaseError: the release (or one of its tasks) is malformed.
    """
    from builder.review.service import now_utc
    from dataspace.release import Release

    release = Release(release_root)
    db.create_schema()
    known = db.meta("release_root")
    if known is not None and Path(known) != release.root:
        raise ConfigError(
            f"{db.display_url} reviews {known}; use another database for {release.root}"
        )
    loaded: list[str] = []
    already: list[str] = []
    skipped: dict[str, str] = {}
    existing = {str(r[0]) for r in db.query("SELECT task_id FROM review_tasks")}
    with db.write():
        if known is None:
            db.set_meta("release_root", str(release.root))
        for tid in release.task_ids():
            if tid in existing:
                already.append(tid)
                continue
            task = release.task(tid)
            if not release.has_gold(tid):
                skipped[tid] = "no gold answer in the release (hidden gold cannot be verified)"
                continue
            gold = release.gold_bytes(tid)
            config = json.loads(release.config_path(tid).read_text(encoding="utf-8"))
            release.config(tid)  # validates
            gold_sha = sha256(gold)
            db.put_blob(gold_sha, gold)
            at = now_utc()
            payload = {"question": task.question, "gold_sha256": gold_sha, "config": config}
            db.insert_event(
                (at, "system", tid, 1, "task_loaded", json.dumps(payload, ensure_ascii=False))
            )
            db.execute(
                "INSERT INTO review_tasks (task_id, state, version, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (tid, "pending", 1, at),
            )
            loaded.append(tid)
    logger.info("loaded %d tasks from %s into %s", len(loaded), release.root, db.display_url)
    return LoadReport(loaded=loaded, already=already, skipped=skipped)


__all__ = ["LoadReport", "load_release"]
