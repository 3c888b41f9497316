"""The release format: read the official DataSpace layout, write ours atomically.

Layout (official; read unchanged)::

    input/task_N/task.json            {"task_id": "task_N", "question": "...", ...}
    input/task_N/context/...          the workspace: the only thing an agent sees
    output/task_N/gold.csv            reference answer (scored tasks only)
    evaluation/configs/task_N.json    evaluation config (schema 1.0; scored tasks only)

Scored and unscored tasks: the official evaluator scores exactly the tasks that have a
config, so a task is *scored* when it has ``evaluation/configs/task_N.json`` and
``output/task_N/gold.csv``, and *unscored* when it has neither (the official release ships
410 inputs and gold and configs for 60). A task with only one of the two is an error: a
config without gold stops the official evaluator, and gold without a config would silently
leave the task out of the score's denominator.

Our builder adds ``metadata/task_N.json`` (annotations for breakdowns) and
``ledger/task_N/{ledger.json, task_db.sqlite, ...}`` (provenance), plus ``release.json``
(a manifest). Every reader validates at the edge and raises ``ReleaseError`` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import ReleaseError

logger = logging.getLogger(__name__)

RELEASE_SCHEMA_VERSION = "1.0"
_TASK_RE = re.compile(r"^task_(\d+)$")
LEDGER_REQUIRED_KEYS = ("source", "sql", "languages", "seed", "gold_sha256")


def task_number(task_id: str) -> int:
    """The number in ``task_N``.

    >>> task_number("task_12")
    12
    """
    m = _TASK_RE.match(task_id)
    if not m:
        raise ValueError(f"not a task id: {task_id!r}")
    return int(m.group(1))


def sort_task_ids(ids: list[str]) -> list[str]:
    """Sort task ids by their number.

    >>> sort_task_ids(["task_10", "task_2"])
    ['task_2', 'task_10']
    """
    return sorted(ids, key=task_number)


@dataclass(frozen=True, kw_only=True)
class ReleaseCounts:
    """How many tasks a release has, and which are scored (gold and config) or not.

    Attributes:
        tasks: every task id with an ``input/task_N`` folder, in task order.
        scored: the task ids that have gold and a config (what the evaluator counts).
        unscored: the task ids that have input only (no gold, no config).
    """

    tasks: tuple[str, ...]
    scored: tuple[str, ...]
    unscored: tuple[str, ...]

    def describe(self) -> str:
        """One line for people.

        >>> ReleaseCounts(tasks=("task_1", "task_2"), scored=("task_1",),
        ...               unscored=("task_2",)).describe()
        '1 scored of 2 tasks, 1 unscored (no gold)'
        """
        return describe_counts(len(self.scored), len(self.tasks))


def describe_counts(scored: int, tasks: int) -> str:
    """``N scored of M tasks, K unscored (no gold)``: the one wording for these counts.

    >>> describe_counts(60, 410)
    '60 scored of 410 tasks, 350 unscored (no gold)'
    """
    return f"{scored} scored of {tasks} tasks, {tasks - scored} unscored (no gold)"


@dataclass(frozen=True, kw_only=True)
class TaskInput:
    """What an agent is given: the question and where its workspace lives."""

    task_id: str
    question: str
    raw: Mapping[str, Any] = field(default_factory=dict)


class Release:
    """A release on the local filesystem (official layout, optionally with our additions).

    Args:
        root: the release folder.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        if not (self.root / "input").is_dir():
            raise ReleaseError(self.root, "not a release: no input/ folder")

    def __repr__(self) -> str:
        return f"Release({str(self.root)!r})"

    # ---- listing -------------------------------------------------------------------
    def task_ids(self) -> list[str]:
        """Every ``input/task_N`` folder, sorted by N."""
        ids = [p.name for p in (self.root / "input").iterdir() if _TASK_RE.match(p.name)]
        return sort_task_ids(ids)

    # ---- paths -----------------------------------------------------------------------
    def task_dir(self, task_id: str) -> Path:
        """``input/task_N``."""
        return self.root / "input" / task_id

    def workspace(self, task_id: str) -> Path:
        """``input/task_N/context``: the folder staged read-only into the sandbox."""
        return self.task_dir(task_id) / "context"

    def gold_path(self, task_id: str) -> Path:
        """``output/task_N/gold.csv``."""
        return self.root / "output" / task_id / "gold.csv"

    def config_path(self, task_id: str) -> Path:
        """``evaluation/configs/task_N.json``."""
        return self.root / "evaluation" / "configs" / f"{task_id}.json"

    def metadata_path(self, task_id: str) -> Path:
        """``metadata/task_N.json`` (our addition; may be absent)."""
        return self.root / "metadata" / f"{task_id}.json"

    def ledger_dir(self, task_id: str) -> Path:
        """``ledger/task_N`` (our addition; may be absent)."""
        return self.root / "ledger" / task_id

    # ---- reading -----------------------------------------------------------------------
    def task(self, task_id: str) -> TaskInput:
        """Read and validate ``task.json``."""
        path = self.task_dir(task_id) / "task.json"
        obj = _read_json(path)
        if not isinstance(obj, dict):
            raise ReleaseError(path, "task.json must hold a JSON object")
        if obj.get("task_id") != task_id:
            raise ReleaseError(path, f"task_id is {obj.get('task_id')!r}, expected {task_id!r}")
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ReleaseError(path, "question must be a non-empty string")
        if not self.workspace(task_id).is_dir():
            raise ReleaseError(self.workspace(task_id), "workspace folder is missing")
        return TaskInput(task_id=task_id, question=question, raw=obj)

    def has_gold(self, task_id: str) -> bool:
        """Whether the release ships this task's gold answer."""
        return self.gold_path(task_id).is_file()

    def has_config(self, task_id: str) -> bool:
        """Whether the release ships this task's evaluation config."""
        return self.config_path(task_id).is_file()

    def is_scored(self, task_id: str) -> bool:
        """Whether the task is scored: it has a config, as the official evaluator counts.

        In a release that passed ``check`` a task has a config exactly when it has gold.
        """
        return self.has_config(task_id)

    def counts(self, task_ids: list[str] | None = None) -> ReleaseCounts:
        """Scored and unscored tasks among ``task_ids`` (default: every task)."""
        ids = self.task_ids() if task_ids is None else list(task_ids)
        scored = tuple(t for t in ids if self.is_scored(t))
        unscored = tuple(t for t in ids if not self.is_scored(t))
        return ReleaseCounts(tasks=tuple(ids), scored=scored, unscored=unscored)

    def gold_bytes(self, task_id: str) -> bytes:
        """Raw bytes of the gold CSV."""
        path = self.gold_path(task_id)
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ReleaseError(path, f"cannot read gold: {exc.strerror or exc}") from exc

    def config(self, task_id: str) -> Any:
        """The parsed evaluation config (an ``evaluator.TaskConfig``)."""
        import evaluator

        path = self.config_path(task_id)
        try:
            return evaluator.load_config(path)
        except evaluator.FatalError as exc:
            raise ReleaseError(path, _strip_path(str(exc), path)) from exc

    def metadata(self, task_id: str) -> dict[str, Any] | None:
        """Our per-task annotations, or None for releases without them."""
        path = self.metadata_path(task_id)
        if not path.is_file():
            return None
        obj = _read_json(path)
        if not isinstance(obj, dict):
            raise ReleaseError(path, "metadata must be a JSON object")
        return obj

    def ledger(self, task_id: str) -> dict[str, Any] | None:
        """``ledger/task_N/ledger.json``, or None when absent."""
        path = self.ledger_dir(task_id) / "ledger.json"
        if not path.is_file():
            return None
        obj = _read_json(path)
        if not isinstance(obj, dict):
            raise ReleaseError(path, "ledger must be a JSON object")
        return obj

    def workspace_bytes(self, task_id: str) -> int:
        """Total size of the task's workspace files."""
        return sum(p.stat().st_size for p in _walk_files(self.workspace(task_id)))

    # ---- validation ------------------------------------------------------------------
    def check(self, *, require_gold: bool = False) -> ReleaseCounts:
        """Validate every task's inputs, and the config and gold of every scored task.

        A task with input only is valid and unscored; a task with gold but no config, or a
        config but no gold, is an error, as is a config or gold for a task with no input.

        Args:
            require_gold: refuse unscored tasks too (a release fresh from the builder).

        Returns:
            The scored and unscored tasks.

        Raises:
            ReleaseError: naming the first bad file and what is wrong with it.
        """
        import evaluator

        ids = self.task_ids()
        if not ids:
            raise ReleaseError(self.root / "input", "no task_N folders")
        self._check_orphans(set(ids))
        for task_id in ids:
            self.task(task_id)
            self.metadata(task_id)
            has_gold, has_config = self.has_gold(task_id), self.has_config(task_id)
            if has_config and not has_gold:
                raise ReleaseError(
                    self.gold_path(task_id),
                    "gold answer is missing but the task has a config (the evaluator "
                    "stops on it); add the gold or remove the config to leave the task "
                    "unscored",
                )
            if has_gold and not has_config:
                raise ReleaseError(
                    self.config_path(task_id),
                    "config is missing but the task has gold (it would not be scored); "
                    "add the config or remove the gold to leave the task unscored",
                )
            if not has_gold:
                if require_gold:
                    raise ReleaseError(self.gold_path(task_id), "gold answer is missing")
                continue
            self.config(task_id)
            path = self.gold_path(task_id)
            try:
                evaluator.read_csv(path, role="gold")
            except evaluator.FatalError as exc:
                raise ReleaseError(path, _strip_path(str(exc), path)) from exc
            except evaluator.CsvError as exc:
                raise ReleaseError(path, str(exc)) from exc
        return self.counts(ids)

    def _check_orphans(self, ids: set[str]) -> None:
        """Refuse configs and gold of tasks that have no input (the evaluator would count them)."""
        configs = self.root / "evaluation" / "configs"
        if configs.is_dir():
            for path in sorted(configs.glob("task_*.json")):
                if _TASK_RE.match(path.stem) and path.stem not in ids:
                    raise ReleaseError(
                        path,
                        f"config of a task with no input/{path.stem}/ folder (the evaluator "
                        "would score it as missing); add the input or remove the config",
                    )
        output = self.root / "output"
        if output.is_dir():
            for path in sorted(output.glob("task_*/gold.csv")):
                if path.parent.name not in ids:
                    raise ReleaseError(
                        path,
                        f"gold of a task with no input/{path.parent.name}/ folder; add the "
                        "input or remove the gold",
                    )

    def fingerprint(self) -> str:
        """SHA-256 over task inputs, configs and gold (names + bytes), for run identity."""
        h = hashlib.sha256()
        for sub in ("input", "output", "evaluation"):
            base = self.root / sub
            if not base.is_dir():
                continue
            for path in sorted(_walk_files(base)):
                rel = path.relative_to(self.root).as_posix()
                h.update(rel.encode() + b"\0")
                h.update(_content_digest(path))
                h.update(b"\0")
        return h.hexdigest()


