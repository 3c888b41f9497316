"""Opening stores by URI, options, key rules and the docstring examples."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataspace.errors import ConfigError
from dataspace.store import FileStore, MemoryStore, S3Store, known_schemes, open_store
from dataspace.store.keys import key_problem
from dataspace.store.retry import Backoff, call_with_backoff


def test_known_schemes() -> None:
    assert known_schemes() == ["file", "memory", "s3"]


def test_unknown_scheme_lists_known_ones_and_the_install_hint() -> None:
    with pytest.raises(ConfigError) as err:
        open_store("gs://bucket/prefix")
    message = str(err.value)
    assert "gs://bucket/prefix" in message and "'gs'" in message
    assert "known schemes: file, memory, s3 (needs boto3: pip install boto3)" in message
    assert "\n" not in message


def test_schemes_are_case_insensitive(tmp_path: Path) -> None:
    assert isinstance(open_store(f"FILE://{tmp_path}"), FileStore)
    assert isinstance(open_store("S3://bucket/x", endpoint_url="http://127.0.0.1:9"), S3Store)


def test_s3_uri_parts() -> None:
    store = open_store("s3://bench/releases/v1/", endpoint_url="http://127.0.0.1:9")
    assert isinstance(store, S3Store)
    assert (store.bucket, store.prefix, store.uri) == ("bench", "releases/v1/", store.uri)
    assert store.url_for("a/b") == "s3://bench/releases/v1/a/b"
    assert open_store("s3://bench", endpoint_url="http://127.0.0.1:9").prefix == ""


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("s3://", "no bucket"),
        ("s3:///prefix", "no bucket"),
        ("s3://b/a/../c", "'..'"),
        ("file://otherhost/data", "not host 'otherhost'"),
        ("file://relative", "not host"),
        ("memory://a/b", "no '/'"),
        ("", "non-empty"),
    ],
)
def test_malformed_uris(uri: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        open_store(uri)


def test_unknown_option_names_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown store option\(s\) fsnyc; known: fsync"):
        open_store(str(tmp_path), fsnyc=False)
    with pytest.raises(ConfigError, match="list_page_size"):
        open_store("s3://b/p", list_pagesize=10)
    with pytest.raises(ConfigError, match="takes no options"):
        open_store("memory://", fsync=False)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"list_page_size": 0}, "list_page_size must be 1..1000"),
        ({"multipart_chunksize": 1024}, "at least 5 MiB"),
        ({"conditional_writes": "maybe"}, "conditional_writes must be one of"),
        ({"retry_mode": "eager"}, "retry_mode must be one of"),
        ({"backoff_attempts": 0}, "at least 1"),
    ],
)
def test_bad_s3_option_values(options: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        open_store("s3://bucket/p", endpoint_url="http://127.0.0.1:9", **options)


def test_named_memory_stores_share_objects() -> None:
    first = open_store("memory://shared-registry-test")
    second = open_store("memory://shared-registry-test")
    assert isinstance(first, MemoryStore)
    first.put_bytes("k", b"v")
    assert second.get_bytes("k") == b"v"
    assert not open_store("memory://").exists("k")
    first.clear()
    assert not second.exists("k")


def test_opening_is_cheap_and_lazy() -> None:
    """Opening an s3:// store makes no connection (the endpoint here is closed)."""
    store = open_store("s3://bucket/p", endpoint_url="http://127.0.0.1:9")
    assert repr(store) == "S3Store('s3://bucket/p/', endpoint='http://127.0.0.1:9')"


_segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"),
    min_size=1,
    max_size=20,
).filter(lambda s: s not in (".", "..") and not s.startswith(".dstmp-"))


@settings(max_examples=60, deadline=None)
@given(st.lists(_segment, min_size=1, max_size=4))
def test_valid_keys_roundtrip_on_disk(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    key = "/".join(parts)
    assert key_problem(key) is None
    store = open_store(str(tmp_path_factory.mktemp("keys")), fsync=False)
    store.put_bytes(key, key.encode())
    assert list(store.list()) == [key]
    assert store.get_bytes(key) == key.encode()


def test_backoff_gives_up_after_the_bounded_tries() -> None:
    delays: list[float] = []
    calls: list[int] = []

    def always_fails() -> None:
        calls.append(1)
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError) as err:
        call_with_backoff(
            always_fails,
            policy=Backoff(attempts=4, base=0.5, cap=1.0),
            describe="op",
            transient=lambda exc: True,
            sleep=delays.append,
            rng=lambda: 1.0,
        )
    assert len(calls) == 4
    assert delays == [0.5, 1.0, 1.0]
    assert err.value.retry_attempts == 4  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "module",
    [
        "dataspace.store",
        "dataspace.store.keys",
        "dataspace.store.local",
        "dataspace.store.memory",
        "dataspace.store.retry",
        "dataspace.store.s3",
        "dataspace.store.uris",
        "dataspace.testing.s3server",
    ],
)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0
    assert result.attempted > 0
