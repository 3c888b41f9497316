"""What changed between two builds of a release (``dataspace diff``).

Tasks are matched by their source item (``corpus`` and ``source_id`` of the metadata, else
the ledger's source), so a task that moved from ``task_7`` to ``task_6`` because an earlier
item was rejected is the same task. For each matched task the parts compared are the
question, the workspace files (by content), the gold, the evaluation config, the metadata
and the ledger. Tasks without a source identity are matched by task id.

``dataspace.cli.diff`` is the command line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import ReleaseError

PARTS = ("question", "workspace", "gold", "config", "metadata", "ledger")


@dataclass(frozen=True, kw_only=True)
class TaskChange:
    """How one matched task differs.

    Attributes:
        key: the source identity (``corpus/source_id``) or the task id.
        task_a, task_b: its task id in each release.
        parts: the parts that differ, out of ``PARTS``.
        files: workspace paths ``added``, ``removed`` and ``changed`` (B against A).
        question_a, question_b: both questions when the question changed.
    """

    key: str
    task_a: str
    task_b: str
    parts: tuple[str, ...]
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    question_a: str | None = None
    question_b: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out: dict[str, Any] = {
            "key": self.key,
            "task_a": self.task_a,
            "task_b": self.task_b,
            "parts": list(self.parts),
        }
        if self.files:
            out["files"] = {k: list(v) for k, v in self.files.items()}
        if self.question_a is not None:
            out["question_a"], out["question_b"] = self.question_a, self.question_b
        return out


@dataclass(frozen=True, kw_only=True)
class ReleaseDiff:
    """The difference between two releases.

    Attributes:
        a, b: the release folders.
        added: keys (and task ids) only in B.
        removed: keys (and task ids) only in A.
        changed: matched tasks that differ.
        unchanged: how many matched tasks are identical in every part.
        renumbered: matched tasks whose task id differs.
    """

    a: str
    b: str
    added: tuple[tuple[str, str], ...]
    removed: tuple[tuple[str, str], ...]
    changed: tuple[TaskChange, ...]
    unchanged: int
    renumbered: int = 0

    @property
    def identical(self) -> bool:
        """Nothing added, removed or changed."""
        return not (self.added or self.removed or self.changed)

    def part_counts(self) -> dict[str, int]:
        """``{part: tasks in which it changed}``."""
        counts = {p: 0 for p in PARTS}
        for c in self.changed:
            for p in c.parts:
                counts[p] += 1
        return {p: n for p, n in counts.items() if n}

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "a": self.a,
            "b": self.b,
            "identical": self.identical,
            "added": [{"key": k, "task_b": t} for k, t in self.added],
            "removed": [{"key": k, "task_a": t} for k, t in self.removed],
            "changed": [c.to_json() for c in self.changed],
            "unchanged": self.unchanged,
            "renumbered": self.renumbered,
            "part_counts": self.part_counts(),
        }


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): _digest(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _json_or_none(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseError(path, f"cannot read JSON ({exc})") from None


class _Side:
    """One release, read lazily task by task."""

    def __init__(self, root: Path | str) -> None:
        from dataspace.release import Release

        self.release = Release(root)
        self.root = self.release.root
        try:
            self.ids = self.release.task_ids()
        except OSError as exc:
            raise ReleaseError(Path(root), f"cannot list tasks ({exc})") from None

    def key(self, task_id: str) -> str:
        md = _json_or_none(self.release.metadata_path(task_id)) or {}
        corpus, source = md.get("corpus"), md.get("source_id")
        if not (corpus and source):
            src = (_json_or_none(self.release.ledger_dir(task_id) / "ledger.json") or {}).get(
                "source", {}
            )
            corpus, source = src.get("corpus"), src.get("id")
        return f"{corpus}/{source}" if corpus and source else task_id

    def part(self, task_id: str, name: str) -> Any:
        rel = self.release
        if name == "question":
            return rel.task(task_id).question
        if name == "workspace":
            return _files(rel.workspace(task_id))
        if name == "gold":
            p = rel.gold_path(task_id)
            return _digest(p) if p.is_file() else None
        if name == "config":
            return _json_or_none(rel.config_path(task_id))
        if name == "metadata":
            md = _json_or_none(rel.metadata_path(task_id))
            if isinstance(md, dict):
                md = {k: v for k, v in md.items() if k != "task_id"}
            return md
        if name == "ledger":
            return _files(rel.ledger_dir(task_id))
        raise ValueError(f"unknown part {name!r}; known: {list(PARTS)}")


def diff_releases(a: Path | str, b: Path | str, *, parts: Sequence[str] = PARTS) -> ReleaseDiff:
    """Compare two releases task by task.

    Args:
        a: the old release folder.
        b: the new release folder.
        parts: the parts to compare (default: all of ``PARTS``).

    Raises:
        ReleaseError: a folder is not a readable release (or two tasks of one release
            come from the same source item).
        ValueError: an unknown part.
    """
    for p in parts:
        if p not in PARTS:
            raise ValueError(f"unknown part {p!r}; known: {list(PARTS)}")
    sa, sb = _Side(a), _Side(b)

    def index(side: _Side) -> dict[str, str]:
        out: dict[str, str] = {}
        for t in side.ids:
            k = side.key(t)
            if k in out:
                raise ReleaseError(side.root, f"{out[k]} and {t} both come from {k}")
            out[k] = t
        return out

    ia, ib = index(sa), index(sb)
    added = tuple((k, ib[k]) for k in ib if k not in ia)
    removed = tuple((k, ia[k]) for k in ia if k not in ib)
    changed: list[TaskChange] = []
    unchanged = renumbered = 0
    for k, ta in ia.items():
        if k not in ib:
            continue
        tb = ib[k]
        renumbered += ta != tb
        diff_parts: list[str] = []
        files: dict[str, tuple[str, ...]] = {}
        qa = qb = None
        for p in parts:
            va, vb = sa.part(ta, p), sb.part(tb, p)
            if p == "config" and isinstance(va, dict) and isinstance(vb, dict):
                va = {x: y for x, y in va.items() if x != "task_id"}
                vb = {x: y for x, y in vb.items() if x != "task_id"}
            if va == vb:
                continue
            diff_parts.append(p)
            if p == "question":
                qa, qb = va, vb
            if p == "workspace":
                fa, fb = va or {}, vb or {}
                files = {
                    "added": tuple(sorted(set(fb) - set(fa))),
                    "removed": tuple(sorted(set(fa) - set(fb))),
                    "changed": tuple(sorted(f for f in set(fa) & set(fb) if fa[f] != fb[f])),
                }
                files = {x: y for x, y in files.items() if y}
        if diff_parts:
            changed.append(
                TaskChange(
                    key=k,
                    task_a=ta,
                    task_b=tb,
                    parts=tuple(diff_parts),
                    files=files,
                    question_a=qa,
                    question_b=qb,
                )
            )
        else:
            unchanged += 1
    return ReleaseDiff(
        a=str(sa.root),
        b=str(sb.root),
        added=added,
        removed=removed,
        changed=tuple(changed),
        unchanged=unchanged,
        renumbered=renumbered,
    )


def format_diff(d: ReleaseDiff, *, limit: int = 20) -> list[str]:
    """Lines a person reads (the CLI prints them)."""
    lines = [
        f"A: {d.a}",
        f"B: {d.b}",
        f"{d.unchanged} unchanged, {len(d.changed)} changed, {len(d.added)} added, "
        f"{len(d.removed)} removed ({d.renumbered} matched tasks renumbered)",
    ]
    if d.changed:
        counts = ", ".join(f"{p} {n}" for p, n in d.part_counts().items())
        lines.append(f"changed parts: {counts}")
    for k, t in d.added[:limit]:
        lines.append(f"+ {t}  {k}")
    for k, t in d.removed[:limit]:
        lines.append(f"- {t}  {k}")
    for c in d.changed[:limit]:
        ids = c.task_a if c.task_a == c.task_b else f"{c.task_a} -> {c.task_b}"
        lines.append(f"~ {ids}  {c.key}: {', '.join(c.parts)}")
        if c.question_a is not None:
            lines.append(f"    question A: {c.question_a}")
            lines.append(f"    question B: {c.question_b}")
        for kind, paths in c.files.items():
            lines.append(
                f"    files {kind}: {', '.join(paths[:8])}{' ...' if len(paths) > 8 else ''}"
            )
    hidden = max(0, len(d.added) - limit) + max(0, len(d.removed) - limit)
    hidden += max(0, len(d.changed) - limit)
    if hidden:
        lines.append(f"... and {hidden} more (use --json for everything)")
    if d.identical:
        lines.append("the releases are identical")
    return lines


__all__ = ["PARTS", "ReleaseDiff", "TaskChange", "diff_releases", "format_diff"]
