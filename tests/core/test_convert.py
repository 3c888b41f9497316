"""``dataspace convert``: the official baseline configs as an equivalent run spec."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dataspace.errors import ConfigError
from dataspace.runs.spec import load_spec

FIXTURES = Path(__file__).parent.parent / "fixtures" / "convert"
OFFICIAL = FIXTURES / "official"  # copies of the official repository's files (README there)


def _convert(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "convert", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def _official_configs(dest: Path) -> tuple[Path, Path]:
    """The official vercel.yaml and harness.yaml (copies: ``fixtures/convert/official``)."""
    out = []
    for name in ("vercel.yaml", "harness.yaml"):
        (dest / name).write_bytes((OFFICIAL / name).read_bytes())
        out.append(dest / name)
    return out[0], out[1]


def _check_refused_until_prices(spec_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"agents\[0\]\.model\.prices\.input: 'FILL_IN'"):
        load_spec(spec_path)
    doc = yaml.safe_load(spec_path.read_text())
    for a in doc["agents"]:
        a["model"]["prices"] = {"input": 1.0, "cached_input": 0.1, "output": 4.0}
    spec_path.write_text(yaml.safe_dump(doc))
    load_spec(spec_path)


def test_official_models_config_converts_key_for_key(tmp_path):
    vercel, _ = _official_configs(tmp_path)
    out = tmp_path / "spec.yaml"
    p = _convert(str(vercel), "-o", str(out), "--release", "./release", "--store", "./store")
    assert p.returncode == 0, p.stderr
    assert "prices: the official configs hold none" in p.stderr
    doc = yaml.safe_load(out.read_text())
    official = yaml.safe_load(vercel.read_text())
    assert [a["name"] for a in doc["agents"]] == list(official["models"])
    first = next(iter(official["models"].values()))
    a0 = doc["agents"][0]
    assert a0["harness"] == "dataspace-agent"
    assert a0["model"]["id"] == first["model"] and a0["model"]["key_env"] == first["api_key_env"]
    assert a0["model"]["base_url"] == first["base_url"]
    assert a0["settings"]["max_output_tokens"] == first["max_output_tokens"]
    assert doc["limits"] == {
        "model_turns": official["agent"]["max_model_turns"],
        "tool_actions": official["agent"]["max_tool_actions"],
        "wall_seconds": official["agent"]["max_wall_time_seconds"],
        "command_timeout": official["agent"]["max_command_seconds"],
    }
    assert doc["sandbox"]["memory"] == official["sandbox"]["memory"]
    sonnet = next(a for a in doc["agents"] if "extra_body" in a["settings"])
    assert sonnet["settings"]["extra_body"] == {"providerOptions": {"gateway": {"caching": "auto"}}}
    _check_refused_until_prices(out)
    spec = load_spec(out)
    assert spec.limits.memory_bytes == 16 * 1024**3  # "16g" as Docker reads it
    assert spec.limits.pids == official["sandbox"]["pids_limit"]


def test_official_harness_config_gives_one_agent_per_enabled_harness(tmp_path):
    vercel, harness = _official_configs(tmp_path)
    out = tmp_path / "spec.yaml"
    p = _convert(str(vercel), str(harness), "-o", str(out), "--release", "r", "--store", "s")
    assert p.returncode == 0, p.stderr
    assert "&id" not in out.read_text()  # each agent spelled out in full
    doc = yaml.safe_load(out.read_text())
    official = yaml.safe_load(harness.read_text())
    exp = official["experiment"]
    names = {a["harness"] for a in doc["agents"]}
    assert {"dataspace-agent", "smolagents"} <= names
    for a in doc["agents"]:
        assert a["model"]["id"] == exp["model"]["model"]
        # Claude Code speaks the Messages API at the official config's anthropic_base_url
        wire = "anthropic_base_url" if a["harness"] == "claude-code" else "openai_base_url"
        assert a["model"]["base_url"] == exp["model"][wire]
    assert doc["limits"]["wall_seconds"] == exp["wall_time_seconds"]
    assert doc["concurrency"] == exp["concurrency"]
    for name, h in official["harnesses"].items():
        if name not in names and h.get("enabled", True):
            assert f"harness {name!r}" in p.stderr  # left out, and said so


def test_own_fixture_with_the_same_keys(tmp_path):
    out = tmp_path / "spec.yaml"
    p = _convert(
        str(FIXTURES / "vercel.yaml"),
        "-o",
        str(out),
        "--model",
        "cached-model",
        "--release",
        "r",
        "--store",
        "s",
    )
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert [a["name"] for a in doc["agents"]] == ["cached-model"]
    assert doc["sandbox"] == {
        "backend": "local",
        "cpus": 2,
        "memory": "8g",
        "pids": 128,
        "tmp": "1g",
    }
    s = doc["agents"][0]["settings"]
    assert s["max_tool_output_chars"] == 10000 and s["image_max_edge"] == 1200
    assert doc["protocol"] == "official" and "tell_remaining_time" not in s
    _check_refused_until_prices(out)
    assert load_spec(out).limits.memory_bytes == 8 * 1024**3

    both = _convert(str(FIXTURES / "vercel.yaml"), str(FIXTURES / "harness.yaml"))
    assert both.returncode == 0, both.stderr
    doc = yaml.safe_load(both.stdout)
    assert [a["name"] for a in doc["agents"]] == [
        "dataspace-agent@small-model",
        "smolagents@small-model",
        "codex@small-model",
    ]
    assert doc["agents"][2]["harness"] == "codex"
    assert doc["release"] == "FILL_IN" and doc["concurrency"] == 4
    assert "codex" not in both.stderr  # a native harness of this installation
    assert "claude-code" not in both.stderr  # disabled


def test_unknown_model_key_is_one_line(tmp_path):
    p = _convert(str(FIXTURES / "vercel.yaml"), "--model", "nope")
    assert p.returncode == 2
    assert "models: no model 'nope'; available: small-model, cached-model" in p.stderr
