"""Store throughput: small and large puts/gets and a big listing, on file:// and on moto S3.

Usage::

    python scripts/bench_store.py                 # both backends, default sizes
    python scripts/bench_store.py --backends file --small-count 2000
    python scripts/bench_store.py --s3-endpoint http://127.0.0.1:9000 --bucket bench  # MinIO

Without ``--s3-endpoint`` a moto server is started on 127.0.0.1 (a Python test server:
its figures bound what the client can do, not what a real S3 service does). Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from dataspace.store import Store, open_store

KiB = 1024
MiB = 1024 * KiB


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _each(fn: Callable[[Any], Any], items: list[Any]) -> Callable[[], None]:
    def run() -> None:
        for item in items:
            fn(item)

    return run


def _row(backend: str, case: str, count: int, nbytes: int, seconds: float) -> None:
    ops = count / seconds if seconds else float("inf")
    mbs = nbytes / MiB / seconds if seconds else float("inf")
    print(f"{backend:<14} {case:<34} {count:>6} {seconds:>9.3f} {ops:>11.1f} {mbs:>10.1f}")


def bench(name: str, store: Store, args: argparse.Namespace, scratch: Path) -> None:
    small = os.urandom(4 * KiB)
    n = args.small_count
    keys = [f"small/{i:06d}.bin" for i in range(n)]

    seconds = _timed(_each(lambda k: store.put_bytes(k, small), keys))
    _row(name, "put 4 KiB (1 thread)", n, n * len(small), seconds)
    seconds = _timed(_each(store.get_bytes, keys))
    _row(name, "get 4 KiB (1 thread)", n, n * len(small), seconds)
    once = [f"once/{i:06d}.bin" for i in range(n)]
    seconds = _timed(_each(lambda k: store.put_bytes(k, small, overwrite=False), once))
    _row(name, "put 4 KiB write-once (1 thread)", n, n * len(small), seconds)

    with ThreadPoolExecutor(args.threads) as pool:
        seconds = _timed(lambda: list(pool.map(lambda k: store.put_bytes(k, small), keys)))
        _row(name, f"put 4 KiB ({args.threads} threads)", n, n * len(small), seconds)
        seconds = _timed(lambda: list(pool.map(store.get_bytes, keys)))
        _row(name, f"get 4 KiB ({args.threads} threads)", n, n * len(small), seconds)

    big = scratch / "large.bin"
    with open(big, "wb") as fh:
        for _ in range(args.large_mb):
            fh.write(os.urandom(MiB))
    size = big.stat().st_size
    m = args.large_count
    seconds = _timed(_each(lambda i: store.put_file(f"large/{i}.bin", big), list(range(m))))
    _row(name, f"put {args.large_mb} MiB file", m, m * size, seconds)
    dest = scratch / "download.bin"
    seconds = _timed(_each(lambda i: store.get_file(f"large/{i}.bin", dest), list(range(m))))
    _row(name, f"get {args.large_mb} MiB file", m, m * size, seconds)
    big.unlink()
    dest.unlink()

    listed = [f"list/{i // 100:03d}/{i:06d}.json" for i in range(args.list_keys)]
    with ThreadPoolExecutor(args.threads) as pool:
        seconds = _timed(lambda: list(pool.map(lambda k: store.put_bytes(k, b"{}"), listed)))
    _row(name, f"populate {args.list_keys} keys ({args.threads} thr)", len(listed), 0, seconds)
    found: list[str] = []
    seconds = _timed(lambda: found.extend(store.list("list")))
    assert len(found) == len(listed), (len(found), len(listed))
    _row(name, f"list {args.list_keys} keys", len(found), 0, seconds)
    seconds = _timed(lambda: store.delete_prefix(""))
    _row(name, "delete_prefix (everything)", n * 2 + m + len(listed), 0, seconds)


@contextmanager
def _s3_store(args: argparse.Namespace) -> Iterator[Store]:
    from dataspace.testing import create_bucket, moto_s3_server, s3_test_options

    with ExitStack() as stack:
        if args.s3_endpoint:
            endpoint = args.s3_endpoint
            options: dict[str, Any] = {"endpoint_url": endpoint}
        else:
            endpoint = stack.enter_context(moto_s3_server())
            create_bucket(endpoint, args.bucket)
            options = s3_test_options(endpoint)
        store = open_store(f"s3://{args.bucket}/bench-{uuid.uuid4().hex[:8]}", **options)
        try:
            yield store
        finally:
            store.delete_prefix("")
            getattr(store, "close", lambda: None)()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="file,s3", help="comma list of file, s3")
    parser.add_argument("--small-count", type=int, default=500)
    parser.add_argument("--large-mb", type=int, default=50)
    parser.add_argument("--large-count", type=int, default=3)
    parser.add_argument("--list-keys", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--dir", type=Path, default=None, help="where the file store lives")
    parser.add_argument("--s3-endpoint", default=None, help="a real S3-compatible endpoint")
    parser.add_argument("--bucket", default="bench-store")
    args = parser.parse_args(argv)

    print(f"{'backend':<14} {'case':<34} {'count':>6} {'seconds':>9} {'ops/s':>11} {'MiB/s':>10}")
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            scratch = Path(tmp) / "scratch"
            scratch.mkdir()
            if backend == "file":
                root = args.dir or Path(tmp) / "store"
                for fsync in (True, False):
                    store = open_store(str(root / f"fsync-{fsync}"), fsync=fsync)
                    bench(f"file fsync={'on' if fsync else 'off'}", store, args, scratch)
            elif backend == "s3":
                with _s3_store(args) as store:
                    label = "s3 (endpoint)" if args.s3_endpoint else "s3 (moto)"
                    bench(label, store, args, scratch)
            else:
                print(f"unknown backend {backend!r}", file=sys.stderr)
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
