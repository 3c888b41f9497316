"""What ``dataspace convert`` writes runs: doctor passes it and a real run completes.

Issue 24: a converted spec set ``tell_remaining_time`` on every DataSpace-Agent, which
doctor refused (exit 2); its ``sandbox.image`` drew a doctor warning on the local backend;
validation showed one ``FILL_IN`` at a time. The official repository's own configs (copies
in ``tests/fixtures/convert/official``) and the project's fixture are converted with the
real command, filled in as a user would (prices; the endpoint is the scripted server on
loopback, standing in for the gateway), checked by ``dataspace doctor`` and run with
``dataspace run`` (real local Ray and sandboxes).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_helpers import SECRET, cli_env, dataspace, short_ray_dir

from dataspace.agents.native.install import harness_state
from dataspace.sandbox.local import machine_memory_bytes
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.testing.scripted_wire import ScriptedResponsesServer

pytestmark = [pytest.mark.timeout(900), pytest.mark.sandbox, pytest.mark.llm]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "convert"
OFFICIAL = FIXTURES / "official"
PRICES = {"input": 2.0, "cached_input": 0.5, "output": 8.0}
ANSWER = "printf 'city,population\\nLyon,522000\\n' > /output/prediction.csv"
REACT = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": ANSWER}}]},
    {"tool_calls": [{"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}]},
]
SMOL = [
    {
        "content": "Thought: write it\n<code>\nimport pandas as pd\n"
        "pd.DataFrame([['Lyon', 522000]], columns=['city', 'population'])"
        ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
    }
]
CODEX = [{"shell": ANSWER}, {"content": "prediction.csv is written."}]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _convert(cwd: Path, *args: str) -> Path:
    p = dataspace("convert", *args, "-o", "spec.yaml", env=cli_env(), cwd=cwd)
    assert p.returncode == 0, p.stdout + p.stderr
    return cwd / "spec.yaml"


@pytest.mark.parametrize(
    "configs",
    [
        (OFFICIAL / "vercel.yaml",),
        (OFFICIAL / "vercel.yaml", OFFICIAL / "harness.yaml"),
        (FIXTURES / "vercel.yaml", FIXTURES / "harness.yaml"),
    ],
    ids=["official", "official+harness", "fixture+harness"],
)
def test_every_placeholder_is_listed_at_once_one_line_each(tmp_path, configs):
    """Guards: one ``FILL_IN`` shown per validation (15 reruns to find 15 prices)."""
    spec = _convert(tmp_path, *map(str, configs))
    text = spec.read_text()
    assert "tell_remaining_time" not in text and "image:" not in text
    doc = yaml.safe_load(text)
    assert doc["protocol"] == "official"
    n = text.count("FILL_IN")
    assert n == 2 + 3 * len(doc["agents"])  # release, store, three prices per agent
    p = dataspace("doctor", "spec.yaml", env=cli_env(), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[0] == f"error: spec.yaml: {n} placeholders left to fill in:"
    assert len(lines) == n + 1
    assert lines[1] == (
        "  spec.yaml: release: 'FILL_IN' is a placeholder; put the release folder or URI "
        "(file://..., s3://...) here"
    )
    last = len(doc["agents"]) - 1
    assert lines[-1] == (
        f"  spec.yaml: agents[{last}].model.prices.output: 'FILL_IN' is a placeholder; put the "
        "model's price in USD per million output tokens here"
    )


def _fill(spec: Path, urls: dict[str, str], *, keep: set[str] | None = None) -> dict[str, Any]:
    """Prices in, each harness's endpoint on loopback, memory this machine can give."""
    doc = yaml.safe_load(spec.read_text())
    doc["agents"] = [a for a in doc["agents"] if keep is None or a["harness"] in keep]
    for a in doc["agents"]:
        a["model"]["prices"] = dict(PRICES)
        a["model"]["base_url"] = urls[a["harness"]]
    if machine_memory_bytes() < 16 * 1024**3:  # the official 16g exceeds a small CI machine
        doc["sandbox"]["memory"] = "2g"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return doc


def _doctor_and_run(tmp_path: Path, env: dict[str, str], n_attempts: int) -> str:
    doctor = dataspace("doctor", "spec.yaml", env=env, cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "FAIL" not in doctor.stdout and "warn sandbox" not in doctor.stdout
    assert "all " in doctor.stdout and " checks passed" in doctor.stdout
    run = dataspace("run", "spec.yaml", env=env, cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert f"attempts: {n_attempts} ({n_attempts} run now, 0 already finished)" in run.stdout
    assert "infrastructure" not in run.stderr
    return run.stdout


@pytest.mark.ray
@pytest.mark.integration
def test_official_models_config_converted_passes_doctor_and_runs(tmp_path, ray_dir):
    write_tiny_release(tmp_path / "release", tasks=1)
    spec = _convert(
        tmp_path,
        str(OFFICIAL / "vercel.yaml"),
        "--model",
        "mimo-v2.5",
        "--model",
        "claude-sonnet-5",
        "--release",
        "./release",
        "--store",
        "./store",
    )
    with ScriptedServer({"*": REACT}) as srv:
        _fill(spec, {"dataspace-agent": srv.url})
        env = cli_env(ray_dir, AI_GATEWAY_API_KEY=SECRET)
        stdout = _doctor_and_run(tmp_path, env, 2)
        bodies = [r.body for r in srv.requests if r.body.get("tools")]
    for name in ("mimo-v2.5", "claude-sonnet-5"):
        assert f"  {name}: accuracy" in stdout
    assert stdout.count("{'submitted': 1}") == 2, stdout
    # the official request settings reached the endpoint: max_tokens and the gateway's body
    assert {b["max_tokens"] for b in bodies} == {32768}
    assert any(b.get("providerOptions") == {"gateway": {"caching": "auto"}} for b in bodies)
    assert all("time_remaining" not in str(b["messages"]) for b in bodies)


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.slow
def test_harness_config_converted_passes_doctor_and_runs(tmp_path, ray_dir):
    write_tiny_release(tmp_path / "release", tasks=1)
    spec = _convert(
        tmp_path,
        str(FIXTURES / "vercel.yaml"),
        str(FIXTURES / "harness.yaml"),
        "--release",
        "./release",
        "--store",
        "./store",
    )
    keep = {"dataspace-agent", "smolagents"} | (
        {"codex"} if harness_state("codex").ready else set()
    )
    react, smol = ScriptedServer({"*": REACT}), ScriptedServer({"*": SMOL})
    codex = ScriptedResponsesServer({"*": CODEX})
    servers = (react, smol, codex)
    for s in servers:
        s.start()
    try:
        urls = {"dataspace-agent": react.url, "smolagents": smol.url, "codex": codex.url}
        doc = _fill(spec, urls, keep=keep)
        assert {a["harness"] for a in doc["agents"]} == keep
        stdout = _doctor_and_run(tmp_path, cli_env(ray_dir, GATEWAY_KEY=SECRET), len(keep))
    finally:
        for s in servers:
            s.stop()
    for h in keep:
        assert f"  {h}@small-model: accuracy" in stdout
    assert stdout.count("{'submitted': 1}") == len(keep), stdout
