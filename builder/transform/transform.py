"""Stage 1 entry point: cross-language transformation of one (database, question, SQL).

``transform`` chooses nothing: the caller gives the target languages of the database and of
the question, independently. It then

1. refuses SQL that is not reproducible (unpinned current date, randomness), does not
   parse, or names a missing table or column;
2. translates the database once per (database, language, translator) — units, map, map
   gate, migration (``builder.transform.database``);
3. rewrites the SQL with protect–replace–restore (ambiguous columns are flagged and stop
   the item for repair); the result must resolve against the translated database;
4. checks execution equivalence: Exec(Dc, σc) equals τ_M(Exec(D0, σ0)), multiplicity kept,
   row order kept when the query orders;
5. translates the question with a focused glossary (validated, bounded retries);
6. asks the question–SQL judge when the translator has a model behind it (pass, repair
   then re-check, or reject), and otherwise records why the judge was skipped.

Every rejection is a ``BuildError`` with stage ``transform`` and a one-line reason.
"""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import BuildError, SourceError
from builder.transform.database import (
    DatabaseTranslationError,
    UnitOptions,
    translate_database,
)
from builder.transform.gates import (
    JudgeOutcome,
    execute,
    execution_equivalent,
    nondeterminism,
)
from builder.transform.mapping import ReplacementMap, identity_map
from builder.transform.question import (
    GlossaryEntry,
    fluency_problems,
    protected_terms,
    question_problems,
    untranslated_share,
)
from builder.transform.resolve import Resolution, comparison_column, parse, resolve
from builder.transform.schema import read_schema
from builder.transform.sqlrewrite import rewrite_sql
from builder.transform.units import has_cjk
from builder.translate.base import (
    TranslationError,
    TranslationRequest,
    Translator,
    ask,
    items_validator,
    targets_by_id,
)

logger = logging.getLogger(__name__)

STAGE = "transform"
LANGUAGES = ("en", "zh")


@dataclass(frozen=True, kw_only=True)
class TransformOptions:
    """Options of stage 1.

    Attributes:
        units: translation-unit and map options.
        cache_dir: where translated databases are cached (shared across items and runs).
        max_attempts: replies per question-translation request.
        judge_rounds: judge → repair → judge rounds before rejecting.
    """

    units: UnitOptions = field(default_factory=UnitOptions)
    cache_dir: Path | None = None
    max_attempts: int = 3
    judge_rounds: int = 2


@dataclass(frozen=True, kw_only=True)
class TransformResult:
    """The transformed tuple (Dc, qc, σc) and its replacement map.

    Attributes:
        db_path: the translated database (shared; never modify it).
        question: the question in the target question language.
        sql: the rewritten SQL.
        mapping: the replacement map of the database translation.
        question_language: target question language.
        db_language: target database language.
        ledger: provenance for ``ledger.json`` under the key ``transform``.
    """

    db_path: Path
    question: str
    sql: str
    mapping: ReplacementMap
    question_language: str
    db_language: str
    ledger: dict[str, Any] = field(default_factory=dict)