# ---- writing ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class TaskArtifacts:
    """Everything one built task writes into a release.

    Attributes:
        task_id: ``task_N``.
        question: the question the agent sees.
        task_extra: further keys of task.json (never gold-revealing).
        context: workspace files, relative path -> bytes or a local file to copy.
        gold_csv: the reference answer as CSV bytes (None for an unscored task).
        config: the evaluation config object (schema 1.0; None for an unscored task).
        metadata: annotations for reports.
        ledger: provenance; must have the keys in ``LEDGER_REQUIRED_KEYS``.
        ledger_files: further ledger files (``task_db.sqlite`` ...), name -> bytes or path.
    """

    task_id: str
    question: str
    context: Mapping[str, bytes | Path]
    gold_csv: bytes | None
    config: Mapping[str, Any] | None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    ledger: Mapping[str, Any] = field(default_factory=dict)
    ledger_files: Mapping[str, bytes | Path] = field(default_factory=dict)
    task_extra: Mapping[str, Any] = field(default_factory=dict)


class ReleaseWriter:
    """Writes a release into a hidden temporary folder and renames it into place at the end.

    Used as a context manager: on any exception the partial folder is removed, so a failed
    build never leaves a half-written release.

    Args:
        dest: the final release folder (must not exist unless ``replace`` is true).
        replace: replace an existing release at ``dest``.
        manifest: extra keys for ``release.json``.
    """

    def __init__(
        self, dest: Path | str, *, replace: bool = False, manifest: Mapping[str, Any] | None = None
    ) -> None:
        self.dest = Path(dest).resolve()
        self.replace = replace
        self.manifest = dict(manifest or {})
        self._tmp: Path | None = None
        self._tasks: list[str] = []

    def __enter__(self) -> ReleaseWriter:
        if self.dest.exists() and not self.replace:
            raise ReleaseError(self.dest, "already exists (pass replace to rebuild it)")
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.dest.parent / f".{self.dest.name}.partial-{uuid.uuid4().hex[:8]}"
        self._tmp.mkdir()
        for sub in ("input", "output", "evaluation/configs", "metadata", "ledger"):
            (self._tmp / sub).mkdir(parents=True)
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._tmp is not None
        if exc_type is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            return
        try:
            self._finish()
        except BaseException:
            shutil.rmtree(self._tmp, ignore_errors=True)
            raise

    @property
    def task_count(self) -> int:
        """How many tasks were added so far."""
        return len(self._tasks)

    def add_task(self, task: TaskArtifacts) -> None:
        """Validate one task's artifacts and write them into the partial release."""
        import evaluator

        if self._tmp is None:
            raise RuntimeError("ReleaseWriter must be used as a context manager")
        root = self._tmp
        task_number(task.task_id)
        if task.task_id in self._tasks:
            raise ReleaseError(task.task_id, "task id written twice")
        cfg_name = f"evaluation/configs/{task.task_id}.json"
        if (task.config is None) != (task.gold_csv is None):
            raise ReleaseError(
                cfg_name,
                "a task has both gold and a config (scored) or neither (unscored)",
            )
        if task.config is not None and task.gold_csv is not None:
            try:
                parsed = evaluator.parse_config(dict(task.config), source=cfg_name)
            except evaluator.FatalError as exc:
                raise ReleaseError(cfg_name, str(exc)) from exc
            if parsed.task_id != task.task_id:
                raise ReleaseError(cfg_name, f"config task_id {parsed.task_id!r} does not match")
            gold_name = f"output/{task.task_id}/gold.csv"
            try:
                table = evaluator.read_csv(task.gold_csv, role="gold")
            except (evaluator.FatalError, evaluator.CsvError) as exc:
                raise ReleaseError(gold_name, str(exc)) from exc
            if len(table.header) != len(parsed.columns):
                raise ReleaseError(
                    gold_name,
                    f"{len(table.header)} columns but the config declares {len(parsed.columns)}",
                )
        missing = [k for k in LEDGER_REQUIRED_KEYS if k not in task.ledger] if task.ledger else []
        if missing:
            raise ReleaseError(f"ledger/{task.task_id}/ledger.json", f"missing keys {missing}")

        tdir = root / "input" / task.task_id
        (tdir / "context").mkdir(parents=True)
        body = {"task_id": task.task_id, "question": task.question, **task.task_extra}
        _write_json(tdir / "task.json", body)
        for rel, src in task.context.items():
            _put(tdir / "context", rel, src)
        if task.gold_csv is not None and task.config is not None:
            (root / "output" / task.task_id).mkdir()
            (root / "output" / task.task_id / "gold.csv").write_bytes(task.gold_csv)
            _write_json(root / cfg_name, dict(task.config))
        if task.metadata:
            _write_json(root / "metadata" / f"{task.task_id}.json", dict(task.metadata))
        if task.ledger or task.ledger_files:
            ldir = root / "ledger" / task.task_id
            ldir.mkdir()
            if task.ledger:
                _write_json(ldir / "ledger.json", dict(task.ledger))
            for rel, src in task.ledger_files.items():
                _put(ldir, rel, src)
        self._tasks.append(task.task_id)

    def _finish(self) -> None:
        assert self._tmp is not None
        if not self._tasks:
            raise ReleaseError(self.dest, "no task was written")
        manifest = {
            "schema_version": RELEASE_SCHEMA_VERSION,
            "task_count": len(self._tasks),
            **self.manifest,
        }
        _write_json(self._tmp / "release.json", manifest)
        if self.dest.exists():
            old = self.dest.parent / f".{self.dest.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(self.dest, old)
            os.rename(self._tmp, self.dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self._tmp, self.dest)
        logger.info("wrote release %s with %d tasks", self.dest, len(self._tasks))


