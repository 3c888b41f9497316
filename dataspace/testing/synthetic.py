"""A synthetic run for tests, examples and benchmarks of reports (no agent runs).

``write_synthetic_run`` writes what a real run leaves in a store (``results.parquet``,
``summary.json`` and, per attempt, ``events.jsonl``, ``run.json`` and ``result.json``)
with seeded, plausible values: agents of different skill and cost, task metadata with
every annotation the breakdowns read, model calls with usage and latency, tool calls with
output, an image, an occasional error or infrastructure failure. It runs no agent.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


def sample_png(width: int = 96, height: int = 64) -> bytes:
    r"""A small real PNG (a colour gradient with a dark band), made without any library.

    >>> sample_png(4, 2)[:8]
    b'\x89PNG\r\n\x1a\n'
    """
    raw = bytearray()
    for y in range(height):
        raw.append(0)  # filter type: none
        for x in range(width):
            band = height // 3 <= y < height // 3 + max(1, height // 8)
            raw += bytes(
                (20, 20, 20)
                if band
                else (40 + 200 * x // max(1, width - 1), 90 + 120 * y // max(1, height - 1), 170)
            )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    head = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", head)
        + chunk(b"IDAT", zlib.compress(bytes(raw)))
        + chunk(b"IEND", b"")
    )


SAMPLE_PNG_URL = "data:image/png;base64," + base64.b64encode(sample_png()).decode()


@dataclass(frozen=True, kw_only=True)
class SyntheticAgent:
    """One synthetic agent: how often it succeeds and what it spends."""

    name: str
    harness: str = "dataspace-agent"
    model: str | None = "example/model"
    skill: float = 0.5
    tokens: float = 150_000.0
    price_per_mtok: float = 1.0


def default_agents(n: int) -> list[SyntheticAgent]:
    """``n`` agents: one harness over several models, one model under several harnesses.

    >>> [a.name for a in default_agents(3)]
    ['model-1', 'model-2', 'model-1-smolagents']
    """
    harnesses = ("smolagents", "codex", "claude-code", "grok-build")
    out = []
    models = n - min(len(harnesses), n // 3)
    for i in range(models):
        out.append(
            SyntheticAgent(
                name=f"model-{i + 1}",
                model=f"example/model-{i + 1}",
                skill=0.35 + 0.3 * ((i * 37) % 11) / 10,
                tokens=60_000 + 50_000 * ((i * 53) % 9),
                price_per_mtok=0.1 + ((i * 29) % 7) * 0.35,
            )
        )
    for j, h in enumerate(harnesses[: n - models]):
        out.append(
            SyntheticAgent(
                name=f"model-1-{h}",
                harness=h,
                model="example/model-1",
                skill=0.3 + 0.08 * j,
                tokens=90_000 + 40_000 * j,
                price_per_mtok=out[0].price_per_mtok,
            )
        )
    return out


def task_metadata(rng: random.Random, i: int) -> dict[str, Any]:
    """Plausible builder metadata for task ``i``."""
    mods = ["csv", "json", "sqlite", "markdown", "pdf", "video"]
    required = rng.sample(mods, k=rng.choice((1, 1, 1, 2, 2, 3)))
    ops = [
        op
        for op in (
            "join",
            "aggregation",
            "group_by",
            "having",
            "order_by",
            "limit",
            "subquery",
            "date_function",
            "distinct",
        )
        if rng.random() < 0.3
    ]
    q = rng.choice(("en", "zh"))
    w = q if rng.random() < 0.35 else ("zh" if q == "en" else "en")
    return {
        "domain": rng.choice(("finance", "clinical")),
        "languages": {"question": q, "workspace": w},
        "modalities_present": sorted(set(required) | set(rng.sample(mods, k=2))),
        "modalities_required": required,
        "operations": ops,
        "answer_rows": rng.choice((1, 1, 2, 5, 40)),
        "answer_columns": rng.choice((1, 2, 3)),
        "order_sensitive": rng.random() < 0.22,
        "workspace_bytes": int(rng.lognormvariate(17, 1.2)),
        "workspace_files": rng.randint(3, 60),
    }


QUESTION = "Which cities have more than 200000 inhabitants? Return city and population."
SYSTEM_PROMPT = (
    "You are a data agent. Work in /workspace, write /output/prediction.csv and submit it."
)
FAILURE_CODES = (
    "relation_mismatch",
    "relation_mismatch",
    "row_count_mismatch",
    "type_normalization_failed",
    "column_count_mismatch",
)


def _split(total: float, parts: int, *, whole: bool = True) -> list[float]:
    """``total`` in ``parts`` shares that add up to it exactly."""
    if parts <= 0:
        return []
    if whole:
        each = int(total) // parts
        return [float(each)] * (parts - 1) + [float(int(total) - each * (parts - 1))]
    share = round(total / parts, 9)
    return [share] * (parts - 1) + [round(total - share * (parts - 1), 9)]


def _events(rng: random.Random, row: Mapping[str, Any], task: str) -> list[dict[str, Any]]:
    """A trace in the schema of ``dataspace.traces`` whose usage adds up to the row's."""
    from dataspace.traces import TRACE_SCHEMA

    turns = int(row["model_turns"])
    t = 0.0
    ev: list[dict[str, Any]] = [
        {
            "t": 0.0,
            "type": "attempt_start",
            "schema": TRACE_SCHEMA,
            "task": task,
            "agent": row["agent"],
            "attempt": row["attempt"],
            "question": QUESTION,
        },
        {
            "t": 0.01,
            "type": "agent_start",
            "harness": row["harness"],
            "model": row["model"],
            "system_prompt": SYSTEM_PROMPT,
            "user_prompt": f"Task {task}: {QUESTION}",
        },
    ]
    shares = {
        k: _split(float(row[k]), turns, whole=k != "cost_usd")
        for k in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")
    }
    shares["cost_usd"] = _split(float(row["cost_usd"]), turns, whole=False)
    for k in range(turns):
        latency = round(rng.uniform(0.5, 4.0), 3)
        t += latency
        if k == 3:
            ev.append(
                {
                    "t": round(t - latency, 3),
                    "type": "model_retry",
                    "retry": 1,
                    "error": "HTTP 429: rate limited",
                    "delay_seconds": 0.5,
                    "request_seconds": 0.1,
                }
            )
        last = k == turns - 1
        cmd = "ls -la /workspace" if k == 0 else f"python3 /output/step_{k}.py"
        name = "submit_answer" if last and row["status"] == "submitted" else "bash"
        args = {"path": "/output/prediction.csv"} if name == "submit_answer" else {"command": cmd}
        ev.append(
            {
                "t": round(t, 3),
                "type": "model_call",
                "model": row["model"],
                **{f: int(v[k]) if f != "cost_usd" else v[k] for f, v in shares.items()},
                "latency_seconds": latency,
                "retries": 1 if k == 3 else 0,
            }
        )
        ev.append(
            {
                "t": round(t, 3),
                "type": "model_turn",
                "turn": k + 1,
                "content": f"Step {k + 1}: inspecting the data.",
                "tool_calls": [{"id": f"call_{k}", "name": name, "arguments": json.dumps(args)}],
                "finish_reason": "tool_calls",
            }
        )
        dur = round(rng.uniform(0.05, 2.0), 3)
        t += dur
        if name == "submit_answer":
            ev.append(
                {
                    "t": round(t, 3),
                    "type": "tool_result",
                    "action": k + 1,
                    "tool_call_id": f"call_{k}",
                    "tool": name,
                    "arguments": json.dumps(args),
                    "result": {"ok": True, "accepted": True},
                }
            )
            ev.append({"t": round(t, 3), "type": "submit", "path": "/output/prediction.csv"})
            break
        out = (
            "city,population\nLyon,522000\nGraz,291000\n"
            if k
            else "total 12\n-rw-r--r-- 1 agent agent 4096 cities.csv\n"
        )
        ev.append(
            {
                "t": round(t, 3),
                "type": "tool_result",
                "action": k + 1,
                "tool_call_id": f"call_{k}",
                "tool": "bash",
                "arguments": json.dumps(args),
                "result": {
                    "ok": True,
                    "exit_code": 0,
                    "stdout": out,
                    "stderr": "",
                    "timed_out": False,
                    "duration_seconds": dur,
                    "stdout_truncated": False,
                    "stderr_truncated": False,
                },
            }
        )
        if k == 1:
            ev.append(
                {
                    "t": round(t, 3),
                    "type": "image",
                    "tool_call_id": f"call_{k}",
                    "path": "/output/page_1.png",
                    "data_url": SAMPLE_PNG_URL,
                }
            )
        if k == 2 and row["attempt"] == 1:
            ev.append({"t": round(t, 3), "type": "image", "path": "/output/frame_2.png"})
    if row["status"] == "runtime_error":
        ev.append({"t": round(t, 3), "type": "error", "message": "harness raised ValueError"})
    ev.append({"t": round(t, 3), "type": "harness_note", "detail": {"kept": True}})
    return ev


