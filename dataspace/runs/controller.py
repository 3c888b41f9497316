"""The run controller: plan attempts, preflight, fan them out with Ray, resume, summarize.

Identity and resume: the spec's identity (what decides results, ``RunSpec.identity``) is
fingerprinted and stored in ``spec.json``; the same command run again skips every attempt
whose ``result.json`` exists, and a changed spec under the same run id is refused with the
full path of every changed field. Each attempt has a content key (task, agent, harness,
model id and endpoint, settings, limits, runtime, attempt number).

Plan order: pending attempts start longest first, by the expected duration of each agent's
attempts (``dataspace.runs.expected``: earlier runs of the same model in the store, else the
paper's figures); the order and its reasons are shown as a preflight line and written to
``order.json`` on every invocation.

Turns: ``concurrency`` agents run at once, and ``prestart`` more attempts prepare their
sandboxes meanwhile (``dataspace.runs.turns``): an attempt waits for a turn only once its
sandbox is ready and hands it on as soon as its agent ends, so no place of the run idles
through a sandbox's start-up or teardown.

Order: the spec is checked against the recorded one (read only), then preflight runs
(``dataspace.runs.preflight``) when attempts are pending, then the run waits until its
sandboxes can start without delay (the backend's ``wait_ready``: on a cluster, the runtime
image on every node); only then is the spec recorded and Ray started, so a bad spec or a
cluster that never got ready leaves nothing behind.

Faults: a worker that dies (kill -9, node lost, out of memory) or an attempt that raises
``InfrastructureError`` is recorded under ``infra/try_<k>.json`` and resubmitted, up to
``max_infra_retries``; the final row says how many times it was retried. An attempt that
exhausts its retries has no ``result.json`` (a rerun tries it again) and appears in the
results as ``infrastructure_error``. Agent outcomes are final. After ``fail_fast_after``
infrastructure failures of one agent in a row (``InfrastructureError``: its model endpoint,
key or sandbox; not a lost Ray worker; no attempt of it finishing in between), that
agent is stopped: nothing more of it is scheduled, its cause is reported once, and its
remaining attempts stay unfinished so a rerun resumes them.

Live status: every ``status_interval`` seconds while the run goes on, the attempts that
changed are added to the results table as one Parquet part (``dataspace.runs.results_log``:
the cost of a write depends on what changed, not on the run's size) and ``summary.json``
is rewritten, marked ``partial``; the first and the final write of an invocation rewrite
the whole table as ``results.parquet``. The final write is not partial unless the run was
interrupted. The summary's wall time adds up every
invocation of the run. Costs are recomputed from tokens with the prices of the latest
invocation, which the summary shows.

Unscored tasks (input only, no gold or config: the official release has 350 of them) are
run like every other task and their rows say ``scored: false`` with no verdict. An agent
that needs the oracle (``gold``) has no answer to give on them: its attempts there are not
run but recorded as ``skipped``, so the run and its report still show every task.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from dataspace.errors import (
    ConfigError,
    DataSpaceError,
    InfrastructureError,
    NotFoundError,
    SandboxError,
    SpecChangedError,
)
from dataspace.release import Release
from dataspace.runs.attempt import AttemptRequest, infra_record, run_attempt, sweep_scratch
from dataspace.runs.expected import (
    ORDER_LONGEST_FIRST,
    Expected,
    describe_order,
    longest_first,
    plan_expected,
)
from dataspace.runs.keys import controller_keys, start_key_holder, stop_key_holder
from dataspace.runs.layout import RunLayout
from dataspace.runs.lease import RunLease, lease_seconds
from dataspace.runs.preflight import check_agents, check_backend_name
from dataspace.runs.results import ResultRow, row_identity
from dataspace.runs.results_log import ResultsLog, load_results
from dataspace.runs.spec import (
    RunSpec,
    agent_identity,
    diff_identity,
    fingerprint,
    sandbox_identity,
    spec_key,
)
from dataspace.runs.turns import Turns, attempt_cpus, describe_turns, prestart_for
from dataspace.runs.turns import in_flight as attempts_in_flight
from dataspace.status import ENDPOINT_UNREACHABLE, UNFINISHED_STATUSES, AttemptStatus

if TYPE_CHECKING:
    from dataspace.runs.plan import RunEstimate

logger = logging.getLogger(__name__)

ProgressFn = Callable[[dict[str, Any]], None]
FinishedFn = Callable[[Any, str, dict[str, Any]], None]
"""Called with the run's store, its folder's prefix and a finished attempt's priced row."""
UNFINISHED = UNFINISHED_STATUSES
NO_MEASURE = (
    AttemptStatus.INFRASTRUCTURE_ERROR.value,
    AttemptStatus.NOT_SCHEDULED.value,
    AttemptStatus.SKIPPED.value,
)
STATUS_INTERVAL = 5.0
SKIPPED = AttemptStatus.SKIPPED.value  # an oracle attempt on a task without gold (never run)
RETRYABLE_MARKS = (ENDPOINT_UNREACHABLE,)  # what ``--retry`` accepts
CANCEL_GRACE_SECONDS = 10.0  # an interrupted worker's time to close its sandbox and scratch


@dataclass(frozen=True, kw_only=True)
class PlannedAttempt:
    """One (agent, task, attempt number) of the run."""

    agent: str
    task_id: str
    attempt: int
    key: str
    skip: str | None = None


@dataclass(kw_only=True)
class RunOutcome:
    """What ``execute_run`` returns.

    Attributes:
        stopped_agents: agent name -> the cause it was stopped for (fail fast).
        stopped_for_spend: the spend limit stopped scheduling.
        interrupted: Ctrl-C or SIGTERM ended the run early.
        preflight: the preflight report (None when nothing was pending).
        swept: leftover sandboxes of this run deleted at its start and end (pods of a
            crashed controller or of an API outage that outlived their attempt).
    """

    run_id: str
    store_uri: str
    rows: list[ResultRow]
    summary: dict[str, Any]
    skipped: int = 0
    executed: int = 0
    infra_failures: list[dict[str, Any]] = field(default_factory=list)
    stopped_agents: dict[str, str] = field(default_factory=dict)
    stopped_for_spend: bool = False
    interrupted: bool = False
    preflight: Any = None
    swept: int = 0

    @property
    def unfinished(self) -> list[ResultRow]:
        """Rows without an agent outcome (infrastructure error or never scheduled)."""
        return [r for r in self.rows if r.status.is_unfinished]

    @property
    def unreachable(self) -> list[ResultRow]:
        """Rows whose end an unreachable model endpoint decided (``--retry`` reruns them)."""
        return [r for r in self.rows if r.endpoint_unreachable]

    @property
    def complete(self) -> bool:
        """True when every planned attempt finished with an agent outcome of its own."""
        return not self.unfinished and not self.interrupted and not self.unreachable


