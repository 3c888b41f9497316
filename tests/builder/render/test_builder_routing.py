"""Modality routing: metadata only, seeded, balanced by batch counters, with fallbacks."""

from __future__ import annotations

import sqlite3
from collections import Counter

import pytest

from builder.documents.assembly import DocumentOptions
from builder.render.routing import (
    RoutingFailure,
    RoutingPolicy,
    TableMeta,
    render_routed,
    route_tables,
    table_meta,
)
from builder.tables import TableData, TableSchema, read_tables


def _meta(name: str, rows: int = 5, **kw) -> TableMeta:
    return TableMeta(
        name=name,
        columns=("a", "b"),
        declared_types=("INT", "TEXT"),
        row_count=rows,
        null_fraction=(0.0, 0.0),
        **kw,
    )


def test_routing_is_seeded_and_reads_only_metadata():
    metas = [_meta(n) for n in "abcdefg"]
    one = route_tables(metas, seed=3)
    assert route_tables(list(reversed(metas)), seed=3).tables == one.tables
    assert any(route_tables(metas, seed=s).order != one.order for s in range(4, 8))
    assert {t: r.renderers for t, r in one.tables.items()} == {
        t: r.renderers for t, r in route_tables(metas, seed=3).tables.items()
    }


def test_batch_counters_balance_modalities():
    policy = RoutingPolicy(extra_share=0.0, max_documents=10)
    counters: dict[str, int] = {}
    for task in range(40):
        r = route_tables(
            [_meta(f"t{i}") for i in range(3)], seed=task, counters=counters, policy=policy
        )
        counters = dict(r.counters)
    assert sum(counters.values()) == 120
    assert max(counters.values()) - min(counters.values()) <= 1


def test_incompatible_renderers_are_never_chosen():
    empty = _meta("empty", rows=0)
    blob = _meta("blob", has_blob=True)
    huge = _meta("huge", rows=100_000)
    r = route_tables([empty, blob, huge], seed=1, policy=RoutingPolicy(extra_share=1.0))
    assert set(r.tables["empty"].renderers) <= {"csv", "sqlite"}
    assert r.tables["blob"].renderers == ("sqlite",)
    assert not set(r.tables["huge"].renderers) & {"markdown", "pdf"}
    assert "markdown" in r.tables["huge"].incompatible


def test_a_table_no_renderer_can_hold_rejects_the_task():
    with pytest.raises(RoutingFailure, match="no renderer can hold"):
        route_tables([_meta("empty", rows=0)], seed=1, policy=RoutingPolicy(renderers=("json",)))


def test_failed_round_trip_falls_back_and_is_recorded():
    """A text value in an INTEGER column cannot survive CSV (it comes back as a number);
    the table must move to its next renderer and the failure be recorded."""
    schema = TableSchema(
        name="codes",
        columns=("id", "code"),
        declared_types=("INT", "INT"),
        ddl="CREATE TABLE codes (id INT PRIMARY KEY, code INT)",
    )
    table = TableData(schema=schema, rows=[(1, "007"), (2, 12)])
    policy = RoutingPolicy(
        renderers=("csv", "json"), extra_share=0.0, fallback_order=("json", "csv")
    )
    routing = route_tables([table_meta(table)], seed=1, counters={"json": 5}, policy=policy)
    assert routing.tables["codes"].renderers == ("csv",)
    ws = render_routed([table], routing, counters={"json": 5})
    assert [r.renderer for r in ws.routes["codes"]] == ["json"]
    assert ws.failures["codes"][0].startswith("csv: ")
    assert ws.ledger()["routes"]["codes"][0]["fallbacks"][0].startswith("csv: ")
    assert ws.counters["json"] == 6


def test_every_table_is_represented_including_documents(bundled_dbs):
    conn = sqlite3.connect(bundled_dbs["clinical"])
    tables = read_tables(conn)
    conn.close()
    routing = route_tables(
        [table_meta(t) for t in tables], seed=11, policy=RoutingPolicy(max_documents=3)
    )
    ws = render_routed(
        tables, routing, documents=DocumentOptions(seed=11), database_name="mimic_mini"
    )
    assert set(ws.routes) == {t.name for t in tables}
    kinds = Counter(r.renderer for rs in ws.routes.values() for r in rs)
    assert kinds["markdown"] + kinds["pdf"] >= 1
    for key, doc in ws.documents.items():
        assert all(c.ok for c in doc.coverage.values()), key
    assert "mimic_mini.sqlite" in ws.files or kinds["sqlite"] == 0
    withheld = render_routed(
        tables, routing, withhold=("PATIENTS",), documents=DocumentOptions(seed=11)
    )
    assert "PATIENTS" not in withheld.routes and withheld.withheld == ("PATIENTS",)
    assert not any(p.startswith("PATIENTS.") for p in withheld.files)
