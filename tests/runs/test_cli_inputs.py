"""Input bounds and the preflight probe's retries, through the real ``dataspace`` command.

Issue 24: ``memory: 16`` meant 16 bytes (every attempt died, exit 0), ``2000000000000g``
was accepted, ``--concurrency 0`` was ignored and ``-3`` scheduled nothing, a changed
memory was refused under the fingerprint's name (``sandbox.memory_bytes``), and one
transient 429 or 500 from the endpoint probe failed the whole run.
"""

from __future__ import annotations

import re
import shutil

import pytest
import yaml
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.runs.preflight import PROBE_MAX_TRIES, PROBE_PROMPT
from dataspace.sandbox.local import machine_memory_bytes
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.sandbox, pytest.mark.llm]

GOLD = [{"name": "gold", "harness": "gold"}]


@pytest.fixture
def release(tmp_path):
    return write_tiny_release(tmp_path / "release", tasks=2)


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _recorded(tmp_path) -> bool:
    return (tmp_path / "store/runs/r1/spec.json").exists()


# ---- sizes and numbers in the spec --------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "doctor"])
@pytest.mark.parametrize(
    ("sandbox", "line"),
    [
        ({"memory": 16}, "sandbox.memory: 16 has no unit; did you mean 16g?"),
        ({"memory": "16"}, "sandbox.memory: 16 has no unit; did you mean 16g?"),
        ({"memory": 4096}, "sandbox.memory: 4096 has no unit; did you mean 4096m?"),
        ({"tmp": 2}, "sandbox.tmp: 2 has no unit; did you mean 2g?"),
        ({"memory": "2000000000000g"}, "sandbox.memory: 2000000000000g is more than 1 PiB"),
        ({"memory": "128m"}, "sandbox.memory: 128m is less than the minimum, 256 MiB"),
        ({"output": "10k"}, "sandbox.output: 10k is less than the minimum, 1 MiB"),
        ({"pids": 0}, "sandbox.pids: must be a positive integer, got 0"),
        ({"cpus": 100000}, "sandbox.cpus: 100000 is more than the largest accepted value"),
    ],
)
def test_sizes_need_a_unit_and_a_sane_range(tmp_path, release, command, sandbox, line):
    """Guards: ``memory: 16`` read as 16 bytes and an absurd size accepted (issue 24)."""
    spec = write_spec(
        tmp_path / "s.yaml",
        release,
        tmp_path / "store",
        GOLD,
        sandbox={"backend": "local", **sandbox},
    )
    p = dataspace(command, str(spec), env=cli_env())
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"error: {spec}: {line}" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "memory_bytes" not in p.stderr
    assert not _recorded(tmp_path)


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        ({"concurrency": 0}, "concurrency: must be a positive integer, got 0"),
        ({"attempts": 0}, "attempts: must be a positive integer, got 0"),
        ({"attempts": 10**6}, "attempts: 1000000 is more than the largest accepted value, 1000"),
        ({"limits": {"wall_seconds": 0}}, "limits.wall_seconds: must be positive, got 0"),
        ({"limits": {"command_timeout": -5}}, "limits.command_timeout: must be a non-negative"),
        ({"limits": {"wall_seconds": 1e12}}, "limits.wall_seconds: 1000000000000.0 is more than"),
        ({"max_infra_retries": -1}, "max_infra_retries: must be a non-negative integer"),
    ],
)
def test_numeric_keys_are_range_checked(tmp_path, release, extra, line):
    spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", GOLD, **extra)
    p = dataspace("doctor", str(spec), env=cli_env())
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"error: {spec}: {line}" in p.stderr
    assert not _recorded(tmp_path)


def test_memory_above_this_machine_is_refused_by_doctor_and_run(tmp_path, release, ray_dir):
    """Guards: a local sandbox given more memory than the host has (issue 24)."""
    total = machine_memory_bytes()
    assert total > 0
    too_much = f"{total // 1024**3 + 2}g"
    spec = write_spec(
        tmp_path / "s.yaml", release, tmp_path / "store", GOLD, sandbox={"memory": too_much}
    )
    doctor = dataspace("doctor", str(spec), env=cli_env())
    assert doctor.returncode == 2, doctor.stdout + doctor.stderr
    assert (
        f"FAIL sandbox: sandbox.memory: {too_much[:-1]} GiB is more than this machine's memory"
        in doctor.stdout
    )
    assert f"set sandbox.memory to at most {total // 1024**3}g" in doctor.stdout
    run = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "sandbox: sandbox.memory:" in run.stderr and "nothing was recorded" in run.stderr
    assert not _recorded(tmp_path) and not list(ray_dir.rglob("session_*"))


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_concurrency_flag_is_range_checked(tmp_path, release, value):
    """Guards: ``--concurrency 0`` ignored and ``-3`` scheduling nothing with exit 1."""
    spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", GOLD)
    for args in (["run", str(spec)], ["demo", "--out", str(tmp_path / "demo")]):
        p = dataspace(*args, f"--concurrency={value}", env=cli_env())
        assert p.returncode == 2, p.stdout + p.stderr
        want = "expected an integer" if value == "many" else f"must be at least 1, got {value}"
        assert f"argument --concurrency: {want}" in p.stderr
    assert not _recorded(tmp_path) and not (tmp_path / "demo").exists()
    x = dataspace("export", str(tmp_path / "store/runs/r1"), "--agent", "gold", "--out",
                  str(tmp_path / "b"), "--attempt", "0", env=cli_env())  # fmt: skip
    assert x.returncode == 2 and "argument --attempt: must be at least 1, got 0" in x.stderr


