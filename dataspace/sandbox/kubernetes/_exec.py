"""Running the in-pod helper over the exec websocket and reading its one answer frame."""

from __future__ import annotations

import base64
import functools
import json
import logging
import struct
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.errors import SandboxError
from dataspace.sandbox.kubernetes._api import ApiCallError, KubeApi

logger = logging.getLogger(__name__)

MAGIC = b"DSX1"
STDIN_CHUNK = 256 * 1024
ANSWER_GRACE = 30.0
"""Seconds an exec may outlive the helper's own timeout before the controller gives up."""


class ExecLostError(SandboxError):
    """An exec ended without the helper's answer (the pod died or the stream broke)."""


@functools.cache
def helper_argv(python: str = "python3") -> tuple[str, ...]:
    """The argv prefix that runs the helper inside any image with ``python3``.

    The helper's source travels compressed in the argv, so the image needs nothing of ours.
    """
    from dataspace.sandbox._outputfs import sandbox_program

    source = sandbox_program(Path(__file__).parent / "_helper.py").encode()
    packed = base64.b64encode(zlib.compress(source, 9)).decode()
    boot = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return (python, "-c", boot)


def encode_args(args: Mapping[str, Any]) -> str:
    """The helper's argument: base64 of compact JSON.

    >>> encode_args({"a": 1})
    'eyJhIjoxfQ=='
    """
    return base64.b64encode(json.dumps(args, separators=(",", ":")).encode()).decode()


@dataclass(frozen=True, kw_only=True)
class HelperReply:
    """The helper's answer: its header, the payload bytes after it, and its stderr."""

    header: dict[str, Any]
    payload: bytes
    stderr: bytes
    seconds: float


def parse_frame(data: bytes) -> tuple[dict[str, Any], bytes] | None:
    """Split one answer frame into header and payload; None when it is incomplete.

    >>> parse_frame(b"DSX1" + (7).to_bytes(4, "big") + b'{"a":1}' + b"xyz")
    ({'a': 1}, b'xyz')
    >>> parse_frame(b"DSX1") is None
    True
    """
    if len(data) < 8 or not data.startswith(MAGIC):
        return None
    (size,) = struct.unpack(">I", data[4:8])
    if len(data) < 8 + size:
        return None
    try:
        header = json.loads(data[8 : 8 + size])
    except ValueError:
        return None
    return header, data[8 + size :]


def run_helper(
    api: KubeApi,
    namespace: str,
    pod: str,
    op: str,
    args: Mapping[str, Any],
    *,
    container: str,
    timeout: float,
    stdin: bytes | Path | None = None,
    python: str = "python3",
) -> HelperReply:
    """Exec the helper operation ``op`` in a pod and return its answer.

    ``stdin`` (bytes, or a file sent in chunks) must be as long as ``args`` announce.

    Raises:
        ApiCallError: the exec could not be opened (handshake refused, connection failed).
        ExecLostError: the stream ended or timed out before a complete answer.
    """
    from kubernetes.stream.ws_client import ERROR_CHANNEL, STDERR_CHANNEL, STDOUT_CHANNEL

    argv = [*helper_argv(python), op, encode_args(args)]
    started = time.monotonic()
    client = api.open_exec(namespace, pod, container, argv, stdin=stdin is not None)
    out = bytearray()
    err = bytearray()
    status = ""
    try:
        if isinstance(stdin, Path):
            with open(stdin, "rb") as source:
                while chunk := source.read(STDIN_CHUNK):
                    client.write_channel(0, chunk)
        elif stdin:
            view = memoryview(stdin)
            for offset in range(0, len(view), STDIN_CHUNK):
                client.write_channel(0, bytes(view[offset : offset + STDIN_CHUNK]))
        end = started + timeout + ANSWER_GRACE
        while client.is_open():
            left = end - time.monotonic()
            if left <= 0:
                waited = timeout + ANSWER_GRACE
                raise ExecLostError(
                    f"exec {op} in pod {namespace}/{pod}: no answer within {waited:.0f}s"
                )
            client.update(timeout=min(left, 5.0))
            chunk = client.read_channel(STDOUT_CHANNEL)
            if chunk:
                out += chunk
            chunk = client.read_channel(STDERR_CHANNEL)
            if chunk:
                err += chunk
            chunk = client.read_channel(ERROR_CHANNEL)
            if chunk:
                status += chunk.decode("utf-8", "replace")
    except ExecLostError:
        raise
    except Exception as exc:
        if parse_frame(bytes(out)) is None:
            raise ExecLostError(
                f"exec {op} in pod {namespace}/{pod}: stream broke: {type(exc).__name__}: {exc}"
            ) from None
    finally:
        try:
            client.close()
        except Exception:  # closing a broken socket may fail again; nothing to do
            logger.debug("closing the exec stream of %s/%s failed", namespace, pod)
    for channel, sink in ((STDOUT_CHANNEL, out), (STDERR_CHANNEL, err)):
        rest = client.read_channel(channel)
        if rest:
            sink += rest
    frame = parse_frame(bytes(out))
    if frame is None:
        detail = "; ".join(
            filter(None, [_status_message(status), err.decode("utf-8", "replace").strip()[-800:]])
        )
        raise ExecLostError(
            f"exec {op} in pod {namespace}/{pod} ended without an answer"
            + (f": {detail}" if detail else "")
        )
    header, payload = frame
    return HelperReply(
        header=header, payload=payload, stderr=bytes(err), seconds=time.monotonic() - started
    )


def _status_message(status: str) -> str:
    """The message of the exec status the API server sends on the error channel.

    >>> _status_message('{"status":"Failure","message":"container not found"}')
    'container not found'
    """
    if not status.strip():
        return ""
    try:
        obj = json.loads(status)
    except ValueError:
        return status.strip()[:300]
    if obj.get("status") == "Success":
        return ""
    return str(obj.get("message") or obj.get("reason") or "")[:300]


__all__ = [
    "ApiCallError",
    "ExecLostError",
    "HelperReply",
    "encode_args",
    "helper_argv",
    "parse_frame",
    "run_helper",
]
