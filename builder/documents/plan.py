"""Document plans: genre, anchor columns, attribute clusters and row batches under a budget.

A plan says how one table becomes a long-form document without putting the whole table in
one generation call: the genre sets the voice, the anchor columns identify each record and
are repeated in every block (so sections about the same record stay joinable), the other
columns are grouped into attribute clusters by semantic role, and the rows are cut into
batches so that no block exceeds the cell budget. A small table is one batch and one
cluster. ``check_plan`` validates any plan (the deterministic planner's or a model's).
"""

from __future__ import annotations

import logging
import random
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from builder.documents.values import column_kind, has_cjk
from builder.tables import TableData

logger = logging.getLogger(__name__)

NULL_POLICIES = ("state", "omit")
PASS_ORDERS = ("horizontal", "vertical", "alternate")
GENRES: dict[str, dict[str, str]] = {
    "clinical_event_ledger": {"en": "Clinical event ledger", "zh": "临床事件台账"},
    "patient_registry": {"en": "Patient registry digest", "zh": "患者登记摘要"},
    "pharmacy_log": {"en": "Pharmacy dispensing log", "zh": "药房发药记录"},
    "billing_audit": {"en": "Billing audit report", "zh": "费用审计报告"},
    "code_catalogue": {"en": "Reference code catalogue", "zh": "参考编码目录"},
    "financial_audit": {"en": "Financial audit memorandum", "zh": "财务审计备忘录"},
    "fund_factsheet": {"en": "Fund factsheet compendium", "zh": "基金概况汇编"},
    "market_bulletin": {"en": "Market trading bulletin", "zh": "市场交易简报"},
    "corporate_registry": {"en": "Corporate registry review", "zh": "上市公司档案综述"},
    "macro_briefing": {"en": "Macroeconomic briefing", "zh": "宏观经济简报"},
    "operational_briefing": {"en": "Operational briefing", "zh": "运营情况简报"},
}
CLINICAL_GENRES = frozenset(
    {"clinical_event_ledger", "patient_registry", "pharmacy_log", "billing_audit", "code_catalogue"}
)
_GENRE_RULES: tuple[tuple[str, str], ...] = (
    (r"^mf_|fund|netvalue|manager|advisor|基金|净值|经理", "fund_factsheet"),
    (r"prescription|drug|pharm|处方|药", "pharmacy_log"),
    (r"cost|charge|bill|fee|费用|收费|账单", "billing_audit"),
    (r"^d_|dict|catalog|items?$|icd|字典|目录|编码|项目", "code_catalogue"),
    (
        r"patient|admission|icustay|transfer|person|患者|病人|入院|住院|转科|重症",
        "patient_registry",
    ),
    (
        r"event|lab|chart|output|input|micro|procedure|diagnos|事件|化验|检验|排出|输入|微生物|手术|诊断",
        "clinical_event_ledger",
    ),
    (r"quote|price|trade|^qt_|行情|价格|交易", "market_bulletin"),
    (r"gdp|cpi|macro|^ed_|^fm_|^in_|econom|宏观|经济", "macro_briefing"),
    (r"dividend|balance|income|cash|audit|finan|分红|资产负债|利润|现金|财务", "financial_audit"),
    (r"stock|company|archive|industry|^lc_|股票|公司|档案|行业", "corporate_registry"),
)
_DOMAIN_GENRES = {
    "healthcare": "clinical_event_ledger",
    "fund": "fund_factsheet",
    "stock": "corporate_registry",
    "macro": "macro_briefing",
}


@dataclass(frozen=True, kw_only=True)
class ColumnInfo:
    """One column as a document sees it: its kind, prose label and key role."""

    name: str
    kind: str
    label: str
    is_key: bool = False


