"""DataSpace-Agent: the paper's controlled ReAct baseline over chat-completions tool calling.

The loop alternates model replies with tool observations until the model submits an answer
or a budget runs out (``reference/agent-protocol.md``):

- exactly three tools (``bash``, ``view_image``, ``submit_answer``; ``_react_tools``), the
  prompt contract word for word (``_react_prompt``), a reminder when a reply has no tool
  call, and an error observation (never a crash) for a malformed tool call;
- budgets checked before every model call: wall clock, model turns, tool actions; within
  one reply, tool calls run in order until the action budget is spent or an answer is
  accepted; each command's timeout is capped by ``command_timeout``;
- end states ``submitted``, ``wall_time_exhausted``, ``model_turns_exhausted``,
  ``tool_actions_exhausted``, ``stopped`` (``cancel()``), ``runtime_error``.

Protocol: the run's profile (``dataspace.agents.protocol``; the setting ``protocol``, which
the controller fills from the run spec) decides the run semantics. ``official`` reproduces
the official baseline: the wall clock includes time lost to model retries, which are the
OpenAI SDK's defaults, a request may take the remaining wall time, commands are not capped
by the time left, the scored file is ``/output/prediction.csv``. ``extended`` adds back to
the deadline the time lost to retries (up to ``retry.max_retries``) and to waiting for a
concurrency permit, tells the agent its remaining time in each observation and reminder,
caps each command by the time left and checks answers against the evaluator's limits.
Waiting for a concurrency permit is never charged, in either profile.

Settings (``AgentSpec.settings``; the model comes from the spec's ``model``):
``max_output_tokens`` (32768), ``temperature``, ``extra_body``, ``default_headers``,
``request_timeout`` (600 s, extended), ``retry`` (``RetryPolicy`` fields, extended),
``max_tool_output_chars`` (20000), ``image_max_edge`` (1600), ``image_jpeg_quality`` (90).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dataspace.agents._react_prompt import (
    PROMPT_CONTRACT_VERSION,
    PROMPT_SHA256,
    REMINDER,
    SYSTEM_PROMPT,
    task_message,
    time_note,
)
from dataspace.agents._react_tools import TOOL_SCHEMAS, ToolBox, ToolConfig
from dataspace.agents.base import (
    Agent,
    AgentContext,
    AgentResult,
    PredictionSnapshot,
    unknown_settings,
)
from dataspace.agents.protocol import DEFAULT_PROTOCOL, ProtocolProfile, get_profile
from dataspace.errors import ConfigError, InfrastructureError, SandboxError
from dataspace.llm.client import DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_REQUEST_TIMEOUT
from dataspace.traces import (
    AgentEnd,
    AgentStart,
    Error,
    Image,
    ModelTurn,
    ProtocolReminder,
    Submit,
    ToolResult,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ReactSettings:
    """Validated settings of DataSpace-Agent."""

    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    temperature: float | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    default_headers: Mapping[str, str] = field(default_factory=dict)
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    retry: Mapping[str, Any] = field(default_factory=dict)
    max_tool_output_chars: int = 20_000
    image_max_edge: int = 1600
    image_jpeg_quality: int = 90

    @classmethod
    def parse(cls, settings: Mapping[str, Any]) -> ReactSettings:
        """Validate a settings mapping; unknown keys and bad values are a ConfigError."""
        allowed = set(cls.__dataclass_fields__)
        extra = unknown_settings(settings, allowed)
        if extra:
            raise ConfigError(
                f"dataspace-agent settings: unknown keys {extra} (allowed: {sorted(allowed)})"
            )
        kw = {k: v for k, v in settings.items() if k in allowed}
        for key in (
            "max_output_tokens",
            "max_tool_output_chars",
            "image_max_edge",
            "image_jpeg_quality",
        ):
            v = kw.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(
                    f"dataspace-agent settings: {key} must be a positive integer, got {v!r}"
                )
        q = kw.get("image_jpeg_quality", 90)
        if not 1 <= q <= 100:
            raise ConfigError(
                f"dataspace-agent settings: image_jpeg_quality must be in 1..100, got {q!r}"
            )
        for key in ("extra_body", "default_headers", "retry"):
            if key in kw and not isinstance(kw[key], Mapping):
                raise ConfigError(f"dataspace-agent settings: {key} must be a mapping")
        return cls(**kw)


def resolve_protocol(value: object) -> ProtocolProfile:
    """The profile a ``protocol`` setting names (a name, or a profile for tests).

    >>> resolve_protocol(None).name
    'official'
    """
    if isinstance(value, ProtocolProfile):
        return value
    try:
        return get_profile(DEFAULT_PROTOCOL if value is None else str(value))
    except ValueError as exc:
        raise ConfigError(f"dataspace-agent: {exc}") from None


class DataSpaceAgent(Agent):
    """The paper's ReAct baseline (harness ``dataspace-agent``).

    Args:
        **settings: defaults for the settings above (the run spec's settings win).
    """

    name = "dataspace-agent"

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any], *, has_model: bool) -> None:
        """Validate a run spec's settings for this harness before any attempt runs.

        Raises:
            ConfigError: unknown keys, bad values, or no model configured.
        """
        if not has_model:
            raise ConfigError("dataspace-agent needs a model (id, base_url, key_env, prices)")
        ReactSettings.parse(settings)
        resolve_protocol(settings.get("protocol"))

    def __init__(self, **settings: Any) -> None:
        self._defaults = dict(settings)
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Stop every run of this agent at its next step (end state ``stopped``)."""
        self._cancel.set()

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run the ReAct loop on one task to an end state."""
        from dataspace.llm.client import (
            MeteredClient,
            ModelDeadlineError,
            ModelRequestError,
            RetryPolicy,
        )

        t0 = time.monotonic()
        merged = {**self._defaults, **dict(ctx.settings)}
        model = merged.get("model")
        if model is None:
            return _early_error(
                ctx, t0, "dataspace-agent needs a model: add `model:` to the agent in the run spec"
            )
        try:
            cfg = ReactSettings.parse(merged)
            rules = resolve_protocol(merged.get("protocol"))
            retry = (
                RetryPolicy.sdk_default()
                if rules.sdk_default_retries
                else RetryPolicy.from_settings(cfg.retry)
            )
        except ConfigError as exc:
            return _early_error(ctx, t0, str(exc))
        client = MeteredClient(
            model,
            max_output_tokens=cfg.max_output_tokens,
            temperature=cfg.temperature,
            extra_body=cfg.extra_body,
            default_headers=cfg.default_headers,
            request_timeout=cfg.request_timeout,
            retry=retry,
            timeout_is_deadline=not rules.request_timeout_is_remaining_wall_time,
            events=ctx.events,
            on_call=ctx.usage_sink,
        )
        tools = ToolBox(
            ctx.sandbox,
            ToolConfig(
                command_timeout=ctx.limits.command_timeout,
                max_output_chars=cfg.max_tool_output_chars,
                image_max_edge=cfg.image_max_edge,
                image_jpeg_quality=cfg.image_jpeg_quality,
                protocol=rules,
            ),
        )
        limits = ctx.limits
        notes = rules.remaining_time_notes

        def excluded() -> float:
            lost = client.queue_seconds
            if not rules.retries_charged_to_wall_clock:
                lost += client.usage.retry_seconds
            return lost

        def remaining() -> float:
            return ctx.deadline - time.monotonic() + excluded()

        question = ctx.task.question.strip() if rules.strip_question else ctx.task.question
        first = task_message(ctx.task.task_id, question)
        if notes:
            first += "\n\n" + time_note(remaining())
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": first},
        ]
        ctx.events.emit(
            AgentStart(
                harness=self.name,
                model=model.id,
                base_url=model.base_url,
                prompt_contract=PROMPT_CONTRACT_VERSION,
                protocol=rules.name,
                system_prompt_sha256=PROMPT_SHA256,
                system_prompt=SYSTEM_PROMPT,
                user_prompt=first,
                limits={
                    "model_turns": limits.model_turns,
                    "tool_actions": limits.tool_actions,
                    "wall_seconds": limits.wall_seconds,
                    "command_timeout": limits.command_timeout,
                },
                settings={
                    "max_output_tokens": cfg.max_output_tokens,
                    "max_tool_output_chars": cfg.max_tool_output_chars,
                    "image_max_edge": cfg.image_max_edge,
                    "image_jpeg_quality": cfg.image_jpeg_quality,
                },
            )
        )
        turns = 0
        actions = 0
        status: str | None = None
        submitted: str | None = None
        snapshot: PredictionSnapshot | None = None
        error: str | None = None
        unreachable = False
        try:
            while status is None:
                if self._cancel.is_set():
                    status = "stopped"
                    break
                if remaining() <= 0:
                    status = "wall_time_exhausted"
                    break
                if turns >= limits.model_turns:
                    status = "model_turns_exhausted"
                    break
                if actions >= limits.tool_actions:
                    status = "tool_actions_exhausted"
                    break
                try:
                    # the official backend never asks for less than one second
                    reply = client.complete(messages, TOOL_SCHEMAS, time_left=max(1.0, remaining()))
                except ModelDeadlineError:
                    status = "wall_time_exhausted"
                    break
                except ModelRequestError as exc:
                    status, error = "runtime_error", str(exc)[:500]
                    unreachable = exc.unreachable
                    break
                turns += 1
                ctx.events.emit(
                    ModelTurn(
                        turn=turns,
                        content=reply.content,
                        tool_calls=[
                            {"id": c.id, "name": c.name, "arguments": c.arguments}
                            for c in reply.tool_calls
                        ],
                        finish_reason=reply.finish_reason,
                        response_id=reply.response_id,
                        resolved_model=reply.model,
                    )
                )
                messages.append(reply.message)
                if not reply.tool_calls:
                    text = REMINDER
                    if notes:
                        text += " " + time_note(remaining())
                    messages.append({"role": "user", "content": text})
                    ctx.events.emit(
                        ProtocolReminder(turn=turns, reason="assistant made no tool call")
                    )
                    continue
                images: list[dict[str, Any]] = []
                for call in reply.tool_calls:
                    if self._cancel.is_set():
                        status = "stopped"
                        break
                    if actions >= limits.tool_actions:
                        break
                    left: float | None = None
                    if rules.cap_commands_by_wall_clock:
                        left = remaining()
                        if left <= 0:
                            status = "wall_time_exhausted"
                            break
                    actions += 1
                    outcome = tools.execute(call.name, call.arguments, time_cap=left)
                    result = dict(outcome.result)
                    if notes:
                        result["time_remaining_seconds"] = max(0, int(remaining()))
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call.id,
                            "content": json.dumps(result, ensure_ascii=False, sort_keys=True),
                        }
                    )
                    ctx.events.emit(
                        ToolResult(
                            action=actions,
                            tool_call_id=call.id,
                            tool=call.name,
                            arguments=call.arguments[:20_000],
                            result=result,
                        )
                    )
                    if outcome.image_message is not None:
                        images.append(outcome.image_message)
                        ctx.events.emit(
                            Image(
                                tool_call_id=call.id,
                                path=(result.get("image") or {}).get("agent_path"),
                                data_url=_image_url(outcome.image_message),
                            )
                        )
                    if outcome.submitted_path is not None:
                        submitted, status = outcome.submitted_path, "submitted"
                        snapshot = outcome.snapshot
                        ctx.events.emit(
                            Submit(
                                path=submitted,
                                scored_path=snapshot.path if snapshot else submitted,
                                sha256=snapshot.sha256 if snapshot else None,
                            )
                        )
                        break
                    if outcome.deadline_hit:
                        status = "wall_time_exhausted"
                        break
                messages.extend(images)
        except (InfrastructureError, SandboxError):
            raise
        except Exception as exc:  # a bug or an unexpected reply must not kill the worker
            logger.exception("dataspace-agent failed on %s", ctx.task.task_id)
            status, error = "runtime_error", f"{type(exc).__name__}: {exc}"[:500]
        finally:
            client.close()
        usage = client.snapshot()
        working = max(0.0, time.monotonic() - t0 - excluded())
        ctx.events.emit(
            AgentEnd(
                end_state=status,
                model_turns=turns,
                tool_actions=actions,
                submitted_path=submitted,
                error=error,
                working_seconds=round(working, 6),
                usage=usage.to_dict(),
                queue_seconds=round(client.queue_seconds, 6),
            )
        )
        return AgentResult(
            end_state=status or "stopped",
            submitted_path=submitted,
            model_turns=turns,
            tool_actions=actions,
            usage=usage,
            error=error,
            working_seconds=working,
            prediction=snapshot,
            endpoint_unreachable=unreachable,
        )


def _image_url(message: dict[str, Any]) -> str | None:
    """The data URL of the image in a ``view_image`` message (for the trace)."""
    for part in message.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "image_url":
            return str((part.get("image_url") or {}).get("url") or "") or None
    return None


def _early_error(ctx: AgentContext, t0: float, message: str) -> AgentResult:
    ctx.events.emit(Error(message=message))
    return AgentResult(
        end_state="runtime_error", error=message, working_seconds=time.monotonic() - t0
    )


__all__ = ["DataSpaceAgent", "ReactSettings", "resolve_protocol"]
