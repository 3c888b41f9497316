"""Fixtures of every builder test: fixture corpora and tables, the bundled corpora and their
release, the real EHRSQL MIMIC-III demo source, a scripted model client.

The expensive ones (the bundled databases, items and release) are built once per session.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "builder"
DOCUMENT_FIXTURES = REPO / "tests" / "fixtures" / "documents"
SOURCES = REPO.parent / "shared" / "sources"
MIMIC = SOURCES / "ehrsql_mimic3_demo"


def make_db(path: Path, script: str) -> Path:
    """Create a SQLite database at ``path`` from a SQL script's text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("pragma synchronous = off")
    conn.execute("pragma journal_mode = memory")
    conn.executescript(script if "begin" in script[:2000].lower() else f"begin;\n{script}\ncommit;")
    conn.commit()
    conn.close()
    return path


def fixture_tables(name: str = "ward_ledger.sql") -> dict:
    """The tables of a document fixture SQL script, by name."""
    from builder.tables import read_tables

    conn = sqlite3.connect(":memory:")
    conn.executescript((DOCUMENT_FIXTURES / name).read_text(encoding="utf-8"))
    try:
        return {t.name: t for t in read_tables(conn)}
    finally:
        conn.close()


def scripted_client(url: str):
    """A metered client of the scripted server, without retries."""
    from dataspace.llm.client import MeteredClient, RetryPolicy
    from dataspace.llm.models import ModelSpec

    return MeteredClient(
        ModelSpec(id="scripted", base_url=url),
        api_key="test-key",
        retry=RetryPolicy(max_retries=0),
        max_output_tokens=None,
    )


def plain_spec(**fields):
    """A spec that keeps each item's own languages and database and routes over the
    structured renderers only: the quickest build of fixture corpora."""
    import dataclasses

    from builder.spec import BuildSpec, LanguagePlan, SourceSpec

    base = BuildSpec(
        sources=(SourceSpec(kind="bundled", path="clinical"),),
        languages=LanguagePlan(database="source", question="source"),
        task_db="copy",
        stage3=None,
    )
    return dataclasses.replace(base, **fields)


@pytest.fixture()
def corpora(tmp_path: Path) -> Path:
    """A copy of the fixture corpora, each with its database created beside it."""
    root = tmp_path / "corpora"
    shutil.copytree(FIXTURES, root)
    clinical = (FIXTURES / "clinical_mini.sql").read_text(encoding="utf-8")
    make_db(root / "ehrsql" / "mini.sqlite", clinical)
    make_db(root / "ehrsql_jsonl" / "mini.sqlite", clinical)
    make_db(root / "ehrsql2024" / "mini" / "mini.sqlite", clinical)
    finance = (FIXTURES / "finance_mini.sql").read_text(encoding="utf-8")
    make_db(root / "bull" / "database" / "ccks_test.sqlite", finance)
    return root


@pytest.fixture()
def db_from_script(tmp_path: Path):
    """``db_from_script(name, script)``: a database in the test's folder."""

    def make(name: str, script: str) -> Path:
        return make_db(tmp_path / name, script)

    return make


@pytest.fixture(scope="session")
def bundled_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder for the bundled databases, shared by the session."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def bundled_items(bundled_cache: Path):
    """Both bundled corpora's items (finance with its Chinese questions, then clinical)."""
    from builder.sources.base import load_source

    finance = load_source("bundled", "finance", question_language="mixed", cache_dir=bundled_cache)
    return finance + load_source("bundled", "clinical", cache_dir=bundled_cache)


@pytest.fixture(scope="session")
def bundled_dbs(bundled_items) -> dict[str, Path]:
    """The two bundled databases by corpus (``finance``, ``clinical``)."""
    return {item.corpus: Path(item.db_path) for item in bundled_items}


@pytest.fixture(scope="session")
def bundled_release(tmp_path_factory: pytest.TempPathFactory, bundled_items):
    """The bundled items built once with ``plain_spec``: (release folder, report)."""
    from builder.driver import build_release

    root = tmp_path_factory.mktemp("bundled")
    report = build_release(
        plain_spec(), root / "release", items=bundled_items, cache_dir=root / "cache"
    )
    return root / "release", report


@pytest.fixture(scope="session")
def ward_tables() -> dict:
    """The ward ledger fixture tables."""
    return fixture_tables()


@pytest.fixture(scope="session")
def mimic_demo() -> Path:
    """The real EHRSQL MIMIC-III demo corpus, or a skip when it is absent."""
    if not (MIMIC / "ehrsql_mimic3_demo.jsonl").is_file():
        pytest.skip(f"{MIMIC} is absent (the shared source corpora are not checked out)")
    return MIMIC
