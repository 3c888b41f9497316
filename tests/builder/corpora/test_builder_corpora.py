"""The bundled mini corpora: scripts match their generators, every item answers."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from builder.corpora._gen import render_script
from builder.sources import load_source
from builder.sources.bundled import BUNDLED
from builder.sqlinfo import operations


@pytest.fixture(scope="module")
def bundled_items(bundled_cache: Path):
    return {name: load_source("bundled", name, cache_dir=bundled_cache) for name in BUNDLED}


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_committed_script_matches_its_generator(name):
    """Guards against editing the generated SQL by hand or forgetting to regenerate it."""
    import importlib

    gen = importlib.import_module(f"builder.corpora.{name}.generate")
    title = {
        "finance": "ccks_fin: an invented BULL-style financial database",
        "clinical": "mimic_mini: an invented EHRSQL-style clinical database",
    }[name]
    expected = render_script(title, gen.build_tables())
    assert BUNDLED[name].script.read_text(encoding="utf-8") == expected


def _limits_have_tie_breakers(sql: str) -> bool:
    """Every ORDER BY ... LIMIT (at any depth) orders by at least two keys."""
    import sqlglot
    from sqlglot import exp

    for select in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Select):
        order = select.args.get("order")
        if (
            select.args.get("limit") is not None
            and order is not None
            and len(order.expressions) < 2
        ):
            return False
    return True


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_every_item_executes_non_empty_and_small(bundled_items, name):
    items = bundled_items[name]
    assert len(items) >= 30
    conn = sqlite3.connect(f"file:{items[0].db_path}?mode=ro", uri=True)
    kinds: Counter[str] = Counter()
    for item in items:
        cur = conn.execute(item.sql)
        rows = cur.fetchall()
        assert 1 <= len(rows) <= 50, item.id
        assert 1 <= len(cur.description) <= 5, item.id
        assert any(v is not None for row in rows for v in row), item.id
        for row in rows:
            for v in row:
                kinds[type(v).__name__] += 1
        assert _limits_have_tie_breakers(item.sql), item.id
    assert {"str", "int", "float"} <= set(kinds)
    conn.close()


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_items_cover_the_operations(bundled_items, name):
    seen = set()
    for item in bundled_items[name]:
        seen.update(operations(item.sql))
    assert {
        "join",
        "aggregation",
        "group_by",
        "having",
        "order_by",
        "limit",
        "date_function",
        "subquery",
        "distinct",
    } <= seen


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_tables_are_moderately_sized(bundled_items, name):
    conn = sqlite3.connect(f"file:{bundled_items[name][0].db_path}?mode=ro", uri=True)
    tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
    assert len(tables) >= 8
    for table in tables:
        (count,) = conn.execute(f'select count(*) from "{table}"').fetchone()
        assert 10 <= count <= 1000, table
    conn.close()


def test_finance_database_has_chinese_values_and_camelcase_columns(bundled_items):
    conn = sqlite3.connect(f"file:{bundled_items['finance'][0].db_path}?mode=ro", uri=True)
    cols = [r[1] for r in conn.execute("pragma table_info(mf_fundarchives)")]
    assert "EstablishmentDate" in cols and "SecuAbbr" in cols
    types = {r[0] for r in conn.execute("select distinct FundType from mf_fundarchives")}
    assert "混合型" in types
    conn.close()


def test_finance_db_info_names_every_table_and_column(bundled_items):
    import json

    info = json.loads((BUNDLED["finance"].folder / "db_info.json").read_text(encoding="utf-8"))
    (db,) = info
    conn = sqlite3.connect(f"file:{bundled_items['finance'][0].db_path}?mode=ro", uri=True)
    tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
    assert {t for t, _ in db["table_name"]} == tables
    assert {t for t, _ in db["table_chiName"]} == tables
    for entry in db["column_info"]:
        cols = [r[1] for r in conn.execute(f"pragma table_info({entry['table']})")]
        assert entry["columns"] == ["*", *cols]
        assert len(entry["column_chiName"]) == len(entry["column_engName"]) == len(cols) + 1
        assert all(entry["column_chiName"][1:]) and all(entry["column_engName"][1:])
    conn.close()


def test_clinical_items_are_in_ehrsql_shape():
    import json

    items = json.loads((BUNDLED["clinical"].folder / "valid.json").read_text(encoding="utf-8"))
    keys = {"db_id", "question", "query", "value", "q_tag", "is_impossible", "split", "id"}
    assert all(set(item) == keys for item in items)
    nan = [item for item in items if item["query"] == "nan"]
    assert len(nan) >= 2 and all(item["is_impossible"] for item in nan)
    assert sum("current_time" in item["query"] for item in items) >= 3
    assert len({item["id"] for item in items}) == len(items)
