"""Shared fixtures of the stage 3 tests: fixture tables, bundled databases, a scripted model."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from builder.tables import TableData, read_tables

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO.parent / "shared" / "sources"


def fixture_tables(name: str = "ward_ledger.sql") -> dict[str, TableData]:
    """The tables of a fixture SQL script, by name."""
    conn = sqlite3.connect(":memory:")
    conn.executescript((FIXTURES / name).read_text(encoding="utf-8"))
    try:
        return {t.name: t for t in read_tables(conn)}
    finally:
        conn.close()


@pytest.fixture(scope="session")
def ward_tables() -> dict[str, TableData]:
    return fixture_tables()


@pytest.fixture(scope="session")
def bundled_items(tmp_path_factory):
    from builder.pipeline import load_bundled_items

    return load_bundled_items(cache_dir=tmp_path_factory.mktemp("bundled"))


@pytest.fixture(scope="session")
def bundled_dbs(bundled_items) -> dict[str, Path]:
    return {item.db_id: Path(item.db_path) for item in bundled_items}


def scripted_client(url: str):
    """A metered client of the scripted server, without retries."""
    from dataspace.llm.client import MeteredClient, RetryPolicy
    from dataspace.runs.spec import ModelSpec

    return MeteredClient(
        ModelSpec(id="scripted", base_url=url),
        api_key="test-key",
        retry=RetryPolicy(max_retries=0),
        max_output_tokens=None,
    )
