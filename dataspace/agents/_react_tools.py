"""The three tools of DataSpace-Agent: ``bash``, ``view_image`` and ``submit_answer``.

Schemas, argument checks, error texts, output truncation, path rules and the answer check
follow the official baseline; where the two protocol profiles differ, the rule is named on
``ProtocolProfile`` (``dataspace.agents.protocol``). Every tool acts through the sandbox
contract only; the controller never touches the sandbox's files directly. A tool never
raises for the model's mistakes: a bad call becomes an error observation
(``{"ok": false, "error_type", "error"}``). Sandbox failures (``SandboxError``) propagate:
they are infrastructure faults.

Images are measured and decoded by ``dataspace.agents._image`` (header check, then a
memory-bounded child process). An accepted answer's bytes are read at submit time and kept
as the attempt's ``PredictionSnapshot``: that copy is what is stored and scored.

Paths are resolved inside the sandbox (``realpath`` there), so a ``prediction.csv`` that is
a symbolic link to another file under ``/output`` is the file it names, as the official
runner copies a linked prediction's target; a link that leaves ``/output`` is refused. An
answer over the evaluator's 20 MiB limit is refused under ``check_evaluator_limits``; the
official profile accepts it as the official tool does (its shape is checked inside the
sandbox, never read into the controller) and the evaluator then judges the collected file.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import logging
import math
import posixpath
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dataspace.agents._image import DECODE_MEMORY_BYTES
from dataspace.agents._image import normalize_image as _normalize_image
from dataspace.agents.base import PredictionSnapshot
from dataspace.agents.protocol import OFFICIAL, ProtocolProfile
from dataspace.errors import DataSpaceError, ToolRefused
from dataspace.limits import DEFAULT_LIMITS
from dataspace.sandbox.base import OUTPUT_DIR, WORKSPACE_DIR, Sandbox

logger = logging.getLogger(__name__)

MAX_PREDICTION_BYTES = 20 * 1024 * 1024  # the evaluator's own CSV size limit
MAX_IMAGE_BYTES = 64 * 1024 * 1024
PREDICTION_PATH = f"{OUTPUT_DIR}/prediction.csv"  # the file the official runner scores
TIMEOUT_EXIT_CODE = 137  # what ``timeout --signal=KILL`` reports for a killed command
# The official sandbox container's environment (``docker run --env``).
COMMAND_ENV = {
    "HOME": "/tmp",
    "PYTHONUNBUFFERED": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}
INLINE_BYTES = 4 * 1024 * 1024  # base64 of it stays under the sandbox's output cap

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": (
                "Run a shell command inside the isolated task container. "
                "The task workspace is read-only at /workspace. Write scripts, "
                "derived media, and prediction files under /output."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command to execute."},
                    "timeout": {
                        "type": "integer",
                        "minimum": 1,
                        "description": (
                            "Requested timeout in seconds. It is capped by the benchmark harness."
                        ),
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view_image",
            "description": (
                "Inspect exactly one image. Use bash to render a PDF page or "
                "extract a video frame into /output, then pass that image path. "
                "The tool performs no OCR, retrieval, or semantic analysis."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "An image path under /workspace or /output.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit_answer",
            "description": (
                "Submit a rectangular CSV under /output as the final answer "
                "and terminate the run. No evaluation feedback is returned."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Path to the final CSV under /output.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    },
]

# Checks an answer too large to read into the controller, inside the sandbox, as the
# official ``validate_prediction`` reads it; prints its shape and digest, or the error.
_SHAPE_SCRIPT = r"""
import csv, hashlib, json, sys
def shape(path):
    csv.field_size_limit(min(sys.maxsize, 128 * 1024 * 1024))
    with open(path, "r", encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError("prediction CSV is empty") from None
        width = len(header)
        if width == 0:
            raise ValueError("prediction CSV has no columns")
        rows = 0
        for number, row in enumerate(reader, start=2):
            if len(row) != width:
                raise ValueError(f"row {number} has {len(row)} columns; expected {width}")
            rows += 1
    return width, rows
path = sys.argv[1]
digest, size = hashlib.sha256(), 0
with open(path, "rb") as raw:
    for chunk in iter(lambda: raw.read(1024 * 1024), b""):
        digest.update(chunk)
        size += len(chunk)
out = {"bytes": size, "sha256": digest.hexdigest()}
try:
    out["columns"], out["data_rows"] = shape(path)
except Exception as exc:
    out["error_type"], out["error"] = type(exc).__name__, str(exc)
sys.stdout.write(json.dumps(out))
"""

# Resolves a path inside the sandbox, checks it stays under the allowed roots, exists, is a
# regular file and is not too large; prints its real path and size (exit 3: escape,
# 6: missing, 4: not a file, 5: too large). Arguments: path, max bytes, space-separated
# roots, and 1 to refuse a path that passes through a link with an absolute target.
_STAT_SCRIPT = r"""
if [ "$4" = 1 ] && namei -x -- "$1" 2>/dev/null | grep -q -e ' -> /'; then
  echo "path escapes the permitted workspace/output roots" >&2; exit 3
fi
p=$(realpath -m -- "$1" 2>/dev/null) || { echo "cannot resolve $1" >&2; exit 3; }
ok=1
for root in $3; do case "$p" in "$root"|"$root"/*) ok=0;; esac; done
[ $ok -eq 0 ] || { echo "path escapes the permitted workspace/output roots" >&2; exit 3; }
[ -e "$p" ] || { echo "path does not exist" >&2; exit 6; }
[ -f "$p" ] || { echo "not a regular file" >&2; exit 4; }
n=$(stat -c %s -- "$p")
[ "$n" -le "$2" ] || { echo "file is larger than $2 bytes" >&2; exit 5; }
printf '%s\n%s\n' "$p" "$n"
"""


def truncate(text: str, limit: int) -> tuple[str, bool]:
    r"""Keep the first two thirds and the last third of ``limit`` characters, with a marker.

    >>> truncate("abcdefghij", 6)
    ('abcd\n... [4 characters truncated] ...\nij', True)
    >>> truncate("short", 20)
    ('short', False)
    """
    if len(text) <= limit:
        return text, False
    head = max(1, (limit * 2) // 3)
    tail = max(1, limit - head)
    removed = len(text) - head - tail
    return f"{text[:head]}\n... [{removed} characters truncated] ...\n{text[-tail:]}", True


def resolve_agent_path(raw: object, *, output_only: bool = False) -> str:
    """The sandbox path a tool argument names, checked lexically against the roots.

    Relative paths are relative to the workspace, as in the paper's baseline.

    >>> resolve_agent_path("/output/x/../prediction.csv", output_only=True)
    '/output/prediction.csv'
    >>> resolve_agent_path("tables/a.png")
    '/workspace/tables/a.png'
    >>> resolve_agent_path("/etc/passwd")
    Traceback (most recent call last):
    ...
    ValueError: absolute paths must be under /workspace or /output
    """
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("path must not be empty")
    s = raw.strip()
    if "\x00" in s:
        raise ValueError("path must not contain NUL bytes")
    if s.startswith("/"):
        if not (
            s in (WORKSPACE_DIR, OUTPUT_DIR)
            or s.startswith((WORKSPACE_DIR + "/", OUTPUT_DIR + "/"))
        ):
            raise ValueError("absolute paths must be under /workspace or /output")
        candidate = posixpath.normpath(s)
    else:
        candidate = posixpath.normpath(posixpath.join(WORKSPACE_DIR, s))
    roots = (OUTPUT_DIR,) if output_only else (WORKSPACE_DIR, OUTPUT_DIR)
    if not any(candidate == r or candidate.startswith(r + "/") for r in roots):
        raise ValueError("path escapes the permitted workspace/output roots")
    return candidate


def check_prediction(data: bytes) -> dict[str, Any]:
    r"""Check the CSV contract of an answer (never its correctness); return its shape.

    >>> check_prediction(b"a,b\n1,2\n")["data_rows"]
    1
    >>> check_prediction(b"a,b\n1\n")
    Traceback (most recent call last):
    ...
    ValueError: row 2 has 1 columns; expected 2
    """
    csv.field_size_limit(min(sys.maxsize, 128 * 1024 * 1024))
    # as the official check reads the file: a decoding or csv error surfaces as it is
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration as exc:
        raise ValueError("prediction CSV is empty") from exc
    width = len(header)
    if width == 0:
        raise ValueError("prediction CSV has no columns")
    rows = 0
    for number, row in enumerate(reader, start=2):
        if len(row) != width:
            raise ValueError(f"row {number} has {len(row)} columns; expected {width}")
        rows += 1
    return {
        "columns": width,
        "data_rows": rows,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def check_evaluator_limits(data: bytes, label: str) -> None:
    r"""Refuse a CSV the evaluator would reject (its own reader and limits).

    >>> check_evaluator_limits(b"a\x00,b\n1,2\n", "/output/p.csv")
    Traceback (most recent call last):
    ...
    ValueError: the evaluator would reject this CSV: NUL byte in CSV cell at row 1: /output/p.csv
    """
    from evaluator.csvfile import read_csv
    from evaluator.errors import CsvError

    try:
        read_csv(data, role="prediction", name=label)
    except CsvError as exc:
        raise ValueError(f"the evaluator would reject this CSV: {exc}") from exc


def stat_in_sandbox(
    sandbox: Sandbox,
    path: str,
    *,
    raw: str | None = None,
    roots: str = OUTPUT_DIR,
    max_bytes: int = MAX_PREDICTION_BYTES,
    not_file: str = "not a regular file",
    timeout: float = 60.0,
    absolute_links: bool = True,
) -> tuple[str, int]:
    """Resolve ``path`` inside the sandbox (symbolic links too); return its real path, size.

    Args:
        sandbox: the sandbox whose file it is.
        path: the sandbox path to resolve.
        raw: the path as the model wrote it, for the messages (default: ``path``).
        roots: space-separated folders the resolved path must stay under.
        max_bytes: the largest size accepted.
        not_file: the message when the path is not a regular file.
        timeout: seconds for the check.
        absolute_links: follow links whose target is absolute (else such a path is
            refused as leaving ``roots``).

    Raises:
        FileNotFoundError: nothing there.
        ValueError: it leaves ``roots``, is not a regular file or is too large.
    """
    res = sandbox.exec(
        [
            "/bin/sh",
            "-c",
            _STAT_SCRIPT,
            "sh",
            path,
            str(max_bytes),
            roots,
            "01"[not absolute_links],
        ],
        timeout=timeout,
        cwd=OUTPUT_DIR,
    )
    if res.exit_code != 0:
        msg = (res.stderr.strip().splitlines() or ["cannot read the file"])[-1]
        if res.exit_code == 6:
            raise FileNotFoundError(f"path does not exist: {raw or path}")
        if res.exit_code == 4:
            raise ValueError(not_file)
        raise ValueError(msg)
    lines = res.stdout.splitlines()
    if len(lines) < 2:
        raise ValueError(f"cannot inspect {path}")
    return lines[0], int(lines[1])


def read_prediction_csv(sandbox: Sandbox) -> tuple[str, bytes]:
    """The file ``/output/prediction.csv`` names and its bytes, as the official runner copies it.

    A symbolic link is followed inside the sandbox and must stay under ``/output``.

    Raises:
        FileNotFoundError: there is no ``prediction.csv``.
        ValueError: it leaves ``/output``, is not a regular file or is over 20 MiB.
        OSError: it could not be read.
    """
    real, _ = stat_in_sandbox(sandbox, PREDICTION_PATH)
    return real, sandbox.read_file(real, max_bytes=MAX_PREDICTION_BYTES)


@dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    """What one tool call produced.

    Attributes:
        result: the observation (JSON-serialized into the tool message).
        image_message: a user message carrying an image, for ``view_image``.
        submitted_path: the accepted answer's sandbox path, for ``submit_answer``.
        snapshot: the scored file's bytes taken when the answer was accepted.
        deadline_hit: the sandbox's wall clock ran out during the call.
    """

    result: dict[str, Any]
    image_message: dict[str, Any] | None = None
    submitted_path: str | None = None
    snapshot: PredictionSnapshot | None = None
    deadline_hit: bool = False


@dataclass(frozen=True, kw_only=True)
class ToolConfig:
    """Tool limits (the paper's defaults; the command cap is the attempt's ``Limits``)."""

    command_timeout: float = DEFAULT_LIMITS.command_timeout
    max_output_chars: int = 20_000
    image_max_edge: int = 1600
    image_jpeg_quality: int = 90
    image_memory_bytes: int = DECODE_MEMORY_BYTES
    protocol: ProtocolProfile = OFFICIAL


class ToolBox:
    """Executes tool calls against one sandbox."""

    def __init__(self, sandbox: Sandbox, config: ToolConfig) -> None:
        self.sandbox = sandbox
        self.config = config
        self.rules = config.protocol

    def execute(self, name: str, arguments: str, *, time_cap: float | None = None) -> ToolOutcome:
        """Run one tool call; the model's mistakes become error observations.

        Args:
            name: the tool's name as the model sent it.
            arguments: the raw JSON arguments string.
            time_cap: the remaining wall-clock seconds (caps command timeouts).
        """
        try:
            args = _arguments(arguments)
            if name == "bash":
                return self._bash(args, time_cap)
            if name == "view_image":
                return self._view_image(args)
            if name == "submit_answer":
                return self._submit(args)
            raise ValueError(f"unknown tool: {name}")
        except ToolRefused as exc:  # ImageRefused included; the model's doing
            return ToolOutcome(
                result={"ok": False, "error_type": exc.error_type, "error": str(exc)}
            )
        except DataSpaceError:
            raise  # sandbox and infrastructure faults are not the model's doing
        except Exception as exc:  # as the official tool: any other failure is an observation
            return ToolOutcome(
                result={"ok": False, "error_type": type(exc).__name__, "error": str(exc)}
            )

    # ---- tools ---------------------------------------------------------------------------
    def _bash(self, args: Mapping[str, Any], time_cap: float | None) -> ToolOutcome:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError("bash.command must be a non-empty string")
        cap = max(1, int(self.config.command_timeout))
        requested = args.get("timeout", cap)
        if isinstance(requested, bool):
            raise ValueError("bash.timeout must be an integer")
        timeout = max(1, min(int(requested), cap))  # int()'s own errors, as the official tool
        if time_cap is not None:
            timeout = min(timeout, max(1, math.ceil(time_cap)))
        rules = self.rules
        argv = ["bash", "-lc" if rules.login_shell else "-c", command]
        res = self.sandbox.exec(argv, timeout=float(timeout), cwd=WORKSPACE_DIR, env=COMMAND_ENV)
        out, err = res.stdout, res.stderr
        if rules.normalize_carriage_returns:  # universal newlines, as text-mode pipes read
            out = out.replace("\r\n", "\n").replace("\r", "\n")
            err = err.replace("\r\n", "\n").replace("\r", "\n")
        code = res.exit_code
        if code is None and res.timed_out and rules.timeout_exit_code_137:
            code = TIMEOUT_EXIT_CODE
        timed_out = bool(res.timed_out)
        if rules.timed_out_from_exit_code and code in (124, 137):
            timed_out = True
        limit = self.config.max_output_chars
        stdout, out_cut = truncate(out, limit)
        stderr, err_cut = truncate(err, limit)
        if res.status == "resource_limit" and rules.resource_markers:
            stderr += "\n[killed: the sandbox's memory or process limit was reached]"
        return ToolOutcome(
            result={
                "ok": code == 0,
                "exit_code": code,
                "stdout": stdout,
                "stderr": stderr,
                "timed_out": timed_out,
                "duration_seconds": round(res.duration, 6),
                "stdout_truncated": out_cut,
                "stderr_truncated": err_cut,
            },
            deadline_hit=res.status == "deadline",
        )

    def _stat(
        self, path: str, raw: str, roots: str, max_bytes: int, not_file: str
    ) -> tuple[str, int]:
        return stat_in_sandbox(
            self.sandbox,
            path,
            raw=raw,
            roots=roots,
            max_bytes=max_bytes,
            not_file=not_file,
            timeout=min(60.0, self.config.command_timeout),
            absolute_links=not self.rules.absolute_links_refused,
        )

    def _view_image(self, args: Mapping[str, Any]) -> ToolOutcome:
        raw = args.get("path")
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("view_image.path must be a non-empty string")
        path = resolve_agent_path(raw)
        real, size = self._stat(
            path,
            raw,
            f"{WORKSPACE_DIR} {OUTPUT_DIR}",
            MAX_IMAGE_BYTES,
            f"image path is not a file: {raw}",
        )
        data = self._fetch(real, size)
        if len(data) != size:
            raise ValueError(f"image could not be read completely: {raw}")
        encoded, meta = _normalize_image(
            data,
            max_edge=self.config.image_max_edge,
            quality=self.config.image_jpeg_quality,
            memory_bytes=self.config.image_memory_bytes,
        )
        from dataspace.agents._react_prompt import IMAGE_NOTE

        meta = {
            "agent_path": raw,
            "source_sha256": hashlib.sha256(data).hexdigest(),
            "source_bytes": len(data),
            **meta,
        }
        url = "data:image/jpeg;base64," + base64.b64encode(encoded).decode("ascii")
        message = {
            "role": "user",
            "content": [
                {"type": "text", "text": IMAGE_NOTE.format(path=raw)},
                {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
            ],
        }
        return ToolOutcome(result={"ok": True, "image": meta}, image_message=message)

    def _fetch(self, real: str, size: int) -> bytes:
        """The bytes of a checked regular file under /workspace or /output."""
        if real.startswith(OUTPUT_DIR + "/"):
            return self.sandbox.read_file(real, max_bytes=MAX_IMAGE_BYTES)
        if size <= INLINE_BYTES:  # small enough for the command output
            res = self.sandbox.exec(["base64", "-w0", "--", real], timeout=60.0)
            if res.exit_code != 0:
                raise ValueError(f"cannot read {real}: {res.stderr.strip()[-200:]}")
            return base64.b64decode(res.stdout.strip())
        tmp = f"{OUTPUT_DIR}/.view_image-{uuid.uuid4().hex[:8]}"
        try:
            res = self.sandbox.exec(["cp", "--", real, tmp], timeout=60.0)
            if res.exit_code != 0:
                raise ValueError(f"cannot read {real}: {res.stderr.strip()[-200:]}")
            return self.sandbox.read_file(tmp, max_bytes=MAX_IMAGE_BYTES)
        finally:
            self.sandbox.exec(["rm", "-f", "--", tmp], timeout=60.0)

    def _submit(self, args: Mapping[str, Any]) -> ToolOutcome:
        raw = args.get("path")
        if not isinstance(raw, str) or not raw.strip():
            raise ValueError("submit_answer.path must be a non-empty string")
        path = resolve_agent_path(raw, output_only=True)
        real, size = self._stat(
            path, raw, OUTPUT_DIR, self._answer_bound(), "submitted path is not a file"
        )
        if size > MAX_PREDICTION_BYTES:  # only the official profile gets here
            meta = self._large_shape(real)
            data = None
        else:
            # read_file never follows symlinks: submit the resolved regular file
            data = self.sandbox.read_file(real, max_bytes=MAX_PREDICTION_BYTES)
            meta = check_prediction(data)
            if self.rules.check_evaluator_limits:
                check_evaluator_limits(data, raw)
        return ToolOutcome(
            result={
                "ok": True,
                "accepted": True,
                "message": "Answer recorded; no evaluation feedback is provided.",
                "prediction": meta,
            },
            submitted_path=real,
            snapshot=self._snapshot(real, data, meta),
        )

    def _answer_bound(self) -> int:
        """The largest answer ``submit_answer`` accepts (the official tool has no bound)."""
        return MAX_PREDICTION_BYTES if self.rules.check_evaluator_limits else 2**62

    def _large_shape(self, real: str, *, check: bool = True) -> dict[str, Any]:
        """The official answer check of a file too large to read here, run in the sandbox.

        Returns the answer's ``columns``, ``data_rows``, ``bytes`` and ``sha256``; with
        ``check=False`` only its size and digest, whatever its shape.
        """
        res = self.sandbox.exec(
            ["python3", "-I", "-S", "-c", _SHAPE_SCRIPT, real],
            timeout=max(60.0, self.config.command_timeout),
            cwd=OUTPUT_DIR,
        )
        try:
            reply = json.loads(res.stdout)
        except ValueError:
            reply = None
        if res.exit_code != 0 or not isinstance(reply, dict):
            tail = (res.stderr.strip().splitlines() or ["no output"])[-1][:300]
            raise ValueError(f"cannot check {real}: {tail}")
        if check and "error_type" in reply:
            raise ToolRefused(str(reply["error_type"]), str(reply["error"]))
        keys = ("columns", "data_rows", "bytes", "sha256") if check else ("bytes", "sha256")
        return {key: reply[key] for key in keys}

    def _snapshot(
        self, submitted: str, data: bytes | None, meta: Mapping[str, Any]
    ) -> PredictionSnapshot:
        """The bytes that will be scored, taken now (not when the outputs are collected).

        The official runner scores ``/output/prediction.csv`` whatever path was submitted,
        following a symbolic link as its copy does: the link is resolved inside the sandbox
        and must stay under ``/output``. A scored file over the evaluator's limit is not
        read: the snapshot keeps its size and digest, and the evaluator judges the file
        collected from the sandbox.
        """
        scored = submitted
        if self.rules.score_prediction_csv and submitted != PREDICTION_PATH:
            try:
                scored, size = self._stat(
                    PREDICTION_PATH,
                    PREDICTION_PATH,
                    OUTPUT_DIR,
                    self._answer_bound(),
                    "not a regular file",
                )
            except (OSError, ValueError) as exc:
                return PredictionSnapshot(
                    path=PREDICTION_PATH,
                    data=None,
                    problem=f"{PREDICTION_PATH} (the scored file) could not be read: {exc}",
                )
            if scored != submitted:
                try:
                    meta = (
                        self._large_shape(scored, check=False)
                        if size > MAX_PREDICTION_BYTES
                        else {"bytes": size}
                    )
                    data = (
                        None
                        if size > MAX_PREDICTION_BYTES
                        else self.sandbox.read_file(scored, max_bytes=MAX_PREDICTION_BYTES)
                    )
                except (OSError, ValueError, ToolRefused) as exc:
                    return PredictionSnapshot(
                        path=PREDICTION_PATH,
                        data=None,
                        problem=f"{PREDICTION_PATH} (the scored file) could not be read: {exc}",
                    )
        if data is None:
            return PredictionSnapshot(
                path=scored,
                data=None,
                sha256=meta.get("sha256"),
                size=int(meta["bytes"]),
                problem=(
                    f"{scored} is {meta['bytes']} bytes, over the evaluator's "
                    f"{MAX_PREDICTION_BYTES}-byte limit"
                ),
            )
        return PredictionSnapshot(path=scored, data=data, sha256=hashlib.sha256(data).hexdigest())


def _arguments(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"tool arguments are not valid JSON: {exc}") from exc
    if not isinstance(parsed, dict):
        raise ValueError("tool arguments must be a JSON object")
    return parsed


__all__ = [
    "MAX_PREDICTION_BYTES",
    "TOOL_SCHEMAS",
    "ToolBox",
    "ToolConfig",
    "ToolOutcome",
    "ToolRefused",
    "check_evaluator_limits",
    "check_prediction",
    "read_prediction_csv",
    "resolve_agent_path",
    "stat_in_sandbox",
    "truncate",
]
