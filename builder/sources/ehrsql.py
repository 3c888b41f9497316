"""Loaders for the EHRSQL family of clinical Text-to-SQL corpora.

- ``ehrsql``: glee4810/EHRSQL, a JSON list of ``{db_id, question, query, value, q_tag,
  is_impossible, split, id, ...}``; unanswerable items (``query == "nan"``) are skipped.
  The database defaults to ``<db_id>.sqlite`` beside the JSON file.
- ``ehrsql-jsonl``: one item a line, ``{id, question, sql, db_id, ...}`` (SQL already
  post-processed); the database defaults to ``<db_id>.sqlite`` beside the file.
- ``ehrsql2024``: glee4810/ehrsql-2024, a split folder with ``data.json``
  (``{version, data: [{id, question}]}``) and ``label.json`` (``{id: SQL or "null"}``);
  ``"null"`` labels are skipped. The database defaults to ``<dataset>/<dataset>.sqlite``
  one folder up (``mimic_iv/mimic_iv.sqlite`` for ``mimic_iv/valid``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.dialect import DialectOptions
from builder.errors import SourceError
from builder.sources.base import (
    LoadedSource,
    Rejection,
    SourceItem,
    check_database,
    one_line,
    prepare_sql,
    register_loader,
    require_str,
)

logger = logging.getLogger(__name__)

_UNANSWERABLE = {"nan", "null", "none", ""}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SourceError(path, "file is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(path, f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SourceError(path, f"invalid JSON: {exc}") from None


class _DbResolver:
    """Finds and checks each item's database once."""

    def __init__(self, base: Path, db_path: Path | str | None) -> None:
        self.base = base
        self.fixed = Path(db_path) if db_path is not None else None
        self.checked: set[Path] = set()

    def __call__(self, db_id: str) -> Path:
        path = self.fixed if self.fixed is not None else self.base / f"{db_id}.sqlite"
        if path not in self.checked:
            check_database(path)
            self.checked.add(path)
        return path


def _item(
    *,
    corpus: str,
    raw: Mapping[str, Any],
    item_id: str,
    question_key: str,
    sql: object,
    db: _DbResolver,
    db_id: str,
    dialect: DialectOptions | None,
    question_language: str,
    db_language: str,
    extra: Mapping[str, Any],
) -> SourceItem:
    question = require_str(raw, question_key)
    fixed, fixes = prepare_sql(sql, dialect)
    return SourceItem(
        corpus=corpus,
        id=item_id,
        question=question.strip(),
        sql=fixed,
        db_path=db(db_id),
        db_id=db_id,
        question_language=question_language,
        db_language=db_language,
        extra={"domain": "healthcare", "sql_original": sql, "dialect_fixes": list(fixes), **extra},
    )


@register_loader("ehrsql")
def load_ehrsql(
    path: Path | str,
    *,
    db_path: Path | str | None = None,
    dialect: DialectOptions | None = None,
    corpus: str = "ehrsql",
    question_language: str = "en",
    db_language: str = "en",
) -> LoadedSource:
    """Load a glee4810/EHRSQL JSON list (``valid.json``, ``test.json`` ...).

    Args:
        path: the JSON file.
        db_path: the database for every item (default ``<db_id>.sqlite`` beside the file).
        dialect: values for the dialect fixes.
        corpus: the corpus name recorded on each item.
        question_language: language of the questions.
        db_language: language of the database values.
    """
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, list):
        raise SourceError(path, "expected a JSON list of items")
    db = _DbResolver(path.parent, db_path)
    out = LoadedSource()
    for n, raw in enumerate(data):
        item_id = str(raw.get("id", f"#{n}")) if isinstance(raw, dict) else f"#{n}"
        try:
            if not isinstance(raw, dict):
                raise ValueError("item is not a JSON object")
            query = raw.get("query")
            if raw.get("is_impossible") is True or (
                isinstance(query, str) and query.strip().lower() in _UNANSWERABLE
            ):
                out.skipped.append(item_id)
                continue
            item_id = require_str(raw, "id")
            db_id = (
                require_str(raw, "db_id")
                if db_path is None
                else str(raw.get("db_id") or Path(db_path).stem)
            )
            out.append(
                _item(
                    corpus=corpus,
                    raw=raw,
                    item_id=item_id,
                    question_key="question",
                    sql=query,
                    db=db,
                    db_id=db_id,
                    dialect=dialect,
                    question_language=question_language,
                    db_language=db_language,
                    extra={
                        k: raw[k]
                        for k in ("q_tag", "value", "split", "is_impossible", "template")
                        if k in raw
                    },
                )
            )
        except ValueError as exc:
            out.rejections.append(
                Rejection(corpus=corpus, id=item_id, stage="load", reason=one_line(str(exc)))
            )
    return out


