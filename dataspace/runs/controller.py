"""The run controller: plan attempts, fan them out with Ray, resume, retry faults, summarize.

Identity and resume: the spec's identity (what decides results) is fingerprinted and stored
in ``spec.json``; the same command run again skips every attempt whose ``result.json``
exists, and a changed spec under the same run id is refused with the list of changed
fields. Each attempt has a content key (task, agent, harness, model, limits, runtime,
attempt number).

Faults: a worker that dies (kill -9, node lost, out of memory) or an attempt that raises
``InfrastructureError`` is recorded under ``infra/try_<k>.json`` and resubmitted, up to
``max_infra_retries``; the final row says how many times it was retried. An attempt that
exhausts its retries has no ``result.json`` (a rerun tries it again) and appears in the
results as ``infrastructure_error``. Agent outcomes are final.

Unscored tasks (input only, no gold or config: the official release has 350 of them) are
run like every other task and their rows say ``scored: false`` with no verdict. An agent
that needs the oracle (``gold``) has no answer to give on them: its attempts there are not
run but recorded as ``skipped``, so the run and its report still show every task.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from dataspace.errors import ConfigError, InfrastructureError, NotFoundError, SpecChangedError
from dataspace.release import Release
from dataspace.runs.attempt import AttemptRequest, infra_record, run_attempt
from dataspace.runs.layout import RunLayout
from dataspace.runs.spec import RunSpec, diff_identity, fingerprint

logger = logging.getLogger(__name__)

ProgressFn = Callable[[dict[str, Any]], None]

SKIPPED = "skipped"  # status of an oracle attempt on a task without gold (never run)


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
    """What ``execute_run`` returns."""

    run_id: str
    store_uri: str
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    skipped: int = 0
    executed: int = 0
    infra_failures: list[dict[str, Any]] = field(default_factory=list)


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
    runtime = asdict(spec.sandbox)
    limits = asdict(spec.limits)
    for agent in spec.agents:
        agent_id = {
            "harness": agent.harness,
            "settings": dict(agent.settings),
            "model": asdict(agent.model) if agent.model else None,
        }
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
    spec: RunSpec, *, progress: ProgressFn | None = None, ray_init: dict[str, Any] | None = None
) -> RunOutcome:
    """Run (or resume) every attempt of ``spec`` and write results and summary.

    Args:
        spec: a validated run spec.
        progress: called with each finished row (and with ``{"event": "plan", ...}`` first).
        ray_init: extra keyword arguments for ``ray.init`` when Ray is not yet running.
    """
    from dataspace.store import open_store

    t0 = time.time()
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
    identity = spec.identity(release.fingerprint())
    identity["runtime"] = _runtime_identity(spec)
    _claim_run(store, layout, spec, identity)

    counts = release.counts(task_ids)
    plan = plan_attempts(
        spec,
        task_ids,
        unscored=frozenset(counts.unscored),
        oracle_agents=_oracle_agents(spec),
    )
    skipped = {p.key: _skipped_row(spec, p, release) for p in plan if p.skip}
    finished = _finished_rows(store, layout, [p for p in plan if not p.skip])
    pending = [p for p in plan if p.key not in finished and p.key not in skipped]
    if progress:
        progress(
            {
                "event": "plan",
                "total": len(plan),
                "done": len(finished) + len(skipped),
                "pending": len(pending),
            }
        )
    logger.info(
        "run %s: %d attempts, %d finished, %d skipped, %d to run; %s",
        spec.run_id,
        len(plan),
        len(finished),
        len(skipped),
        len(pending),
        counts.describe(),
    )

    rows = {**finished, **skipped}
    infra: list[dict[str, Any]] = []
    spend = sum(float(r.get("cost_usd") or 0.0) for r in rows.values())
    stopped_for_spend = False
    if pending:
        stopped_for_spend = _fan_out(
            spec, store, layout, release, pending, rows, infra, spend, progress, ray_init or {}
        )
    all_rows = [rows.get(p.key) or _unfinished_row(spec, store, layout, p, release) for p in plan]
    summary = summarize(
        spec,
        all_rows,
        wall_seconds=time.time() - t0,
        stopped_for_spend=stopped_for_spend,
        scored_tasks=len(counts.scored),
        tasks=len(counts.tasks),
    )
    write_results(store, layout, all_rows, summary)
    return RunOutcome(
        run_id=spec.run_id,
        store_uri=spec.store,
        rows=all_rows,
        summary=summary,
        skipped=len(finished),
        executed=len(pending),
        infra_failures=infra,
    )


def _runtime_identity(spec: RunSpec) -> dict[str, Any]:
    """The sandbox runtime's manifest identity, part of the run fingerprint.

    Raises:
        SandboxError: the local workbench is missing (the message says how to install it).
    """
    from dataspace.sandbox.workbench import runtime_identity

    sandbox = spec.sandbox
    return runtime_identity(sandbox.backend, dict(sandbox.options), sandbox.image)


def check_agents(spec: RunSpec) -> None:
    """Resolve every agent's harness and validate its settings before anything runs.

    Raises:
        ConfigError: an unknown harness or invalid settings (one line naming the agent).
    """
    from dataspace.agents import get_agent

    for a in spec.agents:
        try:
            agent = get_agent(a.harness)
            check = getattr(type(agent), "check_settings", None)
            if check is not None:
                check(dict(a.settings), has_model=a.model is not None)
        except ConfigError as exc:
            raise ConfigError(f"agent {a.name!r}: {exc}") from None


def _oracle_agents(spec: RunSpec) -> frozenset[str]:
    """Names of the agents whose harness submits the release's gold answer."""
    from dataspace.agents import get_agent

    return frozenset(
        a.name for a in spec.agents if getattr(get_agent(a.harness), "needs_oracle", False)
    )


