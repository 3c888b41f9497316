"""Row selection: anchors, soft-budget fill and relational closure (one attempt).

1. **Anchors**: the rows each block's witness accepts (matched tuples kept together,
   capped per block with the attempt's seed), the rows of named target entities, a few
   rows of each predicate binding on its own (same operator as the SQL), a few rows lying
   exactly on each interval boundary, and the sampled rows of the optional anchor table.
2. **Query-path closure**: every protected row keeps a match along each protected join path
   (joins and correlations both ways, semi-joins from the filtered side), preferring rows the
   other block's witness accepts, at most ``join_fanout`` per row.
3. **Fill** each table up to its soft budget, parents before children; with
   ``connected_fill`` a child table first takes rows whose parents are already selected.
   Tables no larger than their budget are kept whole.
4. **Foreign-key closure**: every selected child row brings its referenced parent row,
   until nothing is added; cycles terminate because rows only come from the finite source.

Missing referenced keys that already dangle in the source are counted, never invented.
"""

from __future__ import annotations

import logging
import random
import sqlite3
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import Rejected
from builder.sampling.policy import SamplingPolicy
from builder.sampling.safeguards import (
    PredicateBinding,
    QueryRelationship,
    Safeguards,
    Witness,
    predicate_sql,
)
from builder.transform.schema import ForeignKey, Schema, quote_ident

logger = logging.getLogger(__name__)


