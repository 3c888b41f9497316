"""The item cache: each finished item (its artifacts, or its rejection) by content address.

An item's address covers its content (question, SQL, database bytes, extra fields), its
languages, every build option that changes a task (``BuildSpec.fingerprint``) and the code
version, so a rerun rebuilds only what changed. Entries appear atomically (temp folder +
rename), so concurrent workers never see half an entry. An accepted item whose video is
planned but not yet encoded holds the plan (``PENDING_VIDEO``, this builder's own pickle,
compressed: ``pack_plan``) until the driver completes the entry with the encoded video
(``complete_video``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.sources.base import SourceItem
from builder.stages.state import PROVISIONAL_TASK_ID

if TYPE_CHECKING:
    from builder.spec import BuildSpec

logger = logging.getLogger(__name__)

PENDING_VIDEO = "video_pending.pickle.zlib"
"""An entry's planned, not yet encoded, video (``builder.render.video.PendingVideo``)."""

_CODE_VERSION: str | None = None
_DB_HASHES: dict[tuple[str, int, int], str] = {}


def code_version() -> str:
    """SHA-256 over the builder's and the evaluator's code and data (cache invalidation)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for pkg in ("builder", "evaluator"):
            base = root / pkg
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                if (
                    path.is_file()
                    and path.suffix in (".py", ".json", ".sql")
                    and "__pycache__" not in path.parts
                ):
                    h.update(path.relative_to(root).as_posix().encode() + b"\0")
                    h.update(path.read_bytes() + b"\0")
        _CODE_VERSION = h.hexdigest()
    return _CODE_VERSION


def _db_sha(path: Path) -> str:
    from builder.transform.schema import file_sha256

    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DB_HASHES:
        _DB_HASHES[key] = file_sha256(path)
    return _DB_HASHES[key]


def item_key(
    item: SourceItem, languages: tuple[str, str], spec: BuildSpec, *, video: bool = True
) -> str:
    """The content address of one item's build (``video``: whether it tries for a video)."""
    extra = json.loads(json.dumps(dict(item.extra), default=str, sort_keys=True))
    body = {
        "item": {
            "corpus": item.corpus,
            "id": item.id,
            "question": item.question,
            "sql": item.sql,
            "db_id": item.db_id,
            "db": _db_sha(item.db_path),
            "question_language": item.question_language,
            "db_language": item.db_language,
            "extra": extra,
        },
        "languages": list(languages),
        "video": video,
        "spec": spec.fingerprint(),
        "code": code_version(),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ItemCache:
    """Finished items on disk, one folder per content address.

    ``items/<key[:2]>/<key>/`` holds ``result.json`` and, for an accepted item, its
    artifacts. Entries appear atomically (temp folder + rename).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str) -> Path:
        """Where an item's entry lives."""
        return self.root / "items" / key[:2] / key

    def result(self, key: str) -> dict[str, Any] | None:
        """The cached result of an item, or None."""
        path = self.folder(key) / "result.json"
        if not path.is_file():
            return None
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return obj if isinstance(obj, dict) else None

    def store(
        self,
        key: str,
        result: Mapping[str, Any],
        artifacts: Any = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Write an entry (a no-op when another worker wrote it first).

        ``files`` are written beside the artifacts (a planned video's ``PENDING_VIDEO``).
        """
        final = self.folder(key)
        if final.exists():
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir()
        try:
            if artifacts is not None:
                _dump_artifacts(tmp, artifacts)
            for name, data in (files or {}).items():
                (tmp / name).write_bytes(data)
            (tmp / "result.json").write_text(
                json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8"
            )
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.exists():
                raise

    def discard(self, key: str) -> None:
        """Remove an entry (gone for readers at once: renamed away, then deleted)."""
        final = self.folder(key)
        if not final.exists():
            return
        trash = final.parent / f".{key}.{uuid.uuid4().hex[:8]}.discard"
        try:
            os.rename(final, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def pending_video(self, key: str) -> Any:
        """The planned video an entry waits on (``PENDING_VIDEO``).

        Raises:
            OSError, zlib.error, pickle.UnpicklingError: no readable plan.
        """
        import pickle
        import zlib

        return pickle.loads(zlib.decompress((self.folder(key) / PENDING_VIDEO).read_bytes()))

    def complete_video(
        self, key: str, result: Mapping[str, Any], *, video: bytes, check: Mapping[str, Any]
    ) -> None:
        """Put an entry's encoded video in place of its plan (idempotent).

        The video file, the metadata's workspace size and the ledger's video record
        (``bytes``, ``check``) get their final values, then ``result`` (no longer pending)
        replaces the entry's result and the plan is removed. Each file is replaced
        atomically and the values are absolute, so an interrupted completion is redone.
        """
        folder = self.folder(key)
        body = json.loads((folder / "artifacts.json").read_text(encoding="utf-8"))
        record = body["ledger"]["stage3"]["video"]
        base = int(result["video_pending"]["workspace_bytes"])
        _replace(folder / "context" / record["file"], video)
        body["metadata"]["workspace_bytes"] = base + len(video)
        record["bytes"] = len(video)
        record["check"] = dict(check)
        _replace(folder / "artifacts.json", json.dumps(body, ensure_ascii=False).encode("utf-8"))
        done = {k: v for k, v in result.items() if k != "video_pending"}
        _replace(
            folder / "result.json",
            json.dumps(done, ensure_ascii=False, indent=1).encode("utf-8"),
        )
        (folder / PENDING_VIDEO).unlink(missing_ok=True)

    def artifacts(self, key: str, task_id: str) -> Any:
        """The cached artifacts of an accepted item, restamped with ``task_id``."""
        return _load_artifacts(self.folder(key), task_id)


def pack_plan(plan: Any) -> bytes:
    """A planned video as an entry holds it: pickled, then zlib at level 1.

    Its frames are mostly flat colour: about 14 MB become under 1 MB for 0.03 CPU s.
    """
    import pickle
    import zlib

    return zlib.compress(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _dump_artifacts(folder: Path, art: Any) -> None:
    ctx = folder / "context"
    for rel, src in art.context.items():
        dest = ctx / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            dest.write_bytes(src)
        else:
            shutil.copyfile(src, dest)
    lf = folder / "ledger_files"
    for rel, src in art.ledger_files.items():
        dest = lf / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            dest.write_bytes(src)
        else:
            shutil.copyfile(src, dest)
    if art.gold_csv is not None:
        (folder / "gold.csv").write_bytes(art.gold_csv)
    body = {
        "question": art.question,
        "task_extra": dict(art.task_extra),
        "config": dict(art.config),
        "metadata": dict(art.metadata),
        "ledger": dict(art.ledger),
        "context": sorted(art.context),
        "ledger_files": sorted(art.ledger_files),
        "gold": art.gold_csv is not None,
    }
    (folder / "artifacts.json").write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")


def _load_artifacts(folder: Path, task_id: str) -> Any:
    from dataspace.release import TaskArtifacts

    body = json.loads((folder / "artifacts.json").read_text(encoding="utf-8"))
    config = dict(body["config"])
    if config.get("task_id") == PROVISIONAL_TASK_ID:
        config["task_id"] = task_id
    metadata = dict(body["metadata"])
    if metadata.get("task_id") == PROVISIONAL_TASK_ID:
        metadata["task_id"] = task_id
    return TaskArtifacts(
        task_id=task_id,
        question=body["question"],
        context={rel: folder / "context" / rel for rel in body["context"]},
        gold_csv=(folder / "gold.csv").read_bytes() if body["gold"] else None,
        config=config,
        metadata=metadata,
        ledger=body["ledger"],
        ledger_files={rel: folder / "ledger_files" / rel for rel in body["ledger_files"]},
        task_extra=body["task_extra"],
    )


__all__ = ["PENDING_VIDEO", "ItemCache", "code_version", "item_key", "pack_plan"]
