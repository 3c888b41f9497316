"""Source items, rejection records and the registry of source loaders.

A loader turns one Text-to-SQL corpus on disk into ``SourceItem`` records. Bad items (a
missing field, SQL that does not parse) become ``Rejection`` records with a reason and the
batch goes on; a database that cannot be opened raises ``SourceError`` naming the file,
because every item that uses it would fail the same way.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.dialect import DialectOptions, normalize_sql
from builder.errors import SourceError
from dataspace.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SourceItem:
    """One (question, SQL, database) triple from a Text-to-SQL corpus.

    Attributes:
        corpus: the corpus name (``ehrsql``, ``bull``, ``finance`` ...).
        id: the item id inside its corpus.
        question: the natural-language question.
        sql: executable SQLite SQL, after the dialect fixes.
        db_path: the SQLite database the SQL runs on.
        db_id: the database name the corpus uses.
        question_language: ``en`` or ``zh``.
        db_language: the language of the database's text values (``en`` or ``zh``).
        extra: everything else the corpus carries (original SQL, tags, domain ...).
    """

    corpus: str
    id: str
    question: str
    sql: str
    db_path: Path
    db_id: str
    question_language: str
    db_language: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """An item a loader or a builder stage refused, with a one-line reason."""

    corpus: str
    id: str
    stage: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {"corpus": self.corpus, "id": self.id, "stage": self.stage, "reason": self.reason}


class LoadedSource(list[SourceItem]):
    """The items of one source, plus what loading refused or skipped.

    A plain list of ``SourceItem`` for every consumer; ``build_release`` also reports
    ``rejections``. ``skipped`` holds the ids of items the corpus itself marks as
    unanswerable (EHRSQL's ``query == "nan"``): they are not errors.
    """

    def __init__(
        self,
        items: Iterable[SourceItem] = (),
        *,
        rejections: Iterable[Rejection] = (),
        skipped: Iterable[str] = (),
    ) -> None:
        super().__init__(items)
        self.rejections: list[Rejection] = list(rejections)
        self.skipped: list[str] = list(skipped)
        self.load_seconds = 0.0

    def __add__(self, other: object) -> LoadedSource:  # type: ignore[override]
        """Concatenate two sources, keeping both sets of rejections and skipped ids."""
        if not isinstance(other, list):
            return NotImplemented
        out = LoadedSource(
            [*self, *other],
            rejections=[*self.rejections, *getattr(other, "rejections", ())],
            skipped=[*self.skipped, *getattr(other, "skipped", ())],
        )
        out.load_seconds = self.load_seconds + getattr(other, "load_seconds", 0.0)
        return out


Loader = Callable[..., LoadedSource]
LOADERS: Registry[Loader] = Registry(
    "source kind",
    {
        "bull": "builder.sources.bull:load_bull",
        "bundled": "builder.sources.bundled:load_bundled",
        "ehrsql": "builder.sources.ehrsql:load_ehrsql",
        "ehrsql-jsonl": "builder.sources.ehrsql:load_ehrsql_jsonl",
        "ehrsql2024": "builder.sources.ehrsql:load_ehrsql2024",
    },
)


def register_loader(kind: str) -> Callable[[Loader], Loader]:
    """Register a loader function under ``kind``."""
    return LOADERS.register(kind)


def loader_kinds() -> list[str]:
    """The known loader kinds, sorted."""
    return LOADERS.names()


def load_source(kind: str, path: Path | str, **options: Any) -> LoadedSource:
    """Load a Text-to-SQL source.

    Args:
        kind: ``bundled``, ``ehrsql``, ``ehrsql-jsonl``, ``ehrsql2024`` or ``bull``.
        path: what the loader reads (a file, a folder, or a bundled corpus name).
        **options: loader options (``db_path``, ``dialect`` ...); see each loader.

    Returns:
        The items, with ``.rejections`` for the items refused while loading.

    Raises:
        ConfigError: unknown kind.
        SourceError: the source files or a database cannot be read.
    """
    fn = LOADERS.get(kind)
    started = time.perf_counter()
    loaded = fn(path, **options)
    loaded.load_seconds = time.perf_counter() - started
    logger.info(
        "loaded %d items from %s source %s (%d rejected)",
        len(loaded),
        kind,
        path,
        len(loaded.rejections),
    )
    return loaded


# ---- helpers shared by loaders ----------------------------------------------------------

_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_RE = re.compile(r"[A-Za-z]")
_LATIN_WORD_RE = re.compile(r"[A-Za-z]+")


def detect_language(text: str) -> str:
    """``zh`` when Chinese outweighs English, counting ~1.5 Chinese characters a word.

    An English question that names a Chinese company stays English.

    >>> detect_language("List the funds managed by 王芳")
    'en'
    >>> detect_language("查询QDII基金的经理")
    'zh'
    """
    cjk_words = len(_CJK_RE.findall(text)) / 1.5
    latin_words = len(_LATIN_WORD_RE.findall(text))
    return "zh" if cjk_words and cjk_words >= latin_words else "en"


def open_database(path: Path) -> sqlite3.Connection:
    """Open a SQLite database read-only.

    Raises:
        SourceError: the file is missing or not a readable SQLite database.
    """
    if not path.is_file():
        raise SourceError(path, "database file is missing")
    try:
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        conn.execute("select count(*) from sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise SourceError(path, f"not a readable SQLite database ({exc})") from exc
    return conn


def check_database(path: Path) -> None:
    """Raise ``SourceError`` naming ``path`` when it is not a readable SQLite database."""
    open_database(path).close()


def database_language(path: Path, *, sample: int = 200) -> str:
    """Guess the language of a database's text values from a sample of each table.

    Raises:
        SourceError: the database cannot be read.
    """
    conn = open_database(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "select name from sqlite_master where type = 'table' and name not like 'sqlite_%'"
            )
        ]
        zh = total = 0
        for table in tables:
            cols = [r[1] for r in conn.execute(f"pragma table_info({_qi(table)})")]
            for col in cols:
                rows = conn.execute(
                    f"select {_qi(col)} from {_qi(table)} where typeof({_qi(col)}) = 'text' "
                    f"limit {int(sample)}"
                ).fetchall()
                for (value,) in rows:
                    if _CJK_RE.search(value):
                        zh += 1
                        total += 1
                    elif _LATIN_RE.search(value):
                        total += 1
    except sqlite3.Error as exc:
        raise SourceError(path, f"cannot read database ({exc})") from exc
    finally:
        conn.close()
    return "zh" if total and zh / total >= 0.2 else "en"


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def prepare_sql(raw: object, dialect: DialectOptions | None) -> tuple[str, tuple[str, ...]]:
    """Apply the dialect fixes and check the SQL parses as SQLite.

    Returns:
        The fixed SQL and the names of the fixes applied.

    Raises:
        ValueError: with a one-line reason when the SQL is missing or does not parse.
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("sql is missing or empty")
    fixed = normalize_sql(raw, dialect)
    try:
        parsed = sqlglot.parse(fixed.sql, read="sqlite")
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"sql does not parse: {first}") from None
    if len([p for p in parsed if p is not None]) != 1:
        raise ValueError("sql must hold exactly one statement")
    return fixed.sql, fixed.fixes


def require_str(obj: Mapping[str, Any], key: str) -> str:
    """``obj[key]`` as a non-empty string, else ``ValueError`` with a one-line reason."""
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field {key!r} is missing or empty")
    return value


def one_line(text: str, limit: int = 300) -> str:
    r"""Collapse whitespace so a reason fits on one line.

    >>> one_line("near 'x':\n  syntax error")
    "near 'x': syntax error"
    """
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


__all__ = [
    "LoadedSource",
    "Rejection",
    "SourceItem",
    "check_database",
    "database_language",
    "detect_language",
    "load_source",
    "loader_kinds",
    "open_database",
    "prepare_sql",
    "register_loader",
]
