"""The sandbox backend registry: names, options, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dataspace.sandbox as sandbox_api
from dataspace.errors import ConfigError
from dataspace.sandbox import (
    SandboxBackend,
    SandboxSpec,
    backend_names,
    get_backend,
    register_backend,
)

REPO = Path(__file__).resolve().parents[2]


def test_unknown_backend_lists_the_known_ones() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown sandbox backend 'nope'; known backends: .*local"
    ):
        get_backend("nope")


def test_bad_options_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"sandbox backend 'local': bad options \['colour'\]"):
        get_backend("local", colour="blue")


@pytest.mark.sandbox
def test_local_backend_by_name(tmp_path: Path) -> None:
    backend = get_backend("local", state_dir=tmp_path / "state")
    assert isinstance(backend, SandboxBackend)
    assert backend.name == "local"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    live = backend.create(SandboxSpec(workspace=workspace, labels={"run": "registry-test"}))
    try:
        # A live sandbox of a live controller is never swept. Labelled: an unlabelled sweep
        # also (rightly) removes the cgroups that tests killing a controller on purpose
        # leave behind in the group this one shares with them.
        assert backend.sweep(labels={"run": "registry-test"}) == 0
        assert live.exec("echo up").stdout == "up\n"
    finally:
        live.close()


def test_registered_factories_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_api, "BACKENDS", sandbox_api.BACKENDS.copy())
    made: list[dict[str, object]] = []

    class Named:
        name = "named"

        def __init__(self, **options: object) -> None:
            made.append(options)

        def create(self, spec):
            raise NotImplementedError

        def sweep(self, labels=None):
            return 0

    register_backend("named", Named)
    assert "named" in backend_names()
    backend = get_backend("named", region="x")
    assert isinstance(backend, Named)
    assert made == [{"region": "x"}]


def test_importing_the_package_does_not_load_backends() -> None:
    code = "import sys, dataspace.sandbox; print('dataspace.sandbox.local' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "False"
