"""Column alignment: the first passing column mapping, found without enumerating them all.

The official evaluator canonicalizes every (gold column, prediction column) pair up front
and then tries all n! mappings in lexicographic order. This module returns the same answer
(the lexicographically first passing mapping, else whether any type-compatible mapping
exists) with a pruned depth-first search:

1. **Lazy, shared canonicalization.** Canonical values are interned as small integers in
   one id space per *rule* (type plus number options), shared by every column with that
   rule. A raw string is canonicalized at most once per rule, and only when a pair needs
   it; strings that also occur in the gold are looked up, not parsed again.
2. **Per-pair necessary conditions.** Prediction column ``p`` can stand for gold column
   ``j`` only if its cells, canonicalized under ``j``'s rule, form the same multiset as
   gold column ``j`` (the same sequence when row order matters). A few sampled cells
   reject most wrong pairs first; then each prediction column is summarized once per rule
   (its id sequence, and the interned class of its multiset or sequence), so all n²
   pairs cost O(rules × n × rows) plus O(n²) integer comparisons.
3. **Matching feasibility.** A partial mapping is extended only while the remaining gold
   columns can still be matched one-to-one to unused candidate columns (Kuhn's augmenting
   paths, memoized by the set of used columns). For ordered tasks the candidate test is
   already exact, so this alone gives the first mapping without backtracking.
4. **Partial-row checks** (unordered tasks). Assigning gold columns 0, 1, ... in order,
   each prediction row is labelled by its canonical prefix, interned in the gold's own
   prefix dictionary; the multiset of labels must equal the gold's at every depth. Values
   stay tied to their rows, so a passing mapping passes every prefix check.
5. **Identical columns.** Prediction columns with identical raw content share every fact,
   and once one fails at a search node its twins are skipped there.

Among candidates, columns are tried in increasing index order and gold columns are assigned
in order 0, 1, ..., so the first complete mapping found is the first in lexicographic order
of ``(π(0), π(1), ...)``. When none passes, ``type_normalization_failed`` is reported iff no
perfect matching exists between gold columns and the prediction columns whose every cell
canonicalizes under them; otherwise ``relation_mismatch``.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter, mul
from typing import Any, cast

from evaluator.canonical import (
    INVALID,
    Canonical,
    CellError,
    Converter,
    canonicalize_many,
    converter,
)
from evaluator.config import ColumnSpec, TaskConfig
from evaluator.errors import RELATION_MISMATCH, TYPE_NORMALIZATION_FAILED, FatalError

logger = logging.getLogger(__name__)

INVALID_ID = -1  # the id of a raw string that does not fit the rule
_PROBES = 16  # cells sampled per (rule, column) before summarizing a whole column
_RECENT_LEVELS = 8  # gold label dictionaries kept at once (each may hold a key per row)

Rule = tuple[Any, ...]


@dataclass(frozen=True, kw_only=True)
class RuleSpace:
    """Canonical values of one rule, interned as integers shared by its columns.

    Attributes:
        column: a gold column with this rule.
        convert: canonicalizes a raw string under the rule.
        raw_ids: raw string -> id, or :data:`INVALID_ID`; grows as strings are met.
        value_ids: canonical value -> id; grows as prediction values are met.
        gold_ids: the ids that occur in some gold column with this rule.
    """

    column: ColumnSpec
    convert: Converter
    raw_ids: dict[str, int]
    value_ids: dict[Canonical, int]
    gold_ids: set[int]

    def intern(self, raw: str) -> int:
        """The id of ``raw``, canonicalizing it on first sight."""
        known = self.raw_ids.get(raw)
        if known is not None:
            return known
        try:
            value = self.convert(raw)
        except CellError:
            self.raw_ids[raw] = INVALID_ID
            return INVALID_ID
        value_id = self.value_ids.setdefault(value, len(self.value_ids))
        self.raw_ids[raw] = value_id
        return value_id

    def intern_new(self, raws: Iterable[str]) -> None:
        """Intern strings not met before, in bulk (:func:`canonicalize_many`)."""
        values = canonicalize_many(raws, self.column)
        value_ids = self.value_ids
        fresh = set(values.values()) - value_ids.keys()
        fresh.discard(INVALID)
        start = len(value_ids)
        new_ids = range(start, start + len(fresh))
        value_ids.update(zip(cast(set[Canonical], fresh), new_ids, strict=True))
        ids = cast(
            Iterable[int],
            map(value_ids.get, values.values(), repeat(INVALID_ID)),  # type: ignore[arg-type]
        )
        self.raw_ids.update(zip(values, ids, strict=True))


@dataclass(frozen=True, kw_only=True)
class GoldRelation:
    """The gold table canonicalized once.

    Attributes:
        columns: the config's column specs.
        row_count: number of data rows.
        rules: each gold column's rule.
        spaces: one id space per rule.
        ids: per gold column, the id of each row's canonical value (in its rule's space).
        tallies: per gold column, how many rows carry each id.
    """

    columns: tuple[ColumnSpec, ...]
    row_count: int
    rules: tuple[Rule, ...]
    spaces: dict[Rule, RuleSpace]
    ids: tuple[list[int], ...]
    tallies: tuple[Counter[int], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Alignment:
    """Outcome of the search.

    Attributes:
        mapping: ``mapping[j]`` is the prediction column matched to gold column ``j``, or
            None when no mapping passes.
        error_code: None on success, else ``type_normalization_failed`` or
            ``relation_mismatch``.
        search_nodes: how many partial mappings the search visited (a measure of work).
    """

    mapping: tuple[int, ...] | None
    error_code: str | None
    search_nodes: int = 0


def _columns(rows: Sequence[Sequence[str]], width: int) -> list[tuple[str, ...]]:
    return [tuple(map(itemgetter(j), rows)) for j in range(width)]


def prepare_gold(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    config: TaskConfig,
    *,
    source: str,
) -> GoldRelation:
    """Canonicalize the gold under its own columns.

    Args:
        header: the gold header.
        rows: the gold data rows (rectangular).
        config: the task config.
        source: how messages name the gold file.

    Raises:
        FatalError: the gold's width differs from the config, or a cell does not fit its
            column (the first such cell in row-major order is named).
    """
    width = len(config.columns)
    if len(header) != width:
        raise FatalError(
            f"Gold/config column-count mismatch for {config.task_id}: "
            f"{len(header)} vs {width} ({source})"
        )
    spaces: dict[Rule, RuleSpace] = {}
    all_ids: list[list[int]] = []
    all_tallies: list[Counter[int]] = []
    failed = False
    for spec, raw_column in zip(config.columns, _columns(rows, width), strict=True):
        space = spaces.get(spec.rule)
        if space is None:
            space = spaces[spec.rule] = RuleSpace(
                column=spec, convert=converter(spec), raw_ids={}, value_ids={}, gold_ids=set()
            )
        space.intern_new(set(raw_column) - space.raw_ids.keys())
        ids = list(map(space.raw_ids.__getitem__, raw_column))
        tally = Counter(ids)
        failed = failed or INVALID_ID in tally
        space.gold_ids.update(tally)
        all_ids.append(ids)
        all_tallies.append(tally)
    if failed:
        _raise_gold_cell_error(rows, config, spaces, source)
    return GoldRelation(
        columns=config.columns,
        row_count=len(rows),
        rules=tuple(spec.rule for spec in config.columns),
        spaces=spaces,
        ids=tuple(all_ids),
        tallies=tuple(all_tallies),
    )


def _raise_gold_cell_error(
    rows: Sequence[Sequence[str]],
    config: TaskConfig,
    spaces: dict[Rule, RuleSpace],
    source: str,
) -> None:
    specs = config.columns
    for number, row in enumerate(rows, start=2):
        for spec, raw in zip(specs, row, strict=True):
            if spaces[spec.rule].raw_ids[raw] == INVALID_ID:
                try:
                    converter(spec)(raw)  # again, for the message naming this column
                except CellError as exc:
                    raise FatalError(
                        f"Gold normalization failed for {config.task_id}: {exc} "
                        f"({source}, row {number}, gold column {spec.gold_index})"
                    ) from None
    raise AssertionError("a gold cell failed but none was found again")  # pragma: no cover


def align(
    gold: GoldRelation,
    prediction_rows: Sequence[Sequence[str]],
    *,
    order_sensitive: bool,
) -> Alignment:
    """Find the first passing column mapping of a prediction with the gold's width.

    Args:
        gold: the prepared gold.
        prediction_rows: the prediction's data rows, as many as the gold's, each as wide as
            the gold.
        order_sensitive: compare row sequences (True) or row multisets (False).

    Returns:
        The mapping, or the error code the official evaluator gives.
    """
    search = _Search(gold, _columns(prediction_rows, len(gold.columns)), order_sensitive)
    mapping = search.run()
    logger.debug(
        "alignment: %d columns, %d rows, %d column summaries, %d search nodes, mapping %s",
        len(gold.columns),
        gold.row_count,
        len(search.summaries),
        search.nodes,
        mapping,
    )
    if mapping is not None:
        return Alignment(mapping=mapping, error_code=None, search_nodes=search.nodes)
    code = RELATION_MISMATCH if search.any_compatible_mapping() else TYPE_NORMALIZATION_FAILED
    return Alignment(mapping=None, error_code=code, search_nodes=search.nodes)


def _same_tally(left: Counter[Any], right: Counter[Any]) -> bool:
    # Counter.__eq__ walks both in Python; tallies never hold zeros, so dict equality is
    # the same test at C speed.
    return dict.__eq__(left, right)


def _has_perfect_matching(
    rows: Iterable[int], neighbours: Callable[[int], Iterable[int]], blocked: int
) -> bool:
    """Kuhn's algorithm: can every row be matched to a distinct, unblocked neighbour?"""
    owner: dict[int, int] = {}

    def augment(row: int, seen: set[int]) -> bool:
        for col in neighbours(row):
            if blocked >> col & 1 or col in seen:
                continue
            seen.add(col)
            if col not in owner or augment(owner[col], seen):
                owner[col] = row
                return True
        return False

    return all(augment(row, set()) for row in rows)


