"""The ``codex`` harness: OpenAI Codex CLI 0.145.0 (``codex exec``) over the Responses API.

Configuration, as the official baseline's ``harnesses/codex.py`` writes it (task-local
``$CODEX_HOME/config.toml``): one provider on the Responses wire API (no websockets), the
attempt's model with its context window and an auto-compaction threshold of
``context_window - max_output_tokens - 8192``, ``approval_policy = "never"``, web search
disabled, no update check, no login shell, the credential variables excluded from
commands' environments, apps/remote plugins/request compression off and no history.
The command is ``codex exec --strict-config --json --ephemeral --skip-git-repo-check
--ignore-rules --color never -C /output --model <model> <prompt>``.

Differences, recorded in the attempt's ``harness_config``: the provider's ``base_url`` is
the relay inside the sandbox and its ``env_key`` holds the one-attempt token; paths are ours
(``/workspace``, ``/output``). ``sandbox_mode``: the official value is
``workspace-write`` (Codex's own bubblewrap sandbox, no network, writes to the output
only). Codex's bubblewrap cannot start inside our sandbox (it needs a nested user
namespace and binds host ``/dev`` nodes such as ``/dev/full`` that our minimal ``/dev``
lacks; every command fails with ``bwrap: Can't bind mount /oldroot/dev/full``), so by
default (``harness_sandbox: off``) Codex runs
with ``danger-full-access`` and our sandbox is the boundary; it keeps everything that
mode would deny denied: no network route (only the relay answers, on loopback), the
workspace read-only, web search off, every model but the attempt's refused by the relay.
``harness_sandbox: on`` asks for the official ``workspace-write``.
"""

from __future__ import annotations

import json
from typing import Any

from dataspace.agents.native.runner import (
    OUTPUT_DIR,
    NativeHarness,
    Outcome,
    Plan,
    jsonl,
)

TOKEN_ENV = "DATASPACE_RELAY_TOKEN"
COMPACT_RESERVE = 8192
ACTION_ITEMS = {"command_execution", "file_change", "mcp_tool_call", "web_search"}


def auto_compact_limit(context_window: int, max_output_tokens: int) -> int:
    """Codex's auto-compaction threshold.

    >>> auto_compact_limit(262144, 32768)
    221184
    """
    limit = context_window - max_output_tokens - COMPACT_RESERVE
    if limit <= 0:
        raise ValueError(
            "codex: the context window must exceed max output tokens plus an "
            "8192-token compaction reserve"
        )
    return limit


def config_toml(
    *,
    model: str,
    base_url: str,
    key_env: str,
    context_window: int,
    max_output_tokens: int,
    sandbox_mode: str,
    writable_root: str = OUTPUT_DIR,
) -> str:
    """The task-local ``config.toml`` (the official file, with our base URL and paths)."""
    q = json.dumps
    limit = auto_compact_limit(context_window, max_output_tokens)
    return f"""model = {q(model)}
model_provider = "vercel"
model_context_window = {context_window}
model_auto_compact_token_limit = {limit}
approval_policy = "never"
sandbox_mode = {q(sandbox_mode)}
web_search = "disabled"
check_for_update_on_startup = false
allow_login_shell = false

[model_providers.vercel]
name = "Vercel AI Gateway"
base_url = {q(base_url)}
env_key = {q(key_env)}
wire_api = "responses"
supports_websockets = false

[sandbox_workspace_write]
network_access = false
writable_roots = [{q(writable_root)}]

[shell_environment_policy]
inherit = "core"
exclude = [{q(key_env)}, "ANTHROPIC_*", "*TOKEN*", "*SECRET*"]

[features]
apps = false
remote_plugin = false
enable_request_compression = false

[history]
persistence = "none"
"""


class CodexAgent(NativeHarness):
    """Runs ``codex exec`` inside the sandbox (harness ``codex``)."""

    name = "codex"
    wire = "responses"

    def _sandbox_mode(self, plan: Plan) -> str:
        if plan.harness_sandbox not in ("on", "off"):
            raise ValueError(
                f"codex: harness_sandbox must be 'on' or 'off', got {plan.harness_sandbox!r}"
            )
        return "workspace-write" if plan.harness_sandbox == "on" else "danger-full-access"

    def config_files(self, plan: Plan) -> dict[str, str]:
        """``.codex/config.toml``."""
        return {
            ".codex/config.toml": config_toml(
                model=plan.model_id,
                base_url=f"{plan.relay_url}/v1",
                key_env=TOKEN_ENV,
                context_window=plan.context_window,
                max_output_tokens=plan.max_output_tokens,
                sandbox_mode=self._sandbox_mode(plan),
            )
        }

    def command(self, plan: Plan) -> list[str]:
        """``codex exec --strict-config --json --ephemeral ...`` (the official flags)."""
        return [
            plan.executable,
            "exec",
            "--strict-config",
            "--json",
            "--ephemeral",
            "--skip-git-repo-check",
            "--ignore-rules",
            "--color",
            "never",
            "-C",
            OUTPUT_DIR,
            "--model",
            plan.model_id,
            plan.prompt,
        ]

    def environment(self, plan: Plan) -> dict[str, str]:
        """``CODEX_HOME`` and the token variable named by ``env_key``."""
        return {"CODEX_HOME": f"{plan.home}/.codex", TOKEN_ENV: plan.token}

    def policy(self, plan: Plan) -> dict[str, Any]:
        """What the attempt records about the configuration."""
        mode = self._sandbox_mode(plan)
        return {
            "wire_api": "responses",
            "web_search": "disabled",
            "command_network": "disabled (no route; the relay alone answers on loopback)",
            "command_credential_env": "filtered",
            "request_compression": "disabled",
            "session": "task-local",
            "context_window": plan.context_window,
            "auto_compact_token_limit": auto_compact_limit(
                plan.context_window, plan.max_output_tokens
            ),
            "sandbox_mode": mode,
            "official_sandbox_mode": "workspace-write",
            "harness_sandbox": plan.harness_sandbox,
            "boundary": "dataspace sandbox"
            if mode != "workspace-write"
            else "codex + dataspace sandbox",
        }

    def classify_exit(self, outcome: Outcome) -> tuple[str, str | None] | None:
        """Truncation by ``max_output_tokens`` (as the official classifier reads stdout)."""
        if (
            "reason: max_output_tokens" in outcome.stdout
            or "reason=max_output_tokens" in outcome.stdout
        ):
            return (
                "model_output_exhausted",
                "Codex model response was truncated by max_output_tokens",
            )
        text = (outcome.stdout + outcome.stderr).lower()
        if "context window" in text or "context_length_exceeded" in text:
            return "context_window_exhausted", "Codex ran out of context window"
        return None

    def summarize(self, outcome: Outcome) -> tuple[int, int]:
        """Turns (``turn.completed``) and distinct action items, as the official summary."""
        turns = actions = 0
        seen: set[tuple[str, str]] = set()
        for ev in jsonl(outcome.stdout):
            if ev.get("type") == "turn.completed":
                turns += 1
            item = ev.get("item")
            if isinstance(item, dict) and item.get("type") in ACTION_ITEMS:
                key = (str(item.get("type")), str(item.get("id")))
                if item.get("id") is not None and key not in seen:
                    seen.add(key)
                    actions += 1
        return turns, actions


__all__ = ["CodexAgent", "auto_compact_limit", "config_toml"]
