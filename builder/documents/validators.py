"""The block validator: every required cell expressed exactly, with its record, unopposed.

A section is read paragraph by paragraph. A paragraph belongs to a record when it mentions
every anchor value of that record (and of no other record of the block); the surfaces the
writer aligned to a record's cells must be found, as whole tokens, in that record's
paragraphs. Checks, all deterministic:

- exact tokens for identifiers, codes, categories and text; typed numbers at the source
  precision (thousands separators allowed); dates and times normalized before comparison;
- every required cell aligned; null cells stated or omitted as the null policy says;
- no cell aligned to two different values;
- no stray number or date in a paragraph that is not one of its record's aligned cells, and
  no other known value of a field (a competing value) in a record's paragraph.

The same reader (``read_section``) recovers cells from a finished Markdown or PDF document.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.documents.blocks import Block
from builder.documents.values import NUMBER_TOKEN, check_surface, norm_text, recovered_value

logger = logging.getLogger(__name__)

NULL_MARKERS = (
    "not recorded",
    "not available",
    "unavailable",
    "no value",
    "missing",
    "not reported",
    "left blank",
    "未记录",
    "缺失",
    "空缺",
    "不详",
    "未提供",
    "无记录",
    "未填写",
)
_WORD_CHARS = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
"""The characters a whole token cannot continue with (``[0-9A-Za-z_]``)."""
_DATE_WORDS = re.compile(
    r"(?<![A-Za-z])(January|February|March|April|May|June|July|August|"
    r"September|October|November|December)(?![A-Za-z])"
)


@dataclass(frozen=True, kw_only=True)
class Alignment:
    """A cell id and the exact text (surface) that expresses it in a section."""

    cell_id: str
    surface: str


@dataclass(frozen=True, kw_only=True)
class CellSpec:
    """What a reader needs about one cell: where it belongs and how to parse it."""

    cell_id: str
    row: int
    column: str
    kind: str
    anchor: bool
    null: bool
    source_type: str = "str"


@dataclass(kw_only=True)
class SectionReading:
    """What was read from one section: values per cell id, and problems."""

    values: dict[str, list[Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def strip_markdown(text: str) -> str:
    r"""Plain text of one Markdown paragraph (heading marks, bold marks and bullets removed).

    >>> strip_markdown("## **Event** 142456")
    'Event 142456'
    >>> strip_markdown("- item one\n- item two")
    '• item one\n• item two'
    """
    lines = []
    for line in text.splitlines():
        line = re.sub(r"^\s{0,3}#{1,6}\s+", "", line)
        line = re.sub(r"^\s*[-*]\s+", "• ", line)
        lines.append(line.replace("**", ""))
    return "\n".join(lines).strip()


def split_paragraphs(markdown: str) -> list[str]:
    r"""Paragraphs of a Markdown text (blank-line separated), as normalized plain text.

    >>> split_paragraphs("# T\n\nA  b\nc.\n\n\n**D**")
    ['T', 'A b c.', 'D']
    """
    return [
        norm_text(strip_markdown(p)) for p in re.split(r"\n\s*\n", markdown) if strip_markdown(p)
    ]


def find_token(hay: str, needle: str) -> list[tuple[int, int]]:
    """Spans where ``needle`` occurs in ``hay`` as a whole token.

    >>> find_token("ids 10, 100 and 10.5", "10")
    [(4, 6)]
    >>> find_token("患者23070的", "23070")
    [(2, 7)]
    """
    if not needle:
        return []
    out: list[tuple[int, int]] = []
    find, size, n = hay.find, len(hay), len(needle)
    head = needle[0] in _WORD_CHARS
    tail = needle[-1] in _WORD_CHARS
    i = find(needle)
    while i >= 0:
        j = i + n
        if not (head and i > 0 and hay[i - 1] in _WORD_CHARS) and not (
            tail
            and j < size
            and (hay[j] in _WORD_CHARS or (hay[j] == "." and j + 1 < size and hay[j + 1].isdigit()))
        ):
            out.append((i, j))
        i = find(needle, i + 1)
    return out


def _inside(span: tuple[int, int], spans: Sequence[tuple[int, int]]) -> bool:
    return any(a <= span[0] and span[1] <= b for a, b in spans)


def typed_tokens(paragraph: str) -> list[tuple[int, int]]:
    """Spans of standalone numbers and month names: the tokens that state typed values.

    >>> p = "On May 3, 2105 the value was 7.5."
    >>> [p[a:b] for a, b in typed_tokens(p)]
    ['May', '3', '2105', '7.5']
    """
    spans = [m.span() for m in NUMBER_TOKEN.finditer(paragraph)]
    spans += [m.span() for m in _DATE_WORDS.finditer(paragraph)]
    return sorted(spans)


def _named_at(para: str, surfaces: Sequence[str]) -> int | None:
    """Where the last of ``surfaces`` first occurs as a token in ``para`` (None: one is absent).

    >>> _named_at("event 7 of patient 12", ["12", "7"]), _named_at("event 7", ["7", "8"])
    (19, None)
    """
    if not surfaces:
        return None
    at = -1
    for s in surfaces:
        if s not in para:  # the cheap test first: most records are not in most paragraphs
            return None
        spans = find_token(para, s)
        if not spans:
            return None
        at = max(at, spans[0][0])
    return at


def read_section(
    paragraphs: Sequence[str],
    *,
    rows: Sequence[int],
    cells: Mapping[str, CellSpec],
    alignments: Sequence[Alignment],
    domains: Mapping[str, frozenset[str]] | None = None,
    own_values: Mapping[tuple[int, str], Any] | None = None,
    describe: Mapping[int, str] | None = None,
) -> SectionReading:
    """Read the aligned cells of one section from its (normalized) paragraphs.

    Args:
        paragraphs: the section's paragraphs, normalized (``norm_text``).
        rows: the rows the section is about.
        cells: cell id -> spec, for every cell of those rows in the section.
        alignments: the writer's cell-to-surface alignments.
        domains: column -> known text values, to spot competing values.
        own_values: (row, column) -> the record's own text value (for the domain check).
        describe: row -> a human name of the record, for messages.
    """
    out = SectionReading()
    describe = describe or {}
    by_row: dict[int, list[tuple[CellSpec, str]]] = {r: [] for r in rows}
    for a in alignments:
        spec = cells.get(a.cell_id)
        if spec is None or spec.row not in by_row:
            out.errors.append(f"alignment for unknown cell {a.cell_id!r}")
            continue
        by_row[spec.row].append((spec, norm_text(a.surface)))
    anchor_surfaces = {r: [s for spec, s in by_row[r] if spec.anchor] for r in rows}
    owner: list[int | None] = []
    for i, para in enumerate(paragraphs):
        # The record a paragraph is about is the one whose anchor values are all named
        # first; any other record's values in it then show up as stray values below.
        named: dict[int, int] = {}
        for r in rows:
            at = _named_at(para, anchor_surfaces[r])
            if at is not None:
                named[r] = at
        first = min(named.values(), default=None)
        hits = [r for r, at in named.items() if at == first]
        if len(hits) > 1:
            names = " and ".join(describe.get(r, f"row {r}") for r in hits)
            out.errors.append(
                f"paragraph {i + 1} cannot be told apart between records "
                f"{names}; open each paragraph with its record's anchor values"
            )
        owner.append(hits[0] if len(hits) == 1 else None)
    for r in rows:
        name = describe.get(r, f"row {r}")
        mine = [i for i, o in enumerate(owner) if o == r]
        if not anchor_surfaces[r]:
            out.errors.append(f"record {name}: its anchor values are not aligned")
            continue
        if not mine:
            out.errors.append(f"record {name} has no paragraph that names all its anchor values")
            continue
        for spec, surface in by_row[r]:
            found = False
            for i in mine:
                if find_token(paragraphs[i], surface):
                    found = True
                    break
            if not found:
                out.errors.append(
                    f"cell {spec.cell_id}: {surface!r} is not in the paragraph of record {name}"
                )
                continue
            if spec.null:
                out.values.setdefault(spec.cell_id, []).append(None)
                continue
            try:
                value = recovered_value(
                    surface, spec.kind, {"int": int, "float": float}.get(spec.source_type, str)
                )
            except ValueError as exc:
                out.errors.append(f"cell {spec.cell_id}: {exc}")
                continue
            out.values.setdefault(spec.cell_id, []).append(value)
    for i, para in enumerate(paragraphs):
        owned = owner[i]
        spans: list[tuple[int, int]] = []
        if owned is not None:
            for _spec, surface in by_row[owned]:
                spans += find_token(para, surface)
        for span in typed_tokens(para):
            if not _inside(span, spans):
                where = (
                    f"of record {describe.get(owned, f'row {owned}')}"
                    if owned is not None
                    else ("without a record")
                )
                out.errors.append(
                    f"paragraph {i + 1} ({where}) states {para[span[0] : span[1]]!r}"
                    ", which is none of its aligned cells (a competing or "
                    "invented value)"
                )
        if owned is None or not domains:
            continue
        for column, values in domains.items():
            own = (own_values or {}).get((owned, column))
            for v in values:
                if v == own or v not in para:
                    continue
                for span in find_token(para, norm_text(v)):
                    if not _inside(span, spans):
                        out.errors.append(
                            f"paragraph {i + 1} names {v!r}, another value of "
                            f"field {column!r}, in record {describe.get(owned, owned)}"
                        )
                        break
    return out


def validate_section(
    block: Block,
    section: str,
    alignments: Sequence[Alignment],
    *,
    null_policy: str,
    domains: Mapping[str, frozenset[str]] | None = None,
) -> list[str]:
    """Every problem of a written section, as messages a writer can act on (empty: valid)."""
    errors: list[str] = []
    if not section.strip():
        return ["the section is empty"]
    if re.search(r"^\s{0,3}#", section, re.M):
        errors.append("the section must not contain Markdown headings")
    cells = {c.cell_id: c for c in block.cells}
    by_cell: dict[str, list[str]] = {}
    for a in alignments:
        by_cell.setdefault(a.cell_id, []).append(a.surface)
    describe = {
        r: ", ".join(f"{c.column}={c.value}" for c in block.anchor_cells(r)) for r in block.rows
    }
    for cid, surfaces in by_cell.items():
        cell = cells.get(cid)
        if cell is None:
            continue
        if cell.is_null:
            if null_policy == "omit":
                errors.append(f"cell {cid} is NULL and the null policy is omit: do not mention it")
            elif not any(any(m in s.lower() for m in NULL_MARKERS) for s in surfaces):
                errors.append(f"cell {cid} is NULL: state that {cell.label} is not recorded")
            continue
        problems = {p for s in surfaces if (p := check_surface(s.strip(), cell.value, cell.kind))}
        for p in sorted(problems):
            errors.append(f"cell {cid} ({cell.column} of record {describe[cell.row]}): {p}")
    for cid in block.required:
        if cid not in by_cell:
            cell = cells[cid]
            errors.append(
                f"cell {cid} ({cell.column} of record {describe[cell.row]}) is "
                f"missing: express the value {cell.value!r}"
            )
    if null_policy == "state":
        for cid in block.nulls:
            if cid not in by_cell:
                errors.append(f"cell {cid} is NULL: state that {cells[cid].label} is not recorded")
    if errors:
        return errors
    specs = {
        c.cell_id: CellSpec(
            cell_id=c.cell_id,
            row=c.row,
            column=c.column,
            kind=c.kind,
            anchor=c.anchor,
            null=c.is_null,
            source_type=type(c.value).__name__,
        )
        for c in block.cells
    }
    own = {(c.row, c.column): c.value for c in block.cells if isinstance(c.value, str)}
    usable = [a for a in alignments if a.cell_id in cells]
    doms = {k: v for k, v in (domains or {}).items() if k in block.columns}
    reading = read_section(
        split_paragraphs(section),
        rows=block.rows,
        cells=specs,
        alignments=usable,
        domains=doms,
        own_values=own,
        describe=describe,
    )
    return reading.errors


__all__ = [
    "NULL_MARKERS",
    "Alignment",
    "CellSpec",
    "SectionReading",
    "find_token",
    "read_section",
    "split_paragraphs",
    "strip_markdown",
    "typed_tokens",
    "validate_section",
]
