"""Trace pages: writing every attempt's page of a report (one page: :mod:`.trace_render`).

Every page goes to ``report/traces/<run>/<agent>/<task>-<n>.html`` under the output folder
(:func:`start_trace_pages`). A page depends only on its own attempt: its files (written
once per try), its results row (:func:`page_row`, typed by the results schema, never by
the dtypes of a whole table) and where the report sits. Those inputs, with the page
format (``TRACE_FORMAT``), make the page's content key (:func:`page_key`), written on the
page's second line. The run controller writes each attempt's page when the attempt
finishes (:func:`write_attempt_page`), into the run's folder; a report then writes only
the pages that are missing or whose key differs (``new`` mode: a page of an older
format, an attempt rescored or run again), ``all`` re-renders every page, ``none``
writes none. A page written when its attempt finished is byte-identical to the one the
report would write.

Pages are written in the background while the report's tables and figures are computed:
by worker processes (``python -m dataspace.report.tracepages``) when every store involved
is a local folder and there are many pages to write or check (the work, content keys
included, is partly CPU bound), by threads otherwise (remote stores are I/O bound, and
in-memory stores live in this process only).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import logging
import os
import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from dataspace.errors import ConfigError, NotFoundError, StoreError
from dataspace.report.load import OutFolder, RunData, RunSource
from dataspace.report.page import is_missing
from dataspace.report.render import AttemptCell
from dataspace.report.trace_render import SUMMARY_KEYS, image_paths, render_trace
from dataspace.runs.results import COLUMNS
from dataspace.store.keys import TEMP_MARK

logger = logging.getLogger(__name__)

TraceMode = Literal["new", "all", "none"]
TRACE_MODES: tuple[str, ...] = ("new", "all", "none")
TRACE_FORMAT = "5"
TRACES_DIR = "report/traces"
THREADS = 8
MAX_PROCESSES = 4
MIN_JOBS_FOR_PROCESSES = 400
WORKER_TIMEOUT = 3600.0
MAX_IMAGE_BYTES = 8 * 1024 * 1024
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
ROW_FIELDS = (*SUMMARY_KEYS, "verdict")
_KINDS = dict(COLUMNS)
PAGE_FIELDS = (*ROW_FIELDS, *(c for c, _ in COLUMNS if c.startswith("phase_")))
"""The results columns a trace page shows (the phase timings last, in the schema's order)."""
_PAGE_KINDS = tuple((name, _KINDS.get(name)) for name in PAGE_FIELDS)
KEY_LINE = b"<!-- dataspace trace page "
"""Starts the page's second line, followed by its content key (see :func:`page_key`)."""
HEAD_BYTES = 200
_SEG = re.compile(r"[^A-Za-z0-9._-]")


def trace_mode(value: str | bool) -> str:
    """Normalize a trace mode (``True`` means ``new``, ``False`` means ``none``).

    >>> trace_mode(True), trace_mode("all")
    ('new', 'all')
    """
    if value is True:
        return "new"
    if value is False:
        return "none"
    if value not in TRACE_MODES:
        raise ConfigError(f"traces={value!r}: expected one of {', '.join(TRACE_MODES)}")
    return str(value)


def safe_segment(name: Any) -> str:
    """A path segment safe for any store key.

    >>> safe_segment("my agent/v2"), safe_segment("..")
    ('my_agent_v2', '_..')
    """
    return _safe(str(name))


@functools.lru_cache(maxsize=65536)
def _safe(name: str) -> str:
    s = _SEG.sub("_", name) or "_"
    return "_" + s if set(s) <= {"."} else s


def trace_key(run_id: str, agent: str, task: str, attempt: int) -> str:
    """Where an attempt's page goes, relative to the output folder.

    >>> trace_key("r1", "gold", "task_3", 2)
    'report/traces/r1/gold/task_3-2.html'
    """
    return (
        f"{TRACES_DIR}/{safe_segment(run_id)}/{safe_segment(agent)}/"
        f"{safe_segment(task)}-{int(attempt)}.html"
    )


def relative_href(from_key: str, to_key: str) -> str:
    """A relative link between two keys of the output folder.

    >>> relative_href("report/traces/r/a/t-1.html", "report.html")
    '../../../../report.html'
    """
    return _relpath(to_key, posixpath.dirname(from_key) or ".")


@functools.lru_cache(maxsize=4096)
def _relpath(to_key: str, folder: str) -> str:
    """``posixpath.relpath`` (pages of one folder share their links: computed once)."""
    return posixpath.relpath(to_key, folder)


def page_title(agent: Any, task: Any, attempt: Any) -> str:
    """A trace page's title: its own attempt's names, whatever else the report shows.

    >>> page_title("gold", "task_3", 2)
    'gold · task_3 · attempt 2'
    """
    return f"{agent} · {task} · attempt {int(attempt)}"


def page_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The values of one results row that its trace page shows, typed by the results schema.

    The same whether the row comes from ``ResultRow.to_dict()`` when the attempt finishes
    or from a results table read back (where a column with a null is all floats).

    >>> page_row({"input_tokens": 1234.0, "passed": None, "status": "submitted"})
    {'status': 'submitted', 'input_tokens': 1234}
    """
    out: dict[str, Any] = {}
    get = row.get
    for name, kind in _PAGE_KINDS:
        v = get(name)
        if v is None or (not isinstance(v, list | dict) and is_missing(v)):
            continue
        if kind == "int64":
            v = int(v)
        elif kind == "float64":
            v = float(v)
        elif kind == "bool":
            v = bool(v)
        elif kind == "json":  # as read back from the table: keys sorted
            text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True)
            v = json.loads(text)
        else:
            v = str(v)
        out[name] = v
    return out


def page_key(
    *, title: str, row: Mapping[str, Any], back_href: str, outputs: frozenset[str], try_id: Any
) -> str:
    """The content key of a page: everything it is made of but the attempt's own files.

    Those files are written once per try: the try's id stands for them (with the names of
    the files the attempt kept, which decide the images shown).
    """
    doc = [
        TRACE_FORMAT,
        title,
        back_href,
        row,
        sorted(outputs),
        None if is_missing(try_id) else str(try_id),
    ]
    text = json.dumps(doc, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class TracePages:
    """What writing the trace pages did.

    Attributes:
        cells: (task id, agent label) -> the attempts, each with its page link if any.
        written: pages rendered now.
        kept: pages that already existed and were kept (``new`` mode).
        notes: problems worth showing in the report.
    """

    cells: Mapping[tuple[str, str], Sequence[AttemptCell]]
    written: int
    kept: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class _Job:
    source: RunSource
    folder: str
    key: str
    title: str
    row: Mapping[str, Any]
    outputs: frozenset[str]
    content: str  # the page's content key
    existing: bool = False  # a page is there: kept if its key is this one


@dataclass(frozen=True, kw_only=True)
class _Planned:
    """A page to write or check, before its content key is computed (where it is written)."""

    source: RunSource
    row: Mapping[str, Any]
    outputs: frozenset[str]
    existing: bool = False

    def job(self, out: OutFolder, report_key: str) -> _Job:
        return _job(
            self.source, out, self.row, self.outputs, report_key=report_key, existing=self.existing
        )


@dataclass(frozen=True, kw_only=True)
class _Batch:
    """What a batch of pages did: problems (one line per page not written) and pages kept."""

    problems: list[str]
    kept: int = 0


@dataclass(frozen=True, kw_only=True)
class PendingTraces:
    """Trace pages being written; ``cells`` is known at once.

    Attributes:
        cells: (task id, agent label) -> the attempts, each with its page link if any.
        jobs: pages being written or checked (an existing page with the same content key
            is kept).
        out: the output folder.
        futures: one per batch.
        executor: what runs the batches (shut down by ``wait``).
    """

    cells: Mapping[tuple[str, str], Sequence[AttemptCell]]
    jobs: int
    out: OutFolder
    futures: tuple[Future[_Batch], ...] = ()
    executor: Executor | None = None

    def wait(self) -> TracePages:
        """Wait for every page; returns the tally and notes on pages that failed."""
        problems: list[str] = []
        kept = 0
        try:
            for fut in self.futures:
                batch = fut.result()
                problems.extend(batch.problems)
                kept += batch.kept
        finally:
            if self.executor is not None:
                self.executor.shutdown(wait=True)
        for p in problems[:20]:
            logger.warning("%s", p)
        notes = (
            (f"{len(problems)} trace page(s) could not be written; first: {problems[0]}",)
            if problems
            else ()
        )
        return TracePages(
            cells=self.cells, written=self.jobs - kept - len(problems), kept=kept, notes=notes
        )


def _index(source: RunSource) -> dict[str, set[str]]:
    """Attempt folders with an event log -> the files kept under their ``output/``."""
    base = source.key("") if source.prefix.strip("/") else ""
    logs: set[str] = set()
    outputs: dict[str, set[str]] = {}
    try:
        for key in source.store.list(source.key("attempts/")):
            rel = key[len(base) :]
            if rel.endswith("/events.jsonl"):
                logs.add(rel[: -len("/events.jsonl")])
            elif "/output/" in rel:
                folder, _, name = rel.partition("/output/")
                outputs.setdefault(folder, set()).add(name)
    except NotFoundError:
        return {}
    return {f: outputs.get(f, set()) for f in logs}


def attempts_source(source: RunSource) -> RunSource:
    """Where a run's attempts live: its folder, or the run's folder for a rescored version.

    A rescored version (``runs/<id>/rescore-<N>``) is marked by its ``rescore.json``.
    """
    from dataspace.store import open_store

    try:
        if not source.store.exists(source.key("rescore.json")):
            return source
    except StoreError:
        return source
    if source.prefix.strip("/"):
        parent = source.prefix.strip("/").rpartition("/")[0]
        return RunSource(store=source.store, prefix=parent)
    return RunSource(store=open_store(source.uri.rstrip("/").rpartition("/")[0]))


def _existing(out: OutFolder) -> set[str]:
    """Trace pages already in the output folder (whatever their content key)."""
    base = len(out.key(""))
    try:
        return {k[base:] for k in out.store.list(out.key(f"{TRACES_DIR}/")) if k.endswith(".html")}
    except NotFoundError:
        return set()


def _job(
    source: RunSource,
    out: OutFolder,
    row: Mapping[str, Any],
    outputs: set[str] | frozenset[str],
    *,
    report_key: str,
    existing: bool,
) -> _Job:
    """The page of the attempt whose results row is ``row`` (a mapping of its columns)."""
    run_id, agent, task, n = row["run_id"], row["agent"], row["task_id"], int(row["attempt"])
    key = trace_key(run_id, agent, task, n)
    title = page_title(agent, task, n)
    shown = page_row(row)
    files = frozenset(outputs)
    back = relative_href(out.key(key), out.key(report_key))
    return _Job(
        source=source,
        folder=f"attempts/{agent}/{task}/{n}",
        key=key,
        title=title,
        row=shown,
        outputs=files,
        content=page_key(
            title=title, row=shown, back_href=back, outputs=files, try_id=row.get("try_id")
        ),
        existing=existing,
    )


def start_trace_pages(
    runs: Sequence[RunData], df: Any, out: OutFolder, *, mode: str, report_key: str
) -> PendingTraces:
    """Plan the trace pages of every attempt that has an event log and start writing them.

    In ``new`` mode an existing page is read (its first line) and kept when its content
    key is the one the page would have now; otherwise it is written again.

    Args:
        runs: the runs.
        df: the combined results frame (one row per attempt, with ``label``).
        out: the output folder.
        mode: ``new``, ``all`` or ``none``.
        report_key: the report's key in the output folder, for the back links.
    """
    cells: dict[tuple[str, str], list[AttemptCell]] = {}
    if df.empty:
        return PendingTraces(cells=cells, jobs=0, out=out)
    sources = {r.run_id: attempts_source(r.source) for r in runs} if mode != "none" else {}
    have = {rid: _index(src) for rid, src in sources.items()}
    existing = _existing(out) if mode == "new" else set()
    jobs: list[_Planned] = []
    fields = [c for c in (*PAGE_FIELDS, "try_id") if c in df.columns]
    ident = ["run_id", "agent", "task_id", "attempt"]
    rows = df[list(dict.fromkeys(ident + fields))].to_dict("records") if mode != "none" else []
    cols = ["run_id", "agent", "task_id", "attempt", "label", "passed", "status", "error_code"]
    # whole columns as Python lists: far cheaper than iterating Arrow-backed columns
    for i, (run_id, agent, task, n, label, passed, status, code) in enumerate(
        zip(*(df[c].tolist() for c in cols), strict=True)
    ):
        folder = f"attempts/{agent}/{task}/{int(n)}"
        href = None
        outputs = have.get(run_id, {}).get(folder)
        if outputs is not None:
            href = trace_key(run_id, agent, task, n)
            jobs.append(
                _Planned(
                    source=sources[run_id],
                    row=rows[i],
                    outputs=frozenset(outputs),
                    existing=href in existing,
                )
            )
        cells.setdefault((str(task), str(label)), []).append(
            AttemptCell(
                attempt=int(n),
                passed=None if is_missing(passed) else bool(passed),
                status=str(status),
                href=href,
                error_code=None if is_missing(code) else str(code),
            )
        )
    for v in cells.values():
        v.sort(key=lambda c: c.attempt)

    if not jobs:
        return PendingTraces(cells=cells, jobs=0, out=out)
    # every page's content key is computed where the page is written or checked: by worker
    # processes when there are many (the keys alone are CPU bound), else by threads
    n_procs = _process_count(runs, out, len(jobs))
    if n_procs:
        # worker processes (the work is partly CPU bound); threads only wait on them
        executor: Executor = ThreadPoolExecutor(max_workers=n_procs, thread_name_prefix="ds-trace")
        futures = [
            executor.submit(_in_subprocess, jobs[k::n_procs], out, report_key)
            for k in range(n_procs)
        ]
    else:
        executor = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="ds-trace")
        size = max(1, -(-len(jobs) // (THREADS * 4)))
        futures = [
            executor.submit(_render_planned, jobs[k : k + size], out, report_key)
            for k in range(0, len(jobs), size)
        ]
    return PendingTraces(
        cells=cells, jobs=len(jobs), out=out, futures=tuple(futures), executor=executor
    )


def write_attempt_page(
    source: RunSource, out: OutFolder, row: Mapping[str, Any], *, report_key: str
) -> bool:
    """Write the trace page of one finished attempt (the run controller calls this).

    The page is the one a report into ``out`` would write for this row; an existing page
    with the same content key is kept. Returns False when the attempt has no event log.

    Raises:
        StoreError: the page could not be read or written.
    """
    folder = f"attempts/{row['agent']}/{row['task_id']}/{int(row['attempt'])}"
    base = len(source.key(folder)) + 1
    names = {k[base:] for k in source.store.list(source.key(f"{folder}/"))}
    if "events.jsonl" not in names:
        return False
    outputs = {n[len("output/") :] for n in names if n.startswith("output/")}
    job = _job(source, out, row, outputs, report_key=report_key, existing=True)
    batch = render_pages([job], out, report_key)
    if batch.problems:
        raise StoreError(batch.problems[0])
    return True


def _process_count(runs: Sequence[RunData], out: OutFolder, n_jobs: int) -> int:
    """How many worker processes to use: none unless every store is a local folder."""
    from dataspace.store.local import FileStore

    local = isinstance(out.store, FileStore) and all(
        isinstance(r.source.store, FileStore) for r in runs
    )
    cpus = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    if not local or cpus < 2 or n_jobs < MIN_JOBS_FOR_PROCESSES:
        return 0
    return min(cpus, MAX_PROCESSES)


def _render_planned(planned: Sequence[_Planned], out: OutFolder, report_key: str) -> _Batch:
    """Compute the content keys of a batch of planned pages, then write or keep them."""
    return render_pages([p.job(out, report_key) for p in planned], out, report_key)


def _in_subprocess(jobs: Sequence[_Planned], out: OutFolder, report_key: str) -> _Batch:
    """Render a batch in a fresh interpreter (``python -m dataspace.report.tracepages``).

    A fresh interpreter, not ``multiprocessing``: the caller's main module is never
    re-imported and nothing is forked from a process that may run threads. If the worker
    cannot run, the batch is rendered here instead.
    """
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    import dataspace

    root = str(Path(dataspace.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dataspace.report.tracepages"],
            input=pickle.dumps((list(jobs), out, report_key)),
            capture_output=True,
            env=env,
            check=False,
            timeout=WORKER_TIMEOUT,
        )
        if proc.returncode == 0:
            batch = pickle.loads(proc.stdout)
            if isinstance(batch, _Batch):
                return batch
        logger.warning(
            "trace worker failed (exit %s): %s; rendering its %d pages here",
            proc.returncode,
            proc.stderr.decode(errors="replace")[-500:],
            len(jobs),
        )
    except (OSError, pickle.PickleError, EOFError, subprocess.TimeoutExpired) as exc:
        logger.warning("trace worker unavailable (%s); rendering %d pages here", exc, len(jobs))
    return _render_planned(jobs, out, report_key)


def render_pages(jobs: Sequence[_Job], out: OutFolder, report_key: str) -> _Batch:
    """Render and write a batch of trace pages (keeping those already up to date)."""
    problems = []
    kept = 0
    folders: set[str] = set()
    for job in jobs:
        try:
            if job.existing and _head_key(out, job.key) == job.content:
                kept += 1
                continue
            _put_page(out, job.key, _page(job, out, report_key), folders)
        except (StoreError, OSError) as exc:
            problems.append(f"{job.source.key(job.folder)}: trace page not written ({exc})")
    return _Batch(problems=problems, kept=kept)


def _head_key(out: OutFolder, key: str) -> str | None:
    """The content key an existing page carries (None: no page, or one without a key)."""
    path = out.store.local_path(out.key(key))
    try:
        if path is not None:
            with open(path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
        else:
            head = bytes(out.store.get_bytes(out.key(key)))[:HEAD_BYTES]
    except (NotFoundError, FileNotFoundError):
        return None
    line = head.split(b"\n", 2)[1] if head.count(b"\n") >= 2 else b""
    if not line.startswith(KEY_LINE):
        return None
    return line[len(KEY_LINE) :].split(b" ", 1)[0].decode("ascii", "replace")


def _put_page(out: OutFolder, key: str, data: bytes, folders: set[str]) -> None:
    """Write one page; on a local folder, without the store's per-write safeguards.

    The store's write-once checks and per-call folder creation cost more than the page on
    a local disk; a trace page is derived and rewritable, so it only needs to appear
    whole: a temporary file in the same folder, renamed over the page (temporary names
    carry the store's mark, so listings skip them).
    """
    path = out.store.local_path(out.key(key))
    if path is None:
        out.put(key, data)
        return
    parent = str(path.parent)
    if parent not in folders:
        path.parent.mkdir(parents=True, exist_ok=True)
        folders.add(parent)
    tmp = path.parent / f"{TEMP_MARK}{secrets.token_hex(8)}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _page(job: _Job, out: OutFolder, report_key: str) -> bytes:
    """The page, its content key on its second line (after the doctype)."""
    html = _render(job, out, report_key).encode()
    first, _, rest = html.partition(b"\n")
    return first + b"\n" + KEY_LINE + job.content.encode() + b" -->\n" + rest


def _render(job: _Job, out: OutFolder, report_key: str) -> str:
    src = job.source
    events = _get(src, f"{job.folder}/events.jsonl")
    notes: list[str] = []
    run_meta = None
    raw = _get(src, f"{job.folder}/run.json")
    if raw is not None:
        try:
            run_meta = json.loads(raw)
        except ValueError as exc:
            notes.append(f"run.json is not valid JSON ({exc}); ignored")
    images = {}
    if job.outputs and events:
        for path in image_paths(events):
            url = _kept_image(src, job, path)
            if url:
                images[path] = url
    return render_trace(
        title=job.title,
        events=events,
        row=job.row,
        run_meta=run_meta if isinstance(run_meta, dict) else None,
        back_href=relative_href(out.key(job.key), out.key(report_key)),
        images=images,
        notes=notes,
    )


def _get(source: RunSource, key: str) -> bytes | None:
    try:
        return bytes(source.store.get_bytes(source.key(key)))
    except NotFoundError:
        return None


def _kept_image(source: RunSource, job: _Job, path: str) -> str | None:
    """A data URL for an image the agent wrote under /output, if it was kept."""
    ext = posixpath.splitext(path)[1].lower()
    rel = path[len("/output/") :]
    if ext not in IMAGE_TYPES or rel not in job.outputs or ".." in rel.split("/"):
        return None
    data = _get(source, f"{job.folder}/output/{rel}")
    if data is None or len(data) > MAX_IMAGE_BYTES:
        return None
    return f"data:{IMAGE_TYPES[ext]};base64,{base64.b64encode(data).decode()}"


def _worker_main() -> int:
    """The worker process: a pickled ``(planned pages, out_folder, report_key)`` batch on stdin.

    Writes the pages and answers with the pickled ``_Batch`` on stdout. Started only
    by :func:`_in_subprocess`, with batches it made itself.
    """
    import pickle
    import sys

    jobs, out, report_key = pickle.load(sys.stdin.buffer)
    batch = _render_planned(jobs, out, report_key)
    sys.stdout.buffer.write(pickle.dumps(batch))
    sys.stdout.buffer.flush()
    return 0


__all__ = [
    "TRACE_FORMAT",
    "TRACE_MODES",
    "PendingTraces",
    "TraceMode",
    "TracePages",
    "attempts_source",
    "page_key",
    "page_row",
    "page_title",
    "relative_href",
    "render_pages",
    "safe_segment",
    "start_trace_pages",
    "trace_key",
    "trace_mode",
    "write_attempt_page",
]


if __name__ == "__main__":
    import sys

    # unpickled jobs name this module by its import name, so render with that one
    from dataspace.report import tracepages

    sys.exit(tracepages._worker_main())
