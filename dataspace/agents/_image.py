"""Images for ``view_image``: measured before decoding, decoded in a memory-bounded child.

A small compressed file can claim an enormous raster (a 439 KB PNG of 19,999 x 19,999
pixels decodes to 400 MB grey, 1.6 GB RGBA), so the controller never decodes an image
itself:

1. ``measure`` opens the image lazily (Pillow reads only the header) and applies Pillow's
   own decompression-bomb check with its default ceiling, exactly as the official baseline's
   ``Image.open`` does: past 2 x ``Image.MAX_IMAGE_PIXELS`` the call fails with Pillow's
   ``DecompressionBombError`` and its message.
2. ``normalize_image`` decodes, orients, converts and re-encodes in a child Python process
   limited to ``DECODE_MEMORY_BYTES``: in a control group of its own with that memory
   limit (``dataspace.sandbox.local.confine``; everything it allocates is charged there, and the
   kernel kills it alone at the limit), or, on a host with no writable cgroups, under that
   much address space (``RLIMIT_AS``). An image that needs more is refused with a
   ``MemoryError`` observation and the controller's memory stays where it was.

The re-encoding is the official one: EXIF orientation applied, RGB, thumbnail to the long
edge with Lanczos, JPEG at the given quality with ``optimize=True``.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

DECODE_MEMORY_BYTES = 3 * 1024**3
DECODE_TIMEOUT_SECONDS = 120.0


class ImageRefused(Exception):
    """The image cannot be shown; ``error_type`` names the failure as the official tool does."""

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        super().__init__(message)


@dataclass(frozen=True, kw_only=True)
class ImageSize:
    """Header facts of an image."""

    width: int
    height: int
    format: str | None


def measure(data: bytes) -> ImageSize:
    """Read an image's dimensions from its header, without decoding the pixels.

    Raises:
        ImageRefused: not an image, or past Pillow's decompression-bomb ceiling.
    """
    import warnings

    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as opened:
                return ImageSize(width=opened.size[0], height=opened.size[1], format=opened.format)
    except Exception as exc:  # every failure is the model's choice of file
        raise ImageRefused(type(exc).__name__, str(exc)) from exc


def normalize_image(
    data: bytes,
    *,
    max_edge: int,
    quality: int,
    memory_bytes: int = DECODE_MEMORY_BYTES,
    timeout: float = DECODE_TIMEOUT_SECONDS,
) -> tuple[bytes, dict[str, Any]]:
    """Re-encode an image as RGB JPEG whose long edge is at most ``max_edge`` pixels.

    The header is checked here; the pixels are decoded in a child process limited to
    ``memory_bytes`` (its own memory group, or its address space without cgroups).

    Returns:
        The JPEG bytes and the observation's image fields (sizes, encoding, quality).

    Raises:
        ImageRefused: the image is unreadable, too large, or needs more memory than allowed.
    """
    from dataspace.sandbox.local import confine

    measure(data)
    grouped = confine.available()
    cmd = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _CHILD,
        _pillow_path(),
        "0" if grouped else str(memory_bytes),  # the group's limit, else the address space
        str(max_edge),
        str(quality),
    ]
    try:
        done = confine.run(cmd, input=data, memory_bytes=memory_bytes, timeout=timeout, env={})
    except subprocess.TimeoutExpired as exc:
        raise ImageRefused("TimeoutError", f"decoding took longer than {timeout:.0f} s") from exc
    logger.info(
        "image decode: exit %s, group %s, memory peak %s of %s bytes, oom killed %s",
        done.returncode, done.group, done.memory_peak, memory_bytes, done.oom_killed,
    )  # fmt: skip
    if done.returncode != 0 or not done.stdout:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        if done.oom_killed or "MemoryError" in done.stderr.decode("utf-8", "replace"):
            raise ImageRefused(
                "MemoryError",
                f"decoding this image needs more than {memory_bytes // 1024**2} MiB of memory",
            )
        raise ImageRefused("RuntimeError", f"the image decoder failed: {tail[0][:300]}")
    reply = json.loads(done.stdout)
    if "error_type" in reply:
        raise ImageRefused(reply["error_type"], reply["error"])
    encoded = base64.b64decode(reply.pop("jpeg"))
    return encoded, reply


def _pillow_path() -> str:
    """The folder holding the ``PIL`` package, for a child started in isolated mode."""
    import os

    import PIL

    return os.path.dirname(os.path.dirname(PIL.__file__))


# The child: limit the address space first, then decode exactly as the official media.py.
_CHILD = r"""
import resource, sys
limit = int(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, sys.argv[1])
import base64, io, json
def main():
    from PIL import Image, ImageOps
    data = sys.stdin.buffer.read()
    max_edge, quality = int(sys.argv[3]), int(sys.argv[4])
    try:
        with Image.open(io.BytesIO(data)) as opened:
            image = ImageOps.exif_transpose(opened)
            original = image.size
            image = image.convert("RGB")
            image.thumbnail((max_edge, max_edge), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            image.save(out, format="JPEG", quality=quality, optimize=True)
            size = image.size
    except MemoryError:
        raise
    except Exception as exc:
        return {"error_type": type(exc).__name__, "error": str(exc)}
    encoded = out.getvalue()
    return {
        "jpeg": base64.b64encode(encoded).decode("ascii"),
        "original_width": original[0],
        "original_height": original[1],
        "normalized_width": size[0],
        "normalized_height": size[1],
        "normalized_bytes": len(encoded),
        "encoding": "image/jpeg",
        "jpeg_quality": quality,
    }
sys.stdout.write(json.dumps(main()))
"""


__all__ = [
    "DECODE_MEMORY_BYTES",
    "ImageRefused",
    "ImageSize",
    "measure",
    "normalize_image",
]