def _claim_run(store: Any, layout: RunLayout, spec: RunSpec, identity: dict[str, Any]) -> None:
    fp = fingerprint(identity)
    key = layout.key("spec.json")
    try:
        old = json.loads(store.get_bytes(key))
    except NotFoundError:
        doc = {
            "schema_version": "1.0",
            "fingerprint": fp,
            "identity": identity,
            "spec": spec.to_dict(),
            "created_at": time.time(),
        }
        store.put_bytes(key, json.dumps(doc, indent=1, default=list).encode(), overwrite=False)
        return
    if old.get("fingerprint") != fp:
        changed = diff_identity(old.get("identity", {}), identity)
        raise SpecChangedError(
            f"run {spec.run_id!r} in {store.url_for(key)} was made with a different spec "
            f"(changed: {', '.join(changed) or 'fingerprint'}); use a new run_id or restore "
            "the original spec"
        )


def _finished_rows(
    store: Any, layout: RunLayout, plan: list[PlannedAttempt]
) -> dict[str, dict[str, Any]]:
    wanted = {f"{layout.attempt(p.agent, p.task_id, p.attempt)}/result.json": p for p in plan}
    out: dict[str, dict[str, Any]] = {}
    for key in store.list(f"{layout.prefix}/attempts/"):
        p = wanted.get(key)
        if p is None:
            continue
        row = json.loads(store.get_bytes(key))
        if row.get("key") == p.key:
            out[p.key] = row
    return out


def _prior_failures(store: Any, layout: RunLayout, p: PlannedAttempt) -> list[dict[str, Any]]:
    prefix = f"{layout.attempt(p.agent, p.task_id, p.attempt)}/infra/"
    return [json.loads(store.get_bytes(k)) for k in store.list(prefix)]


def _fan_out(
    spec: RunSpec,
    store: Any,
    layout: RunLayout,
    release: Release,
    pending: list[PlannedAttempt],
    rows: dict[str, dict[str, Any]],
    infra: list[dict[str, Any]],
    spend: float,
    progress: ProgressFn | None,
    ray_init: dict[str, Any],
) -> bool:
    import ray
    from ray.exceptions import RayError, RayTaskError

    if not ray.is_initialized():
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if spec.ray_address:
            kwargs["address"] = spec.ray_address
        else:
            kwargs["num_cpus"] = max(spec.concurrency, 1)
        kwargs.update(ray_init)
        ray.init(**kwargs)
    remote = ray.remote(num_cpus=1, max_retries=0)(run_attempt)
    keys = _model_keys(spec)
    if keys:
        # Workers may predate the key being exported (a Ray instance that was already
        # running): hand the controller's keys to the attempt workers explicitly.
        remote = remote.options(runtime_env={"env_vars": keys})
    agents = {a.name: a for a in spec.agents}
    queue: Iterator[PlannedAttempt] = iter(pending)
    in_flight: dict[Any, AttemptRequest] = {}
    retry: list[AttemptRequest] = []
    stopped_for_spend = False

    def request_for(p: PlannedAttempt) -> AttemptRequest:
        prior = _prior_failures(store, layout, p)
        return AttemptRequest(
            run_id=spec.run_id,
            store_uri=spec.store,
            release_root=str(release.root),
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
        )

    def submit(req: AttemptRequest) -> None:
        in_flight[remote.remote(req)] = req

    while True:
        while len(in_flight) < spec.concurrency and not stopped_for_spend:
            if retry:
                submit(retry.pop(0))
                continue
            p = next(queue, None)
            if p is None:
                break
            if spec.spend_limit_usd is not None and spend >= spec.spend_limit_usd:
                stopped_for_spend = True
                logger.warning(
                    "spend limit %.2f USD reached: no new attempts scheduled", spec.spend_limit_usd
                )
                break
            submit(request_for(p))
        if not in_flight:
            break
        done, _ = ray.wait(list(in_flight), num_returns=1)
        ref = done[0]
        req = in_flight.pop(ref)
        try:
            row = ray.get(ref)
        except (RayError, InfrastructureError) as exc:
            cause = exc.cause if isinstance(exc, RayTaskError) else exc
            if isinstance(exc, RayTaskError) and not isinstance(cause, InfrastructureError):
                raise cause from None  # a bug in our code: do not hide it as a fault
            code = getattr(cause, "code", None) or type(cause).__name__
            rec = infra_record(req, cause, code=code)
            k = req.try_index
            store.put_bytes(
                layout.infra(req.agent.name, req.task_id, req.attempt, k),
                json.dumps(rec).encode(),
                overwrite=False,
            )
            infra.append(
                {"agent": req.agent.name, "task_id": req.task_id, "attempt": req.attempt, **rec}
            )
            logger.warning(
                "attempt %s/%s/%d: infrastructure failure (%s), try %d",
                req.agent.name,
                req.task_id,
                req.attempt,
                code,
                k + 1,
            )
            if k + 1 <= spec.max_infra_retries:
                retry.append(
                    AttemptRequest(
                        **{
                            **_fields(req),
                            "try_index": k + 1,
                            "prior_failures": (*req.prior_failures, rec),
                            "submitted_at": time.time(),
                        }
                    )
                )
            continue
        rows[req.key] = row
        spend += float(row.get("cost_usd") or 0.0)
        if progress:
            progress(row)
    return stopped_for_spend


