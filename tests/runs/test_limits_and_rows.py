"""One ``Limits`` record with the official defaults, and results rows as one typed record."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from dataspace.agents import AgentLimits
from dataspace.limits import DEFAULT_LIMITS, Limits
from dataspace.runs.controller import plan_attempts
from dataspace.runs.results import (
    COLUMNS,
    ResultRow,
    read_results,
    read_rows,
    row_identity,
    rows_to_parquet,
)
from dataspace.runs.spec import SandboxConfig, fingerprint, load_spec, parse_spec
from dataspace.sandbox import Limits as SandboxLimits
from dataspace.status import AttemptStatus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
OFFICIAL = Path(os.environ.get("DATASPACE_OFFICIAL_REPO", "/work/.mirror/HKUSTDial+DataSpace/repo"))

SPEC = """
run_id: fp
release: /nonexistent/release
store: /nonexistent/store
agents:
  - name: react
    harness: dataspace-agent
    model: {id: model-a, base_url: "http://127.0.0.1:9/v1", key_env: K_A,
            prices: {input: 1, output: 2}}
    settings: {max_output_tokens: 1024}
limits: {model_turns: 30, wall_seconds: 900}
sandbox: {backend: local, cpus: 2, memory: 4GiB, pids: 128, tmp: 1g, output: 512Mi}
attempts: 2
"""


def test_agents_sandboxes_and_specs_share_one_limits_record():
    """Guards against a second limits record (or a second copy of a default) coming back."""
    assert AgentLimits is Limits and SandboxLimits is Limits
    assert not {"cpus", "memory_bytes", "pids"} & set(SandboxConfig.__dataclass_fields__)
    spec = parse_spec(
        {
            "run_id": "r",
            "release": "/r",
            "store": "/s",
            "agents": [{"name": "g", "harness": "gold"}],
        },
        source="spec.yaml",
    )
    assert spec.limits == DEFAULT_LIMITS == Limits()
    behind = Limits(wall_seconds=100).for_sandbox()
    assert behind.wall_seconds == 260.0 and behind.cpus == Limits().cpus


def test_the_defaults_are_the_official_baselines():
    """Guards the faithful defaults: vercel.yaml's agent budgets and Docker sandbox.

    Read from a copy of the official repository when there is one (the values below are
    its values otherwise).
    """
    official = {
        "max_model_turns": 60,
        "max_tool_actions": 50,
        "max_wall_time_seconds": 1800,
        "max_command_seconds": 180,
        "cpus": 4,
        "memory": "16g",
        "pids_limit": 256,
        "tmpfs_size": "2g",
    }
    if OFFICIAL.exists():
        import yaml

        text = subprocess.run(
            ["git", "-C", str(OFFICIAL), "show", "HEAD:baseline/configs/vercel.yaml"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        doc = yaml.safe_load(text)
        official = {**doc["agent"], **doc["sandbox"]}
    d = Limits()
    assert (d.model_turns, d.tool_actions) == (
        official["max_model_turns"],
        official["max_tool_actions"],
    )
    assert (d.wall_seconds, d.command_timeout) == (
        official["max_wall_time_seconds"],
        official["max_command_seconds"],
    )
    assert d.cpus == official["cpus"] and d.pids == official["pids_limit"]
    # Docker reads 16g and 2g as GiB
    assert d.memory_bytes == int(official["memory"].rstrip("g")) * 1024**3
    assert d.tmp_bytes == int(official["tmpfs_size"].rstrip("g")) * 1024**3


def test_an_explicit_spec_keeps_its_fingerprint_and_attempt_keys(tmp_path):
    """Guards resumability: a spec that states its limits fingerprints as it always has.

    The values were computed by the code before limits became one record; a change here
    makes every existing run of such a spec un-resumable.
    """
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    spec = load_spec(path)
    assert spec.limits.memory_bytes == 4 * 1024**3 and spec.limits.tmp_bytes == 1024**3
    assert (
        fingerprint(spec.identity("release-fp"))
        == "0f27988b08949581db184cc5b0e593579823ae75b39bb6f25700714a22de68f8"
    )
    keys = [p.key for p in plan_attempts(spec, ["task_1", "task_2"])]
    assert keys == [
        "d12245ab1534c11233dd",
        "c1421060603d2bae84de",
        "f311605e4cb4273b2c17",
        "1acbcdaa1e8ddbc1eca8",
    ]
    # a changed resource is still named by its old path
    from dataspace.runs.spec import diff_identity

    other = dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, cpus=3.0))
    assert diff_identity(spec.identity("x"), other.identity("x")) == ["sandbox.cpus"]


def _identity(**kw):
    base = dict(
        run_id="r1",
        key="k1",
        agent="a1",
        harness="dataspace-agent",
        protocol="official",
        model="m-1",
        task_id="task_1",
        attempt=1,
        task_metadata={"domain": "finance"},
    )
    return row_identity(**{**base, **kw})


def _finished():
    usage = {
        "input_tokens": 10,
        "cached_input_tokens": 2,
        "output_tokens": 5,
        "reasoning_tokens": 1,
        "cost_usd": 0.5,
        "model_calls": 3,
        "model_seconds": 1.5,
        "retries": 1,
        "retry_seconds": 0.25,
        "queue_seconds": 0.0,
    }
    return ResultRow.finished(
        identity=_identity(),
        end_state="submitted",
        verdict={"task_id": "task_1", "passed": True, "error_code": None},
        error=None,
        infra_retries=1,
        usage=usage,
        model_turns=3,
        tool_actions=2,
        wall_seconds=9.0,
        working_seconds=8.0,
        phases={"queue": 0.1, "agent": 7.0},
        sandbox_enforcement="cgroup",
    )


def test_rows_are_typed_and_round_trip_through_parquet_and_json():
    """Guards the one row record: every way a row is made, written and read back."""
    rows = [
        _finished(),
        ResultRow.skipped(identity=_identity(key="k2", task_id="task_2"), reason="no gold"),
        ResultRow.unfinished(
            identity=_identity(key="k3", task_id="task_3"),
            scored=True,
            failures=[{"code": "model_endpoint", "error": "refused", "try_index": 0}],
            reason="not scheduled",
        ),
        ResultRow.unfinished(
            identity=_identity(key="k4", task_id="task_4"), scored=False, failures=[], reason="x"
        ),
    ]
    statuses = [r.status for r in rows]
    assert statuses == [
        AttemptStatus.SUBMITTED,
        AttemptStatus.SKIPPED,
        AttemptStatus.INFRASTRUCTURE_ERROR,
        AttemptStatus.NOT_SCHEDULED,
    ]
    assert rows[0].verdict == {"task_id": "task_1", "passed": True, "error_code": None}
    assert rows[0].passed is True and rows[0].scored and rows[0].input_tokens == 10
    assert rows[2].passed is False and rows[2].error_code == "model_endpoint"
    assert rows[3].passed is None and rows[1].scored is False
    assert rows[0]["status"] == "submitted" and rows[0].get("phase_agent_seconds") == 7.0
    assert list(rows[0]) == [name for name, _ in COLUMNS]
    back = read_rows(rows_to_parquet(rows))
    assert back == rows
    for r in rows:  # result.json form
        assert ResultRow.from_row(json.loads(json.dumps(r.to_dict()))) == r
        assert type(r.to_dict()["status"]) is str
    assert rows[0].priced(2.0).cost_usd == 2.0 and rows[0].cost_usd == 0.5


def test_an_old_results_parquet_reads_as_rows_and_as_a_frame():
    """Guards old runs: a results.parquet written before rows were records still reads.

    The fixture was written by the dict-building code (schema 1.0, rows without a protocol
    for an unfinished or skipped attempt).
    """
    import pyarrow.parquet as pq

    data = (FIXTURES / "results-1.0.parquet").read_bytes()
    old = pq.read_schema(io.BytesIO(data)).names
    # schema 1.1 only appended columns: a 1.0 file is the first columns
    assert old == [name for name, _ in COLUMNS][: len(old)] and len(old) < len(COLUMNS)
    rows = read_rows(data)
    assert [r.status for r in rows] == [
        AttemptStatus.SUBMITTED,
        AttemptStatus.INFRASTRUCTURE_ERROR,
        AttemptStatus.SKIPPED,
    ]
    assert rows[0].verdict == {"task_id": "task_1", "passed": True, "error_code": None}
    assert rows[0].task_metadata["languages"] == {"question": "zh"}
    assert rows[1].protocol is None and rows[1].input_tokens is None and rows[1].passed is False
    assert not any(r.endpoint_unreachable for r in rows)  # a column 1.0 had not
    assert rows[0].try_id is None and rows[0].earlier_tries_cost_usd is None
    assert read_rows(rows_to_parquet(rows)) == rows  # rewritten unchanged
    df = read_results(data)
    assert list(df["status"]) == ["submitted", "infrastructure_error", "skipped"]


def test_a_row_with_an_unknown_status_is_refused():
    """Guards the status list: a row never carries a status outside ``AttemptStatus``."""
    with pytest.raises(ValueError):
        ResultRow.from_row({**_finished().to_dict(), "status": "exploded"})
    with pytest.raises(ValueError):
        ResultRow.finished(**{**_finished_kwargs(), "end_state": "exploded"})


def _finished_kwargs():
    row = _finished()
    return dict(
        identity=_identity(),
        end_state="submitted",
        verdict=row.verdict,
        error=None,
        infra_retries=0,
        usage={
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_tokens": 0,
            "cost_usd": 0.0,
            "model_calls": 0,
            "model_seconds": 0.0,
            "retries": 0,
            "retry_seconds": 0.0,
        },
        model_turns=0,
        tool_actions=0,
        wall_seconds=1.0,
        working_seconds=1.0,
        phases={},
        sandbox_enforcement="",
    )


def test_the_demo_keeps_its_fingerprint():
    """Guards ``dataspace demo`` resuming an existing demo folder after limits became one record.

    The value was computed by the code before (a 1-CPU, 1 GiB sandbox with a 512 MiB /tmp).
    """
    from dataspace.demo import DEMO_LIMITS
    from dataspace.runs.spec import AgentSpec, RunSpec

    spec = RunSpec(
        run_id="demo",
        release="/x",
        store="file:///y",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=DEMO_LIMITS,
        sandbox=SandboxConfig(backend="local"),
    )
    assert (
        fingerprint(spec.identity("f"))
        == "1c49da064dbb4c56529255c03f64d631f53d16dcabef8ed5d1e49b87c0364c94"
    )