# ---- the endpoint probe and a changed spec ------------------------------------------------

TRANSIENT = [{"status": s, "retry_after": 0.01, "times": 1} for s in (429, 500, 502, 503, 504)]


def test_probe_retries_transient_statuses_then_passes(tmp_path, release):
    """Guards: one transient 429 or 500 from the preflight probe failing the run (issue 24)."""
    with ScriptedServer({"*": [], PROBE_PROMPT: [{"content": "ok", "faults": TRANSIENT}]}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [model_agent(srv.url)])
        p = dataspace("doctor", str(spec), env=cli_env(**{KEY_ENV: SECRET}))
        assert [r.outcome for r in srv.requests] == [
            "fault:429", "fault:500", "fault:502", "fault:503", "fault:504", "ok",
        ]  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok   agents[0].model.base_url/id:" in p.stdout
    assert "accepted 'scripted-model'" in p.stdout and "after 5 transient failures" in p.stdout


def test_probe_gives_up_after_bounded_tries_with_the_last_status(tmp_path, release):
    faults = [{"status": 503, "retry_after": 0.01, "times": 1000}]
    with ScriptedServer({"*": [], PROBE_PROMPT: [{"content": "ok", "faults": faults}]}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [model_agent(srv.url)])
        p = dataspace("doctor", str(spec), env=cli_env(**{KEY_ENV: SECRET}))
        assert len(srv.requests) == PROBE_MAX_TRIES
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"answered HTTP 503 {PROBE_MAX_TRIES} times over" in p.stdout
    assert "scripted fault 503" in p.stdout
    # a status that is no transient one is not retried
    faults = [{"status": 400, "times": 1000}]
    with ScriptedServer({"*": [], PROBE_PROMPT: [{"content": "ok", "faults": faults}]}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, tmp_path / "store", [model_agent(srv.url)])
        p = dataspace("doctor", str(spec), env=cli_env(**{KEY_ENV: SECRET}))
        assert len(srv.requests) == 1
    assert p.returncode == 2 and "answered HTTP 400" in p.stdout


@pytest.mark.ray
def test_run_survives_a_busy_probe_and_a_changed_memory_names_the_key(tmp_path, release, ray_dir):
    """Guards: the run failing on a 429 probe, and ``sandbox.memory_bytes`` in a refusal."""
    faults = [{"status": 429, "retry_after": 0.01, "times": 2}]
    store = tmp_path / "store"
    with ScriptedServer({"*": [], PROBE_PROMPT: [{"content": "ok", "faults": faults}]}) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, store, [model_agent(srv.url)])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        p = dataspace("run", "-v", str(spec), env=env)  # a global flag after the subcommand
        out = p.stdout + p.stderr
        assert p.returncode == 0, out
        assert "after 2 transient failures" in p.stdout
        assert "DEBUG" in p.stderr  # -v took effect
        doc = yaml.safe_load(spec.read_text())
        doc["sandbox"]["memory"] = "2GiB"
        spec.write_text(yaml.safe_dump(doc))
        again = dataspace("run", str(spec), env=env)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "was made with a different spec (changed: sandbox.memory)" in again.stderr
    assert "memory_bytes" not in again.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["build", "--workers", "-1"],
            "dataspace build: error: argument --workers: must be at least 0",
        ),
        (["build", "--budget", "0"], "argument --budget: must be at least 1, got 0"),
        (["build", "--cross-language-share", "1.5"], "must be at most 1, got 1.5"),
        (["diff", "a", "b", "--limit", "-1"], "argument --limit: must be at least 0, got -1"),
        (["review", "serve", "--port", "70000"], "argument --port: must be at most 65535"),
        (["review", "assign", "--per-task", "0"], "argument --per-task: must be at least 1"),
        (["audit", "--port", "-1"], "argument --port: must be at least 0, got -1"),
    ],
)
def test_numeric_flags_of_every_command_are_range_checked(args, line):
    p = dataspace(*args, env=cli_env())
    assert p.returncode == 2, p.stdout + p.stderr
    assert line in p.stderr and "Traceback" not in p.stderr


def test_top_level_help_describes_the_commands():
    """Guards: the top-level help was the CLI module's docstring."""
    p = dataspace("--help", env=cli_env())
    assert p.returncode == 0
    assert p.stdout.splitlines()[2] == (
        "DataSpace: build, run and score the DataSpace data-agent benchmark."
    )
    assert "parse flags into typed configs" not in p.stdout
    for command in ("demo", "run", "doctor", "convert", "validate", "report", "export"):
        assert re.search(rf"^    {command} +\S", p.stdout, re.M), command
    v = dataspace("validate", "--help", env=cli_env())
    assert v.returncode == 0 and "-v, --verbose" in v.stdout