def _verdict(passed: bool, code: str | None) -> dict[str, Any]:
    gold = {"header": ["city", "population"], "rows": [["Lyon", "522000"]], "row_count": 2}
    pred = {"header": ["city", "population"], "rows": [["Lyon", "522000"]], "row_count": 1}
    return {
        "passed": passed,
        "error_code": code,
        "explanation": {
            "error_code": code,
            "summary": ["The prediction equals the gold relation."]
            if passed
            else ["1 gold row(s) have no equal prediction row."],
            "near_misses": [],
            "gold_preview": gold,
            "prediction_preview": gold if passed else pred,
        },
    }


def synthetic_rows(
    run_id: str,
    *,
    agents: Sequence[SyntheticAgent],
    tasks: int,
    attempts: int = 1,
    seed: int = 0,
    metadata: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Results rows for every (agent, task, attempt), and the task metadata used."""
    rng = random.Random(seed)
    meta = {f"task_{i}": task_metadata(rng, i) for i in range(1, tasks + 1)}
    difficulty = {t: rng.random() for t in meta}
    rows = []
    for a in agents:
        for task in meta:
            for n in range(1, attempts + 1):
                rows.append(
                    _row(rng, run_id, a, task, n, difficulty[task], meta[task] if metadata else {})
                )
    return rows, meta


def _row(
    rng: random.Random,
    run_id: str,
    a: SyntheticAgent,
    task: str,
    n: int,
    difficulty: float,
    md: Mapping[str, Any],
) -> dict[str, Any]:
    roll = rng.random()
    status = "submitted"
    if roll < 0.01:
        status = "infrastructure_error"
    elif roll < 0.04:
        status = "wall_time_exhausted"
    elif roll < 0.06:
        status = "runtime_error"
    passed = status == "submitted" and rng.random() < a.skill * (1.4 - difficulty)
    tokens = int(a.tokens * rng.lognormvariate(0, 0.7) * (1.5 if not passed else 1.0))
    inp = int(tokens * 0.93)
    out = tokens - inp
    turns = max(2, min(60, int(rng.gauss(10 + 15 * difficulty, 4))))
    wall = max(2.0, rng.lognormvariate(4, 0.6))
    base = {
        "run_id": run_id,
        "key": f"{a.name}-{task}-{n}",
        "agent": a.name,
        "harness": a.harness,
        "model": a.model,
        "task_id": task,
        "attempt": n,
        "task_metadata": dict(md),
    }
    if status == "infrastructure_error":
        return {
            **base,
            "status": status,
            "passed": False,
            "error": "sandbox died",
            "infra_retries": 2,
            "error_code": None,
            "verdict": None,
        }
    phases = {
        "queue": rng.uniform(0, 5),
        "staging": rng.uniform(0.01, 0.3),
        "sandbox_start": rng.uniform(0.1, 1.5),
        "agent": wall * 0.95,
        "collect": rng.uniform(0.01, 0.2),
        "evaluation": rng.uniform(0.005, 0.05),
        "upload": rng.uniform(0.01, 0.3),
    }
    code = None
    if not passed:
        code = rng.choice(FAILURE_CODES) if status == "submitted" else "missing_prediction"
    return {
        **base,
        "status": status,
        "passed": passed,
        "error_code": code,
        "error": "harness raised ValueError" if status == "runtime_error" else None,
        "infra_retries": 1 if rng.random() < 0.02 else 0,
        "input_tokens": inp,
        "cached_input_tokens": int(inp * 0.6),
        "output_tokens": out,
        "reasoning_tokens": int(out * 0.4),
        "cost_usd": round(tokens * a.price_per_mtok / 1e6, 6),
        "model_turns": turns,
        "tool_actions": max(1, turns - 1),
        "wall_seconds": wall,
        "working_seconds": wall * 0.9,
        **{f"phase_{k}_seconds": v for k, v in phases.items()},
        "sandbox_enforcement": "cgroup",
        "verdict": _verdict(passed, code),
    }


def _join(base: str, name: str) -> str:
    return f"{base}/{name}" if base else name


def write_synthetic_run(
    store: Any,
    run_id: str,
    *,
    agents: Sequence[SyntheticAgent],
    tasks: int,
    attempts: int = 1,
    seed: int = 0,
    events: bool = True,
    metadata: bool = True,
    folder: str | None = None,
) -> list[dict[str, Any]]:
    """Write a whole synthetic run into ``store`` and return its rows.

    Args:
        store: the store.
        run_id: the run id.
        agents: the agents (see ``default_agents``).
        tasks: the number of tasks (``task_1`` ...).
        attempts: attempts per task.
        seed: the random seed.
        events: also write each attempt's files (trace, run.json, result.json).
        metadata: attach task metadata to the rows (off: like the official release).
        folder: the run folder's key prefix; ``runs/<run_id>`` by default, ``""`` for the
            store's root.
    """
    from dataspace.runs.results import rows_to_parquet

    rows, _ = synthetic_rows(
        run_id, agents=agents, tasks=tasks, attempts=attempts, seed=seed, metadata=metadata
    )
    base = f"runs/{run_id}" if folder is None else folder.strip("/")
    rng = random.Random(seed + 1)
    if events:
        for row in rows:
            if row["status"] == "infrastructure_error":
                continue
            adir = _join(base, f"attempts/{row['agent']}/{row['task_id']}/{row['attempt']}")
            evs = _events(rng, row, row["task_id"])
            store.put_bytes(
                f"{adir}/events.jsonl",
                "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in evs).encode(),
            )
            run_json = {
                "schema_version": "1.0",
                "run_id": run_id,
                "agent": row["agent"],
                "task_id": row["task_id"],
                "attempt": row["attempt"],
                "end_state": row["status"],
                "model_turns": row["model_turns"],
                "tool_actions": row["tool_actions"],
            }
            store.put_bytes(f"{adir}/run.json", json.dumps(run_json).encode())
            if row["attempt"] == 1 and row["model_turns"] > 3:
                store.put_bytes(f"{adir}/output/frame_2.png", sample_png(160, 90))
            store.put_bytes(f"{adir}/result.json", json.dumps(row, default=str).encode())
    store.put_bytes(_join(base, "results.parquet"), rows_to_parquet(rows))
    agents_summary = {}
    for a in agents:
        mine = [r for r in rows if r["agent"] == a.name]
        agents_summary[a.name] = {
            "harness": a.harness,
            "model": a.model,
            "attempts": len(mine),
            "passed": sum(1 for r in mine if r["passed"]),
        }
    summary = {
        "schema_version": "1.0",
        "run_id": run_id,
        "attempts": len(rows),
        "agents": agents_summary,
        "wall_seconds": 1234.5,
        "stopped_for_spend_limit": False,
        "spend_limit_usd": None,
    }
    store.put_bytes(_join(base, "summary.json"), json.dumps(summary).encode())
    return rows


__all__ = [
    "SAMPLE_PNG_URL",
    "SyntheticAgent",
    "default_agents",
    "synthetic_rows",
    "task_metadata",
    "write_synthetic_run",
]
