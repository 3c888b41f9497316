"""The ``claude-code`` harness: Claude Code 2.1.217 (``claude -p``) over the Messages API.

Configuration, as the official baseline's ``harnesses/claude_code.py`` writes it
(task-local ``~/.claude/settings.json`` passed with ``--settings``): tools ``Bash``,
``Read``, ``Write``, ``Edit``, ``Glob``, ``Grep`` allowed and ``WebSearch``/``WebFetch``
denied; every model role (``ANTHROPIC_MODEL``, the opus/sonnet/haiku/fable defaults, the
small-fast, subagent, context-collapse, background-classifier and auto-mode models) mapped
to the one backbone, model fallback and fast mode off, the context window, output cap and
auto-compaction window (``context_window - max_output_tokens - 8192``, at 70 %) set;
non-essential traffic and the auto-updater off. The command is ``claude -p <prompt>
--model <model> --output-format stream-json --verbose --no-session-persistence
--no-chrome --strict-mcp-config --mcp-config '{"mcpServers":{}}' --permission-mode
dontAsk --disallowedTools WebSearch WebFetch --add-dir /workspace --settings <file>``.

The official relay in front of the endpoint (keep the 5 most recent images) is our
``WireRelay`` on the ``messages`` wire, on the controller. ``ANTHROPIC_BASE_URL`` is the
relay inside the sandbox and ``ANTHROPIC_AUTH_TOKEN`` the one-attempt token.

Claude Code's own command sandbox (bubblewrap and socat) cannot run nested in ours
(every command fails with ``bwrap: Can't bind mount /oldroot/dev/full``), so by default
(``harness_sandbox: off``) ``sandbox.enabled`` is false and our sandbox is the boundary,
recorded in the attempt; what the official sandbox denies stays denied: no network route
(the relay alone answers, on loopback), the workspace read-only, web tools disallowed,
every other model refused by the relay.
``harness_sandbox: on`` writes the official sandbox block unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from dataspace.agents.native.runner import (
    OUTPUT_DIR,
    WORKSPACE_DIR,
    NativeHarness,
    Outcome,
    Plan,
    jsonl,
)

AUTO_COMPACT_PERCENT = 70
MAX_IMAGES_PER_REQUEST = 5
COMPACT_RESERVE = 8192
MODEL_ENVIRONMENT_KEYS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_FABLE_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
    "CLAUDE_CONTEXT_COLLAPSE_MODEL",
    "CLAUDE_CODE_BG_CLASSIFIER_MODEL",
    "CLAUDE_CODE_AUTO_MODE_MODEL",
)


def auto_compact_window(context_window: int, max_output_tokens: int) -> int:
    """Claude Code's auto-compaction window.

    >>> auto_compact_window(262144, 32768)
    221184
    """
    window = context_window - max_output_tokens - COMPACT_RESERVE
    if window <= 0:
        raise ValueError(
            "claude-code: the context window must exceed max output tokens plus an "
            "8192-token compaction reserve"
        )
    return window


def single_backbone_environment(
    model: str, *, context_window: int, max_output_tokens: int
) -> dict[str, str]:
    """Every model role mapped to ``model``, fallback off, the context limits set."""
    env = {key: model for key in MODEL_ENVIRONMENT_KEYS}
    env.update(
        {
            "CLAUDE_CODE_NO_MODEL_FALLBACK": "1",
            "CLAUDE_CODE_DISABLE_FAST_MODE": "1",
            "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(context_window),
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens),
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(
                auto_compact_window(context_window, max_output_tokens)
            ),
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": str(AUTO_COMPACT_PERCENT),
        }
    )
    return env


def settings_json(
    *,
    model: str,
    context_window: int,
    max_output_tokens: int,
    sandbox_enabled: bool,
    key_env: str | None = None,
    workspace: str = WORKSPACE_DIR,
    output: str = OUTPUT_DIR,
) -> dict[str, Any]:
    """The task-local ``settings.json`` (the official one, with our paths)."""
    denied_env = [{"name": n, "mode": "deny"} for n in (key_env,) if n]
    denied_env += [
        {"name": "ANTHROPIC_AUTH_TOKEN", "mode": "deny"},
        {"name": "ANTHROPIC_API_KEY", "mode": "deny"},
    ]
    return {
        "permissions": {
            "allow": ["Bash", "Read", "Write", "Edit", "Glob", "Grep"],
            "deny": ["WebSearch", "WebFetch"],
        },
        "sandbox": {
            "enabled": sandbox_enabled,
            "failIfUnavailable": sandbox_enabled,
            "allowUnsandboxedCommands": False,
            "filesystem": {"denyWrite": [workspace], "allowWrite": [output]},
            "network": {"allowedDomains": []},
            "credentials": {"envVars": denied_env},
        },
        "env": {
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **single_backbone_environment(
                model, context_window=context_window, max_output_tokens=max_output_tokens
            ),
        },
    }


class ClaudeCodeAgent(NativeHarness):
    """Runs ``claude -p`` inside the sandbox (harness ``claude-code``)."""

    name = "claude-code"
    wire = "messages"

    def upstream_base(self, model: Any, settings: Any) -> str:
        """The Anthropic base URL: ``upstream_base``, else the model's base_url minus /v1."""
        base = settings.get("upstream_base") or model.base_url
        if not base:
            raise ValueError("claude-code: the model has no base_url; set it in the models file")
        base = str(base).rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base

    def relay_options(self, settings: Any) -> dict[str, Any]:
        """The official image cap."""
        return {"max_images": MAX_IMAGES_PER_REQUEST}

    def _enabled(self, plan: Plan) -> bool:
        if plan.harness_sandbox not in ("on", "off"):
            raise ValueError(
                f"claude-code: harness_sandbox must be 'on' or 'off', got {plan.harness_sandbox!r}"
            )
        return plan.harness_sandbox == "on"

    def config_files(self, plan: Plan) -> dict[str, str]:
        """``.claude/settings.json``."""
        key_env = getattr(plan.settings.get("model"), "key_env", None)
        data = settings_json(
            model=plan.model_id,
            context_window=plan.context_window,
            max_output_tokens=plan.max_output_tokens,
            sandbox_enabled=self._enabled(plan),
            key_env=key_env,
        )
        return {".claude/settings.json": json.dumps(data, ensure_ascii=False, indent=2) + "\n"}

    def command(self, plan: Plan) -> list[str]:
        """``claude -p ... --output-format stream-json`` (the official flags)."""
        return [
            plan.executable,
            "-p",
            plan.prompt,
            "--model",
            plan.model_id,
            "--output-format",
            "stream-json",
            "--verbose",
            "--no-session-persistence",
            "--no-chrome",
            "--strict-mcp-config",
            "--mcp-config",
            '{"mcpServers":{}}',
            "--permission-mode",
            "dontAsk",
            "--disallowedTools",
            "WebSearch",
            "WebFetch",
            "--add-dir",
            WORKSPACE_DIR,
            "--settings",
            f"{plan.home}/.claude/settings.json",
        ]

    def environment(self, plan: Plan) -> dict[str, str]:
        """The relay address and token, and the single-backbone variables."""
        return {
            "ANTHROPIC_BASE_URL": plan.relay_url,
            "ANTHROPIC_AUTH_TOKEN": plan.token,
            "ANTHROPIC_API_KEY": "",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **single_backbone_environment(
                plan.model_id,
                context_window=plan.context_window,
                max_output_tokens=plan.max_output_tokens,
            ),
        }

    def policy(self, plan: Plan) -> dict[str, Any]:
        """What the attempt records about the configuration."""
        on = self._enabled(plan)
        return {
            "web_tools": "disabled",
            "command_network": "disabled (no route; the relay alone answers on loopback)",
            "command_credential_env": "filtered",
            "sandbox_enabled": on,
            "official_sandbox_enabled": True,
            "harness_sandbox": plan.harness_sandbox,
            "boundary": "claude-code + dataspace sandbox" if on else "dataspace sandbox",
            "model_policy": "single-backbone",
            "model_roles": list(MODEL_ENVIRONMENT_KEYS),
            "model_fallback": "disabled",
            "context_window": plan.context_window,
            "max_output_tokens": plan.max_output_tokens,
            "auto_compact_window": auto_compact_window(plan.context_window, plan.max_output_tokens),
            "auto_compact_percent": AUTO_COMPACT_PERCENT,
            "image_history_policy": {
                "max_images_per_request": MAX_IMAGES_PER_REQUEST,
                "retention": "most_recent",
                "older_images": "text_placeholder",
            },
        }

    @staticmethod
    def _result_text(outcome: Outcome) -> str:
        text = ""
        for ev in jsonl(outcome.stdout):
            if ev.get("type") == "result":
                text = str(ev.get("result", ""))
        return text

    def classify_exit(self, outcome: Outcome) -> tuple[str, str | None] | None:
        """The official classification of the final ``result`` event."""
        text = self._result_text(outcome)
        if "output token maximum" in text:
            return "model_output_exhausted", text
        low = text.lower()
        if any(
            s in low
            for s in (
                "maximum context length",
                "context window",
                "prompt is too long",
                "autocompact is thrashing",
            )
        ):
            return "context_window_exhausted", text
        if text.startswith("API Error:"):
            return "runtime_error", text
        return None

    def validate(self, outcome: Outcome, expected_model: str) -> None:
        """Fail a trace that shows any model but the backbone (the official validator)."""
        unexpected: set[str] = set()
        for ev in jsonl(outcome.stdout):
            message = ev.get("message")
            if isinstance(message, dict):
                m = message.get("model")
                if isinstance(m, str) and m not in {expected_model, "<synthetic>"}:
                    unexpected.add(m)
            usage = ev.get("modelUsage")
            if isinstance(usage, dict):
                unexpected.update(
                    str(m) for m in usage if m not in {expected_model, f"{expected_model}[1m]"}
                )
        if unexpected:
            raise RuntimeError(
                "Claude Code used model(s) outside the single-backbone policy: "
                f"{', '.join(sorted(unexpected))}; expected {expected_model}"
            )

    def summarize(self, outcome: Outcome) -> tuple[int, int]:
        """Turns (the result's ``num_turns``, else assistant events) and tool uses."""
        turns = actions = 0
        final: int | None = None
        for ev in jsonl(outcome.stdout):
            if ev.get("type") == "assistant":
                turns += 1
                content = (ev.get("message") or {}).get("content")
                if isinstance(content, list):
                    actions += sum(
                        isinstance(b, dict) and b.get("type") == "tool_use" for b in content
                    )
            elif ev.get("type") == "result" and isinstance(ev.get("num_turns"), int):
                final = int(ev["num_turns"])
        return final or turns, actions


__all__ = [
    "MODEL_ENVIRONMENT_KEYS",
    "ClaudeCodeAgent",
    "auto_compact_window",
    "settings_json",
    "single_backbone_environment",
]
