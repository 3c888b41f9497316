"""Reading runs and release metadata for reports.

A run is read from its folder in any store (``runs/<run_id>`` holding ``results.parquet``,
``summary.json`` and ``attempts/``). Several runs are combined into one frame with an
``label`` column naming each agent uniquely across runs: the agent name, or
``<run_id>/<agent>`` when two runs use the same agent name.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dataspace.errors import ConfigError, NotFoundError, StoreError

logger = logging.getLogger(__name__)

RESULTS_NAME = "results.parquet"
SUMMARY_NAME = "summary.json"


@dataclass(frozen=True, kw_only=True)
class RunSource:
    """Where one run lives: a store and the run folder's key prefix (``""``: the root)."""

    store: Any
    prefix: str = ""

    def key(self, name: str) -> str:
        """The key of ``name`` inside the run folder.

        >>> RunSource(store=None, prefix="runs/r1").key("results.parquet")
        'runs/r1/results.parquet'
        """
        return f"{self.prefix.rstrip('/')}/{name}" if self.prefix.strip("/") else name

    @property
    def uri(self) -> str:
        """The run folder's URI."""
        return (
            str(self.store.url_for(self.prefix.strip("/")))
            if self.prefix.strip("/")
            else str(self.store.uri)
        )


@dataclass(frozen=True, kw_only=True)
class OutFolder:
    """Where a report goes: a store and a folder prefix inside it (``""``: the root)."""

    store: Any
    prefix: str = ""

    def key(self, name: str) -> str:
        """The key of ``name`` inside the folder.

        >>> OutFolder(store=None, prefix="runs/r1/").key("report.html")
        'runs/r1/report.html'
        """
        prefix = self.prefix.strip("/")
        return f"{prefix}/{name}" if prefix else name

    def put(self, name: str, data: bytes) -> None:
        """Write ``data`` at ``name`` inside the folder."""
        self.store.put_bytes(self.key(name), data)

    def url(self, name: str) -> str:
        """The URI of ``name`` (of the folder itself for ``""``)."""
        key = self.key(name).strip("/")
        return str(self.store.url_for(key)) if key else str(self.store.uri)


@dataclass(frozen=True, kw_only=True)
class RunData:
    """One run, read.

    Attributes:
        source: where it lives.
        run_id: the run id (from the results, else the folder name).
        results: the results frame (``dataspace.runs.results.read_results``).
        summary: ``summary.json`` when present.
    """

    source: RunSource
    run_id: str
    results: Any
    summary: Mapping[str, Any] | None


def open_run(uri: str) -> RunSource:
    """Open a run folder given as a store URI or a local path."""
    from dataspace.store import open_store

    return RunSource(store=open_store(uri.rstrip("/") or uri))


def read_run(source: RunSource) -> RunData:
    """Read a run's results and summary.

    Raises:
        ConfigError: the folder has no readable ``results.parquet``.
    """
    from dataspace.runs.results import COLUMNS, table_to_frame
    from dataspace.runs.results_log import read_results_table

    key = source.key(RESULTS_NAME)
    where = source.store.url_for(key)
    try:
        table = read_results_table(source.store, source.prefix)
    except NotFoundError:
        raise ConfigError(
            f"{where}: no results file; give a run folder "
            "(<store>/runs/<run_id>) whose run has finished"
        ) from None
    except StoreError as exc:
        raise ConfigError(f"{where}: cannot read the results: {exc}") from exc
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise ConfigError(f"{where}: not a readable results file ({exc})") from exc
    try:
        df = table_to_frame(table)
    except Exception as exc:  # a JSON column that does not parse
        raise ConfigError(f"{where}: not a readable results file ({exc})") from exc
    for name, _ in COLUMNS:  # tolerate files written by an older schema
        if name not in df.columns:
            df[name] = None
    summary = None
    try:
        summary = json.loads(source.store.get_bytes(source.key(SUMMARY_NAME)))
    except NotFoundError:
        pass
    except (StoreError, ValueError) as exc:
        logger.warning(
            "%s: summary unreadable (%s); ignored",
            source.store.url_for(source.key(SUMMARY_NAME)),
            exc,
        )
    if summary is None or summary.get("partial"):
        df, summary = _with_results_on_disk(source, df, summary)
    ids = [r for r in df["run_id"].dropna().unique() if r]
    run_id = str(ids[0]) if ids else (summary or {}).get("run_id") or _folder_name(source)
    df["run_id"] = df["run_id"].fillna(run_id)
    return RunData(source=source, run_id=str(run_id), results=df, summary=summary)


