"""Cross-language transformation (stage 1): units, map gate, migration and the whole stage."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from builder.errors import BuildError
from builder.sources.base import load_source
from builder.transform import TransformOptions, transform
from builder.transform.gates import execute, translate_result
from builder.transform.mapping import (
    ColumnMapping,
    ReplacementMap,
    TableMapping,
    ValueMapping,
    check_map,
)
from builder.transform.migrate import MigrationError, migrate
from builder.transform.resolve import resolve
from builder.transform.schema import read_schema
from builder.transform.units import extract_units, has_cjk
from builder.translate import get_translator

# ---- translation units ---------------------------------------------------------------------


def test_units_link_foreign_keys_same_names_and_value_overlap(db_from_script):
    db = db_from_script(
        "u.sqlite",
        """
        create table city (name text primary key);
        create table shop (id integer primary key, city text references city(name),
                           kind text);
        create table depot (id integer primary key, town text, kind text);
        create table note (id integer primary key, memo text);
        insert into city values ('Lyon'), ('Porto'), ('Graz'), ('Turku');
        insert into shop values (1, 'Lyon', 'bakery'), (2, 'Porto', 'florist');
        insert into depot values (1, 'Lyon', 'bakery'), (2, 'Graz', 'grocer'),
                                 (3, 'Porto', 'bakery'), (4, 'Turku', 'grocer');
        insert into note values (1, 'Lyon'), (2, 'call back'), (3, 'later'), (4, 'n/a'),
                                (5, 'done'), (6, 'open');
    """,
    )
    conn = sqlite3.connect(db)
    units = extract_units(conn, read_schema(conn), target_language="zh", theta=0.5, k_min=3)
    by_col = {col: c.id for c in units.clusters for col in c.columns}
    # foreign key: shop.city ~ city.name; overlap (4 of 4 shared, k_min 3): depot.town joins
    assert by_col[("shop", "city")] == by_col[("city", "name")] == by_col[("depot", "town")]
    # same name: shop.kind ~ depot.kind
    assert by_col[("shop", "kind")] == by_col[("depot", "kind")]
    # one shared value is not enough to link the memo column (k_min)
    assert by_col[("note", "memo")] != by_col[("city", "name")]
    strict = extract_units(conn, read_schema(conn), target_language="zh", theta=0.5, k_min=5)
    by_col = {col: c.id for c in strict.clusters for col in c.columns}
    assert by_col[("depot", "town")] != by_col[("city", "name")]
    cluster = units.cluster_of("city", "name")
    assert cluster is not None and cluster.values == ("Graz", "Lyon", "Porto", "Turku")
    protected = extract_units(conn, read_schema(conn), target_language="zh", protected=("Graz",))
    assert "Graz" not in protected.cluster_of("city", "name").values
    assert protected.cluster_of("city", "name").skipped["protected"] == 1


# ---- the map gate --------------------------------------------------------------------------


def _map(**kw):
    return ReplacementMap(source_language="en", target_language="zh", **kw)


def test_map_gate_finds_collisions_and_collapsed_values():
    tables = {"a": ["x", "y"], "b": ["x"]}
    assert check_map(
        _map(tables=(TableMapping(source="a", target="表"), TableMapping(source="b", target="表"))),
        tables=tables,
    )
    errs = check_map(
        _map(
            columns=(
                ColumnMapping(table_source="a", source="x", target="名"),
                ColumnMapping(table_source="a", source="y", target="名"),
            )
        ),
        tables=tables,
    )
    assert errs == ["column target '名' is used by 2 columns of a (x, y)"]
    errs = check_map(
        _map(
            values=(
                ValueMapping(cluster_id="c", source="m", target="男", occurrences=(("a", "x"),)),
                ValueMapping(cluster_id="c", source="male", target="男", occurrences=(("a", "x"),)),
            )
        ),
        tables=tables,
    )
    assert errs == ["values ['m', 'male'] of a.x all map to '男'"]
    errs = check_map(
        _map(
            values=(
                ValueMapping(cluster_id="c", source="m", target="f", occurrences=(("a", "x"),)),
            )
        ),
        tables=tables,
        existing_values={("a", "x"): ["m", "f"]},
    )
    assert errs and "collide" in errs[0]
    errs = check_map(
        _map(tables=(TableMapping(source="a", target="甲"),)), tables=tables, protected=["a"]
    )
    assert errs == ["protected table 'a' was renamed"]
    assert check_map(_map(tables=(TableMapping(source="a", target="甲"),)), tables=tables) == []


# ---- migration -----------------------------------------------------------------------------

SCRIPT = """
create table manager (manager_id integer primary key, name text not null,
  city text default 'Shanghai' check (city in ('Shanghai', 'Hangzhou', 'Shanghai Pudong')));
