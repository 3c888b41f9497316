"""Helpers for tests that drive the real ``dataspace`` command against the scripted server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

KEY_ENV = "DATASPACE_OPS_TEST_KEY"
SECRET = "sk-ops-5b0d7c1e9a2f4e68b3c1d0a7f6e5"  # a stand-in key that must never be written


def short_ray_dir() -> Path:
    """A private Ray temp root with a short path (Ray's socket paths must stay short)."""
    return Path(tempfile.mkdtemp(prefix="dsr-", dir="/tmp"))


def model_agent(url: str, *, name: str = "react", model_id: str = "scripted-model", **model):
    return {
        "name": name,
        "harness": "dataspace-agent",
        "model": {
            "id": model_id,
            "base_url": url,
            "key_env": KEY_ENV,
            "prices": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
            **model,
        },
        "settings": {"retry": {"initial_backoff": 0.01, "max_backoff": 0.05}},
    }


def write_spec(
    path: Path, release: Path | str, store: Path, agents: list[dict], **extra: Any
) -> Path:
    obj = {
        "run_id": "r1",
        "release": str(release),
        "store": str(store),
        "agents": agents,
        "limits": {"model_turns": 2, "wall_seconds": 120, "command_timeout": 30},
        "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
        "concurrency": 1,
        **extra,
    }
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    return path


def as_terminal_foreground() -> None:
    """A ``preexec_fn``: SIGINT and SIGQUIT at their defaults, as in a terminal's foreground
    job, also when the suite itself runs in the background (a shell's background job
    ignores both, and a child inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def cli_env(ray_dir: Path | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (KEY_ENV, "RAY_ADDRESS")}
    env["PYTHONUNBUFFERED"] = "1"
    if ray_dir is not None:
        env["RAY_TMPDIR"] = str(ray_dir)
    env.update(extra)
    return env


def dataspace(*args: str, env: dict[str, str], timeout: float = 300, **kw: Any):
    """Run ``dataspace ARGS`` as a user would; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **kw,
    )


def files_containing(root: Path, needle: bytes) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``needle``."""
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                hits.append(p)
        except OSError:
            continue
    return hits
