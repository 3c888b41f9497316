"""Run (or resume) a run spec on the Ray cluster this job was submitted to.

``ray job submit --address http://HEAD:8265 -- python -m ray_jobs.run
spec.yaml --store s3://bucket/bench --release s3://bucket/releases/v1``

``python`` is the cluster's: the interpreter Ray runs with, which has this project
installed (give its path, e.g. ``"$PWD/.venv/bin/python"``, when Ray runs from a venv
that is not on the head's ``PATH``; see ``docs/cluster.md``). Flags override the few
fields that differ between one machine and a cluster; a release given as a store URI is
synced once into ``--release-cache`` (a folder every Ray node sees, e.g. the shared
volume of ``k8s/``). Model keys are read from the job's environment, which is the
cluster's (not the submitting shell's). Like ``dataspace run``, the job writes
``results.parquet``, ``summary.json``, ``report.md`` and ``report.html`` of the run.
Exit code 0 when every attempt has a result, 1 when some could not be run
(infrastructure failures past retries), 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from dataspace.cli.args import POSITIVE_INT
from dataspace.sandbox import backend_names
from ray_jobs._common import parse_options, run_main, setup_logging

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class RunJobConfig:
    """The run job's flags, resolved."""

    spec: str
    store: str | None = None
    release: str | None = None
    release_cache: str = "/var/cache/dataspace/releases"
    ray_address: str | None = None
    sandbox_backend: str | None = None
    sandbox_image: str | None = None
    sandbox_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    sweep: bool = True
    verbose: bool = False


def parse_args(argv: list[str] | None = None) -> RunJobConfig:
    """Flags -> ``RunJobConfig``."""
    p = argparse.ArgumentParser(prog="python -m ray_jobs.run", description=__doc__.splitlines()[0])
    p.add_argument("spec", help="run spec (YAML or JSON)")
    p.add_argument("--store", help="override the spec's store (e.g. s3://bucket/prefix)")
    p.add_argument("--release", help="override the spec's release (folder or store URI)")
    p.add_argument(
        "--release-cache",
        default=os.environ.get("DATASPACE_RELEASE_CACHE", "/var/cache/dataspace/releases"),
        help="where a release given as a store URI is synced (a folder all Ray nodes see)",
    )
    p.add_argument("--ray-address", help="Ray address (default: the cluster of this job)")
    p.add_argument(
        "--sandbox-backend", help=f"override sandbox.backend ({', '.join(backend_names())})"
    )
    p.add_argument("--sandbox-image", help="override sandbox.image")
    p.add_argument(
        "-o",
        "--sandbox-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one sandbox option (JSON value), e.g. -o namespace=sb",
    )
    p.add_argument("--concurrency", type=POSITIVE_INT, help="override the spec's concurrency")
    p.add_argument(
        "--no-sweep",
        action="store_true",
        help="keep the run's leftover sandboxes (do not sweep them by its run label)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    return RunJobConfig(
        spec=a.spec,
        store=a.store,
        release=a.release,
        release_cache=a.release_cache,
        ray_address=a.ray_address,
        sandbox_backend=a.sandbox_backend,
        sandbox_image=a.sandbox_image,
        sandbox_options=parse_options(a.sandbox_option, flag="--sandbox-option"),
        concurrency=a.concurrency,
        sweep=not a.no_sweep,
        verbose=a.verbose,
    )


def resolve_spec(cfg: RunJobConfig) -> Any:
    """The run spec with the job's overrides applied (a store-URI release synced locally)."""
    from dataspace.runs.resolve import Overrides, resolve_spec
    from dataspace.runs.spec import load_spec

    return resolve_spec(
        load_spec(cfg.spec),
        Overrides(
            store=cfg.store,
            release=cfg.release,
            ray_address=cfg.ray_address,
            concurrency=cfg.concurrency,
            sandbox_backend=cfg.sandbox_backend,
            sandbox_image=cfg.sandbox_image,
            sandbox_options=cfg.sandbox_options,
        ),
        release_cache=cfg.release_cache,
    )


