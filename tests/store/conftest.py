"""Fixtures of the store tests: one moto S3 server per session, a fault-injecting proxy."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_fault_proxy import FaultProxy, ProxyHandler, ProxyServer

from dataspace.store import Store, open_store

BUCKET = "store-tests"

MiB = 1024 * 1024


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    from dataspace.testing import create_bucket, moto_s3_server

    with moto_s3_server() as endpoint:
        create_bucket(endpoint, BUCKET)
        yield endpoint


@pytest.fixture
def make_s3_store(moto_endpoint: str) -> Iterator[Callable[..., Any]]:
    """Open S3 stores under a fresh prefix of the test bucket; closes them afterwards."""
    from dataspace.testing import s3_test_options

    opened: list[Any] = []

    def make(endpoint: str | None = None, prefix: str | None = None, **overrides: Any) -> Any:
        where = prefix if prefix is not None else uuid.uuid4().hex
        options = s3_test_options(endpoint or moto_endpoint, **overrides)
        store = open_store(f"s3://{BUCKET}/{where}", **options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture(params=["file", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """The same contract, once per backend."""
    if request.param == "file":
        return open_store(str(tmp_path / "store"))
    if request.param == "memory":
        return open_store("memory://")
    make = request.getfixturevalue("make_s3_store")
    return make(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)


@pytest.fixture
def fault_proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    """A fault-injecting proxy to the session's moto server, on 127.0.0.1."""
    proxy = FaultProxy(upstream=moto_endpoint)
    server = ProxyServer(("127.0.0.1", 0), ProxyHandler)
    server.proxy = proxy
    proxy.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
    )
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
