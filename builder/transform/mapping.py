"""The replacement map M = {tables, columns, values}.

The map is the only interface between language generation and the deterministic
rewriting of databases and SQL.

Table keys are scoped by database, column keys by table, value keys by translation unit
(cluster); a value's one target is copied to every (table, column) occurrence of its
cluster. ``check_map`` is the map gate: names unique where they must be, protected items
unchanged, one target per value, and no two values of a column collapsed into one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

MAP_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True, kw_only=True)
class TableMapping:
    """``source`` table -> ``target`` name."""

    source: str
    target: str


@dataclass(frozen=True, kw_only=True)
class ColumnMapping:
    """Column ``source`` of table ``table_source`` -> ``target`` name."""

    table_source: str
    source: str
    target: str


@dataclass(frozen=True, kw_only=True)
class ValueMapping:
    """Value ``source`` of cluster ``cluster_id`` -> ``target`` at every occurrence."""

    cluster_id: str
    source: str
    target: str
    occurrences: tuple[tuple[str, str], ...]


@dataclass(frozen=True, kw_only=True)
class ReplacementMap:
    """A validated replacement map between a source and a translated database.

    Attributes:
        source_language: language of the source database.
        target_language: language of the translated database.
        tables: table renames (identity entries allowed).
        columns: column renames, scoped by source table.
        values: value translations, scoped by cluster with all their occurrences.
        protected: names and values that had to stay unchanged.
    """

    source_language: str
    target_language: str
    tables: tuple[TableMapping, ...] = ()
    columns: tuple[ColumnMapping, ...] = ()
    values: tuple[ValueMapping, ...] = ()
    protected: tuple[str, ...] = ()
    _index: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ---- lookups (case-insensitive on identifiers, exact on values) ---------------------
    def _idx(self) -> dict[str, Any]:
        if not self._index:
            self._index["t"] = {m.source.lower(): m.target for m in self.tables}
            self._index["c"] = {
                (m.table_source.lower(), m.source.lower()): m.target for m in self.columns
            }
            vals: dict[tuple[str, str], dict[str, str]] = {}
            for v in self.values:
                for t, c in v.occurrences:
                    vals.setdefault((t.lower(), c.lower()), {})[v.source] = v.target
            self._index["v"] = vals
        return self._index

    def table_target(self, table: str) -> str:
        """The new name of ``table`` (itself when it is not renamed).

        >>> m = ReplacementMap(source_language="en", target_language="zh",
        ...                    tables=(TableMapping(source="fund", target="基金"),))
        >>> m.table_target("FUND"), m.table_target("other")
        ('基金', 'other')
        """
        return self._idx()["t"].get(table.lower(), table)

    def column_target(self, table: str, column: str) -> str:
        """The new name of ``table.column`` (itself when it is not renamed)."""
        return self._idx()["c"].get((table.lower(), column.lower()), column)

    def value_target(self, table: str, column: str, value: str) -> str | None:
        """The translation of ``value`` in ``table.column``, or None when it has none."""
        return self._idx()["v"].get((table.lower(), column.lower()), {}).get(value)

    def column_values(self, table: str, column: str) -> Mapping[str, str]:
        """Every ``{source: target}`` value translation of ``table.column``."""
        return self._idx()["v"].get((table.lower(), column.lower()), {})

    def changed_values(self, table: str, column: str) -> dict[str, str]:
        """Value translations of ``table.column`` that actually change the value."""
        return {s: t for s, t in self.column_values(table, column).items() if s != t}

    @property
    def is_identity(self) -> bool:
        """True when applying the map changes nothing."""
        return (
            all(m.source == m.target for m in self.tables)
            and all(m.source == m.target for m in self.columns)
            and all(m.source == m.target for m in self.values)
        )

    def value_pairs(self) -> dict[str, str]:
        """``{source: target}`` over all clusters, for values whose target is unique."""
        seen: dict[str, set[str]] = {}
        for v in self.values:
            seen.setdefault(v.source, set()).add(v.target)
        return {s: next(iter(t)) for s, t in seen.items() if len(t) == 1}

    # ---- serialization -----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The normalized serialized form (tables, columns, values with occurrences)."""
        return {
            "schema_version": MAP_SCHEMA_VERSION,
            "source_language": self.source_language,
            "target_language": self.target_language,
            "tables": [{"source": m.source, "target": m.target} for m in self.tables],
            "columns": [
                {"table_source": m.table_source, "source": m.source, "target": m.target}
                for m in self.columns
            ],
            "values": [
                {
                    "cluster_id": v.cluster_id,
                    "source": v.source,
                    "target": v.target,
                    "occurrences": [
                        {"table_source": t, "column_source": c} for t, c in v.occurrences
                    ],
                }
                for v in self.values
            ],
            "protected": list(self.protected),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ReplacementMap:
        """Read the serialized form (raises ValueError with a one-line reason)."""
        try:
            return cls(
                source_language=str(obj["source_language"]),
                target_language=str(obj["target_language"]),
                tables=tuple(
                    TableMapping(source=str(t["source"]), target=str(t["target"]))
                    for t in obj.get("tables", [])
                ),
                columns=tuple(
                    ColumnMapping(
                        table_source=str(c["table_source"]),
                        source=str(c["source"]),
                        target=str(c["target"]),
                    )
                    for c in obj.get("columns", [])
                ),
                values=tuple(
                    ValueMapping(
                        cluster_id=str(v["cluster_id"]),
                        source=str(v["source"]),
                        target=str(v["target"]),
                        occurrences=tuple(
                            (str(o["table_source"]), str(o["column_source"]))
                            for o in v["occurrences"]
                        ),
                    )
                    for v in obj.get("values", [])
                ),
                protected=tuple(str(p) for p in obj.get("protected", [])),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"replacement map is malformed: missing or bad {exc}") from None


def identity_map(language: str) -> ReplacementMap:
    """A map that changes nothing (database already in the target language)."""
    return ReplacementMap(source_language=language, target_language=language)


def check_map(
    m: ReplacementMap,
    *,
    tables: Mapping[str, Iterable[str]],
    existing_values: Mapping[tuple[str, str], Iterable[str]] | None = None,
    protected: Iterable[str] = (),
) -> list[str]:
    """The map gate: every problem found, as one-line messages (empty when valid).

    Args:
        m: the map.
        tables: the source schema, ``{table: [column, ...]}``.
        existing_values: for collision checks, the distinct text values of each
            ``(table, column)`` that the map rewrites.
        protected: names and values that must map to themselves.

    >>> from builder.transform.mapping import TableMapping as T
    >>> bad = ReplacementMap(source_language="en", target_language="zh",
    ...                      tables=(T(source="a", target="表"), T(source="b", target="表")))
    >>> check_map(bad, tables={"a": [], "b": []})
    ["table target '表' is used by 2 tables (a, b)"]
    """
    errors: list[str] = []
    prot = set(protected)
    known = {t.lower(): t for t in tables}
    # Tables: known, unique targets (case-insensitive, as SQLite compares names).
    targets: dict[str, list[str]] = {}
    for t in m.tables:
        if t.source.lower() not in known:
            errors.append(f"table {t.source!r} is not in the database")
        if not t.target.strip():
            errors.append(f"table {t.source!r} has an empty target")
        if t.source in prot and t.target != t.source:
            errors.append(f"protected table {t.source!r} was renamed")
        targets.setdefault(t.target.lower(), []).append(t.source)
    mapped = {t.source.lower() for t in m.tables}
    for low, name in known.items():
        if low not in mapped:
            targets.setdefault(low, []).append(name)
    for tgt, srcs in targets.items():
        if len(srcs) > 1:
            shown = (
                next(t.target for t in m.tables if t.target.lower() == tgt)
                if any(t.target.lower() == tgt for t in m.tables)
                else tgt
            )
            errors.append(
                f"table target {shown!r} is used by {len(srcs)} tables ({', '.join(sorted(srcs))})"
            )
    # Columns: known, unique within their table.
    cols_by_table: dict[str, dict[str, str]] = {
        t.lower(): {c.lower(): c for c in cols} for t, cols in tables.items()
    }
    col_targets: dict[str, dict[str, list[str]]] = {}
    for c in m.columns:
        tcols = cols_by_table.get(c.table_source.lower())
        if tcols is None or c.source.lower() not in tcols:
            errors.append(f"column {c.table_source}.{c.source} is not in the database")
            continue
        if not c.target.strip():
            errors.append(f"column {c.table_source}.{c.source} has an empty target")
        if c.source in prot and c.target != c.source:
            errors.append(f"protected column {c.table_source}.{c.source} was renamed")
        col_targets.setdefault(c.table_source.lower(), {}).setdefault(c.target.lower(), []).append(
            c.source
        )
    for tlow, tcols in cols_by_table.items():
        renamed = {c.source.lower() for c in m.columns if c.table_source.lower() == tlow}
        for low, name in tcols.items():
            if low not in renamed:
                col_targets.setdefault(tlow, {}).setdefault(low, []).append(name)
        for tgt, srcs in col_targets.get(tlow, {}).items():
            if len(srcs) > 1:
                errors.append(
                    f"column target {tgt!r} is used by {len(srcs)} columns of "
                    f"{known.get(tlow, tlow)} ({', '.join(sorted(srcs))})"
                )
    # Values: one target per value per cluster; no two values collapsed; protected kept.
    per_cluster: dict[str, dict[str, str]] = {}
    for v in m.values:
        seen = per_cluster.setdefault(v.cluster_id, {})
        if v.source in seen and seen[v.source] != v.target:
            errors.append(f"value {v.source!r} of cluster {v.cluster_id} has two targets")
        seen[v.source] = v.target
        if not v.target.strip() and v.source.strip():
            errors.append(f"value {v.source!r} of cluster {v.cluster_id} has an empty target")
        if v.source in prot and v.target != v.source:
            errors.append(f"protected value {v.source!r} was translated")
    per_column: dict[tuple[str, str], dict[str, str]] = {}
    for v in m.values:
        for occ_t, occ_c in v.occurrences:
            per_column.setdefault((occ_t.lower(), occ_c.lower()), {})[v.source] = v.target
    for (col_t, col_c), pairs in per_column.items():
        inverse: dict[str, list[str]] = {}
        for s, tgt in pairs.items():
            inverse.setdefault(tgt, []).append(s)
        for tgt, srcs in inverse.items():
            if len(srcs) > 1:
                errors.append(f"values {sorted(srcs)} of {col_t}.{col_c} all map to {tgt!r}")
        if existing_values is not None:
            kept = {x for x in _lookup(existing_values, col_t, col_c)} - set(pairs)
            clash = sorted(tgt for s, tgt in pairs.items() if tgt != s and tgt in kept)
            if clash:
                errors.append(
                    f"targets {clash[:3]} of {col_t}.{col_c} collide with values that stay"
                )
    return errors


def _lookup(values: Mapping[tuple[str, str], Iterable[str]], t: str, c: str) -> Iterable[str]:
    for (tt, cc), vals in values.items():
        if tt.lower() == t and cc.lower() == c:
            return vals
    return ()


__all__ = [
    "MAP_SCHEMA_VERSION",
    "ColumnMapping",
    "ReplacementMap",
    "TableMapping",
    "ValueMapping",
    "check_map",
    "identity_map",
]
