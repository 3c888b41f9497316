"""Questions rendered from translated source templates (EHRSQL's ``q_tag``), offline.

EHRSQL generates each question from a template (``q_tag``) with ``{value}`` slots (given
in the item's ``value`` mapping) and ``[slot]`` phrases (time filters, ranks, units,
aggregates) whose meaning is fixed by the SQL. A template translated once (the data file
``data/ehrsql_templates_zh.json``, reviewed like code) is filled with the item's values
in their target form and with ``[slot]`` phrases derived from the SQL itself, so the
question reads as written Chinese and says exactly what the SQL computes.

A ``[slot]`` that cannot be derived from the SQL makes the whole rendering fail with a
reason (the item is then rejected by the fluency gate, never given a half-English
question).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

from builder.errors import Rejected

DATA = Path(__file__).with_name("data")
_VALUE_SLOT = re.compile(r"\{(\w+)\}")
_PHRASE_SLOT = re.compile(r"\[(\w+)\]")
_NOW = r"'\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}'"
_COL = r"[\w.]+"

_UNITS_ZH = {"year": "年", "month": "个月", "day": "天", "hour": "小时"}
_NUM_ZH = {1: "一", 2: "两", 3: "三", 4: "四", 5: "五", 6: "六", 7: "七", 8: "八", 9: "九"}


class TemplateMiss(Rejected, ValueError):
    """The question cannot be rendered from a template (the reason is the message)."""

    stage_name = "fluency"


@lru_cache(maxsize=4)
def load_templates(language: str = "zh") -> dict[str, str]:
    """``{q_tag: template}`` of the shipped template file of a language."""
    path = DATA / f"ehrsql_templates_{language}.json"
    if not path.is_file():
        return {}
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {str(e["q_tag"]): str(e[language]) for e in doc.get("templates", [])}


# ---- [slot] phrases from the SQL ----------------------------------------------------------


def _hospital_visit(sql: str) -> list[str]:
    """Visit-scoped filters: current / first / last hospital or ICU stay."""
    out = []
    for table, time_col, word in (
        ("admissions", "admittime", "住院"),
        ("icustays", "intime", "入住重症监护病房"),
    ):
        end = "dischtime" if table == "admissions" else "outtime"
        sub = rf"select {table}\.(?:hadm_id|icustay_id) from {table} where [^()]*?"
        if re.search(sub + rf"{table}\.{end} is null", sql):
            out.append(f"在本次{word}期间")
        for m in re.finditer(
            sub + rf"{table}\.{end} is not null order by {table}\.{time_col} (asc|desc) limit 1",
            sql,
        ):
            out.append(f"在首次{word}期间" if m.group(1) == "asc" else f"在最近一次{word}期间")
    return out


def _zh_num(n: int) -> str:
    return _NUM_ZH.get(n, str(n))


def time_filter_global(sql: str, which: int = 0) -> str:
    """The SQL's global time filter as a Chinese adverbial (``""`` when there is none).

    >>> time_filter_global("where datetime(a.t,'start of year') = datetime("
    ...     "'2105-12-31 23:59:00','start of year','-1 year') and strftime('%m',a.t) = '12'")
    '去年12月'
    >>> time_filter_global("where datetime(a.t) >= datetime('2105-12-31 23:59:00','-4 year')")
    '自4年前以来'
    >>> time_filter_global("where strftime('%Y',a.t) <= '2104'")
    '截至2104年'
    >>> time_filter_global("select 1")
    ''
    """
    phrases: list[str] = []
    rel = {
        ("year", 0): "今年",
        ("year", 1): "去年",
        ("month", 0): "本月",
        ("month", 1): "上个月",
        ("day", 0): "今天",
        ("day", 1): "昨天",
    }
    month = re.search(rf"strftime\('%m',{_COL}\) = '(\d\d)'", sql)
    day = re.search(rf"strftime\('%d',{_COL}\) = '(\d\d)'", sql)
    md = re.search(rf"strftime\('%m-%d',{_COL}\) = '(\d\d)-(\d\d)'", sql)
    for m in dict.fromkeys(
        re.findall(
            rf"datetime\({_COL},'start of (year|month|day)'\) = "
            rf"datetime\({_NOW},'start of \1','-(\d+) \1'\)",
            sql,
        )
    ):
        unit, n = m[0], int(m[1])
        phrases.append(rel.get((unit, n), f"{n}{_UNITS_ZH[unit]}前的那{_UNITS_ZH[unit][-1]}"))
    for op, n, unit in dict.fromkeys(
        re.findall(
            rf"datetime\({_COL}\) (>=|<=) datetime\({_NOW},'-(\d+) (year|month|day|hour)'\)", sql
        )
    ):
        span = f"{n}{_UNITS_ZH[unit]}前"
        phrases.append(f"自{span}以来" if op == ">=" else f"截至{span}")
    for _fmt, op, value in dict.fromkeys(
        re.findall(rf"strftime\('(%Y|%Y-%m|%Y-%m-%d)',{_COL}\) (=|>=|<=) '([\d-]+)'", sql)
    ):
        parts = value.split("-")
        text = f"{parts[0]}年" + (f"{int(parts[1])}月" if len(parts) > 1 else "")
        text += f"{int(parts[2])}日" if len(parts) > 2 else ""
        phrases.append({"=": f"在{text}", ">=": f"自{text}以来", "<=": f"截至{text}"}[op])
    suffix = ""
    if md:
        suffix = f"{int(md.group(1))}月{int(md.group(2))}日"
    else:
        if month:
            suffix += f"{int(month.group(1))}月"
        if day:
            suffix += f"{int(day.group(1))}日"
    if suffix:
        if phrases:
            phrases[-1] = phrases[-1] + suffix
        else:
            phrases.append(f"在{suffix}")
    distinct = list(dict.fromkeys(phrases))
    if len(distinct) == 2 and which:
        # Two scopes compared (``[time_filter_global2] ... compared to [..._global1]``):
        # the SQL's first block is the ``2`` one.
        phrases = [distinct[0] if which == 2 else distinct[1]]
    elif len(distinct) > 1:
        raise TemplateMiss(f"the SQL has several global time filters: {sorted(set(phrases))}")
    visit = list(dict.fromkeys(_hospital_visit(sql)))
    if len(visit) > 1:
        raise TemplateMiss(f"the SQL scopes several visits: {visit}")
    return "".join(visit) + (phrases[0] if phrases else "")


def time_filter_exact(sql: str, which: int) -> str:
    """``第一次`` / ``最后一次`` / ``第二次`` from the SQL's event ordering (not the visit's).

    ``which`` is 1 for the last such ordering in the SQL text (the outer one of a
    comparison) and 2 for the first.
    """
    visit = r"select (?:admissions|icustays)\.(?:hadm_id|icustay_id) from \w+ where [^()]*?order by"
    orders = []
    for m in re.finditer(
        rf"order by ({_COL}) (asc|desc)(?:, {_COL} (?:asc|desc))? limit 1( offset 1)?", sql
    ):
        head = sql[: m.start() + len("order by")]
        if re.search(visit + r"$", head[-400:]):
            continue
        orders.append((m.group(1), m.group(2), bool(m.group(3))))
    if not orders:
        raise TemplateMiss("no event ordering for the first/last phrase")
    word = {
        ("asc", False): "第一次",
        ("desc", False): "最后一次",
        ("asc", True): "第二次",
        ("desc", True): "倒数第二次",
    }
    if which == 2:
        # The first value subquery of a comparison; its "offset" ordering follows it.
        firsts = [o for o in orders]
        col, direction, offset = firsts[1] if len(firsts) >= 4 else firsts[0]
        return word[(direction, offset)]
    col, direction, offset = orders[-1]
    if "valuenum" in col and len(orders) > 1:
        raise TemplateMiss("the ordering is by value, not by time")
    return word[(direction, offset)]


def _rank(sql: str) -> str:
    m = re.search(r"dense_rank\(\) over \( order by .*? \) as (c\d+) .*?\.\1 <= (\d+)", sql)
    if not m:
        raise TemplateMiss("no dense_rank cutoff for the top-N phrase")
    return m.group(2)


def _age_group(sql: str) -> str:
    m = re.search(r"\.age between (\d+) and (\d+)", sql)
    if m:
        return f"在{m.group(1)}至{m.group(2)}岁之间"
    m = re.search(r"\.age >= (\d+)", sql)
    if m:
        return f"在{m.group(1)}岁及以上"
    raise TemplateMiss("no age condition for the age-group phrase")


def _survival(sql: str) -> str:
    m = re.search(r"> (\d+) \* 365", sql)
    if not m:
        raise TemplateMiss("no survival period")
    return f"{m.group(1)}年"


def _unit_count(sql: str) -> str:
    m = re.search(r"select (\d+) \* \( strftime\('%J'", sql)
    if not m:
        raise TemplateMiss("no day/hour unit")
    return {"1": "天", "24": "小时"}.get(m.group(1)) or _miss(f"unknown unit factor {m.group(1)}")


def _miss(reason: str) -> str:
    raise TemplateMiss(reason)


def _unit_average(sql: str) -> str:
    m = re.search(rf"group by strftime\('(%Y|%Y-%m|%Y-%m-%d)',{_COL}\)", sql)
    if not m:
        raise TemplateMiss("no grouping period for the per-period phrase")
    return {"%Y": "每年", "%Y-%m": "每月", "%Y-%m-%d": "每日"}[m.group(1)]


def _agg(sql: str) -> str:
    m = re.search(r"^select (min|max|avg|sum|count)\(", sql.strip())
    if not m:
        raise TemplateMiss("no outer aggregate")
    return {"min": "最小值", "max": "最大值", "avg": "平均值", "sum": "总和", "count": "数量"}[
        m.group(1)
    ]


def _comparison(sql: str) -> str:
    m = re.search(r"\) (<|>|<=|>=|=) \( select", sql)
    if not m:
        raise TemplateMiss("no comparison between the two values")
    return {">": "大于", "<": "小于", ">=": "不小于", "<=": "不大于", "=": "等于"}[m.group(1)]


def _sort(sql: str) -> str:
    m = re.search(r"order by \w+\.valuenum (asc|desc)", sql)
    if not m:
        raise TemplateMiss("no value ordering")
    return "最小" if m.group(1) == "asc" else "最大"


def _n_times(sql: str) -> str:
    m = re.search(r"\.c\d+ (>=|=) (\d+)\b", sql)
    if not m:
        raise TemplateMiss("no count condition")
    n = _zh_num(int(m.group(2)))
    return f"{n}次及以上" if m.group(1) == ">=" else f"恰好{n}次"


def _within(sql: str) -> str:
    m = re.search(
        rf"between datetime\({_COL}\) and datetime\({_COL},'\+(\d+) (month|day|year|hour)'\)", sql
    )
    if m:
        return f"{m.group(1)}{_UNITS_ZH[m.group(2)]}内"
    m = re.search(
        rf"datetime\({_COL},'start of (month|day|year)'\) = datetime\({_COL},'start of \1'\)", sql
    )
    if m:
        return {"month": "同一个月内", "day": "同一天内", "year": "同一年内"}[m.group(1)]
    if re.search(rf"datetime\({_COL}\) = datetime\({_COL}\)", sql):
        return "在同一时间"
    if re.search(r"\bt\d\.hadm_id = t\d\.hadm_id\b", sql):
        return "在同一次住院期间"
    raise TemplateMiss("no within-window condition")


_PHRASES: dict[str, Callable[[str], str]] = {
    "time_filter_global1": lambda s: time_filter_global(s, 1),
    "time_filter_global2": lambda s: time_filter_global(s, 2),
    "time_filter_exact1": lambda s: time_filter_exact(s, 1),
    "time_filter_exact2": lambda s: time_filter_exact(s, 2),
    "time_filter_within": _within,
    "n_rank": _rank,
    "age_group": _age_group,
    "n_survival_period": _survival,
    "unit_count": _unit_count,
    "unit_average": _unit_average,
    "agg_function": _agg,
    "comparison": _comparison,
    "sort": _sort,
    "n_times": _n_times,
}


def render_question(
    q_tag: str,
    values: Mapping[str, object],
    sql: str,
    *,
    target_of: Callable[[str], str],
    language: str = "zh",
) -> str:
    """The question of a template in ``language``, filled for one item.

    Args:
        q_tag: the source template.
        values: the item's ``{value}`` slots (as the source SQL spells them).
        sql: the source SQL (EHRSQL's post-processed, lower-case form).
        target_of: how a value is named in the target question (its translated database
            value, or itself).
        language: the template language.

    Raises:
        TemplateMiss: no template for ``q_tag``, a missing value, or a ``[slot]`` the SQL
            does not determine.

    >>> render_question("what is the gender of patient {patient_id}?", {"patient_id": 10004},
    ...                 "select 1", target_of=str)
    '患者10004的性别是什么？'
    """
    template = load_templates(language).get(q_tag)
    if template is None:
        raise TemplateMiss(f"no {language} template for q_tag {q_tag!r}")
    text = " ".join(sql.split())

    def value(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise TemplateMiss(f"the item has no value for {{{key}}}")
        raw = values[key]
        if isinstance(raw, float) and raw.is_integer():
            return str(int(raw))
        return str(raw) if isinstance(raw, int | float) else target_of(str(raw))

    def phrase(m: re.Match[str]) -> str:
        fn = _PHRASES.get(m.group(1))
        if fn is None:
            raise TemplateMiss(f"no rule for the [{m.group(1)}] phrase")
        return fn(text)

    out = _PHRASE_SLOT.sub(phrase, _VALUE_SLOT.sub(value, template))
    out = out.lstrip("，")
    # A time phrase before another 在 phrase drops its own: "2102年在病房12住过", not "在…在…".
    out = re.sub(r"(^|[，、])在(\d{4}年(?:\d{1,2}月)?(?:\d{1,2}日)?)(?=在)", r"\1\2", out)
    return out


__all__ = ["TemplateMiss", "load_templates", "render_question", "time_filter_global"]