def plan_attempts(
    spec: RunSpec,
    task_ids: list[str],
    *,
    unscored: frozenset[str] = frozenset(),
    oracle_agents: frozenset[str] = frozenset(),
) -> list[PlannedAttempt]:
    """Every attempt of the run, with its content key.

    Args:
        spec: the run spec.
        task_ids: the tasks of the run.
        unscored: the tasks without gold.
        oracle_agents: names of agents that submit the gold answer; their attempts on
            unscored tasks are planned with a ``skip`` reason and never run.
    """
    out = []
    runtime = sandbox_identity(spec)
    limits = spec.limits.agent_budgets()
    for agent in spec.agents:
        agent_id = agent_identity(agent)  # with its name: two agents may differ only by it
        for task_id in task_ids:
            for n in range(1, spec.attempts + 1):
                key = fingerprint(
                    {
                        "task": task_id,
                        "agent": agent_id,
                        "limits": limits,
                        "runtime": runtime,
                        "attempt": n,
                    }
                )[:20]
                skip = None
                if agent.name in oracle_agents and task_id in unscored:
                    skip = f"{task_id} has no gold answer for the oracle to submit (unscored)"
                out.append(
                    PlannedAttempt(agent=agent.name, task_id=task_id, attempt=n, key=key, skip=skip)
                )
    return out


def execute_run(
    spec: RunSpec,
    *,
    progress: ProgressFn | None = None,
    ray_init: dict[str, Any] | None = None,
    preflight: bool = True,
    status_interval: float = STATUS_INTERVAL,
    sweep: bool = True,
    retry: Sequence[str] = (),
    lease_ttl: float | None = None,
    keys_from: str | None = None,
    on_finished: FinishedFn | None = None,
) -> RunOutcome:
    """Run (or resume) every attempt of ``spec`` and write results and summary.

    Args:
        spec: a validated, resolved run spec (a local release folder).
        progress: called with each finished row and with events (``{"event": "plan"}``
            first, then ``preflight``, ``started``, ``infra``, ``agent_stopped``,
            ``spend_limit``, ``status``).
        ray_init: extra keyword arguments for ``ray.init`` when Ray is not yet running.
        preflight: run the preflight checks before anything is recorded.
        status_interval: seconds between rewrites of the partial results.
        sweep: delete this run's leftover sandboxes (by its ``run`` label) before the
            attempts start and after the last one ended, when none of them is in flight.
        retry: marks of finished attempts to run again (``RETRYABLE_MARKS``: only
            ``endpoint_unreachable``); the earlier try is kept (see ``retry_marked``).
        lease_ttl: seconds after which another invocation takes over this one's lease if
            it stops renewing it (default ``dataspace.runs.lease.lease_seconds()``).
        on_finished: called with the run's store, its folder's key prefix and the priced
            row (``ResultRow.to_dict()``) of each attempt that finishes, in one background
            thread (``dataspace.report.basic.write_finished_page`` writes its trace page); what it
            raises is logged.
        keys_from: where this process's environment (the model keys) comes from, for
            preflight's fix of a missing key (``dataspace.runs.preflight.KEYS_FROM_*``;
            None: the shell that runs dataspace).

    Raises:
        ConfigError: bad spec, changed spec (``SpecChangedError``), failed preflight
            (``PreflightError``): nothing was recorded; or another invocation of the run
            is live (``RunBusyError``, naming it).
    """
    from dataspace.store import open_store

    t0 = time.time()
    emit = progress or (lambda _ev: None)
    if "://" in spec.release and not spec.release.startswith("file://"):
        raise ConfigError(
            f"release {spec.release!r} is a store URI: resolve the spec first "
            "(dataspace.runs.resolve.resolve_spec syncs it to a local folder)"
        )
    store = open_store(spec.store)
    layout = RunLayout(run_id=spec.run_id)
    release = Release(spec.release)
    release.check()
    all_ids = release.task_ids()
    if spec.tasks is not None:
        unknown = sorted(set(spec.tasks) - set(all_ids))
        if unknown:
            raise ConfigError(f"tasks not in release {release.root}: {unknown[:10]}")
        task_ids = [t for t in all_ids if t in set(spec.tasks)]
    else:
        task_ids = all_ids
    check_agents(spec)
    check_backend_name(spec)  # a typo is named as such, not as a changed spec
    identity = spec.identity(release.fingerprint())
    identity["runtime"] = _runtime_identity(spec)
    recorded = _check_recorded(store, layout, spec, identity)
    unknown_marks = sorted(set(retry) - set(RETRYABLE_MARKS))
    if unknown_marks:
        raise ConfigError(
            f"--retry {','.join(unknown_marks)}: unknown; what can be retried: "
            f"{', '.join(RETRYABLE_MARKS)}"
        )
    lease = RunLease(store, layout, ttl=lease_seconds() if lease_ttl is None else lease_ttl)
    lease.acquire()  # before the state is read: nobody else changes it from now on
    lease.start_renewing()
    try:
        return _execute_leased(
            spec,
            store=store,
            layout=layout,
            release=release,
            task_ids=task_ids,
            identity=identity,
            recorded=recorded,
            emit=emit,
            t0=t0,
            ray_init=ray_init,
            preflight=preflight,
            status_interval=status_interval,
            retry=tuple(retry),
            lease=lease,
            sweep=sweep,
            keys_from=keys_from,
            on_finished=on_finished,
        )
    finally:
        lease.release()


