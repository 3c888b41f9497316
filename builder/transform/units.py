"""Translation units: which columns hold the same entities, and which values to localize.

Every text-bearing column is a vertex. Columns joined by a declared foreign key or sharing a
normalized name start in one cluster; then clusters whose distinct value sets overlap with
coefficient |V(Cx) ∩ V(Cy)| / min(|V(Cx)|, |V(Cy)|) > θ, sharing at least k_min values, are
merged until nothing changes. The values worth translating are then filtered (nulls,
numbers, dates and times, URLs, e-mails, paths, machine ids, standardized codes, values
already in the target language, a protected glossary), deduplicated within each cluster
with all their (table, column) occurrences kept, and chunked to a prompt budget; chunking
never changes the clusters.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from builder.transform.schema import Schema, quote_ident

logger = logging.getLogger(__name__)

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NUMBER = re.compile(r"^[+-]?(\d+([.,]\d+)*|\.\d+)([eE][+-]?\d+)?%?$")
_DATE = re.compile(
    r"^\d{4}[-/.]\d{1,2}([-/.]\d{1,2})?([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$"
    r"|^\d{1,2}:\d{2}(:\d{2})?$|^\d{4}年(\d{1,2}月(\d{1,2}日)?)?$"
)
_URL = re.compile(r"^(https?|ftp)://|^www\.", re.I)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
_PATH = re.compile(
    r"^(/|\./|\.\./|~/|[A-Za-z]:\\)|^[\w.-]+([/\\][\w.-]+){2,}$"
    r"|^[\w.-]+([/\\][\w.-]+)+\.[A-Za-z0-9]{1,5}$"
)
_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.I)
_HEX = re.compile(r"^(0x)?[0-9a-f]{8,}$", re.I)
_CODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/]{0,15}$")
_ACRONYM = re.compile(r"^[A-Z][A-Z0-9&]{0,5}$")
_MIXED_ID = re.compile(r"^(?=\S*\d)(?=\S*[A-Za-z])[A-Za-z0-9_\-:.#]{4,}$")


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains Chinese characters.

    >>> has_cjk("基金A"), has_cjk("fund")
    (True, False)
    """
    return bool(_CJK.search(text))


def skip_reason(
    value: Any, target_language: str, protected: frozenset[str] = frozenset()
) -> str | None:
    """Why a value must not be localized, or None when it should be translated.

    >>> [skip_reason(v, "zh") for v in ("glucose", "2105-12-31 23:59:00", "4019", "V1582",
    ...                                 "https://x.org", "杭州市", "12.5%", "a1b2c3d4")]
    [None, 'date', 'number', 'code', 'url', 'target_language', 'number', 'machine_id']
    >>> skip_reason("杭州市", "en") is None
    True
    """
    if value is None:
        return "null"
    if not isinstance(value, str):
        return "not_text"
    text = value.strip()
    if not text:
        return "empty"
    if value in protected or text in protected:
        return "protected"
    if _NUMBER.match(text):
        return "number"
    if _DATE.match(text):
        return "date"
    if _URL.match(text):
        return "url"
    if _EMAIL.match(text):
        return "email"
    if _UUID.match(text) or (_HEX.match(text) and any(c.isdigit() for c in text)):
        return "machine_id"
    if _PATH.match(text) and " " not in text:
        return "path"
    if (_CODE.match(text) and any(c.isdigit() for c in text)) or _ACRONYM.match(text):
        return "code"
    if _MIXED_ID.match(text) and not any(c.isspace() for c in text):
        return "machine_id"
    if len(text) == 1 and text.isascii():
        return "code"
    cjk = has_cjk(text)
    if target_language == "zh" and cjk:
        return "target_language"
    if target_language == "en" and not cjk:
        return "target_language"
    return None


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """One translation unit: columns holding the same entities, and its values to translate.

    Attributes:
        id: stable id (``cl:<table>.<column>`` of its first column).
        columns: its (table, column) occurrences in schema order.
        values: the distinct values to translate, sorted.
        skipped: how many distinct values each filter removed.
    """

    id: str
    columns: tuple[tuple[str, str], ...]
    values: tuple[str, ...]
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ValueChunk:
    """Values of one cluster that fit one prompt."""

    cluster_id: str
    index: int
    values: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Units:
    """Clusters, their value chunks and the distinct text values of every column."""

    clusters: tuple[Cluster, ...]
    chunks: tuple[ValueChunk, ...]
    column_values: dict[tuple[str, str], frozenset[str]]

    def cluster_of(self, table: str, column: str) -> Cluster | None:
        """The cluster holding ``table.column``."""
        key = (table.lower(), column.lower())
        for c in self.clusters:
            if any((t.lower(), col.lower()) == key for t, col in c.columns):
                return c
        return None

    def stats(self) -> dict[str, Any]:
        """Counts for the ledger."""
        skipped: dict[str, int] = {}
        for c in self.clusters:
            for k, v in c.skipped.items():
                skipped[k] = skipped.get(k, 0) + v
        return {
            "text_columns": sum(len(c.columns) for c in self.clusters),
            "clusters": len(self.clusters),
            "multi_column_clusters": sum(1 for c in self.clusters if len(c.columns) > 1),
            "values_to_translate": sum(len(c.values) for c in self.clusters),
            "chunks": len(self.chunks),
            "skipped": skipped,
        }


