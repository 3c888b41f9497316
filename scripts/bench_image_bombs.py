"""Decode bombs in several attempts at once and report the controller's peak memory.

Each attempt is a real local sandbox whose workspace holds one PNG of a huge flat raster in
a small file; every attempt's ``view_image`` runs at the same moment from its own thread,
as a controller running that many attempts does. The decoders run in their memory groups
(``dataspace.sandbox.local.confine``), so the controller's own peak resident memory (``VmHWM``
of this process) should stay near its start-up size.

Prints one JSON object: the controller's peak and start-up resident memory in MiB, the
seconds the decodes took, each attempt's tool result, and each decoder's group, memory
limit, memory peak and OOM kill, as logged by ``dataspace.agents._image``.

Usage::

    .venv/bin/python scripts/bench_image_bombs.py --attempts 8 --pixels 12000 --memory-mib 256
"""

from __future__ import annotations

import argparse
import json
import logging
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any


def flat_png(width: int, height: int) -> bytes:
    """A grey PNG of ``width`` x ``height`` pixels, deflated block by block (a few KiB per
    megapixel), written without holding the raster."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    row = b"\x00" + b"\x80" * width
    block = row * 64
    blocks, rest = divmod(height, 64)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    middle = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    tail = comp.compress(row * rest) + comp.flush()
    adler = 1
    for _ in range(blocks):
        adler = zlib.adler32(block, adler)
    adler = zlib.adler32(row * rest, adler)
    idat = b"\x78\xda" + middle * blocks + tail + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class _Decodes(logging.Handler):
    """Keeps the decoder's log records (exit, group, peak, limit, OOM kill)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "dataspace.agents._image" and isinstance(record.args, tuple):
            code, group, peak, limit, oom = record.args
            self.seen.append(
                {"exit": code, "group": group, "peak": peak, "limit": limit, "oom_killed": oom}
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=8)
    parser.add_argument("--pixels", type=int, default=12_000, help="the bomb's edge in pixels")
    parser.add_argument("--memory-mib", type=int, default=256, help="each decoder's limit")
    args = parser.parse_args(argv)

    from dataspace.agents._react_tools import ToolBox, ToolConfig
    from dataspace.sandbox import Limits, SandboxSpec, get_backend

    decodes = _Decodes()
    logger = logging.getLogger("dataspace.agents._image")
    logger.addHandler(decodes)
    logger.setLevel(logging.INFO)

    with tempfile.TemporaryDirectory(prefix="ds-bombs-") as tmp:
        ws = Path(tmp) / "workspace"
        ws.mkdir()
        bomb = flat_png(args.pixels, args.pixels)
        (ws / "bomb.png").write_bytes(bomb)
        ws.chmod(0o755)
        (ws / "bomb.png").chmod(0o644)
        backend = get_backend("local")
        limits = Limits(cpus=1, memory_bytes=512 * 1024**2, wall_seconds=600)
        boxes = [
            backend.create(SandboxSpec(workspace=ws, limits=limits)) for _ in range(args.attempts)
        ]
        try:
            config = ToolConfig(image_memory_bytes=args.memory_mib * 1024**2)
            tools = [ToolBox(sb, config) for sb in boxes]
            for t in tools:
                t.execute("bash", json.dumps({"command": "true"}))
            start_kib = _status_kib("VmHWM")
            results: list[Any] = [None] * len(tools)
            barrier = threading.Barrier(len(tools))

            def decode(i: int) -> None:
                barrier.wait()
                results[i] = tools[i].execute("view_image", json.dumps({"path": "bomb.png"})).result

            threads = [threading.Thread(target=decode, args=(i,)) for i in range(len(tools))]
            began = time.monotonic()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            seconds = time.monotonic() - began
        finally:
            for sb in boxes:
                sb.close()
    print(
        json.dumps(
            {
                "attempts": args.attempts,
                "bomb_bytes": len(bomb),
                "pixels": args.pixels**2,
                "controller_peak_mib": round(_status_kib("VmHWM") / 1024, 1),
                "controller_start_mib": round(start_kib / 1024, 1),
                "seconds": round(seconds, 2),
                "results": results,
                "decoders": decodes.seen,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
