"""Installing the native harnesses and reporting their state."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dataspace.agents.native import harness_status
from dataspace.agents.native.install import PINS, harness_state

REPO = Path(__file__).parents[2]


def _cli(*args: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.agents.native.install", *args],
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(root),
            "DATASPACE_HARNESS_ROOT": str(root),
        },
        timeout=900,
        check=False,
    )


def test_the_pins_are_the_papers():
    assert {n: p.version for n, p in PINS.items()} == {
        "codex": "0.145.0",
        "claude-code": "2.1.217",
        "grok-build": "0.2.106",
    }
    assert PINS["grok-build"].npm_package is None


def test_the_runtime_image_checks_the_same_pins():
    """Guards the cluster's harnesses drifting from the pins: the image copies this host's
    install (images/build.sh) and checks each version against its own ARGs, kept equal
    to PINS and to the smolagents requirement here."""
    text = (REPO / "images" / "Dockerfile.runtime").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    assert args["CODEX_VERSION"] == PINS["codex"].version
    assert args["CLAUDE_CODE_VERSION"] == PINS["claude-code"].version
    reqs = (REPO / "images" / "smolagents-requirements.txt").read_text().splitlines()
    assert f"smolagents=={args['SMOLAGENTS_VERSION']}" in reqs
    for check in ("codex-cli ${CODEX_VERSION}", "${CLAUDE_CODE_VERSION} (Claude Code)"):
        assert check in text
    assert '= "${SMOLAGENTS_VERSION}"' in text
    script = (REPO / "images" / "build.sh").read_text()
    assert "dataspace.agents.native.install --check codex claude-code" in script
    assert "smolagents-requirements.txt" in script


def test_a_missing_grok_build_says_how_to_add_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DATASPACE_HARNESS_ROOT", str(tmp_path))
    states = {s.name: s for s in harness_status()}
    grok = states["grok-build"]
    assert not grok.ready and grok.installed is None
    assert "not on a package registry" in (grok.fix or "")
    assert "--from" in (grok.fix or "")
    res = _cli("grok-build", root=tmp_path)
    assert res.returncode == 1 and "grok-build: error:" in res.stderr
    res = _cli("grok-build", "--from", str(tmp_path / "nope"), root=tmp_path)
    assert res.returncode == 1 and "no such file" in res.stderr


def test_grok_build_from_a_user_binary(tmp_path, monkeypatch):
    binary = tmp_path / "grok-download"
    binary.write_bytes(b"\x7fELF-stand-in")  # not a script: copied as the binary
    res = _cli("grok-build", "--from", str(binary), root=tmp_path / "root")
    # the copy happens; the version check then says the stand-in is not the pinned Grok
    assert res.returncode == 1 and "not ready" in res.stdout
    assert (tmp_path / "root" / "grok-build" / "bin" / "grok").is_file()
    good = tmp_path / "grok-good"
    good.write_text("#!/bin/sh\necho 'grok 0.2.106 (linux-x64)'\n")
    good.chmod(0o755)
    # a script is an installer: it is run with GROK_BIN_DIR pointing at the install
    installer = tmp_path / "install.sh"
    installer.write_text(f'#!/bin/sh\ncp {good} "$GROK_BIN_DIR/grok"\n')
    res = _cli("grok-build", "--from", str(installer), root=tmp_path / "root")
    assert res.returncode == 0 and "grok-build 0.2.106: ready" in res.stdout, res.stderr
    monkeypatch.setenv("DATASPACE_HARNESS_ROOT", str(tmp_path / "root"))
    assert harness_state("grok-build").ready


@pytest.mark.slow
def test_npm_install_of_codex_and_claude_code(tmp_path):
    """The pinned packages from npm, into a fresh root (npm's cache makes reruns fast)."""
    res = _cli("codex", "claude-code", root=tmp_path)
    if res.returncode != 0 and "npm pack" in res.stderr:
        pytest.fail(f"the pinned versions could not be fetched: {res.stderr}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["codex 0.145.0: ready", "claude-code 2.1.217: ready"]
    again = _cli("codex", "--check", root=tmp_path)
    assert again.returncode == 0 and again.stdout.strip() == "codex 0.145.0: ready"


def test_preflight_names_a_missing_cli_and_probes_the_upstream_base(tmp_path, monkeypatch):
    """Guards two preflight facts of native harnesses on the local backend: a CLI that is
    not installed stops the run with the fix (not a column of runtime errors), and the
    probe call goes where ``settings.upstream_base`` sends the harness's wire API."""
    from dataspace.runs.preflight import check_spec
    from dataspace.runs.spec import parse_spec
    from dataspace.testing.scripted_wire import ScriptedResponsesServer

    monkeypatch.setenv("DATASPACE_TEST_MODEL_KEY", "sk-preflight-test")
    monkeypatch.setenv("DATASPACE_HARNESS_ROOT", str(tmp_path / "no-harnesses"))
    with ScriptedResponsesServer({"*": []}) as responses:
        url = responses.url
        model = {
            "id": "backbone-model",
            "base_url": "http://127.0.0.1:9/v1",  # nothing listens: only upstream_base works
            "key_env": "DATASPACE_TEST_MODEL_KEY",
        }
        spec = parse_spec(
            {
                "run_id": "pf",
                "release": str(tmp_path),
                "store": str(tmp_path / "store"),
                "agents": [
                    {
                        "name": "codex",
                        "harness": "codex",
                        "model": model,
                        "settings": {"upstream_base": url},
                    }
                ],
                "sandbox": {"backend": "local"},
            },
            source="test",
        )
        report = check_spec(spec, check_release=False)
    by = {c.key: c for c in report.checks}
    install = by["agents[0].install"]
    assert not install.ok
    assert "codex 0.145.0 is not installed" in install.message
    assert "remove agent 'codex' from the spec" in install.message
    probe = by["agents[0].model.base_url/id"]
    assert probe.ok, probe.message
    assert url in probe.message


def test_preflight_says_where_native_pods_reach_the_relay(tmp_path, monkeypatch):
    """Guards the Kubernetes relay address: with neither ``relay_address`` nor ``$POD_IP``,
    a run whose attempts start here fails preflight with the fix (not at its first native
    attempt); on a Ray cluster the workers' own ``$POD_IP`` counts, so it is a warning."""
    from dataspace.runs.preflight import check_spec
    from dataspace.runs.spec import parse_spec

    def spec(options: dict, ray_address: str | None = None, harness: str = "codex"):
        raw = {
            "run_id": "pf",
            "release": str(tmp_path),
            "store": str(tmp_path / "store"),
            "agents": [{"name": harness, "harness": harness, "model": {"id": "m"}}],
            "sandbox": {"backend": "kubernetes", "image": "ds-runtime:1", "options": options},
        }
        if ray_address:
            raw["ray"] = {"address": ray_address}
        return parse_spec(raw, source="test")

    def relay(s):
        checks = check_spec(s, call_models=False, check_release=False).checks
        found = [c for c in checks if c.key == "sandbox.options.relay_address"]
        return found[0] if found else None

    monkeypatch.delenv("POD_IP", raising=False)
    missing = relay(spec({}))
    assert missing is not None and not missing.ok
    assert "set sandbox.options.relay_address or $POD_IP" in missing.message
    remote = relay(spec({}, ray_address="ray://127.0.0.1:1"))
    assert remote is not None and remote.ok and remote.warning
    assert "each Ray worker needs it" in remote.message
    given = relay(spec({"relay_address": "10.0.0.7"}))
    assert given is not None and given.ok and "10.0.0.7" in given.message
    monkeypatch.setenv("POD_IP", "10.0.0.9")
    assert "10.0.0.9" in relay(spec({})).message
    # Harnesses that run in the sandbox need no relay.
    assert relay(spec({}, harness="dataspace-agent")) is None
