"""The ``DocumentWriter`` interface, its registry, and the ``llm`` provider.

A writer turns one block into one section of prose plus a cell-to-span alignment (which
exact text expresses which cell). Every reply, from any provider, goes through the same
validators; a rejected reply comes back to the writer with the errors (``SectionRequest.
history``) for a bounded number of attempts (the loop of ``dataspace.ask``).

Providers: ``template`` (offline, deterministic, ``builder.documents.templates``) and
``llm`` (an OpenAI-compatible chat model through ``dataspace.llm.MeteredClient``; the
prompt is the paper's grounded-generation contract and the reply must be JSON).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from builder.documents.blocks import Block
from builder.documents.plan import GENRES, DocumentPlan
from builder.documents.validators import Alignment
from dataspace.ask import Rejection, extract_json, retry_messages
from dataspace.errors import ConfigError, ReplyError
from dataspace.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SectionRequest:
    """What a writer is asked to write.

    Attributes:
        plan: the document plan (genre, language, null policy, styles).
        block: the block to express.
        attempt: 1 for the first try, then 2, 3 ...
        history: every rejected earlier attempt (its raw reply and the validator's errors).
    """

    plan: DocumentPlan
    block: Block
    attempt: int = 1
    history: tuple[Rejection, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SectionReply:
    """One written section.

    Attributes:
        section: Markdown paragraphs (no headings: the assembler owns them).
        alignments: cell id -> the exact text that expresses it, for every cell expressed.
        raw: the provider's raw reply (what goes back into the conversation on a retry).
    """

    section: str
    alignments: tuple[Alignment, ...]
    raw: str = ""
    usage: Mapping[str, Any] = field(default_factory=dict)


class DocumentWriter(Protocol):
    """Writes one section from one block.

    Attributes:
        name: the provider name recorded in the ledger.
    """

    name: str

    def write(self, request: SectionRequest) -> SectionReply:
        """Write the section.

        Raises:
            ReplyError: the reply cannot be parsed (counted as a failed attempt).
        """
        ...


WRITERS: Registry[Callable[..., DocumentWriter]] = Registry(
    "document writer",
    {
        "llm": "builder.documents.writers:LlmWriter",
        "template": "builder.documents.templates:TemplateWriter",
    },
)


def register_writer(
    name: str,
) -> Callable[[Callable[..., DocumentWriter]], Callable[..., DocumentWriter]]:
    """Register a writer factory under ``name``."""
    return WRITERS.register(name)


def writer_names() -> list[str]:
    """The known provider names."""
    return WRITERS.names()


def get_writer(name: str, **options: Any) -> DocumentWriter:
    """A writer by provider name.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    return WRITERS.get(name)(**options)


# ---- the llm provider ---------------------------------------------------------------------

SYSTEM_PROMPT = """Write one section of a realistic {genre} from the supplied table block. \
The table block is the sole source of record facts.

GROUNDING RULES
1. Express every REQUIRED_CELL_ID with its exact entity association.
2. Preserve identifiers, categorical values, numeric precision, dates, times, signs, and \
units. Do not merge values from different rows.
3. Follow NULL_POLICY. Never infer a missing value.
4. You may add connective prose or domain-neutral scene detail, but it must not create a \
competing value for any protected field, and must contain no other numbers or dates.
5. Keep ANCHOR_FIELDS explicit so this section can be joined with other sections about the \
same records: write one paragraph per record, separated by a blank line, and name every \
anchor value of that record in its paragraph.
6. Do not write headings. Write in {language}.
7. Return only JSON: {{"section": "...", "alignments": [{{"cell_id": "...", \
"surface": "..."}}]}} where each surface is the exact text of the section that expresses \
that cell (one entry per cell, anchors included)."""


def block_prompt(request: SectionRequest) -> str:
    """The user message for one block (the paper's INPUT fields)."""
    plan, block = request.plan, request.block
    rows = []
    for r in block.rows:
        rows.append(
            {
                c.cell_id: {"field": c.column, "label": c.label, "type": c.kind, "value": c.value}
                for c in block.record(r)
            }
        )
    policy = (
        "state: say that the field is not recorded, and align that phrase to the cell"
        if plan.null_policy == "state"
        else "omit: do not mention NULL fields"
    )
    parts = [
        f"BLOCK: {block.block_id} of table {plan.table}",
        f"STYLE: {GENRES.get(plan.genre, {}).get('en', plan.genre)}; dates like "
        f"{plan.date_style}; thousands separators {'allowed' if plan.thousands else 'no'}",
        f"ANCHOR_FIELDS: {json.dumps(list(block.anchors), ensure_ascii=False)}",
        f"ATTRIBUTE_CLUSTER: {block.cluster_name}: "
        f"{json.dumps(list(block.columns), ensure_ascii=False)}",
        f"ROWS: {json.dumps(rows, ensure_ascii=False, default=str)}",
        f"REQUIRED_CELL_IDS: {json.dumps(list(block.required))}",
        f"NULL_POLICY: {policy}; NULL cells: {json.dumps(list(block.nulls))}",
    ]
    return "\n".join(parts)


def parse_reply(text: str) -> tuple[str, tuple[Alignment, ...]]:
    r"""The section and alignments of a JSON reply (code fences allowed).

    >>> parse_reply('```json\n{"section": "x 1", "alignments": [{"cell_id": "r0.a", '
    ...             '"surface": "1"}]}\n```')
    ('x 1', (Alignment(cell_id='r0.a', surface='1'),))
    """
    obj = extract_json(text)
    if not isinstance(obj.get("section"), str):
        raise ReplyError('the reply must be an object with a string "section"')
    raw = obj.get("alignments")
    if not isinstance(raw, list):
        raise ReplyError('the reply must have an "alignments" list')
    out = []
    for item in raw:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("cell_id"), str)
            and isinstance(item.get("surface"), str | int | float)
        ):
            raise ReplyError('each alignment needs a string "cell_id" and "surface"')
        out.append(Alignment(cell_id=item["cell_id"], surface=str(item["surface"])))
    return obj["section"], tuple(out)