@dataclass(frozen=True, kw_only=True)
class DocumentPlan:
    """How one table is written as a document.

    Attributes:
        table: the table name.
        genre: a key of ``GENRES`` (or any short genre a model proposed).
        language: ``en`` or ``zh``: the language of the prose.
        title: the document title.
        columns: every column of the table, in table order.
        anchors: the columns that identify a record, repeated in every block.
        clusters: attribute clusters (non-anchor columns), each a tuple of column names.
        cluster_names: a short name per cluster (section subtitles).
        batches: row batches (row indices into the table), covering every row once.
        pass_order: ``horizontal`` (batch by batch), ``vertical`` (cluster by cluster) or
            ``alternate``.
        null_policy: ``state`` (say a field is unavailable) or ``omit`` (leave it out).
        date_style: how dates are written (``builder.documents.values.DATE_STYLES``).
        thousands: whether large non-identifier integers get thousands separators.
        seed: the seed the writer draws variation from.
    """

    table: str
    genre: str
    language: str
    title: str
    columns: tuple[ColumnInfo, ...]
    anchors: tuple[str, ...]
    clusters: tuple[tuple[str, ...], ...]
    cluster_names: tuple[str, ...]
    batches: tuple[tuple[int, ...], ...]
    pass_order: str = "horizontal"
    null_policy: str = "state"
    date_style: str = "iso"
    thousands: bool = False
    seed: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def column(self, name: str) -> ColumnInfo:
        """The info of one column."""
        for col in self.columns:
            if col.name == name:
                return col
        raise KeyError(name)

    def block_order(self) -> list[tuple[int, int]]:
        """(batch, cluster) pairs in generation order."""
        nb, nc = len(self.batches), len(self.clusters)
        if self.pass_order == "vertical":
            return [(b, c) for c in range(nc) for b in range(nb)]
        if self.pass_order == "alternate":
            return [(b, c if b % 2 == 0 else nc - 1 - c) for b in range(nb) for c in range(nc)]
        return [(b, c) for b in range(nb) for c in range(nc)]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (for the ledger)."""
        return {
            "table": self.table,
            "genre": self.genre,
            "language": self.language,
            "title": self.title,
            "anchors": list(self.anchors),
            "clusters": [list(c) for c in self.clusters],
            "cluster_names": list(self.cluster_names),
            "batches": [len(b) for b in self.batches],
            "pass_order": self.pass_order,
            "null_policy": self.null_policy,
            "date_style": self.date_style,
            "thousands": self.thousands,
            "seed": self.seed,
            "columns": [
                {"name": c.name, "kind": c.kind, "label": c.label, "is_key": c.is_key}
                for c in self.columns
            ],
        }


_LABELS_EN = {
    "row_id": "row ID",
    "subject_id": "patient ID",
    "hadm_id": "admission ID",
    "icustay_id": "ICU stay ID",
    "itemid": "item ID",
    "charttime": "chart time",
    "valuenum": "numeric result",
    "valueuom": "unit",
    "startdate": "start date",
    "enddate": "end date",
    "dob": "date of birth",
    "dod": "date of death",
    "admittime": "admission time",
    "dischtime": "discharge time",
    "icd9_code": "ICD code",
    "short_title": "short title",
    "long_title": "long title",
    "event_type": "event type",
    "event_id": "event ID",
    "chargetime": "charge time",
    "dose_val_rx": "prescribed dose",
    "dose_unit_rx": "dose unit",
    "secucode": "security code",
    "chinameabbr": "short name",
    "chiname": "company name",
    "companycode": "company code",
    "tradingday": "trading day",
    "closeprice": "closing price",
    "openprice": "opening price",
    "innercode": "inner code",
}
_LABELS_ZH = {
    "row_id": "行号",
    "subject_id": "患者编号",
    "hadm_id": "住院编号",
    "icustay_id": "ICU住院编号",
    "itemid": "项目编号",
    "charttime": "记录时间",
    "valuenum": "数值结果",
    "valueuom": "单位",
    "startdate": "开始日期",
    "enddate": "结束日期",
    "dob": "出生日期",
    "dod": "死亡日期",
    "gender": "性别",
    "admittime": "入院时间",
    "dischtime": "出院时间",
    "cost": "费用",
    "drug": "药品",
    "route": "给药途径",
    "label": "名称",
    "icd9_code": "ICD编码",
    "event_type": "事件类型",
    "event_id": "事件编号",
    "chargetime": "计费时间",
    "secucode": "证券代码",
    "chinameabbr": "公司简称",
    "chiname": "公司全称",
    "companycode": "公司代码",
    "tradingday": "交易日",
    "closeprice": "收盘价",
    "openprice": "开盘价",
    "innercode": "内部编码",
    "city": "城市",
    "state": "省份",
}


def known_label(name: str, language: str) -> str | None:
    """A column's domain label when the label lists know it (None for other names).

    >>> known_label("SUBJECT_ID", "zh"), known_label("WARDID", "en")
    ('患者编号', None)
    """
    if has_cjk(name):
        return name
    return (_LABELS_ZH if language == "zh" else _LABELS_EN).get(name.lower())


def column_label(name: str, language: str) -> str:
    """A prose label for a column (known names get a domain label, others are humanized).

    >>> column_label("SUBJECT_ID", "en"), column_label("valuenum", "zh")
    ('patient ID', '数值结果')
    >>> column_label("firstindustryname", "en"), column_label("amount_usd", "en")
    ('firstindustryname', 'amount usd')
    """
    key = name.lower()
    if has_cjk(name):
        return name
    table = _LABELS_ZH if language == "zh" else _LABELS_EN
    if key in table:
        return table[key]
    if language == "zh":
        return f"“{name}”"
    return re.sub(r"\s+", " ", name.replace("_", " ")).strip().lower() or name


def _keys(table: TableData) -> tuple[set[str], set[str]]:
    """Primary-key and foreign-key columns, from the table's DDL."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(table.schema.ddl)
        name = table.schema.name.replace('"', '""')
        pk = {r[1] for r in conn.execute(f'pragma table_info("{name}")') if r[5]}
        fk = {r[3] for r in conn.execute(f'pragma foreign_key_list("{name}")')}
        for idx in conn.execute(f'pragma index_list("{name}")').fetchall():
            if idx[2]:  # unique
                cols = [r[2] for r in conn.execute(f'pragma index_info("{idx[1]}")')]
                if len(cols) == 1:
                    pk.add(cols[0])
    except sqlite3.Error:
        return set(), set()
    finally:
        conn.close()
    return pk, fk