class SamplingError(Rejected, ValueError):
    """A sampling failure with a one-line reason; ``retry`` when another seed may help."""

    stage_name = "sample"

    def __init__(self, reason: str, *, retry: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry


class SourceIndex:
    """Row ids and column values of one database, read lazily.

    Args:
        conn: an open connection to the database being sampled.
        schema: its schema.
    """

    def __init__(self, conn: sqlite3.Connection, schema: Schema) -> None:
        self.conn = conn
        self.schema = schema
        self._keys: dict[str, list[int]] = {}
        self._values: dict[tuple[str, tuple[str, ...]], dict[int, tuple[Any, ...]]] = {}
        self._index: dict[tuple[str, tuple[str, ...]], dict[tuple[Any, ...], list[int]]] = {}
        self._witness: dict[str, list[tuple[Any, ...]]] = {}
        self._matching: dict[str, list[int]] = {}

    def keys(self, table: str) -> list[int]:
        """Every rowid of ``table``, ascending (empty for WITHOUT ROWID tables)."""
        if table not in self._keys:
            info = self.schema.table(table)
            if info is None or info.without_rowid:
                self._keys[table] = []
            else:
                self._keys[table] = [
                    r[0]
                    for r in self.conn.execute(
                        f"select rowid from {quote_ident(table)} order by rowid"
                    )
                ]
        return self._keys[table]

    def values(self, table: str, cols: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """``rowid -> (values of cols)`` for rows where every one of ``cols`` is non-null.

        Numbers are normalized so that ``3.0`` and ``3`` compare equal, as in SQLite.
        """
        key = (table, tuple(c.lower() for c in cols))
        if key not in self._values:
            sel = ", ".join(quote_ident(c) for c in cols)
            cond = " and ".join(f"{quote_ident(c)} is not null" for c in cols)
            self._values[key] = {
                r[0]: _norm(tuple(r[1:]))
                for r in self.conn.execute(
                    f"select rowid, {sel} from {quote_ident(table)} where {cond}"
                )
            }
        return self._values[key]

    def index(self, table: str, cols: Sequence[str]) -> dict[tuple[Any, ...], list[int]]:
        """``(values of cols) -> [rowid, ...]`` (ascending)."""
        key = (table, tuple(c.lower() for c in cols))
        if key not in self._index:
            idx: dict[tuple[Any, ...], list[int]] = {}
            for rid, vals in sorted(self.values(table, cols).items()):
                idx.setdefault(vals, []).append(rid)
            self._index[key] = idx
        return self._index[key]

    def lookup(self, table: str, cols: Sequence[str], vals: tuple[Any, ...]) -> list[int]:
        """Rows of ``table`` whose ``cols`` equal ``vals`` (numbers compare by value)."""
        return self.index(table, cols).get(_norm(vals), [])

    def matching(self, binding: PredicateBinding) -> list[int]:
        """Rowids of the rows a predicate binding matches (cached)."""
        key = repr(binding.to_json())
        if key not in self._matching:
            where, params = predicate_sql(binding)
            self._matching[key] = [
                r[0]
                for r in self.conn.execute(
                    f"select rowid from {quote_ident(binding.table)} where {where} order by rowid",
                    params,
                )
            ]
        return self._matching[key]

    def witness(self, w: Witness) -> list[tuple[Any, ...]]:
        """The rows of a witness query (cached)."""
        if w.sql not in self._witness:
            self._witness[w.sql] = [tuple(r) for r in self.conn.execute(w.sql)]
        return self._witness[w.sql]


_INDEXES: OrderedDict[tuple[str, int, int], SourceIndex] = OrderedDict()


def source_index(path: Path, schema: Schema) -> SourceIndex:
    """A cached ``SourceIndex`` for a database file (keyed by path, size and mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    hit = _INDEXES.get(key)
    if hit is not None:
        _INDEXES.move_to_end(key)
        return hit
    conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, check_same_thread=False)
    idx = SourceIndex(conn, schema)
    _INDEXES[key] = idx
    while len(_INDEXES) > 4:
        _old, evicted = _INDEXES.popitem(last=False)
        evicted.conn.close()
    return idx


def _norm(vals: tuple[Any, ...]) -> tuple[Any, ...]:
    # SQLite compares 3 and 3.0 (and, with numeric affinity, '3') as equal.
    out = []
    for v in vals:
        if isinstance(v, float) and v.is_integer():
            out.append(int(v))
        else:
            out.append(v)
    return tuple(out)


@dataclass(kw_only=True)
class Selection:
    """The rows chosen for one attempt, with where they came from."""

    rows: dict[str, set[int]]
    protected: dict[str, set[int]]
    anchors: dict[str, int] = field(default_factory=dict)
    boundary_rows: dict[str, int] = field(default_factory=dict)
    predicate_rows: dict[str, int] = field(default_factory=dict)
    path_added: dict[str, int] = field(default_factory=dict)
    filled: dict[str, int] = field(default_factory=dict)
    closure_added: dict[str, int] = field(default_factory=dict)
    dangling: dict[str, int] = field(default_factory=dict)
    relationships_added: list[str] = field(default_factory=list)
    capped_witnesses: list[int] = field(default_factory=list)


def foreign_keys(schema: Schema, policy: SamplingPolicy) -> list[ForeignKey]:
    """Declared foreign keys plus the policy's extra relationships (resolved to real names).

    Raises:
        SamplingError: an extra relationship names an unknown table or column.
    """
    out = [fk for fk in schema.foreign_keys if schema.table(fk.parent) is not None]
    for rel in policy.extra_relationships:
        child, parent = schema.table(rel.child), schema.table(rel.parent)
        if child is None or parent is None:
            raise SamplingError(f"extra relationship names an unknown table: {rel}", retry=False)
        ccols = [child.column(c) for c in rel.child_columns]
        pcols = [parent.column(c) for c in rel.parent_columns]
        if any(c is None for c in ccols) or any(c is None for c in pcols):
            raise SamplingError(f"extra relationship names an unknown column: {rel}", retry=False)
        out.append(
            ForeignKey(
                child=child.name,
                child_columns=tuple(c.name for c in ccols if c),
                parent=parent.name,
                parent_columns=tuple(c.name for c in pcols if c),
                declared=False,
            )
        )
    return out


def check_relationships(
    index: SourceIndex, schema: Schema, rels: Iterable[QueryRelationship]
) -> None:
    """Refuse type-incompatible join columns and protected joins with no match at all.

    Raises:
        SamplingError: (not retryable) naming the relationship.
    """
    numeric = {"INTEGER", "REAL", "NUMERIC"}
    for rel in rels:
        lt, rt = schema.table(rel.left), schema.table(rel.right)
        if lt is None or rt is None:
            continue
        for lc, rc in zip(rel.left_columns, rel.right_columns, strict=True):
            la = lt.column(lc).affinity if lt.column(lc) else "BLOB"  # type: ignore[union-attr]
            ra = rt.column(rc).affinity if rt.column(rc) else "BLOB"  # type: ignore[union-attr]
            if (la in numeric and ra == "TEXT") or (ra in numeric and la == "TEXT"):
                raise SamplingError(
                    f"type-incompatible join columns {rel.left}.{lc} ({la}) and "
                    f"{rel.right}.{rc} ({ra})",
                    retry=False,
                )
        left = set(index.index(rel.left, rel.left_columns))
        right = set(index.index(rel.right, rel.right_columns))
        if not left & right:
            raise SamplingError(
                f"empty protected join {rel.describe()}: no matching rows in "
                "the database (rows are never invented)",
                retry=False,
            )


def select_rows(
    index: SourceIndex, schema: Schema, guards: Safeguards, policy: SamplingPolicy, attempt: int
) -> Selection:
    """Choose the rows of every table for attempt ``attempt`` (1-based)."""
    rng = random.Random(policy.attempt_seed(attempt))
    tables = [t.name for t in schema.tables]
    sel = Selection(rows={t: set() for t in tables}, protected={t: set() for t in tables})
    fks = foreign_keys(schema, policy)
    witness_sets: dict[str, set[int]] = {t: set() for t in tables}
    queue: deque[tuple[str, int]] = deque()

    def add(table: str, rid: int, *, protect: bool, counter: dict[str, int]) -> None:
        if rid in sel.rows[table]:
            if protect and rid not in sel.protected[table]:
                sel.protected[table].add(rid)
                queue.append((table, rid))
            return
        sel.rows[table].add(rid)
        counter[table] = counter.get(table, 0) + 1
        if protect:
            sel.protected[table].add(rid)
        queue.append((table, rid))

    # 1. anchors
    cap = policy.cap_for(attempt)
    for w in guards.witnesses:
        rows = index.witness(w)
        for tup in rows:
            for (_src, table), rid in zip(w.tables, tup, strict=True):
                if rid is not None:
                    witness_sets[table].add(rid)
        if len(rows) > cap:
            sel.capped_witnesses.append(w.block)
            rows = rng.sample(sorted(rows, key=_sort_key), cap)
        for tup in rows:
            for (_src, table), rid in zip(w.tables, tup, strict=True):
                if rid is not None:
                    add(table, rid, protect=True, counter=sel.anchors)
    for tb in guards.targets:
        info = schema.table(tb.table)
        if info is None or info.without_rowid:
            continue
        hits = index.lookup(info.name, (tb.column,), (tb.value,))
        if len(hits) > cap:
            hits = rng.sample(hits, cap)
        for rid in hits:
            add(info.name, rid, protect=True, counter=sel.anchors)
    # Each predicate binding keeps a few matching rows of its own, with the SQL's operator,
    # even when the block's conjunction as a whole matches nothing.
    for pb in guards.predicates:
        info = schema.table(pb.table)
        if pb.kind == "null" or info is None or info.without_rowid:
            continue
        hits = index.matching(pb)
        if len(hits) > policy.join_fanout:
            hits = sorted(rng.sample(hits, policy.join_fanout))
        for rid in hits:
            add(info.name, rid, protect=False, counter=sel.predicate_rows)
    # Rows sitting exactly on an interval's boundary keep inclusive and exclusive bounds
    # distinguishable in the sample (they need not satisfy the predicate themselves).
    for bd in guards.boundaries:
        info = schema.table(bd.table)
        if bd.expression is not None or info is None or info.without_rowid:
            continue
        hits = index.lookup(info.name, (bd.column,), (bd.value,))
        if len(hits) > policy.join_fanout:
            hits = sorted(rng.sample(hits, policy.join_fanout))
        for rid in hits:
            add(info.name, rid, protect=False, counter=sel.boundary_rows)
    if policy.anchor_table:
        info = schema.table(policy.anchor_table)
        if info is None:
            raise SamplingError(
                f"anchor table {policy.anchor_table!r} is not in the database", retry=False
            )
        keys = index.keys(info.name)
        n = min(len(keys), policy.budget_for(info.name))
        for rid in sorted(rng.sample(keys, n)):
            add(info.name, rid, protect=False, counter=sel.anchors)

    # 2 + 4. closure (run now for the protected rows, again after the fill)
    edges = _path_edges(guards.relationships)

    def close() -> None:
        while queue:
            table, rid = queue.popleft()
            for fk in fks:
                if fk.child != table:
                    continue
                vals = index.values(table, fk.child_columns).get(rid)
                if vals is None:
                    continue
                parents = index.lookup(fk.parent, fk.parent_columns, vals)
                if not parents:
                    key = fk.describe()
                    sel.dangling[key] = sel.dangling.get(key, 0) + 1
                    continue
                if not any(p in sel.rows[fk.parent] for p in parents):
                    add(fk.parent, parents[0], protect=False, counter=sel.closure_added)
            if rid not in sel.protected[table]:
                continue
            for mine, other, theirs, rel in edges.get(table, []):
                vals = index.values(table, mine).get(rid)
                if vals is None:
                    continue
                cands = index.lookup(other, theirs, vals)
                if not cands or any(c in sel.protected[other] for c in cands):
                    continue
                chosen = [c for c in cands if c in sel.rows[other]]
                if not chosen:
                    preferred = [c for c in cands if c in witness_sets[other]] or cands
                    chosen = (
                        preferred
                        if len(preferred) <= policy.join_fanout
                        else sorted(rng.sample(preferred, policy.join_fanout))
                    )
                    sel.relationships_added.append(rel.describe())
                for c in chosen:
                    add(other, c, protect=True, counter=sel.path_added)

    close()

    # 3. fill up to the soft budgets, parents first
    for table in _parents_first(tables, fks):
        budget = policy.budget_for(table)
        have = sel.rows[table]
        room = budget - len(have)
        if room <= 0:
            continue
        rest = [k for k in index.keys(table) if k not in have]
        if len(rest) <= room:
            pick = rest
        else:
            pick = []
            if policy.connected_fill:
                preferred = _connected(index, table, rest, fks, sel)
                if preferred:
                    pick = preferred if len(preferred) <= room else rng.sample(preferred, room)
            if len(pick) < room:
                chosen = set(pick)
                remaining = [k for k in rest if k not in chosen]
                pick = pick + rng.sample(remaining, min(room - len(pick), len(remaining)))
        for rid in sorted(pick):
            add(table, rid, protect=False, counter=sel.filled)
    close()
    return sel


def _path_edges(
    rels: Iterable[QueryRelationship],
) -> dict[str, list[tuple[tuple[str, ...], str, tuple[str, ...], QueryRelationship]]]:
    edges: dict[str, list[tuple[tuple[str, ...], str, tuple[str, ...], QueryRelationship]]] = {}
    for rel in rels:
        edges.setdefault(rel.left, []).append((rel.left_columns, rel.right, rel.right_columns, rel))
        if rel.kind != "semi_join":
            edges.setdefault(rel.right, []).append(
                (rel.right_columns, rel.left, rel.left_columns, rel)
            )
    return edges


def _connected(
    index: SourceIndex, table: str, rest: list[int], fks: list[ForeignKey], sel: Selection
) -> list[int]:
    wanted: list[tuple[ForeignKey, set[tuple[Any, ...]]]] = []
    for fk in fks:
        if fk.child != table or fk.parent == table or not sel.rows[fk.parent]:
            continue
        pvals = index.values(fk.parent, fk.parent_columns)
        keys = {pvals[r] for r in sel.rows[fk.parent] if r in pvals}
        if keys:
            wanted.append((fk, keys))
    if not wanted:
        return []
    hits: set[int] = set()
    for fk, keys in wanted:
        hits.update(rid for rid, v in index.values(table, fk.child_columns).items() if v in keys)
    return [rid for rid in rest if rid in hits]


def _parents_first(tables: list[str], fks: list[ForeignKey]) -> list[str]:
    """Tables ordered so parents come before their children (cycles keep schema order).

    >>> from builder.transform.schema import ForeignKey as F
    >>> _parents_first(["c", "p"], [F(child="c", child_columns=("x",), parent="p",
    ...                                 parent_columns=("x",))])
    ['p', 'c']
    """
    parents: dict[str, set[str]] = {t: set() for t in tables}
    for fk in fks:
        if fk.child in parents and fk.parent in parents and fk.child != fk.parent:
            parents[fk.child].add(fk.parent)
    out: list[str] = []
    done: set[str] = set()
    visiting: set[str] = set()

    def visit(t: str) -> None:
        if t in done or t in visiting:
            return
        visiting.add(t)
        for p in sorted(parents[t], key=tables.index):
            visit(p)
        visiting.discard(t)
        done.add(t)
        out.append(t)

    for t in tables:
        visit(t)
    return out


def _sort_key(tup: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(-1 if v is None else v for v in tup)


__all__ = [
    "SamplingError",
    "Selection",
    "SourceIndex",
    "check_relationships",
    "foreign_keys",
    "select_rows",
    "source_index",
]
