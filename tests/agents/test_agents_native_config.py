"""The native harnesses' generated files and commands against the official baseline's.

``tests/fixtures/agents/native/official.json`` holds what the official invocation factories
generate for task ``task_7`` and MiMo-V2.5 (recorded by ``scripts/record_native_fixtures.py``
from HKUSTDial/DataSpace). Ours must be the same up to the documented differences: the
relay's address and token variable instead of the gateway and its key variable, our
paths (``/workspace``, ``/output``, the task-local home), and the harness's own sandbox
turned off where it cannot nest in ours.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dataspace.agents import get_agent, harness_names
from dataspace.agents.native.runner import HOME_DIR, Plan
from dataspace.agents.smolagents_adapter import relation_prompt
from dataspace.llm.models import ModelSpec

FIXTURE = Path(__file__).parents[1] / "fixtures" / "agents" / "native" / "official.json"
OFFICIAL = json.loads(FIXTURE.read_text())
MODEL = "xiaomi/mimo-v2.5"
RELAY = "http://127.0.0.1:18765"
PROMPT_ARGS = {"workspace": "/mnt/workspace", "output": "/mnt/output/prediction.csv"}


def _plan(name: str, sandbox: str, **settings: Any) -> Plan:
    model = ModelSpec(
        id=MODEL, base_url="https://ai-gateway.vercel.sh/v1", key_env="AI_GATEWAY_API_KEY"
    )
    return Plan(
        task_id="task_7",
        prompt=relation_prompt("task_7", "Which cities?", **PROMPT_ARGS),
        model_id=MODEL,
        relay_url=RELAY,
        token="tok",
        home=HOME_DIR,
        executable=f"/opt/harness/{name}/bin/x",
        context_window=262144,
        max_output_tokens=32768,
        harness_sandbox=sandbox,
        settings={"model": model, **settings},
    )


def _ours(text: str) -> str:
    """An official text with our documented substitutions applied."""
    return (
        text.replace("https://ai-gateway.vercel.sh/v1", f"{RELAY}/v1")
        .replace("http://127.0.0.1:0/v1", f"{RELAY}/v1")
        .replace('env_key = "AI_GATEWAY_API_KEY"', 'env_key = "DATASPACE_RELAY_TOKEN"')
        .replace('exclude = ["AI_GATEWAY_API_KEY"', 'exclude = ["DATASPACE_RELAY_TOKEN"')
        .replace("/mnt/output", "/output")
        .replace("/mnt/workspace", "/workspace")
        .replace("/mnt/home", HOME_DIR)
    )


def test_the_native_harnesses_are_registered():
    assert {"codex", "claude-code", "grok-build"} <= set(harness_names())


def test_the_prompt_is_the_official_one_byte_for_byte():
    official = OFFICIAL["codex"]["inner_command"][-1]
    assert relation_prompt("task_7", "Which cities?", **PROMPT_ARGS) == official


def test_codex_config_and_command_match_the_official_ones():
    agent = get_agent("codex")
    official = OFFICIAL["codex"]
    on = agent.config_files(_plan("codex", "on"))
    assert on == {".codex/config.toml": _ours(official["files"][".codex/config.toml"])}
    off = agent.config_files(_plan("codex", "off"))[".codex/config.toml"]
    diff = set(off.splitlines()) ^ set(on[".codex/config.toml"].splitlines())
    assert diff == {'sandbox_mode = "workspace-write"', 'sandbox_mode = "danger-full-access"'}
    parsed = tomllib.loads(off)
    assert parsed["web_search"] == "disabled" and parsed["history"] == {"persistence": "none"}
    assert parsed["model_auto_compact_token_limit"] == 262144 - 32768 - 8192
    argv = agent.command(_plan("codex", "off"))
    expected = [_ours(a) for a in official["inner_command"]]
    assert argv[1:-1] == expected[1:-1] and argv[-1] == official["inner_command"][-1]
    assert argv[1:6] == [
        "exec",
        "--strict-config",
        "--json",
        "--ephemeral",
        "--skip-git-repo-check",
    ]


def test_claude_code_settings_and_command_match_the_official_ones():
    agent = get_agent("claude-code")
    official = OFFICIAL["claude-code"]
    expect = json.loads(_ours(official["files"][".claude/settings.json"]))
    on = json.loads(agent.config_files(_plan("claude-code", "on"))[".claude/settings.json"])
    assert on == expect
    off = json.loads(agent.config_files(_plan("claude-code", "off"))[".claude/settings.json"])
    expect["sandbox"].update(enabled=False, failIfUnavailable=False)
    assert off == expect
    assert off["permissions"]["deny"] == ["WebSearch", "WebFetch"]
    inner = official["inner_command"]
    claude = inner[inner.index("--") + 1 :]
    argv = agent.command(_plan("claude-code", "off"))
    assert argv[1:] == [_ours(a) if a != claude[2] else a for a in claude[1:]]
    env = agent.environment(_plan("claude-code", "off"))
    roles = {k: v for k, v in official["environment"].items() if v == MODEL}
    assert len(roles) == 10 and all(env[k] == MODEL for k in roles)
    for k in (
        "CLAUDE_CODE_NO_MODEL_FALLBACK",
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
        "ANTHROPIC_API_KEY",
    ):
        assert env[k] == official["environment"][k]
    assert env["ANTHROPIC_BASE_URL"] == RELAY and env["ANTHROPIC_AUTH_TOKEN"] == "tok"


def test_grok_build_files_and_command_match_the_official_ones():
    agent = get_agent("grok-build")
    official = OFFICIAL["grok-build"]
    files = agent.config_files(_plan("grok-build", "on", model_key="mimo-v2.5"))
    assert files == {k: _ours(v) for k, v in official["files"].items()}
    inner = official["inner_command"]
    grok = inner[inner.index("--") + 1 :]
    argv = agent.command(_plan("grok-build", "on"))
    swapped = ["/output" if a == "/mnt" else a for a in grok[1:]]
    assert argv[1:] == swapped
    assert "--sandbox" not in agent.command(_plan("grok-build", "off"))
    env = agent.environment(_plan("grok-build", "on"))
    assert env["GROK_DISABLE_AUTO_UPDATE"] == "1"
    assert env["GROK_HOME"] == env["GROK_CONFIG_HOME"] == f"{HOME_DIR}/.grok"


@pytest.mark.parametrize("name", ["codex", "claude-code", "grok-build"])
def test_a_bad_harness_sandbox_value_is_refused(name):
    with pytest.raises(ValueError, match="harness_sandbox must be 'on' or 'off'"):
        get_agent(name).config_files(_plan(name, "maybe"))


def _outcome(stdout: str = "", stderr: str = "", code: int = 1):
    from dataspace.agents.native.runner import Outcome

    return Outcome(
        exit_code=code, timed_out=False, stopped=False, signal=None, stdout=stdout, stderr=stderr
    )


def _result(text: str) -> str:
    return json.dumps({"type": "result", "result": text, "num_turns": 3}) + "\n"


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("Claude's response exceeded the 32000 output token maximum.", "model_output_exhausted"),
        ("API Error: 400 prompt is too long: 300000 tokens", "context_window_exhausted"),
        ("Autocompact is thrashing", "context_window_exhausted"),
        ("API Error: 503 upstream", "runtime_error"),
    ],
)
def test_claude_code_exit_classification_is_the_official_one(text, state):
    got = get_agent("claude-code").classify_exit(_outcome(_result(text)))
    assert got is not None and got[0] == state


def test_codex_and_grok_exit_classification():
    codex = get_agent("codex")
    got = codex.classify_exit(
        _outcome('{"type":"error","message":"... reason: max_output_tokens"}')
    )
    assert got is not None and got[0] == "model_output_exhausted"
    assert codex.classify_exit(_outcome("plain failure")) is None
    grok = get_agent("grok-build")
    got = grok.classify_exit(_outcome(stderr="error: max_tokens_truncation"))
    assert got is not None and got[0] == "model_output_exhausted"
    assert grok.classify_exit(_outcome(stderr="serialization error"))[0] == "runtime_error"  # type: ignore[index]


def test_claude_code_validator_reads_messages_and_model_usage():
    agent = get_agent("claude-code")
    ok = json.dumps({"type": "assistant", "message": {"model": MODEL}}) + "\n"
    ok += json.dumps({"type": "result", "modelUsage": {MODEL: {}, f"{MODEL}[1m]": {}}}) + "\n"
    agent.validate(_outcome(ok, code=0), MODEL)
    bad = ok + json.dumps({"type": "result", "modelUsage": {"claude-haiku-4-5": {}}}) + "\n"
    with pytest.raises(RuntimeError, match="claude-haiku-4-5"):
        agent.validate(_outcome(bad, code=0), MODEL)


def test_grok_build_validator_is_the_official_one():
    from dataspace.agents.native.runner import Outcome

    agent = get_agent("grok-build")
    cfg = agent.config_files(_plan("grok-build", "on"))[".grok/config.toml"]
    applied = {
        "event_type": "ProfileApplied",
        "profile": "dataspace-strict",
        "enforced": True,
        "read_only_paths": ["/opt/dataspace"],
    }

    def outcome(**files: str) -> Outcome:
        base = {".grok/config.toml": cfg, ".grok/sandbox-events.jsonl": json.dumps(applied)}
        return Outcome(
            exit_code=0,
            timed_out=False,
            stopped=False,
            signal=None,
            stdout="",
            stderr="",
            files={**base, **files},
        )

    agent.validate(outcome(), MODEL)
    switch = json.dumps({"msg": "backend_search: model switch", "ctx": {"new_model": "grok-4"}})
    with pytest.raises(RuntimeError, match="grok-4"):
        agent.validate(outcome(**{".grok/logs/unified.jsonl": switch}), MODEL)
    with pytest.raises(RuntimeError, match="did not enforce"):
        agent.validate(outcome(**{".grok/sandbox-events.jsonl": "{}"}), MODEL)
    with pytest.raises(RuntimeError, match="unmapped roles: web_search"):
        agent.validate(
            outcome(**{".grok/config.toml": cfg.replace('web_search = "dataspace-backbone"', "")}),
            MODEL,
        )


def test_native_settings_are_checked_before_the_run():
    from dataspace.agents.native.codex import CodexAgent
    from dataspace.errors import ConfigError

    CodexAgent.check_settings({"context_window": 1000000}, has_model=True)
    with pytest.raises(ConfigError, match="needs a model"):
        CodexAgent.check_settings({}, has_model=False)
    with pytest.raises(ConfigError, match=r"unknown keys \['max_turns'\]"):
        CodexAgent.check_settings({"max_turns": 3}, has_model=True)
    with pytest.raises(ConfigError, match="harness_sandbox"):
        CodexAgent.check_settings({"harness_sandbox": "yes"}, has_model=True)