def describe_columns(table: TableData, language: str) -> tuple[ColumnInfo, ...]:
    """Kind, label and key role of every column."""
    pk, fk = _keys(table)
    out = []
    for i, name in enumerate(table.schema.columns):
        values = [row[i] for row in table.rows]
        is_key = name in pk or name in fk
        out.append(
            ColumnInfo(
                name=name,
                kind=column_kind(name, values, is_key=is_key),
                label=column_label(name, language),
                is_key=is_key,
            )
        )
    return tuple(out)


def _unique(table: TableData, cols: Sequence[str]) -> bool:
    idx = [table.schema.columns.index(c) for c in cols]
    seen = set()
    for row in table.rows:
        key = tuple(row[i] for i in idx)
        if any(v is None for v in key) or key in seen:
            return False
        seen.add(key)
    return True


def choose_anchors(table: TableData, columns: Sequence[ColumnInfo]) -> tuple[str, ...] | None:
    """Columns that identify every row, or None when rows are not distinguishable.

    Declared keys first, then id-like unique columns, then any unique column, then a pair.
    """
    if not table.rows:
        return None
    keyed = [c.name for c in columns if c.is_key and c.kind in ("identifier", "text")]
    idlike = [c.name for c in columns if c.kind == "identifier"]
    others = [c.name for c in columns if c.kind in ("text", "date", "datetime")]
    for cand in (*keyed, *idlike, *others):
        if _unique(table, [cand]):
            return (cand,)
    names = [*dict.fromkeys([*idlike, *keyed, *others])]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if _unique(table, [a, b]):
                return (a, b)
    return None


