"""Constraint-aware sampling (stage 2) on small hand-made databases."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from builder.errors import BuildError
from builder.sampling import SamplingPolicy, extract_safeguards, sample
from builder.sampling.materialize import foreign_key_report
from builder.sampling.policy import Relationship
from builder.sampling.sampler import foreign_keys
from builder.transform.schema import read_schema


def _rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture()
def shop(db_from_script) -> Path:
    """customers <- orders -> products, plus an unrelated log and an empty table."""
    lines = [
        "create table customers (id integer primary key, name text not null, city text);",
        "create table products (sku text primary key, title text, price real);",
        "create table orders (id integer primary key, customer_id integer not null "
        "references customers(id), sku text references products(sku), qty integer, "
        "day text);",
        "create table audit (id integer primary key, note text);",
        "create table archive (id integer primary key, payload text);",
        "create index ix_orders_day on orders(day);",
        "create view big_orders as select * from orders where qty > 8;",
    ]
    for i in range(1, 501):
        city = "Rareville" if i == 377 else ("Lyon" if i % 2 else "Porto")
        lines.append(f"insert into customers values ({i}, 'c{i}', '{city}');")
    for i in range(1, 201):
        lines.append(f"insert into products values ('P{i:03d}', 'product {i}', {i * 1.5});")
    for i in range(1, 3001):
        lines.append(
            f"insert into orders values ({i}, {(i * 7) % 500 + 1}, "
            f"'P{(i * 13) % 200 + 1:03d}', {i % 10}, '2024-01-{i % 28 + 1:02d}');"
        )
    for i in range(1, 301):
        lines.append(f"insert into audit values ({i}, 'n{i}');")
    return db_from_script("shop.sqlite", "\n".join(lines))


def test_predicate_value_that_random_sampling_would_drop_is_kept(shop, tmp_path):
    """Guards the anchors: one matching customer among 500, budget 10."""
    sql = "select name from customers where city = 'Rareville'"
    pol = SamplingPolicy(seed=1, budget=10)
    res = sample(shop, sql, dest=tmp_path / "s.sqlite", policy=pol)
    assert res.rows == (("c377",),)
    assert _rows(res.db_path, sql) == [("c377",)]
    assert res.ledger["anchors"]["customers"] == 1
    # Random fill stops at the budget; only foreign-key closure (orders -> customers) adds more.
    after = res.ledger["rows_after"]["customers"]
    assert res.ledger["filled"]["customers"] == 9
    assert after == 1 + 9 + res.ledger["closure_added"].get("customers", 0) < 500


def test_join_path_stays_matched(shop, tmp_path):
    """Guards query-path closure: every sampled order of Rareville keeps its customer."""
    sql = (
        "select o.id, c.name from orders as o join customers as c on o.customer_id = c.id "
        "where c.city = 'Rareville' and o.qty >= 5"
    )
    full = _rows(shop, sql)
    assert full
    res = sample(shop, sql, dest=tmp_path / "s.sqlite", policy=SamplingPolicy(seed=3, budget=5))
    assert res.rows and set(res.rows) <= set(full)
    assert list(res.rows) == _rows(res.db_path, sql)
    rel = res.ledger["safeguards"]["relationships"][0]
    assert {rel["left"], rel["right"]} == {"orders", "customers"}
    assert res.ledger["foreign_keys"]["ok"]


def test_semi_join_keeps_its_match(shop, tmp_path):
    sql = (
        "select count(*) from orders where orders.customer_id in "
        "(select customers.id from customers where customers.city = 'Rareville')"
    )
    res = sample(shop, sql, dest=tmp_path / "s.sqlite", policy=SamplingPolicy(budget=3))
    assert res.rows[0][0] >= 1
    kinds = {r["kind"] for r in res.ledger["safeguards"]["relationships"]}
    assert kinds == {"semi_join"}


def test_full_inventory_types_keys_indexes_and_views_are_kept(shop, tmp_path):
    res = sample(
        shop,
        "select count(*) from audit",
        dest=tmp_path / "s.sqlite",
        policy=SamplingPolicy(budget=20),
    )
    src, got = read_schema(shop), read_schema(res.db_path)
    assert got.inventory() == src.inventory()
    assert [t.sql for t in got.tables] == [t.sql for t in src.tables]
    assert {d.name for d in got.definitions} == {"ix_orders_day", "big_orders"}
    assert _rows(res.db_path, "select count(*) from archive") == [(0,)]
    assert res.ledger["rows_after"]["orders"] >= 20
    fk = foreign_key_report(res.db_path, shop, foreign_keys(src, SamplingPolicy()))
    assert fk.ok and not fk.new_dangling


def test_cycle_in_the_schema_graph_terminates(db_from_script, tmp_path):
    """Guards closure termination: a -> b -> a and a self reference."""
    lines = [
        "create table a (id integer primary key, b_id integer references b(id), "
        "boss integer references a(id), label text);",
        "create table b (id integer primary key, a_id integer references a(id));",
    ]
    for i in range(1, 301):
        lines.append(f"insert into a values ({i}, {i % 300 + 1}, {(i * 11) % 300 + 1}, 'l{i}');")
        lines.append(f"insert into b values ({i}, {(i * 7) % 300 + 1});")
    db = db_from_script("cyc.sqlite", "\n".join(lines))
    res = sample(
        db,
        "select label from a where id = 5",
        dest=tmp_path / "s.sqlite",
        policy=SamplingPolicy(budget=4, seed=9),
    )
    assert res.rows == (("l5",),)
    assert res.ledger["foreign_keys"]["ok"]
    # Closure follows the chain through the cycle, so it may take everything, but it ends.
    assert res.ledger["rows_after"]["a"] <= 300


def test_empty_protected_join_is_an_error_not_invented_rows(db_from_script, tmp_path):
    db = db_from_script(
        "e.sqlite",
        "\n".join(
            [
                "create table a (id integer primary key, x integer);",
                "create table b (id integer primary key, y integer);",
                *[f"insert into a values ({i}, {i});" for i in range(1, 50)],
                *[f"insert into b values ({i}, {i + 1000});" for i in range(1, 50)],
            ]
        ),
    )
    with pytest.raises(BuildError) as err:
        sample(db, "select count(*) from a join b on a.x = b.y", dest=tmp_path / "s.sqlite")
    assert err.value.stage == "sample"
    assert "empty protected join" in err.value.reason
    assert not (tmp_path / "s.sqlite").exists()


def test_result_that_sampling_empties_is_rejected_with_a_reason(db_from_script, tmp_path):
    """The outer row depends on max(b.id), which no safeguard protects."""
    db = db_from_script(
        "m.sqlite",
        "\n".join(
            [
                "create table a (id integer primary key, v text);",
                "create table b (id integer primary key, w text);",
                *[f"insert into a values ({i}, 'v{i}');" for i in range(1, 1001)],
                *[f"insert into b values ({i}, 'w{i}');" for i in range(1, 1001)],
            ]
        ),
    )
    sql = "select v from a where a.id = (select max(id) from b)"
    assert _rows(db, sql) == [("v1000",)]
    with pytest.raises(BuildError) as err:
        sample(db, sql, dest=tmp_path / "s.sqlite", policy=SamplingPolicy(budget=5, attempts=3))
    assert err.value.stage == "sample"
    assert "empty after sampling" in err.value.reason and "3 attempts" in err.value.reason


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("select from where (", "does not parse"),
        ("select nope from customers", "unknown column 'nope'"),
        ("select name from customers where date(city) < date('now')", "'now' is not pinned"),
        ("select name from customers where city > current_date", "current_date is not pinned"),
        ("select name from customers where city = 'Atlantis'", "returns nothing"),
    ],
)
def test_bad_items_are_rejected_with_a_reason(shop, tmp_path, sql, fragment):
    with pytest.raises(BuildError) as err:
        sample(shop, sql, dest=tmp_path / "s.sqlite")
    assert err.value.stage == "sample"
    assert fragment in err.value.reason


def test_composite_join_keys_stay_tuples(db_from_script, tmp_path):
    db = db_from_script(
        "c.sqlite",
        "\n".join(
            [
                "create table a (x integer, y integer, v text, primary key (x, y));",
                "create table b (x integer, y integer, w text, "
                "foreign key (x, y) references a(x, y));",
                *[f"insert into a values ({i}, {i % 7}, 'v{i}');" for i in range(100)],
                *[f"insert into b values ({i}, {i % 7}, 'w{i}');" for i in range(0, 100, 3)],
            ]
        ),
    )
    guards = extract_safeguards(
        "select a.v, b.w from a join b on a.x = b.x and a.y = b.y where a.v = 'v42'",
        read_schema(db),
    )
    (rel,) = guards.relationships
    assert rel.left_columns == ("x", "y") and rel.right_columns == ("x", "y")
    res = sample(
        db,
        "select a.v, b.w from a join b on a.x = b.x and a.y = b.y where a.v = 'v42'",
        dest=tmp_path / "s.sqlite",
        policy=SamplingPolicy(budget=3),
    )
    assert res.rows == (("v42", "w42"),)
    fk = read_schema(db).foreign_keys[0]
    assert fk.child_columns == ("x", "y")


def test_same_seed_same_database_and_retries_use_derived_seeds(shop, tmp_path):
    sql = "select count(*) from orders where qty = 3"
    one = sample(shop, sql, dest=tmp_path / "1.sqlite", policy=SamplingPolicy(seed=5, budget=30))
    two = sample(shop, sql, dest=tmp_path / "2.sqlite", policy=SamplingPolicy(seed=5, budget=30))
    other = sample(shop, sql, dest=tmp_path / "3.sqlite", policy=SamplingPolicy(seed=6, budget=30))
    assert one.ledger["db_sha256"] == two.ledger["db_sha256"]
    assert one.ledger["db_sha256"] != other.ledger["db_sha256"]
    pol = SamplingPolicy(seed=5)
    assert len({pol.attempt_seed(k) for k in (1, 2, 3)}) == 3


def test_extra_relationships_are_followed(db_from_script, tmp_path):
    db = db_from_script(
        "x.sqlite",
        "\n".join(
            [
                "create table parent (id integer primary key, name text);",
                "create table child (id integer primary key, pid integer, v text);",
                *[f"insert into parent values ({i}, 'p{i}');" for i in range(1, 200)],
                *[f"insert into child values ({i}, {i}, 'v{i}');" for i in range(1, 200)],
            ]
        ),
    )
    pol = SamplingPolicy(
        budget=5, extra_relationships=(Relationship.parse("child(pid) -> parent(id)"),)
    )
    res = sample(db, "select v from child where id = 150", dest=tmp_path / "s.sqlite", policy=pol)
    assert _rows(res.db_path, "select name from parent where id = 150") == [("p150",)]
    assert "child(pid) -> parent(id)" in res.ledger["relationships"]


def test_rows_on_an_interval_boundary_are_kept(shop, tmp_path):
    """Guards boundary bindings: qty = 8 does not satisfy qty > 8 but closes the interval."""
    sql = "select count(*) from orders where qty > 8 and day = '2024-01-03'"
    res = sample(shop, sql, dest=tmp_path / "s.sqlite", policy=SamplingPolicy(budget=5))
    (bound,) = res.ledger["safeguards"]["boundaries"]
    assert (bound["column"], bound["op"], bound["value"]) == ("qty", ">", 8)
    assert res.ledger["boundary_rows"]["orders"] >= 1
    assert _rows(res.db_path, "select count(*) from orders where qty = 8")[0][0] >= 1
