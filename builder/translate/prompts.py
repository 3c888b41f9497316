"""Normalized prompt contracts of the four request kinds (schema, values, question, judge).

The model sees the request payload as JSON and must answer with JSON only; the replies
are validated deterministically by the caller, and validator errors come back in a retry.
"""

from __future__ import annotations

import json
from typing import Any

from builder.translate.base import TranslationRequest

_LANG = {"en": "English", "zh": "Chinese (Simplified)"}

SYSTEM = {
    "schema": (
        "You localize relational schemas from {src} to {tgt}. Produce a faithful terminology "
        "map, not a new schema.\n"
        "RULES\n"
        "1. Translate only human-readable table and column names.\n"
        "2. Preserve IDs, standardized codes, SQL keywords, and protected terms.\n"
        "3. Preserve meaning, domain terminology, granularity, and abbreviations.\n"
        "4. Table targets must be unique in the database. Column targets must be unique "
        "within their table.\n"
        "5. Return JSON only. Do not add, remove, merge, or split input items.\n"
        'OUTPUT SCHEMA {{"items": [{{"id": "", "target": ""}}]}}'
    ),
    "values": (
        "Translate database values from {src} to {tgt} while preserving equality and join "
        "semantics.\n"
        "RULES\n"
        "1. One source value has exactly one target value within this cluster.\n"
        "2. Use the same target for every listed table/column occurrence.\n"
        "3. Do not translate identifiers, codes, URLs, dates, numbers, or entries marked "
        "PROTECTED.\n"
        "4. Preserve units, signs, precision, entity identity, and domain meaning.\n"
        "5. Return JSON only and include every input ID exactly once.\n"
        'OUTPUT SCHEMA {{"cluster_id": "", "items": [{{"id": "", "target": ""}}]}}'
    ),
    "question": (
        "Translate an analytical question from {src} to {tgt}. Preserve the exact answer "
        "semantics.\n"
        "PRESERVE\n"
        "- entities, value literals, units, signs, and numerical thresholds;\n"
        "- filters, negation, conjunction, and comparison direction;\n"
        "- aggregation, grouping, distinctness, ranking, ordering, and limits;\n"
        "- time windows, inclusivity of boundaries, and requested output fields.\n"
        "RULES\n"
        "1. Use the supplied target-language glossary for schema and value terms.\n"
        "2. Write a natural user question; do not mention SQL, schemas, or this task.\n"
        "3. Do not add explanations, assumptions, or answer values.\n"
        "4. Return JSON only.\n"
        'OUTPUT SCHEMA {{"question": "", "used_mapping_ids": [""]}}'
    ),
    "judge": (
        "Audit whether a translated analytical question preserves the source intent and "
        "remains answered by the translated SQL. Do not solve the query.\n"
        "CHECK\n"
        "1. Requested output entities and fields.\n"
        "2. All filters, values, comparison directions, and negations.\n"
        "3. Aggregation, grouping, DISTINCT semantics, ordering, ranking, and limits.\n"
        "4. Time windows, boundary inclusivity, units, and numerical scale.\n"
        "5. Consistency with the supplied schema/value glossary.\n"
        'OUTPUT SCHEMA {{"status": "pass | repair | reject", "issues": [{{"type": "", '
        '"description": ""}}], "revised_question": ""}}'
    ),
}


def messages(request: TranslationRequest) -> list[dict[str, str]]:
    """Chat messages for a request, with validator feedback when it is a retry."""
    system = SYSTEM[request.kind].format(
        src=_LANG.get(request.source_language, request.source_language),
        tgt=_LANG.get(request.target_language, request.target_language),
    )
    user = "INPUT\n" + json.dumps(_payload(request), ensure_ascii=False, indent=1)
    if request.feedback:
        user += (
            "\n\nYour previous reply was rejected by the validator:\n- "
            + "\n- ".join(request.feedback)
            + "\nAnswer again, fixing every error."
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _payload(request: TranslationRequest) -> dict[str, Any]:
    p = dict(request.payload)
    p.pop("existing", None)
    return p


__all__ = ["SYSTEM", "messages"]
