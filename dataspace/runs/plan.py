"""What a run will cost before it starts: ``dataspace plan SPEC`` (and preflight's estimate).

Per agent and in total: the attempts to run, model calls, input / cached / output tokens,
cost at the spec's prices, and wall time at its concurrency, each with a range.

Where the per-attempt figures come from, in order:

1. **history**: the user's earlier runs in the spec's store (``runs/*/results.parquet``)
   of the same model id under the same harness. Costs are recomputed from their tokens at
   this spec's prices. The range of a total over ``n`` new attempts is the prediction
   interval of a sum, ``n*mean +- t * sd * sqrt(n + n^2/h)`` with ``h`` attempts seen (the
   noise of the new attempts plus the uncertainty of the mean), at the plan's level.
2. **paper**: the paper's per-backbone means (``reference/agent-protocol.md``: tokens mean
   and median, cost, tool actions, latency mean and P90 over 410 tasks) when the model id
   names one of its six backbones, else the span of all six. The spread of a task's tokens
   and latency is a log-normal fitted to the mean with the median (P90 for latency). The
   paper does not split tokens into input, cached input and output; the estimate assumes
   ``PAPER_SPLIT`` (stated in every plan), so its cost range is wide on purpose.

Wall time is the agents' summed attempt time divided by the concurrency (the run's
attempts share its slots), plus the start-up and scheduling overhead the earlier runs
showed (their wall time minus the same quotient); without history the overhead is
unknown and only the high end allows ``PAPER_STARTUP_SECONDS`` for it.

With earlier runs of two or more of the spec's agents, the plan also says how many tasks
x attempts it takes to tell each pair apart (``dataspace.stats.attempts_needed``).
The attempts to estimate come from ``dataspace.runs.controller.pending_attempts``.
The run records its estimate (``plan.json``) when it starts, and the report shows it
beside what the run actually used.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dataspace.errors import DataSpaceError
from dataspace.runs.spec import AgentSpec, RunSpec

logger = logging.getLogger(__name__)

PLAN_NAME = "plan.json"
PLAN_SCHEMA_VERSION = "1.0"
DEFAULT_LEVEL = 0.95


@dataclass(frozen=True, kw_only=True)
class PaperFigures:
    """One backbone's means per task over the paper's 410 tasks (DataSpace-Agent)."""

    accuracy_pct: float
    tokens_mean: float
    tokens_median: float
    cost_usd: float
    actions: float
    latency_mean_s: float
    latency_p90_s: float


PAPER_BACKBONES: Mapping[str, PaperFigures] = {
    # reference/agent-protocol.md, "Efficiency figures the paper reports per backbone"
    "Grok 4.5": PaperFigures(
        accuracy_pct=66.34,
        tokens_mean=301_900,
        tokens_median=124_500,
        cost_usd=0.169,
        actions=18.1,
        latency_mean_s=80.9,
        latency_p90_s=185.7,
    ),
    "GPT-5.6 Sol": PaperFigures(
        accuracy_pct=64.63,
        tokens_mean=77_800,
        tokens_median=50_500,
        cost_usd=0.200,
        actions=9.0,
        latency_mean_s=49.2,
        latency_p90_s=90.8,
    ),
    "Kimi K3": PaperFigures(
        accuracy_pct=53.41,
        tokens_mean=235_200,
        tokens_median=100_700,
        cost_usd=0.235,
        actions=19.7,
        latency_mean_s=260.1,
        latency_p90_s=535.9,
    ),
    "MiMo-V2.5": PaperFigures(
        accuracy_pct=39.27,
        tokens_mean=237_900,
        tokens_median=75_800,
        cost_usd=0.011,
        actions=19.2,
        latency_mean_s=90.9,
        latency_p90_s=219.7,
    ),
    "Claude Sonnet 5": PaperFigures(
        accuracy_pct=32.93,
        tokens_mean=440_400,
        tokens_median=96_900,
        cost_usd=0.224,
        actions=19.3,
        latency_mean_s=128.9,
        latency_p90_s=330.2,
    ),
    "MiniMax M3": PaperFigures(
        accuracy_pct=28.54,
        tokens_mean=498_600,
        tokens_median=178_600,
        cost_usd=0.042,
        actions=25.0,
        latency_mean_s=104.5,
        latency_p90_s=253.4,
    ),
}
PAPER_TASKS = 410
PAPER_SPLIT = {"output": (0.02, 0.05, 0.15), "cached_of_input": (0.0, 0.5, 0.8)}
"""Assumed shares of the paper's tokens (low, central, high): output of all tokens, and
cached input of input (the paper reports totals only)."""
PAPER_STARTUP_SECONDS = 60.0
"""Allowance for start-up (Ray, preflight) in the high end of a plan without history."""
OVERHEAD_RANGE = (0.5, 2.0, 5.0)
"""The overhead range from history: (low factor on the least seen, high factor on the most
seen, seconds added to the high end)."""


@dataclass(frozen=True, kw_only=True)
class Quantity:
    """An estimate with its range."""

    estimate: float
    low: float
    high: float

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(
            estimate=self.estimate + other.estimate,
            low=self.low + other.low,
            high=self.high + other.high,
        )

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in the range (a hair of float rounding allowed)."""
        eps = 1e-9 * max(1.0, abs(self.high))
        return self.low - eps <= value <= self.high + eps


