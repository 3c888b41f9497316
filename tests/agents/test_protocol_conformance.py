"""Conformance of the official protocol profile with the official baseline's own agent.

The fixtures in ``tests/fixtures/protocol/official/`` were recorded by running the official
DataSpace-Agent code over scripted trajectories against the scripted model server
(``scripts/record_official_fixtures.py``; the folder's README says how). Here the same
trajectories run through our agent, on the real local sandbox, and every request body must
equal the recorded one byte for byte; the only field that is normalized is each command's
``duration_seconds`` (a measured time). Switching off any single rule of the official
profile that the trajectories exercise makes the comparison fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from agents_helpers import KEY_ENV

from dataspace.agents import AgentContext, AgentLimits, get_agent
from dataspace.agents.protocol import OFFICIAL, ProtocolProfile
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import EventLog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "protocol" / "official"
CASES = sorted(p.name for p in (FIXTURES / "cases").iterdir() if p.is_dir())
_DURATION = re.compile(rb'(\\"duration_seconds\\": )[0-9.eE+-]+')


def normalized(raw: bytes) -> bytes:
    r"""A request body with measured command durations replaced by 0.

    >>> normalized(b'{"c": "{\\"duration_seconds\\": 1.25, \\"ok\\": true}"}')
    b'{"c": "{\\"duration_seconds\\": 0, \\"ok\\": true}"}'
    """
    return _DURATION.sub(rb"\g<1>0", raw)


@dataclasses.dataclass
class Replay:
    bodies: list[bytes]
    end_state: str
    model_turns: int
    tool_actions: int
    outputs: dict[str, bytes]
    scored: Any  # the PredictionSnapshot the attempt would store and score


def replay(case: str, backend: Any, tmp_path: Path, profile: ProtocolProfile) -> Replay:
    """Run one recorded trajectory through our agent with ``profile``."""
    from dataspace.sandbox import Limits, SandboxSpec

    folder = FIXTURES / "cases" / case
    task = json.loads((folder / "task.json").read_text(encoding="utf-8"))
    scripts = json.loads((folder / "script.json").read_text(encoding="utf-8"))
    limits = AgentLimits()  # the official vercel.yaml budgets: 60 turns, 50 actions, 1800 s
    sandbox = backend.create(
        SandboxSpec(
            workspace=FIXTURES / "workspace",
            limits=Limits(cpus=1, memory_bytes=1024**3, wall_seconds=3660.0),
        )
    )
    events = EventLog(tmp_path / f"events-{case}.jsonl")
    try:
        with ScriptedServer(scripts) as server:
            ctx = AgentContext(
                task=TaskInput(task_id=task["task_id"], question=task["question"]),
                sandbox=sandbox,
                limits=limits,
                events=events,
                deadline=time.monotonic() + limits.wall_seconds,
                settings={
                    "model": ModelSpec(id="scripted-model", base_url=server.url, key_env=KEY_ENV),
                    "protocol": profile,
                },
            )
            result = get_agent("dataspace-agent").run(ctx)
            bodies = [r.raw for r in server.requests]
        out = tmp_path / f"collected-{case}-{time.monotonic_ns()}"
        files = sandbox.collect(out)
        outputs = {str(p.relative_to(out)): p.read_bytes() for p in files}
    finally:
        events.close()
        sandbox.close()
    return Replay(
        bodies=bodies,
        end_state=result.end_state,
        model_turns=result.model_turns,
        tool_actions=result.tool_actions,
        outputs=outputs,
        scored=result.prediction,
    )


def recorded(case: str) -> tuple[list[bytes], dict[str, Any]]:
    folder = FIXTURES / "cases" / case
    bodies = [p.read_bytes() for p in sorted((folder / "requests").glob("*.json"))]
    return bodies, json.loads((folder / "result.json").read_text(encoding="utf-8"))


def mismatches(case: str, got: Replay) -> list[str]:
    """What differs from the official recording (empty when it conforms)."""
    bodies, result = recorded(case)
    problems = []
    if len(got.bodies) != len(bodies):
        problems.append(f"{len(got.bodies)} requests, the official agent sent {len(bodies)}")
    for i, (ours, theirs) in enumerate(zip(got.bodies, bodies, strict=False)):
        if normalized(ours) != normalized(theirs):
            a, b = normalized(ours), normalized(theirs)
            at = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
            problems.append(
                f"request {i} differs at byte {at}: ours {a[at - 40 : at + 60]!r} "
                f"official {b[at - 40 : at + 60]!r}"
            )
    for key, ours_value in (
        ("status", got.end_state),
        ("model_turns", got.model_turns),
        ("tool_actions", got.tool_actions),
    ):
        if result[key] != ours_value:
            problems.append(f"{key}: ours {ours_value!r}, official {result[key]!r}")
    # what each side scores: the official runner copies output/prediction.csv (a link's
    # target), ours the snapshot taken at submit time (a large file by size and digest)
    snap = got.scored if got.end_state == "submitted" else None
    ours_pred: bytes | None = snap.data if snap is not None else None
    ours_facts = (
        (len(snap.data), hashlib.sha256(snap.data).hexdigest())
        if snap is not None and snap.data is not None
        else (snap.size, snap.sha256)
        if snap is not None and getattr(snap, "size", None) is not None
        else (None, None)
    )
    theirs_facts = (result.get("prediction_bytes"), result.get("prediction_sha256"))
    theirs_pred = result["prediction_csv"]
    if (
        theirs_pred is not None
        and (ours_pred.decode() if ours_pred is not None else None) != theirs_pred
    ):
        problems.append(f"prediction.csv: ours {ours_pred!r}, official {theirs_pred!r}")
    if ours_facts != theirs_facts:
        problems.append(f"scored file (bytes, sha256): ours {ours_facts}, official {theirs_facts}")
    return problems


def test_fixtures_were_recorded_from_the_official_agent() -> None:
    """Guards the fixtures themselves: every case has its bodies and the recording facts."""
    facts = json.loads((FIXTURES / "recording.json").read_text())
    assert facts["official_commit"] and facts["openai"] and facts["pillow"]
    for case in CASES:
        bodies, result = recorded(case)
        assert len(bodies) == result["requests"] > 0
        first = json.loads(bodies[0])
        assert first["model"] == "scripted-model"
        assert first["messages"][0]["role"] == "system"


@pytest.mark.parametrize("case", CASES)
def test_official_profile_sends_the_official_request_bodies(
    case: str, local_backend: Any, tmp_path: Path
) -> None:
    """Guards byte-for-byte conformance of the official profile with the official agent."""
    got = replay(case, local_backend, tmp_path, OFFICIAL)
    assert mismatches(case, got) == []


# (case, rule): switching the rule off must break conformance on that case.
SWITCHED_OFF = [
    ("main", "remaining_time_notes"),
    ("main", "login_shell"),
    ("main", "normalize_carriage_returns"),
    ("main", "timeout_exit_code_137"),
    ("main", "timed_out_from_exit_code"),
    ("main", "strip_question"),
    ("retries", "sdk_default_retries"),
    ("oversize", "check_evaluator_limits"),
    ("symlink", "absolute_links_refused"),
]


@pytest.mark.parametrize(("case", "rule"), SWITCHED_OFF)
def test_each_official_rule_is_needed(
    case: str, rule: str, local_backend: Any, tmp_path: Path
) -> None:
    """Guards that the conformance test sees each rule: flipping one alone breaks it."""
    flipped = dataclasses.replace(OFFICIAL, **{rule: not getattr(OFFICIAL, rule)})
    got = replay(case, local_backend, tmp_path, flipped)
    assert mismatches(case, got) != []
