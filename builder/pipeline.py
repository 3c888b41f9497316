"""The builder path from a source item to a written release task.

For each item: the task database step (a copy for now) -> gold (execute the SQL on exactly
the ledger's ``task_db.sqlite`` bytes) -> workspace (route, render, round-trip check) ->
evaluation config -> metadata and ledger. ``build_release`` runs that over a batch, writes
accepted tasks with ``ReleaseWriter`` (``task_1..task_N`` in item order), records every
rejected item with its stage and reason, and never stops on a bad item.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.evalconfig import derive_config
from builder.gold import GoldAnswer, GoldRejected, execute_gold
from builder.metadata import task_metadata
from builder.render.base import get_renderer
from builder.render.routing import RenderFailure, Workspace, render_workspace
from builder.render.sqlite_renderer import deserialize
from builder.report import (
    REPORT_NAME,
    AcceptedItem,
    BuildReport,
    StageTimer,
    nothing_built,
    pop_timings,
)
from builder.semantics import SemanticsOptions
from builder.sources.base import LoadedSource, Rejection, SourceItem, one_line
from builder.sqlinfo import order_sensitive
from builder.tables import TableData, read_tables
from builder.taskdb import TaskDatabase, get_task_db_step
from dataspace.errors import BuildError, SourceError
from dataspace.release import ReleaseWriter, TaskArtifacts

logger = logging.getLogger(__name__)

LEDGER_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """How tasks are built.

    Attributes:
        renderers: renderer names to route tables over, in fallback order.
        task_db: the task database step (``copy``; sampling registers its own).
        workspace_language: the workspace language recorded for every task (default: the
            item's database language).
        query_timeout: seconds one gold query may run.
        max_answer_rows: answers with more rows are rejected.
        max_answer_columns: answers with more columns are rejected.
        stage3: modality routing with documents and videos (``builder.routing``); None
            keeps the structured renderers only.
    """

    renderers: tuple[str, ...] = ("csv", "json", "sqlite")
    task_db: str = "copy"
    workspace_language: str | None = None
    query_timeout: float = 60.0
    max_answer_rows: int = 100_000
    max_answer_columns: int = 64
    stage3: Any = None
    semantics: SemanticsOptions = field(default_factory=SemanticsOptions)

    def check(self) -> None:
        """Resolve every name now, so a typo fails before any work.

        Raises:
            ConfigError: unknown renderer or task database step.
        """
        if not self.renderers:
            from dataspace.errors import ConfigError

            raise ConfigError("at least one renderer is needed")
        for name in self.renderers:
            get_renderer(name)
        get_task_db_step(self.task_db)


def task_seed(seed: int, item: SourceItem) -> int:
    """A per-task seed from the build seed and the item's identity (order-independent).

    >>> task_seed(0, SourceItem(corpus="c", id="1", question="q", sql="select 1",
    ...     db_path=Path("x"), db_id="x", question_language="en", db_language="en"))
    3572910493
    """
    digest = hashlib.sha256(f"{seed}\0{item.corpus}\0{item.id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def build_task(
    item: SourceItem, *, task_id: str, seed: int, options: BuildOptions | None = None
) -> TaskArtifacts:
    """Build one task from one source item.

    Args:
        item: the source item.
        task_id: ``task_N``.
        seed: the build seed (the task's own seed is derived from it and the item id).
        options: build options.

    Raises:
        BuildError: the item was rejected (stage and one-line reason attached).
        ConfigError: the options name an unknown renderer or step.
    """
    return _build(
        item, task_id=task_id, seed=seed, options=options or BuildOptions(), timer=StageTimer()
    )


def _build(
    item: SourceItem,
    *,
    task_id: str,
    seed: int,
    options: BuildOptions,
    timer: StageTimer,
    counters: dict[str, int] | None = None,
) -> TaskArtifacts:
    tseed = task_seed(seed, item)
    with timer("task_db"):
        try:
            tdb = get_task_db_step(options.task_db)(item, seed=tseed)
        except SourceError as exc:
            raise BuildError(item.id, "task_db", one_line(str(exc))) from exc
        conn = deserialize(tdb.data, readonly=True)
    try:
        with timer("gold"):
            try:
                answer = execute_gold(
                    conn,
                    item.sql,
                    timeout=options.query_timeout,
                    max_rows=options.max_answer_rows,
                    max_columns=options.max_answer_columns,
                )
            except GoldRejected as exc:
                raise BuildError(item.id, "gold", one_line(str(exc))) from None
        with timer("semantics"):
            question, sql, answer, stated = _state_semantics(
                item, answer, conn, seed=tseed, options=options
            )
            item = dataclasses.replace(item, question=question, sql=sql)
        with timer("render"):
            tables = read_tables(conn)
            try:
                workspace = render_workspace(
                    tables, renderers=options.renderers, seed=tseed, database_name=item.db_id
                )
            except RenderFailure as exc:
                raise BuildError(item.id, "render", one_line(str(exc))) from None
    finally:
        conn.close()
    with timer("config"):
        config = _config(item, task_id, answer)
    with timer("metadata"):
        workspace_language = options.workspace_language or item.db_language
        metadata = task_metadata(
            item,
            task_id=task_id,
            sql=item.sql,
            workspace=workspace,
            answer=answer,
            workspace_language=workspace_language,
        )
        ledger = _ledger(
            item,
            seed=seed,
            tseed=tseed,
            tdb=tdb,
            workspace_language=workspace_language,
            tables=tables,
            workspace=workspace,
            answer=answer,
            renderers=options.renderers,
        )
    artifacts = TaskArtifacts(
        task_id=task_id,
        question=item.question,
        context=workspace.files,
        gold_csv=answer.csv,
        config=config,
        metadata=metadata,
        ledger=ledger,
        ledger_files={"task_db.sqlite": tdb.data},
    )
    artifacts = dataclasses.replace(artifacts, ledger={**artifacts.ledger, "semantics": stated})
    if options.stage3 is not None:
        from builder.routing import apply_stage3

        with timer("stage3"):
            result = apply_stage3(artifacts, options=options.stage3, counters=counters)
        if counters is not None:
            counters.clear()
            counters.update(result.counters)
        artifacts = result.task
    for name, secs in pop_timings(artifacts.ledger).items():
        timer.add(name, secs)
    return artifacts


def _state_semantics(
    item: SourceItem,
    answer: GoldAnswer,
    conn: Any,
    *,
    seed: int,
    options: BuildOptions,
) -> tuple[str, str, GoldAnswer, dict[str, Any]]:
    """State the fixed "now", the tie rule and a requested order in the question.

    Returns the question, the SQL (ordered when an order is requested), the gold of that
    SQL and what was stated (for the ledger).

    Raises:
        BuildError: stage ``semantics`` (ties far past N).
    """
    from builder import semantics as sem

    opts = options.semantics
    lang = item.question_language
    sentences: list[str] = []
    stated: dict[str, Any] = {}
    sql = item.sql
    stamp = sem.pinned_now(sql)
    if stamp and opts.state_now:
        sentences.append(sem.now_sentence(stamp, lang))
        stated["now"] = stamp
    n = sem.rank_limit(sql)
    if n is not None:
        stated["rank_limit"] = n
        if len(answer.rows) > n * opts.max_tie_factor:
            raise BuildError(
                item.id,
                "semantics",
                f"a top-{n} question whose gold has {len(answer.rows)} rows (ties past "
                f"{opts.max_tie_factor:g} x N)",
            )
        if len(answer.rows) > n:
            if not opts.tie_rule:
                raise BuildError(
                    item.id,
                    "semantics",
                    f"a top-{n} question whose gold has {len(answer.rows)} rows",
                )
            sentences.append(sem.tie_sentence(n, lang))
            stated["tie_rule"] = True
    if (
        opts.order_share > 0
        and len(answer.rows) > 1
        and not order_sensitive(sql)
        and sem.draw(seed, "order") < opts.order_share
    ):
        kind = sem.value_kind([row[0] for row in answer.rows])
        ordered = sem.ordered_sql(sql, len(answer.header))
        try:
            answer = execute_gold(
                conn,
                ordered,
                timeout=options.query_timeout,
                max_rows=options.max_answer_rows,
                max_columns=options.max_answer_columns,
            )
        except GoldRejected as exc:
            raise BuildError(item.id, "semantics", one_line(str(exc))) from None
        sql = ordered
        sentences.append(sem.order_sentence(kind, lang))
        stated["order"] = kind
    return sem.with_sentences(item.question, sentences, lang), sql, answer, stated


def _config(item: SourceItem, task_id: str, answer: GoldAnswer) -> dict[str, Any]:
    """Derive the config and check it and the gold with the evaluator itself.

    The evaluator must accept both, and every gold cell must fit its column's rule (a gold
    cell that does not is fatal at evaluation time).
    """
    import evaluator

    try:
        config = derive_config(task_id, answer.header, answer.rows, item.sql)
        parsed = evaluator.parse_config(dict(config), source=f"{task_id}.json")
        table = evaluator.read_csv(answer.csv, role="gold", name="gold.csv")
        for spec in parsed.columns:
            for row in table.rows:
                evaluator.canonicalize(row[spec.gold_index], spec)
    except (ValueError, evaluator.FatalError, evaluator.CsvError) as exc:
        raise BuildError(item.id, "config", one_line(str(exc))) from None
    return config


def _ledger(
    item: SourceItem,
    *,
    seed: int,
    tseed: int,
    tdb: TaskDatabase,
    workspace_language: str,
    tables: list[TableData],
    workspace: Workspace,
    answer: GoldAnswer,
    renderers: tuple[str, ...],
) -> dict[str, Any]:
    return {
        "schema_version": LEDGER_SCHEMA_VERSION,
        "source": {
            "corpus": item.corpus,
            "id": item.id,
            "db_id": item.db_id,
            "question": item.question,
            "sql": item.extra.get("sql_original", item.sql),
        },
        "sql": item.sql,
        "dialect_fixes": list(item.extra.get("dialect_fixes", [])),
        "languages": {
            "question": item.question_language,
            "workspace": workspace_language,
            "database": item.db_language,
        },
        "seed": tseed,
        "build_seed": seed,
        "task_db": {
            "file": "task_db.sqlite",
            "step": tdb.step,
            "sha256": tdb.sha256,
            "bytes": len(tdb.data),
            **tdb.info,
        },
        "task_db_sha256": tdb.sha256,
        "row_counts": {t.name: t.row_count for t in tables},
        "renderers": list(renderers),
        "routing": {
            name: {"renderer": r.renderer, "path": r.path, "fallbacks": list(r.fallbacks)}
            for name, r in sorted(workspace.routes.items())
        },
        "gold_sha256": answer.sha256,
        "answer": {
            "rows": len(answer.rows),
            "columns": len(answer.header),
            "header": list(answer.header),
        },
    }


def build_release(
    items: Iterable[SourceItem],
    dest: Path | str,
    *,
    seed: int = 0,
    options: BuildOptions | None = None,
    replace: bool = False,
) -> BuildReport:
    """Build a release from source items, going on past bad items.

    Args:
        items: source items (a ``LoadedSource`` also contributes its load rejections).
        dest: the release folder to create.
        seed: the build seed.
        options: build options.
        replace: replace an existing release at ``dest``.

    Returns:
        The report, also written as ``build_report.json`` next to ``dest``.

    Raises:
        ConfigError: bad options.
        BuildError: every item was rejected (the report is written first).
        ReleaseError: ``dest`` exists (without ``replace``) or a task could not be written;
            a failed write leaves no release folder behind.
    """
    opts = options or BuildOptions()
    opts.check()
    started = time.perf_counter()
    dest = Path(dest).resolve()
    items = list(items) if not isinstance(items, list) else items
    timer = StageTimer()
    timer.add("load", getattr(items, "load_seconds", 0.0))
    rejected = list(getattr(items, "rejections", ()))
    skipped = tuple(getattr(items, "skipped", ()))
    accepted: list[AcceptedItem] = []
    corpora = sorted({item.corpus for item in items})
    manifest = {
        "builder": {
            "seed": seed,
            "renderers": list(opts.renderers),
            "task_db": opts.task_db,
            "stage3": opts.stage3 is not None,
        },
        "corpora": corpora,
    }

    def finish() -> BuildReport:
        return BuildReport(
            release=str(dest),
            seed=seed,
            accepted=tuple(accepted),
            rejected=tuple(rejected),
            skipped=skipped,
            timings=dict(timer.totals),
            wall_seconds=time.perf_counter() - started,
        )

    counters: dict[str, int] = {}
    with ReleaseWriter(dest, replace=replace, manifest=manifest) as writer:
        for item in items:
            task_id = f"task_{len(accepted) + 1}"
            try:
                artifacts = _build(
                    item, task_id=task_id, seed=seed, options=opts, timer=timer, counters=counters
                )
            except BuildError as exc:
                logger.info("rejected %s/%s at %s: %s", item.corpus, item.id, exc.stage, exc.reason)
                rejected.append(
                    Rejection(corpus=item.corpus, id=item.id, stage=exc.stage, reason=exc.reason)
                )
                continue
            with timer("write"):
                writer.add_task(artifacts)
            accepted.append(AcceptedItem(corpus=item.corpus, id=item.id, task_id=task_id))
        if not accepted:
            raise nothing_built(finish(), dest, len(rejected))
    report = finish()
    report.write(dest.parent / REPORT_NAME)
    logger.info(
        "built %s: %d tasks, %d rejected in %.2fs",
        dest,
        len(accepted),
        len(rejected),
        report.wall_seconds,
    )
    return report


def load_bundled_items(*, cache_dir: Path | str | None = None) -> LoadedSource:
    """Both bundled corpora: finance (Chinese questions where available) then clinical."""
    from builder.sources.base import load_source

    finance = load_source("bundled", "finance", question_language="mixed", cache_dir=cache_dir)
    clinical = load_source("bundled", "clinical", cache_dir=cache_dir)
    return finance + clinical


def build_bundled_release(
    dest: Path | str,
    *,
    seed: int = 0,
    options: BuildOptions | None = None,
    replace: bool = False,
    cache_dir: Path | str | None = None,
) -> BuildReport:
    """Build both bundled corpora into one release (the embedded demo's release).

    Args:
        dest: the release folder to create.
        seed: the build seed.
        options: build options.
        replace: replace an existing release at ``dest``.
        cache_dir: where the bundled databases are created.
    """
    return build_release(
        load_bundled_items(cache_dir=cache_dir), dest, seed=seed, options=options, replace=replace
    )


__all__ = [
    "BuildOptions",
    "build_bundled_release",
    "build_release",
    "build_task",
    "load_bundled_items",
    "task_seed",
]
