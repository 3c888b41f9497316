"""Fixtures for the builder tests: fixture corpora with their databases, the bundled release."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "builder"
SOURCES = REPO.parent / "shared" / "sources"


def make_db(script: Path, dest: Path) -> Path:
    """Create a SQLite database at ``dest`` from a SQL script."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(dest)
    conn.executescript(script.read_text(encoding="utf-8"))
    conn.close()
    return dest


@pytest.fixture()
def corpora(tmp_path: Path) -> Path:
    """A copy of the fixture corpora, each with its database created beside it."""
    root = tmp_path / "corpora"
    shutil.copytree(FIXTURES, root)
    clinical = FIXTURES / "clinical_mini.sql"
    make_db(clinical, root / "ehrsql" / "mini.sqlite")
    make_db(clinical, root / "ehrsql_jsonl" / "mini.sqlite")
    make_db(clinical, root / "ehrsql2024" / "mini" / "mini.sqlite")
    make_db(FIXTURES / "finance_mini.sql", root / "bull" / "database" / "ccks_test.sqlite")
    return root


@pytest.fixture(scope="session")
def bundled_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder for the bundled databases, shared by the session."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def bundled_release(tmp_path_factory: pytest.TempPathFactory, bundled_cache: Path):
    """The bundled release, built once: (release folder, report)."""
    from builder import build_bundled_release

    dest = tmp_path_factory.mktemp("bundled") / "release"
    report = build_bundled_release(dest, seed=0, cache_dir=bundled_cache)
    return dest, report


@pytest.fixture()
def mimic_demo() -> Path:
    """The real EHRSQL MIMIC-III demo corpus, or a skip when it is absent."""
    folder = SOURCES / "ehrsql_mimic3_demo"
    if not (folder / "ehrsql_mimic3_demo.jsonl").is_file():
        pytest.skip(f"{folder} is absent (the shared source corpora are not checked out)")
    return folder