def release_fingerprint(source: RunSource) -> str | None:
    """The fingerprint of the release a run was made on (``spec.json``), None if unrecorded."""
    try:
        doc = json.loads(source.store.get_bytes(source.key("spec.json")))
    except NotFoundError:
        return None
    except (StoreError, ValueError) as exc:
        logger.warning(
            "%s: spec unreadable (%s)", source.store.url_for(source.key("spec.json")), exc
        )
        return None
    value = (doc.get("identity") or {}).get("release_fingerprint")
    return str(value) if value else None


def check_same_release(runs: Sequence[RunData], *, allow_mixed: bool = False) -> str | None:
    """Refuse runs of different releases (tasks would be matched by id alone).

    Returns:
        None when every run recorded the same release (or only one run is given); with
        ``allow_mixed``, the sentence the report shows at its top.

    Raises:
        ConfigError: the runs name different release fingerprints and ``allow_mixed`` is off.
    """
    prints = {r.run_id: release_fingerprint(r.source) for r in runs}
    known = {fp for fp in prints.values() if fp}
    if len(known) <= 1:
        return None
    listing = ", ".join(f"{rid} ({(fp or 'unrecorded')[:12]})" for rid, fp in prints.items())
    if not allow_mixed:
        raise ConfigError(
            f"the runs were made on different releases: {listing}; tasks with one id may "
            "differ between them. Compare runs of one release, or pass --allow-mixed"
        )
    return (
        f"Mixed releases: these runs were made on {len(known)} different releases "
        f"({listing}); tasks are matched by id alone, so a task may differ between runs."
    )


def _with_results_on_disk(
    source: RunSource, df: Any, summary: Mapping[str, Any] | None
) -> tuple[Any, Mapping[str, Any] | None]:
    """A run in progress: the rows its attempts have finished since the results were written.

    Each attempt writes its own ``result.json`` when it ends; the results file is
    rewritten only every few seconds. Rows the results file still has as unfinished are
    taken from their ``result.json``, and the summary's ``finished`` count from the rows.
    """
    import pandas as pd

    from dataspace.runs.results import ResultRow, read_results, rows_to_parquet
    from dataspace.status import UNFINISHED_STATUSES

    if df.empty or "key" not in df.columns:
        return df, summary
    waiting = set(df.loc[df["status"].isin(UNFINISHED_STATUSES), "key"].dropna().astype(str))
    found: list[dict[str, Any]] = []
    try:
        keys = [k for k in source.store.list(source.key("attempts/")) if k.endswith("/result.json")]
    except NotFoundError:
        keys = []
    for key in keys:
        try:
            raw = json.loads(source.store.get_bytes(key))
            if str(raw.get("key")) in waiting:
                found.append(ResultRow.from_row(raw).to_dict())
        except (StoreError, NotFoundError, ValueError, TypeError, KeyError) as exc:
            logger.warning("%s: unreadable attempt result (%s); ignored", key, exc)
    if found:
        new = read_results(rows_to_parquet(found))
        for name in df.columns:
            if name not in new.columns:
                new[name] = None
        order = {k: i for i, k in enumerate(df["key"].astype(str))}
        done = set(new["key"].astype(str))
        df = pd.concat([df[~df["key"].astype(str).isin(done)], new[df.columns]], ignore_index=True)
        df = df.sort_values("key", key=lambda k: k.astype(str).map(order)).reset_index(drop=True)
        logger.info("%d attempt results read from the run's attempts (newer than its results)",
                    len(found))  # fmt: skip
    if summary is not None:
        finished = int((~df["status"].isin(UNFINISHED_STATUSES)).sum())
        summary = {**summary, "attempts": len(df), "finished": finished}
    return df, summary


def run_in_progress(summary: Mapping[str, Any] | None) -> bool:
    """True for a run whose invocation was still going when it last wrote its summary."""
    return bool(summary and summary.get("partial") and not summary.get("interrupted"))


def _folder_name(source: RunSource) -> str:
    return source.uri.rstrip("/").rsplit("/", 1)[-1] or "run"


