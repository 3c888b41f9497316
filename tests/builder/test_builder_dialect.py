"""Dialect fixes: each rewrites only what it is meant to, never inside string literals."""

from __future__ import annotations

import pytest

from builder.dialect import (
    DialectOptions,
    backticks_to_double_quotes,
    fix_strftime_formats,
    normalize_sql,
    pin_now,
    replace_current_time,
    strip_trailing_semicolons,
    tokenize,
)


def test_tokenize_round_trips_any_text():
    sql = "select `a`, \"b\", [c] from t -- note 'x'\n where d = 'it''s' /* c */;"
    assert "".join(t.text for t in tokenize(sql)) == sql
    kinds = {t.text: t.kind for t in tokenize(sql)}
    assert kinds["'it''s'"] == "str"
    assert kinds["`a`"] == "bt"


def test_current_time_replaced_only_as_bare_word():
    sql = (
        "select datetime(current_time,'start of year') from t "
        "where t.note = 'current_time' and t.current_time > 1 and \"current_time\" = 2"
    )
    out = replace_current_time(sql, "2105-12-31 23:59:00")
    assert out == (
        "select datetime('2105-12-31 23:59:00','start of year') from t "
        "where t.note = 'current_time' and t.current_time > 1 "
        'and "current_time" = 2'
    )


def test_current_time_is_case_insensitive_and_configurable():
    assert (
        replace_current_time("select CURRENT_TIME", "2000-01-01 00:00:00")
        == "select '2000-01-01 00:00:00'"
    )


def test_strftime_formats_fixed_only_in_the_format_argument():
    sql = (
        "select strftime('%y-%j %H', a), strftime( '%%y', b ) from t "
        "where c = '%y' and strftime('%Y', d) = '2104'"
    )
    assert fix_strftime_formats(sql) == (
        "select strftime('%Y-%J %H', a), strftime( '%%y', b ) from t "
        "where c = '%y' and strftime('%Y', d) = '2104'"
    )


def test_now_pinned_only_inside_date_functions():
    sql = (
        "select date('now','-1 year'), strftime('%Y', 'NOW'), 'now', lower('now') "
        "from t where x = 'now'"
    )
    assert pin_now(sql, "2022-12-31") == (
        "select date('2022-12-31','-1 year'), strftime('%Y', '2022-12-31'), 'now', "
        "lower('now') from t where x = 'now'"
    )


def test_nested_date_call_inside_other_function():
    assert (
        pin_now("select abs(julianday('now') - julianday(d)) from t", "2022-12-31")
        == "select abs(julianday('2022-12-31') - julianday(d)) from t"
    )


def test_backticks_become_double_quotes_and_escape_quotes():
    assert (
        backticks_to_double_quotes("select `a\"b`, `c``d` from `t` where x = '`y`'")
        == 'select "a""b", "c`d" from "t" where x = \'`y`\''
    )


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select 1;", "select 1"),
        ("select 1 ;\n ; ", "select 1"),
        ("select ';'", "select ';'"),
        ("select 1", "select 1"),
    ],
)
def test_trailing_semicolons(sql, expected):
    assert strip_trailing_semicolons(sql) == expected


def test_normalize_applies_all_and_is_idempotent():
    sql = (
        "select strftime('%y', `admittime`) from `admissions` where admittime < "
        "current_time and date(admittime) > date('now','-1 year');"
    )
    fixed = normalize_sql(sql, DialectOptions(current_time="2105-12-31 23:59:00", now="2022-12-31"))
    assert fixed.sql == (
        'select strftime(\'%Y\', "admittime") from "admissions" where '
        "admittime < '2105-12-31 23:59:00' and date(admittime) > "
        "date('2022-12-31','-1 year')"
    )
    assert set(fixed.fixes) == {
        "strip_trailing_semicolons",
        "backticks_to_double_quotes",
        "replace_current_time",
        "fix_strftime_formats",
        "pin_now",
    }
    assert normalize_sql(fixed.sql).sql == fixed.sql
    assert normalize_sql(fixed.sql).fixes == ()


def test_fixed_sql_gives_the_pinned_answer_in_sqlite():
    import sqlite3

    fixed = normalize_sql("select strftime('%y', current_time), date('now', '+1 day');")
    assert sqlite3.connect(":memory:").execute(fixed.sql).fetchone() == ("2105", "2023-01-01")


def test_vital_placeholders_replaced_only_when_known():
    from builder.dialect import replace_vital_ranges

    sql = (
        "select 1 from chartevents where chartevents.valuenum between sao2_lower and "
        "sao2_upper and x.heart_rate_lower = 1 and note = 'sao2_lower' and foo_lower = 2"
    )
    assert replace_vital_ranges(sql) == (
        "select 1 from chartevents where chartevents.valuenum between 95.0 and 100.0 and "
        "x.heart_rate_lower = 1 and note = 'sao2_lower' and foo_lower = 2"
    )