def _execute_leased(
    spec: RunSpec,
    *,
    store: Any,
    layout: RunLayout,
    release: Release,
    task_ids: list[str],
    identity: dict[str, Any],
    recorded: bool,
    emit: ProgressFn,
    t0: float,
    ray_init: dict[str, Any] | None,
    preflight: bool,
    status_interval: float,
    retry: tuple[str, ...],
    lease: RunLease,
    sweep: bool,
    keys_from: str | None,
    on_finished: FinishedFn | None = None,
) -> RunOutcome:
    counts = release.counts(task_ids)
    plan = plan_attempts(
        spec,
        task_ids,
        unscored=frozenset(counts.unscored),
        oracle_agents=_oracle_agents(spec),
    )
    skipped = {p.key: _skipped_row(spec, p, release) for p in plan if p.skip}
    finished, failures, journals = _load_state(store, layout, [p for p in plan if not p.skip])
    marked = {
        k for k, r in finished.items() if ENDPOINT_UNREACHABLE in retry and r.endpoint_unreachable
    }
    kept = {k: r for k, r in finished.items() if k not in marked}
    pending = [p for p in plan if p.key not in kept and p.key not in skipped]
    expected = plan_expected(spec, store) if pending else {}
    pending = longest_first(pending, expected)
    emit(_plan_event(spec, plan, {**kept, **skipped}))
    logger.info(
        "run %s: %d attempts, %d finished, %d skipped, %d to run; %s",
        spec.run_id,
        len(plan),
        len(kept),
        len(skipped),
        len(pending),
        counts.describe(),
    )
    report = None
    if pending and preflight:
        from dataspace.runs.preflight import KEYS_FROM_SHELL, Check, check_spec

        order = describe_order(expected, [f"{p.agent}/{p.task_id}/{p.attempt}" for p in pending])
        emit({"event": "preflight", "check": Check(key="plan.order", ok=True, message=order)})
        turns_line = describe_turns(spec.concurrency, spec.prestart)
        emit({"event": "preflight", "check": Check(key="plan.turns", ok=True, message=turns_line)})
        report = check_spec(
            spec,
            check_release=False,
            on_check=lambda c: emit({"event": "preflight", "check": c}),
            keys_from=keys_from or KEYS_FROM_SHELL,
        )
        report.raise_for_problems(f"run {spec.run_id}")
    if pending:  # a failed wait, join or start is on screen before anything is recorded
        wait_for_sandboxes(spec, emit)
        _connect_ray(spec, ray_init or {})
    if not recorded:
        _record_spec(store, layout, spec, identity)
    if marked:  # after preflight: a failed check leaves the earlier tries where they were
        retry_marked(store, layout, [p for p in plan if p.key in marked], finished, failures)
    if pending:
        _record_estimate(spec, store, plan, pending, emit)
        _record_order(store, layout, pending, expected)

    run = _Run(
        spec=spec,
        store=store,
        layout=layout,
        release=release,
        plan=plan,
        rows={**finished, **skipped},
        failures=failures,
        emit=emit,
        invocations=_prior_invocations(store, layout),
        journals=journals,
        lease=lease,
        t0=t0,
        status_interval=status_interval,
        preflight_cost=report.cost_usd if report else 0.0,
        scored_tasks=len(counts.scored),
        tasks=len(counts.tasks),
        on_finished=on_finished,
    )
    swept = 0
    try:
        if pending:
            swept += sweep_run(spec) if sweep else 0
            run.fan_out(pending, ray_init or {})
    except KeyboardInterrupt:
        run.interrupted = True
        logger.warning("run %s interrupted; finished attempts are kept", spec.run_id)
    finally:
        run.close_pages(cancel=run.interrupted)
        if pending and sweep:
            swept += sweep_run(spec)
        sweep_scratch(run.scheduled)  # what workers killed outright left on this host
    if lease.lost.is_set():
        run.interrupted = True
    run.refresh_journals(run.scheduled)  # what every try of this invocation spent
    all_rows, summary = run.write(partial=run.interrupted)
    return RunOutcome(
        run_id=spec.run_id,
        store_uri=spec.store,
        rows=all_rows,
        summary=summary,
        skipped=len(finished),
        executed=run.executed,
        infra_failures=run.new_failures,
        stopped_agents=dict(run.stopped),
        stopped_for_spend=run.stopped_for_spend,
        interrupted=run.interrupted,
        preflight=report,
        swept=swept,
    )


def wait_for_sandboxes(spec: RunSpec, emit: ProgressFn) -> None:
    """Wait, as the backend says, until the run's sandboxes can start without delay.

    On a cluster: until every node that may run a sandbox holds the runtime image. What it
    waits for is shown as ``preflight`` lines (``sandbox.<part>``).

    Raises:
        InfrastructureError: ``sandbox_not_ready``, the wait ran out (nothing was run or
            recorded; a rerun starts over).
    """
    from dataspace.runs.preflight import sandbox_request
    from dataspace.sandbox import get_backend

    try:
        backend = get_backend(spec.sandbox.backend, **dict(spec.sandbox.options))
    except DataSpaceError as exc:  # preflight names it; without preflight, the attempts do
        logger.warning("run %s: no sandbox backend to wait for: %s", spec.run_id, exc)
        return
    try:
        backend.wait_ready(
            sandbox_request(spec), lambda check: emit({"event": "preflight", "check": check})
        )
    except SandboxError as exc:
        raise InfrastructureError(f"run {spec.run_id}: {exc}", code="sandbox_not_ready") from exc


def sweep_run(spec: RunSpec) -> int:
    """Delete the run's sandboxes that outlived their attempts (by the ``run`` label).

    Called when none of the run's attempts is in flight (before the first, after the
    last), so everything it finds is a leftover: of a crashed controller, of an attempt
    whose close failed during an API outage. A sweep that fails is logged, not raised:
    the next start or end of the run sweeps again.
    """
    from dataspace.sandbox import get_backend

    try:
        backend = get_backend(spec.sandbox.backend, **dict(spec.sandbox.options))
        count = backend.sweep({"run": spec.run_id})
    except DataSpaceError as exc:
        logger.warning("run %s: sweeping leftover sandboxes failed: %s", spec.run_id, exc)
        return 0
    if count:
        logger.warning("run %s: deleted %d leftover sandboxes", spec.run_id, count)
    return count


def _connect_ray(spec: RunSpec, ray_init: dict[str, Any]) -> None:
    """Join ``ray.address`` or start a local Ray (no-op when connected).

    A local instance starts without the agents' key variables in its environment: the
    controller alone holds them and hands them to attempts through the key holder.
    """
    from dataspace.runs.ray_start import connect_ray

    extra = dict(ray_init)
    # one CPU per attempt in flight: the turns and the sandboxes prepared ahead
    num_cpus = extra.pop("num_cpus", attempts_in_flight(spec.concurrency, spec.prestart))
    connect_ray(
        address=extra.pop("address", spec.ray_address),
        num_cpus=num_cpus,
        start_timeout=extra.pop("start_timeout", spec.ray_start_timeout),
        hide_env=_key_names(spec),
        **extra,
    )


def _hold_limiters(spec: RunSpec) -> list[Any]:
    """The cluster-wide limiters of the agents' endpoints, owned by this controller."""
    from dataspace.llm.limiter import hold_limiters

    endpoints = []
    for a in spec.agents:
        if a.model is None:
            continue
        endpoints.append((a.model.base_url, a.model))
        upstream = (a.settings or {}).get("upstream_base")  # a native harness's wire API
        if upstream:
            endpoints.append((str(upstream), a.model))
    return hold_limiters(endpoints)


def _key_names(spec: RunSpec) -> list[str]:
    """The environment variables that hold the agents' model keys."""
    return [a.model.key_env for a in spec.agents if a.model and a.model.key_env]


def _record_estimate(
    spec: RunSpec,
    store: Any,
    plan: Sequence[PlannedAttempt],
    pending: Sequence[PlannedAttempt],
    emit: ProgressFn,
) -> None:
    """Estimate what the pending attempts will use; record it at the run's first start."""
    from dataspace.errors import DataSpaceError
    from dataspace.runs.plan import estimate_run, record_estimate

    counts = {a.name: 0 for a in spec.agents}
    for p in pending:
        counts[p.agent] += 1
    try:
        est = estimate_run(spec, counts, store=store)
    except (DataSpaceError, OSError, ValueError, KeyError) as exc:
        logger.warning("run %s: no estimate of its cost: %s", spec.run_id, exc)
        return
    if len(pending) == len([p for p in plan if not p.skip]):
        record_estimate(store, spec.run_id, est)  # a resume keeps the first estimate
    emit({"event": "estimate", "estimate": est})


