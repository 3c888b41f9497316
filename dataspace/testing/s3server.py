"""A real S3 server on loopback for tests and benchmarks: moto's server in a subprocess.

``moto_s3_server()`` starts ``python -m moto.server`` on 127.0.0.1 with a port the kernel
picks, waits until it answers, yields its endpoint URL and stops it on exit. It changes
nothing in this process (no environment variables, no patched clients). Tests talk to it
with the dummy credentials of ``s3_test_options``, passed explicitly, so the real
environment's credentials are never read.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dataspace.errors import InfrastructureError

logger = logging.getLogger(__name__)

TEST_CREDENTIALS = {
    "access_key_id": "testing",
    "secret_access_key": "testing",
    "region": "us-east-1",
}

_PORT_LINE = re.compile(rb"Running on http://127\.0\.0\.1:(\d+)")


def s3_test_options(endpoint_url: str, **overrides: Any) -> dict[str, Any]:
    """Options for ``open_store("s3://...")`` against a test server (dummy credentials).

    >>> s3_test_options("http://127.0.0.1:5000")["access_key_id"]
    'testing'
    """
    return {"endpoint_url": endpoint_url, **TEST_CREDENTIALS, **overrides}


@contextlib.contextmanager
def moto_s3_server(*, startup_timeout: float = 30.0) -> Iterator[str]:
    """Run moto's S3 server on 127.0.0.1 for the duration of the block.

    Args:
        startup_timeout: seconds to wait for the server to answer.

    Yields:
        The endpoint URL, e.g. ``http://127.0.0.1:40123``.

    Raises:
        InfrastructureError: moto is not installed or the server did not start.
    """
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        raise InfrastructureError(
            f"moto's server is needed for a loopback S3 (pip install 'moto[server]'): {exc}"
        ) from exc
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
    with tempfile.TemporaryDirectory(prefix="moto-s3-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=tmp,
            )
        try:
            port = _wait_for_port(proc, log_path, startup_timeout)
            endpoint = f"http://127.0.0.1:{port}"
            _wait_until_answering(proc, port, log_path, startup_timeout)
            logger.info("moto S3 server pid %d at %s", proc.pid, endpoint)
            yield endpoint
        finally:
            _stop(proc)


def _wait_for_port(proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = _PORT_LINE.search(log_path.read_bytes())
        if match:
            return int(match.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise InfrastructureError(
        f"moto S3 server did not start (exit code {proc.poll()}): {_tail(log_path)}"
    )


def _wait_until_answering(
    proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/moto-api/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.05)
        finally:
            conn.close()
    raise InfrastructureError(
        f"moto S3 server on port {port} did not answer in {timeout:.0f}s: {_tail(log_path)}"
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _tail(path: Path, limit: int = 400) -> str:
    try:
        text = path.read_bytes()[-limit:].decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())


def create_bucket(endpoint_url: str, name: str) -> None:
    """Create bucket ``name`` on a test server (dummy credentials); an existing one is kept.

    Args:
        endpoint_url: the server, as yielded by ``moto_s3_server``.
        name: the bucket name.
    """
    import boto3
    from botocore.config import Config

    client = boto3.session.Session(
        aws_access_key_id=TEST_CREDENTIALS["access_key_id"],
        aws_secret_access_key=TEST_CREDENTIALS["secret_access_key"],
        region_name=TEST_CREDENTIALS["region"],
    ).client("s3", endpoint_url=endpoint_url, config=Config(s3={"addressing_style": "path"}))
    try:
        client.create_bucket(Bucket=name)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    finally:
        client.close()
