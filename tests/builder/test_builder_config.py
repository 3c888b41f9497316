"""Evaluation config derivation: column types from the answer values, order sensitivity."""

from __future__ import annotations

import pytest

import evaluator
from builder.evalconfig import column_rule, decimals, derive_config
from builder.gold import GoldRejected, execute_gold
from builder.sqlinfo import operations, order_sensitive, tables_read


@pytest.mark.parametrize(
    ("values", "rule"),
    [
        ([1, 2, 3], {"type": "number", "comparison": {"mode": "integer"}}),
        ([1, None, -7], {"type": "number", "comparison": {"mode": "integer"}}),
        ([1.5, 2.25], {"type": "number", "comparison": {"mode": "decimal_places", "digits": 2}}),
        ([1, 2.5], {"type": "number", "comparison": {"mode": "decimal_places", "digits": 1}}),
        ([0.1 + 0.2], {"type": "number", "comparison": {"mode": "decimal_places", "digits": 4}}),
        (
            [22259332873.649998],
            {"type": "number", "comparison": {"mode": "decimal_places", "digits": 4}},
        ),
        ([1e-05], {"type": "number", "comparison": {"mode": "decimal_places", "digits": 4}}),
        ([1.5e16], {"type": "number", "comparison": {"mode": "decimal_places", "digits": 0}}),
        (["2022-12-31", "2021-01-01", None], {"type": "date"}),
        (["2105-12-31 23:59:00", "2105-01-01 00:00:00"], {"type": "datetime"}),
        (["2105-12-31T23:59:00Z", "2105-12-31"], {"type": "datetime"}),
        (["2022-13-45"], {"type": "text"}),
        (["2022-12-31", "soon"], {"type": "text"}),
        (["000001", "600519"], {"type": "text"}),
        (["2021"], {"type": "text"}),
        ([1, "a"], {"type": "text"}),
        ([None, None], {"type": "text"}),
    ],
)
def test_column_rule(values, rule):
    assert column_rule(values) == rule


def test_decimals_uses_shortest_repr():
    assert decimals(0.1) == 1
    assert decimals(2.0) == 1
    assert decimals(123.4567) == 4


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select a from t order by a", True),
        ("select a from t order by a desc, b limit 3", True),
        ("select a from (select a from t order by a) as s", False),
        ("select a from t where a in (select a from u order by a limit 1)", False),
        ("select a from t union select a from u order by 1", True),
        ("select count(*) from t", False),
        ("select d, dense_rank() over (order by c) from t", False),
    ],
)
def test_order_sensitive_only_for_the_outermost_order_by(sql, expected):
    assert order_sensitive(sql) is expected


def test_operations_and_tables():
    sql = (
        "select b.name, count(distinct a.x) from a join b on a.i = b.i where "
        "strftime('%Y', a.d) = '2021' and a.y in (select y from c) group by b.name "
        "having count(*) > 1 order by 2 desc limit 3"
    )
    assert operations(sql) == [
        "join",
        "aggregation",
        "group_by",
        "having",
        "order_by",
        "limit",
        "subquery",
        "date_function",
        "distinct",
    ]
    assert tables_read(sql) == ["a", "b", "c"]
    assert operations("select a from t") == []


def test_derived_config_is_accepted_by_the_evaluator():
    header = ["name", "n", "avg_price", "day", "at"]
    rows = [
        ("恒远银行", 3, 12.25, "2022-12-30", "2022-12-30 15:00:00"),
        ("金澜证券", None, 0.5, None, "2022-12-29 15:00:00"),
    ]
    cfg = derive_config("task_7", header, rows, "select * from t order by n")
    parsed = evaluator.parse_config(cfg, source="task_7.json")
    assert parsed.order_sensitive is True
    assert [c.type for c in parsed.columns] == ["text", "number", "number", "date", "datetime"]
    assert [c.gold_name for c in parsed.columns] == header


def test_gold_csv_is_strict_and_rejections_are_reasons():
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.executescript(
        "create table t (a text, b real, c integer);"
        "insert into t values ('x,y', 0.1, null), ('多行\n文本', 2.0, 3);"
    )
    answer = execute_gold(conn, "select a, b, c as total from t")
    assert answer.header == ("a", "b", "total")
    assert (
        answer.csv
        == '"a","b","total"\n'.replace('"', "").encode()
        + '"x,y",0.1,\n"多行\n文本",2.0,3\n'.encode()
    )
    table = evaluator.read_csv(answer.csv, role="gold")
    assert table.rows == (("x,y", "0.1", ""), ("多行\n文本", "2.0", "3"))
    for sql, reason in [
        ("select a from t where 0", "returns no rows"),
        ("select c from t where c is null", "only NULLs"),
        ("select nosuch from t", "the SQL fails"),
        ("update t set a = 'z'", r"attempt to write a readonly database|not a query"),
        ("select x'00'", "binary"),
        ("select 1e308 * 10", "non-finite"),
    ]:
        conn.execute("pragma query_only = on")
        with pytest.raises(GoldRejected, match=reason):
            execute_gold(conn, sql)


def test_gold_query_timeout():
    import sqlite3

    conn = sqlite3.connect(":memory:")
    slow = "with recursive r(i) as (select 1 union all select i + 1 from r) select count(*) from r"
    with pytest.raises(GoldRejected, match=r"longer than 0\.2s"):
        execute_gold(conn, slow, timeout=0.2)
