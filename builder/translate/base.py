"""The ``Translator`` interface, its request records, the registry and the retry loop.

Every generative step of stage 1 is one ``TranslationRequest`` answered by a JSON object:

=========  ==========================================================  =====================
kind       payload                                                     reply
=========  ==========================================================  =====================
schema     domain, protected_glossary, schema_items [{id, kind, name,  {items: [{id,
           table?, description?}]                                      target}]}
values     domain, cluster_id, columns, schema_glossary,              {cluster_id, items:
           values [{id, value}]                                        [{id, target}]}
question   source_question, focused_glossary [{id, source, target}],  {question,
           sql_context                                                 used_mapping_ids}
judge      source_question, translated_question, source_sql,          {status, issues,
           translated_sql, focused_glossary                            revised_question}
=========  ==========================================================  =====================

A provider may add ``unknown`` (terms it could not translate and left unchanged) to a reply.
``ask`` validates each reply with the caller's deterministic validator and, on errors, asks
again with the errors as feedback, a bounded number of times (the loop of ``dataspace.ask``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from builder.errors import Rejected
from dataspace import ask as asking
from dataspace.errors import ConfigError, ReplyError
from dataspace.registry import Registry

logger = logging.getLogger(__name__)

KINDS = ("schema", "values", "question", "judge")


@dataclass(frozen=True, kw_only=True)
class TranslationRequest:
    """One request to a translator.

    Attributes:
        kind: ``schema``, ``values``, ``question`` or ``judge``.
        source_language: ``en`` or ``zh``.
        target_language: ``en`` or ``zh``.
        payload: the kind's input (see the module table).
        feedback: validator errors of the previous reply, for a retry.
    """

    kind: str
    source_language: str
    target_language: str
    payload: Mapping[str, Any]
    feedback: tuple[str, ...] = ()


class TranslationError(Rejected):
    """No valid reply within the attempt budget; ``errors`` are the last validator errors."""

    stage_name = "transform"

    def __init__(self, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.errors = errors


@runtime_checkable
class Translator(Protocol):
    """Answers translation requests with JSON objects.

    Attributes:
        name: the provider name recorded in ledgers.
        supports_judge: whether ``judge`` requests get a real verdict.
    """

    name: str
    supports_judge: bool

    def complete(self, request: TranslationRequest) -> dict[str, Any]:
        """Answer ``request`` with a JSON object (raise ``ReplyError`` for a bad reply)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provider settings for the ledger and cache keys (never secrets)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Answer:
    """A validated reply and how it was obtained."""

    reply: dict[str, Any]
    attempts: int
    history: tuple[tuple[str, ...], ...] = field(default_factory=tuple)

    @property
    def unknown(self) -> list[str]:
        """Terms the provider left unchanged because it did not know them."""
        return [str(u) for u in self.reply.get("unknown", [])]


Validator = Callable[[dict[str, Any]], list[str]]


def ask(
    translator: Translator,
    request: TranslationRequest,
    validate: Validator,
    *,
    max_attempts: int = 3,
) -> Answer:
    """Ask until a reply passes ``validate``, feeding back its errors (bounded).

    Raises:
        TranslationError: the last reply still had errors after ``max_attempts``.
    """

    def attempt(rejections: tuple[asking.Rejection, ...]) -> tuple[dict[str, Any], str]:
        req = replace(request, feedback=rejections[-1].errors[:20]) if rejections else request
        return translator.complete(req), ""

    def check(reply: dict[str, Any]) -> list[str]:
        return validate(reply) if isinstance(reply, dict) else ["reply is not an object"]

    asked = asking.ask(
        attempt, check, max_attempts=max_attempts, what=f"{translator.name} {request.kind}"
    )
    if asked.value is None:
        errors = asked.errors
        raise TranslationError(
            f"{translator.name}: no valid {request.kind} reply after {max_attempts} attempts "
            f"({errors[0] if errors else 'unknown error'})",
            errors,
        )
    return Answer(
        reply=asked.value,
        attempts=asked.attempts,
        history=tuple(r.errors for r in asked.rejections),
    )


def items_validator(
    expected_ids: list[str],
    *,
    protected: Mapping[str, str] | None = None,
    extra: Validator | None = None,
) -> Validator:
    """A validator of ``{items: [{id, target}]}`` replies.

    Every id answered exactly once, non-empty targets, protected ids unchanged.

    >>> v = items_validator(["a", "b"])
    >>> v({"items": [{"id": "a", "target": "x"}]})
    ['id b is missing']
    """

    def check(reply: dict[str, Any]) -> list[str]:
        items = reply.get("items")
        if not isinstance(items, list):
            return ["reply must have an 'items' list"]
        seen: dict[str, int] = {}
        errors: list[str] = []
        for it in items:
            if (
                not isinstance(it, dict)
                or not isinstance(it.get("id"), str)
                or not isinstance(it.get("target"), str)
            ):
                errors.append(f"item {it!r} must be {{id, target}} strings")
                continue
            seen[it["id"]] = seen.get(it["id"], 0) + 1
            if not it["target"].strip():
                errors.append(f"id {it['id']} has an empty target")
            if protected and it["id"] in protected and it["target"] != protected[it["id"]]:
                errors.append(f"id {it['id']} is protected and must stay {protected[it['id']]!r}")
        want = set(expected_ids)
        errors += [f"id {i} is missing" for i in expected_ids if i not in seen]
        errors += [f"id {i} is not an input id" for i in seen if i not in want]
        errors += [f"id {i} answered {n} times" for i, n in seen.items() if n > 1]
        if not errors and extra is not None:
            errors = extra(reply)
        return errors

    return check


def targets_by_id(reply: Mapping[str, Any]) -> dict[str, str]:
    """``{id: target}`` of a validated items reply."""
    return {it["id"]: it["target"] for it in reply.get("items", [])}


# ---- registry --------------------------------------------------------------------------

TRANSLATORS: Registry[Callable[..., Translator]] = Registry(
    "translator",
    {
        "glossary": "builder.translate.glossary:GlossaryTranslator",
        "llm": "builder.translate.llm:LLMTranslator",
    },
    hints={"llm": "needs the openai package (pip install openai)"},
)


def register_translator(
    name: str,
) -> Callable[[Callable[..., Translator]], Callable[..., Translator]]:
    """Register a translator factory under ``name``."""
    return TRANSLATORS.register(name)


def translator_names() -> list[str]:
    """The known provider names."""
    return TRANSLATORS.names()


def get_translator(name: str, **options: Any) -> Translator:
    """Create the translator registered as ``name``.

    Raises:
        ConfigError: unknown name (listing the known ones) or bad options.
    """
    factory = TRANSLATORS.get(name)
    try:
        return factory(**options)
    except TypeError as exc:
        raise ConfigError(f"translator {name!r}: bad options ({exc})") from None


__all__ = [
    "KINDS",
    "TRANSLATORS",
    "Answer",
    "ReplyError",
    "TranslationError",
    "TranslationRequest",
    "Translator",
    "ask",
    "get_translator",
    "items_validator",
    "register_translator",
    "targets_by_id",
    "translator_names",
]
