"""One attempt, start to end: sandbox, agent, collection, scoring, upload.

This is a plain library function (``run_attempt``); Ray only decides where it runs. It
returns the attempt's results row. Agent outcomes (wrong answer, no submission, exhausted
budget, a harness bug) are final and recorded; faults outside the agent (the sandbox could
not start, the store or the model endpoint failed past retries) raise
``InfrastructureError`` so the controller retries the attempt and labels the retry.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import InfrastructureError, SandboxError, StoreError
from dataspace.limits import Limits
from dataspace.runs.keys import attempt_keys
from dataspace.runs.layout import RunLayout
from dataspace.runs.results import ResultRow, row_identity
from dataspace.runs.spec import AgentSpec, SandboxConfig
from dataspace.traces import TRACE_SCHEMA, AttemptStart

logger = logging.getLogger(__name__)

PREDICTION_NAME = "prediction.csv"
MAX_PREDICTION_BYTES = 20 * 1024 * 1024  # the evaluator's own CSV limit


@dataclass(frozen=True, kw_only=True)
class AttemptRequest:
    """Everything a worker needs for one attempt (picklable)."""

    run_id: str
    store_uri: str
    release_root: str
    agent: AgentSpec
    task_id: str
    attempt: int
    key: str
    limits: Limits
    sandbox: SandboxConfig
    submitted_at: float
    try_index: int = 0
    prior_failures: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    protocol: str = "official"
    key_holder: Any = None  # the controller's KeyHolder actor (dataspace.runs.keys), if any
    turns: Any = None  # the run's Turns (dataspace.runs.turns); None: the agent starts at once


SCRATCH_PREFIX = "ds-attempt-"


def scratch_prefix(key: str) -> str:
    """The name every scratch folder of the attempt with content key ``key`` starts with.

    >>> scratch_prefix("0123456789abcdef0123")
    'ds-attempt-0123456789abcdef0123-'
    """
    return f"{SCRATCH_PREFIX}{key}-"


def sweep_scratch(keys: Iterable[str], tmp: str | None = None) -> int:
    """Remove this host's scratch folders of the given attempts (their workers are gone).

    A worker removes its own folder on every way out it lives through; this removes what a
    worker killed outright (a Ray worker stopped with its run) left in ``tmp`` (default:
    ``tempfile.gettempdir()``). Returns how many folders were removed.
    """
    root = Path(tmp or tempfile.gettempdir())
    removed = 0
    for key in keys:
        for path in root.glob(scratch_prefix(key) + "*"):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


class _UsageJournal:
    """Persists a try's running usage after each model call (``UsageSink``).

    ``attempts/<agent>/<task>/<n>/usage/<try_id>.json`` is rewritten with the running totals,
    so what a try spent is in the store even when it never ends (killed with its run); the
    controller adds the journals of a finished attempt's earlier tries to its cost.
    """

    def __init__(self, store: Any, key: str, head: Mapping[str, Any]) -> None:
        self.store = store
        self.key = key
        self.head = dict(head)
        self._lock = threading.Lock()
        self._calls = -1

    def __call__(self, usage: Any) -> None:
        doc = {**self.head, "updated_at": time.time(), "usage": usage.to_dict()}
        with self._lock:
            if usage.model_calls < self._calls:  # a late writer with older totals
                return
            self._calls = usage.model_calls
            try:
                self.store.put_bytes(self.key, _dumps(doc))
            except StoreError:
                logger.warning("could not persist the usage of %s", self.key, exc_info=True)


def run_attempt(req: AttemptRequest) -> ResultRow:
    """Run one attempt and write its files; return its results row.

    Its scratch folder (``$TMPDIR/ds-attempt-<key>-*``) is removed on every way out: a
    result, an exception, a cancellation (``KeyboardInterrupt``).
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"{scratch_prefix(req.key)}{req.task_id}-"))
    try:
        with interrupts_wake_blocking_calls():
            return _run_attempt(req, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


WAKE_SIGNAL = signal.SIGRTMAX - 3
"""The signal that wakes the main thread from a blocking call when an interrupt is pending
(a real-time signal nothing else here uses; its handler does nothing)."""


@contextlib.contextmanager
def interrupts_wake_blocking_calls() -> Iterator[None]:
    """A pending ``KeyboardInterrupt`` interrupts the main thread's blocking call at once.

    Ray's graceful cancel (and ``_thread.interrupt_main``) only marks SIGINT as pending: its
    ``KeyboardInterrupt`` is raised when the main thread next runs Python code, so a worker
    waiting on a model's reply or a harness process kept waiting until the controller
    killed it (``CANCEL_GRACE_SECONDS`` later) and could not close its sandbox itself.
    Here a pending SIGINT's wake-up byte (``signal.set_wakeup_fd``) makes a watcher thread
    send ``WAKE_SIGNAL`` to the main thread: its blocking system call returns, Python runs
    the pending handler, and the ``KeyboardInterrupt`` unwinds the attempt through its
    cleanup. Ray keeps SIGINT itself blocked in its workers, so SIGINT cannot be the one
    sent. A worker that inherited SIGINT ignored gets its default handler, or the cancel
    would mark nothing. Does nothing outside a Ray worker's main thread (a controller
    running attempts itself is stopped by its own signals) or when a wake-up fd is
    already set.
    """
    if threading.current_thread() is not threading.main_thread() or not _in_ray_worker():
        yield
        return
    rd, wr = socket.socketpair()
    rd.setblocking(False)
    wr.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(wr.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        previous = None
    if previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        rd.close()
        wr.close()
        yield
        return
    if signal.getsignal(WAKE_SIGNAL) in (signal.SIG_DFL, None):
        signal.signal(WAKE_SIGNAL, _ignore_wake)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # started from a background job (``nohup … &``) the worker inherits SIGINT ignored,
        # and then Ray's graceful cancel marks nothing: take SIGINT's default handler, as
        # a worker started from a terminal has
        signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            select.select([rd], [], [], 0.5)
            try:
                got = rd.recv(64)
            except (BlockingIOError, OSError):
                continue
            if signal.SIGINT in got and not done.is_set() and main is not None:
                signal.pthread_kill(main, WAKE_SIGNAL)

    watcher = threading.Thread(target=watch, name="ds-interrupt-wake", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(-1)
        watcher.join()
        rd.close()
        wr.close()


def _in_ray_worker() -> bool:
    """Whether this process is a Ray worker (Ray's tasks and cancels reach it)."""
    if "ray" not in sys.modules:
        return False
    import ray
    from ray._private.worker import global_worker

    return bool(global_worker.mode == ray.WORKER_MODE)


def _ignore_wake(signum: int, frame: Any) -> None:
    """``WAKE_SIGNAL``'s handler: the signal only ends a blocking call; nothing to do."""


def _run_attempt(req: AttemptRequest, workdir: Path) -> ResultRow:
    from dataspace.agents import AgentContext, get_agent
    from dataspace.release import Release
    from dataspace.sandbox import SandboxSpec, get_backend
    from dataspace.store import open_store
    from dataspace.traces import EventLog

    t_start = time.time()
    phases: dict[str, float] = {"queue": max(0.0, t_start - req.submitted_at)}
    layout = RunLayout(run_id=req.run_id)
    adir = layout.attempt(req.agent.name, req.task_id, req.attempt)
    try_id = uuid.uuid4().hex[:16]
    try:
        store = open_store(req.store_uri)
        _clear_partial(store, adir)
    except StoreError as exc:
        raise InfrastructureError(f"store {req.store_uri}: {exc}", code="store") from exc

    release = Release(req.release_root)
    task = release.task(req.task_id)
    journal = _UsageJournal(
        store,
        layout.usage(req.agent.name, req.task_id, req.attempt, try_id),
        {
            "schema_version": "1.0",
            "key": req.key,
            "try_id": try_id,
            "try_index": req.try_index,
            "host": socket.gethostname(),
            "started_at": t_start,
        },
    )
    events = EventLog(workdir / "events.jsonl")
    events.emit(
        AttemptStart(
            schema=TRACE_SCHEMA,
            task=req.task_id,
            agent=req.agent.name,
            attempt=req.attempt,
            try_index=req.try_index,
            key=req.key,
            question=task.question,
        )
    )
    sandbox = None
    turn = None
    sandbox_info: dict[str, Any] = {}
    try:
        t = time.monotonic()
        workspace = release.workspace(req.task_id)
        phases["staging"] = time.monotonic() - t
        t = time.monotonic()
        agent = get_agent(req.agent.harness)
        needs = agent.sandbox_needs()
        relay_dir: Path | None = None
        relay_network = False
        try:
            backend = get_backend(req.sandbox.backend, **dict(req.sandbox.options))
            # a harness that calls its model itself reaches the relay the way the backend
            # declares: a socket bound in, or a network route of its own
            if needs is not None and needs.relay:
                if backend.relay_transport == "socket":
                    relay_dir = workdir / "relay"
                    relay_dir.mkdir(mode=0o755)
                else:
                    relay_network = True
            box_spec = SandboxSpec(
                workspace=workspace,
                limits=req.limits.for_sandbox(),
                image=req.sandbox.image,
                relay_dir=None if relay_dir is None else str(relay_dir),
                runtime_binds=() if needs is None else tuple(needs.runtime_binds),
                relay_network=relay_network,
                labels={
                    "run": req.run_id,
                    "agent": req.agent.name,
                    "task": req.task_id,
                    "attempt": str(req.attempt),
                },
            )
            sandbox = backend.create(box_spec)
            phases["sandbox_start"] = time.monotonic() - t
            if req.turns is not None:
                turn, sandbox = _await_turn(req, backend, box_spec, sandbox, phases)
            sandbox_info = dict(sandbox.info())
        except SandboxError as exc:
            raise _sandbox_fault(f"sandbox failed to start: {exc}", exc) from exc

        settings: dict[str, Any] = dict(req.agent.settings)
        if req.agent.model is not None:
            settings["model"] = req.agent.model
        settings["run_id"] = req.run_id
        settings["protocol"] = req.protocol
        oracle = (lambda: release.gold_bytes(req.task_id)) if agent.needs_oracle else None
        t = time.monotonic()
        ctx = AgentContext(
            task=task,
            sandbox=sandbox,
            limits=req.limits,
            events=events,
            deadline=t + req.limits.wall_seconds,
            oracle=oracle,
            settings=settings,
            relay_dir=relay_dir,
            usage_sink=journal,
        )
        key_env = req.agent.model.key_env if req.agent.model else None
        try:
            with attempt_keys(req.key_holder, [key_env] if key_env else []):
                result = agent.run(ctx)
        except InfrastructureError:
            raise
        except SandboxError as exc:
            raise _sandbox_fault(f"sandbox failed during the agent: {exc}", exc) from exc
        except Exception as exc:  # a harness bug is the agent's outcome, not ours
            from dataspace.agents import AgentResult

            logger.exception("agent %s crashed on %s", req.agent.name, req.task_id)
            result = AgentResult(
                end_state="runtime_error", error=f"{type(exc).__name__}: {exc}"[:500]
            )
        phases["agent"] = time.monotonic() - t
        _hand_on(req, turn)  # the next attempt's agent starts while this one ends
        turn = None

        t = time.monotonic()
        outdir = workdir / "output"
        try:
            sandbox.collect(outdir)
            sandbox_info["collect"] = sandbox.collect_report
        except SandboxError as exc:
            raise _sandbox_fault(f"collecting outputs failed: {exc}", exc) from exc
        phases["collect"] = time.monotonic() - t
    finally:
        _hand_on(req, turn)
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception:
                logger.exception("closing the sandbox of %s failed", req.task_id)
        events.close()

    if result.prediction is not None:  # the bytes taken when the answer was accepted
        prediction, pred_problem = _snapshot_prediction(result.prediction, workdir, outdir)
    else:
        prediction, pred_problem = _submitted_prediction(result.submitted_path, outdir)
    t = time.monotonic()
    verdict = _score(
        release,
        req.task_id,
        prediction if result.end_state == "submitted" else None,
        pred_problem,
    )
    phases["evaluation"] = time.monotonic() - t

    usage = result.usage.to_dict()
    t = time.monotonic()
    meta = {
        "schema_version": "1.0",
        "run_id": req.run_id,
        "key": req.key,
        "try_id": try_id,
        "agent": req.agent.name,
        "harness": req.agent.harness,
        "model": req.agent.model.id if req.agent.model else None,
        "task_id": req.task_id,
        "attempt": req.attempt,
        "try_index": req.try_index,
        "infra_failures": list(req.prior_failures),
        "host": socket.gethostname(),
        "started_at": t_start,
        "end_state": result.end_state,
        "error": result.error,
        "endpoint_unreachable": result.endpoint_unreachable,
        "submitted_path": result.submitted_path,
        "scored_path": result.prediction.path if result.prediction else None,
        "scored_sha256": result.prediction.sha256 if result.prediction else None,
        "prediction_problem": pred_problem,
        "model_turns": result.model_turns,
        "tool_actions": result.tool_actions,
        "usage": usage,
        "sandbox": sandbox_info,
    }
    try:
        store.put_file(f"{adir}/events.jsonl", workdir / "events.jsonl")
        if prediction is not None:
            store.put_file(f"{adir}/output/{PREDICTION_NAME}", prediction)
            store.put_file(layout.prediction(req.agent.name, req.task_id, req.attempt), prediction)
        phases["upload"] = time.monotonic() - t
        turn_wait = phases.pop("turn", None)
        wall = time.time() - t_start - (turn_wait or 0.0)  # the attempt's own time
        meta["phases"] = phases
        if turn_wait is not None:
            meta["turn_seconds"] = turn_wait
        meta["wall_seconds"] = wall
        meta["working_seconds"] = result.working_seconds
        store.put_bytes(f"{adir}/run.json", _dumps(meta))
        row = _row(req, meta, verdict, release)
        store.put_bytes(f"{adir}/result.json", _dumps(row.to_dict()), overwrite=False)
    except StoreError as exc:
        raise InfrastructureError(f"upload to {req.store_uri} failed: {exc}", code="store") from exc
    return row


def _await_turn(
    req: AttemptRequest, backend: Any, box_spec: Any, sandbox: Any, phases: dict[str, float]
) -> tuple[Any, Any]:
    """Wait for the run's turn with the sandbox ready; the turn and the sandbox to use.

    A sandbox that waited ``TURN_WAIT_LIMIT`` seconds is closed, and a new one is made
    once the turn comes (its wall clock, and a pod's deadline, must not run while it
    waits). The sandbox's clock starts when the turn comes. The wait counts as queueing
    (the ``queue`` phase, and ``turn_seconds`` in ``run.json``), not as the attempt's
    wall time.
    """
    from dataspace.runs import turns as turns_mod

    t = time.monotonic()
    turn = req.turns.acquire(timeout=turns_mod.TURN_WAIT_LIMIT)
    if turn is None:
        logger.info("%s: no turn within %.1f s; sandbox closed until one comes",
                    req.task_id, turns_mod.TURN_WAIT_LIMIT)  # fmt: skip
        sandbox.close()
        turn = req.turns.acquire(timeout=None)
        waited = time.monotonic() - t
        t = time.monotonic()
        try:
            sandbox = backend.create(box_spec)
        except BaseException:
            req.turns.release(turn)
            raise
        phases["sandbox_start"] += time.monotonic() - t
    else:
        waited = time.monotonic() - t
    phases["queue"] += waited
    phases["turn"] = waited  # moved to run.json's turn_seconds: results know no such phase
    if math.isfinite(sandbox.deadline):  # a backend that keeps the clock: it starts now
        sandbox.start_clock()
    return turn, sandbox


def _hand_on(req: AttemptRequest, turn: Any) -> None:
    """Give the run's turn back, if one is held."""
    if turn is not None:
        req.turns.release(turn)


def _sandbox_fault(message: str, exc: SandboxError) -> InfrastructureError:
    """A sandbox failure as a retryable fault, keeping the backend's code (``image_pull``...)."""
    return InfrastructureError(message, code=exc.code or "sandbox")


def _clear_partial(store: Any, adir: str) -> None:
    """Remove files of an earlier try that died before writing result.json."""
    for key in list(store.list(adir + "/")):
        rel = key[len(adir) :]
        if not rel.startswith(("/infra/", "/usage/")):  # records of earlier tries stay
            store.delete(key)


def _submitted_prediction(submitted: str | None, outdir: Path) -> tuple[Path | None, str | None]:
    """Map the sandbox path the agent submitted to the collected local copy."""
    if submitted is None:
        return None, "no submission"
    rel = submitted
    if rel.startswith("/output/"):
        rel = rel[len("/output/") :]
    elif rel.startswith("/"):
        return None, f"submitted path {submitted!r} is outside /output"
    candidate = (outdir / rel).resolve()
    if not candidate.is_relative_to(outdir.resolve()):
        return None, f"submitted path {submitted!r} escapes /output"
    if candidate.is_symlink() or not candidate.is_file():
        return None, f"submitted path {submitted!r} is not a regular file"
    if candidate.stat().st_size > MAX_PREDICTION_BYTES:
        return None, f"submitted file is larger than {MAX_PREDICTION_BYTES} bytes"
    return candidate, None


def _snapshot_prediction(snap: Any, workdir: Path, outdir: Path) -> tuple[Path | None, str | None]:
    """Write the agent's submit-time snapshot where the scorer and the upload read it."""
    if snap.data is None and snap.size is not None:
        return _oversized_prediction(snap, outdir)
    if snap.data is None:
        return None, snap.problem or "no submission"
    if len(snap.data) > MAX_PREDICTION_BYTES:
        return None, f"submitted file is larger than {MAX_PREDICTION_BYTES} bytes"
    path = workdir / "submitted" / PREDICTION_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(snap.data)
    return path, None


def _oversized_prediction(snap: Any, outdir: Path) -> tuple[Path | None, str | None]:
    """An accepted answer over the evaluator's limit (official profile): the collected file.

    The official runner copies such a file and its evaluator rejects it; here the copy
    collected from the sandbox is scored and stored when it still has the digest taken at
    submit time (the sandbox's processes were stopped before collecting).
    """
    import hashlib

    rel = snap.path[len("/output/") :] if snap.path.startswith("/output/") else None
    candidate = (outdir / rel) if rel else None
    if candidate is None or candidate.is_symlink() or not candidate.is_file():
        return None, f"{snap.problem}; it was not collected"
    digest = hashlib.sha256()
    with candidate.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(chunk)
    if digest.hexdigest() != snap.sha256:
        return None, f"{snap.problem}; it changed after it was submitted"
    return candidate, None


def _score(
    release: Any, task_id: str, prediction: Path | None, problem: str | None
) -> dict[str, Any] | None:
    """The official per-task verdict, or None for an unscored task (no gold, no config)."""
    import evaluator

    if not release.is_scored(task_id):
        return None
    with tempfile.TemporaryDirectory(prefix="ds-eval-") as tmp:
        pred = Path(tmp) / "prediction.csv"  # absent file -> missing_prediction
        if prediction is not None:
            shutil.copyfile(prediction, pred)
        config = release.config(task_id)
        verdict = evaluator.evaluate_task(
            task_id=task_id,
            prediction_path=pred,
            gold_path=release.gold_path(task_id),
            config=config,
        )
        out = verdict.to_dict()
        # beside the official verdict, never instead of it: why it failed, with previews
        out["explanation"] = evaluator.explain_files(
            prediction_path=pred,
            gold_path=release.gold_path(task_id),
            config=config,
            verdict=verdict,
        )
    if problem and prediction is None:
        out["submission_problem"] = problem
    return out


def _row(
    req: AttemptRequest,
    meta: Mapping[str, Any],
    verdict: Mapping[str, Any] | None,
    release: Any,
) -> ResultRow:
    return ResultRow.finished(
        identity=request_identity(req, release.metadata(req.task_id)),
        end_state=meta["end_state"],
        verdict=verdict,
        error=meta["error"],
        infra_retries=len(req.prior_failures),
        usage=meta["usage"],
        model_turns=meta["model_turns"],
        tool_actions=meta["tool_actions"],
        wall_seconds=meta["wall_seconds"],
        working_seconds=meta["working_seconds"],
        phases=meta["phases"],
        sandbox_enforcement=str(meta["sandbox"].get("enforcement", "")),
        endpoint_unreachable=bool(meta["endpoint_unreachable"]),
        try_id=meta["try_id"],
    )


def request_identity(
    req: AttemptRequest, task_metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The identity columns of the request's row (``dataspace.runs.results.row_identity``)."""
    return row_identity(
        run_id=req.run_id,
        key=req.key,
        agent=req.agent.name,
        harness=req.agent.harness,
        protocol=req.protocol,
        model=req.agent.model.id if req.agent.model else None,
        task_id=req.task_id,
        attempt=req.attempt,
        task_metadata=task_metadata,
    )


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=1, default=str) + "\n").encode()


def infra_record(req: AttemptRequest, error: BaseException | str, *, code: str) -> dict[str, Any]:
    """The record of one infrastructure failure of an attempt (written by the controller)."""
    return {"try_index": req.try_index, "code": code, "error": str(error)[:1000], "at": time.time()}


__all__ = [
    "SCRATCH_PREFIX",
    "AttemptRequest",
    "infra_record",
    "interrupts_wake_blocking_calls",
    "request_identity",
    "run_attempt",
    "scratch_prefix",
    "sweep_scratch",
]