ZERO = Quantity(estimate=0.0, low=0.0, high=0.0)


@dataclass(frozen=True, kw_only=True)
class AgentEstimate:
    """One agent's share of the plan."""

    agent: str
    harness: str
    model: str | None
    source: str  # "history", "paper", "paper-span" or "none"
    basis: str  # in words: which runs or which backbone
    attempts: int
    model_calls: Quantity
    input_tokens: Quantity
    cached_input_tokens: Quantity
    output_tokens: Quantity
    cost_usd: Quantity
    attempt_seconds: Quantity  # summed attempt wall time


@dataclass(frozen=True, kw_only=True)
class RunEstimate:
    """The plan of one run."""

    run_id: str
    level: float
    concurrency: int
    agents: tuple[AgentEstimate, ...]
    model_calls: Quantity
    input_tokens: Quantity
    cached_input_tokens: Quantity
    output_tokens: Quantity
    cost_usd: Quantity
    wall_seconds: Quantity
    overhead_basis: str
    sample_sizes: tuple[Mapping[str, Any], ...] = ()
    created_at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        """The document recorded as ``runs/<id>/plan.json``."""
        return {"schema_version": PLAN_SCHEMA_VERSION, **asdict(self)}

    def lines(self) -> list[str]:
        """The plan as the CLI prints it."""
        pct = f"{100 * self.level:g}%"
        out = [f"plan for run {self.run_id} (ranges at {pct}, concurrency {self.concurrency}):"]
        for a in self.agents:
            out.append(
                f"  {a.agent} ({a.harness}, {a.model or 'no model'}): {a.attempts} attempts; "
                f"calls {_q(a.model_calls, '.0f')}; tokens in {_q(a.input_tokens, 'k')} "
                f"(cached {_q(a.cached_input_tokens, 'k')}), out {_q(a.output_tokens, 'k')}; "
                f"cost ${_q(a.cost_usd, '.4f')}; attempt time {_q(a.attempt_seconds, 's')}"
            )
            out.append(f"    from {a.source}: {a.basis}")
        n = sum(a.attempts for a in self.agents)
        out.append(
            f"  total: {n} attempts; calls {_q(self.model_calls, '.0f')}; tokens in "
            f"{_q(self.input_tokens, 'k')} (cached {_q(self.cached_input_tokens, 'k')}), out "
            f"{_q(self.output_tokens, 'k')}; cost ${_q(self.cost_usd, '.4f')}; wall time "
            f"{_q(self.wall_seconds, 's')}"
        )
        out.append(f"  wall time: {self.overhead_basis}")
        for s in self.sample_sizes:
            need = ", ".join(f"{r['attempts']} x {r['tasks']} tasks" for r in s["rows"])
            out.append(
                f"  to tell {s['a']} from {s['b']} by {100 * s['difference']:.1f} points "
                f"(observed {100 * s['observed']:+.1f} on {s['tasks']} shared tasks) at {pct} "
                f"with power {s['power']:.0%}: attempts x tasks {need}"
                + (
                    ""
                    if s["within_known"]
                    else " (one attempt per task seen: more attempts are not credited)"
                )
            )
        return out


