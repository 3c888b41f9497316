"""What a query reads and does, from its parsed AST (sqlglot, dialect SQLite).

Used for the evaluation config (``order_sensitive``), the task metadata (operations, the
tables and so the modalities a task needs) and the finance sub-domain of an item.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

OPERATIONS = (
    "join",
    "aggregation",
    "group_by",
    "having",
    "order_by",
    "limit",
    "subquery",
    "date_function",
    "distinct",
)

_DATE_NAMES = frozenset(
    {"date", "time", "datetime", "julianday", "strftime", "unixepoch", "timediff"}
)
_DATE_WORDS = ("date", "time", "day", "week", "month", "year", "epoch")


@lru_cache(maxsize=256)
def _parse(sql: str) -> Any:
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"sql does not parse: {first}") from None
    if tree is None:
        raise ValueError("sql is empty")
    return tree


def tables_read(sql: str) -> list[str]:
    """The tables a query reads, sorted by name (CTE names excluded).

    >>> tables_read("with x as (select * from a) select * from x join b on x.i = b.i")
    ['a', 'b']
    """
    from sqlglot import exp

    tree = _parse(sql)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    seen: dict[str, str] = {}
    for table in tree.find_all(exp.Table, bfs=False):
        name = table.name
        if name and name.lower() not in ctes:
            seen.setdefault(name.lower(), name)
    return sorted(seen.values(), key=str.lower)


def order_sensitive(sql: str) -> bool:
    """True exactly when the outermost query has an ORDER BY.

    >>> order_sensitive("select a from t order by a limit 3")
    True
    >>> order_sensitive("select a from (select a from t order by a limit 3)")
    False
    """
    tree = _parse(sql)
    return bool(tree.args.get("order"))


def _is_date_function(node: Any) -> bool:
    from sqlglot import exp

    if isinstance(node, exp.Anonymous):
        return str(node.name).lower() in _DATE_NAMES
    if isinstance(node, exp.Func):
        name = type(node).__name__.lower()
        return any(word in name for word in _DATE_WORDS)
    return False


def operations(sql: str) -> list[str]:
    """The operations a query uses, out of ``OPERATIONS``, in that order.

    >>> operations("select count(distinct a) from t join u on t.i = u.i group by b")
    ['join', 'aggregation', 'group_by', 'distinct']
    """
    from sqlglot import exp

    tree = _parse(sql)
    found: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Join):
            found.add("join")
        elif isinstance(node, exp.AggFunc):
            found.add("aggregation")
        elif isinstance(node, exp.Group):
            found.add("group_by")
        elif isinstance(node, exp.Having):
            found.add("having")
        elif isinstance(node, exp.Order):
            found.add("order_by")
        elif isinstance(node, exp.Limit):
            found.add("limit")
        elif isinstance(node, exp.Distinct):
            found.add("distinct")
        elif isinstance(node, exp.Subquery) or (
            isinstance(node, exp.Select) and node.find_ancestor(exp.Select) is not None
        ):
            found.add("subquery")
        if _is_date_function(node):
            found.add("date_function")
    return [op for op in OPERATIONS if op in found]


def sql_operations(sql: str) -> set[str]:
    """The paper's SQL-side operation categories.

    They are projection, filtering, ordering, aggregation and join.

    Projection: the output names at least one column that is not only aggregated;
    filtering: a WHERE or HAVING; ordering: an ORDER BY or a rank window; join: an
    explicit join or a query combining two or more tables (EHRSQL's IN-subqueries).

    >>> sorted(sql_operations("select a from t where b in (select b from u)"))
    ['filtering', 'join', 'projection']
    >>> sorted(sql_operations("select count(*) from t"))
    ['aggregation']
    """
    from sqlglot import exp

    tree = _parse(sql)
    ops: set[str] = set()
    outer = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if outer is not None:
        for col in outer.expressions:
            plain = col.find(exp.Column) is not None and col.find(exp.AggFunc) is None
            if plain or isinstance(col, exp.Star):
                ops.add("projection")
    for node in tree.walk():
        if isinstance(node, exp.Where | exp.Having):
            ops.add("filtering")
        elif isinstance(node, exp.Order) or (
            isinstance(node, exp.Window)
            and str(node.this.key if node.this is not None else "").lower()
            in ("rank", "denserank", "rownumber", "dense_rank", "row_number")
        ):
            ops.add("ordering")
        elif isinstance(node, exp.AggFunc):
            ops.add("aggregation")
        elif isinstance(node, exp.Join):
            ops.add("join")
    if len(tables_read(sql)) > 1:
        ops.add("join")
    return ops


__all__ = ["OPERATIONS", "operations", "order_sensitive", "sql_operations", "tables_read"]