def choose_genre(table_name: str, column_names: Sequence[str], domain: str = "") -> str:
    """A genre from the table's name (then its columns), within the table's domain.

    A clinical table never gets a financial genre and back; a table no rule recognizes
    gets its domain's default genre (``operational_briefing`` without a domain).

    >>> choose_genre("LABEVENTS", []), choose_genre("mf_netvalue", []), choose_genre("x", [])
    ('clinical_event_ledger', 'fund_factsheet', 'operational_briefing')
    >>> choose_genre("化验记录", []), choose_genre("护理单元", [], "healthcare")
    ('clinical_event_ledger', 'clinical_event_ledger')
    """
    clinical = domain == "healthcare"
    finance = domain in ("fund", "stock", "macro", "finance")
    for text in (table_name.lower(), " ".join(column_names).lower()):
        for pattern, genre in _GENRE_RULES:
            if clinical and genre not in CLINICAL_GENRES:
                continue
            if finance and genre in CLINICAL_GENRES:
                continue
            if re.search(pattern, text):
                return genre
    return _DOMAIN_GENRES.get(domain, "operational_briefing")


_ROLE_NAMES = {
    "en": {
        "time": "timeline",
        "measure": "measurements",
        "ref": "linked records",
        "desc": "descriptive details",
    },
    "zh": {"time": "时间信息", "measure": "数值指标", "ref": "关联记录", "desc": "描述信息"},
}


def _role(col: ColumnInfo) -> str:
    if col.kind in ("date", "datetime"):
        return "time"
    if col.kind in ("integer", "decimal"):
        return "measure"
    if col.kind == "identifier":
        return "ref"
    return "desc"