def pending_attempts(spec: RunSpec) -> dict[str, int]:
    """Agent name -> attempts the run would start now (planned, not skipped, not finished)."""
    from dataspace.store import open_store

    release = Release(spec.release)
    ids = release.task_ids()
    if spec.tasks is not None:
        ids = [t for t in ids if t in set(spec.tasks)]
    counts = release.counts(ids)
    oracles = _oracle_agents(spec)
    plan = plan_attempts(spec, ids, unscored=frozenset(counts.unscored), oracle_agents=oracles)
    done: set[tuple[str, str, int]] = set()
    store = open_store(spec.store)
    with contextlib.suppress(NotFoundError):
        df = load_results(store, f"runs/{spec.run_id}")
        fin = df[~df["status"].isin(list(UNFINISHED))]
        done = {
            (str(a), str(t), int(n))
            for a, t, n in zip(fin["agent"], fin["task_id"], fin["attempt"], strict=True)
        }
    out = {a.name: 0 for a in spec.agents}
    for p in plan:
        if not p.skip and (p.agent, p.task_id, p.attempt) not in done:
            out[p.agent] += 1
    return out


def estimate_pending(
    spec: RunSpec, *, level: float | None = None, difference: float | None = None
) -> RunEstimate:
    """What the attempts the run would start now will use.

    ``dataspace.runs.plan.estimate_run`` of :func:`pending_attempts`; ``level`` and
    ``difference`` as there (None: its defaults).
    """
    from dataspace.runs.plan import estimate_run

    options: dict[str, Any] = {"difference": difference}
    if level is not None:
        options["level"] = level
    return estimate_run(spec, pending_attempts(spec), **options)


def _runtime_identity(spec: RunSpec) -> dict[str, Any]:
    """The sandbox runtime's manifest identity, part of the run fingerprint.

    Raises:
        SandboxError: the local workbench is missing (the message says how to install it).
    """
    from dataspace.sandbox import backend_class

    sandbox = spec.sandbox
    return backend_class(sandbox.backend).runtime_identity(dict(sandbox.options), sandbox.image)


def _oracle_agents(spec: RunSpec) -> frozenset[str]:
    """Names of the agents whose harness submits the release's gold answer."""
    from dataspace.agents import get_agent

    return frozenset(a.name for a in spec.agents if get_agent(a.harness).needs_oracle)


def _skipped_row(spec: RunSpec, p: PlannedAttempt, release: Release) -> ResultRow:
    """The row of an attempt that is not run (an oracle on a task without gold)."""
    return ResultRow.skipped(identity=_identity(spec, p, release), reason=p.skip or "skipped")


def _identity(spec: RunSpec, p: PlannedAttempt, release: Release) -> dict[str, Any]:
    agent = next(a for a in spec.agents if a.name == p.agent)
    return row_identity(
        run_id=spec.run_id,
        key=p.key,
        agent=p.agent,
        harness=agent.harness,
        protocol=spec.protocol,
        model=agent.model.id if agent.model else None,
        task_id=p.task_id,
        attempt=p.attempt,
        task_metadata=release.metadata(p.task_id),
    )


def _plan_event(
    spec: RunSpec, plan: list[PlannedAttempt], finished: dict[str, ResultRow]
) -> dict[str, Any]:
    agents: dict[str, dict[str, Any]] = {}
    for a in spec.agents:
        mine = [p for p in plan if p.agent == a.name]
        done = [finished[p.key] for p in mine if p.key in finished]
        agents[a.name] = {
            "total": len(mine),
            "done": len(done),
            "passed": sum(1 for r in done if r.passed),
            "cost_usd": sum(price_row(spec, r).cost_usd or 0.0 for r in done),
        }
    return {
        "event": "plan",
        "total": len(plan),
        "done": len(finished),
        "pending": len(plan) - len(finished),
        "agents": agents,
    }


def _check_recorded(store: Any, layout: RunLayout, spec: RunSpec, identity: dict[str, Any]) -> bool:
    """True when the run's spec is recorded and matches; SpecChangedError when it differs."""
    key = layout.key("spec.json")
    try:
        old = json.loads(store.get_bytes(key))
    except NotFoundError:
        return False
    if old.get("fingerprint") != fingerprint(identity):
        recorded = old.get("identity", {})
        changed = diff_identity(recorded, identity)
        if changed and all(p.startswith("runtime.") for p in changed):
            from dataspace.runs.preflight import runtime_mismatch
            from dataspace.sandbox import backend_class

            why = backend_class(spec.sandbox.backend).runtime_change(
                dict(spec.sandbox.options), spec.run_id
            )
            problem = runtime_mismatch(
                spec.run_id, recorded.get("runtime"), identity["runtime"], why
            )
            if problem:
                raise SpecChangedError(problem)
        raise SpecChangedError(
            f"run {spec.run_id!r} in {store.url_for(key)} was made with a different spec "
            f"(changed: {', '.join(spec_key(c) for c in changed) or 'fingerprint'}); use a new "
            "run_id or restore the original values"
        )
    return True


def _record_spec(store: Any, layout: RunLayout, spec: RunSpec, identity: dict[str, Any]) -> None:
    from dataspace.errors import AlreadyExistsError

    doc = {
        "schema_version": "1.0",
        "fingerprint": fingerprint(identity),
        "identity": identity,
        "spec": spec.to_dict(),
        "created_at": time.time(),
    }
    try:
        store.put_bytes(
            layout.key("spec.json"),
            json.dumps(doc, indent=1, default=list).encode(),
            overwrite=False,
        )
    except AlreadyExistsError:  # another invocation recorded it meanwhile: check it again
        _check_recorded(store, layout, spec, identity)


def _record_order(
    store: Any, layout: RunLayout, pending: list[PlannedAttempt], expected: Mapping[str, Expected]
) -> None:
    """``order.json``: this invocation's order of the pending attempts and why (rewritten)."""
    doc = {
        "schema_version": "1.0",
        "order": ORDER_LONGEST_FIRST,
        "expected": {name: asdict(e) for name, e in expected.items()},
        "attempts": [f"{p.agent}/{p.task_id}/{p.attempt}" for p in pending],
        "written_at": time.time(),
    }
    store.put_bytes(layout.key("order.json"), json.dumps(doc, indent=1).encode())


def _load_state(
    store: Any, layout: RunLayout, plan: list[PlannedAttempt]
) -> tuple[dict[str, ResultRow], dict[str, list[dict[str, Any]]], dict[str, Journals]]:
    """Finished rows, infrastructure failures and usage journals by attempt key (one listing)."""
    by_dir = {layout.attempt(p.agent, p.task_id, p.attempt): p for p in plan}
    finished: dict[str, ResultRow] = {}
    failures: dict[str, list[dict[str, Any]]] = {}
    infra_keys: dict[str, list[str]] = {}
    journals: dict[str, Journals] = {}
    for key in store.list(f"{layout.prefix}/attempts/"):
        adir, _, rest = key.rpartition("/infra/")
        if adir in by_dir and rest.startswith("try_"):
            infra_keys.setdefault(by_dir[adir].key, []).append(key)
            continue
        adir, _, rest = key.rpartition("/usage/")
        if adir in by_dir and rest.endswith(".json"):
            doc = _read_journal(store, key)
            if doc is not None:
                journals.setdefault(by_dir[adir].key, {})[rest[: -len(".json")]] = doc
            continue
        if key.endswith("/result.json"):
            p = by_dir.get(key[: -len("/result.json")])
            if p is None:
                continue
            raw = json.loads(store.get_bytes(key))
            if raw.get("key") == p.key:
                finished[p.key] = ResultRow.from_row(raw)
    for k, keys in infra_keys.items():
        recs = [json.loads(store.get_bytes(x)) for x in keys]
        failures[k] = sorted(recs, key=lambda r: r.get("try_index", 0))
    return finished, failures, journals


