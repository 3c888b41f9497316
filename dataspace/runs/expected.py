"""Expected attempt durations and the plan order they give: longest first.

A run's makespan is shortest when its longest attempts start first (the short ones fill the
slots at the end instead of a long one starting last). The controller plans attempts agent
by agent; this module sorts them by the expected duration of each agent's attempts,
longest first, keeping the plan order among equals. The expected duration of an agent's
attempt comes from, in this order:

1. ``history``: the median wall seconds of the finished attempts of the same backbone in
   earlier runs in the store (every ``runs/<id>/results.parquet``; the same model id, or for
   an agent without a model, such as the ``gold`` oracle, the same agent name);
2. ``paper``: the paper's mean agent latency for that backbone (:data:`PAPER_LATENCY`, the
   one place those figures live; the model id or the agent name matches a backbone when,
   lower-cased and without punctuation, it ends with the backbone's name: ``xai/grok-4.5``
   is Grok 4.5);
3. ``equal``: none of the above; the agent is placed as the median of the known figures
   (every agent equal when nothing is known: the plan order stays as it was).

An expected duration is never above the attempt's wall-clock limit (the official 1,800 s
cap): an attempt cannot take longer than that, so a slow backbone is not over-weighted.
"""

from __future__ import annotations

import logging
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from dataspace.errors import DataSpaceError, NotFoundError
from dataspace.runs.spec import AgentSpec, RunSpec
from dataspace.status import AttemptStatus

logger = logging.getLogger(__name__)

#: (mean, P90) agent latency in seconds per backbone, the paper's efficiency table
#: (reference/agent-protocol.md, "Efficiency figures the paper reports per backbone").
PAPER_LATENCY: Mapping[str, tuple[float, float]] = {
    "Grok 4.5": (80.9, 185.7),
    "GPT-5.6 Sol": (49.2, 90.8),
    "Kimi K3": (260.1, 535.9),
    "MiMo-V2.5": (90.9, 219.7),
    "Claude Sonnet 5": (128.9, 330.2),
    "MiniMax M3": (104.5, 253.4),
}

ORDER_LONGEST_FIRST = "longest-first"


@dataclass(frozen=True, kw_only=True)
class Expected:
    """The expected duration of one agent's attempts.

    Attributes:
        seconds: the expected wall seconds (capped at the wall-clock limit).
        source: ``history``, ``paper`` or ``equal``.
        detail: where the figure came from, for the screen (``median of 12 attempts``).
    """

    seconds: float
    source: str
    detail: str = ""


class _HasAgent(Protocol):
    @property
    def agent(self) -> str: ...


T = TypeVar("T", bound=_HasAgent)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def paper_backbone(*names: str | None) -> str | None:
    """The paper's backbone that a model id or agent name names, if any.

    >>> paper_backbone("xai/grok-4.5"), paper_backbone(None, "kimi-k3"), paper_backbone("x")
    ('Grok 4.5', 'Kimi K3', None)
    """
    for name in names:
        if not name:
            continue
        tail = _norm(name.rsplit("/", 1)[-1])
        for backbone in PAPER_LATENCY:
            if tail and tail.endswith(_norm(backbone)):
                return backbone
    return None


def history_key(model: str | None, agent: str) -> str:
    """What identifies a backbone across runs: its model id, else the agent's name.

    >>> history_key("xai/grok-4.5", "grok"), history_key(None, "gold")
    ('model:xai/grok-4.5', 'agent:gold')
    """
    return f"model:{model}" if model else f"agent:{agent}"


def _results_keys(store: Any) -> Iterable[str]:
    """The ``runs/<id>/results.parquet`` keys of the store (a folder is globbed directly)."""
    root = store.local_path("runs")
    if root is not None:
        if root.is_dir():
            yield from (
                f"runs/{p.parent.name}/{p.name}" for p in sorted(root.glob("*/results.parquet"))
            )
        return
    for key in store.list("runs/"):
        if key.count("/") == 2 and key.endswith("/results.parquet"):
            yield key


