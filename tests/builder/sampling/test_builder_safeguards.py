"""Golden cases of safeguard extraction (tests/fixtures/sampling/safeguards.json)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from builder.sampling import extract_safeguards
from builder.transform.schema import read_schema

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sampling"
CASES = json.loads((FIX / "safeguards.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def conn():
    c = sqlite3.connect(":memory:")
    c.executescript((FIX / "schema.sql").read_text(encoding="utf-8"))
    yield c
    c.close()


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_safeguards_golden(conn, case):
    got = extract_safeguards(
        case["sql"], read_schema(conn), question=case.get("question"), conn=conn
    ).to_json()
    for key, want in case["expected"].items():
        assert got[key] == want, key


def test_missing_columns_are_refused(conn):
    with pytest.raises(ValueError, match=r"unknown column 'orders\.colour'"):
        extract_safeguards("select orders.colour from orders", read_schema(conn))
