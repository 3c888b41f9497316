"""The mini corpora bundled with the project (``builder/corpora/``), loaded by name.

- ``finance``: a BULL-style database (``ccks_fin``: fund, stock and macro tables with
  Chinese company, fund and industry names), English items and Chinese questions for most
  of the same ``q_id``.
- ``clinical``: an EHRSQL-style MIMIC-III database (``mimic_mini``) with EHRSQL items,
  including ``current_time`` placeholders and two unanswerable (``"nan"``) items.

The databases ship as SQL scripts. At load time each script is executed into a cache folder
named after the script's SHA-256, so a changed script never reuses a stale database and
concurrent loaders never see a half-written one (temp file + rename).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

from builder.dialect import DialectOptions
from builder.errors import SourceError
from builder.sources.base import LoadedSource, register_loader
from builder.sources.bull import load_bull
from builder.sources.ehrsql import load_ehrsql
from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

CORPORA_DIR = Path(__file__).resolve().parent.parent / "corpora"
QUESTION_LANGUAGES = ("en", "zh", "mixed")


@dataclass(frozen=True, kw_only=True)
class BundledCorpus:
    """Where a bundled corpus lives and what its database is called."""

    name: str
    folder: Path
    db_name: str

    @property
    def script(self) -> Path:
        """The SQL script that creates the database."""
        return self.folder / f"{self.db_name}.sql"


BUNDLED: dict[str, BundledCorpus] = {
    "finance": BundledCorpus(name="finance", folder=CORPORA_DIR / "finance", db_name="ccks_fin"),
    "clinical": BundledCorpus(
        name="clinical", folder=CORPORA_DIR / "clinical", db_name="mimic_mini"
    ),
}


def default_cache_dir() -> Path:
    """``$DATASPACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/dataspace``, else ``~/.cache/dataspace``."""
    if os.environ.get("DATASPACE_CACHE_DIR"):
        return Path(os.environ["DATASPACE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dataspace"


def materialize(corpus: BundledCorpus, cache_dir: Path | str | None = None) -> Path:
    """The corpus database, created from its SQL script on first use.

    Returns:
        ``<cache>/corpora/<sha256[:16] of the script>/<db_name>.sqlite``.

    Raises:
        SourceError: the script is missing or does not execute.
    """
    try:
        script = corpus.script.read_bytes()
    except OSError as exc:
        raise SourceError(corpus.script, f"cannot read the corpus script: {exc}") from exc
    digest = hashlib.sha256(script).hexdigest()[:16]
    folder = Path(cache_dir or default_cache_dir()) / "corpora" / digest
    dest = folder / f"{corpus.db_name}.sqlite"
    if dest.is_file():
        return dest
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{corpus.db_name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(script.decode("utf-8"))
        finally:
            conn.close()
        os.replace(tmp, dest)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise SourceError(corpus.script, f"the corpus script does not execute: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("materialized bundled corpus %s at %s", corpus.name, dest)
    return dest


@register_loader("bundled")
def load_bundled(
    name: Path | str,
    *,
    question_language: str = "en",
    cache_dir: Path | str | None = None,
    dialect: DialectOptions | None = None,
) -> LoadedSource:
    """Load a bundled corpus by name.

    Args:
        name: ``finance`` or ``clinical``.
        question_language: for ``finance``: ``en`` (English questions), ``zh`` (only the
            items with a Chinese question) or ``mixed`` (Chinese where there is one, else
            English). ``clinical`` is English only.
        cache_dir: where the databases are created (default ``default_cache_dir()``).
        dialect: values for the dialect fixes.
    """
    key = str(name)
    if key not in BUNDLED:
        raise ConfigError(
            f"unknown bundled corpus {key!r}; bundled corpora: {', '.join(sorted(BUNDLED))}"
        )
    if question_language not in QUESTION_LANGUAGES:
        raise ConfigError(
            f"question_language must be one of {', '.join(QUESTION_LANGUAGES)}, "
            f"not {question_language!r}"
        )
    corpus = BUNDLED[key]
    db_path = materialize(corpus, cache_dir)
    if key == "clinical":
        if question_language == "zh":
            raise ConfigError("the bundled clinical corpus has English questions only")
        return load_ehrsql(
            corpus.folder / "valid.json",
            db_path=db_path,
            dialect=dialect,
            corpus=key,
            question_language="en",
            db_language="en",
        )
    common = {
        "db_dir": db_path.parent,
        "db_info": corpus.folder / "db_info.json",
        "dialect": dialect,
        "corpus": key,
    }
    english = load_bull(
        corpus.folder,
        items="items_en.json",
        question_language="en",
        aligned="items_cn.json",
        **common,
    )
    if question_language == "en":
        return english
    chinese = load_bull(
        corpus.folder,
        items="items_cn.json",
        question_language="zh",
        aligned="items_en.json",
        **common,
    )
    if question_language == "zh":
        return chinese
    by_id = {item.id: item for item in chinese}
    mixed = LoadedSource(
        [by_id.get(item.id, item) for item in english],
        rejections=english.rejections + chinese.rejections,
    )
    return mixed


__all__ = ["BUNDLED", "BundledCorpus", "default_cache_dir", "load_bundled", "materialize"]