def history_seconds(store: Any) -> dict[str, list[float]]:
    """Wall seconds of every finished attempt in the store's runs, by :func:`history_key`."""
    from dataspace.runs.results_log import read_results_table

    out: dict[str, list[float]] = {}
    for key in _results_keys(store):
        try:
            table = read_results_table(store, key.rpartition("/")[0]).select(
                ["model", "agent", "status", "wall_seconds"]
            )
        except (NotFoundError, ValueError, KeyError, OSError) as exc:
            logger.info("plan order: %s not read (%s)", key, exc)
            continue
        for row in table.to_pylist():
            try:
                finished = AttemptStatus(row["status"]).is_agent_outcome
            except ValueError:
                continue
            if finished and row["wall_seconds"] is not None:
                key_ = history_key(row["model"], row["agent"])
                out.setdefault(key_, []).append(float(row["wall_seconds"]))
    return out


def expected_durations(
    agents: Sequence[AgentSpec], *, cap: float, history: Mapping[str, Sequence[float]]
) -> dict[str, Expected]:
    """The expected duration of each agent's attempts (see the module docstring).

    >>> from dataspace.runs.spec import AgentSpec
    >>> a = [AgentSpec(name=n, harness="gold") for n in ("gold", "kimi-k3", "other")]
    >>> e = expected_durations(a, cap=200, history={"agent:gold": [5, 7, 90]})
    >>> [(e[n].seconds, e[n].source) for n in ("gold", "kimi-k3", "other")]
    [(7.0, 'history'), (200.0, 'paper'), (103.5, 'equal')]
    """
    out: dict[str, Expected] = {}
    for agent in agents:
        model = agent.model.id if agent.model else None
        past = history.get(history_key(model, agent.name))
        backbone = paper_backbone(model, agent.name)
        if past:
            raw, source = float(statistics.median(past)), "history"
            detail = f"median of {len(past)} earlier attempts"
        elif backbone is not None:
            raw, source = PAPER_LATENCY[backbone][0], "paper"
            detail = f"paper mean for {backbone}"
        else:
            continue
        if raw > cap:
            detail += f", capped at the {cap:.0f} s wall limit"
        out[agent.name] = Expected(seconds=float(min(cap, raw)), source=source, detail=detail)
    known = [e.seconds for e in out.values()]
    middle = float(statistics.median(known)) if known else 0.0
    for agent in agents:
        if agent.name not in out:
            out[agent.name] = Expected(
                seconds=middle, source="equal", detail="no figure: median of the others"
            )
    return out


def longest_first(items: Sequence[T], expected: Mapping[str, Expected]) -> list[T]:
    """``items`` sorted by their agent's expected duration, longest first (stable)."""
    return sorted(items, key=lambda it: -expected[it.agent].seconds)


def plan_expected(spec: RunSpec, store: Any) -> dict[str, Expected]:
    """Expected durations of ``spec``'s agents from the store's earlier runs and the paper.

    A store that cannot be listed gives no history (preflight's store check then names the
    problem with its fix).
    """
    try:
        history = history_seconds(store)
    except (DataSpaceError, OSError) as exc:
        logger.warning("plan order: earlier runs in %s not read (%s)", spec.store, exc)
        history = {}
    return expected_durations(spec.agents, cap=float(spec.limits.wall_seconds), history=history)


def describe_order(expected: Mapping[str, Expected], first: Sequence[str], *, top: int = 3) -> str:
    """One line: how the order was chosen and the top of it (agent names, longest first).

    >>> describe_order({"a": Expected(seconds=9.0, source="paper", detail="paper mean")}, ["a"])
    'longest first by expected duration: a 9 s (paper mean); first: a'
    >>> describe_order({"a": Expected(seconds=0.0, source="equal", detail="")}, ["a"])[:34]
    'spec order: no expected durations '
    """
    if all(e.source == "equal" for e in expected.values()):
        return (
            "spec order: no expected durations (no earlier runs of these models in the store, "
            f"no paper figures); first: {', '.join(first[:top])}"
        )
    ranked = sorted(expected.items(), key=lambda kv: -kv[1].seconds)
    figures = ", ".join(f"{name} {e.seconds:.0f} s ({e.detail})" for name, e in ranked)
    return f"longest first by expected duration: {figures}; first: {', '.join(first[:top])}"


__all__ = [
    "ORDER_LONGEST_FIRST",
    "PAPER_LATENCY",
    "Expected",
    "describe_order",
    "expected_durations",
    "history_key",
    "history_seconds",
    "longest_first",
    "paper_backbone",
    "plan_expected",
]