create table fund (fund_id integer primary key autoincrement, name text unique,
  fund_type text, manager_id integer references manager(manager_id));
create index ix_fund_type on fund(fund_type) where fund_type <> 'Other';
create view v_sh as select f.name, m.city from fund f join manager m
  on f.manager_id = m.manager_id where m.city = 'Shanghai';
create table log (id integer primary key, msg text, city text);
create trigger trg after insert on manager when new.city = 'Hangzhou'
  begin insert into log (msg, city) values ('added', new.city); end;
insert into manager values (1, 'Wang', 'Shanghai'), (2, 'Li', 'Hangzhou'),
  (3, 'Zhao', 'Shanghai Pudong');
insert into fund (name, fund_type, manager_id) values ('A', 'Equity', 1), ('B', 'Other', 2),
  ('C', 'Equity', 3);
"""


def _migration_map(**over):
    vals = {"Shanghai": "上海", "Hangzhou": "杭州", **over}
    return _map(
        tables=(
            TableMapping(source="manager", target="基金经理"),
            TableMapping(source="fund", target="基金"),
        ),
        columns=(
            ColumnMapping(table_source="manager", source="city", target="城市"),
            ColumnMapping(table_source="manager", source="manager_id", target="经理代码"),
            ColumnMapping(table_source="fund", source="fund_type", target="类型"),
            ColumnMapping(table_source="fund", source="manager_id", target="经理代码"),
            ColumnMapping(table_source="log", source="city", target="城市"),
        ),
        values=(
            *(
                ValueMapping(
                    cluster_id="city",
                    source=s,
                    target=t,
                    occurrences=(("manager", "city"), ("log", "city")),
                )
                for s, t in vals.items()
            ),
            ValueMapping(
                cluster_id="type",
                source="Other",
                target="其他",
                occurrences=(("fund", "fund_type"),),
            ),
        ),
    )


def test_migration_rewrites_values_names_and_every_definition(db_from_script, tmp_path):
    src = db_from_script("src.sqlite", SCRIPT)
    before = src.read_bytes()
    report = migrate(src, tmp_path / "out.sqlite", _migration_map())
    assert src.read_bytes() == before  # the source is never modified
    assert report.definitions_rewritten == {"tables": 3, "indexes": 1, "views": 1, "triggers": 1}
    conn = sqlite3.connect(tmp_path / "out.sqlite")
    # exact match only: 'Shanghai Pudong' is not touched by the 'Shanghai' entry
    assert conn.execute('select "城市" from "基金经理" order by 1').fetchall() == [
        ("Shanghai Pudong",),
        ("上海",),
        ("杭州",),
    ]
    assert conn.execute("select * from v_sh").fetchall() == [("A", "上海")]
    ddl = conn.execute("select sql from sqlite_master where name = '基金经理'").fetchone()[0]
    assert "default '上海'" in ddl and "('上海', '杭州', 'Shanghai Pudong')" in ddl
    # The source's own insert of Li fired the trigger once; the rewritten trigger fires again.
    conn.execute("""insert into "基金经理" values (4, 'Sun', '杭州')""")
    assert conn.execute("select count(*) from log where \"城市\" = '杭州'").fetchone() == (2,)
    with pytest.raises(sqlite3.IntegrityError):  # the rewritten CHECK constraint holds
        conn.execute("""insert into "基金经理" values (5, 'Qian', 'Hangzhou')""")
    idx = conn.execute("select sql from sqlite_master where name = 'ix_fund_type'").fetchone()[0]
    assert "\"类型\" <> '其他'" in idx
    fund_ddl = conn.execute("select sql from sqlite_master where name = '基金'").fetchone()[0]
    assert 'references "基金经理"("经理代码")' in fund_ddl
    assert conn.execute("pragma foreign_key_check").fetchall() == []
    assert report.checks["integrity"] == "ok"


def test_migration_collision_rolls_back(db_from_script, tmp_path):
    src = db_from_script("src.sqlite", SCRIPT)
    bad = _map(tables=(TableMapping(source="manager", target="log"),))
    with pytest.raises(MigrationError):
        migrate(src, tmp_path / "out.sqlite", bad)
    assert not (tmp_path / "out.sqlite").exists()
    assert list(tmp_path.glob(".out*")) == []


# ---- the whole stage on the bundled corpora ---------------------------------------------------

GLOSSARY = get_translator("glossary")


@pytest.fixture(scope="module")
def bundled_items(tmp_path_factory):
    cache = tmp_path_factory.mktemp("bundled-cache")
    finance = load_source("bundled", "finance", question_language="mixed", cache_dir=cache)
    clinical = load_source("bundled", "clinical", cache_dir=cache)
    return list(finance) + list(clinical)


@pytest.fixture(scope="module")
def clt_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("clt")


def _names(db: Path) -> list[str]:
    schema = read_schema(db)
    return [t.name for t in schema.tables] + [c for t in schema.tables for c in t.column_names]


@pytest.mark.parametrize(
    "combo", [("zh", "other"), ("en", "other")], ids=["zh-workspace", "en-workspace"]
)
def test_cross_language_tasks_hold_the_execution_equivalence_gate(bundled_items, clt_cache, combo):
    db_lang = combo[0]
    done = Counter()
    for item in bundled_items:
        q_lang = "en" if db_lang == "zh" else "zh"
        try:
            res = transform(
                item.db_path,
                item.question,
                item.sql,
                question_language=q_lang,
                db_language=db_lang,
                translator=GLOSSARY,
                source_question_language=item.question_language,
                source_db_language=item.db_language,
                options=TransformOptions(cache_dir=clt_cache),
                item_id=item.id,
                questions=item.extra.get("questions"),
                template=(
                    {"q_tag": item.extra["q_tag"], "value": item.extra.get("value") or {}}
                    if item.extra.get("q_tag")
                    else None
                ),
            )
        except BuildError as exc:
            if "no sentence template covers this question" in exc.reason:
                # The offline path writes a Chinese question from a template or not at all.
                assert q_lang == "zh", exc
                done["no_template"] += 1
                continue
            if exc.stage == "fluency":
                # A glossary translation that still mixes languages is refused, never kept.
                assert "keeps" in exc.reason, exc
                done["fluency"] += 1
                continue
            # Only an ORDER BY ... LIMIT whose tie-break is translated text may change rows.
            assert exc.stage == "transform" and "execution-equivalence" in exc.reason, exc
            assert "order by" in item.sql.lower() and "limit" in item.sql.lower()
            done["rejected"] += 1
            continue
        done["accepted"] += 1
        # The gate, recomputed here: Exec(Dc, σc) == τ_M(Exec(D0, σ0)) as multisets.
        src = execute(item.db_path, item.sql)
        got = execute(res.db_path, res.sql)
        outs = resolve(item.sql, read_schema(item.db_path).columns_by_table())
        root = outs.outputs[id(outs.scopes[-1])]
        prov = [(o.base.table, o.base.column) if o.base else None for o in root]
        assert Counter(translate_result(src.rows, res.mapping, prov)) == Counter(got.rows)
        assert res.ledger["gates"]["execution"]["ok"]
        judge = res.ledger["gates"]["judge"]
        assert judge["status"] == "skipped"
        assert "no model configured" in judge["reason"] or (
            judge["reason"] == "nothing was translated" and res.sql == item.sql
        )
        names = _names(res.db_path)
        if db_lang == "zh":
            assert all(has_cjk(n) for n in names), "every table and column name is Chinese"
            assert has_cjk(res.sql)
        else:
            assert not any(has_cjk(n) for n in names)
        text = sqlite3.connect(res.db_path)
        cells = [
            v
            for t in read_schema(res.db_path).tables
            for c in t.column_names
            for (v,) in text.execute(
                f'select distinct "{c}" from "{t.name}" where typeof("{c}") = \'text\''
            )
        ]
        if db_lang == "en":
            assert not any(has_cjk(v) for v in cells), "every text value is English"
        assert res.question_language != res.db_language
        if q_lang == "zh":
            assert has_cjk(res.question)
        assert res.ledger["database"]["unknown_terms"] == 0, "the glossary covers the corpora"
    assert done["accepted"] + done["no_template"] >= 55 and done["rejected"] <= 3, done
    # The bundled English-only items have no Chinese template or question of their own;
    # the glossary cannot make all of them read as Chinese.
    assert done["fluency"] <= 20, done


def test_unknown_terms_stay_unchanged_and_are_recorded(db_from_script, tmp_path):
    db = db_from_script(
        "z.sqlite",
        """
        create table gadget (id integer primary key, name text);
        insert into gadget values (1, 'zorblax'), (2, 'glucose');
    """,
    )
    res = transform(
        db,
        "What is the id of gadget zorblax?",
        "select gadget.id from gadget where gadget.name = 'zorblax'",
        question_language="zh",
        db_language="zh",
        translator=GLOSSARY,
        source_question_language="en",
        source_db_language="en",
        options=TransformOptions(cache_dir=tmp_path / "c"),
    )
    conn = sqlite3.connect(res.db_path)
    values = {v for (v,) in conn.execute("select name from gadget")}
    assert values == {"zorblax", "葡萄糖"}  # unknown left unchanged, known translated
    assert conn.execute(res.sql).fetchall() == [(1,)]
    assert res.ledger["database"]["unknown_terms"] >= 2  # 'gadget' and 'zorblax' at least
    assert "zorblax" in res.question
    assert "zorblax" in res.ledger["question"]["unknown"] or any(
        e["source"] == "zorblax" for e in res.ledger["question"]["focused_glossary"]
    )


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("select from where (", "does not parse"),
        ("select prescriptions.nope from prescriptions", "unknown column"),
        ("select count(*) from admissions where admittime > date('now')", "'now' is not pinned"),
    ],
)
def test_bad_items_are_rejected_at_transform(bundled_items, clt_cache, sql, fragment):
    clinical = next(i for i in bundled_items if i.corpus == "clinical")
    with pytest.raises(BuildError) as err:
        transform(
            clinical.db_path,
            "q",
            sql,
            question_language="en",
            db_language="zh",
            translator=GLOSSARY,
            source_question_language="en",
            source_db_language="en",
            options=TransformOptions(cache_dir=clt_cache),
        )
    assert err.value.stage == "transform" and fragment in err.value.reason


def test_ambiguous_column_stops_the_item_for_repair(db_from_script, tmp_path):
    db = db_from_script(
        "amb.sqlite",
        """
        create table patients (subject_id integer, gender text);
        create table admissions (subject_id integer, age integer);
        insert into patients values (1, 'm'); insert into admissions values (1, 40);
    """,
    )
    sql = (
        "select age from patients join admissions on patients.subject_id = "
        "admissions.subject_id where subject_id = 1"
    )
    with pytest.raises(BuildError) as err:
        transform(
            db,
            "q",
            sql,
            question_language="en",
            db_language="zh",
            translator=GLOSSARY,
            source_question_language="en",
            source_db_language="en",
            options=TransformOptions(cache_dir=tmp_path / "c"),
        )
    assert "ambiguous unqualified column 'subject_id'" in err.value.reason
