"""``release: s3://...`` in ``dataspace run``: the release is synced into the cache and run."""

from __future__ import annotations

import shutil

import pytest
from cli_helpers import cli_env, dataspace, short_ray_dir, write_spec

from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.integration,
]


def test_run_reads_a_release_from_s3(tmp_path):
    """Guards the CLI path: an s3:// release used to become a local path ``.../s3:/...``."""
    from dataspace.testing.s3server import (
        TEST_CREDENTIALS,
        create_bucket,
        moto_s3_server,
        s3_test_options,
    )

    local = write_tiny_release(tmp_path / "release", tasks=2)
    ray_dir = short_ray_dir()
    try:
        with moto_s3_server() as endpoint:
            create_bucket(endpoint, "bench")
            remote = open_store("s3://bench/releases/tiny", **s3_test_options(endpoint))
            for p in local.rglob("*"):
                if p.is_file():
                    remote.put_file(p.relative_to(local).as_posix(), p)
            spec = write_spec(
                tmp_path / "s.yaml",
                "s3://bench/releases/tiny",
                tmp_path / "store",
                [{"name": "gold", "harness": "gold"}],
            )
            env = cli_env(
                ray_dir,
                DATASPACE_S3_ENDPOINT=endpoint,
                AWS_ACCESS_KEY_ID=TEST_CREDENTIALS["access_key_id"],
                AWS_SECRET_ACCESS_KEY=TEST_CREDENTIALS["secret_access_key"],
                AWS_DEFAULT_REGION=TEST_CREDENTIALS["region"],
                DATASPACE_RELEASE_CACHE=str(tmp_path / "cache"),
            )
            p = dataspace("run", str(spec), env=env)
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "accuracy 100.00% (2/2)" in p.stdout
    assert any((tmp_path / "cache" / "uri").glob("*/release.json"))
