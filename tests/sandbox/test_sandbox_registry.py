"""The sandbox backend registry: names, options, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dataspace.sandbox as sandbox_api
from dataspace.errors import ConfigError
from dataspace.sandbox import (
    PreflightRequest,
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

    class Named(SandboxBackend):
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
    # what a backend does not declare comes from the contract's defaults
    assert backend.relay_transport == "socket" and not backend.harnesses_from_host
    assert [c.key for c in backend.preflight(PreflightRequest())] == ["sandbox"]
    assert Named.runtime_identity({"image": "img:1"}, None) == {
        "backend": "named",
        "image": "img:1",
    }


def test_a_factory_that_is_not_a_backend_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: a registered object that does not subclass the contract would be probed
    for what it can do instead of declaring it."""
    monkeypatch.setattr(sandbox_api, "BACKENDS", sandbox_api.BACKENDS.copy())

    class Loose:
        name = "loose"

    register_backend("loose", Loose)
    with pytest.raises(ConfigError, match=r"'loose': .*not a SandboxBackend subclass"):
        get_backend("loose")


def test_importing_the_package_does_not_load_backends() -> None:
    code = "import sys, dataspace.sandbox; print('dataspace.sandbox.local' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert result.stdout.strip() == "False"
