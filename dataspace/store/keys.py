"""Key and prefix rules shared by every store backend.

A key is a POSIX-style relative path: segments joined by ``/``, none empty, none ``.`` or
``..``, no backslash, no control character, valid UTF-8 of at most 1,024 bytes (the S3
limit). Segments that start with ``.dstmp-`` are reserved for the file store's temporary
files.

A prefix names a folder: ``""`` is the whole store and ``"runs/r1"`` means every key that
starts with ``"runs/r1/"`` (so ``runs/r10/...`` is never under ``runs/r1``).
"""

from __future__ import annotations

import logging

from dataspace.errors import StoreError

logger = logging.getLogger(__name__)

MAX_KEY_BYTES = 1024
TEMP_MARK = ".dstmp-"


def key_problem(key: object) -> str | None:
    r"""Say what is wrong with ``key``, or return None when it is a valid key.

    Args:
        key: the candidate key.

    Returns:
        A few words naming the problem, or None.

    >>> key_problem("runs/r1/attempts/gold/task_1/1/run.json") is None
    True
    >>> key_problem("/etc/passwd")
    'absolute keys are not allowed'
    >>> key_problem("a//b")
    'empty segment'
    >>> key_problem("a/../b")
    "'..' segment"
    >>> key_problem("a\\b")
    'backslash'
    """
    if not isinstance(key, str):
        return f"keys are strings, not {type(key).__name__}"
    if not key:
        return "empty key"
    if key.startswith("/"):
        return "absolute keys are not allowed"
    if "\\" in key:
        return "backslash"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        return "control character"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "not valid UTF-8 (lone surrogate)"
    if size > MAX_KEY_BYTES:
        return f"longer than {MAX_KEY_BYTES} bytes"
    for segment in key.split("/"):
        if not segment:
            return "empty segment"
        if segment == "..":
            return "'..' segment"
        if segment == ".":
            return "'.' segment"
        if segment.startswith(TEMP_MARK):
            return f"segments starting with {TEMP_MARK!r} are reserved for temporary files"
    return None


def check_key(key: str, *, where: str) -> str:
    """Return ``key`` unchanged when valid, else raise a one-line ``StoreError``.

    Args:
        key: the key to check.
        where: the store URI, named in the message.

    Raises:
        StoreError: the key is not a valid store key.

    >>> check_key("output/task_1/gold.csv", where="memory://t")
    'output/task_1/gold.csv'
    """
    problem = key_problem(key)
    if problem is not None:
        raise StoreError(f"{where}: invalid key {key!r}: {problem}")
    return key


def folder_prefix(prefix: str, *, where: str) -> str:
    """Normalize a listing prefix to ``""`` or a folder path ending in ``/``.

    Args:
        prefix: ``""`` for everything, else a folder (a trailing ``/`` is optional).
        where: the store URI, named in the message.

    Raises:
        StoreError: the prefix is not a valid folder.

    >>> folder_prefix("", where="memory://t")
    ''
    >>> folder_prefix("runs/r1", where="memory://t")
    'runs/r1/'
    >>> folder_prefix("runs/r1/", where="memory://t")
    'runs/r1/'
    """
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise StoreError(f"{where}: invalid prefix {prefix!r}: prefixes are strings")
    stripped = prefix[:-1] if prefix.endswith("/") else prefix
    problem = key_problem(stripped)
    if problem is not None:
        raise StoreError(f"{where}: invalid prefix {prefix!r}: {problem}")
    return stripped + "/"


def join_uri(root: str, key: str) -> str:
    """Join a root URI and a key with exactly one ``/``.

    >>> join_uri("s3://bucket/pre/", "a/b.json")
    's3://bucket/pre/a/b.json'
    >>> join_uri("memory://t", "a")
    'memory://t/a'
    """
    return root.rstrip("/") + "/" + key
