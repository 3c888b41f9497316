"""What a user hits first, through the real ``dataspace`` command against the scripted server.

Each test is one case a user met: the message on screen, the exit code, and the time it
took where it matters (a dead endpoint within 30 s, a bad backend before any Ray start-up).
"""

from __future__ import annotations

import json
import shutil
import socket
import time

import pytest
import yaml
from cli_helpers import (
    KEY_ENV,
    SECRET,
    cli_env,
    dataspace,
    model_agent,
    short_ray_dir,
    write_spec,
)

from dataspace.runs.results import read_results
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]


@pytest.fixture
def release(tmp_path):
    return write_tiny_release(tmp_path / "release", tasks=2)


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _sessions(ray_dir):
    return list(ray_dir.rglob("session_*"))


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _recorded(tmp_path) -> bool:
    return (tmp_path / "store/runs/r1/spec.json").exists()


# ---- preflight: nothing recorded, nothing started -------------------------------------


def test_unset_key_is_named_before_anything_runs(tmp_path, release, ray_dir):
    with ScriptedServer({"*": []}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [model_agent(srv.url)])
        t0 = time.monotonic()
        p = dataspace("run", str(spec), env=cli_env(ray_dir))
        elapsed = time.monotonic() - t0
        assert not srv.requests
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"agents[0].model.key_env: environment variable {KEY_ENV} is not set" in p.stderr
    assert "infrastructure failure" not in p.stdout + p.stderr
    assert not _recorded(tmp_path) and not _sessions(ray_dir)
    assert elapsed < 30


def test_wrong_model_id_is_refused_by_preflight_with_the_endpoint_words(tmp_path, release, ray_dir):
    with ScriptedServer({"*": []}, models=["model-alpha"]) as srv:
        agent = model_agent(srv.url, model_id="model-alphx")
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [agent])
        p = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "agents[0].model.base_url/id" in p.stderr
    assert "HTTP 404" in p.stderr and "model 'model-alphx' not found" in p.stderr
    assert not _recorded(tmp_path) and not _sessions(ray_dir)


def test_dead_endpoint_is_reported_within_30_seconds_with_default_timeouts(
    tmp_path, release, ray_dir
):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    agent = model_agent(url)
    agent["settings"] = {}  # the default retry policy
    spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [agent])
    t0 = time.monotonic()
    p = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
    elapsed = time.monotonic() - t0
    assert p.returncode == 2, p.stdout + p.stderr
    assert "cannot be reached" in p.stderr and url in p.stderr
    assert elapsed < 30, elapsed
    assert not _recorded(tmp_path) and not _sessions(ray_dir)


def test_bad_backend_fails_before_ray_and_the_fixed_spec_then_runs(tmp_path, release, ray_dir):
    store = tmp_path / "store"
    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        store,
        [{"name": "gold", "harness": "gold"}],
        sandbox={"backend": "lokal", "memory": "1GiB"},
    )
    p = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "sandbox.backend 'lokal' is unknown; did you mean 'local'?" in p.stderr
    assert not _recorded(tmp_path) and not _sessions(ray_dir)

    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        store,
        [{"name": "gold", "harness": "gold"}],
        sandbox={"backend": "local", "memory": "1GiB"},
    )
    p = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "accuracy 100.00% (2/2)" in p.stdout

    # the same typo on the recorded run is named as a typo, not as a changed spec
    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        store,
        [{"name": "gold", "harness": "gold"}],
        sandbox={"backend": "lokal", "memory": "1GiB"},
    )
    p = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert p.returncode == 2 and "did you mean 'local'?" in p.stderr
    assert "changed:" not in p.stderr


def test_unreachable_ray_address_is_one_line_within_seconds(tmp_path, release, ray_dir):
    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        tmp_path / "store",
        [{"name": "gold", "harness": "gold"}],
        ray={"address": f"127.0.0.1:{_closed_port()}"},
    )
    t0 = time.monotonic()
    p = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "ray.address" in p.stderr and "nothing answers" in p.stderr
    assert time.monotonic() - t0 < 60
    assert "core_worker" not in p.stderr and "gcs" not in p.stderr.lower()
    assert not _recorded(tmp_path)


