"""Run specs the controller tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig
from dataspace.testing.releases import write_tiny_release


def gold_spec(tmp_path: Path, **kw: Any) -> RunSpec:
    """The gold oracle on a tiny release (made once under ``tmp_path``) in local sandboxes
    of 512 MiB, two at once; ``kw`` sets any other field."""
    rel = tmp_path / "rel"
    if not rel.exists():
        write_tiny_release(rel, tasks=3)
    base: dict[str, Any] = dict(
        run_id="t1",
        release=str(rel),
        store=f"file://{tmp_path / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(memory_bytes=512 * 1024**2),
        sandbox=SandboxConfig(),
        concurrency=2,
    )
    base.update(kw)
    return RunSpec(**base)
