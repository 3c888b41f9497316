"""Fixtures for the stage 1 and 2 tests: small databases, the bundled corpora, the MIMIC demo."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
SOURCES = REPO.parent / "shared" / "sources"


def make_db(path: Path, script: str) -> Path:
    """Create a SQLite database from a SQL script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("pragma synchronous = off")
    conn.execute("pragma journal_mode = memory")
    conn.executescript(script if "begin" in script[:2000].lower() else f"begin;\n{script}\ncommit;")
    conn.commit()
    conn.close()
    return path


@pytest.fixture()
def db_from_script(tmp_path: Path):
    """``db_from_script(name, script)``: a database in the test's folder."""

    def make(name: str, script: str) -> Path:
        return make_db(tmp_path / name, script)

    return make


@pytest.fixture(scope="session")
def bundled_dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two bundled databases, created once per session."""
    out = {}
    base = tmp_path_factory.mktemp("bundled-dbs")
    for name, script in (
        ("finance", "finance/ccks_fin.sql"),
        ("clinical", "clinical/mimic_mini.sql"),
    ):
        text = (REPO / "builder" / "corpora" / script).read_text(encoding="utf-8")
        out[name] = make_db(base / f"{name}.sqlite", text)
    return out


@pytest.fixture(scope="session")
def mimic_demo() -> Path:
    """The real EHRSQL MIMIC-III demo corpus, or a skip when it is absent."""
    folder = SOURCES / "ehrsql_mimic3_demo"
    if not (folder / "ehrsql_mimic3_demo.jsonl").is_file():
        pytest.skip(f"{folder} is absent (the shared source corpora are not checked out)")
    return folder