class LlmWriter:
    """Sections from an OpenAI-compatible chat model.

    Args:
        client: anything with ``complete(messages) -> reply`` whose reply has ``content``
            (a ``dataspace.llm.client.MeteredClient``); built from ``model`` when omitted.
        model: a ``ModelSpec`` (id, base_url, key_env, prices) to build the client from.
        api_key: the key, when not read from ``model.key_env``.
    """

    name = "llm"

    def __init__(
        self,
        client: Any | None = None,
        *,
        model: Any | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
    ) -> None:
        if client is None:
            if model is None:
                raise ConfigError(
                    "the llm document writer needs a client or a model (id, base_url, key_env)"
                )
            from dataspace.llm.client import MeteredClient

            client = MeteredClient(
                model, api_key=api_key, temperature=temperature, max_output_tokens=8192
            )
        self.client = client

    def messages(self, request: SectionRequest) -> list[dict[str, Any]]:
        """The conversation for a request (rejected attempts and their feedback included)."""
        language = "Chinese" if request.plan.language == "zh" else "English"
        genre = GENRES.get(request.plan.genre, {}).get("en", request.plan.genre)
        msgs = [
            {"role": "system", "content": SYSTEM_PROMPT.format(genre=genre, language=language)},
            {"role": "user", "content": block_prompt(request)},
        ]
        return retry_messages(msgs, request.history, _feedback)

    def write(self, request: SectionRequest) -> SectionReply:
        """Ask the model for one section and parse its JSON."""
        reply = self.client.complete(self.messages(request))
        raw = str(getattr(reply, "content", "") or "")
        try:
            section, alignments = parse_reply(raw)
        except ReplyError as exc:
            raise ReplyError(str(exc), raw=raw) from None
        return SectionReply(section=section, alignments=alignments, raw=raw)


def _feedback(errors: Sequence[str]) -> str:
    return "The section was rejected:\n" + format_feedback(errors) + "\nReturn the corrected JSON."


def format_feedback(errors: Sequence[str], limit: int = 30) -> str:
    r"""Validator errors as one feedback message (the first ``limit`` of them).

    >>> format_feedback(["a", "b"])
    '- a\n- b'
    """
    lines = [f"- {e}" for e in errors[:limit]]
    if len(errors) > limit:
        lines.append(f"- ... and {len(errors) - limit} more")
    return "\n".join(lines)


__all__ = [
    "SYSTEM_PROMPT",
    "DocumentWriter",
    "LlmWriter",
    "SectionReply",
    "SectionRequest",
    "block_prompt",
    "format_feedback",
    "get_writer",
    "parse_reply",
    "register_writer",
    "writer_names",
]
