"""Column alignment: the first passing mapping, as a brute-force search would report it, without
the brute-force work."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

import evaluator
from evaluator.matching import align, prepare_gold

INTEGER = {"type": "number", "comparison": {"mode": "integer"}}
ONE_PLACE = {"type": "number", "comparison": {"mode": "decimal_places", "digits": 1}}
TEXT = {"type": "text"}
BOOLEAN = {"type": "boolean"}
DATE = {"type": "date"}


def _config(columns: list[dict[str, object]], order_sensitive: bool) -> evaluator.TaskConfig:
    return evaluator.parse_config(
        {
            "schema_version": "1.0",
            "task_id": "task_1",
            "order_sensitive": order_sensitive,
            "columns": [
                {"gold_index": i, "gold_name": f"g{i}", **column}
                for i, column in enumerate(columns)
            ],
        },
        source="test",
    )


def _brute_force(
    config: evaluator.TaskConfig, gold: list[list[str]], prediction: list[list[str]]
) -> tuple[tuple[int, ...] | None, str | None]:
    """The official semantics spelled out: every permutation, in lexicographic order."""
    specs = config.columns
    width = len(specs)

    def canonical(cell: str, spec: evaluator.ColumnSpec) -> object:
        try:
            return evaluator.canonicalize(cell, spec)
        except evaluator.CellError:
            return None

    gold_rows = [tuple(canonical(row[j], specs[j]) for j in range(width)) for row in gold]
    compatible_seen = False
    for order in itertools.permutations(range(width)):
        rows = [
            tuple(canonical(row[order[j]], specs[j]) for j in range(width)) for row in prediction
        ]
        if any(value is None for row in rows for value in row):
            continue
        compatible_seen = True
        same = rows == gold_rows if config.order_sensitive else Counter(rows) == Counter(gold_rows)
        if same:
            return order, None
    return None, "relation_mismatch" if compatible_seen else "type_normalization_failed"


def _ours(
    config: evaluator.TaskConfig, gold: list[list[str]], prediction: list[list[str]]
) -> tuple[tuple[int, ...] | None, str | None]:
    verdict = evaluator.evaluate_rows(
        gold_header=[f"g{i}" for i in range(len(config.columns))],
        gold_rows=gold,
        prediction_header=[f"p{i}" for i in range(len(config.columns))],
        prediction_rows=prediction,
        config=config,
    )
    if verdict.column_mapping is None:
        return None, verdict.error_code
    return tuple(pair.prediction_index for pair in verdict.column_mapping), None


POOLS = {
    "text": ["a", "b", "", "1", "1.0"],
    "number": ["1", "1.0", "2", "x", "", "0.05"],
    "boolean": ["yes", "no", "1", "0", "maybe"],
    "date": ["2024-01-01", "20240101", "2024-01-02", "soon"],
}


@pytest.mark.parametrize("seed", range(8))
def test_same_answer_as_trying_every_permutation(seed: int) -> None:
    rng = random.Random(seed)
    kinds = [TEXT, INTEGER, ONE_PLACE, BOOLEAN, DATE]
    for _ in range(150):
        width = rng.randint(1, 5)
        base = rng.sample(kinds, rng.choice([1, 2]))
        columns = [rng.choice(base) for _ in range(width)]
        config = _config(columns, rng.random() < 0.35)
        pools = [POOLS[str(column["type"])][: rng.randint(2, 4)] for column in columns]
        gold = [[rng.choice(pools[j]) for j in range(width)] for _ in range(rng.randint(0, 6))]
        try:
            prepare_gold([""] * width, gold, config, source="test")
        except evaluator.FatalError:
            continue
        order = list(range(width))
        rng.shuffle(order)
        rows = [list(row) for row in gold]
        if rows and rng.random() < 0.5:
            rows[rng.randrange(len(rows))][rng.randrange(width)] = rng.choice(POOLS["number"])
        if not config.order_sensitive or rng.random() < 0.3:
            rng.shuffle(rows)
        prediction = [[row[order[p]] for p in range(width)] for row in rows]
        assert _ours(config, gold, prediction) == _brute_force(config, gold, prediction)


def _search_nodes(
    config: evaluator.TaskConfig, gold: list[list[str]], prediction: list[list[str]]
) -> tuple[evaluator.TaskConfig, int, tuple[int, ...] | None, str | None]:
    relation = prepare_gold([""] * len(config.columns), gold, config, source="test")
    alignment = align(relation, prediction, order_sensitive=config.order_sensitive)
    return config, alignment.search_nodes, alignment.mapping, alignment.error_code


def test_reversed_same_typed_columns_need_no_enumeration() -> None:
    """Regression: 8 integer columns whose only match is the last permutation (8! = 40320)."""
    rng = random.Random(1)
    gold = [[str(rng.randrange(10**6)) for _ in range(8)] for _ in range(2000)]
    prediction = [row[::-1] for row in gold]
    _, nodes, mapping, code = _search_nodes(_config([INTEGER] * 8, False), gold, prediction)
    assert mapping == tuple(range(7, -1, -1)) and code is None
    assert nodes == 9  # one node per depth: no backtracking


def test_no_match_among_same_typed_columns_is_decided_quickly() -> None:
    """Regression: 9 text columns, one column's values shuffled, no mapping passes (9!)."""
    rng = random.Random(2)
    gold = [[f"v{rng.randrange(10**9)}" for _ in range(9)] for _ in range(300)]
    prediction = [row[::-1] for row in gold]
    column = [row[4] for row in prediction]
    rng.shuffle(column)
    for row, value in zip(prediction, column, strict=True):
        row[4] = value
    rng.shuffle(prediction)
    _, nodes, mapping, code = _search_nodes(_config([TEXT] * 9, False), gold, prediction)
    assert mapping is None and code == "relation_mismatch"
    assert nodes <= 9


