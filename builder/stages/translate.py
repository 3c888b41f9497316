"""Stage 1, cross-language transformation: the item in its task's languages.

The database is translated (cached under the build cache and shared by every item on it),
the SQL rewritten against it and the question rendered from its translated template, taken
from the source's own question in that language, or translated; the fluency gate rejects a
question that does not read as its language.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from builder.stages.state import StageContext, TaskState

logger = logging.getLogger(__name__)


def translate(state: TaskState, ctx: StageContext) -> TaskState:
    """Transform the item into ``state.languages`` (database, question).

    Raises:
        BuildError: stage ``transform`` or ``fluency``.
    """
    from builder.transform import TransformOptions, transform

    item = state.item
    db_lang, q_lang = state.languages
    cache = Path(ctx.cache_root) / "transform" if ctx.cache_root is not None else None
    tr = transform(
        item.db_path,
        item.question,
        item.sql,
        question_language=q_lang,
        db_language=db_lang,
        translator=ctx.translator,
        source_question_language=item.question_language,
        source_db_language=item.db_language,
        options=TransformOptions(units=ctx.spec.units, cache_dir=cache),
        item_id=item.id,
        domain=str(item.extra.get("domain", "")),
        questions=item.extra.get("questions"),
        template=(
            {"q_tag": item.extra["q_tag"], "value": item.extra.get("value") or {}}
            if item.extra.get("q_tag")
            else None
        ),
    )
    transformed = dataclasses.replace(
        item,
        question=tr.question,
        sql=tr.sql,
        db_path=tr.db_path,
        question_language=q_lang,
        db_language=db_lang,
        extra={**item.extra, "source_question": item.question, "source_sql": item.sql},
    )
    return dataclasses.replace(state, item=transformed, transform=tr.ledger)


__all__ = ["translate"]