# ---- helpers -----------------------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise ReleaseError(path, "file is missing") from exc
    except OSError as exc:
        raise ReleaseError(path, f"cannot read: {exc.strerror or exc}") from exc
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseError(path, f"invalid JSON: {exc}") from exc


def _write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def _put(base: Path, rel: str, src: bytes | Path) -> None:
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise ReleaseError(rel, "artifact path must be relative and inside its folder")
    dest = base / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(src, bytes):
        dest.write_bytes(src)
    else:
        shutil.copyfile(src, dest)


_SAMPLE = 1 << 20


def _content_digest(path: Path) -> bytes:
    """Digest of a file's content: all of it up to 3 MiB, else size + head, middle and tail.

    Sampling keeps fingerprinting a multi-GB release cheap while staying independent of
    timestamps, so a byte-identical rebuild keeps the same fingerprint.
    """
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as fh:
        if size <= 3 * _SAMPLE:
            h.update(fh.read())
        else:
            for offset in (0, size // 2 - _SAMPLE // 2, size - _SAMPLE):
                fh.seek(offset)
                h.update(fh.read(_SAMPLE))
    return h.digest()


def _walk_files(base: Path) -> Iterator[Path]:
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            yield Path(dirpath) / name


def _strip_path(message: str, path: Path) -> str:
    """Drop a leading ``path:`` from a message that will be prefixed with the path again."""
    for prefix in (f"{path}: ", f"{path.name}: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


__all__ = [
    "LEDGER_REQUIRED_KEYS",
    "Release",
    "ReleaseCounts",
    "ReleaseWriter",
    "TaskArtifacts",
    "TaskInput",
    "describe_counts",
    "sort_task_ids",
    "task_number",
]
