"""Query-independent modality routing: every table to one or more compatible renderers.

``route_tables`` looks only at table metadata (``TableMeta``: schema, types, keys, sizes,
nulls), never at the question or SQL. Tables are visited in a seeded order; each takes the
compatible renderer whose batch counter is lowest (keyed tables lean towards SQLite, where
related tables stay together), ties broken by a seeded renderer preference; a seeded share
of tables also gets a second renderer. Counters come in from the batch and go out updated,
so over a batch every modality is used about equally. In a seeded share of tasks
(``RoutingPolicy.follow_share``) a table that other tables reference by foreign key
(a registry such as admissions, or a code dictionary) follows its referrers: it is also
rendered in every structured renderer (CSV, JSON, SQLite) that holds one of them, as an
organisation keeps its master data next to each system that uses it. ``render_routed`` renders the
assignment, round-trip checks every artifact (documents are read back from their own text)
and falls back along the table's compatible renderers when a check fails; a table that no
renderer can represent rejects the task.

Renderers: ``csv``, ``json``, ``sqlite`` (``builder.render``), ``markdown`` and ``pdf``
(``builder.render.markdown``/``pdf``, the fact-grounded document branch). A build without
documents and videos routes over its structured renderers with the same code.
"""

from __future__ import annotations

import logging
import random
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from builder.documents.assembly import DocumentArtifacts, DocumentOptions
from builder.errors import Rejected
from builder.render.base import Renderer, get_renderer, safe_stem
from builder.render.sqlite_renderer import SHARED
from builder.tables import TableData, compare_rows, quote_ident

logger = logging.getLogger(__name__)

STRUCTURED = ("csv", "json", "sqlite")
DOCUMENTS = ("markdown", "pdf")
BASE_RENDERERS = (*STRUCTURED, *DOCUMENTS)
FALLBACK_ORDER = ("sqlite", "csv", "json", "markdown", "pdf")
# The carrier an agent would use when a table is in several: the cheapest to read.
READ_PREFERENCE = ("sqlite", "csv", "json", "markdown", "pdf")


class RoutingFailure(Rejected, ValueError):
    """A table no renderer could represent; carries a one-line reason."""

    stage_name = "render"


@dataclass(frozen=True, kw_only=True)
class TableRoute:
    """One successful rendering of a table.

    Attributes:
        table: the table name.
        renderer: the renderer (and modality) that holds it.
        path: the workspace file that holds it.
        fallbacks: ``renderer: reason`` for every renderer that was tried and failed.
    """

    table: str
    renderer: str
    path: str
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TableMeta:
    """What routing may look at: a table's metadata, never its question.

    Attributes:
        name: the table name.
        columns: column names.
        declared_types: declared column types.
        row_count: rows.
        null_fraction: share of NULL cells per column.
        primary_key: primary-key columns.
        foreign_keys: (column, referenced table, referenced column) triples.
        has_blob: whether any cell is binary.
        has_empty_text: whether any text cell is the empty string (CSV cannot keep it
            apart from NULL).
    """

    name: str
    columns: tuple[str, ...]
    declared_types: tuple[str, ...]
    row_count: int
    null_fraction: tuple[float, ...]
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[tuple[str, str, str], ...] = ()
    has_blob: bool = False
    has_empty_text: bool = False

    @property
    def cells(self) -> int:
        """Rows times columns."""
        return self.row_count * len(self.columns)

    @property
    def keyed(self) -> bool:
        """Whether the table declares keys (a relational group member)."""
        return bool(self.primary_key or self.foreign_keys)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "rows": self.row_count,
            "columns": len(self.columns),
            "primary_key": list(self.primary_key),
            "foreign_keys": [list(f) for f in self.foreign_keys],
            "max_null_fraction": round(max(self.null_fraction, default=0.0), 3),
            "has_blob": self.has_blob,
            "has_empty_text": self.has_empty_text,
        }


