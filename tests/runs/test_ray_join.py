"""Joining a Ray cluster (``ray.address``): the real cause of a failed join, on screen.

One real head on loopback with token authentication (``RAY_AUTH_MODE=token``) for the
module. Each case runs ``dataspace run SPEC`` as a user would, without ``-v``, and checks
the one screen line, the exit code and that nothing was recorded in the store.
"""

from __future__ import annotations

import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import cli_env, dataspace, write_spec

from dataspace.testing.ray_head import RayHead, free_ports
from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.timeout(300)]

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    ray = shutil.which("ray", path=str(VENV_BIN))
    if ray is None:
        pytest.skip("the ray command is not installed in this environment")
    with RayHead(ray, env=cli_env(), token=secrets.token_hex(32)) as h:
        yield h


def _run(tmp_path: Path, address: str, env: dict[str, str]):
    release = write_tiny_release(tmp_path / "rel", tasks=1)
    spec = write_spec(
        tmp_path / "spec.yaml",
        release,
        tmp_path / "store",
        [{"name": "gold", "harness": "gold"}],
        ray={"address": address},
    )
    t0 = time.monotonic()
    proc = dataspace("run", str(spec), env=env, timeout=120)
    return proc, time.monotonic() - t0


def _error_line(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if "ray.address" in ln]
    assert lines, proc.stdout + proc.stderr
    return lines[-1]


def _nothing_recorded(tmp_path: Path) -> None:
    assert not (tmp_path / "store" / "runs" / "r1" / "spec.json").exists()


def test_a_missing_token_is_named_with_its_fix(head: RayHead, tmp_path: Path) -> None:
    """Guards the join without a token: "Failed to connect ... the machine may be busy",
    InvalidAuthToken only under -v, and the spec recorded anyway."""
    env = {k: v for k, v in cli_env().items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token of the user
    proc, seconds = _run(tmp_path, head.gcs, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _error_line(proc)
    assert "InvalidAuthToken" in line and "no token" in line, line
    assert "RAY_AUTH_MODE=token RAY_AUTH_TOKEN=" in line and "machine may be busy" not in line
    assert "Traceback" not in proc.stdout + proc.stderr
    assert seconds < 60, seconds  # not Ray's 20 s of retries per try
    _nothing_recorded(tmp_path)


def test_a_wrong_token_is_named_with_its_fix(head: RayHead, tmp_path: Path) -> None:
    """Guards the join with another cluster's token: the refusal and where the token came from."""
    env = head.client_env(cli_env())
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    proc, _ = _run(tmp_path, head.gcs, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _error_line(proc)
    assert "refused the token" in line and "$RAY_AUTH_TOKEN" in line, line
    assert "InvalidAuthToken" in line and "ray get-auth-token" in line, line
    _nothing_recorded(tmp_path)


def test_a_port_where_nothing_listens_is_named(head: RayHead, tmp_path: Path) -> None:
    """Guards ray.address with a wrong port: one line naming it, nothing recorded."""
    (port,) = free_ports(1)
    proc, seconds = _run(tmp_path, f"127.0.0.1:{port}", head.client_env(cli_env()))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _error_line(proc)
    assert f"nothing answers at 127.0.0.1:{port}" in line and "ray start --head" in line, line
    assert seconds < 60, seconds
    _nothing_recorded(tmp_path)


def test_the_right_token_joins_and_runs(head: RayHead, tmp_path: Path) -> None:
    """Guards the check itself: the cluster's token passes it and the run finishes there."""
    from dataspace.errors import SandboxError
    from dataspace.sandbox.local import LocalBackend

    try:
        LocalBackend(state_dir=tmp_path / "probe-state")
    except SandboxError as exc:
        pytest.skip(f"the local sandbox cannot run here: {exc}")
    proc, _ = _run(tmp_path, head.gcs, head.client_env(cli_env()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ray.address: {head.gcs} answers (Ray " in proc.stdout, proc.stdout
    assert "gold: accuracy 100.00% (1/1)" in proc.stdout, proc.stdout


_SET_VERSIONS = """
import json, sys
from ray._common.usage import usage_constants
from ray._private import ray_constants
from ray._raylet import GcsClient
client = GcsClient(address=sys.argv[1])
key, ns = usage_constants.CLUSTER_METADATA_KEY, ray_constants.KV_NAMESPACE_CLUSTER
if sys.argv[2] == "read":
    print(client.internal_kv_get(key, namespace=ns).decode())
else:
    client.internal_kv_put(key, sys.argv[2].encode(), True, namespace=ns)
"""


def _versions(head: RayHead, value: str = "read") -> str:
    """Read (or overwrite) the versions the head recorded for its cluster, in its GCS."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _SET_VERSIONS, head.gcs, value],
        env=head.client_env(cli_env()),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout.strip()


def test_a_cluster_of_other_versions_is_named(head: RayHead, tmp_path: Path) -> None:
    """Guards a Ray version mismatch: Ray's multi-line error cut to its last line
    ("Python: 3.11.7") after the spec was recorded."""
    import json

    recorded = _versions(head)
    other = {**json.loads(recorded), "ray_version": "2.0.0"}
    _versions(head, json.dumps(other))
    try:
        proc, _ = _run(tmp_path, head.gcs, head.client_env(cli_env()))
    finally:
        _versions(head, recorded)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = _error_line(proc)
    assert "version mismatch: the cluster runs Ray 2.0.0 on Python" in line, line
    assert "pip install ray==2.0.0" in line, line
    _nothing_recorded(tmp_path)
