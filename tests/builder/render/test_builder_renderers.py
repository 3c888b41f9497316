"""Renderers through the one router: exact typed round trips, fallback, balanced routing."""

from __future__ import annotations

import json
import sqlite3

import pytest

from builder.render import get_renderer, renderer_names
from builder.render.routing import (
    RoutedWorkspace,
    RoutingPolicy,
    compatible,
    render_routed,
    route_tables,
    table_meta,
)
from builder.render.sqlite_renderer import deserialize
from builder.tables import TableData, compare_rows, quote_ident, read_tables
from dataspace.errors import ConfigError

DDL = """CREATE TABLE quotes (
    ID INTEGER PRIMARY KEY,
    Name TEXT,
    Price REAL,
    Volume INTEGER,
    Ratio NUMERIC,
    Day TEXT
)"""

ROWS = [
    (1, "恒远银行", 12.5, 1000, 0.25, "2022-12-30"),
    (2, 'Jinlan, "Securities"', 0.1 + 0.2, None, 3, "2022-12-29"),
    (3, None, -0.0, 7, None, None),
    (4, "多行\n文本", 1e-07, 2**62, 1.5e300, "2022-12-28"),
    (5, "  spaced  ", 3.0, 0, -2, "2022-12-27"),
]


def _table(ddl: str, rows: list[tuple], extra: str = "") -> TableData:
    conn = sqlite3.connect(":memory:")
    conn.execute(ddl)
    if extra:
        conn.executescript(extra)
    name = conn.execute("select name from sqlite_master where type='table'").fetchone()[0]
    marks = ",".join("?" * len(rows[0])) if rows else ""
    if rows:
        conn.executemany(f"insert into {quote_ident(name)} values ({marks})", rows)
    (table,) = [t for t in read_tables(conn) if t.name == name]
    return table


def _round_trip(renderer_name: str, table: TableData) -> str | None:
    renderer = get_renderer(renderer_name)
    rendered = renderer.render([table], names={table.name: table.name, "": "db"})
    back = renderer.read_back(rendered, [table.schema])[table.name]
    return compare_rows(table, back.columns, back.rows)


@pytest.mark.parametrize("name", ["csv", "json", "sqlite"])
def test_round_trip_exact_with_nulls_chinese_and_floats(name):
    table = _table(DDL, ROWS)
    assert _round_trip(name, table) is None


@pytest.mark.parametrize("name", ["csv", "json", "sqlite"])
def test_round_trip_keeps_duplicates(name):
    rows = [(None, "a", 1.5, 1, 1, "x")] * 3 + [(None, "b", 2.5, 2, 2, "y")]
    ddl = DDL.replace("INTEGER PRIMARY KEY", "INTEGER")
    table = _table(ddl, rows)
    assert _round_trip(name, table) is None
    assert len(table.rows) == 4


def test_csv_file_is_strict():
    table = _table(DDL, ROWS)
    rendered = get_renderer("csv").render([table], names={"quotes": "quotes"})
    data = rendered.files["quotes.csv"]
    text = data.decode("utf-8")
    assert text.startswith("ID,Name,Price,Volume,Ratio,Day\n")
    assert "\r\n" not in text
    assert '"Jinlan, ""Securities"""' in text
    assert "\n3,,0.0,7,,\n" in text
    assert "0.30000000000000004" in text


def test_json_records_keep_types():
    table = _table(DDL, ROWS)
    rendered = get_renderer("json").render([table], names={"quotes": "quotes"})
    records = json.loads(rendered.files["quotes.json"])
    assert records[0] == {
        "ID": 1,
        "Name": "恒远银行",
        "Price": 12.5,
        "Volume": 1000,
        "Ratio": 0.25,
        "Day": "2022-12-30",
    }
    assert records[2]["Name"] is None
    assert "恒远银行" in rendered.files["quotes.json"].decode("utf-8")


def test_sqlite_file_keeps_types_keys_and_indexes():
    parent = _table(
        "CREATE TABLE fund (InnerCode INTEGER PRIMARY KEY, Name TEXT NOT NULL)",
        [(1, "a"), (2, "b")],
    )
    child = _table(
        "CREATE TABLE nv (ID INTEGER PRIMARY KEY, InnerCode INTEGER REFERENCES "
        "fund(InnerCode), NV DECIMAL(9,4))",
        [(1, 1, 1.25), (2, 2, 3)],
        extra="CREATE INDEX nv_code ON nv(InnerCode);",
    )
    rendered = get_renderer("sqlite").render([parent, child], names={"": "ccks"})
    assert list(rendered.files) == ["ccks.sqlite"]
    conn = deserialize(rendered.files["ccks.sqlite"])
    fks = conn.execute("pragma foreign_key_list(nv)").fetchall()
    assert fks[0][2] == "fund"
    assert conn.execute("select name from sqlite_master where type='index'").fetchall() == [
        ("nv_code",)
    ]
    assert conn.execute("select typeof(NV) from nv").fetchall() == [("real",), ("integer",)]