@dataclass(frozen=True, kw_only=True)
class ReleaseMetadata:
    """Task metadata read from a release.

    Attributes:
        tasks: task id -> metadata for every ``metadata/task_N.json`` that parsed.
        problems: one line per unreadable metadata file (skipped).
    """

    tasks: Mapping[str, Mapping[str, Any]]
    problems: tuple[str, ...] = ()


def read_release_metadata(release: str) -> ReleaseMetadata:
    """Read ``metadata/task_N.json`` of a release folder (local path or store URI).

    A release without a ``metadata/`` folder (the official one) gives no tasks; a file that
    is not a JSON object is skipped with a problem line, never an exception.
    """
    from dataspace.store import open_store

    store = open_store(release)
    tasks: dict[str, Mapping[str, Any]] = {}
    problems: list[str] = []
    try:
        keys = [k for k in store.list("metadata/") if k.endswith(".json")]
    except NotFoundError:
        keys = []
    for key in keys:
        task_id = key.rsplit("/", 1)[-1][: -len(".json")]
        try:
            obj = json.loads(store.get_bytes(key).decode("utf-8-sig"))
        except (ValueError, StoreError) as exc:
            problems.append(f"{store.url_for(key)}: unreadable metadata ({exc}); ignored")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{store.url_for(key)}: metadata is not a JSON object; ignored")
            continue
        tasks[task_id] = obj
    for p in problems:
        logger.warning("%s", p)
    return ReleaseMetadata(tasks=tasks, problems=tuple(problems))


def agent_labels(runs: Sequence[RunData]) -> dict[tuple[str, str], str]:
    """(run_id, agent) -> a label unique across the runs.

    >>> import pandas as pd
    >>> def run(rid, agents):
    ...     return RunData(source=RunSource(store=None), run_id=rid, summary=None,
    ...                    results=pd.DataFrame({"agent": agents}))
    >>> sorted(agent_labels([run("a", ["x", "y"]), run("b", ["x"])]).values())
    ['a/x', 'b/x', 'y']
    """
    seen: dict[str, set[str]] = {}
    for run in runs:
        for agent in run.results["agent"].dropna().unique():
            seen.setdefault(str(agent), set()).add(run.run_id)
    labels = {}
    for run in runs:
        for agent in run.results["agent"].dropna().unique():
            agent = str(agent)
            shared = len(seen[agent]) > 1
            labels[(run.run_id, agent)] = f"{run.run_id}/{agent}" if shared else agent
    return labels


def combine(runs: Sequence[RunData], release: ReleaseMetadata | None = None) -> Any:
    """One frame over every run with ``label`` and filled ``task_metadata``.

    Release metadata, when given, overrides what the results rows carry for that task.
    """
    import pandas as pd

    labels = agent_labels(runs)
    frames = []
    for i, run in enumerate(runs):
        df = run.results.copy()
        df["run_index"] = i
        df["label"] = [labels.get((run.run_id, str(a)), str(a)) for a in df["agent"].tolist()]
        frames.append(df)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if df.empty:
        return df
    df["attempt"] = df["attempt"].fillna(1).astype(int)
    df["passed"] = df["passed"].astype("boolean")
    df["task_id"] = df["task_id"].astype(str)
    rel = dict(release.tasks) if release is not None else {}
    df["task_metadata"] = [
        rel.get(str(t)) or (m if isinstance(m, Mapping) else None) or {}
        for t, m in zip(df["task_id"].tolist(), df["task_metadata"].tolist(), strict=True)
    ]
    return df


def task_metadata(df: Any) -> dict[str, Mapping[str, Any]]:
    """Task id -> the first non-empty metadata any row carries for it."""
    out: dict[str, Mapping[str, Any]] = {}
    for task, md in zip(df["task_id"].tolist(), df["task_metadata"].tolist(), strict=True):
        if not out.get(str(task)):
            out[str(task)] = md or {}
    return out


__all__ = [
    "OutFolder",
    "ReleaseMetadata",
    "RunData",
    "RunSource",
    "agent_labels",
    "check_same_release",
    "combine",
    "open_run",
    "read_release_metadata",
    "read_run",
    "release_fingerprint",
    "run_in_progress",
    "task_metadata",
]