# ---- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"ray": {"adress": "127.0.0.1:6379"}}, "ray.adress: unknown key; did you mean 'address'?"),
        ({"sandbox": {"image": 5}}, "sandbox.image: must be a non-empty string, got 5"),
        ({"concurency": 2}, "concurency: unknown key; did you mean 'concurrency'?"),
        (
            {
                "agents": [
                    {
                        "name": "m",
                        "harness": "dataspace-agent",
                        "model": {"id": "FILL_IN", "key_env": KEY_ENV},
                    }
                ]
            },
            "agents[0].model.id: 'FILL_IN' is a placeholder",
        ),
        (
            {
                "agents": [
                    {
                        "name": "m",
                        "harness": "dataspace-agent",
                        "model": {"id": "m", "base_url": "https://FILL_IN/v1"},
                    }
                ]
            },
            "agents[0].model.base_url: 'https://FILL_IN/v1' is a placeholder",
        ),
        (
            {
                "agents": [
                    {
                        "name": "m",
                        "harness": "dataspace-agent",
                        "model": {"id": "m", "prices": {"input": "1.5"}},
                    }
                ]
            },
            "agents[0].model.prices.input: must be a non-negative number, got '1.5'",
        ),
        (
            {
                "agents": [
                    {
                        "name": "m",
                        "harness": "dataspace-agent",
                        "model": {"id": "m", "key_env": "sk-abc123"},
                    }
                ]
            },
            "agents[0].model.key_env: must be the NAME of the environment variable",
        ),
    ],
)
def test_bad_specs_are_refused_with_the_key_and_the_fix(tmp_path, release, change, needle):
    obj = {
        "run_id": "r1",
        "release": str(release),
        "store": str(tmp_path / "store"),
        "agents": [{"name": "gold", "harness": "gold"}],
        **change,
    }
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(obj))
    p = dataspace("run", str(spec), env=cli_env())
    assert p.returncode == 2, p.stdout + p.stderr
    assert needle in p.stderr
    assert not _recorded(tmp_path)


def test_docker_style_memory_reads_as_gibibytes(tmp_path, release):
    from dataspace.runs.spec import load_spec

    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        tmp_path / "store",
        [{"name": "gold", "harness": "gold"}],
        sandbox={"memory": "16g", "tmp": "2g"},
    )
    s = load_spec(spec)
    assert s.limits.memory_bytes == 16 * 1024**3 and s.limits.tmp_bytes == 2 * 1024**3


# ---- during and after a run ---------------------------------------------------------------


def _failing_scripts(times: int = 1000):
    # every task's first turn fails with 500s; the preflight call (no task id) succeeds
    fault = {"faults": [{"status": 500, "times": times}], "content": "x"}
    return {"*": [], "task_1": [fault], "task_2": [fault]}


