"""What ``dataspace run`` and ``dataspace demo`` show: live status per agent and the outcome.

The library reports events (``dataspace.runs.controller.execute_run``); this module turns
them into a progress bar per agent (done/planned, passed, infrastructure faults, cost so
far, ETA), a line for each preflight check, one line per infrastructure cause the first
time it is seen, and the final screen with failures by cause. It also decides the exit code.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_BAD_INPUT = 2

EXIT_CODES_HELP = """exit codes:
  0  every planned attempt finished with an agent outcome (right or wrong)
  1  some attempt ended as an infrastructure error or was left unfinished (spend limit,
     an agent stopped after repeated infrastructure failures, Ctrl-C or SIGTERM, Ray
     could not start); rerun the same command to resume. Also when an attempt's end was
     decided by an unreachable model endpoint (marked endpoint_unreachable): rerun with
     --retry endpoint_unreachable
  2  bad input: the spec, a flag, the release, or a preflight check (nothing was run);
     or another invocation of the same run is live (its lease names it)"""


def exit_code(outcome: Any) -> int:
    """0 when every planned attempt has an agent outcome, else 1."""
    return EXIT_OK if outcome.complete else EXIT_INCOMPLETE


@contextlib.contextmanager
def live_status(label: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress callback drawing one bar per agent (and one for a release build)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    console = Console(highlight=False)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, Any] = {}
        stats: dict[str, dict[str, float]] = {}
        causes: set[tuple[str, str]] = set()

        def say(text: str) -> None:
            bar.console.print(text, soft_wrap=True)  # never cut: logs and tests grep it

        def show(agent: str) -> None:
            s = stats[agent]
            text = f"passed {int(s['passed'])}  infra {int(s['infra'])}  ${s['cost']:.4f}"
            bar.update(tasks[agent], stats=text)

        def progress(ev: dict[str, Any]) -> None:
            kind = ev.get("event")
            if kind == "build":
                if "build" not in tasks:
                    tasks["build"] = bar.add_task("build release", total=ev["total"], stats="")
                bar.update(tasks["build"], completed=ev["done"], total=ev["total"])
            elif kind == "plan":
                per = ev.get("agents") or {label: {"total": ev["total"], "done": ev["done"]}}
                for name, a in per.items():
                    tasks[name] = bar.add_task(
                        f"{label} {name}" if len(per) > 1 or name != label else label,
                        total=a["total"],
                        completed=a["done"],
                        stats="",
                    )
                    stats[name] = {
                        "passed": a.get("passed", 0),
                        "infra": 0,
                        "cost": a.get("cost_usd", 0.0),
                    }
                    show(name)
            elif kind == "preflight":
                say(f"preflight {ev['check'].line()}")
            elif kind == "estimate":
                for line in ev["estimate"].lines():
                    say(line.replace("[", "\\["))  # ranges are not rich markup
            elif kind == "infra":
                agent = ev["agent"]
                if agent in stats:
                    stats[agent]["infra"] += 1
                    show(agent)
                if (agent, ev["code"]) not in causes:
                    causes.add((agent, ev["code"]))
                    say(
                        f"[yellow]{agent}: infrastructure failure ({ev['code']}) on "
                        f"{ev['task_id']}: {ev['error']}[/yellow]"
                    )
            elif kind == "agent_stopped":
                say(
                    f"[red]{ev['agent']}: stopped after {ev['failures']} infrastructure "
                    f"failures in a row ({ev['code']}): {ev['error']}; its remaining attempts "
                    "are left for a rerun[/red]"
                )
            elif kind == "spend_limit":
                from dataspace.llm.usage import format_usd

                say(
                    f"[red]spend limit {format_usd(ev['limit'])} reached "
                    f"({format_usd(ev['spent'])} spent): no new attempts scheduled[/red]"
                )
            elif kind is None and ev.get("agent") in tasks:
                agent = ev["agent"]
                if ev.get("endpoint_unreachable") and (agent, "unreachable") not in causes:
                    causes.add((agent, "unreachable"))
                    say(
                        f"[yellow]{agent}: {ev['task_id']} ended {ev['status']}, the model "
                        f"endpoint unreachable: {ev.get('error')}[/yellow]"
                    )
                stats[agent]["passed"] += 1 if ev.get("passed") else 0
                stats[agent]["cost"] += float(ev.get("cost_usd") or 0.0)
                bar.advance(tasks[agent])
                show(agent)

        yield progress


def print_outcome(outcome: Any, *, started: float | None = None) -> None:
    """The final screen: counts, accuracy and cost per agent, causes, where results are."""
    from dataspace.report import write_basic_report
    from dataspace.runs.layout import RunLayout
    from dataspace.store import open_store

    store = open_store(outcome.store_uri)
    layout = RunLayout(run_id=outcome.run_id)
    paths = write_basic_report(store, layout.prefix, outcome.summary)
    s = outcome.summary
    print(
        f"attempts: {len(outcome.rows)} ({outcome.executed} run now, {outcome.skipped} "
        f"already finished); infrastructure faults retried: {len(outcome.infra_failures)}"
    )
    if "tasks" in s:
        from dataspace.release import describe_counts

        n_skip = sum(1 for r in outcome.rows if r["status"] == "skipped")
        skip = f"; {n_skip} oracle attempts skipped (no gold to submit)" if n_skip else ""
        print(f"tasks: {describe_counts(s['scored_tasks'], s['tasks'])}{skip}")
    for name, a in s["agents"].items():
        acc = "-" if a["accuracy"] is None else f"{100 * a['accuracy']:.2f}%"
        prices = a.get("prices")
        price_text = (
            f", prices in/cached/out ${prices['input']:g}/${prices['cached_input']:g}/"
            f"${prices['output']:g} per M tokens"
            if prices
            else ""
        )
        print(
            f"  {name}: accuracy {acc} ({a['passed']}/{a['scored']}), statuses "
            f"{a['status_counts']}, cost ${a['cost_usd']:.4f}{price_text}"
        )
    causes = s.get("infra_by_cause") or []
    if causes:
        print("infrastructure failures by cause:")
        for c in causes:
            print(
                f"  {c['agent']}: {c['code']} x{c['tries']} ({c['attempts']} attempts): "
                f"{c['error'][:300]}"
            )
    print(
        f"wall time {s['wall_seconds']:.1f} s over {len(s.get('invocations') or [1])} invocation(s)"
    )
    if outcome.swept:
        print(f"leftover sandboxes of this run deleted: {outcome.swept}")
    print(f"results: {store.url_for(layout.key('results.parquet'))}")
    for p in paths:
        print(f"report:  {p}")
    _unreachable_lines(outcome)
    _why_incomplete(outcome)
    if started is not None:
        print(f"this invocation took {time.monotonic() - started:.1f} s")


def _unreachable_lines(outcome: Any) -> None:
    """One line per agent whose attempts an unreachable endpoint ended, with the fix.

    Under the official profile they finished ``runtime_error`` (a plain rerun keeps them);
    under the extended one they are infrastructure errors; ``--retry`` reruns both.
    """
    agents = outcome.summary.get("agents") or {}
    counts: dict[str, int] = {}
    for r in outcome.unreachable:
        counts[r.agent] = counts.get(r.agent, 0) + 1
    for name, n in counts.items():
        endpoint = (agents.get(name) or {}).get("endpoint") or "the model endpoint"
        print(
            f"{name}: {n} attempts ended endpoint_unreachable ({endpoint}): rerun with "
            "--retry endpoint_unreachable",
            file=sys.stderr,
        )


def _why_incomplete(outcome: Any) -> None:
    if outcome.complete:
        return
    err = sys.stderr
    left = len(outcome.unfinished)
    if outcome.interrupted:
        print(
            f"interrupted: {left} attempts left unfinished; rerun the same command to resume",
            file=err,
        )
        return
    if outcome.stopped_for_spend:
        print(
            f"stopped: the spend limit was reached; {left} attempts left unfinished "
            "(raise spend_limit_usd and rerun to resume)",
            file=err,
        )
    for name, cause in outcome.stopped_agents.items():
        print(
            f"stopped: agent {name} after repeated infrastructure failures ({cause}); fix "
            "the cause and rerun to resume",
            file=err,
        )
    if left:
        print(f"{left} attempts have no result; rerun the same command to resume them", file=err)


__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_CODES_HELP",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "exit_code",
    "live_status",
    "print_outcome",
]
