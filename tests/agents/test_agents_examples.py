"""The example run spec of the paper's backbone comparison."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from dataspace.agents.dataspace_agent import ReactSettings
from dataspace.errors import ConfigError
from dataspace.runs.spec import load_spec, parse_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paper-backbones.yaml"


def test_placeholders_are_refused_until_filled_in():
    with pytest.raises(ConfigError, match=r"agents\[0\]\.model\.[a-z_.]+: .* is a placeholder"):
        load_spec(EXAMPLE)


def test_filled_in_example_is_the_papers_setup(tmp_path):
    text = EXAMPLE.read_text()
    assert "FILL_IN" in text
    filled = re.sub(r'"FILL_IN: GATEWAY_BASE_URL"', '"http://127.0.0.1:1/v1"', text)
    filled = re.sub(r'"FILL_IN: gateway model id for ([^"]+)"', r'"vendor/\1"', filled)
    filled = filled.replace('"FILL_IN"', "1.0")
    assert "FILL_IN" not in filled
    spec = parse_spec(yaml.safe_load(filled), source="example", base_dir=tmp_path)
    assert [a.name for a in spec.agents] == [
        "grok-4.5",
        "gpt-5.6-sol",
        "kimi-k3",
        "mimo-v2.5",
        "claude-sonnet-5",
        "minimax-m3",
    ]
    assert {a.harness for a in spec.agents} == {"dataspace-agent"}
    assert spec.protocol == "official"
    claude = next(a for a in spec.agents if a.name == "claude-sonnet-5")
    assert ReactSettings.parse(claude.settings).extra_body == {
        "providerOptions": {"gateway": {"caching": "auto"}}
    }
    assert {a.model.key_env for a in spec.agents} == {"GATEWAY_API_KEY"}
    assert len({a.model.id for a in spec.agents}) == 6
    lim = spec.limits
    assert (lim.model_turns, lim.tool_actions, lim.wall_seconds, lim.command_timeout) == (
        60,
        50,
        1800,
        180,
    )
    assert (spec.limits.cpus, spec.limits.memory_bytes, spec.concurrency) == (4, 16 * 1024**3, 8)
    assert (spec.limits.pids, spec.limits.tmp_bytes) == (256, 2 * 1024**3)
    for a in spec.agents:
        assert ReactSettings.parse(a.settings).max_output_tokens == 32768
