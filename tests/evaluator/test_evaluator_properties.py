"""Property-based tests: verdicts are invariant under what the protocol ignores and sensitive
to what it scores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import evaluator


@dataclass(frozen=True)
class Kind:
    """A column rule, a pool of canonically distinct values, and equivalent spellings."""

    column: dict[str, Any]
    pool: tuple[str, ...]
    respell: dict[str, tuple[str, ...]]
    fresh: str  # canonically absent from every pool, under every rule


KINDS = (
    Kind(
        {"type": "text"},
        ("alpha", "Beta", "北京", "x y", ""),
        {"alpha": (" alpha ", "\u3000alpha"), "": ("  ",)},
        "fresh text",
    ),
    Kind(
        {"type": "number", "comparison": {"mode": "integer"}},
        ("1", "2", "30", "-4", "1000", ""),
        {"1": ("1.0", "+1"), "1000": ("1,000", "1e3"), "": ("null", "NaN")},
        "987654321",
    ),
    Kind(
        {"type": "number", "comparison": {"mode": "decimal_places", "digits": 2}},
        ("1.25", "3.5", "-0.75", "100"),
        {"3.5": ("3.50", "3.499"), "100": ("1e2", "100.001")},
        "4321.5",
    ),
    Kind(
        {"type": "date"},
        ("2024-01-01", "2023-06-30", "1999-12-31"),
        {"2024-01-01": ("20240101", "2024-01-01T00:00:00Z")},
        "1901-02-03",
    ),
    Kind(
        {"type": "datetime"},
        ("2024-01-01T10:00:00", "2024-01-01T10:00:00Z", "2023-05-05T00:00:00"),
        {"2024-01-01T10:00:00Z": ("2024-01-01T18:00:00+08:00",)},
        "1902-03-04T05:06:07",
    ),
    Kind({"type": "boolean"}, ("true", "false"), {"true": ("YES", "是", "1")}, "maybe"),
)
TEXT = KINDS[0]


@dataclass(frozen=True)
class Table:
    kinds: tuple[Kind, ...]
    rows: list[list[str]]
    order_sensitive: bool

    @property
    def config(self) -> evaluator.TaskConfig:
        return evaluator.parse_config(
            {
                "schema_version": "1.0",
                "task_id": "task_1",
                "order_sensitive": self.order_sensitive,
                "columns": [
                    {"gold_index": i, "gold_name": f"g{i}", **kind.column}
                    for i, kind in enumerate(self.kinds)
                ],
            },
            source="property",
        )


@st.composite
def tables(draw: st.DrawFn, *, keyed: bool = False, kinds: tuple[Kind, ...] = KINDS) -> Table:
    """A gold table; ``keyed`` prepends a text column whose values are unique per row."""
    width = draw(st.integers(1, 5))
    chosen = tuple(draw(st.sampled_from(kinds)) for _ in range(width))
    height = draw(st.integers(1 if not keyed else 2, 10))
    rows = [[draw(st.sampled_from(kind.pool)) for kind in chosen] for _ in range(height)]
    if keyed:
        chosen = (TEXT, *chosen)
        rows = [[f"key-{r}", *row] for r, row in enumerate(rows)]
    return Table(chosen, rows, draw(st.booleans()))


def _score(table: Table, header: list[str], rows: list[list[str]]) -> evaluator.TaskVerdict:
    return evaluator.evaluate_rows(
        gold_header=[f"g{i}" for i in range(len(table.kinds))],
        gold_rows=table.rows,
        prediction_header=header,
        prediction_rows=rows,
        config=table.config,
    )


def _permuted(rows: list[list[str]], order: list[int]) -> list[list[str]]:
    return [[row[j] for j in order] for row in rows]


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data(), table=tables())
def test_permuted_renamed_shuffled_respelled_prediction_passes(
    data: st.DataObject, table: Table
) -> None:
    width = len(table.kinds)
    order = data.draw(st.permutations(range(width)))
    rows = [list(row) for row in table.rows]
    for row in rows:
        for j, kind in enumerate(table.kinds):
            spellings = kind.respell.get(row[j])
            if spellings and data.draw(st.booleans()):
                row[j] = data.draw(st.sampled_from(spellings))
    if not table.order_sensitive:
        rows = data.draw(st.permutations(rows))
    names = st.text(st.characters(blacklist_characters="\x00"), max_size=5)
    header = [data.draw(names) for _ in range(width)]
    verdict = _score(table, header, _permuted(rows, list(order)))
    assert verdict.passed, verdict
    assert verdict.column_mapping is not None
    # The reported mapping is a passing one: undoing it restores the gold rows.
    back = [pair.prediction_index for pair in verdict.column_mapping]
    assert sorted(back) == list(range(width))


@SETTINGS
@given(data=st.data(), table=tables())
def test_changing_one_cell_to_a_value_absent_from_the_gold_fails(
    data: st.DataObject, table: Table
) -> None:
    """Any one cell changed to a value no gold column holds (under any rule) fails."""
    r = data.draw(st.integers(0, len(table.rows) - 1))
    j = data.draw(st.integers(0, len(table.kinds) - 1))
    rows = [list(row) for row in table.rows]
    rows[r][j] = table.kinds[j].fresh
    verdict = _score(table, [f"p{i}" for i in range(len(table.kinds))], rows)
    assert not verdict.passed
    assert verdict.error_code in ("relation_mismatch", "type_normalization_failed")


@SETTINGS
@given(data=st.data(), table=tables(kinds=(TEXT,)))
def test_changing_one_cell_to_any_non_equivalent_value_fails_for_one_rule(
    data: st.DataObject, table: Table
) -> None:
    """With one rule for all columns, any non-equivalent change alters the table's values."""
    r = data.draw(st.integers(0, len(table.rows) - 1))
    j = data.draw(st.integers(0, len(table.kinds) - 1))
    spec = table.config.columns[j]
    old = evaluator.canonicalize(table.rows[r][j], spec)
    choices = [v for v in TEXT.pool if evaluator.canonicalize(v, spec) != old]
    rows = [list(row) for row in table.rows]
    rows[r][j] = data.draw(st.sampled_from(choices))
    order = data.draw(st.permutations(range(len(table.kinds))))
    verdict = _score(table, [f"p{i}" for i in range(len(table.kinds))], _permuted(rows, order))
    assert not verdict.passed
    assert verdict.error_code == "relation_mismatch"