def _model_keys(spec: RunSpec) -> dict[str, str]:
    """The controller's model keys (by their ``key_env`` names) that are set right now."""
    names = {a.model.key_env for a in spec.agents if a.model is not None and a.model.key_env}
    return {n: os.environ[n] for n in sorted(names) if os.environ.get(n)}


def _fields(req: AttemptRequest) -> dict[str, Any]:
    return {f: getattr(req, f) for f in req.__dataclass_fields__}


def _unfinished_row(
    spec: RunSpec, store: Any, layout: RunLayout, p: PlannedAttempt, release: Release
) -> dict[str, Any]:
    failures = _prior_failures(store, layout, p)
    agent = next(a for a in spec.agents if a.name == p.agent)
    status = "infrastructure_error" if failures else "not_scheduled"
    scored = release.is_scored(p.task_id)
    return {
        "run_id": spec.run_id,
        "key": p.key,
        "agent": p.agent,
        "harness": agent.harness,
        "model": agent.model.id if agent.model else None,
        "task_id": p.task_id,
        "attempt": p.attempt,
        "status": status,
        "scored": scored,
        "passed": False if failures and scored else None,
        "error_code": None,
        "error": failures[-1]["error"] if failures else "not scheduled",
        "infra_retries": len(failures),
        "verdict": None,
        "task_metadata": release.metadata(p.task_id) or {},
    }


def _skipped_row(spec: RunSpec, p: PlannedAttempt, release: Release) -> dict[str, Any]:
    """The row of an attempt that is not run (an oracle on a task without gold)."""
    agent = next(a for a in spec.agents if a.name == p.agent)
    return {
        "run_id": spec.run_id,
        "key": p.key,
        "agent": p.agent,
        "harness": agent.harness,
        "model": agent.model.id if agent.model else None,
        "task_id": p.task_id,
        "attempt": p.attempt,
        "status": SKIPPED,
        "scored": False,
        "passed": None,
        "error_code": None,
        "error": p.skip,
        "infra_retries": 0,
        "verdict": None,
        "task_metadata": release.metadata(p.task_id) or {},
    }


def summarize(
    spec: RunSpec,
    rows: list[dict[str, Any]],
    *,
    wall_seconds: float,
    stopped_for_spend: bool = False,
    scored_tasks: int | None = None,
    tasks: int | None = None,
) -> dict[str, Any]:
    """Per-agent accuracy, status counts, cost and the run's wall time.

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
            status_counts[r["status"]] = status_counts.get(r["status"], 0) + 1
        passed = sum(1 for r in scored if r["passed"])
        agents[a.name] = {
            "harness": a.harness,
            "model": a.model.id if a.model else None,
            "attempts": len(mine),
            "scored": len(scored),
            "passed": passed,
            "accuracy": passed / len(scored) if scored else None,
            "unscored": sum(1 for r in mine if r.get("scored") is False),
            "status_counts": dict(sorted(status_counts.items())),
            "infra_retried_attempts": sum(1 for r in mine if r.get("infra_retries")),
            "cost_usd": sum(float(r.get("cost_usd") or 0.0) for r in mine),
        }
    return {
        "schema_version": "1.0",
        "run_id": spec.run_id,
        "protocol": spec.protocol,
        "attempts": len(rows),
        "tasks": tasks,
        "scored_tasks": scored_tasks,
        "unscored_tasks": tasks - scored_tasks,
        "agents": agents,
        "wall_seconds": wall_seconds,
        "stopped_for_spend_limit": stopped_for_spend,
        "spend_limit_usd": spec.spend_limit_usd,
    }


def write_results(
    store: Any, layout: RunLayout, rows: list[dict[str, Any]], summary: dict[str, Any]
) -> None:
    """Write ``results.parquet`` and ``summary.json`` (derived files, rewritten each time)."""
    from dataspace.runs.results import rows_to_parquet

    store.put_bytes(layout.key("results.parquet"), rows_to_parquet(rows))
    store.put_bytes(layout.key("summary.json"), json.dumps(summary, indent=1, default=str).encode())


__all__ = [
    "SKIPPED",
    "PlannedAttempt",
    "RunOutcome",
    "execute_run",
    "plan_attempts",
    "summarize",
    "write_results",
]