def _q(q: Quantity, spec: str) -> str:
    def one(v: float) -> str:
        if spec == "k":
            return f"{v / 1000:.1f}K"
        if spec == "s":
            return f"{v:.0f} s" if v < 600 else f"{v / 60:.1f} min"
        return format(v, spec)

    if q.low == q.high == q.estimate:
        return one(q.estimate)
    return f"{one(q.estimate)} [{one(q.low)}, {one(q.high)}]"


# ---- sums with ranges ---------------------------------------------------------------------


def _sum_range(n: int, mean: float, sd: float, seen: int, level: float) -> Quantity:
    """A total over ``n`` attempts from a mean and sd over ``seen`` attempts."""
    # scipy.stats' norm.ppf and t.ppf are these two functions (same values); scipy.special
    # alone spares the command a second of importing scipy.stats
    from scipy.special import ndtri, stdtrit

    if n <= 0:
        return ZERO
    q = 1 - (1 - level) / 2
    crit = float(stdtrit(seen - 1, q)) if 1 < seen < 1000 else float(ndtri(q))
    total = n * mean
    half = crit * sd * math.sqrt(n + n * n / max(seen, 1))
    return Quantity(estimate=total, low=max(0.0, total - half), high=total + half)


def _lognormal_sd(mean: float, quantile: float, z: float) -> float:
    """The sd of a log-normal with this mean and the given quantile at normal score z."""
    if mean <= 0 or quantile <= 0:
        return 0.0
    r = math.log(quantile / mean)
    if z == 0.0:  # the median: sigma^2 = 2 ln(mean / median)
        s2 = max(0.0, -2.0 * r)
    else:  # ln q = mu + z s, ln mean = mu + s^2/2  ->  s^2/2 - z s + r = 0
        disc = z * z - 2.0 * r
        s = z - math.sqrt(disc) if disc >= 0 else z
        s2 = max(0.0, s) ** 2
    return mean * math.sqrt(math.expm1(s2))


# ---- history ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HistoryRun:
    """An earlier run in the store: its attempts and how long it took."""

    run_id: str
    rows: Any  # the results frame
    wall_seconds: float | None
    concurrency: int | None


def load_history(store: Any, *, exclude: str | None = None) -> list[HistoryRun]:
    """Every earlier run in ``store`` (``runs/<id>/results.parquet``), except ``exclude``."""
    from dataspace.runs.results_log import load_results

    ids = _run_ids(store)
    out = []
    for run_id in ids:
        if run_id == exclude:
            continue
        try:
            rows = load_results(store, f"runs/{run_id}")
        except (DataSpaceError, OSError, ValueError) as exc:
            logger.debug("plan: skipping run %s: %s", run_id, exc)
            continue
        wall = conc = None
        try:
            summary = json.loads(store.get_bytes(f"runs/{run_id}/summary.json"))
            wall = float(summary.get("wall_seconds")) if summary.get("wall_seconds") else None
            spec = json.loads(store.get_bytes(f"runs/{run_id}/spec.json"))
            conc = int((spec.get("spec") or spec).get("concurrency") or 0) or None
        except (DataSpaceError, OSError, ValueError, TypeError, AttributeError):
            pass
        out.append(HistoryRun(run_id=run_id, rows=rows, wall_seconds=wall, concurrency=conc))
    return out


def _run_ids(store: Any) -> list[str]:
    local = store.local_path("runs")
    if local is not None:
        if not local.is_dir():
            return []
        return sorted(p.name for p in local.iterdir() if (p / "results.parquet").is_file())
    ids = set()
    for key in store.list("runs"):
        parts = key.split("/")
        if len(parts) == 3 and parts[2] == "results.parquet":
            ids.add(parts[1])
    return sorted(ids)