def normalized_name(name: str) -> str:
    """Column name normalized for "same name" linking.

    >>> normalized_name("Subject_ID"), normalized_name("subjectid")
    ('subjectid', 'subjectid')
    """
    return re.sub(r"[^0-9a-z\u3400-\u9fff]", "", name.lower())


class _UnionFind:
    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self.parent = {i: i for i in items}

    def find(self, x: tuple[str, str]) -> tuple[str, str]:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[rb] = ra
        return True


def extract_units(
    conn: sqlite3.Connection,
    schema: Schema,
    *,
    target_language: str,
    theta: float = 0.5,
    k_min: int = 3,
    protected: Iterable[str] = (),
    chunk_chars: int = 3000,
    chunk_items: int = 200,
) -> Units:
    """Cluster the text columns of a database and collect the values to translate.

    Args:
        conn: connection to the source database.
        schema: its schema.
        target_language: ``zh`` or ``en``.
        theta: overlap coefficient a merge must exceed.
        k_min: values two clusters must share to merge.
        protected: values never to translate.
        chunk_chars: most characters of values in one chunk.
        chunk_items: most values in one chunk.
    """
    prot = frozenset(protected)
    col_values: dict[tuple[str, str], frozenset[str]] = {}
    order: list[tuple[str, str]] = []
    for t in schema.tables:
        for c in t.columns:
            q = (
                f"select distinct {quote_ident(c.name)} from {quote_ident(t.name)} "
                f"where typeof({quote_ident(c.name)}) = 'text'"
            )
            vals = frozenset(r[0] for r in conn.execute(q))
            if vals:
                col_values[(t.name, c.name)] = vals
                order.append((t.name, c.name))
    uf = _UnionFind(order)
    for fk in schema.foreign_keys:
        for cc, pc in zip(fk.child_columns, fk.parent_columns, strict=True):
            a, b = _key(order, fk.child, cc), _key(order, fk.parent, pc)
            if a and b:
                uf.union(a, b)
    by_name: dict[str, tuple[str, str]] = {}
    for key in order:
        first = by_name.setdefault(normalized_name(key[1]), key)
        if first != key:
            uf.union(first, key)
    changed = True
    while changed:
        changed = False
        groups = _groups(uf, order)
        values = {
            root: frozenset().union(*(col_values[m] for m in members))
            for root, members in groups.items()
        }
        roots = list(groups)
        for i, a in enumerate(roots):
            for b in roots[i + 1 :]:
                if uf.find(a) == uf.find(b):
                    continue
                va, vb = values[a], values[b]
                small = min(len(va), len(vb))
                if not small:
                    continue
                inter = len(va & vb)
                if inter >= k_min and inter / small > theta:
                    uf.union(a, b)
                    changed = True
    clusters: list[Cluster] = []
    chunks: list[ValueChunk] = []
    for _root, members in _groups(uf, order).items():
        cid = f"cl:{members[0][0]}.{members[0][1]}".lower()
        distinct = frozenset().union(*(col_values[m] for m in members))
        keep: list[str] = []
        skipped: dict[str, int] = {}
        for v in distinct:
            why = skip_reason(v, target_language, prot)
            if why is None:
                keep.append(v)
            else:
                skipped[why] = skipped.get(why, 0) + 1
        keep.sort()
        clusters.append(
            Cluster(id=cid, columns=tuple(members), values=tuple(keep), skipped=skipped)
        )
        chunks.extend(_chunk(cid, keep, chunk_chars, chunk_items))
    return Units(clusters=tuple(clusters), chunks=tuple(chunks), column_values=col_values)


def _key(order: list[tuple[str, str]], table: str, column: str) -> tuple[str, str] | None:
    for t, c in order:
        if t.lower() == table.lower() and c.lower() == column.lower():
            return (t, c)
    return None


def _groups(
    uf: _UnionFind, order: list[tuple[str, str]]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for key in order:
        groups.setdefault(uf.find(key), []).append(key)
    return groups


def _chunk(cid: str, values: list[str], chars: int, items: int) -> list[ValueChunk]:
    out: list[ValueChunk] = []
    cur: list[str] = []
    size = 0
    for v in values:
        if cur and (size + len(v) > chars or len(cur) >= items):
            out.append(ValueChunk(cluster_id=cid, index=len(out), values=tuple(cur)))
            cur, size = [], 0
        cur.append(v)
        size += len(v)
    if cur:
        out.append(ValueChunk(cluster_id=cid, index=len(out), values=tuple(cur)))
    return out


__all__ = [
    "Cluster",
    "Units",
    "ValueChunk",
    "extract_units",
    "has_cjk",
    "normalized_name",
    "skip_reason",
]