def table_meta(table: TableData) -> TableMeta:
    """The routing metadata of one table (keys from its DDL)."""
    n = max(1, len(table.rows))
    nulls = tuple(
        sum(1 for row in table.rows if row[i] is None) / n for i in range(len(table.schema.columns))
    )
    pk: tuple[str, ...] = ()
    fks: tuple[tuple[str, str, str], ...] = ()
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(table.schema.ddl)
        info = conn.execute(f"pragma table_info({quote_ident(table.name)})").fetchall()
        pk = tuple(r[1] for r in sorted(info, key=lambda r: r[5]) if r[5])
        fks = tuple(
            (r[3], r[2], r[4] or "")
            for r in conn.execute(f"pragma foreign_key_list({quote_ident(table.name)})")
        )
    except sqlite3.Error:
        pass
    finally:
        conn.close()
    return TableMeta(
        name=table.name,
        columns=table.schema.columns,
        declared_types=table.schema.declared_types,
        row_count=len(table.rows),
        null_fraction=nulls,
        primary_key=pk,
        foreign_keys=fks,
        has_blob=table.has_blob,
        has_empty_text=any(v == "" for row in table.rows for v in row),
    )


@dataclass(frozen=True, kw_only=True)
class RoutingPolicy:
    """The routing policy.

    Attributes:
        renderers: the renderers to route over.
        fallback_order: the order fallbacks are tried in.
        extra_share: share of tables that also get a second renderer.
        max_documents: the most document renderings (Markdown + PDF) per task.
        max_document_cells: tables with more cells are not written as documents.
        keyed_sqlite_bonus: how much a keyed table favours SQLite (in counter units).
        follow_share: share of tasks (seeded) in which referenced tables follow their
            referrers into their structured renderers (default: all). It lowers the share
            of tasks that need two or more modalities towards the paper's (32.7%); with
            none, a task's tables spread over every modality and 74% of tasks need two
            or more.
    """

    renderers: tuple[str, ...] = BASE_RENDERERS
    fallback_order: tuple[str, ...] = FALLBACK_ORDER
    extra_share: float = 0.15
    max_documents: int = 4
    max_document_cells: int = 2400
    keyed_sqlite_bonus: float = 0.5
    follow_share: float = 1.0

    def __post_init__(self) -> None:
        for name in ("extra_share", "follow_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"routing.{name} must be between 0 and 1, not {value}")


def compatible(meta: TableMeta, renderer: str, policy: RoutingPolicy) -> str | None:
    """Why ``renderer`` cannot faithfully hold a table, from its metadata (None: it can).

    >>> m = TableMeta(name="t", columns=("a",), declared_types=("INT",), row_count=0,
    ...               null_fraction=(0.0,))
    >>> compatible(m, "json", RoutingPolicy()), compatible(m, "sqlite", RoutingPolicy())
    ('no rows to carry the columns', None)
    """
    if renderer == "sqlite":
        return None
    if meta.has_blob:
        return "binary values"
    if renderer == "csv":
        return "empty strings (CSV cannot tell them from NULL)" if meta.has_empty_text else None
    if meta.row_count == 0:
        return "no rows to carry the columns" if renderer == "json" else "no rows to write about"
    if renderer in DOCUMENTS and meta.cells > policy.max_document_cells:
        return f"{meta.cells} cells exceed the document budget of {policy.max_document_cells}"
    return None


@dataclass(frozen=True, kw_only=True)
class TableRouting:
    """One table's routing.

    Attributes:
        table: the table name.
        renderers: the assigned renderers (first is the primary).
        fallbacks: the other compatible renderers, in fallback order.
        incompatible: renderer -> why it cannot hold the table.
    """

    table: str
    renderers: tuple[str, ...]
    fallbacks: tuple[str, ...]
    incompatible: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Routing:
    """The routing of one task's tables.

    Attributes:
        tables: table name -> its routing.
        order: the seeded visiting order.
        counters: the batch counters after this task's assignments.
        seed: the routing seed.
        followed: whether referenced tables followed their referrers.
    """

    tables: Mapping[str, TableRouting]
    order: tuple[str, ...]
    counters: Mapping[str, int]
    seed: int
    followed: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (for the ledger)."""
        return {
            "seed": self.seed,
            "followed": self.followed,
            "order": list(self.order),
            "counters": dict(self.counters),
            "tables": {
                n: {
                    "renderers": list(t.renderers),
                    "fallbacks": list(t.fallbacks),
                    "incompatible": dict(t.incompatible),
                }
                for n, t in sorted(self.tables.items())
            },
        }


def route_tables(
    tables_meta: Sequence[TableMeta],
    *,
    seed: int,
    counters: Mapping[str, int] | None = None,
    policy: RoutingPolicy | None = None,
) -> Routing:
    """Assign renderers to tables from their metadata only.

    Args:
        tables_meta: metadata of every table of the task database.
        seed: the routing seed (visiting order, preference, extra renderers).
        counters: batch counters (renderer -> assignments so far in the batch).
        policy: the policy.

    Raises:
        RoutingFailure: a table without any compatible renderer.

    >>> metas = [TableMeta(name=n, columns=("a",), declared_types=("INT",), row_count=3,
    ...          null_fraction=(0.0,)) for n in "abcde"]
    >>> r = route_tables(metas, seed=1, policy=RoutingPolicy(extra_share=0))
    >>> sorted(t.renderers[0] for t in r.tables.values())
    ['csv', 'json', 'markdown', 'pdf', 'sqlite']
    """
    policy = policy or RoutingPolicy()
    for name in policy.renderers:
        if name not in BASE_RENDERERS:
            get_renderer(name)  # a renderer registered by someone else is fine
    rng = random.Random(f"route:{seed}")
    order = sorted(m.name for m in tables_meta)
    rng.shuffle(order)
    preference = list(policy.renderers)
    rng.shuffle(preference)
    h = {r: int((counters or {}).get(r, 0)) for r in policy.renderers}
    by_name = {m.name: m for m in tables_meta}
    documents = 0
    out: dict[str, TableRouting] = {}
    for name in order:
        meta = by_name[name]
        reasons = {
            r: why for r in policy.renderers if (why := compatible(meta, r, policy)) is not None
        }
        usable = [r for r in policy.renderers if r not in reasons]
        if documents >= policy.max_documents:
            usable = [r for r in usable if r not in DOCUMENTS] or usable
        if not usable:
            raise RoutingFailure(
                f"table {name!r}: no renderer can hold it "
                f"({'; '.join(f'{k}: {v}' for k, v in reasons.items())})"
            )

        def score(r: str, meta: TableMeta = meta) -> tuple[float, int]:
            bonus = policy.keyed_sqlite_bonus if r == "sqlite" and meta.keyed else 0.0
            return h[r] - bonus, preference.index(r)

        picks = [min(usable, key=score)]
        rest = [r for r in usable if r != picks[0]]
        if rest and rng.random() < policy.extra_share:
            extra = min(rest, key=score)
            if not (extra in DOCUMENTS and documents + 1 >= policy.max_documents):
                picks.append(extra)
        for r in picks:
            h[r] += 1
            documents += r in DOCUMENTS
        fallbacks = [r for r in policy.fallback_order if r in usable and r not in picks]
        fallbacks += [r for r in usable if r not in picks and r not in fallbacks]
        out[name] = TableRouting(
            table=name, renderers=tuple(picks), fallbacks=tuple(fallbacks), incompatible=reasons
        )
    followed = random.Random(f"follow:{seed}").random() < policy.follow_share
    if followed:
        _follow_referrers(out, by_name, h)
    return Routing(tables=out, order=tuple(order), counters=h, seed=seed, followed=followed)


def _follow_referrers(
    out: dict[str, TableRouting], by_name: Mapping[str, TableMeta], counters: dict[str, int]
) -> None:
    """Render each referenced table in the structured renderers of the tables that reference it.

    >>> metas = {"a": TableMeta(name="a", columns=("id",), declared_types=("INT",),
    ...                         row_count=2, null_fraction=(0.0,)),
    ...          "b": TableMeta(name="b", columns=("a_id",), declared_types=("INT",),
    ...                         row_count=2, null_fraction=(0.0,),
    ...                         foreign_keys=(("a_id", "a", "id"),))}
    >>> out = {"a": TableRouting(table="a", renderers=("pdf",), fallbacks=("csv", "json")),
    ...        "b": TableRouting(table="b", renderers=("json",), fallbacks=())}
    >>> _follow_referrers(out, metas, {"json": 1, "pdf": 1})
    >>> out["a"].renderers, out["a"].fallbacks
    (('pdf', 'json'), ('csv',))
    """
    wanted: dict[str, list[str]] = {}
    for name in sorted(out):
        for _, target, _ in by_name[name].foreign_keys:
            if target == name or target not in out:
                continue
            for renderer in out[name].renderers:
                if renderer in STRUCTURED and renderer not in wanted.setdefault(target, []):
                    wanted[target].append(renderer)
    for target, renderers in sorted(wanted.items()):
        routing = out[target]
        usable = set(routing.renderers) | set(routing.fallbacks)
        added = [r for r in renderers if r in usable and r not in routing.renderers]
        if not added:
            continue
        for r in added:
            counters[r] = counters.get(r, 0) + 1
        out[target] = replace(
            routing,
            renderers=(*routing.renderers, *added),
            fallbacks=tuple(r for r in routing.fallbacks if r not in added),
        )


@dataclass(frozen=True, kw_only=True)
class RoutedWorkspace:
    """A rendered workspace: files, where every table went, and the document records.

    Attributes:
        files: workspace-relative path -> bytes.
        routes: table -> every successful rendering of it (primary first).
        documents: ``table/renderer`` -> the document record (plan, manifest, coverage).
        counters: batch counters after the successful renderings.
        failures: table -> ``renderer: reason`` for every failed attempt.
        withheld: tables deliberately left out of the workspace (their evidence is in the
            video).
    """

    files: dict[str, bytes]
    routes: dict[str, tuple[TableRoute, ...]]
    documents: dict[str, DocumentArtifacts] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    failures: dict[str, tuple[str, ...]] = field(default_factory=dict)
    withheld: tuple[str, ...] = ()

    @property
    def modalities(self) -> list[str]:
        """The modalities present, sorted."""
        return sorted({r.renderer for routes in self.routes.values() for r in routes})

    def carrier(self, table: str) -> str | None:
        """The modality an agent would read a table from (the cheapest of its carriers)."""
        routes = self.routes.get(table, ())
        have = {r.renderer for r in routes}
        for name in READ_PREFERENCE:
            if name in have:
                return name
        return routes[0].renderer if routes else None

    @property
    def total_bytes(self) -> int:
        """Size of all workspace files."""
        return sum(len(b) for b in self.files.values())

    def ledger(self) -> dict[str, Any]:
        """What the ledger records about the workspace."""
        return {
            "routes": {
                t: [
                    {"renderer": r.renderer, "path": r.path, "fallbacks": list(r.fallbacks)}
                    for r in rs
                ]
                for t, rs in sorted(self.routes.items())
            },
            "failures": {t: list(f) for t, f in sorted(self.failures.items()) if f},
            "withheld": list(self.withheld),
            "documents": {k: d.ledger() for k, d in sorted(self.documents.items())},
        }


def _stems(tables: Sequence[TableData], shared: str) -> dict[str, str]:
    used = {shared.lower()}
    names = {SHARED: shared}
    for table in sorted(tables, key=lambda t: t.name):
        stem = base = safe_stem(table.name)
        n = 2
        while stem.lower() in used:
            stem, n = f"{base}_{n}", n + 1
        used.add(stem.lower())
        names[table.name] = stem
    return names


def _fallback_rank(name: str) -> tuple[int, str]:
    """Built-in renderers in fallback order, then any registered one by name."""
    return (FALLBACK_ORDER.index(name) if name in FALLBACK_ORDER else len(FALLBACK_ORDER), name)


def _renderer(name: str, documents: DocumentOptions) -> Renderer:
    if name == "markdown":
        from builder.render.markdown import MarkdownRenderer

        return MarkdownRenderer(documents)
    if name == "pdf":
        from builder.render.pdf import PdfRenderer

        return PdfRenderer(documents)
    return get_renderer(name)


def _attempt(
    renderer: Renderer, group: Sequence[TableData], names: Mapping[str, str]
) -> tuple[Any, dict[str, str]]:
    """Render a group and read it back; return the rendering and per-table failures."""
    try:
        rendered = renderer.render(group, names=names)
        back = renderer.read_back(rendered, [t.schema for t in group])
    except (ValueError, UnicodeError, OverflowError, sqlite3.Error) as exc:
        reason = f"{type(exc).__name__}: {exc}"[:300]
        return None, {t.name: reason for t in group}
    problems = {}
    for table in group:
        read = back.get(table.name)
        why = (
            "table missing from the rendering"
            if read is None
            else compare_rows(table, read.columns, read.rows)
        )
        if why:
            problems[table.name] = why
    return rendered, problems


def render_routed(
    tables: Sequence[TableData],
    routing: Routing,
    *,
    database_name: str = "database",
    documents: DocumentOptions | None = None,
    counters: Mapping[str, int] | None = None,
    withhold: Sequence[str] = (),
) -> RoutedWorkspace:
    """Render a routing, round-trip check every artifact, fall back on failure.

    Args:
        tables: every table of the task database.
        routing: the routing (from ``route_tables``).
        database_name: stem of the shared SQLite file.
        documents: options of the document renderers (language, writer, seed).
        counters: batch counters before this task (default: none); the result carries them
            updated with the renderings that succeeded.
        withhold: tables to leave out of the workspace entirely.

    Raises:
        RoutingFailure: a table (not withheld) that no renderer could represent.
    """
    docs = documents or DocumentOptions()
    names = _stems(tables, safe_stem(database_name))
    by_name = {t.name: t for t in tables}
    wanted = {
        t: list(r.renderers)
        for t, r in routing.tables.items()
        if t in by_name and t not in withhold
    }
    queue = {t: list(routing.tables[t].fallbacks) for t in wanted}
    failures: dict[str, list[str]] = {t: [] for t in wanted}
    done: dict[str, list[TableRoute]] = {t: [] for t in wanted}
    files: dict[str, bytes] = {}
    doc_records: dict[str, DocumentArtifacts] = {}
    h = {r: int((counters or {}).get(r, 0)) for r in BASE_RENDERERS}
    pending = {t: list(rs) for t, rs in wanted.items()}
    for _round in range(len(BASE_RENDERERS) + 1):
        if not any(pending.values()):
            break
        groups: dict[str, list[str]] = {}
        for t, rs in pending.items():
            for r in rs:
                groups.setdefault(r, []).append(t)
        pending = {t: [] for t in wanted}
        for rname in sorted(groups, key=_fallback_rank):
            renderer = _renderer(rname, replace(docs, seed=routing.seed))
            if rname == "sqlite":  # one shared file: re-render it with every table it holds
                groups[rname] += [
                    t for t, rs in done.items() if any(x.renderer == "sqlite" for x in rs)
                ]
            group = [by_name[t] for t in sorted(set(groups[rname]))]
            singles = [group] if rname == "sqlite" else [[t] for t in group]
            for part in singles:
                rendered, problems = _attempt(renderer, part, names)
                if rname == "sqlite" and problems and len(part) > 1:
                    good = [t for t in part if t.name not in problems]
                    rendered, more = _attempt(renderer, good, names) if good else (None, {})
                    problems.update(more)
                for table in part:
                    t = table.name
                    if t in problems:
                        failures[t].append(f"{rname}: {problems[t]}")
                        logger.info("table %s: %s failed (%s)", t, rname, problems[t])
                        if not done[t] and not pending[t]:
                            nxt = next(
                                (r for r in queue[t] if r not in {x.renderer for x in done[t]}),
                                None,
                            )
                            if nxt is not None:
                                queue[t].remove(nxt)
                                pending[t].append(nxt)
                        continue
                    path = rendered.locations[t]
                    if any(x.renderer == rname for x in done[t]):
                        continue
                    done[t].append(
                        TableRoute(table=t, renderer=rname, path=path, fallbacks=tuple(failures[t]))
                    )
                    h[rname] = h.get(rname, 0) + 1
                    if rname in DOCUMENTS:
                        doc_records[f"{t}/{rname}"] = rendered.documents[t]
                if rendered is not None:
                    for path, data in rendered.files.items():
                        if rname == "sqlite" or any(
                            rendered.locations.get(x.name) == path
                            for x in part
                            if x.name not in problems
                        ):
                            files[path] = data
    for t in wanted:
        if not done[t]:
            raise RoutingFailure(
                f"table {t!r}: no renderer represents it ({'; '.join(failures[t])})"
            )
    return RoutedWorkspace(
        files=files,
        routes={t: tuple(rs) for t, rs in done.items()},
        documents=doc_records,
        counters=h,
        failures={t: tuple(f) for t, f in failures.items()},
        withheld=tuple(sorted(withhold)),
    )


__all__ = [
    "BASE_RENDERERS",
    "DOCUMENTS",
    "FALLBACK_ORDER",
    "READ_PREFERENCE",
    "STRUCTURED",
    "RoutedWorkspace",
    "Routing",
    "RoutingFailure",
    "RoutingPolicy",
    "TableMeta",
    "TableRoute",
    "TableRouting",
    "compatible",
    "render_routed",
    "route_tables",
    "table_meta",
]
