"""What only the file store promises: paths, temp files, atomic replacement on disk."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dataspace.errors import StoreError
from dataspace.store import FileStore, open_store
from dataspace.store.keys import TEMP_MARK


def test_local_path_and_uri(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/my store")
    assert isinstance(store, FileStore)
    store.put_bytes("a/b c.json", b"{}")
    path = store.local_path("a/b c.json")
    assert path == tmp_path / "my store" / "a" / "b c.json"
    assert path is not None and path.read_bytes() == b"{}"
    assert store.uri == (tmp_path / "my store").as_uri()
    assert store.url_for("a/b c.json").endswith("/my%20store/a/b%20c.json")
    assert open_store(store.uri).get_bytes("a/b c.json") == b"{}"


def test_plain_paths_mean_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("relative/folder")
    assert isinstance(store, FileStore)
    store.put_bytes("k", b"v")
    assert (tmp_path / "relative" / "folder" / "k").read_bytes() == b"v"


def test_stray_temp_files_are_not_listed(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.put_bytes("d/real", b"1")
    (tmp_path / "d" / f"{TEMP_MARK}deadbeef").write_bytes(b"half-written")
    (tmp_path / f"{TEMP_MARK}0001").write_bytes(b"half-written")
    assert list(store.list()) == ["d/real"]
    assert store.delete_prefix("") == 1


def test_no_temp_files_left_after_writes(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 10_000)
    store.put_bytes("a/b", b"1")
    store.put_file("a/c", src)
    store.put_bytes("a/once", b"1", overwrite=False)
    with pytest.raises(StoreError):
        store.put_bytes("a/once", b"2", overwrite=False)
    store.get_file("a/c", tmp_path / "dl" / "c")
    leftovers = [p for p in tmp_path.rglob("*") if p.name.startswith(TEMP_MARK)]
    assert leftovers == []


def test_reader_never_sees_partial_content(tmp_path: Path) -> None:
    """A reader racing an overwriting writer sees one whole version or the other."""
    store = open_store(str(tmp_path), fsync=False)
    size = 2 * 1024 * 1024
    versions = [bytes([65]) * size, bytes([66]) * size]
    store.put_bytes("hot.bin", versions[0])
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            store.put_bytes("hot.bin", versions[i % 2])
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    seen = set()
    try:
        for _ in range(150):
            data = store.get_bytes("hot.bin")
            assert data in versions
            seen.add(data[:1])
    finally:
        stop.set()
        thread.join()
    assert seen <= {b"A", b"B"}


def test_write_once_keeps_the_first_file_on_disk(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.put_bytes("k", b"first", overwrite=False)
    inode = os.stat(tmp_path / "k").st_ino
    with pytest.raises(StoreError):
        store.put_bytes("k", b"second", overwrite=False)
    assert os.stat(tmp_path / "k").st_ino == inode
    assert (tmp_path / "k").stat().st_nlink == 1


def test_new_files_get_normal_permissions(tmp_path: Path) -> None:
    """Regression: temp files made with mkstemp would publish keys as 0600."""
    store = open_store(str(tmp_path))
    store.put_bytes("k", b"v")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o666 & ~umask


def test_key_and_folder_conflict_is_one_clear_line(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.put_bytes("a/b", b"1")
    with pytest.raises(StoreError, match="folder of that name exists") as err:
        store.put_bytes("a", b"2")
    assert "\n" not in str(err.value)
    store.put_bytes("f", b"1")
    with pytest.raises(StoreError, match="not a folder"):
        store.put_bytes("f/g", b"2")


def test_deletes_prune_empty_folders(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "root"))
    store.put_bytes("x/y/z/k", b"1")
    store.put_bytes("x/keep", b"1")
    store.delete("x/y/z/k")
    assert not (tmp_path / "root" / "x" / "y").exists()
    assert (tmp_path / "root" / "x" / "keep").exists()
    store.put_bytes("p/q/r", b"1")
    assert store.delete_prefix("p") == 1
    assert not (tmp_path / "root" / "p").exists()
    assert (tmp_path / "root").is_dir()


def test_missing_root_lists_nothing(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "not-yet"))
    assert list(store.list()) == []
    assert store.delete_prefix("") == 0
    assert not store.exists("k")


def test_get_of_a_folder_is_not_found(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    store.put_bytes("dir/k", b"1")
    with pytest.raises(StoreError, match="no such object"):
        store.get_bytes("dir")
    assert not store.exists("dir")