@SETTINGS
@given(data=st.data(), table=tables(keyed=True))
def test_swapping_two_rows_fails_an_ordered_task(data: st.DataObject, table: Table) -> None:
    ordered = Table(table.kinds, table.rows, True)
    i, k = data.draw(
        st.lists(st.integers(0, len(table.rows) - 1), min_size=2, max_size=2, unique=True)
    )
    rows = [list(row) for row in table.rows]
    rows[i], rows[k] = rows[k], rows[i]
    order = data.draw(st.permutations(range(len(table.kinds))))
    header = [f"p{c}" for c in range(len(table.kinds))]
    assert _score(ordered, header, _permuted(table.rows, order)).passed
    verdict = _score(ordered, header, _permuted(rows, order))
    assert not verdict.passed
    assert verdict.error_code == "relation_mismatch"


@SETTINGS
@given(data=st.data(), table=tables(keyed=True))
def test_swapping_one_columns_values_between_two_rows_fails(
    data: st.DataObject, table: Table
) -> None:
    width = len(table.kinds)
    config = table.config
    pairs = [
        (i, k, c)
        for c in range(1, width)
        for i in range(len(table.rows))
        for k in range(i + 1, len(table.rows))
        if evaluator.canonicalize(table.rows[i][c], config.columns[c])
        != evaluator.canonicalize(table.rows[k][c], config.columns[c])
    ]
    if not pairs:
        return
    i, k, c = data.draw(st.sampled_from(pairs))
    rows = [list(row) for row in table.rows]
    rows[i][c], rows[k][c] = rows[k][c], rows[i][c]
    if not table.order_sensitive:
        rows = data.draw(st.permutations(rows))
    order = data.draw(st.permutations(range(width)))
    verdict = _score(table, [f"p{j}" for j in range(width)], _permuted(rows, order))
    assert not verdict.passed
    assert verdict.error_code == "relation_mismatch"