class _GoldLevels:
    """Gold row labels by prefix, for the partial-row checks of unordered tasks.

    Rows share a label after ``k`` columns iff they agree on gold columns ``0..k-1``.
    Labels are interned level by level. Once a prefix separates every distinct gold row
    (the levels are *saturated*), deeper columns cannot split labels further, so a level
    is then described by the value id each label expects, which needs no dictionary.
    """

    def __init__(self, gold: GoldRelation) -> None:
        self.gold = gold
        self._distinct_rows: int | None = None
        # labels[k]: each row's label after k columns. Level k's dictionary maps
        # label[k-1] * radixes[k] + value id -> label[k]; it and the tally of labels[k]
        # are kept for the few most recent levels only, and rebuilt from labels if needed.
        self.labels: list[list[int]] = [[], gold.ids[0]]
        self.radixes: list[int] = [0, 0]
        self._recent: OrderedDict[int, tuple[dict[int, int], Counter[int]]] = OrderedDict()
        self.saturated_at: int | None = None
        self._check_saturation(1, len(gold.tallies[0]))
        self.expected: dict[int, list[int]] = {}
        self._representative: list[int] | None = None

    def _check_saturation(self, level: int, label_count: int) -> None:
        if label_count == self.gold.row_count:  # every row unique: no need to count
            self.saturated_at = level
            return
        if self._distinct_rows is None:
            self._distinct_rows = len(set(zip(*self.gold.ids, strict=True)))
        if label_count == self._distinct_rows:
            self.saturated_at = level

    def saturated(self, depth: int) -> bool:
        """Whether labels after ``depth`` columns already separate all distinct rows."""
        while self.saturated_at is None and len(self.labels) <= depth:
            self._grow()
        return self.saturated_at is not None and depth >= self.saturated_at

    def _grow(self) -> None:
        level = len(self.labels) - 1
        ids = self.gold.ids[level]
        # (label, id) pairs as one integer; ids of a candidate column are gold ids of this
        # column, so ``radix`` bounds them on the prediction side too.
        radix = max(ids, default=0) + 1
        keys = list(map(add, map(mul, self.labels[level], repeat(radix)), ids))
        interned = dict(zip(dict.fromkeys(keys), itertools.count()))
        new = list(map(interned.__getitem__, keys))
        self.labels.append(new)
        self.radixes.append(radix)
        self._remember(level + 1, interned, Counter(new))
        self._check_saturation(level + 1, len(interned))

    def _remember(self, level: int, interned: dict[int, int], tally: Counter[int]) -> None:
        self._recent[level] = (interned, tally)
        self._recent.move_to_end(level)
        while len(self._recent) > _RECENT_LEVELS:
            self._recent.popitem(last=False)

    def step(self, depth: int) -> tuple[int, dict[int, int], Counter[int]]:
        """Radix, dictionary and tally for assigning gold column ``depth`` (not saturated)."""
        while len(self.labels) <= depth + 1:
            self._grow()
        level = depth + 1
        radix = self.radixes[level]
        known = self._recent.get(level)
        if known is None:
            keys = map(add, map(mul, self.labels[depth], repeat(radix)), self.gold.ids[depth])
            labels = self.labels[level]
            known = (dict(zip(keys, labels, strict=True)), Counter(labels))
        self._remember(level, *known)
        return radix, known[0], known[1]

    def expected_ids(self, depth: int) -> list[int]:
        """Saturated levels: the value id of gold column ``depth`` for each label."""
        expected = self.expected.get(depth)
        if expected is None:
            if self._representative is None:
                assert self.saturated_at is not None
                labels = self.labels[self.saturated_at]
                representative = [0] * (max(labels, default=-1) + 1)  # labels may be sparse
                for row, label in enumerate(labels):
                    representative[label] = row
                self._representative = representative
            expected = list(map(self.gold.ids[depth].__getitem__, self._representative))
            self.expected[depth] = expected
        return expected


