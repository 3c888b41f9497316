"""Modality routing: give every table a renderer, render, round-trip check, fall back.

Routing looks only at table metadata (never at the question). Tables are visited in a
seeded order and each takes the compatible renderer used least so far in this task, ties
broken by a seeded renderer order, so a task's tables are spread evenly over the modalities
and, over many tasks, every modality is used about equally. Each rendering is parsed back and
compared with its table; a failed round trip moves the table to the next renderer.
"""

from __future__ import annotations

import csv
import logging
import random
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from builder.render.base import Renderer, get_renderer, safe_stem
from builder.render.sqlite_renderer import SHARED
from builder.tables import TableData, compare_rows
from dataspace.errors import Rejected

logger = logging.getLogger(__name__)


# What a rendering or its parse-back may raise for data it cannot carry.
_RENDER_ERRORS = (ValueError, UnicodeError, OverflowError, csv.Error, sqlite3.Error)


class RenderFailure(Rejected):
    """No renderer could represent a table; carries a one-line reason."""

    stage_name = "render"


@dataclass(frozen=True, kw_only=True)
class TableRoute:
    """Where one table ended up.

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
class Workspace:
    """The rendered workspace of one task."""

    files: dict[str, bytes]
    routes: dict[str, TableRoute]
    assignment: dict[str, str] = field(default_factory=dict)

    @property
    def modalities(self) -> list[str]:
        """The modalities present, sorted."""
        return sorted({r.renderer for r in self.routes.values()})

    @property
    def total_bytes(self) -> int:
        """Size of all workspace files."""
        return sum(len(b) for b in self.files.values())


def assign_renderers(
    tables: Sequence[TableData], renderers: Sequence[str], seed: int
) -> dict[str, str]:
    """A seeded, balanced assignment of compatible renderers to tables.

    >>> from builder.tables import TableSchema
    >>> ts = [TableData(schema=TableSchema(name=n, columns=("a",), declared_types=("INT",),
    ...       ddl=""), rows=[(1,)]) for n in "abcdef"]
    >>> sorted(assign_renderers(ts, ["csv", "json", "sqlite"], seed=1).values())
    ['csv', 'csv', 'json', 'json', 'sqlite', 'sqlite']
    """
    rng = random.Random(seed)
    order = sorted(tables, key=lambda t: t.name)
    rng.shuffle(order)
    preference = list(renderers)
    rng.shuffle(preference)
    counts = dict.fromkeys(preference, 0)
    out: dict[str, str] = {}
    for table in order:
        usable = [r for r in preference if get_renderer(r).compatible(table) is None]
        if not usable:
            raise RenderFailure(f"table {table.name!r}: no configured renderer can hold it")
        pick = min(usable, key=lambda r: (counts[r], preference.index(r)))
        counts[pick] += 1
        out[table.name] = pick
    return out


def _stems(tables: Sequence[TableData], shared: str) -> dict[str, str]:
    used: set[str] = {shared.lower()}
    names: dict[str, str] = {SHARED: shared}
    for table in sorted(tables, key=lambda t: t.name):
        stem, n = safe_stem(table.name), 2
        base = stem
        while stem.lower() in used:
            stem, n = f"{base}_{n}", n + 1
        used.add(stem.lower())
        names[table.name] = stem
    return names


def _next_renderer(
    table: TableData, renderers: Sequence[str], current: str, tried: set[str]
) -> str | None:
    start = renderers.index(current)
    for step in range(1, len(renderers) + 1):
        cand = renderers[(start + step) % len(renderers)]
        if cand not in tried and get_renderer(cand).compatible(table) is None:
            return cand
    return None


def render_workspace(
    tables: Sequence[TableData],
    *,
    renderers: Sequence[str],
    seed: int,
    database_name: str = "database",
) -> Workspace:
    """Render every table, round-trip check each rendering, and fall back on failure.

    Args:
        tables: every table of the task database.
        renderers: the renderer names to route over, in fallback order.
        seed: the task's seed (routing order and tie-breaks).
        database_name: stem of the shared SQLite file.

    Raises:
        RenderFailure: a table that no renderer could represent.
    """
    renderers = list(renderers)
    for name in renderers:
        get_renderer(name)
    names = _stems(tables, safe_stem(database_name))
    assignment = assign_renderers(tables, renderers, seed)
    current = dict(assignment)
    tried: dict[str, set[str]] = {t.name: {current[t.name]} for t in tables}
    fallbacks: dict[str, list[str]] = {t.name: [] for t in tables}
    by_name = {t.name: t for t in tables}
    # Each pass renders every group; a failure moves its table on, which only happens a
    # bounded number of times (each table tries each renderer at most once).
    for _ in range(len(renderers) + 1):
        files: dict[str, bytes] = {}
        routes: dict[str, TableRoute] = {}
        moved = False
        for rname in renderers:
            group = [by_name[n] for n in sorted(current) if current[n] == rname]
            if not group:
                continue
            renderer: Renderer = get_renderer(rname)
            problems = _render_group(renderer, group, names, files, routes)
            for table_name, reason in problems.items():
                fallbacks[table_name].append(f"{rname}: {reason}")
                nxt = _next_renderer(by_name[table_name], renderers, rname, tried[table_name])
                if nxt is None:
                    raise RenderFailure(
                        f"table {table_name!r}: no renderer round-trips it "
                        f"({'; '.join(fallbacks[table_name])})"
                    )
                logger.info(
                    "table %s: %s round trip failed (%s); trying %s", table_name, rname, reason, nxt
                )
                tried[table_name].add(nxt)
                current[table_name] = nxt
                moved = True
        if not moved:
            routes = {
                n: TableRoute(
                    table=n, renderer=r.renderer, path=r.path, fallbacks=tuple(fallbacks[n])
                )
                for n, r in routes.items()
            }
            return Workspace(files=files, routes=routes, assignment=assignment)
    raise RenderFailure("routing did not settle")  # pragma: no cover - bounded above


def _render_group(
    renderer: Renderer,
    group: list[TableData],
    names: dict[str, str],
    files: dict[str, bytes],
    routes: dict[str, TableRoute],
) -> dict[str, str]:
    """Render one renderer's tables into ``files``/``routes``; return failed tables."""
    try:
        rendered = renderer.render(group, names=names)
        back = renderer.read_back(rendered, [t.schema for t in group])
    except _RENDER_ERRORS as exc:
        if len(group) == 1:
            return {group[0].name: f"{type(exc).__name__}: {exc}"[:200]}
        # Find the culprit by rendering the tables one at a time.
        problems: dict[str, str] = {}
        good = []
        for table in group:
            one = _render_group(renderer, [table], names, {}, {})
            if one:
                problems.update(one)
            else:
                good.append(table)
        if good:
            problems.update(_render_group(renderer, good, names, files, routes))
        return problems
    problems = {}
    for table in group:
        read = back.get(table.name)
        reason = (
            "table missing from the rendering"
            if read is None
            else compare_rows(table, read.columns, read.rows)
        )
        if reason:
            problems[table.name] = reason
    if problems:
        return problems
    files.update(rendered.files)
    for table in group:
        routes[table.name] = TableRoute(
            table=table.name, renderer=renderer.name, path=rendered.locations[table.name]
        )
    return {}


__all__ = ["RenderFailure", "TableRoute", "Workspace", "assign_renderers", "render_workspace"]
