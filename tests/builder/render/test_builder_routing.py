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


def _registry_and_referrers() -> list[TableMeta]:
    registry = _meta("admissions", primary_key=("a",))
    dictionary = _meta("d_items", primary_key=("a",))
    facts = [
        _meta(f"events_{i}", foreign_keys=(("a", "admissions", "a"), ("b", "d_items", "a")))
        for i in range(4)
    ]
    return [registry, dictionary, *facts]


def test_referenced_tables_follow_their_referrers_into_structured_renderers():
    from builder.metadata import minimal_carriers
    from builder.render.routing import READ_PREFERENCE, STRUCTURED

    metas = _registry_and_referrers()
    for seed in range(12):
        r = route_tables(metas, seed=seed, policy=RoutingPolicy(extra_share=0.0))
        assert r.followed and r.to_json()["followed"] is True
        facts = [t for t in r.tables if t.startswith("events_")]
        for fact in facts:
            for renderer in r.tables[fact].renderers:
                if renderer in STRUCTURED:
                    assert renderer in r.tables["admissions"].renderers
                    assert renderer in r.tables["d_items"].renderers
                    # A question over a fact, its registry and its dictionary needs one carrier.
                    holders = {t: r.tables[t].renderers for t in (fact, "admissions", "d_items")}
                    assert len(minimal_carriers(holders, READ_PREFERENCE)) == 1
        # Documents never take a copy, and each copy is counted once in the batch counters.
        assert not set(r.tables["admissions"].renderers[1:]) - set(STRUCTURED)
        used = sum(len(t.renderers) for t in r.tables.values())
        assert sum(r.counters.values()) == used


def test_follow_share_zero_keeps_one_renderer_per_table_and_is_recorded():
    metas = _registry_and_referrers()
    r = route_tables(metas, seed=5, policy=RoutingPolicy(extra_share=0.0, follow_share=0.0))
    assert not r.followed and r.to_json()["followed"] is False
    assert all(len(t.renderers) == 1 for t in r.tables.values())
    # The draw is per task: a share in between follows in some tasks and not in others.
    drawn = {route_tables(metas, seed=s, policy=RoutingPolicy(follow_share=0.5)).followed
             for s in range(20)}  # fmt: skip
    assert drawn == {True, False}


def test_a_referenced_table_gets_no_renderer_it_cannot_hold():
    # CSV cannot tell an empty string from NULL: a registry holding one stays out of CSV.
    registry = _meta("admissions", has_empty_text=True)
    facts = [_meta(f"f{i}", foreign_keys=(("a", "admissions", "a"),)) for i in range(6)]
    r = route_tables([registry, *facts], seed=2, policy=RoutingPolicy(extra_share=0.0))
    assert any("csv" in r.tables[f.name].renderers for f in facts)
    assert "csv" not in r.tables["admissions"].renderers


def test_routing_policy_comes_from_the_build_spec():
    from builder.spec import stage3_options
    from dataspace.errors import ConfigError

    opts = stage3_options({"routing": {"follow_share": 0.0, "extra_share": 0.3}})
    assert opts is not None
    assert (opts.policy.follow_share, opts.policy.extra_share) == (0.0, 0.3)
    assert stage3_options({}).policy.follow_share == 1.0
    with pytest.raises(ConfigError, match=r"stage3.routing: unknown fields \['folow_share'\]"):
        stage3_options({"routing": {"folow_share": 0.5}})
    with pytest.raises(ConfigError, match="follow_share must be between 0 and 1"):
        stage3_options({"routing": {"follow_share": 2}})
