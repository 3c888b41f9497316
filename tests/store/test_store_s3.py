"""What only the S3 store promises, against a real moto server on 127.0.0.1.

Failures are injected by a loopback proxy (``fault_proxy``) between the store and moto.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from store_fault_proxy import Fault, FaultProxy

from dataspace.errors import AlreadyExistsError, NotFoundError, StoreError
from dataspace.store import S3Store, open_store
from dataspace.testing import s3_test_options

BUCKET = "store-tests"

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def _count_calls(store: Any, operation: str) -> list[dict[str, Any]]:
    """Record the parameters of every ``operation`` call the store's client makes."""
    calls: list[dict[str, Any]] = []
    store.client.meta.events.register(
        f"before-parameter-build.s3.{operation}", lambda params, **_: calls.append(dict(params))
    )
    return calls


def _no_retries(**more: Any) -> dict[str, Any]:
    return {"max_attempts": 1, "backoff_base": 0.01, "backoff_cap": 0.05, **more}


# -- multipart -------------------------------------------------------------------------------


def test_large_upload_is_multipart(make_s3_store: Any, tmp_path: Path) -> None:
    store = make_s3_store(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    data = os.urandom(20 * MiB)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    store.put_file("big.bin", src)
    head = store.client.head_object(Bucket=store.bucket, Key=store.prefix + "big.bin")
    assert head["ETag"].strip('"').endswith("-4")
    assert head["ContentLength"] == len(data)

    gets = _count_calls(store, "GetObject")
    dest = tmp_path / "dl" / "big.bin"
    store.get_file("big.bin", dest)
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert len(gets) == 4 and all("Range" in g for g in gets)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["big.bin"]


def test_large_bytes_are_multipart_too(make_s3_store: Any) -> None:
    store = make_s3_store(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    data = os.urandom(11 * MiB)
    store.put_bytes("b.bin", data)
    head = store.client.head_object(Bucket=store.bucket, Key=store.prefix + "b.bin")
    assert head["ETag"].strip('"').endswith("-3")
    assert store.get_bytes("b.bin") == data


def test_small_upload_is_a_single_put(make_s3_store: Any) -> None:
    store = make_s3_store()
    store.put_bytes("s.json", b"{}")
    head = store.client.head_object(Bucket=store.bucket, Key=store.prefix + "s.json")
    assert "-" not in head["ETag"].strip('"')


def test_write_once_multipart_refused_and_upload_aborted(
    make_s3_store: Any, tmp_path: Path
) -> None:
    store = make_s3_store(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(12 * MiB))
    store.put_file("once.bin", src, overwrite=False)
    with pytest.raises(AlreadyExistsError, match=r"once\.bin"):
        store.put_file("once.bin", src, overwrite=False)
    uploads = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=store.prefix)
    assert uploads.get("Uploads", []) == []


# -- listing ---------------------------------------------------------------------------------


def test_listing_is_paginated_and_lazy(make_s3_store: Any) -> None:
    store = make_s3_store(list_page_size=10)
    keys = [f"k/{i:03d}" for i in range(35)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda k: store.put_bytes(k, b"x"), keys))
    pages = _count_calls(store, "ListObjectsV2")
    it = store.list("k")
    assert next(it) == "k/000"
    assert len(pages) == 1
    assert ["k/000", *it] == keys
    assert len(pages) == 4
    assert all(p["MaxKeys"] == 10 for p in pages)


def test_listing_resumes_after_a_failed_page(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    direct = make_s3_store()
    keys = [f"k/{i:03d}" for i in range(25)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda k: direct.put_bytes(k, b"x"), keys))
    store = make_s3_store(
        endpoint=fault_proxy.endpoint, prefix=direct.prefix, list_page_size=10, **_no_retries()
    )
    it = store.list()
    first = [next(it) for _ in range(10)]
    fault_proxy.add(Fault(times=1, match=lambda method, path, headers: method == "GET"))
    assert first + list(it) == keys
    lists = fault_proxy.requests("GET")
    assert [s.injected for s in lists] == [False, True, False, False]
    assert "start-after=" in lists[2].path


def test_folder_markers_and_foreign_names_are_skipped(make_s3_store: Any) -> None:
    store = make_s3_store()
    store.put_bytes("real/k", b"1")
    for odd in ("real/", "real//double", "real/../up"):
        store.client.put_object(Bucket=store.bucket, Key=store.prefix + odd, Body=b"")
    assert list(store.list()) == ["real/k"]


def test_delete_prefix_batches_of_1000(make_s3_store: Any) -> None:
    store = make_s3_store()
    keys = [f"del/{i:04d}" for i in range(1003)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: store.put_bytes(k, b""), keys))
    store.put_bytes("keep/k", b"1")
    batches = _count_calls(store, "DeleteObjects")
    assert store.delete_prefix("del") == 1003
    assert [len(b["Delete"]["Objects"]) for b in batches] == [1000, 3]
    assert list(store.list()) == ["keep/k"]


# -- retries ---------------------------------------------------------------------------------


def test_our_backoff_retries_503_then_succeeds(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, backoff_attempts=4, **_no_retries())
    fault_proxy.add(Fault(times=2, match=lambda method, path, headers: method == "PUT"))
    store.put_bytes("r/k", b"payload")
    puts = fault_proxy.requests("PUT")
    assert [s.injected for s in puts] == [True, True, False]
    fault_proxy.add(Fault(times=2, status=500, code="InternalError"))
    assert store.get_bytes("r/k") == b"payload"