def transform(
    db_path: Path | str,
    question: str,
    sql: str,
    *,
    question_language: str,
    db_language: str,
    translator: Translator,
    source_question_language: str,
    source_db_language: str,
    options: TransformOptions | None = None,
    item_id: str = "item",
    domain: str = "",
    questions: Mapping[str, str] | None = None,
    template: Mapping[str, Any] | None = None,
) -> TransformResult:
    """Transform one item into the target languages.

    Args:
        db_path: the source database D0.
        question: the source question q0.
        sql: the source SQL σ0 (dialect fixes already applied).
        question_language: target language of the question (``en`` or ``zh``).
        db_language: target language of the database (``en`` or ``zh``).
        translator: the translation provider.
        source_question_language: language of ``question``.
        source_db_language: language of the database's text values.
        options: stage options.
        item_id: the item id used in errors.
        domain: a domain hint for the translator.
        questions: the source's own questions in other languages (``{"zh": ...}``); one
            in the target language is used as it is.
        template: ``{"q_tag", "value"}`` of a template-generated source question; when a
            translated template exists, the question is rendered from it.

    Raises:
        BuildError: stage ``transform`` with a one-line reason.
    """
    t0 = time.perf_counter()
    options = options or TransformOptions()
    for lang in (question_language, db_language, source_question_language, source_db_language):
        if lang not in LANGUAGES:
            raise BuildError(item_id, STAGE, f"unknown language {lang!r} (use en or zh)")
    src = Path(db_path)

    def reject(reason: str) -> BuildError:
        return BuildError(item_id, STAGE, reason)

    why = nondeterminism(sql)
    if why:
        raise reject(why)
    try:
        schema0 = read_schema(src)
    except SourceError as exc:
        raise reject(str(exc)) from None
    try:
        res0 = resolve(parse(sql), schema0.columns_by_table())
    except ValueError as exc:
        raise reject(str(exc)) from None
    if res0.problems:
        raise reject("sql " + "; ".join(p.describe() for p in res0.problems))
    try:
        exec0 = execute(src, sql)
    except sqlite3.Error as exc:
        raise reject(f"sql fails on the source database: {exc}") from None
    timings: dict[str, float] = {"checks_s": time.perf_counter() - t0}

    # 2. database
    t = time.perf_counter()
    units = (
        options.units
        if not domain or options.units.domain
        else dataclasses.replace(options.units, domain=domain)
    )
    try:
        tdb = translate_database(
            src,
            source_language=source_db_language,
            target_language=db_language,
            translator=translator,
            options=units,
            cache_dir=options.cache_dir,
        )
    except DatabaseTranslationError as exc:
        raise reject(str(exc)) from None
    except TranslationError as exc:
        raise reject(f"translator: {exc}") from None
    mapping = tdb.mapping if not tdb.mapping.is_identity else identity_map(db_language)
    timings["database_s"] = time.perf_counter() - t

    # 3. SQL
    t = time.perf_counter()
    schema_c = read_schema(tdb.path)
    rw = rewrite_sql(
        sql, mapping, schema0.columns_by_table(), target_schema=schema_c.columns_by_table()
    )
    if not rw.ok:
        raise reject("sql rewrite needs repair: " + "; ".join(rw.problems()))
    sql_c = rw.sql

    # 4. execution equivalence
    try:
        exec_c = execute(tdb.path, sql_c)
    except sqlite3.Error as exc:
        raise reject(f"rewritten sql fails on the translated database: {exc}") from None
    provenance, ordered, order_translated = _result_shape(res0, mapping)
    eq = execution_equivalent(
        exec0,
        exec_c,
        mapping,
        provenance=provenance,
        ordered=ordered,
        order_keys_translated=order_translated,
    )
    if not eq.ok:
        raise reject(f"execution-equivalence gate failed: {eq.reason}")
    timings["sql_s"] = time.perf_counter() - t

    # 5. question
    t = time.perf_counter()
    focused = _focused_glossary(
        res0,
        mapping,
        db_language,
        source_question_language,
        question_language,
        translator,
        options,
    )
    q_ledger: dict[str, Any] = {
        "source": question,
        "focused_glossary": [e.to_json() for e in focused],
    }
    rendered, how = _question_from_source(
        questions, template, sql, question_language, source_question_language, focused
    )
    if question_language == source_question_language:
        question_c = question
        q_ledger.update({"translated": False})
    elif rendered is not None:
        question_c = rendered
        q_ledger.update({"translated": True, "method": how})
    else:
        if how:
            q_ledger["template_miss"] = how
        request = TranslationRequest(
            kind="question",
            source_language=source_question_language,
            target_language=question_language,
            payload={
                "source_question": question,
                "focused_glossary": [e.to_json() for e in focused],
                "sql_context": sql_c,
            },
        )

        def validate(reply: dict[str, Any]) -> list[str]:
            return question_problems(
                question,
                reply,
                focused=focused,
                source_language=source_question_language,
                target_language=question_language,
            )

        try:
            ans = ask(translator, request, validate, max_attempts=options.max_attempts)
        except TranslationError as exc:
            raise reject(f"question translation failed: {exc}") from None
        question_c = str(ans.reply["question"]).strip()
        q_ledger.update(
            {
                "translated": True,
                "method": "translator",
                "attempts": ans.attempts,
                "used_mapping_ids": ans.reply.get("used_mapping_ids", []),
                "unknown": ans.unknown,
                "untranslated_share": round(
                    untranslated_share(question_c, question_language, focused), 3
                ),
            }
        )
    fluency = fluency_problems(
        question_c, question_language, protected_terms(focused, f"{sql} {sql_c}")
    )
    if fluency:
        raise BuildError(item_id, "fluency", "; ".join(fluency))
    timings["question_s"] = time.perf_counter() - t

    # 6. judge
    t = time.perf_counter()
    judge = _judge(
        question,
        question_c,
        sql,
        sql_c,
        focused,
        translator,
        options,
        source_question_language,
        question_language,
        changed=(question_c != question or sql_c != sql),
    )
    if judge.status == "reject":
        raise reject(f"question-SQL judge rejected the translation: {judge.reason}")
    if judge.status == "repaired":
        question_c = judge.revised_question
    timings["judge_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t0

    ledger = {
        "languages": {
            "source": {"question": source_question_language, "database": source_db_language},
            "target": {"question": question_language, "database": db_language},
        },
        "translator": translator.describe(),
        "database": {
            k: tdb.ledger.get(k)
            for k in (
                "cache_key",
                "source_db_sha256",
                "db_sha256",
                "units",
                "requests",
                "map",
                "migration",
            )
            if k in tdb.ledger
        }
        | {"unknown_terms": tdb.ledger.get("unknown", {}).get("count", 0)},
        "map_focused": _focused_map(res0, mapping, rw),
        "sql": {"source": sql, "rewritten": sql_c, "rewrite": rw.to_json()},
        "question": q_ledger,
        "gates": {
            "map": "passed",
            "database": tdb.ledger.get("migration", {}).get("checks", "no migration"),
            "execution": eq.to_json(),
            "judge": judge.to_json(),
        },
        "timings": {k: round(v, 4) for k, v in timings.items()},
    }
    return TransformResult(
        db_path=tdb.path,
        question=question_c,
        sql=sql_c,
        mapping=mapping,
        question_language=question_language,
        db_language=db_language,
        ledger=ledger,
    )


def _question_from_source(
    questions: Mapping[str, str] | None,
    template: Mapping[str, Any] | None,
    sql: str,
    target: str,
    source: str,
    focused: list[GlossaryEntry],
) -> tuple[str | None, str]:
    """A target-language question the source itself provides, and how it was obtained.

    Returns ``(question, "aligned" | "template")``, or ``(None, reason)`` when the source
    has none (the reason is empty when there is nothing to try).
    """
    if target == source:
        return None, ""
    own = (questions or {}).get(target)
    if own:
        return own.strip(), "aligned"
    if not template or not template.get("q_tag"):
        return None, ""
    from builder.translate.glossary import norm
    from builder.translate.templates import TemplateMiss, render_question

    targets = {norm(e.source, source): e.target for e in focused if e.kind == "value"}
    try:
        text = render_question(
            str(template["q_tag"]),
            dict(template.get("value") or {}),
            sql,
            target_of=lambda v: targets.get(norm(v, source), v),
            language=target,
        )
    except TemplateMiss as exc:
        return None, str(exc)
    return text, "template"


def _result_shape(
    res: Resolution, mapping: ReplacementMap
) -> tuple[list[tuple[str, str] | None], bool, bool]:
    from sqlglot import exp

    root = res.scopes[-1] if res.scopes else None
    outs = res.outputs.get(id(root), []) if root is not None else []
    provenance = [(o.base.table, o.base.column) if o.base else None for o in outs]
    tree = res.tree
    order = tree.args.get("order")
    ordered = order is not None
    translated = False
    if order is not None:
        for col in order.find_all(exp.Column):
            base = res.base_of(col)
            if base is None:
                ref = next((o for o in outs if o.name.lower() == col.name.lower()), None)
                base = ref.base if ref else None
            if base is not None and mapping.changed_values(base.table, base.column):
                translated = True
    return provenance, ordered, translated


def _literals(res: Resolution) -> list[tuple[str, str, str]]:
    from sqlglot import exp

    out: list[tuple[str, str, str]] = []
    for lit in res.tree.find_all(exp.Literal):
        if not lit.is_string:
            continue
        ctx = comparison_column(lit, res)
        if ctx is None or ctx[1] is None:
            continue
        item = (lit.this, ctx[1].table, ctx[1].column)
        if item not in out:
            out.append(item)
    return out


def _focused_glossary(
    res: Resolution,
    mapping: ReplacementMap,
    tgt_db: str,
    src_q: str,
    tgt_q: str,
    translator: Translator,
    options: TransformOptions,
) -> list[GlossaryEntry]:
    lits = _literals(res)
    forms: dict[tuple[str, str], dict[str, str]] = {}
    need: dict[tuple[str, str], list[str]] = {}
    for v, t, c in lits:
        lang = "zh" if has_cjk(v) else "en"
        f = {lang: v}
        mapped = mapping.value_target(t, c, v)
        if mapped is not None:
            f["zh" if has_cjk(mapped) else "en"] = mapped
        f["database"] = mapped if mapped is not None else v
        forms[(v, f"{t}.{c}")] = f
        for want in (src_q, tgt_q):
            if want not in f:
                need.setdefault((lang, want), []).append(v)
    for (lang, want), values in need.items():
        values = list(dict.fromkeys(values))
        ids = [f"q{i}" for i in range(len(values))]
        req = TranslationRequest(
            kind="values",
            source_language=lang,
            target_language=want,
            payload={
                "cluster_id": "question-terms",
                "columns": [],
                "values": [{"id": i, "value": v} for i, v in zip(ids, values, strict=True)],
            },
        )
        try:
            ans = ask(translator, req, items_validator(ids), max_attempts=options.max_attempts)
            got = targets_by_id(ans.reply)
        except TranslationError:
            got = {i: v for i, v in zip(ids, values, strict=True)}
        by_value = {v: got[i] for i, v in zip(ids, values, strict=True)}
        for (v, _where), f in forms.items():
            if v in by_value:
                f.setdefault(want, by_value[v])
    out: list[GlossaryEntry] = []
    for n, ((v, _where), f) in enumerate(forms.items()):
        # The question names the entity exactly as the database stores it when both share a
        # language, so that the two can be matched literally.
        target = f["database"] if tgt_q == tgt_db else f.get(tgt_q, v)
        out.append(GlossaryEntry(id=f"v{n}", kind="value", source=f.get(src_q, v), target=target))
    for n, (t, c) in enumerate(res.base_columns()):
        tt, ct = mapping.table_target(t), mapping.column_target(t, c)
        if ct != c or tt != t:
            out.append(
                GlossaryEntry(id=f"s{n}", kind="column", source=f"{t}.{c}", target=f"{tt}.{ct}")
            )
    return out


def _focused_map(res: Resolution, mapping: ReplacementMap, rw: Any) -> dict[str, Any]:
    tables = sorted({t for t, _c in res.base_columns()} | set(res.tables.values()))
    return {
        "tables": {t: mapping.table_target(t) for t in tables},
        "columns": {f"{t}.{c}": mapping.column_target(t, c) for t, c in res.base_columns()},
        "values": [list(x) for x in rw.literals],
    }


def _judge(
    q0: str,
    qc: str,
    sql0: str,
    sqlc: str,
    focused: list[GlossaryEntry],
    translator: Translator,
    options: TransformOptions,
    src_q: str,
    tgt_q: str,
    *,
    changed: bool,
) -> JudgeOutcome:
    if not changed:
        return JudgeOutcome(status="skipped", reason="nothing was translated")
    if not getattr(translator, "supports_judge", False):
        return JudgeOutcome(
            status="skipped",
            reason=(f"no model configured: the {translator.name!r} translator has no judge"),
        )

    def validate(reply: dict[str, Any]) -> list[str]:
        errors = []
        if reply.get("status") not in ("pass", "repair", "reject"):
            errors.append("status must be one of pass, repair, reject")
        if not isinstance(reply.get("issues", []), list):
            errors.append("issues must be a list")
        if reply.get("status") == "repair" and not str(reply.get("revised_question", "")).strip():
            errors.append("a repair needs a non-empty revised_question")
        if reply.get("status") == "repair":
            errors += question_problems(
                q0,
                {"question": reply.get("revised_question")},
                focused=focused,
                source_language=src_q,
                target_language=tgt_q,
            )
        return errors

    question = qc
    issues: list[dict[str, str]] = []
    for _round in range(options.judge_rounds):
        req = TranslationRequest(
            kind="judge",
            source_language=src_q,
            target_language=tgt_q,
            payload={
                "source_question": q0,
                "translated_question": question,
                "source_sql": sql0,
                "translated_sql": sqlc,
                "focused_glossary": [e.to_json() for e in focused],
            },
        )
        try:
            ans = ask(translator, req, validate, max_attempts=options.max_attempts)
        except TranslationError as exc:
            return JudgeOutcome(status="reject", reason=f"no valid verdict ({exc})")
        status = ans.reply["status"]
        issues = [dict(i) for i in ans.reply.get("issues", []) if isinstance(i, dict)]
        if status == "pass":
            return JudgeOutcome(
                status="pass" if question == qc else "repaired",
                issues=tuple(issues),
                revised_question=question,
            )
        if status == "reject":
            reason = "; ".join(str(i.get("description", "")) for i in issues) or "rejected"
            return JudgeOutcome(status="reject", issues=tuple(issues), reason=reason)
        question = str(ans.reply["revised_question"]).strip()
    return JudgeOutcome(
        status="reject",
        issues=tuple(issues),
        reason=f"still needs repair after {options.judge_rounds} rounds",
    )


__all__ = ["LANGUAGES", "STAGE", "TransformOptions", "TransformResult", "transform"]
