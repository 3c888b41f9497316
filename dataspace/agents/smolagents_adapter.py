"""The ``smolagents`` harness: smolagents' CodeAgent running natively inside the sandbox.

smolagents (1.26.0 in the paper) runs as a process inside the attempt's sandbox, with its
own planning, code actions and memory, and the paper's list of authorized imports. Its
model calls go to the host-side relay (``dataspace.llm.relay``) through the sandbox file
bridge (``_smol_bridge``): the sandbox sees a placeholder base URL and a one-run token,
never the key; every call is metered into the attempt.

Output contract and limits, as for every harness of the comparison: the prompt is the
common relation prompt (``/output/prediction.csv``, rectangular UTF-8 CSV); the run has the
attempt's wall clock (working time: relay retries are added back), ``model_turns`` caps
both smolagents' ``max_steps`` and the calls the relay accepts, and ``command_timeout``
caps each code action. End states: ``submitted`` when a valid ``prediction.csv`` exists
after the run, ``wall_time_exhausted``, ``model_turns_exhausted`` (max steps or the relay's
call budget), ``stopped`` (the harness ended without a valid prediction; the error says
which), ``runtime_error`` (the harness crashed). Tool actions are smolagents' code actions. When
the relay's last call ran out of retries without reaching the endpoint and that ended the
run, the attempt is an outage: marked ``endpoint_unreachable`` under the official profile
(its end state kept), an infrastructure fault with that code under the extended one.

Settings: ``max_output_tokens`` (32768), ``extra_body``, ``default_headers``,
``request_timeout`` (600 s), ``retry`` (``RetryPolicy`` fields), ``python`` (the
interpreter inside the sandbox, default ``python3``).

Where smolagents lives: not in the workbench Python (the agent's ``python3`` holds the
official workbench packages alone, as the paper's sandbox did), but in a folder of its own,
``<harness root>/smolagents/site`` (``images/smolagents-requirements.txt``, installed with
``--no-deps --target`` by ``scripts/dev.sh`` and by the runtime image). The local sandbox
binds that folder read-only at :data:`SANDBOX_SITE`'s parent; the harness's process alone
puts it first on its ``sys.path`` (not ``PYTHONPATH``, so the processes its code actions
start see the workbench only).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataspace.agents._react_tools import check_prediction, read_prediction_csv
from dataspace.agents._smol_bridge import SandboxBridge
from dataspace.agents.base import (
    Agent,
    AgentContext,
    AgentResult,
    SandboxNeeds,
    unknown_settings,
)
from dataspace.errors import ConfigError, InfrastructureError, SandboxError
from dataspace.sandbox.base import OUTPUT_DIR
from dataspace.traces import AgentEnd, AgentStart, Error, HarnessTrace

logger = logging.getLogger(__name__)

PROMPT_CONTRACT_VERSION = "relation-v2"
RUNTIME_DIR = f"{OUTPUT_DIR}/.smolagents"
BRIDGE_DIR = f"{OUTPUT_DIR}/.relay"
PLACEHOLDER_BASE_URL = "http://relay.invalid/v1"
VERSION = "1.26.0"
"""The pinned smolagents release (the paper's Table 9); ``images/smolagents-requirements.txt``
installs it."""
SANDBOX_SITE = "/opt/harness/smolagents/site"
"""Where the local sandbox shows the harness's package folder."""
IMAGE_SITE = "/opt/dataspace/harnesses/smolagents/site"
"""Where the runtime image holds it (a pod has no per-attempt binds)."""
_ALLOWED = {
    "max_output_tokens",
    "extra_body",
    "default_headers",
    "request_timeout",
    "retry",
    "python",
}


def relation_prompt(
    task_id: str,
    question: str,
    *,
    workspace: str = "/workspace",
    output: str = "/output/prediction.csv",
) -> str:
    """The common user-level contract of the harness comparison.

    >>> relation_prompt("task_1", "Q?").splitlines()[0]
    'Task ID: task_1'
    """
    return f"""Task ID: {task_id}

Question:
{question}

All task input artifacts are located under:
{workspace}

Solve the task using only those artifacts. Internet access is unavailable.
The preinstalled generic data-processing utilities are documented at
/opt/dataspace/TOOLS.md. Package installation is unavailable.
Write the complete requested relation to:
{output}

The answer must be a rectangular UTF-8 CSV with one header row. A header-only
CSV is valid when the requested result is empty. Return all requested rows and
columns; do not replace the CSV with a prose answer.

Do not finish the task until the exact file path above exists. Before ending,
verify that its filename is exactly prediction.csv, that it is readable as a
rectangular CSV, and that it contains the complete final relation. A prose
response or a differently named file does not count as submission. Once the
verified prediction.csv is ready, terminate the session."""


def entry_source() -> str:
    """The in-sandbox program (``_smol_entry.py``) as text."""
    return (Path(__file__).with_name("_smol_entry.py")).read_text(encoding="utf-8")


def count_actions(trace: Mapping[str, Any]) -> int:
    """Code actions in a smolagents trace (tool calls; a code action without one counts 1).

    >>> count_actions({"steps": [{"tool_calls": [{}, {}]}, {"code_action": "x"}, {"plan": "p"}]})
    3
    """
    n = 0
    for step in trace.get("steps") or []:
        if not isinstance(step, dict):
            continue
        calls = step.get("tool_calls")
        if isinstance(calls, list):
            n += len(calls)
        elif step.get("code_action") is not None:
            n += 1
    return n


def install_dir() -> Path:
    """The host folder of the smolagents harness (``site/`` and ``VERSION`` inside)."""
    from dataspace.agents.native.install import harness_dir

    return harness_dir("smolagents")


def install_problem() -> str | None:
    """Why the smolagents harness cannot run on this host, with the fix; None when it can."""
    root = install_dir()
    found = (root / "VERSION").read_text().strip() if (root / "VERSION").is_file() else None
    if found is None or not (root / "site" / "smolagents").is_dir():
        return f"{root}/site is missing; run `scripts/dev.sh shell true` (as root once)"
    if found != VERSION:
        return f"{root} holds smolagents {found}, not {VERSION}; run `scripts/dev.sh shell true`"
    return None


class SmolagentsAgent(Agent):
    """Runs smolagents inside the sandbox (harness ``smolagents``)."""

    name = "smolagents"
    version = VERSION

    @staticmethod
    def install_problem() -> str | None:
        """Why this harness is not installed here (for ``dataspace harnesses``/``doctor``)."""
        return install_problem()

    def sandbox_needs(self) -> SandboxNeeds:
        """The harness's package folder, bound read-only into the local sandbox."""
        root = install_dir()
        if not root.is_dir():
            return SandboxNeeds(relay=False)
        return SandboxNeeds(
            relay=False,
            runtime_binds=((str(root.resolve()), SANDBOX_SITE.rsplit("/", 1)[0]),),
        )

    def __init__(self, **settings: Any) -> None:
        self._defaults = dict(settings)
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Stop runs of this agent (their harness is killed; end state ``stopped``)."""
        self._cancel.set()

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run smolagents on one task to an end state."""
        from dataspace.agents.protocol import end_on_outage
        from dataspace.llm.client import (
            DEFAULT_MAX_OUTPUT_TOKENS,
            DEFAULT_REQUEST_TIMEOUT,
            MeteredClient,
            RetryPolicy,
        )
        from dataspace.llm.relay import Relay

        t0 = time.monotonic()
        merged = {**self._defaults, **dict(ctx.settings)}
        model = merged.get("model")
        extra = unknown_settings(merged, _ALLOWED)
        if model is None or extra:
            msg = (
                "smolagents needs a model: add `model:` to the agent in the run spec"
                if model is None
                else f"smolagents settings: unknown keys {extra} (allowed: {sorted(_ALLOWED)})"
            )
            ctx.events.emit(Error(message=msg))
            return AgentResult(end_state="runtime_error", error=msg)
        try:
            retry = RetryPolicy.from_settings(merged.get("retry"))
        except ConfigError as exc:
            return AgentResult(end_state="runtime_error", error=str(exc))
        max_tokens = int(merged.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS))
        request_timeout = float(merged.get("request_timeout", DEFAULT_REQUEST_TIMEOUT))
        client = MeteredClient(
            model,
            max_output_tokens=max_tokens,
            extra_body=merged.get("extra_body"),
            default_headers=merged.get("default_headers"),
            request_timeout=request_timeout,
            retry=retry,
            events=ctx.events,
            on_call=ctx.usage_sink,
        )
        lim = ctx.limits

        def excluded() -> float:
            return client.usage.retry_seconds + client.queue_seconds

        def remaining() -> float:
            return ctx.deadline - time.monotonic() + excluded()

        relay = Relay(
            client, max_calls=lim.model_turns, max_output_tokens=max_tokens, time_left=remaining
        )
        sb = ctx.sandbox
        killed: dict[str, str] = {}

        def watchdog() -> bool:
            reason = (
                "stopped"
                if self._cancel.is_set()
                else "wall_time_exhausted"
                if remaining() <= 0
                else None
            )
            if reason and not killed:
                killed["reason"] = reason
                self._kill_harness(sb)
                return False
            return True

        bridge = SandboxBridge(sb, relay, BRIDGE_DIR, on_idle=watchdog, wait_seconds=1.0)
        cfg = {
            "model": model.id,
            "base_url": PLACEHOLDER_BASE_URL,
            "bridge_dir": BRIDGE_DIR,
            "max_steps": lim.model_turns,
            "command_timeout": max(1, int(lim.command_timeout)),
            "max_tokens": max_tokens,
            "request_timeout": request_timeout + 3600.0,
            "site_paths": [SANDBOX_SITE, IMAGE_SITE],
            "prompt_file": f"{RUNTIME_DIR}/prompt.txt",
            "trace": f"{RUNTIME_DIR}/trace.json",
            "pid_file": f"{RUNTIME_DIR}/pid",
        }
        ctx.events.emit(
            AgentStart(
                harness=self.name,
                model=model.id,
                base_url=model.base_url,
                prompt_contract=PROMPT_CONTRACT_VERSION,
                user_prompt=relation_prompt(ctx.task.task_id, ctx.task.question),
                limits={
                    "model_turns": lim.model_turns,
                    "tool_actions": lim.tool_actions,
                    "wall_seconds": lim.wall_seconds,
                    "command_timeout": lim.command_timeout,
                },
            )
        )
        res = None
        try:
            mk = sb.exec(["mkdir", "-p", RUNTIME_DIR, BRIDGE_DIR], timeout=30.0)
            if mk.exit_code != 0:
                raise SandboxError(f"cannot prepare {RUNTIME_DIR}: {mk.stderr.strip()}")
            sb.write_file(
                f"{RUNTIME_DIR}/prompt.txt",
                relation_prompt(ctx.task.task_id, ctx.task.question).encode(),
            )
            sb.write_file(f"{RUNTIME_DIR}/config.json", json.dumps(cfg).encode())
            bridge.start()
            # the watchdog enforces the working-time budget; this timeout only bounds the
            # exec in case the watchdog cannot (the sandbox's own deadline still applies)
            res = sb.exec(
                [
                    str(merged.get("python", "python3")),
                    "-c",
                    entry_source(),
                    f"{RUNTIME_DIR}/config.json",
                ],
                timeout=max(1.0, remaining()) + 3600.0,
                cwd=OUTPUT_DIR,
                env={
                    "DATASPACE_RELAY_TOKEN": relay.token,
                    "HF_HUB_OFFLINE": "1",
                    "HF_HUB_DISABLE_TELEMETRY": "1",
                    # Inside the local sandbox, pyarrow's jemalloc pool crashes (SIGSEGV in
                    # compute.take) when smolagents' executor thread filters a DataFrame;
                    # the system allocator gives the same results.
                    "ARROW_DEFAULT_MEMORY_POOL": "system",
                },
            )
        finally:
            bridge.stop()
            relay.close()
            client.close()
        trace = self._read_trace(sb)
        self._cleanup(sb)
        state = str(trace.get("state", ""))
        actions = count_actions(trace)
        submitted, problem = self._prediction(sb)
        status: str
        error: str | None = None
        if killed:
            status = killed["reason"]
        elif res is not None and res.status == "deadline":
            status = "wall_time_exhausted"
        elif submitted:
            status = "submitted"
        elif state == "max_steps_error" or relay.refused_for_budget:
            status = "model_turns_exhausted"
        elif relay.deadline_hits:
            status = "wall_time_exhausted"
        elif state in ("runtime_error", "") and res is not None and res.exit_code != 0:
            status = "runtime_error"
            error = (
                trace.get("error")
                or res.stderr.strip()[-500:]
                or f"smolagents exited with code {res.exit_code}"
            )
        else:
            status = "stopped"
            error = problem
        if status == "submitted":
            error = None
        elif error is None and problem and status != "stopped":
            error = problem
        # an outage ended it when the last call found no endpoint and nothing else did
        unreachable = bool(
            relay.unreachable
            and not killed
            and status not in ("submitted", "wall_time_exhausted", "model_turns_exhausted")
        )
        if unreachable:  # the end state stays the harness's own (the official outcome)
            error = end_on_outage(self.name, str(relay.unreachable_error), merged.get("protocol"))
        elif relay.infra_errors and status not in ("submitted", "wall_time_exhausted"):
            raise InfrastructureError(
                f"smolagents: {relay.infra_errors[-1]}", code="model_endpoint"
            )
        usage = client.snapshot()
        working = max(0.0, time.monotonic() - t0 - excluded())
        ctx.events.emit(
            HarnessTrace(
                state=state,
                smolagents_version=trace.get("smolagents_version"),
                harness_usage=trace.get("usage"),
                steps=trace.get("steps"),
                error=trace.get("error"),
                exit_code=None if res is None else res.exit_code,
                stderr=None if res is None else res.stderr[-4000:],
            )
        )
        ctx.events.emit(
            AgentEnd(
                end_state=status,
                model_turns=relay.calls,
                tool_actions=actions,
                submitted_path=submitted,
                error=error,
                working_seconds=round(working, 6),
                usage=usage.to_dict(),
                bridge_requests=bridge.requests,
            )
        )
        return AgentResult(
            end_state=status,
            submitted_path=submitted,
            model_turns=relay.calls - relay.refused_for_budget,
            tool_actions=actions,
            usage=usage,
            error=error,
            working_seconds=working,
            endpoint_unreachable=unreachable,
        )

    # ---- helpers ----------------------------------------------------------------------
    @staticmethod
    def _kill_harness(sb: Any) -> None:
        script = (
            f'p=$(cat {RUNTIME_DIR}/pid 2>/dev/null) || exit 0; kill -TERM "$p"; '
            'sleep 3; kill -KILL "$p" 2>/dev/null; exit 0'
        )
        try:
            sb.exec(["/bin/sh", "-c", script], timeout=30.0)
        except SandboxError:
            logger.warning("could not stop the smolagents process", exc_info=True)

    @staticmethod
    def _read_trace(sb: Any) -> dict[str, Any]:
        try:
            data = json.loads(sb.read_file(f"{RUNTIME_DIR}/trace.json", max_bytes=64 * 1024**2))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _cleanup(sb: Any) -> None:
        try:
            sb.exec(["rm", "-rf", "--", RUNTIME_DIR, BRIDGE_DIR], timeout=60.0)
        except SandboxError:
            logger.warning("could not remove the harness's runtime files", exc_info=True)

    @staticmethod
    def _prediction(sb: Any) -> tuple[str | None, str | None]:
        try:  # a link is followed inside the sandbox, as the official runner copies it
            path, data = read_prediction_csv(sb)
        except FileNotFoundError:
            return None, "required prediction.csv was not created"
        except (OSError, ValueError) as exc:
            return None, f"prediction.csv is not usable: {exc}"
        try:
            check_prediction(data)
        except ValueError as exc:
            return None, f"invalid prediction: {exc}"
        return path, None


__all__ = ["SmolagentsAgent", "count_actions", "entry_source", "relation_prompt"]