def _policy(renderers) -> RoutingPolicy:
    return RoutingPolicy(renderers=tuple(renderers), extra_share=0.0)


def _assign(tables, renderers, seed: int) -> dict[str, str]:
    routing = route_tables([table_meta(t) for t in tables], seed=seed, policy=_policy(renderers))
    return {t: r.renderers[0] for t, r in routing.tables.items()}


def _render(tables, renderers, seed: int, database_name: str = "database") -> RoutedWorkspace:
    routing = route_tables([table_meta(t) for t in tables], seed=seed, policy=_policy(renderers))
    return render_routed(tables, routing, database_name=database_name)


def test_csv_cannot_tell_empty_text_from_null_so_routing_avoids_it():
    table = _table(
        "CREATE TABLE notes (ID INTEGER PRIMARY KEY, Note TEXT)", [(1, ""), (2, None), (3, "x")]
    )
    assert "expected str ''" in _round_trip("csv", table)
    why = compatible(table_meta(table), "csv", _policy(["csv", "json", "sqlite"]))
    assert why == "empty strings (CSV cannot tell them from NULL)"
    for seed in range(6):
        ws = _render([table], ["csv", "json", "sqlite"], seed=seed)
        assert [r.renderer for r in ws.routes["notes"]] != ["csv"]


def test_text_that_looks_numeric_in_untyped_column_falls_back_from_csv():
    table = _table("CREATE TABLE t (a, b TEXT)", [("007", "007"), (5, "5")])
    assert _round_trip("csv", table) is not None
    assert _round_trip("json", table) is None
    for seed in range(6):
        if _assign([table], ["csv", "sqlite"], seed)["t"] == "csv":
            ws = _render([table], ["csv", "sqlite"], seed=seed)
            (route,) = ws.routes["t"]
            assert route.renderer == "sqlite"
            assert route.fallbacks[0].startswith("csv: row 1 column 'a'")
            break
    else:
        pytest.fail("no seed routed the table to csv first")


def test_binary_and_empty_tables_go_where_they_fit():
    blob = _table("CREATE TABLE b (ID INTEGER PRIMARY KEY, Data BLOB)", [(1, b"\x00\x01")])
    empty = _table("CREATE TABLE e (ID INTEGER PRIMARY KEY, Name TEXT)", [])
    assert get_renderer("csv").compatible(blob) == "binary values"
    assert get_renderer("json").compatible(empty) == "no rows to carry the columns"
    ws = _render([blob, empty], ["csv", "json", "sqlite"], seed=3)
    assert [r.renderer for r in ws.routes["b"]] == ["sqlite"]
    assert {r.renderer for r in ws.routes["e"]} <= {"csv", "sqlite"}


def test_every_table_represented_and_files_parse(tmp_path):
    tables = [
        _table(f"CREATE TABLE t{i} (ID INTEGER PRIMARY KEY, V REAL)", [(1, i / 3)])
        for i in range(7)
    ]
    ws = _render(tables, ["csv", "json", "sqlite"], seed=11, database_name="demo")
    assert set(ws.routes) == {t.name for t in tables}
    assert sorted(ws.modalities) == ["csv", "json", "sqlite"]
    sqlite_files = [p for p in ws.files if p.endswith(".sqlite")]
    assert sqlite_files == ["demo.sqlite"]
    for routes in ws.routes.values():
        assert all(r.path in ws.files for r in routes)


def test_assignment_is_seeded_and_balanced():
    tables = [_table(f"CREATE TABLE t{i} (ID INTEGER)", [(1,)]) for i in range(10)]
    first = _assign(tables, ["csv", "json", "sqlite"], seed=5)
    assert first == _assign(list(reversed(tables)), ["csv", "json", "sqlite"], seed=5)
    counts = sorted(list(first.values()).count(r) for r in ("csv", "json", "sqlite"))
    assert counts == [3, 3, 4]
    seeds = {
        tuple(sorted(_assign(tables, ["csv", "json", "sqlite"], seed=s).items())) for s in range(8)
    }
    assert len(seeds) > 1


def test_unknown_renderer_lists_known_ones():
    assert renderer_names() == ["csv", "json", "markdown", "pdf", "sqlite"]
    with pytest.raises(ConfigError, match="known renderers: csv, json, markdown, pdf, sqlite"):
        get_renderer("docx")


def test_file_names_are_safe_and_unique():
    a = _table('CREATE TABLE "a b" (x INTEGER)', [(1,)])
    b = _table('CREATE TABLE "a/b" (x INTEGER)', [(2,)])
    ws = _render([a, b], ["csv"], seed=0)
    assert sorted(ws.files) == ["a_b.csv", "a_b_2.csv"]
