"""Golden cases of the protect–replace–restore SQL rewriter (tests/fixtures/sqlrewrite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.transform.mapping import ReplacementMap
from builder.transform.sqlrewrite import rewrite_sql

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "sqlrewrite"


def load_cases(path: Path) -> list[dict]:
    """Blocks separated by blank lines: '# key: value' lines, then input and expected."""
    cases = []
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        lines = [ln for ln in block.strip().splitlines() if ln and not ln.startswith("--")]
        if not lines:
            continue
        meta = {}
        sql = []
        for ln in lines:
            if ln.startswith("#"):
                key, _, value = ln[1:].partition(":")
                meta[key.strip()] = value.strip()
            else:
                sql.append(ln.rstrip(";"))
        assert len(sql) == 2, f"case {meta.get('title')!r} needs an input and an expected line"
        flags = {f.strip() for f in meta.get("flags", "").split(",") if f.strip()}
        cases.append({"title": meta["title"], "input": sql[0], "expected": sql[1], "flags": flags})
    return cases


CASES = load_cases(FIX / "cases.sql")
SCHEMA = json.loads((FIX / "schema.json").read_text(encoding="utf-8"))
MAP = ReplacementMap.from_json(json.loads((FIX / "map.json").read_text(encoding="utf-8")))
TARGET = {
    MAP.table_target(t): [MAP.column_target(t, c) for c in cols] for t, cols in SCHEMA.items()
}


def test_fixture_covers_the_required_cases():
    titles = " | ".join(c["title"] for c in CASES)
    for needed in ("cte", "alias", "correlated", "two unrelated columns", "ambiguous"):
        assert needed in titles


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_rewrite_golden(case):
    got = rewrite_sql(case["input"], MAP, SCHEMA, target_schema=TARGET)
    assert got.sql == case["expected"]
    assert {f.kind for f in got.flags} == case["flags"]
    assert got.ok == (
        not any(
            k in case["flags"]
            for k in ("ambiguous_column", "unknown_column", "unresolved_after_rewrite")
        )
    )


def test_ambiguous_column_is_flagged_not_guessed():
    got = rewrite_sql(
        "select name from fund join manager on fund.manager_id = manager.manager_id", MAP, SCHEMA
    )
    assert not got.ok
    assert any(f.kind == "ambiguous_column" and "'name'" in f.detail for f in got.flags)
    # The ambiguous column is left exactly as written.
    assert got.sql.startswith("SELECT name FROM")


def test_same_literal_in_two_columns_gets_each_columns_target():
    got = rewrite_sql(
        "select f.name from fund as f, stock as s where f.fund_type = 'Other' "
        "and s.industry = 'Other'",
        MAP,
        SCHEMA,
    )
    assert "'其他基金'" in got.sql and "'其他行业'" in got.sql
    assert sorted(x[2] for x in got.literals) == ["fund.fund_type", "stock.industry"]


def test_identity_map_returns_the_sql_unchanged():
    ident = ReplacementMap(source_language="en", target_language="en")
    sql = "select  fund.name from fund where fund.fund_type = 'Other'"
    assert rewrite_sql(sql, ident, SCHEMA).sql == sql


def test_unparseable_sql_is_flagged():
    got = rewrite_sql("select from where (", MAP, SCHEMA)
    assert not got.ok and got.flags[0].kind == "does_not_parse"