def plan_document(
    table: TableData,
    *,
    language: str,
    seed: int,
    block_cells: int = 48,
    small_cells: int = 60,
    max_cluster: int = 4,
    genre: str | None = None,
    domain: str = "",
    null_policy: str | None = None,
    pass_order: str | None = None,
) -> DocumentPlan:
    """The deterministic planner.

    Args:
        table: the table.
        language: ``en`` or ``zh``.
        seed: seeds the variation (null policy, pass order, date style when not given).
        block_cells: the most cells (anchors included) one block may carry.
        small_cells: a table with at most this many cells is written in one block.
        max_cluster: the most columns in one attribute cluster.
        genre: a genre instead of choosing one.
        domain: the table's domain (``healthcare``, ``fund`` ...): genres stay within it.
        null_policy: a null policy instead of choosing one.
        pass_order: a pass order instead of choosing one.

    Raises:
        ValueError: the table has no rows or no columns that identify its rows.
    """
    rng = random.Random(f"plan:{seed}:{table.name}")
    columns = describe_columns(table, language)
    anchors = choose_anchors(table, columns)
    if anchors is None:
        raise ValueError(f"table {table.name!r}: no rows, or no columns identify its rows")
    rest = [c for c in columns if c.name not in anchors]
    total = len(table.rows) * len(columns)
    names = _ROLE_NAMES["zh" if language == "zh" else "en"]
    one_pass = total <= min(small_cells, block_cells)
    clusters: list[tuple[str, ...]]
    cluster_names: list[str]
    if one_pass or len(rest) <= 1:
        clusters = [tuple(c.name for c in rest)] if rest else [()]
        cluster_names = [names["desc"]]
    else:
        groups: dict[str, list[str]] = {}
        for col in rest:
            groups.setdefault(_role(col), []).append(col.name)
        clusters, cluster_names = [], []
        for role in ("ref", "time", "measure", "desc"):
            cols = groups.get(role, [])
            for i in range(0, len(cols), max_cluster):
                clusters.append(tuple(cols[i : i + max_cluster]))
                cluster_names.append(names[role])
        # fold single-column clusters into their neighbour so blocks are not too thin
        while len(clusters) > 1 and min(len(c) for c in clusters) == 1:
            i = min(range(len(clusters)), key=lambda k: len(clusters[k]))
            j = i - 1 if i > 0 else 1
            if len(clusters[i]) + len(clusters[j]) > max_cluster + 1:
                break
            lo, hi = sorted((i, j))
            clusters[lo] = clusters[lo] + clusters[hi]
            del clusters[hi], cluster_names[hi]
    widest = len(anchors) + max((len(c) for c in clusters), default=0)
    per_batch = len(table.rows) if one_pass else max(1, block_cells // widest)
    rows = list(range(len(table.rows)))
    batches = tuple(tuple(rows[i : i + per_batch]) for i in range(0, len(rows), per_batch))
    genre = genre or choose_genre(table.name, table.schema.columns, domain)
    title_genre = GENRES.get(genre, {}).get(language, genre)
    title = f"{title_genre}：{table.name}" if language == "zh" else f"{title_genre}: {table.name}"
    has_dates = any(c.kind in ("date", "datetime") for c in columns)
    styles = ("zh", "iso") if language == "zh" else ("iso", "long", "day_first", "slash")
    return DocumentPlan(
        table=table.name,
        genre=genre,
        language=language,
        title=title,
        columns=columns,
        anchors=anchors,
        clusters=tuple(clusters),
        cluster_names=tuple(cluster_names),
        batches=batches,
        pass_order=pass_order or rng.choice(PASS_ORDERS),
        null_policy=null_policy or rng.choice(NULL_POLICIES),
        date_style=rng.choice(styles) if has_dates else "iso",
        thousands=rng.random() < 0.5,
        seed=seed,
    )


def check_plan(
    plan: DocumentPlan, table: TableData, *, block_cells: int | None = None
) -> list[str]:
    """Why a plan cannot render ``table`` faithfully (empty when it can).

    Checks: anchors exist and identify every row; clusters partition the other columns;
    batches cover every row exactly once and respect the cell budget; the policies are
    known; the genre and title are short non-empty text.
    """
    errors: list[str] = []
    names = list(table.schema.columns)
    if [c.name for c in plan.columns] != names:
        errors.append(f"plan columns {[c.name for c in plan.columns]} are not the table's")
    missing = [a for a in plan.anchors if a not in names]
    if not plan.anchors or missing:
        errors.append(f"anchor columns {list(plan.anchors)} are not all columns of the table")
    elif not _unique(table, plan.anchors):
        errors.append(
            f"anchor columns {list(plan.anchors)} do not identify every row (duplicates or nulls)"
        )
    seen: dict[str, int] = {}
    for cluster in plan.clusters:
        for col in cluster:
            seen[col] = seen.get(col, 0) + 1
    rest = [c for c in names if c not in plan.anchors]
    for col in rest:
        if seen.get(col, 0) != 1:
            errors.append(f"column {col!r} is in {seen.get(col, 0)} clusters (must be 1)")
    for col in seen:
        if col not in rest:
            errors.append(f"cluster column {col!r} is an anchor or not in the table")
    if len(plan.cluster_names) != len(plan.clusters):
        errors.append("every cluster needs a name")
    counts: dict[int, int] = {}
    for batch in plan.batches:
        for r in batch:
            counts[r] = counts.get(r, 0) + 1
    if sorted(counts) != list(range(len(table.rows))) or any(v != 1 for v in counts.values()):
        errors.append("row batches must cover every row exactly once")
    if block_cells is not None:
        widest = len(plan.anchors) + max((len(c) for c in plan.clusters), default=0)
        if any(len(b) * widest > max(block_cells, widest) for b in plan.batches):
            errors.append(f"a row batch exceeds the budget of {block_cells} cells per block")
    if plan.null_policy not in NULL_POLICIES:
        errors.append(f"null policy {plan.null_policy!r} is not one of {list(NULL_POLICIES)}")
    if plan.pass_order not in PASS_ORDERS:
        errors.append(f"pass order {plan.pass_order!r} is not one of {list(PASS_ORDERS)}")
    for key in ("genre", "title"):
        text = getattr(plan, key)
        if not isinstance(text, str) or not text.strip() or len(text) > 160:
            errors.append(f"{key} must be short non-empty text")
    if plan.language not in ("en", "zh"):
        errors.append(f"language {plan.language!r} must be en or zh")
    return errors


def with_choices(plan: DocumentPlan, **changes: Any) -> DocumentPlan:
    """A copy of a plan with some fields changed (the plan stays frozen)."""
    return replace(plan, **changes)


__all__ = [
    "GENRES",
    "NULL_POLICIES",
    "PASS_ORDERS",
    "ColumnInfo",
    "DocumentPlan",
    "check_plan",
    "choose_anchors",
    "choose_genre",
    "column_label",
    "describe_columns",
    "plan_document",
    "with_choices",
]