_OUTCOME_EXCLUDED = ("infrastructure_error", "not_scheduled", "skipped")


def _matching(history: Sequence[HistoryRun], agent: AgentSpec) -> tuple[Any, list[str]]:
    import pandas as pd

    frames, runs = [], []
    model = agent.model.id if agent.model else None
    for h in history:
        df = h.rows
        mine = df[(df["harness"] == agent.harness) & ~df["status"].isin(_OUTCOME_EXCLUDED)]
        mine = mine[mine["model"].isna()] if model is None else mine[mine["model"] == model]
        mine = mine[mine["wall_seconds"].notna()]
        if len(mine):
            frames.append(mine)
            runs.append(h.run_id)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), runs


def _from_history(agent: AgentSpec, n: int, rows: Any, runs: list[str], level: float) -> Any:
    from dataspace.llm.usage import Prices, TokenCounts, cost_usd

    seen = len(rows)

    def col(name: str) -> Any:
        return rows[name].astype(float).fillna(0.0)

    inp, cached, out = col("input_tokens"), col("cached_input_tokens"), col("output_tokens")
    prices = Prices.of(agent.model) if agent.model else None
    costs = (
        [
            cost_usd(
                TokenCounts(input_tokens=int(i), cached_input_tokens=int(c), output_tokens=int(o)),
                prices,
            )
            for i, c, o in zip(inp, cached, out, strict=True)
        ]
        if prices
        else [0.0] * seen
    )
    import numpy as np

    def rng(values: Any) -> Quantity:
        v = np.asarray(values, dtype=float)
        sd = float(v.std(ddof=1)) if len(v) > 1 else float(v.mean())
        return _sum_range(n, float(v.mean()), sd, len(v), level)

    calls = col("model_calls") if rows["model_calls"].notna().any() else col("model_turns")
    return dict(
        source="history",
        basis=f"{seen} earlier attempts of {agent.model.id if agent.model else agent.harness} "
        f"under {agent.harness} in run(s) {', '.join(runs)}",
        model_calls=rng(calls),
        input_tokens=rng(inp),
        cached_input_tokens=rng(cached),
        output_tokens=rng(out),
        cost_usd=rng(costs),
        attempt_seconds=rng(col("wall_seconds")),
    )


def paper_backbone(model_id: str | None) -> str | None:
    """The paper's backbone a model id names, if any.

    >>> paper_backbone("openrouter/x-ai/grok-4.5"), paper_backbone("gpt-5.6-sol")
    ('Grok 4.5', 'GPT-5.6 Sol')
    >>> paper_backbone("scripted-model") is None
    True
    """
    if not model_id:
        return None
    key = re.sub(r"[^a-z0-9]", "", model_id.lower())
    for name in PAPER_BACKBONES:
        if re.sub(r"[^a-z0-9]", "", name.lower()) in key:
            return name
    return None


