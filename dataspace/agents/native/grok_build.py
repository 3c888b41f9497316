"""The ``grok-build`` harness: x.ai's Grok Build 0.2.106 (``grok -p``) over Chat Completions.

Grok Build is not published to a package registry; it is installed from x.ai's installer
or a binary the user provides (``python -m dataspace.agents.native.install grok-build
--from PATH``) and ``dataspace doctor`` reports it missing otherwise.

Configuration, as the official baseline's ``harnesses/grok_build.py`` writes it
(task-local ``$GROK_HOME``): ``config.toml`` maps every model role (``default``,
``image_description``, ``session_summary``, ``web_search``) to one model entry
``dataspace-backbone`` on the ``chat_completions`` backend with the output cap and the
context window; ``sandbox.toml`` defines the profile ``dataspace-strict`` (extends
``strict``, network restricted, ``/opt/dataspace`` read-only). The command is ``grok -p
<prompt> --cwd <dir> --model dataspace-backbone --output-format streaming-json
--disable-web-search --sandbox dataspace-strict --always-approve --no-memory``.

The official in-jail relay that maps ``finish_reason: "other"`` to ``"stop"`` is our
``WireRelay`` on the ``chat`` wire with ``normalize_finish_reasons``, on the controller;
``base_url`` is the relay inside the sandbox and ``env_key`` names the one-attempt token's
variable. ``--cwd`` is ``/output`` (the official ``/mnt`` held both folders). Grok's own
sandbox is Landlock-based and needs no new namespace, so the official profile is kept
(``harness_sandbox: on``); ``off`` drops ``--sandbox`` and is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dataspace.agents.native.runner import OUTPUT_DIR, NativeHarness, Outcome, Plan, jsonl

MODEL_ROLES = ("default", "image_description", "session_summary", "web_search")
MODEL_NAME = "dataspace-backbone"
SANDBOX_PROFILE = "dataspace-strict"
TOOLS_MANIFEST = "/opt/dataspace/TOOLS.md"
TOKEN_ENV = "DATASPACE_RELAY_TOKEN"
API_BACKEND = "chat_completions"


def config_toml(
    *,
    model: str,
    base_url: str,
    name: str,
    key_env: str,
    max_output_tokens: int,
    context_window: int,
) -> str:
    """The task-local ``config.toml`` (the official file, with our base URL)."""
    q = json.dumps
    roles = "".join(f"{role} = {q(MODEL_NAME)}\n" for role in MODEL_ROLES)
    return f"""[models]
{roles}
[model.{MODEL_NAME}]
model = {q(model)}
base_url = {q(base_url)}
name = {q(name)}
env_key = {q(key_env)}
api_backend = {q(API_BACKEND)}
max_completion_tokens = {max_output_tokens}
context_window = {context_window}
"""


def sandbox_toml() -> str:
    """The task-local ``sandbox.toml`` (the official profile)."""
    return f"""[profiles.{SANDBOX_PROFILE}]