Journals = dict[str, dict[str, Any]]
"""One attempt's usage journals: try id -> the journal (``dataspace.runs.attempt``)."""


def _read_journal(store: Any, key: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(store.get_bytes(key))
    except (NotFoundError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("usage"), dict) else None


def journal_cost(spec: RunSpec, agent: str, docs: Mapping[str, Mapping[str, Any]]) -> float:
    """What the given tries spent, from their journals' tokens at the spec's prices."""
    from dataspace.llm.usage import Prices, TokenCounts, cost_usd

    a = next((x for x in spec.agents if x.name == agent), None)
    total = 0.0
    for doc in docs.values():
        u = doc["usage"]
        if a is None or a.model is None:
            total += float(u.get("cost_usd") or 0.0)
            continue
        tokens = TokenCounts(
            input_tokens=int(u.get("input_tokens") or 0),
            cached_input_tokens=int(u.get("cached_input_tokens") or 0),
            output_tokens=int(u.get("output_tokens") or 0),
        )
        total += cost_usd(tokens, Prices.of(a.model))
    return total


def retry_marked(
    store: Any,
    layout: RunLayout,
    plan: list[PlannedAttempt],
    finished: dict[str, ResultRow],
    failures: dict[str, list[dict[str, Any]]],
) -> list[PlannedAttempt]:
    """Make the finished attempts marked ``endpoint_unreachable`` pending again.

    The store's write-once rule holds: the earlier try's files are first copied, unchanged,
    to ``tries/<agent>/<task>/<n>/try_<k>/`` (write-once), an infrastructure record
    ``infra/try_<k>.json`` (code ``endpoint_unreachable``, naming the copy) is written, and
    only then are they removed from the attempt's folder, ``result.json`` first. A rerun
    then counts the attempt once, its row saying how often it was retried; the earlier
    try's usage journal stays, so its cost is still counted. Interrupted half-way, the next
    invocation finishes the move. Returns the attempts made pending.
    """
    from dataspace.errors import AlreadyExistsError

    out = []
    for p in plan:
        row = finished.get(p.key)
        if row is None or not row.endpoint_unreachable:
            continue
        adir = layout.attempt(p.agent, p.task_id, p.attempt)
        prior = failures.setdefault(p.key, [])
        done = next((r for r in prior if row.try_id and r.get("try_id") == row.try_id), None)
        k = int(done["try_index"]) if done else len(prior)
        dest = layout.tried(p.agent, p.task_id, p.attempt, k)
        moved = [
            key
            for key in store.list(adir + "/")
            if not key[len(adir) :].startswith(("/infra/", "/usage/"))
        ]
        pred = layout.prediction(p.agent, p.task_id, p.attempt)
        for key, rel in [(k_, k_[len(adir) + 1 :]) for k_ in moved] + (
            [(pred, "predictions/prediction.csv")] if store.exists(pred) else []
        ):
            with contextlib.suppress(AlreadyExistsError):  # copied by a run stopped half-way
                store.put_bytes(f"{dest}/{rel}", store.get_bytes(key), overwrite=False)
        if done is None:
            rec = {
                "try_index": k,
                "code": ENDPOINT_UNREACHABLE,
                "error": str(row.error or "")[:1000],
                "at": time.time(),
                "try_id": row.try_id,
                "kept_at": dest,
            }
            store.put_bytes(
                layout.infra(p.agent, p.task_id, p.attempt, k),
                json.dumps(rec).encode(),
                overwrite=False,
            )
            prior.append(rec)
        for key in sorted(moved, key=lambda x: not x.endswith("/result.json")):
            store.delete(key)
        if store.exists(pred):
            store.delete(pred)
        del finished[p.key]
        out.append(p)
        logger.info(
            "attempt %s/%s/%d: rerun (endpoint_unreachable); earlier try kept in %s",
            p.agent,
            p.task_id,
            p.attempt,
            dest,
        )
    return out


def _prior_invocations(store: Any, layout: RunLayout) -> list[dict[str, Any]]:
    try:
        old = json.loads(store.get_bytes(layout.key("summary.json")))
    except (NotFoundError, ValueError):
        return []
    inv = old.get("invocations")
    if isinstance(inv, list):
        return [dict(i) for i in inv if isinstance(i, dict)]
    return [{"started_at": None, "wall_seconds": float(old.get("wall_seconds") or 0.0)}]


def price_row(spec: RunSpec, row: ResultRow) -> ResultRow:
    """The row with its cost recomputed from its tokens at the spec's prices."""
    from dataspace.llm.usage import Prices, TokenCounts, cost_usd

    agent = next((a for a in spec.agents if a.name == row.agent), None)
    if agent is None or agent.model is None or row.input_tokens is None:
        return row
    tokens = TokenCounts(
        input_tokens=int(row.input_tokens or 0),
        cached_input_tokens=int(row.cached_input_tokens or 0),
        output_tokens=int(row.output_tokens or 0),
    )
    return row.priced(cost_usd(tokens, Prices.of(agent.model)))


@dataclass(kw_only=True)
class _Run:
    """The scheduling state of one invocation."""

    spec: RunSpec
    store: Any
    layout: RunLayout
    release: Release
    plan: list[PlannedAttempt]
    rows: dict[str, ResultRow]
    failures: dict[str, list[dict[str, Any]]]
    emit: ProgressFn
    invocations: list[dict[str, Any]]
    t0: float
    status_interval: float
    preflight_cost: float = 0.0
    scored_tasks: int | None = None
    tasks: int | None = None
    executed: int = 0
    new_failures: list[dict[str, Any]] = field(default_factory=list)
    stopped: dict[str, str] = field(default_factory=dict)
    in_a_row: dict[str, int] = field(default_factory=dict)
    stopped_for_spend: bool = False
    interrupted: bool = False
    journals: dict[str, Journals] = field(default_factory=dict)
    lease: RunLease | None = None
    scheduled: set[str] = field(default_factory=set)  # attempt keys sent to workers
    _last_write: float = 0.0
    _log: ResultsLog | None = None  # the results table (parts, compacted on a full write)
    _table: dict[str, ResultRow] = field(default_factory=dict)  # its rows as last written
    _changed: dict[str, None] = field(default_factory=dict)  # keys to write (ordered set)
    _full: bool = True  # the next write rewrites the whole table
    on_finished: FinishedFn | None = None
    _pages: Any = None  # runs on_finished (one background thread)

    # ---- what was spent -----------------------------------------------------------------
    def refresh_journals(self, keys: set[str] | list[str]) -> None:
        """Read again the usage journals of these attempts (tries running or just ended)."""
        by_key = {p.key: p for p in self.plan}
        for key in keys:
            p = by_key.get(key)
            if p is None:
                continue
            folder = f"{self.layout.attempt(p.agent, p.task_id, p.attempt)}/usage/"
            found: Journals = {}
            for k in self.store.list(folder):
                doc = _read_journal(self.store, k)
                if doc is not None and k.endswith(".json"):
                    found[k[len(folder) : -len(".json")]] = doc
            if found != self.journals.get(key):
                self._changed[key] = None  # its row's earlier tries' cost changed
            self.journals[key] = found

    def _earlier(self, p: PlannedAttempt) -> float | None:
        """What the attempt's tries other than its finished one spent (None: no journal)."""
        docs = self.journals.get(p.key) or {}
        row = self.rows.get(p.key)
        if row is not None:
            docs = {t: d for t, d in docs.items() if t != row.try_id}
        if not docs:
            return None
        return journal_cost(self.spec, p.agent, docs)

    def spent(self) -> float:
        """Every model call of the run so far: finished tries, earlier and running ones."""
        total = 0.0
        for p in self.plan:
            row = self.rows.get(p.key)
            if row is not None:
                total += float(price_row(self.spec, row).cost_usd or 0.0)
            total += self._earlier(p) or 0.0
        return total

    # ---- scheduling ---------------------------------------------------------------------
    def fan_out(self, pending: list[PlannedAttempt], ray_init: dict[str, Any]) -> None:
        import ray

        spec = self.spec
        _connect_ray(spec, ray_init)
        # the run's concurrency is the limit, not Ray's CPUs: every attempt in flight fits
        cpus = attempt_cpus(
            float(ray.cluster_resources().get("CPU", 0.0)),
            attempts_in_flight(spec.concurrency, spec.prestart),
        )
        self.emit(
            {
                "event": "started",
                "ray": ray.get_runtime_context().gcs_address,
                "attempt_cpus": cpus,
            }
        )
        # a local worker's scratch folders are named by attempt key; sweep stale ones once
        sweep_scratch(p.key for p in pending)
        remote = ray.remote(num_cpus=cpus, max_retries=0)(run_attempt)
        # Workers may predate the key being exported (a Ray instance that was already
        # running), and a runtime_env is written to Ray's logs: attempts fetch their key
        # from a holder actor, in memory.
        keys = controller_keys(_key_names(spec))
        holder = start_key_holder(keys) if keys else None
        limiters: list[Any] = []
        turns = None
        try:
            limiters = _hold_limiters(spec)
            if prestart_for(spec.concurrency, spec.prestart):
                turns = Turns.hold(
                    spec.run_id, spec.concurrency, wall_seconds=spec.limits.wall_seconds
                )
            self._schedule(pending, remote, holder, turns)
        finally:
            stop_key_holder(holder)
            for limiter in limiters:  # no actor of the run outlives it
                limiter.close()
            if turns is not None:
                with contextlib.suppress(Exception):  # the stats are for the screen only
                    self.emit({"event": "turns", **turns.stats()})
                turns.close()

    def _schedule(
        self, pending: list[PlannedAttempt], remote: Any, holder: Any, turns: Turns | None
    ) -> None:
        spec = self.spec
        agents = {a.name: a for a in spec.agents}
        queue: Iterator[PlannedAttempt] = iter(pending)
        in_flight: dict[Any, AttemptRequest] = {}
        retry: list[AttemptRequest] = []
        # the spend limit counts every model call of the attempts (earlier and killed tries
        # too, from their usage journals); preflight's calls are shown apart
        spend = self.spent()
        self.write(partial=True)  # a report can be made as soon as the run is under way

        def request_for(p: PlannedAttempt) -> AttemptRequest:
            prior = self.failures.get(p.key, [])
            return AttemptRequest(
                run_id=spec.run_id,
                store_uri=spec.store,
                release_root=str(self.release.root),
                agent=agents[p.agent],
                task_id=p.task_id,
                attempt=p.attempt,
                key=p.key,
                limits=spec.limits,
                sandbox=spec.sandbox,
                submitted_at=time.time(),
                try_index=len(prior),
                prior_failures=tuple(prior),
                protocol=spec.protocol,
                key_holder=holder,
                turns=turns,
            )

        try:
            self._loop(queue, in_flight, retry, remote, request_for, spend)
        except BaseException:
            self._cancel(in_flight)
            raise

    def _cancel(self, in_flight: dict[Any, AttemptRequest]) -> None:
        """Stop the attempts still running, gracefully first.

        Each worker first gets to close its sandbox and scratch folder (a
        ``KeyboardInterrupt`` in it, which also ends a blocking call:
        ``interrupts_wake_blocking_calls``), then is killed after ``CANCEL_GRACE_SECONDS``.
        An attempt that has finished (its ref is ready, or its ``result.json`` is written
        and its reply on the way) is only waited for: Ray's cancel racing a task's reply
        ends this process in a fatal check ("Tried to complete task that was not pending").
        """
        import ray

        refs = list(in_flight)
        if not refs:
            return
        with contextlib.suppress(Exception):
            _, refs = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in refs:
            req = in_flight[ref]
            with contextlib.suppress(Exception):
                adir = self.layout.attempt(req.agent.name, req.task_id, req.attempt)
                if self.store.exists(f"{adir}/result.json"):
                    continue
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=False)
        with contextlib.suppress(Exception):
            _, refs = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_SECONDS)
        for ref in refs:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)

    def _loop(
        self,
        queue: Iterator[PlannedAttempt],
        in_flight: dict[Any, AttemptRequest],
        retry: list[AttemptRequest],
        remote: Any,
        request_for: Callable[[PlannedAttempt], AttemptRequest],
        spend: float,
    ) -> None:
        import ray
        from ray.exceptions import RayError, RayTaskError

        spec = self.spec
        limit = attempts_in_flight(spec.concurrency, spec.prestart)
        while True:
            while len(in_flight) < limit and not self.stopped_for_spend:
                if self.lease is not None and self.lease.lost.is_set():
                    break  # another invocation took the run over: schedule nothing more
                retry = [r for r in retry if r.agent.name not in self.stopped]
                if retry:
                    req = retry.pop(0)
                else:
                    p = next(queue, None)
                    while p is not None and p.agent in self.stopped:
                        p = next(queue, None)
                    if p is None:
                        break
                    if spec.spend_limit_usd is not None:
                        spend = self.spent()
                    if spec.spend_limit_usd is not None and spend >= spec.spend_limit_usd:
                        from dataspace.llm.usage import format_usd

                        self.stopped_for_spend = True
                        self._full = True  # every unscheduled row's reason changes
                        logger.warning(
                            "spend limit %s reached (%s spent): no new attempts scheduled",
                            format_usd(spec.spend_limit_usd),
                            format_usd(spend),
                        )
                        self.emit(
                            {"event": "spend_limit", "limit": spec.spend_limit_usd, "spent": spend}
                        )
                        break
                    req = request_for(p)
                in_flight[remote.remote(req)] = req
                self.scheduled.add(req.key)
            if not in_flight:
                break
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=self.status_interval)
            if not done:
                if time.monotonic() - self._last_write >= self.status_interval:
                    self.refresh_journals({r.key for r in in_flight.values()})
                    self._changed.update(dict.fromkeys(r.key for r in in_flight.values()))
                self._maybe_write()
                continue
            ref = done[0]
            req = in_flight.pop(ref)
            self.refresh_journals([req.key])
            try:
                row = ray.get(ref)
            except (RayError, InfrastructureError) as exc:
                cause = exc.cause if isinstance(exc, RayTaskError) else exc
                if isinstance(exc, RayTaskError) and not isinstance(cause, InfrastructureError):
                    raise cause from None  # a bug in our code: do not hide it as a fault
                again = self._fault(req, cause)
                if again is not None:
                    retry.append(again)
                self._maybe_write()
                continue
            self.rows[req.key] = row
            self._changed[req.key] = None
            self.executed += 1
            priced = price_row(spec, row)
            spend += float(priced.cost_usd or 0.0)
            self.write_page(priced)
            self.emit(priced.to_dict())
            if row.endpoint_unreachable:  # an outage, whatever the profile calls the outcome
                self._count_infra(req.agent.name, ENDPOINT_UNREACHABLE, row.error or "")
            else:
                self.in_a_row[req.agent.name] = 0
            self._maybe_write()

    def write_page(self, row: ResultRow) -> None:
        """Hand a finished attempt's priced row to ``on_finished`` (its trace page)."""
        from concurrent.futures import ThreadPoolExecutor

        if self.on_finished is None:
            return
        if self._pages is None:
            self._pages = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ds-page")
        self._pages.submit(_call_finished, self.on_finished, self.store, self.layout.prefix, row)

    def close_pages(self, *, cancel: bool = False) -> None:
        """Wait for the trace pages being written (``cancel``: drop those not started)."""
        if self._pages is not None:
            self._pages.shutdown(wait=True, cancel_futures=cancel)
            self._pages = None

    def _fault(self, req: AttemptRequest, cause: BaseException) -> AttemptRequest | None:
        """Record one infrastructure failure; the request to retry, if any."""
        spec = self.spec
        code = (
            cause.code if isinstance(cause, InfrastructureError | SandboxError) else None
        ) or type(cause).__name__
        rec = infra_record(req, cause, code=code)
        k = req.try_index
        self.store.put_bytes(
            self.layout.infra(req.agent.name, req.task_id, req.attempt, k),
            json.dumps(rec).encode(),
            overwrite=False,
        )
        self.failures.setdefault(req.key, []).append(rec)
        self._changed[req.key] = None
        info = {"agent": req.agent.name, "task_id": req.task_id, "attempt": req.attempt, **rec}
        self.new_failures.append(info)
        logger.info(
            "attempt %s/%s/%d: infrastructure failure (%s), try %d: %s",
            req.agent.name,
            req.task_id,
            req.attempt,
            code,
            k + 1,
            rec["error"],
        )
        self.emit({"event": "infra", **info})
        name = req.agent.name
        if isinstance(cause, InfrastructureError):
            # the agent's own faults (model endpoint, key, sandbox); a lost worker or node
            # says nothing about the agent and never stops it
            self._count_infra(name, code, rec["error"])
        if name in self.stopped or k + 1 > spec.max_infra_retries:
            return None
        return replace(
            req,
            try_index=k + 1,
            prior_failures=(*req.prior_failures, rec),
            submitted_at=time.time(),
        )

    def _count_infra(self, name: str, code: str, error: str) -> None:
        """One more infrastructure failure of agent ``name`` in a row; stop it at the limit."""
        spec = self.spec
        self.in_a_row[name] = self.in_a_row.get(name, 0) + 1
        if (
            spec.fail_fast_after
            and self.in_a_row.get(name, 0) >= spec.fail_fast_after
            and name not in self.stopped
        ):
            cause_text = f"{code}: {error}"
            self.stopped[name] = cause_text
            self._full = True  # every unscheduled row of the agent says why
            logger.warning(
                "agent %s stopped after %d infrastructure failures in a row: %s",
                name,
                self.in_a_row[name],
                cause_text,
            )
            self.emit(
                {
                    "event": "agent_stopped",
                    "agent": name,
                    "failures": self.in_a_row[name],
                    "code": code,
                    "error": error,
                }
            )

    # ---- results ------------------------------------------------------------------------
    def _maybe_write(self) -> None:
        if time.monotonic() - self._last_write >= self.status_interval:
            self.write(partial=True)
            self.emit({"event": "status"})

    def write(self, *, partial: bool) -> tuple[list[ResultRow], dict[str, Any]]:
        """Write results and summary now; returns (rows, summary).

        A partial write adds the rows that changed since the last one as a part of the
        results table (``dataspace.runs.results_log``); the first write of an invocation,
        a change to every unscheduled row (an agent stopped, the spend limit) and the
        final write rewrite the whole table.
        """
        self._last_write = time.monotonic()
        spec = self.spec
        if self._log is None:
            self._log = ResultsLog(self.store, self.layout.prefix)
        if partial and not self._full:
            by_key = {p.key: p for p in self.plan} if self._changed else {}
            new = []
            for k in self._changed:
                row = self._table_row(by_key[k])
                if row != self._table.get(k):
                    self._table[k] = row
                    new.append(row)
            self._log.append(new)
            all_rows = [self._table[p.key] for p in self.plan]
        else:
            all_rows = [self._table_row(p) for p in self.plan]
            self._log.compact(all_rows)
            self._table = {p.key: r for p, r in zip(self.plan, all_rows, strict=True)}
            self._full = False
        self._changed = {}
        this = {"started_at": self.t0, "wall_seconds": time.time() - self.t0}
        invocations = [*self.invocations, this]
        summary = summarize(
            spec,
            all_rows,
            wall_seconds=sum(float(i.get("wall_seconds") or 0.0) for i in invocations),
            stopped_for_spend=self.stopped_for_spend,
            partial=partial,
            invocations=invocations,
            failures=self.failures,
            stopped_agents=self.stopped,
            interrupted=self.interrupted,
            preflight_cost=self.preflight_cost,
            scored_tasks=self.scored_tasks,
            tasks=self.tasks,
        )
        self.store.put_bytes(
            self.layout.key("summary.json"), json.dumps(summary, indent=1, default=str).encode()
        )
        return all_rows, summary

    def _table_row(self, p: PlannedAttempt) -> ResultRow:
        row = (
            price_row(self.spec, self.rows[p.key])
            if p.key in self.rows
            else self._unfinished_row(p)
        )
        return row.with_earlier_tries(self._earlier(p))

    def _unfinished_row(self, p: PlannedAttempt) -> ResultRow:
        if p.agent in self.stopped:
            reason = f"not scheduled: agent stopped ({self.stopped[p.agent]})"
        elif self.stopped_for_spend:
            reason = "not scheduled: spend limit reached"
        else:
            reason = "not scheduled"
        return ResultRow.unfinished(
            identity=_identity(self.spec, p, self.release),
            scored=self.release.is_scored(p.task_id),
            failures=self.failures.get(p.key, []),
            reason=reason,
        )