@register_loader("ehrsql-jsonl")
def load_ehrsql_jsonl(
    path: Path | str,
    *,
    db_path: Path | str | None = None,
    dialect: DialectOptions | None = None,
    corpus: str = "ehrsql",
    question_language: str = "en",
    db_language: str = "en",
) -> LoadedSource:
    """Load EHRSQL items stored one JSON object a line (``{id, question, sql, db_id}``).

    Args:
        path: the ``.jsonl`` file.
        db_path: the database for every item (default ``<db_id>.sqlite`` beside the file).
        dialect: values for the dialect fixes.
        corpus: the corpus name recorded on each item.
        question_language: language of the questions.
        db_language: language of the database values.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise SourceError(path, "file is missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(path, f"cannot read: {exc}") from None
    db = _DbResolver(path.parent, db_path)
    out = LoadedSource()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item_id = f"line {lineno}"
        try:
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"invalid JSON: {exc}") from None
            if not isinstance(raw, dict):
                raise ValueError("line is not a JSON object")
            item_id = str(raw.get("id") or item_id)
            sql = raw.get("sql")
            if isinstance(sql, str) and sql.strip().lower() in _UNANSWERABLE - {""}:
                out.skipped.append(item_id)
                continue
            item_id = require_str(raw, "id")
            db_id = (
                require_str(raw, "db_id")
                if db_path is None
                else str(raw.get("db_id") or Path(db_path).stem)
            )
            out.append(
                _item(
                    corpus=corpus,
                    raw=raw,
                    item_id=item_id,
                    question_key="question",
                    sql=sql,
                    db=db,
                    db_id=db_id,
                    dialect=dialect,
                    question_language=question_language,
                    db_language=db_language,
                    extra={
                        k: raw[k]
                        for k in ("sql_original", "origin", "source_id", "split", "q_tag", "value")
                        if k in raw
                    },
                )
            )
        except ValueError as exc:
            out.rejections.append(
                Rejection(corpus=corpus, id=item_id, stage="load", reason=one_line(str(exc)))
            )
    return out


def _find_2024_db(folder: Path) -> Path:
    dataset = folder.parent
    candidates = [dataset / f"{dataset.name}.sqlite"]
    candidates += sorted(folder.glob("*.sqlite")) + sorted(dataset.glob("*.sqlite"))
    for cand in candidates:
        if cand.is_file():
            return cand
    raise SourceError(
        folder,
        f"no database found (looked for {candidates[0]} and *.sqlite "
        "here and one folder up); pass db_path",
    )


@register_loader("ehrsql2024")
def load_ehrsql2024(
    path: Path | str,
    *,
    db_path: Path | str | None = None,
    dialect: DialectOptions | None = None,
    corpus: str = "ehrsql2024",
    question_language: str = "en",
    db_language: str = "en",
) -> LoadedSource:
    """Load one split folder of glee4810/ehrsql-2024 (``data.json`` + ``label.json``).

    Args:
        path: the split folder (``.../mimic_iv/valid``).
        db_path: the database (default ``<dataset>/<dataset>.sqlite`` one folder up).
        dialect: values for the dialect fixes.
        corpus: the corpus name recorded on each item.
        question_language: language of the questions.
        db_language: language of the database values.
    """
    folder = Path(path)
    data = _read_json(folder / "data.json")
    labels = _read_json(folder / "label.json")
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SourceError(folder / "data.json", "expected {version, data: [...]}")
    if not isinstance(labels, dict):
        raise SourceError(folder / "label.json", "expected an object {id: SQL}")
    db_file = Path(db_path) if db_path is not None else _find_2024_db(folder)
    db = _DbResolver(folder, db_file)
    out = LoadedSource()
    for n, raw in enumerate(data["data"]):
        item_id = str(raw.get("id", f"#{n}")) if isinstance(raw, dict) else f"#{n}"
        try:
            if not isinstance(raw, dict):
                raise ValueError("item is not a JSON object")
            item_id = require_str(raw, "id")
            if item_id not in labels:
                raise ValueError("no label for this id in label.json")
            sql = labels[item_id]
            if sql is None or (isinstance(sql, str) and sql.strip().lower() in _UNANSWERABLE):
                out.skipped.append(item_id)
                continue
            out.append(
                _item(
                    corpus=corpus,
                    raw=raw,
                    item_id=item_id,
                    question_key="question",
                    sql=sql,
                    db=db,
                    db_id=db_file.stem,
                    dialect=dialect,
                    question_language=question_language,
                    db_language=db_language,
                    extra={"version": data.get("version")},
                )
            )
        except ValueError as exc:
            out.rejections.append(
                Rejection(corpus=corpus, id=item_id, stage="load", reason=one_line(str(exc)))
            )
    return out


__all__ = ["load_ehrsql", "load_ehrsql2024", "load_ehrsql_jsonl"]
