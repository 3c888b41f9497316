"""The task database step: each task gets its own database, written to its ledger.

The step is looked up by name so that constraint-aware sampling can take the place of the
plain copy without touching the pipeline. A step returns the database as bytes (what the
ledger stores as ``task_db.sqlite``); the pipeline then works on an in-memory copy of exactly
those bytes, so the gold is, by construction, what executing the SQL on the ledger file gives.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from builder.errors import SourceError
from builder.render.sqlite_renderer import serialize
from builder.sources.base import SourceItem, open_database
from dataspace.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class TaskDatabase:
    """A task's own database.

    Attributes:
        data: the SQLite file's bytes.
        step: the step that made it.
        info: what the step wants in the ledger (policy, seeds, row counts ...).
    """

    data: bytes
    step: str
    info: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def sha256(self) -> str:
        """SHA-256 of the database bytes."""
        return hashlib.sha256(self.data).hexdigest()


TaskDbStep = Callable[..., TaskDatabase]
TASK_DB_STEPS: Registry[TaskDbStep] = Registry(
    "task database step",
    {"sample": "builder.sampling.step:default_step"},
    # Sampling steps with a non-default policy are named ``sample-<hash>`` at run time;
    # importing the module registers the default one.
    prefixes={"sample": "builder.sampling.step"},
)


def register_task_db_step(name: str) -> Callable[[TaskDbStep], TaskDbStep]:
    """Register a task database step under ``name``."""
    return TASK_DB_STEPS.register(name)


def get_task_db_step(name: str) -> TaskDbStep:
    """The step registered under ``name``.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    return TASK_DB_STEPS.get(name)


@register_task_db_step("copy")
def copy_task_db(item: SourceItem, *, seed: int) -> TaskDatabase:
    """A consistent copy of the item's whole source database (SQLite backup API).

    Raises:
        SourceError: the source database cannot be read.
    """
    src = open_database(item.db_path)
    dest = sqlite3.connect(":memory:")
    try:
        src.backup(dest)
        data = serialize(dest)
    except sqlite3.Error as exc:
        raise SourceError(item.db_path, f"cannot copy the database ({exc})") from exc
    finally:
        src.close()
        dest.close()
    return TaskDatabase(data=data, step="copy", info={"source_db": item.db_id})


__all__ = [
    "TaskDatabase",
    "TaskDbStep",
    "copy_task_db",
    "get_task_db_step",
    "register_task_db_step",
]
