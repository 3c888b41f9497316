"""Loader for BULL-style financial Text-to-SQL corpora (FinSQL's BULL-en / BULL-cn).

Layout::

    <folder>/dev.json        [{q_id, question, db_name, sql_query, ...}]
    <folder>/db_info.json    [{db_name, table_name: [[name, description]], column_info: [...]}]
    <db_dir>/<db_name>.sqlite

``db_dir`` defaults to ``<folder>/database`` (or ``databases``, or the folder itself). The
SQL is SQLite with MySQL habits (backticks, trailing ``;``) and ``'now'``; the dialect fixes
handle both. The domain of an item is ``fund``, ``stock`` or ``macro`` after its database
(``ccks_fund`` ...) or, for other databases, after its tables' prefixes (``mf_``, ``lc_``/
``qt_``, ``ed_``/``fm_``/``in_``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from builder.dialect import DialectOptions
from builder.errors import SourceError
from builder.sources.base import (
    LoadedSource,
    Rejection,
    SourceItem,
    check_database,
    database_language,
    detect_language,
    one_line,
    prepare_sql,
    register_loader,
    require_str,
)

logger = logging.getLogger(__name__)

_DB_DOMAINS = {"ccks_fund": "fund", "ccks_stock": "stock", "ccks_macro": "macro"}
_PREFIX_DOMAINS = (
    ("mf_", "fund"),
    ("lc_", "stock"),
    ("qt_", "stock"),
    ("ed_", "macro"),
    ("fm_", "macro"),
    ("in_", "macro"),
)


def read_db_info(path: Path) -> dict[str, dict[str, Any]]:
    """Read a BULL ``db_info.json`` into ``{db_name: entry}``.

    Raises:
        SourceError: the file is missing or not in BULL's shape.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SourceError(path, "file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(path, f"cannot read: {exc}") from None
    if not isinstance(data, list):
        raise SourceError(path, "expected a JSON list of databases")
    out: dict[str, dict[str, Any]] = {}
    for n, entry in enumerate(data):
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("db_name"), str)
            or not isinstance(entry.get("table_name"), list)
            or not isinstance(entry.get("column_info"), list)
        ):
            raise SourceError(path, f"entry {n} needs db_name, table_name and column_info")
        out[entry["db_name"]] = entry
    return out


def item_domain(db_name: str, sql: str) -> str:
    """The finance sub-domain of an item: by database, else by most of its tables' prefixes.

    >>> item_domain("ccks_fund", "select 1")
    'fund'
    >>> item_domain("mine", "select * from qt_dailyquote join lc_stockarchives using (x)")
    'stock'
    >>> item_domain("mine", "select gdp from ed_gdp")
    'macro'
    """
    if db_name in _DB_DOMAINS:
        return _DB_DOMAINS[db_name]
    from builder.sqlinfo import tables_read

    try:
        tables = tables_read(sql)
    except ValueError:
        tables = []
    votes: dict[str, int] = {}
    for table in tables:
        for prefix, domain in _PREFIX_DOMAINS:
            if table.lower().startswith(prefix):
                votes[domain] = votes.get(domain, 0) + 1
    if not votes:
        return "finance"
    return max(sorted(votes), key=lambda d: votes[d])


def _db_dir(folder: Path, db_dir: Path | str | None) -> Path:
    if db_dir is not None:
        return Path(db_dir)
    for cand in (folder / "database", folder / "databases"):
        if cand.is_dir():
            return cand
    return folder


def _db_file(db_dir: Path, db_name: str) -> Path:
    flat = db_dir / f"{db_name}.sqlite"
    nested = db_dir / db_name / f"{db_name}.sqlite"
    return nested if not flat.exists() and nested.exists() else flat


@register_loader("bull")
def load_bull(
    path: Path | str,
    *,
    items: str = "dev.json",
    db_dir: Path | str | None = None,
    db_info: Path | str | None = None,
    dialect: DialectOptions | None = None,
    corpus: str = "bull",
    question_language: str | None = None,
    db_language: str | None = None,
    aligned: Path | str | None = None,
) -> LoadedSource:
    """Load a BULL-style corpus.

    Args:
        path: the corpus folder, or the items file itself.
        items: the items file inside the folder (``dev.json``, ``train.json`` ...).
        db_dir: the folder holding ``<db_name>.sqlite``.
        db_info: the ``db_info.json`` (default: beside the items file).
        dialect: values for the dialect fixes (``'now'`` is pinned to ``dialect.now``).
        corpus: the corpus name recorded on each item.
        question_language: language of the questions (default: detected per question).
        db_language: language of the database values (default: detected per database).
        aligned: the same corpus's items in the other question language (BULL-cn for
            BULL-en and back), matched by ``q_id``: an item whose question is needed in that
            language takes it from there instead of translating it.
    """
    path = Path(path)
    items_file = path if path.is_file() else path / items
    folder = items_file.parent
    info_path = Path(db_info) if db_info is not None else folder / "db_info.json"
    info = read_db_info(info_path)
    try:
        data = json.loads(items_file.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SourceError(items_file, "file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(items_file, f"cannot read: {exc}") from None
    if not isinstance(data, list):
        raise SourceError(items_file, "expected a JSON list of items")
    dbs = _db_dir(folder, db_dir)
    other = _aligned_questions(Path(aligned) if aligned is not None else None, folder)
    db_langs: dict[str, str] = {}
    out = LoadedSource()
    for n, raw in enumerate(data):
        item_id = str(raw.get("q_id", f"#{n}")) if isinstance(raw, dict) else f"#{n}"
        try:
            if not isinstance(raw, dict):
                raise ValueError("item is not a JSON object")
            item_id = require_str(raw, "q_id")
            question = require_str(raw, "question").strip()
            db_name = require_str(raw, "db_name")
            if db_name not in info:
                raise ValueError(f"db_name {db_name!r} is not described in {info_path.name}")
            sql, fixes = prepare_sql(raw.get("sql_query"), dialect)
            db_path = _db_file(dbs, db_name)
            if db_name not in db_langs:
                check_database(db_path)
                db_langs[db_name] = db_language or database_language(db_path)
            out.append(
                SourceItem(
                    corpus=corpus,
                    id=item_id,
                    question=question,
                    sql=sql,
                    db_path=db_path,
                    db_id=db_name,
                    question_language=question_language or detect_language(question),
                    db_language=db_langs[db_name],
                    extra={
                        "domain": item_domain(db_name, sql),
                        "sql_original": raw["sql_query"],
                        "dialect_fixes": list(fixes),
                        "db_info": str(info_path),
                        **({"questions": other[item_id]} if item_id in other else {}),
                    },
                )
            )
        except ValueError as exc:
            out.rejections.append(
                Rejection(corpus=corpus, id=item_id, stage="load", reason=one_line(str(exc)))
            )
    return out


def _aligned_questions(path: Path | None, folder: Path) -> dict[str, dict[str, str]]:
    """``{q_id: {language: question}}`` of an aligned items file (empty without one)."""
    if path is None:
        return {}
    if not path.is_absolute():
        path = folder / path
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SourceError(path, "aligned items file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(path, f"cannot read: {exc}") from None
    if not isinstance(data, list):
        raise SourceError(path, "expected a JSON list of items")
    out: dict[str, dict[str, str]] = {}
    for raw in data:
        if isinstance(raw, dict) and isinstance(raw.get("q_id"), str | int):
            q = str(raw.get("question") or "").strip()
            if q:
                out[str(raw["q_id"])] = {detect_language(q): q}
    return out


__all__ = ["item_domain", "load_bull", "read_db_info"]
