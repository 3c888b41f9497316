"""The sandbox contract run against the local backend, with cgroup limits and with rlimits."""

from __future__ import annotations

import pytest
from contract import SandboxContract

from dataspace.sandbox.local import LocalBackend

pytestmark = pytest.mark.sandbox


class TestLocalSandboxContract(SandboxContract):
    @pytest.fixture
    def backend(self, local_backend: LocalBackend) -> LocalBackend:
        return local_backend