def connect_ray(spec: Any) -> None:
    """Join the job's cluster (or ``ray.address``); start a local Ray only as a last resort."""
    from dataspace.runs.ray_start import connect_ray as connect

    connect(
        address=spec.ray_address,
        num_cpus=spec.concurrency,
        start_timeout=spec.ray_start_timeout,
        # a local instance (no cluster to join) starts without the model keys
        hide_env=[a.model.key_env for a in spec.agents if a.model and a.model.key_env],
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    cfg = parse_args(argv)
    setup_logging(cfg.verbose)

    def body() -> int:
        from dataspace.report.basic import write_finished_page
        from dataspace.runs.controller import execute_run

        spec = resolve_spec(cfg)
        connect_ray(spec)
        done = [0]

        def progress(event: dict[str, Any]) -> None:
            kind = event.get("event")
            if kind == "infra":
                print(
                    f"  {event['agent']}/{event['task_id']}/{event['attempt']}: infrastructure "
                    f"failure ({event['code']}): {event['error']}",
                    flush=True,
                )
                return
            if kind == "agent_stopped":
                print(
                    f"  agent {event['agent']} stopped after {event['failures']} "
                    f"infrastructure failures in a row ({event['code']}): {event['error']}",
                    flush=True,
                )
                return
            if kind == "preflight":
                print(f"  preflight {event['check'].line()}", flush=True)
                return
            if kind is not None and kind != "plan":
                return
            if kind == "plan":
                print(
                    f"run {spec.run_id}: {event['total']} attempts, {event['done']} already "
                    f"finished, {event['pending']} to run",
                    flush=True,
                )
                return
            done[0] += 1
            print(
                f"[{done[0]}] {event['agent']}/{event['task_id']}/{event['attempt']}: "
                f"{event['status']} passed={event.get('passed')}",
                flush=True,
            )

        outcome = execute_run(
            spec,
            progress=progress,
            sweep=cfg.sweep,
            keys_from=keys_source(),
            on_finished=write_finished_page,
        )
        code = report(outcome, outcome.swept)
        for path in write_reports(outcome):
            print(f"report:  {path}")
        return code

    return run_main(body)


def keys_source() -> str:
    """Where this process's environment (the model keys) comes from.

    Under ``ray job submit`` (Ray sets ``RAY_JOB_CONFIG_JSON_ENV_VAR`` for the entrypoint)
    it is the cluster's environment; run by hand, the shell's.
    """
    from dataspace.runs.preflight import KEYS_FROM_CLUSTER, KEYS_FROM_SHELL

    return KEYS_FROM_CLUSTER if os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") else KEYS_FROM_SHELL


def write_reports(outcome: Any) -> list[str]:
    """Write ``report.md`` and ``report.html`` next to the run's results (as ``dataspace run``)."""
    from dataspace.report import write_basic_report
    from dataspace.runs.layout import RunLayout
    from dataspace.store import open_store

    store = open_store(outcome.store_uri)
    return write_basic_report(store, RunLayout(run_id=outcome.run_id).prefix, outcome.summary)


def report(outcome: Any, swept: int) -> int:
    """Print what succeeded and what failed; the exit code."""
    print(
        f"run {outcome.run_id}: {outcome.executed} attempts run, {outcome.skipped} skipped "
        f"(finished before), results in {outcome.store_uri}"
    )
    if "tasks" in outcome.summary:
        from dataspace.release import describe_counts

        s = outcome.summary
        print(f"  tasks: {describe_counts(s['scored_tasks'], s['tasks'])}")
    for name, agent in outcome.summary["agents"].items():
        acc = agent["accuracy"]
        acc_text = "n/a" if acc is None else f"{100 * acc:.2f}%"
        print(
            f"  {name}: {agent['passed']}/{agent['scored']} passed ({acc_text}), "
            f"statuses {agent['status_counts']}, cost ${agent['cost_usd']:.4f}"
        )
    if outcome.infra_failures:
        print(f"  infrastructure failures retried: {len(outcome.infra_failures)}")
    if swept:
        print(f"  leftover sandboxes deleted: {swept}")
    unfinished = outcome.unfinished
    if unfinished or outcome.interrupted:
        print(
            f"  {len(unfinished)} attempts have no result; submit the job again to retry them",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
