"""The ``gold`` agent: a host-side oracle that submits the reference answer.

It acts only through the sandbox's tools, exactly as a model-driven agent would: it lists
the workspace, writes ``prediction.csv`` into the output folder, checks inside the sandbox
that the file is a rectangular CSV, and submits it. On a release with gold it must score
100%: anything less is a bug in the builder, the sandbox, the run loop or the evaluator.
"""

from __future__ import annotations

import logging
import time

from dataspace.agents.base import Agent, AgentContext, AgentResult
from dataspace.sandbox.base import OUTPUT_DIR
from dataspace.traces import Error, Submit, Tool

logger = logging.getLogger(__name__)

# Run inside the sandbox: proves the output folder is readable there and rectangular.
_CHECK = (
    "import csv,sys;"
    "rows=list(csv.reader(open(sys.argv[1],newline='',encoding='utf-8-sig')));"
    "widths={len(r) for r in rows};"
    "sys.exit(0 if rows and len(widths)==1 else 3)"
)


class GoldAgent(Agent):
    """Writes and submits the reference answer through the sandbox tools."""

    name = "gold"
    needs_oracle = True

    def run(self, ctx: AgentContext) -> AgentResult:
        """Submit the gold answer; ``runtime_error`` when the sandbox tools fail."""
        t0 = time.monotonic()
        actions = 0
        if ctx.oracle is None:
            return AgentResult(end_state="runtime_error", error="no oracle for the gold agent")
        listing = ctx.sandbox.exec("ls -A /workspace", timeout=ctx.limits.command_timeout)
        actions += 1
        ctx.events.emit(
            Tool(
                name="bash",
                command="ls -A /workspace",
                exit_code=listing.exit_code,
                stdout=listing.stdout[:2000],
            )
        )
        if listing.exit_code != 0:
            return self._fail(ctx, actions, t0, f"workspace not listable: {listing.stderr[:200]}")
        ctx.sandbox.write_file("prediction.csv", ctx.oracle())
        actions += 1
        ctx.events.emit(Tool(name="write_file", path=f"{OUTPUT_DIR}/prediction.csv"))
        check = ctx.sandbox.exec(
            ["python3", "-c", _CHECK, f"{OUTPUT_DIR}/prediction.csv"],
            timeout=ctx.limits.command_timeout,
        )
        actions += 1
        ctx.events.emit(
            Tool(
                name="bash",
                command="check prediction.csv",
                exit_code=check.exit_code,
                stderr=check.stderr[-2000:],
            )
        )
        if check.exit_code != 0:
            return self._fail(
                ctx,
                actions,
                t0,
                f"prediction check failed ({check.status}, "
                f"exit {check.exit_code}): {check.stderr.strip()[-200:]}",
            )
        ctx.events.emit(Submit(path=f"{OUTPUT_DIR}/prediction.csv"))
        return AgentResult(
            end_state="submitted",
            submitted_path=f"{OUTPUT_DIR}/prediction.csv",
            tool_actions=actions,
            working_seconds=time.monotonic() - t0,
        )

    @staticmethod
    def _fail(ctx: AgentContext, actions: int, t0: float, error: str) -> AgentResult:
        ctx.events.emit(Error(message=error))
        return AgentResult(
            end_state="runtime_error",
            tool_actions=actions,
            error=error,
            working_seconds=time.monotonic() - t0,
        )
