"""Translators for cross-language transformation: the interface and its providers.

``get_translator("glossary")`` is offline and deterministic; ``get_translator("llm",
model=..., base_url=...)`` calls an OpenAI-compatible endpoint.
"""

from builder.translate.base import (
    Answer,
    ReplyError,
    TranslationError,
    TranslationRequest,
    Translator,
    ask,
    get_translator,
    items_validator,
    register_translator,
    targets_by_id,
    translator_names,
)

__all__ = [
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