@pytest.mark.ray
def test_endpoint_failing_mid_run_stops_the_agent_once_and_resumes(tmp_path, release, ray_dir):
    store = tmp_path / "store"
    with ScriptedServer(_failing_scripts()) as srv:
        spec = write_spec(
            tmp_path / "s.yaml",
            release,
            store,
            [model_agent(srv.url)],
            fail_fast_after=2,
            attempts=2,
            # under the official profile exhausted retries end the attempt runtime_error, as
            # the official agent does; the extended profile treats them as infrastructure
            protocol="extended",
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        p = dataspace("run", str(spec), env=env)
        out = p.stdout + p.stderr
        assert p.returncode == 1, out
        assert "react: infrastructure failure (model_endpoint)" in out
        assert "HTTP 500" in out
        assert out.count("react: stopped after 2 infrastructure failures in a row") == 1, out
        assert "infrastructure failures by cause:" in p.stdout
        summary = json.loads((store / "runs/r1/summary.json").read_text())
        assert summary["agents"]["react"]["stopped"].startswith("model_endpoint")
        assert summary["infra_by_cause"][0]["code"] == "model_endpoint"
        # the endpoint is fixed: the rerun resumes what was left
        srv.set_script("task_1", [])
        srv.set_script("task_2", [])
        again = dataspace("run", str(spec), env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert len(df) == 4 and not df.duplicated(["agent", "task_id", "attempt"]).any()
    assert set(df["status"]) == {"model_turns_exhausted"}


@pytest.mark.ray
def test_spend_limit_ends_cleanly_and_both_commands_work_on_the_run(tmp_path, release, ray_dir):
    store = tmp_path / "store"
    with ScriptedServer({"*": []}) as srv:
        spec = write_spec(
            tmp_path / "s.yaml", release, store, [model_agent(srv.url)], spend_limit_usd=1e-9
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        p = dataspace("run", str(spec), env=env)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "Traceback" not in p.stdout + p.stderr
        assert "spend limit" in p.stdout + p.stderr
        summary = json.loads((store / "runs/r1/summary.json").read_text())
        assert summary["stopped_for_spend_limit"] is True
        again = dataspace("run", str(spec), env=env)
        assert again.returncode == 1 and "Traceback" not in again.stdout + again.stderr
        assert "0 run now" in again.stdout
    for extra in ([], ["--traces", "none"]):
        rep = dataspace("report", str(store / "runs/r1"), *extra, env=cli_env())
        assert rep.returncode == 0, rep.stdout + rep.stderr
        assert "Traceback" not in rep.stderr
        assert "spend limit" in rep.stdout


@pytest.mark.ray
def test_prices_and_pace_are_not_identity_but_the_model_is(tmp_path, release, ray_dir):
    store = tmp_path / "store"
    with ScriptedServer({"*": []}) as srv:
        agents = [model_agent(srv.url, name="a"), model_agent(srv.url, name="b")]
        spec = write_spec(tmp_path / "s.yaml", release, store, agents)
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        first = dataspace("run", str(spec), env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        cost_before = json.loads((store / "runs/r1/summary.json").read_text())["agents"]["a"][
            "cost_usd"
        ]
        agents[0]["model"]["prices"] = {"input": 4.0, "cached_input": 1.0, "output": 16.0}
        agents[0]["model"]["max_concurrency"] = 2
        agents[0]["settings"]["retry"] = {"initial_backoff": 0.02}
        spec = write_spec(tmp_path / "s.yaml", release, store, agents, concurrency=2)
        again = dataspace("run", str(spec), env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "0 run now, 4 already finished" in again.stdout, again.stdout
        assert "prices in/cached/out $4/$1/$16 per M tokens" in again.stdout
        summary = json.loads((store / "runs/r1/summary.json").read_text())
        assert summary["agents"]["a"]["cost_usd"] == pytest.approx(2 * cost_before)
        assert summary["agents"]["a"]["prices"]["output"] == 16.0

        agents[1]["model"]["id"] = "other-model"
        agents[0]["model"]["base_url"] = srv.url + "/"
        spec = write_spec(tmp_path / "s.yaml", release, store, agents)
        refused = dataspace("run", str(spec), env=env)
    assert refused.returncode == 2
    assert "changed: agents[0].model.base_url, agents[1].model.id" in refused.stderr


# ---- the commands around runs -------------------------------------------------------------


def test_version_help_and_harnesses():
    p = dataspace("--version", env=cli_env())
    assert p.returncode == 0 and p.stdout.startswith("dataspace ")
    h = dataspace("--help", env=cli_env())
    assert "exit codes:" in h.stdout and "2  bad input" in h.stdout
    r = dataspace("run", "--help", env=cli_env())
    assert "1  some attempt ended as an infrastructure error" in r.stdout
    hs = dataspace("harnesses", env=cli_env())
    assert hs.returncode == 0
    lines = {ln.split()[0]: ln for ln in hs.stdout.splitlines()}
    assert {"gold", "dataspace-agent", "smolagents"} <= set(lines)
    assert "installed" in lines["dataspace-agent"]


def test_doctor_on_a_spec_shows_the_metered_call(tmp_path, release):
    with ScriptedServer({"*": []}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [model_agent(srv.url)])
        p = dataspace("doctor", str(spec), env=cli_env(**{KEY_ENV: SECRET}))
        assert len(srv.requests) == 1 and srv.requests[0].body["max_tokens"] == 16
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "ok   agents[0].model.base_url/id:" in p.stdout and "accepted 'scripted-model'" in p.stdout
    )
    assert "tokens, $0.0" in p.stdout and "metered calls cost $" in p.stdout
    assert "ok   store:" in p.stdout and "ok   release:" in p.stdout
    # the plan follows the checks: scripted-model is no paper backbone, so the paper's span
    assert "plan for run r1 (ranges at 95%, concurrency 1):" in p.stdout
    assert "react (dataspace-agent, scripted-model): 2 attempts" in p.stdout
    assert "from paper-span: no earlier run of scripted-model" in p.stdout
    assert not _recorded(tmp_path)


def test_doctor_without_a_spec_checks_this_machine():
    p = dataspace("doctor", env=cli_env(), timeout=180)
    assert "sandbox.local:" in p.stdout, p.stdout + p.stderr
    if p.returncode == 0:
        assert "ok   sandbox.local: starts, reads /workspace, no network" in p.stdout
    else:  # a host without namespaces: said in one line, exit 2
        assert p.returncode == 2 and "FAIL sandbox.local" in p.stdout