@dataclass(frozen=True, kw_only=True, slots=True)
class _Summary:
    """A prediction column under one rule: its ids and the class of its relation shape."""

    ids: list[int] | None  # kept only when some gold column may match
    shape: int | None  # the gold shape class it equals, if any


class _Search:
    """State of one alignment search (one task, one prediction)."""

    def __init__(
        self, gold: GoldRelation, columns: list[tuple[str, ...]], order_sensitive: bool
    ) -> None:
        self.gold = gold
        self.columns = columns
        self.width = len(columns)
        self.order_sensitive = order_sensitive
        # Columns with identical raw content behave identically: facts are kept per twin.
        first_of: dict[tuple[str, ...], int] = {}
        self.twins = [first_of.setdefault(column, p) for p, column in enumerate(columns)]
        # A gold column's *shape* is its id sequence, or its tally when row order does not
        # matter; gold columns of one rule with equal shapes form one class.
        self.shape_classes: dict[Rule, list[tuple[int, list[int] | Counter[int]]]] = {}
        self.gold_shapes: list[int] = []
        for rule, ids, tally in zip(gold.rules, gold.ids, gold.tallies, strict=True):
            shape_class = self._classify(rule, ids, tally)
            if shape_class is None:
                shape_class = len(self.gold_shapes)
                self.shape_classes.setdefault(rule, []).append(
                    (shape_class, ids if order_sensitive else tally)
                )
            self.gold_shapes.append(shape_class)
        self.summaries: dict[tuple[Rule, int], _Summary] = {}
        self.compatible_cache: dict[tuple[Rule, int], bool] = {}
        self.feasible_cache: dict[tuple[int, int], bool] = {}
        self.candidates: list[list[int]] = []
        self.levels: _GoldLevels | None = None
        self.nodes = 0

    def _classify(self, rule: Rule, ids: list[int], tally: Counter[int]) -> int | None:
        """The class of the gold shape equal to this one, if any (exact comparison)."""
        for shape_class, shape in self.shape_classes.get(rule, ()):
            # List and dict equality check the length first and stop at the first mismatch.
            if isinstance(shape, Counter):
                if _same_tally(tally, shape):
                    return shape_class
            elif ids == shape:
                return shape_class
        return None

    # ---- per (rule, column) facts, computed lazily and once ----------------------------
    def _summary(self, rule: Rule, p: int) -> _Summary:
        key = (rule, self.twins[p])
        summary = self.summaries.get(key)
        if summary is None:
            summary = self.summaries[key] = self._summarize(rule, key[1])
        return summary

    def _summarize(self, rule: Rule, p: int) -> _Summary:
        space = self.gold.spaces[rule]
        column = self.columns[p]
        intern = space.intern
        gold_ids = space.gold_ids
        nothing = _Summary(ids=None, shape=None)
        # Sampled cells first: a value that no gold column of this rule holds settles it.
        for raw in column[:: max(1, len(column) // _PROBES)]:
            value_id = intern(raw)
            if value_id not in gold_ids:
                if value_id == INVALID_ID:
                    self.compatible_cache[(rule, p)] = False
                return nothing
        looked_up = list(map(space.raw_ids.get, column))
        if None in looked_up:
            unseen = list(set(column) - space.raw_ids.keys())
            for raw in unseen[:_PROBES]:
                value_id = intern(raw)
                if value_id not in gold_ids:
                    if value_id == INVALID_ID:
                        self.compatible_cache[(rule, p)] = False
                    return nothing
            space.intern_new(unseen[_PROBES:])
            looked_up = list(map(space.raw_ids.__getitem__, column))
        ids = cast(list[int], looked_up)
        tally = Counter(ids)
        if INVALID_ID in tally:
            self.compatible_cache[(rule, p)] = False
            return nothing
        self.compatible_cache[(rule, p)] = True
        shape = self._classify(rule, ids, tally)
        if shape is None:
            return nothing
        return _Summary(ids=ids, shape=shape)

    def is_candidate(self, j: int, p: int) -> bool:
        """Whether column ``p`` canonicalizes to gold column ``j``'s multiset (sequence)."""
        summary = self._summary(self.gold.rules[j], p)
        return summary.shape is not None and summary.shape == self.gold_shapes[j]

    def compatible(self, j: int, p: int) -> bool:
        """Whether every cell of prediction column ``p`` fits gold column ``j``'s rule."""
        rule = self.gold.rules[j]
        key = (rule, self.twins[p])
        known = self.compatible_cache.get(key)
        if known is None:
            space = self.gold.spaces[rule]
            distinct = set(self.columns[key[1]])
            space.intern_new(distinct - space.raw_ids.keys())
            known = INVALID_ID not in map(space.raw_ids.__getitem__, distinct)
            self.compatible_cache[key] = known
        return known

    def _ids(self, j: int, p: int) -> list[int]:
        ids = self._summary(self.gold.rules[j], p).ids
        assert ids is not None
        return ids

    # ---- search ------------------------------------------------------------------------
    def _feasible(self, depth: int, used: int) -> bool:
        key = (depth, used)
        known = self.feasible_cache.get(key)
        if known is None:
            known = _has_perfect_matching(
                range(depth, self.width), self.candidates.__getitem__, used
            )
            self.feasible_cache[key] = known
        return known

    def run(self) -> tuple[int, ...] | None:
        width = self.width
        self.candidates = [
            [p for p in range(width) if self.is_candidate(j, p)] for j in range(width)
        ]
        if not all(self.candidates) or not self._feasible(0, 0):
            return None
        if not self.order_sensitive:
            self.levels = _GoldLevels(self.gold)
        mapping = [0] * width
        if self._extend(0, 0, [], mapping):
            return tuple(mapping)
        return None

    def _rows_still_match(self, depth: int, p: int, labels: list[int]) -> list[int] | None:
        """Row labels after also assigning ``p`` to gold column ``depth``, or None."""
        levels = self.levels
        assert levels is not None
        ids = self._ids(depth, p)
        if depth == 0:
            return ids  # the candidate test already compared this column's tally
        if levels.saturated(depth):
            expected = levels.expected_ids(depth)
            return labels if ids == list(map(expected.__getitem__, labels)) else None
        radix, interned, tally = levels.step(depth)
        next_labels = list(map(interned.get, map(add, map(mul, labels, repeat(radix)), ids)))
        if not _same_tally(Counter(next_labels), tally):
            return None
        return next_labels  # type: ignore[return-value]  # no None: the tallies matched

    def _extend(self, depth: int, used: int, labels: list[int], mapping: list[int]) -> bool:
        self.nodes += 1
        if depth == self.width:
            return True
        failed_twins: set[int] = set()
        for p in self.candidates[depth]:
            if used >> p & 1 or self.twins[p] in failed_twins:
                continue
            now_used = used | 1 << p
            if self._feasible(depth + 1, now_used):
                next_labels = (
                    labels if self.order_sensitive else self._rows_still_match(depth, p, labels)
                )
                if next_labels is not None:
                    mapping[depth] = p
                    if self._extend(depth + 1, now_used, next_labels, mapping):
                        return True
            failed_twins.add(self.twins[p])
        return False

    def any_compatible_mapping(self) -> bool:
        """Whether some one-to-one mapping has every pair type-compatible."""
        if self.candidates and all(self.candidates) and self._feasible(0, 0):
            return True  # candidate pairs are compatible pairs
        width = self.width

        def neighbours(j: int) -> Iterable[int]:
            return (p for p in range(width) if self.compatible(j, p))

        return _has_perfect_matching(range(width), neighbours, 0)


__all__ = ["INVALID_ID", "Alignment", "GoldRelation", "RuleSpace", "align", "prepare_gold"]