def test_botocore_retries_are_the_first_layer(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(
        endpoint=fault_proxy.endpoint,
        max_attempts=3,
        backoff_attempts=1,
        retry_mode="standard",
    )
    store.put_bytes("r/k", b"v")
    fault_proxy.add(Fault(times=2, match=lambda method, path, headers: method == "GET"))
    assert store.get_bytes("r/k") == b"v"
    assert [s.injected for s in fault_proxy.requests("GET")] == [True, True, False]


def test_retries_are_bounded_and_the_error_names_the_uri(
    make_s3_store: Any, fault_proxy: FaultProxy
) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, backoff_attempts=3, **_no_retries())
    fault_proxy.add(Fault(times=100))
    with pytest.raises(StoreError) as err:
        store.get_bytes("r/k")
    message = str(err.value)
    assert store.url_for("r/k") in message
    assert "after 3 tries" in message and "SlowDown" in message
    assert len(fault_proxy.requests()) == 3


def test_connection_errors_are_retried_then_reported(make_s3_store: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = make_s3_store(
        endpoint=f"http://127.0.0.1:{port}", backoff_attempts=2, connect_timeout=1, **_no_retries()
    )
    with pytest.raises(StoreError, match=r"after 2 tries: EndpointConnectionError"):
        store.put_bytes("k", b"v")


def test_not_found_is_not_retried(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, backoff_attempts=4, **_no_retries())
    with pytest.raises(NotFoundError):
        store.get_bytes("missing")
    assert len(fault_proxy.requests()) == 1


# -- write-once ------------------------------------------------------------------------------


def test_write_once_sends_if_none_match(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, **_no_retries())
    store.put_bytes("a", b"1", overwrite=False)
    store.put_bytes("b", b"1")
    puts = fault_proxy.requests("PUT")
    assert puts[0].headers.get("if-none-match") == "*"
    assert "if-none-match" not in puts[1].headers


def test_lost_answer_to_a_write_once_put_is_not_a_conflict(
    make_s3_store: Any, fault_proxy: FaultProxy
) -> None:
    """Regression: a retried conditional PUT whose first try landed must not raise."""
    store = make_s3_store(endpoint=fault_proxy.endpoint, **_no_retries())
    fault_proxy.add(
        Fault(times=1, after_forward=True, match=lambda method, path, headers: method == "PUT")
    )
    store.put_bytes("once", b"mine", overwrite=False)
    assert store.get_bytes("once") == b"mine"
    with pytest.raises(AlreadyExistsError):
        store.put_bytes("once", b"again", overwrite=False)


def _conditional_unsupported(method: str, path: str, headers: dict[str, str]) -> bool:
    return method == "PUT" and headers.get("if-none-match") == "*"


def test_auto_falls_back_to_head_then_put(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, **_no_retries())
    fault_proxy.add(
        Fault(times=100, status=501, code="NotImplemented", match=_conditional_unsupported)
    )
    store.put_bytes("k", b"first", overwrite=False)
    with pytest.raises(AlreadyExistsError):
        store.put_bytes("k", b"second", overwrite=False)
    assert store.get_bytes("k") == b"first"
    conditional = [s for s in fault_proxy.requests("PUT") if "if-none-match" in s.headers]
    assert len(conditional) == 1  # the fallback is remembered
    assert len(fault_proxy.requests("HEAD")) == 2


def test_native_mode_never_falls_back(make_s3_store: Any, fault_proxy: FaultProxy) -> None:
    store = make_s3_store(
        endpoint=fault_proxy.endpoint, conditional_writes="native", **_no_retries()
    )
    fault_proxy.add(
        Fault(times=100, status=501, code="NotImplemented", match=_conditional_unsupported)
    )
    with pytest.raises(StoreError, match="NotImplemented"):
        store.put_bytes("k", b"v", overwrite=False)


def test_head_mode_skips_the_conditional_header(
    make_s3_store: Any, fault_proxy: FaultProxy
) -> None:
    store = make_s3_store(endpoint=fault_proxy.endpoint, conditional_writes="head")
    store.put_bytes("k", b"1", overwrite=False)
    with pytest.raises(AlreadyExistsError):
        store.put_bytes("k", b"2", overwrite=False)
    assert all("if-none-match" not in s.headers for s in fault_proxy.requests("PUT"))


def test_probe_conditional_writes(make_s3_store: Any) -> None:
    store = make_s3_store()
    assert store.probe_conditional_writes() is True
    assert list(store.list()) == []


# -- configuration ---------------------------------------------------------------------------


def test_endpoint_from_environment(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    options = s3_test_options(moto_endpoint)
    del options["endpoint_url"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("DATASPACE_S3_ENDPOINT", moto_endpoint)
    store = open_store(f"s3://{BUCKET}/env-test", **options)
    assert store.options.endpoint_url == moto_endpoint
    store.put_bytes("k", b"v")
    assert store.get_bytes("k") == b"v"
    store.delete_prefix("")
    monkeypatch.delenv("DATASPACE_S3_ENDPOINT")
    assert open_store(f"s3://{BUCKET}", **options).options.endpoint_url == "http://127.0.0.1:9"


def test_store_survives_pickling(make_s3_store: Any) -> None:
    store = make_s3_store()
    store.put_bytes("k", b"v")
    clone = pickle.loads(pickle.dumps(store))
    assert isinstance(clone, S3Store)
    assert clone.uri == store.uri
    assert clone.get_bytes("k") == b"v"
    clone.close()


def test_missing_bucket_says_so(moto_endpoint: str) -> None:
    store = open_store("s3://no-such-bucket-here/x", **s3_test_options(moto_endpoint))
    with pytest.raises(StoreError, match="does not exist"):
        store.put_bytes("k", b"v")


def test_local_path_is_none(make_s3_store: Any) -> None:
    store = make_s3_store()
    assert store.local_path("a/b") is None
    assert store.url_for("a/b") == f"{store.uri}a/b"
