"""Fixtures of the sandbox tests: local backends, once per way of enforcing limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataspace.errors import SandboxError
from dataspace.sandbox.local import Enforcement, LocalBackend


@pytest.fixture(scope="session")
def sandbox_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One state folder for the session's sandboxes, apart from any other controller's."""
    return tmp_path_factory.mktemp("sandbox-state")


def open_local_backend(state_dir: Path, enforcement: Enforcement) -> LocalBackend:
    """A local backend, or a skip saying why this host cannot run it."""
    try:
        return LocalBackend(state_dir=state_dir, enforcement=enforcement)
    except SandboxError as exc:
        pytest.skip(f"local sandbox with {enforcement} enforcement unavailable here: {exc}")


@pytest.fixture(params=["cgroup", "rlimit"])
def local_backend(request: pytest.FixtureRequest, sandbox_state_dir: Path) -> LocalBackend:
    """The local backend with cgroup limits, then with rlimits only."""
    return open_local_backend(sandbox_state_dir, request.param)


@pytest.fixture
def cgroup_backend(sandbox_state_dir: Path) -> LocalBackend:
    """The local backend with cgroup limits (skipped where no cgroup is writable)."""
    return open_local_backend(sandbox_state_dir, "cgroup")
