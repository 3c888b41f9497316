"""``validate``, ``report``, ``export`` and ``rescore`` on ``s3://`` URIs, against moto's server.

Issue 24: ``dataspace validate s3://...`` treated the URI as a local path, and an ``s3://``
store with no endpoint configured failed without a word of ``DATASPACE_S3_ENDPOINT``.
"""

from __future__ import annotations

import shutil
import socket
import time

import pytest
from cli_helpers import cli_env, dataspace, short_ray_dir, write_spec

from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.timeout(900), pytest.mark.s3]

RELEASE = "s3://bench/releases/tiny"
STORE = "s3://bench/store"
RUN = f"{STORE}/runs/r1"


def _s3_env(endpoint: str | None, tmp_path, **extra: str) -> dict[str, str]:
    """The user's shell: test credentials, no AWS files or instance metadata."""
    from dataspace.testing.s3server import TEST_CREDENTIALS

    env = cli_env(
        AWS_ACCESS_KEY_ID=TEST_CREDENTIALS["access_key_id"],
        AWS_SECRET_ACCESS_KEY=TEST_CREDENTIALS["secret_access_key"],
        AWS_DEFAULT_REGION=TEST_CREDENTIALS["region"],
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
        DATASPACE_RELEASE_CACHE=str(tmp_path / "cache"),
        **extra,
    )
    for name in ("DATASPACE_S3_ENDPOINT", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
        env.pop(name, None)
    if endpoint is not None:
        env["DATASPACE_S3_ENDPOINT"] = endpoint
    return env


@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.integration
def test_commands_after_a_run_accept_s3_uris(tmp_path):
    """Guards: ``validate s3://...`` read as a local path; report, export, rescore on S3."""
    from dataspace.testing.s3server import create_bucket, moto_s3_server, s3_test_options

    local = write_tiny_release(tmp_path / "release", tasks=2)
    ray_dir = short_ray_dir()
    try:
        with moto_s3_server() as endpoint:
            create_bucket(endpoint, "bench")
            remote = open_store(RELEASE, **s3_test_options(endpoint))
            for p in local.rglob("*"):
                if p.is_file():
                    remote.put_file(p.relative_to(local).as_posix(), p)
            env = _s3_env(endpoint, tmp_path, RAY_TMPDIR=str(ray_dir))
            validate = dataspace("validate", RELEASE, "--require-gold", env=env)
            spec = write_spec(tmp_path / "s.yaml", RELEASE, STORE, [GOLD])
            run = dataspace("run", str(spec), env=env)
            report = dataspace("report", RUN, env=env)
            export = dataspace("export", RUN, "--agent", "gold", "--out", str(tmp_path / "b"),
                               env=env)  # fmt: skip
            rescore = dataspace("rescore", RUN, "--release", RELEASE, env=env)
            listed = set(open_store(RUN, **s3_test_options(endpoint)).list(""))
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert validate.stdout.startswith(f"{RELEASE} (synced to ")
    assert "2 tasks, all valid" in validate.stdout
    assert run.returncode == 0, run.stdout + run.stderr
    assert "accuracy 100.00% (2/2)" in run.stdout
    assert report.returncode == 0, report.stdout + report.stderr
    assert f"{RUN}/report.html" in report.stdout and "report.html" in listed
    # the run wrote each attempt's trace page as it finished; the report kept them
    assert "traces:   0 pages written, 2 kept" in report.stdout, report.stdout
    assert {"report/traces/r1/gold/task_1-1.html", "report/traces/r1/gold/task_2-1.html"} <= listed
    assert export.returncode == 0, export.stdout + export.stderr
    for task in ("task_1", "task_2"):
        assert (tmp_path / "b" / "predictions" / task / "prediction.csv").is_file()
    assert rescore.returncode == 0, rescore.stdout + rescore.stderr
    assert "rescored 2 attempts" in rescore.stdout and "0 verdict(s) changed" in rescore.stdout
    assert any(k.startswith("rescore-1/") for k in listed)


GOLD = {"name": "gold", "harness": "gold"}


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize(
    "args",
    [
        ["validate", RELEASE],
        ["report", RUN],
        ["export", RUN, "--agent", "gold", "--out", "bundle"],
        ["rescore", RUN],
    ],
    ids=["validate", "report", "export", "rescore"],
)
def test_unreachable_endpoint_names_dataspace_s3_endpoint(tmp_path, args):
    url = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    p = dataspace(*args, env=_s3_env(url, tmp_path), cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()[-1]
    assert f"could not reach the S3 endpoint {url}" in err
    assert "set DATASPACE_S3_ENDPOINT to its URL" in err
    assert "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize(
    "args", [["validate", RELEASE], ["report", RUN]], ids=["validate", "report"]
)
def test_no_endpoint_configured_names_dataspace_s3_endpoint(tmp_path, args):
    env = _s3_env(None, tmp_path)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env.pop(name)
    p = dataspace(*args, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()[-1]
    assert "no S3 credentials found" in err
    assert "no S3 endpoint is configured" in err and "set DATASPACE_S3_ENDPOINT" in err


def test_unreachable_default_endpoint_names_dataspace_s3_endpoint(tmp_path):
    """AWS's own endpoint, unreachable: here through a proxy that refuses (no network used)."""
    proxy = f"http://127.0.0.1:{_closed_port()}"
    env = _s3_env(None, tmp_path, HTTPS_PROXY=proxy, HTTP_PROXY=proxy)
    for name in ("NO_PROXY", "no_proxy", "https_proxy", "http_proxy"):
        env.pop(name, None)
    p = dataspace("report", RUN, env=env, cwd=tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    err = p.stderr.strip().splitlines()[-1]
    assert "could not reach the S3 endpoint (the AWS default)" in err
    assert "no S3 endpoint is configured" in err and "set DATASPACE_S3_ENDPOINT" in err