def _call_finished(fn: FinishedFn, store: Any, prefix: str, row: ResultRow) -> None:
    try:
        fn(store, prefix, row.to_dict())
    except Exception as exc:  # derived output (a trace page): never fails the run
        logger.warning(
            "%s: after attempt %s/%s/%s finished: %s", prefix, row.agent, row.task_id,
            row.attempt, exc,
        )  # fmt: skip


def infra_by_cause(
    failures: dict[str, list[dict[str, Any]]], agent_of: dict[str, str]
) -> list[dict[str, Any]]:
    """Infrastructure failures grouped by (agent, code), most frequent first.

    >>> infra_by_cause({"k1": [{"code": "x", "error": "e1"}, {"code": "x", "error": "e2"}]},
    ...                {"k1": "a"})
    [{'agent': 'a', 'code': 'x', 'tries': 2, 'attempts': 1, 'error': 'e2'}]
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for key, recs in failures.items():
        seen: set[tuple[str, str]] = set()
        for rec in recs:
            g = (agent_of.get(key, "?"), str(rec.get("code")))
            d = groups.setdefault(
                g, {"agent": g[0], "code": g[1], "tries": 0, "attempts": 0, "error": ""}
            )
            d["tries"] += 1
            d["error"] = str(rec.get("error", ""))
            if g not in seen:
                d["attempts"] += 1
                seen.add(g)
    return sorted(groups.values(), key=lambda d: (-d["tries"], d["agent"], d["code"]))


def summarize(
    spec: RunSpec,
    rows: Sequence[Mapping[str, Any]],
    *,
    wall_seconds: float,
    stopped_for_spend: bool = False,
    partial: bool = False,
    invocations: list[dict[str, Any]] | None = None,
    failures: dict[str, list[dict[str, Any]]] | None = None,
    stopped_agents: dict[str, str] | None = None,
    interrupted: bool = False,
    preflight_cost: float = 0.0,
    scored_tasks: int | None = None,
    tasks: int | None = None,
) -> dict[str, Any]:
    """Per-agent accuracy, status counts, cost, prices and the run's wall time.

    Accuracy is over scored attempts (tasks with a config, as the official evaluator
    counts); ``tasks``, ``scored_tasks`` and ``unscored_tasks`` count the run's tasks.
    """
    ids = {r["task_id"] for r in rows}
    if tasks is None:
        tasks = len(ids)
    if scored_tasks is None:
        scored_tasks = len({r["task_id"] for r in rows if r.get("scored", True)})
    agents: dict[str, Any] = {}
    for a in spec.agents:
        mine = [r for r in rows if r["agent"] == a.name]
        scored = [r for r in mine if r.get("passed") is not None]
        status_counts: dict[str, int] = {}
        for r in mine:
            status = str(r["status"])  # the text of an AttemptStatus
            status_counts[status] = status_counts.get(status, 0) + 1
        passed = sum(1 for r in scored if r["passed"])
        m = a.model
        agents[a.name] = {
            "harness": a.harness,
            "model": m.id if m else None,
            "prices": None
            if m is None
            else {
                "input": m.price_input,
                "cached_input": m.price_cached_input,
                "output": m.price_output,
            },
            "attempts": len(mine),
            "finished": sum(1 for r in mine if r["status"] not in UNFINISHED),
            "scored": len(scored),
            "passed": passed,
            "accuracy": passed / len(scored) if scored else None,
            **_intervals(mine, passed, len(scored)),
            "unscored": sum(1 for r in mine if r.get("scored") is False),
            "status_counts": dict(sorted(status_counts.items())),
            "infra_retried_attempts": sum(1 for r in mine if r.get("infra_retries")),
            # every model call: the scored tries' and the earlier (killed, rerun) ones'
            "cost_usd": sum(
                float(r.get("cost_usd") or 0.0) + float(r.get("earlier_tries_cost_usd") or 0.0)
                for r in mine
            ),
            "earlier_tries_cost_usd": sum(
                float(r.get("earlier_tries_cost_usd") or 0.0) for r in mine
            ),
            "endpoint_unreachable": sum(1 for r in mine if r.get("endpoint_unreachable")),
            "endpoint": m.base_url if m else None,
            "stopped": (stopped_agents or {}).get(a.name),
        }
    agent_of = {r["key"]: r["agent"] for r in rows}
    from dataspace.stats import DEFAULT_LEVEL

    return {
        "schema_version": "1.1",
        "interval_level": DEFAULT_LEVEL,
        "run_id": spec.run_id,
        "protocol": spec.protocol,
        "partial": partial,
        "interrupted": interrupted,
        "updated_at": time.time(),
        "attempts": len(rows),
        "finished": sum(1 for r in rows if r["status"] not in UNFINISHED),
        "tasks": tasks,
        "scored_tasks": scored_tasks,
        "unscored_tasks": tasks - scored_tasks,
        "agents": agents,
        "wall_seconds": wall_seconds,
        "invocations": invocations or [],
        "stopped_for_spend_limit": stopped_for_spend,
        "spend_limit_usd": spec.spend_limit_usd,
        "preflight_cost_usd": preflight_cost,
        "infra_by_cause": infra_by_cause(failures or {}, agent_of),
    }


def _intervals(rows: Sequence[Mapping[str, Any]], passed: int, scored: int) -> dict[str, Any]:
    """An agent's accuracy (Wilson) and per-attempt means (bootstrap over tasks) with bounds."""
    from dataspace.stats import cluster_mean, wilson

    acc = wilson(passed, scored)
    out: dict[str, Any] = {"accuracy_interval": None if scored == 0 else [acc.low, acc.high]}
    measured = [
        r for r in rows if r.get("wall_seconds") is not None and r["status"] not in NO_MEASURE
    ]
    for name, value in (
        ("cost_per_attempt_usd", lambda r: float(r.get("cost_usd") or 0.0)),
        (
            "tokens_per_attempt",
            lambda r: float((r.get("input_tokens") or 0) + (r.get("output_tokens") or 0)),
        ),
        ("latency_per_attempt_s", lambda r: float(r["wall_seconds"])),
    ):
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for r in measured:
            t = str(r["task_id"])
            sums[t] = sums.get(t, 0.0) + value(r)
            counts[t] = counts.get(t, 0) + 1
        iv = cluster_mean(list(sums.values()), [counts[t] for t in sums])
        out[name] = (
            None
            if not sums
            else {"mean": iv.estimate, "low": _finite(iv.low), "high": _finite(iv.high)}
        )
    return out


def _finite(v: float) -> float | None:
    return None if v != v else v


__all__ = [
    "SKIPPED",
    "UNFINISHED",
    "PlannedAttempt",
    "RunOutcome",
    "check_agents",
    "estimate_pending",
    "execute_run",
    "infra_by_cause",
    "pending_attempts",
    "plan_attempts",
    "price_row",
    "summarize",
]