extends = "strict"
restrict_network = true
read_only = ["/opt/dataspace"]
"""


def toml_strings(content: str, section: str) -> dict[str, str]:
    r"""String assignments of one ``[section]`` of a simple TOML file.

    >>> toml_strings('[a]\nx = "1"\n[b]\nx = "2"\n', "b")
    {'x': '2'}
    """
    current, out = "", {}
    for raw in content.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            continue
        if current != section or "=" not in line:
            continue
        key, value = (p.strip() for p in line.split("=", 1))
        try:
            parsed = json.loads(value)
        except ValueError:
            continue
        if isinstance(parsed, str):
            out[key] = parsed
    return out


class GrokBuildAgent(NativeHarness):
    """Runs ``grok -p`` inside the sandbox (harness ``grok-build``)."""

    name = "grok-build"
    wire = "chat"
    default_harness_sandbox = "on"

    def relay_options(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """The official finish-reason fix."""
        return {"normalize_finish_reasons": True}

    def _on(self, plan: Plan) -> bool:
        if plan.harness_sandbox not in ("on", "off"):
            raise ValueError(
                f"grok-build: harness_sandbox must be 'on' or 'off', got {plan.harness_sandbox!r}"
            )
        return plan.harness_sandbox == "on"

    def config_files(self, plan: Plan) -> dict[str, str]:
        """``.grok/config.toml`` and ``.grok/sandbox.toml``."""
        self._on(plan)
        model = plan.settings.get("model")
        key = str(plan.settings.get("model_key") or getattr(model, "id", plan.model_id))
        return {
            ".grok/config.toml": config_toml(
                model=plan.model_id,
                base_url=f"{plan.relay_url}/v1",
                name=key,
                key_env=TOKEN_ENV,
                max_output_tokens=plan.max_output_tokens,
                context_window=plan.context_window,
            ),
            ".grok/sandbox.toml": sandbox_toml(),
        }

    def command(self, plan: Plan) -> list[str]:
        """``grok -p ... --output-format streaming-json`` (the official flags)."""
        argv = [
            plan.executable,
            "-p",
            plan.prompt,
            "--cwd",
            OUTPUT_DIR,
            "--model",
            MODEL_NAME,
            "--output-format",
            "streaming-json",
            "--disable-web-search",
        ]
        if self._on(plan):
            argv += ["--sandbox", SANDBOX_PROFILE]
        return [*argv, "--always-approve", "--no-memory"]

    def environment(self, plan: Plan) -> dict[str, str]:
        """Grok's task-local home, no auto-update, and the token variable."""
        return {
            "GROK_CONFIG_HOME": f"{plan.home}/.grok",
            "GROK_HOME": f"{plan.home}/.grok",
            "GROK_DISABLE_AUTO_UPDATE": "1",
            TOKEN_ENV: plan.token,
        }

    def policy(self, plan: Plan) -> dict[str, Any]:
        """What the attempt records about the configuration."""
        on = self._on(plan)
        return {
            "web_search": "disabled",
            "sandbox": SANDBOX_PROFILE if on else "off",
            "sandbox_base": "strict",
            "harness_sandbox": plan.harness_sandbox,
            "boundary": "grok-build + dataspace sandbox" if on else "dataspace sandbox",
            "tools_manifest_access": "read-only",
            "tool_approval": "automatic",
            "memory": "disabled",
            "model_policy": "single-backbone",
            "model_roles": list(MODEL_ROLES),
            "api_backend": API_BACKEND,
            "finish_reason_normalization": True,
            "context_window": plan.context_window,
            "cwd": OUTPUT_DIR,
        }

    def trace_files(self) -> tuple[str, ...]:
        """The config (checked again), Grok's runtime log and its sandbox events."""
        return (".grok/config.toml", ".grok/logs/unified.jsonl", ".grok/sandbox-events.jsonl")

    def classify_exit(self, outcome: Outcome) -> tuple[str, str | None] | None:
        """The official classification of Grok's output."""
        text = outcome.stderr + "\n" + outcome.stdout
        if "max_tokens_truncation" in text or "response truncated by max_tokens" in text:
            return "model_output_exhausted", "Grok Build response was truncated by max_tokens"
        if "serialization error" in text:
            return "runtime_error", "Grok Build provider protocol error"
        return None

    def validate(self, outcome: Outcome, expected_model: str) -> None:
        """The official single-backbone and sandbox-profile checks."""
        config = outcome.files.get(".grok/config.toml", "")
        if not config:
            raise RuntimeError("Grok Build task-local config is missing")
        roles = toml_strings(config, "models")
        missing = [r for r in MODEL_ROLES if roles.get(r) != MODEL_NAME]
        entry = toml_strings(config, f"model.{MODEL_NAME}")
        details = []
        if missing:
            details.append(f"unmapped roles: {', '.join(missing)}")
        if entry.get("model") != expected_model:
            details.append(f"configured model: {entry.get('model')!r}")
        if entry.get("api_backend") != API_BACKEND:
            details.append(f"API backend: {entry.get('api_backend')!r}")
        if details:
            raise RuntimeError(
                "invalid Grok Build single-backbone config (" + "; ".join(details) + ")"
            )
        unexpected: set[str] = set()
        for ev in jsonl(outcome.files.get(".grok/logs/unified.jsonl", "")):
            msg, ctx = str(ev.get("msg", "")), ev.get("ctx")
            if not isinstance(ctx, dict):
                continue
            seen: list[object] = []
            if msg == "backend_search: model switch":
                seen.append(ctx.get("new_model"))
            elif msg.startswith("subagent read parent config") or msg == "subagent model resolved":
                seen.append(ctx.get("parent_model"))
            elif msg == "subagent spawn credentials":
                seen.append(ctx.get("effective_model_raw"))
            unexpected.update(m for m in seen if isinstance(m, str) and m != expected_model)
        if unexpected:
            raise RuntimeError(
                "Grok Build used model(s) outside the single-backbone policy: "
                f"{', '.join(sorted(unexpected))}; expected {expected_model}"
            )
        events = outcome.files.get(".grok/sandbox-events.jsonl", "")
        if events:
            applied = violation = False
            for ev in jsonl(events):
                ro = ev.get("read_only_paths")
                if (
                    ev.get("event_type") == "ProfileApplied"
                    and ev.get("profile") == SANDBOX_PROFILE
                    and ev.get("enforced") is True
                    and isinstance(ro, list)
                    and "/opt/dataspace" in ro
                ):
                    applied = True
                if ev.get("event_type") == "FsViolation" and ev.get("target") == TOOLS_MANIFEST:
                    violation = True
            if not applied:
                raise RuntimeError("Grok Build did not enforce the DataSpace sandbox profile")
            if violation:
                raise RuntimeError("Grok Build sandbox denied the Data Workbench tools manifest")

    def summarize(self, outcome: Outcome) -> tuple[int, int]:
        """Turns from the final ``end`` event (else the runtime log) and tool executions."""
        turns: int | None = None
        for ev in jsonl(outcome.stdout):
            if ev.get("type") in ("end", "error") and isinstance(ev.get("num_turns"), int):
                turns = int(ev["num_turns"])
        actions = inferred = 0
        for ev in jsonl(outcome.files.get(".grok/logs/unified.jsonl", "")):
            if ev.get("msg") == "shell.tool.exec_done":
                actions += 1
            elif ev.get("msg") == "shell.turn.inference_done":
                inferred += 1
        return (turns if turns is not None else inferred), actions


__all__ = ["MODEL_ROLES", "GrokBuildAgent", "config_toml", "sandbox_toml", "toml_strings"]
