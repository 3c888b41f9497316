"""Source loaders: every kind, rejections that never stop a batch, unreadable databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.errors import SourceError
from builder.sources import LoadedSource, SourceItem, detect_language, load_source, loader_kinds
from builder.sources.bull import read_db_info
from dataspace.errors import ConfigError


def _by_id(items: LoadedSource) -> dict[str, SourceItem]:
    return {item.id: item for item in items}


def test_all_kinds_registered():
    assert set(loader_kinds()) >= {"bundled", "ehrsql", "ehrsql-jsonl", "ehrsql2024", "bull"}


def test_unknown_kind_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"known source kinds: .*ehrsql"):
        load_source("spider", "x")


def test_ehrsql_loader(corpora: Path):
    loaded = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    items = _by_id(loaded)
    assert sorted(items) == ["a1", "a2", "a3", "b3"]
    assert loaded.skipped == ["n1"]
    reasons = {r.id: r for r in loaded.rejections}
    assert set(reasons) == {"b1", "b2"}
    assert "question" in reasons["b1"].reason
    assert reasons["b2"].reason.startswith("sql does not parse")
    assert all(r.stage == "load" and "\n" not in r.reason for r in loaded.rejections)
    a2 = items["a2"]
    assert "current_time" not in a2.sql
    assert "'2105-12-31 23:59:00'" in a2.sql
    assert "replace_current_time" in a2.extra["dialect_fixes"]
    assert "%Y" in items["a3"].sql
    assert a2.db_path == corpora / "ehrsql" / "mini.sqlite"
    assert a2.extra["domain"] == "healthcare"
    assert a2.extra["q_tag"].startswith("how many")
    assert (a2.corpus, a2.db_id, a2.question_language, a2.db_language) == (
        "ehrsql",
        "mini",
        "en",
        "en",
    )


def test_ehrsql_custom_current_time(corpora: Path):
    from builder.dialect import DialectOptions

    loaded = load_source(
        "ehrsql",
        corpora / "ehrsql" / "valid.json",
        dialect=DialectOptions(current_time="2104-06-30 00:00:00"),
    )
    assert "'2104-06-30 00:00:00'" in _by_id(loaded)["a2"].sql


def test_ehrsql_jsonl_loader(corpora: Path):
    loaded = load_source("ehrsql-jsonl", corpora / "ehrsql_jsonl" / "items.jsonl")
    assert [i.id for i in loaded] == ["j1", "j2", "j3"]
    rejected = {r.id: r.reason for r in loaded.rejections}
    assert rejected["line 4"].startswith("invalid JSON")
    assert "sql" in rejected["j5"]
    assert loaded[0].extra["origin"] == "fixture"


def test_ehrsql2024_loader(corpora: Path):
    loaded = load_source("ehrsql2024", corpora / "ehrsql2024" / "mini" / "valid")
    assert [i.id for i in loaded] == ["e1", "e3"]
    assert loaded.skipped == ["e2"]
    assert [(r.id, r.reason) for r in loaded.rejections] == [
        ("e4", "no label for this id in label.json")
    ]
    e3 = loaded[1]
    assert e3.sql.endswith("= 101")
    assert e3.db_path == corpora / "ehrsql2024" / "mini" / "mini.sqlite"
    assert e3.db_id == "mini"


def test_bull_loader(corpora: Path):
    loaded = load_source("bull", corpora / "bull")
    items = _by_id(loaded)
    assert sorted(items) == ["0", "1", "2"]
    rejected = {r.id: r.reason for r in loaded.rejections}
    assert "ccks_other" in rejected["3"]
    assert "question" in rejected["4"]
    assert items["0"].sql.endswith("'浙江省'")
    assert items["1"].sql == (
        'select "RegCapital" from "lc_stockarchives" where "ChiNameAbbr" = \'金澜证券\''
    )
    assert "date('2022-12-31', '-10 years')" in items["2"].sql
    assert items["0"].question_language == "en"
    assert items["1"].question_language == "zh"
    assert items["0"].db_language == "zh"
    assert items["0"].extra["domain"] == "stock"
    assert items["0"].db_path == corpora / "bull" / "database" / "ccks_test.sqlite"


def test_bull_db_info_shape(corpora: Path):
    info = read_db_info(corpora / "bull" / "db_info.json")
    assert info["ccks_test"]["table_name"][0][0] == "lc_stockarchives"


def test_loaded_items_execute(corpora: Path):
    import sqlite3

    for kind, path in [
        ("ehrsql", corpora / "ehrsql" / "valid.json"),
        ("ehrsql-jsonl", corpora / "ehrsql_jsonl" / "items.jsonl"),
        ("ehrsql2024", corpora / "ehrsql2024" / "mini" / "valid"),
        ("bull", corpora / "bull"),
    ]:
        for item in load_source(kind, path):
            conn = sqlite3.connect(item.db_path)
            conn.execute(item.sql).fetchall()
            conn.close()


@pytest.mark.parametrize("content", [b"this is not a database at all" * 10, None])
def test_unreadable_database_is_one_line_naming_the_file(corpora: Path, content):
    db = corpora / "ehrsql" / "mini.sqlite"
    if content is None:
        db.unlink()
    else:
        db.write_bytes(content)
    with pytest.raises(SourceError) as info:
        load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    message = str(info.value)
    assert str(db) in message
    assert "\n" not in message


def test_missing_source_file_is_a_source_error(tmp_path: Path):
    with pytest.raises(SourceError, match=r"valid\.json: file is missing"):
        load_source("ehrsql", tmp_path / "valid.json")


def test_bad_json_file_is_a_source_error(tmp_path: Path):
    (tmp_path / "valid.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SourceError, match="invalid JSON"):
        load_source("ehrsql", tmp_path / "valid.json")


def test_detect_language():
    assert detect_language("What is the close price of 华拓电子 on 2022-12-30?") == "en"
    assert detect_language("华拓电子2022年12月30日的收盘价是多少") == "zh"
    assert detect_language("查询QDII基金") == "zh"


def test_bundled_corpora_load(bundled_cache: Path):
    finance = load_source("bundled", "finance", cache_dir=bundled_cache)
    clinical = load_source("bundled", "clinical", cache_dir=bundled_cache)
    assert len(finance) >= 30 and len(clinical) >= 30
    assert not finance.rejections and not clinical.rejections
    assert len(clinical.skipped) >= 2
    assert {i.db_language for i in finance} == {"zh"}
    assert {i.question_language for i in finance} == {"en"}
    assert {i.extra["domain"] for i in finance} == {"fund", "stock", "macro"}
    assert any("current_time" in str(i.extra["sql_original"]) for i in clinical)
    assert not any("current_time" in i.sql for i in clinical)
    assert any("pin_now" in i.extra["dialect_fixes"] for i in finance)
    assert any("backticks_to_double_quotes" in i.extra["dialect_fixes"] for i in finance)


def test_bundled_chinese_questions_align_with_english(bundled_cache: Path):
    english = _by_id(load_source("bundled", "finance", cache_dir=bundled_cache))
    chinese = load_source("bundled", "finance", question_language="zh", cache_dir=bundled_cache)
    mixed = load_source("bundled", "finance", question_language="mixed", cache_dir=bundled_cache)
    assert 10 <= len(chinese) < len(english)
    for item in chinese:
        assert item.question_language == "zh"
        assert item.sql == english[item.id].sql
    assert [i.id for i in mixed] == list(english)
    assert sum(i.question_language == "zh" for i in mixed) == len(chinese)


def test_bundled_database_is_content_addressed(bundled_cache: Path):
    from builder.sources.bundled import BUNDLED, materialize

    first = materialize(BUNDLED["finance"], bundled_cache)
    again = materialize(BUNDLED["finance"], bundled_cache)
    assert first == again
    import hashlib

    digest = hashlib.sha256(BUNDLED["finance"].script.read_bytes()).hexdigest()[:16]
    assert first.parent.name == digest
    assert not list(first.parent.glob(".*.tmp"))


def test_unknown_bundled_corpus(bundled_cache: Path):
    with pytest.raises(ConfigError, match="bundled corpora: clinical, finance"):
        load_source("bundled", "legal", cache_dir=bundled_cache)


@pytest.mark.sources
def test_real_ehrsql_mimic3_demo_loads(mimic_demo: Path):
    loaded = load_source("ehrsql-jsonl", mimic_demo / "ehrsql_mimic3_demo.jsonl")
    assert len(loaded) == 365
    assert not loaded.rejections
    raw = [
        json.loads(line)
        for line in (mimic_demo / "ehrsql_mimic3_demo.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    assert [i.id for i in loaded] == [r["id"] for r in raw]
    assert all(i.db_path == mimic_demo / "mimic_iii_demo.sqlite" for i in loaded)


@pytest.mark.sources
def test_real_ehrsql_original_sql_normalizes_to_the_shipped_sql(mimic_demo: Path):
    """Guards the fixes against EHRSQL's own post-processing on the real items."""
    from builder.dialect import normalize_sql

    raw = [
        json.loads(line)
        for line in (mimic_demo / "ehrsql_mimic3_demo.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    same = sum(normalize_sql(r["sql_original"]).sql == r["sql"].strip() for r in raw)
    assert same == len(raw)
