"""The Store contract, run against every backend (file, memory, s3 on a moto server)."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from dataspace.errors import AlreadyExistsError, NotFoundError, StoreError
from dataspace.store import Store

MiB = 1024 * 1024


def test_is_a_store(store: Store) -> None:
    assert isinstance(store, Store)
    assert store.uri


def test_put_get_bytes_roundtrip(store: Store) -> None:
    store.put_bytes("runs/r1/spec.json", b'{"a": 1}')
    assert store.get_bytes("runs/r1/spec.json") == b'{"a": 1}'
    assert store.exists("runs/r1/spec.json")
    assert not store.exists("runs/r1/other.json")


def test_empty_object(store: Store) -> None:
    store.put_bytes("empty", b"")
    assert store.get_bytes("empty") == b""
    assert store.exists("empty")


def test_overwrite_replaces_content(store: Store) -> None:
    store.put_bytes("a.txt", b"old")
    store.put_bytes("a.txt", b"new")
    assert store.get_bytes("a.txt") == b"new"


def test_overwrite_false_refuses_second_write(store: Store) -> None:
    store.put_bytes("attempts/gold/task_1/1/run.json", b"first", overwrite=False)
    with pytest.raises(AlreadyExistsError, match=r"task_1/1/run\.json"):
        store.put_bytes("attempts/gold/task_1/1/run.json", b"second", overwrite=False)
    assert store.get_bytes("attempts/gold/task_1/1/run.json") == b"first"


def test_overwrite_false_refuses_file_too(store: Store, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    store.put_file("once.bin", src, overwrite=False)
    with pytest.raises(AlreadyExistsError):
        store.put_file("once.bin", src, overwrite=False)
    assert store.get_bytes("once.bin") == b"payload"


def test_put_file_get_file(store: Store, tmp_path: Path) -> None:
    src = tmp_path / "in" / "data.csv"
    src.parent.mkdir()
    src.write_bytes(b"a,b\n1,2\n")
    store.put_file("output/task_3/gold.csv", src)
    dest = tmp_path / "out" / "deep" / "gold.csv"
    store.get_file("output/task_3/gold.csv", dest)
    assert dest.read_bytes() == b"a,b\n1,2\n"
    assert [p.name for p in dest.parent.iterdir()] == ["gold.csv"]


def test_large_file_roundtrip(store: Store, tmp_path: Path) -> None:
    """Six MiB crosses the 5 MiB multipart threshold the s3 variant is opened with."""
    data = os.urandom(6 * MiB + 123)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    store.put_file("big/big.bin", src)
    dest = tmp_path / "back.bin"
    store.get_file("big/big.bin", dest)
    assert hashlib.sha256(dest.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert store.get_bytes("big/big.bin") == data


def test_get_missing_names_the_uri(store: Store, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError) as err:
        store.get_bytes("no/such/key.json")
    assert store.url_for("no/such/key.json") in str(err.value)
    with pytest.raises(NotFoundError):
        store.get_file("no/such/key.json", tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_list_is_sorted_recursive_and_folder_scoped(store: Store) -> None:
    keys = ["b", "a/z", "a/b/c", "a-c", "a/b0", "r1/x", "r10/y", "r1/sub/deep/k"]
    for key in keys:
        store.put_bytes(key, key.encode())
    assert list(store.list()) == sorted(keys)
    assert list(store.list("a")) == ["a/b/c", "a/b0", "a/z"]
    assert list(store.list("a/")) == ["a/b/c", "a/b0", "a/z"]
    assert list(store.list("r1")) == ["r1/sub/deep/k", "r1/x"]
    assert list(store.list("nothing/here")) == []


def test_list_many_keys(store: Store) -> None:
    keys = [f"many/{i:04d}.json" for i in range(120)]
    for key in keys:
        store.put_bytes(key, b"{}")
    assert list(store.list("many")) == keys


def test_list_is_lazy(store: Store) -> None:
    store.put_bytes("lazy/1", b"1")
    it = store.list("lazy")
    assert iter(it) is it
    assert next(it) == "lazy/1"


def test_delete(store: Store) -> None:
    store.put_bytes("d/k", b"1")
    store.delete("d/k")
    assert not store.exists("d/k")
    store.delete("d/k")  # missing: not an error
    with pytest.raises(NotFoundError):
        store.get_bytes("d/k")


def test_delete_prefix_counts_and_spares_siblings(store: Store) -> None:
    for key in ["runs/r1/a", "runs/r1/b/c", "runs/r10/a", "runs/r2/a"]:
        store.put_bytes(key, b"x")
    assert store.delete_prefix("runs/r1") == 2
    assert list(store.list()) == ["runs/r10/a", "runs/r2/a"]
    assert store.delete_prefix("runs/r1") == 0
    assert store.delete_prefix("") == 2
    assert list(store.list()) == []


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("/abs/key", "absolute"),
        ("a/../b", "'..'"),
        ("..", "'..'"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("", "empty key"),
        ("a\\b", "backslash"),
        ("a/./b", "'.'"),
        ("a\nb", "control character"),
        ("x/.dstmp-123", "reserved"),
    ],
)
def test_bad_keys_are_refused_with_one_line(store: Store, key: str, problem: str) -> None:
    for call in (
        lambda: store.put_bytes(key, b"x"),
        lambda: store.get_bytes(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.url_for(key),
    ):
        with pytest.raises(StoreError) as err:
            call()
        message = str(err.value)
        assert problem in message
        assert repr(key) in message
        assert "\n" not in message


def test_bad_prefix_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="invalid prefix"):
        list(store.list("../up"))
    with pytest.raises(StoreError, match="invalid prefix"):
        store.delete_prefix("/abs")


def test_url_for_names_the_key(store: Store) -> None:
    url = store.url_for("output/task_1/gold.csv")
    assert url.startswith(store.uri.rstrip("/") + "/")
    assert url.endswith("output/task_1/gold.csv")


def test_put_file_missing_source(store: Store, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"missing\.bin"):
        store.put_file("k", tmp_path / "missing.bin")
    assert not store.exists("k")


def test_no_partial_objects_visible_in_list(store: Store) -> None:
    """Objects being written never show up half-written, and no temporary names leak."""
    payload = os.urandom(256 * 1024)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            i = 0
            while not stop.is_set() and i < 40:
                store.put_bytes(f"w/{i % 4}", payload)
                i += 1
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(20):
            for key in store.list("w"):
                assert key.startswith("w/") and key[2:] in {"0", "1", "2", "3"}
    finally:
        stop.set()
        thread.join()
    assert not errors
    for key in store.list("w"):
        assert store.get_bytes(key) == payload


@pytest.mark.parametrize("backend", ["file", "memory"])
def test_write_once_race_has_one_winner(backend: str, tmp_path: Path) -> None:
    """Racing write-once puts: exactly one succeeds (file: os.link; memory: a lock)."""
    from dataspace.store import open_store

    store = open_store(str(tmp_path / "s")) if backend == "file" else open_store("memory://")
    barrier = threading.Barrier(8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        barrier.wait()
        try:
            store.put_bytes("once", str(i).encode(), overwrite=False)
            result = "won"
        except AlreadyExistsError:
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["lost"] * 7 + ["won"]
    assert store.get_bytes("once").decode() in {str(i) for i in range(8)}