def test_columns_sharing_one_multiset_are_told_apart_by_rows() -> None:
    rng = random.Random(3)
    values = [str(v) for v in range(500)]
    columns = []
    for _ in range(6):
        shuffled = values[:]
        rng.shuffle(shuffled)
        columns.append(shuffled)
    gold = [list(row) for row in zip(*columns, strict=True)]
    order = [3, 0, 5, 1, 4, 2]
    prediction = [[row[j] for j in order] for row in gold]
    rng.shuffle(prediction)
    _, nodes, mapping, code = _search_nodes(_config([INTEGER] * 6, False), gold, prediction)
    assert code is None and mapping is not None
    assert [order[p] for p in mapping] == list(range(6))
    assert nodes < 6 * 6 + 1


def test_identical_columns_map_in_lexicographic_order() -> None:
    gold = [["x", "x", "1"], ["y", "y", "2"]]
    prediction = [["2", "y", "y"], ["1", "x", "x"]]
    config = _config([TEXT, TEXT, INTEGER], False)
    assert _ours(config, gold, prediction) == ((1, 2, 0), None)


def test_sixty_four_columns_permuted() -> None:
    rng = random.Random(4)
    kinds = [TEXT, INTEGER, ONE_PLACE, BOOLEAN, DATE]
    columns = [kinds[i % len(kinds)] for i in range(64)]
    makers = {
        "text": lambda: f"t{rng.randrange(10**6)}",
        "number": lambda: str(rng.randrange(-500, 500)),
        "boolean": lambda: rng.choice(["true", "false"]),
        "date": lambda: f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
    }
    gold = [[makers[str(c["type"])]() for c in columns] for _ in range(200)]
    order = list(range(64))
    rng.shuffle(order)
    prediction = [[row[j] for j in order] for row in gold]
    rng.shuffle(prediction)
    config = _config(columns, False)
    mapping, code = _ours(config, gold, prediction)
    assert code is None and mapping is not None
    assert _brute_force_check(config, gold, prediction, mapping)


def _brute_force_check(
    config: evaluator.TaskConfig,
    gold: list[list[str]],
    prediction: list[list[str]],
    mapping: tuple[int, ...],
) -> bool:
    specs = config.columns
    canon = evaluator.canonicalize
    want = Counter(tuple(canon(row[j], specs[j]) for j in range(len(specs))) for row in gold)
    got = Counter(
        tuple(canon(row[mapping[j]], specs[j]) for j in range(len(specs))) for row in prediction
    )
    return want == got


def test_gold_label_levels_are_rebuilt_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: label dictionaries evicted from the small cache are rebuilt identically."""
    import evaluator.matching as matching

    rng = random.Random(5)
    width = 10
    # Many duplicate rows keep the levels from saturating early.
    base = [[rng.choice("abc") for _ in range(width)] for _ in range(30)]
    gold = base + base[:20]
    config = _config([TEXT] * width, False)
    relation = prepare_gold([""] * width, gold, config, source="test")

    monkeypatch.setattr(matching, "_RECENT_LEVELS", 64)
    levels = matching._GoldLevels(relation)
    first = {
        depth: levels.step(depth) for depth in range(1, width - 1) if not levels.saturated(depth)
    }
    assert len(first) >= 3
    monkeypatch.setattr(matching, "_RECENT_LEVELS", 1)
    fresh = matching._GoldLevels(relation)
    again = {depth: fresh.step(depth) for depth in first}
    assert len(fresh._recent) == 1
    assert {depth: fresh.step(depth) for depth in reversed(list(first))} == first
    assert again == first