def _from_paper(agent: AgentSpec, n: int, level: float) -> Any:
    from scipy.special import ndtri

    name = paper_backbone(agent.model.id if agent.model else None)
    figs = [PAPER_BACKBONES[name]] if name else list(PAPER_BACKBONES.values())

    def spread(means: list[float], sds: list[float]) -> Quantity:
        each = [_sum_range(n, m, s, PAPER_TASKS, level) for m, s in zip(means, sds, strict=True)]
        mid = sorted(q.estimate for q in each)[len(each) // 2]
        return Quantity(estimate=mid, low=min(q.low for q in each), high=max(q.high for q in each))

    z90 = float(ndtri(0.9))
    tokens = spread(
        [f.tokens_mean for f in figs],
        [_lognormal_sd(f.tokens_mean, f.tokens_median, 0.0) for f in figs],
    )
    seconds = spread(
        [f.latency_mean_s for f in figs],
        [_lognormal_sd(f.latency_mean_s, f.latency_p90_s, z90) for f in figs],
    )
    calls = spread([f.actions + 1 for f in figs], [f.actions + 1 for f in figs])
    out_lo, out_mid, out_hi = PAPER_SPLIT["output"]
    c_lo, c_mid, c_hi = PAPER_SPLIT["cached_of_input"]
    output = Quantity(
        estimate=tokens.estimate * out_mid, low=tokens.low * out_lo, high=tokens.high * out_hi
    )
    inp = Quantity(
        estimate=tokens.estimate * (1 - out_mid),
        low=tokens.low * (1 - out_hi),
        high=tokens.high * (1 - out_lo),
    )
    cached = Quantity(estimate=inp.estimate * c_mid, low=inp.low * c_lo, high=inp.high * c_hi)
    m = agent.model
    if m is None:
        cost = ZERO
    else:

        def price(total: float, o: float, c: float) -> float:
            i = total * (1 - o)
            return (
                i * (1 - c) * m.price_input
                + i * c * m.price_cached_input
                + total * o * m.price_output
            ) / 1e6

        cands = [
            price(t, o, c)
            for t in (tokens.low, tokens.high)
            for o in (out_lo, out_hi)
            for c in (c_lo, c_hi)
        ]
        cost = Quantity(
            estimate=price(tokens.estimate, out_mid, c_mid), low=min(cands), high=max(cands)
        )
    split = (
        f"the paper does not split tokens: assumed {out_mid:.0%} output "
        f"({out_lo:.0%}-{out_hi:.0%}) and {c_mid:.0%} of input cached ({c_lo:.0%}-{c_hi:.0%})"
    )
    basis = (
        f"the paper's {name} (DataSpace-Agent, 410 tasks): {split}"
        if name
        else f"no earlier run of {m.id if m else agent.harness} and the paper has no such "
        f"backbone: the span of its six backbones; {split}"
    )
    return dict(
        source="paper" if name else "paper-span",
        basis=basis,
        model_calls=calls,
        input_tokens=inp,
        cached_input_tokens=cached,
        output_tokens=output,
        cost_usd=cost,
        attempt_seconds=seconds,
    )


def _overhead(history: Sequence[HistoryRun]) -> tuple[Quantity | None, str]:
    """Start-up and scheduling seconds per run, from the earlier runs' wall times."""
    seen = []
    for h in history:
        d = h.rows[~h.rows["status"].isin(_OUTCOME_EXCLUDED[1:])]
        total = float(d["wall_seconds"].astype(float).fillna(0.0).sum())
        if h.wall_seconds is None or not len(d) or total <= 0:
            continue
        slots = max(1, min(h.concurrency or 1, len(d)))
        seen.append(max(0.0, h.wall_seconds - total / slots))
    if not seen:
        return None, ""
    lo_f, hi_f, add = OVERHEAD_RANGE
    q = Quantity(
        estimate=sorted(seen)[len(seen) // 2], low=lo_f * min(seen), high=hi_f * max(seen) + add
    )
    return q, f"{len(seen)} earlier run(s) show {q.estimate:.0f} s of start-up and scheduling"


def estimate_run(
    spec: RunSpec,
    attempts: Mapping[str, int],
    *,
    history: Sequence[HistoryRun] | None = None,
    store: Any = None,
    level: float = DEFAULT_LEVEL,
    difference: float | None = None,
) -> RunEstimate:
    """The plan of ``spec`` for ``attempts`` (agent name -> attempts to run).

    Args:
        spec: the run spec (agents, prices, concurrency).
        attempts: agent name -> attempts to run.
        history: earlier runs; by default read from ``store`` (or the spec's store).
        difference: the difference in accuracy (a fraction) the sample sizes are for;
            default each pair's observed difference.
        store: the store holding the earlier runs (default the spec's).
        level: the level of every range.
    """
    if history is None:
        if store is None:
            from dataspace.store import open_store

            store = open_store(spec.store)
        history = load_history(store, exclude=spec.run_id)
    agents = []
    outcomes: dict[str, dict[str, list[bool]]] = {}
    for a in spec.agents:
        n = int(attempts.get(a.name, 0))
        rows, runs = _matching(history, a)
        if len(rows) >= 2:
            parts = _from_history(a, n, rows, runs, level)
            outcomes[a.name] = _task_outcomes(rows)
        elif a.model is not None:
            parts = _from_paper(a, n, level)
        else:
            parts = dict(
                source="none",
                basis=f"no model and no earlier run of {a.harness}: no calls, time unknown",
                model_calls=ZERO,
                input_tokens=ZERO,
                cached_input_tokens=ZERO,
                output_tokens=ZERO,
                cost_usd=ZERO,
                attempt_seconds=ZERO,
            )
        agents.append(
            AgentEstimate(
                agent=a.name,
                harness=a.harness,
                model=a.model.id if a.model else None,
                attempts=n,
                **parts,
            )
        )
    total_n = sum(a.attempts for a in agents)
    slots = max(1, min(spec.concurrency, total_n or 1))
    busy = sum((a.attempt_seconds for a in agents), ZERO)
    overhead, basis = (
        _overhead(history)
        if any(a.source == "history" for a in agents)
        else (
            None,
            "",
        )
    )
    if overhead is None:
        overhead = Quantity(estimate=0.0, low=0.0, high=PAPER_STARTUP_SECONDS)
        basis = (
            f"summed attempt time / {slots} slots; no earlier run shows the start-up, "
            f"so the high end allows {PAPER_STARTUP_SECONDS:.0f} s for it"
        )
    else:
        basis = f"summed attempt time / {slots} slots + start-up ({basis})"
    wall = Quantity(
        estimate=busy.estimate / slots + overhead.estimate,
        low=busy.low / slots + overhead.low,
        high=busy.high / slots + overhead.high,
    )
    if total_n == 0:
        wall = ZERO
    return RunEstimate(
        run_id=spec.run_id,
        level=level,
        concurrency=spec.concurrency,
        agents=tuple(agents),
        model_calls=sum((a.model_calls for a in agents), ZERO),
        input_tokens=sum((a.input_tokens for a in agents), ZERO),
        cached_input_tokens=sum((a.cached_input_tokens for a in agents), ZERO),
        output_tokens=sum((a.output_tokens for a in agents), ZERO),
        cost_usd=sum((a.cost_usd for a in agents), ZERO),
        wall_seconds=wall,
        overhead_basis=basis,
        sample_sizes=tuple(_sample_sizes(outcomes, level, difference)),
    )


def _task_outcomes(rows: Any) -> dict[str, list[bool]]:
    scored = rows[rows["passed"].notna()].sort_values(["run_id", "task_id", "attempt"])
    out: dict[str, list[bool]] = {}
    for task, passed in zip(scored["task_id"], scored["passed"], strict=True):
        out.setdefault(str(task), []).append(bool(passed))
    return out


def _sample_sizes(
    outcomes: Mapping[str, Mapping[str, Sequence[bool]]], level: float, difference: float | None
) -> list[dict[str, Any]]:
    from dataspace.stats import POWER, attempts_needed

    names = list(outcomes)
    out = []
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            need = attempts_needed(outcomes[x], outcomes[y], difference=difference, level=level)
            if need is not None:
                out.append({"a": x, "b": y, "power": POWER, **need})
    return out


def record_estimate(store: Any, run_id: str, estimate: RunEstimate) -> bool:
    """Write ``runs/<id>/plan.json`` unless the run recorded one already (its first start)."""
    key = f"runs/{run_id}/{PLAN_NAME}"
    if store.exists(key):
        return False
    store.put_bytes(key, json.dumps(estimate.to_json(), indent=1).encode())
    return True


__all__ = [
    "PAPER_BACKBONES",
    "PAPER_SPLIT",
    "PLAN_NAME",
    "AgentEstimate",
    "HistoryRun",
    "PaperFigures",
    "Quantity",
    "RunEstimate",
    "estimate_run",
    "load_history",
    "paper_backbone",
    "record_estimate",
]
