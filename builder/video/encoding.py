"""Encoding and decoding with the ffmpeg binary of the ``imageio-ffmpeg`` wheel.

Frames go to ffmpeg as raw RGB24 on a pipe (every frame the same size and pixel format)
with the narration WAV as the second input; the output is H.264 (yuv420p) with AAC audio in
an MP4, encoded by one x264 thread so that the bytes are the same on every machine. No
system ffmpeg is needed. ``probe`` decodes a file fully and reports its
duration, frame count and streams; ``frame_at`` decodes one frame as grayscale.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from builder.errors import EncodingError

logger = logging.getLogger(__name__)


def ffmpeg() -> str:
    """The ffmpeg executable shipped in the imageio-ffmpeg wheel.

    Raises:
        EncodingError: imageio-ffmpeg is not installed.
    """
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EncodingError(
            "video rendering needs the imageio-ffmpeg package (pip install imageio-ffmpeg)"
        ) from exc
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def encode(
    frames: Iterable[bytes],
    *,
    width: int,
    height: int,
    fps: int,
    audio_wav: bytes,
    seconds: float,
    crf: int = 20,
) -> bytes:
    """Encode raw RGB24 frames plus a WAV track into MP4 bytes.

    A video holds few distinct frames (a still per scene and its fade-in), so each distinct
    frame is converted to yuv420p once, by the same ffmpeg conversion the encoder would
    apply to every frame, and the encoder reads yuv420p: the same bytes for a fraction
    of the work.

    Raises:
        EncodingError: ffmpeg failed.
    """
    distinct, order = distinct_frames(frames)
    return encode_distinct(
        distinct,
        order,
        width=width,
        height=height,
        fps=fps,
        audio_wav=audio_wav,
        seconds=seconds,
        crf=crf,
    )


def distinct_frames(frames: Iterable[bytes]) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """The different frames in order of first use, and each frame's index among them.

    >>> distinct_frames([b"a", b"a", b"b", b"a"])
    ((b'a', b'b'), (0, 0, 1, 0))
    """
    order: list[int] = []
    distinct: dict[bytes, int] = {}
    for frame in frames:
        frame = frame if isinstance(frame, bytes) else bytes(frame)
        order.append(distinct.setdefault(frame, len(distinct)))
    return tuple(distinct), tuple(order)


def encode_distinct(
    distinct: Sequence[bytes],
    order: Sequence[int],
    *,
    width: int,
    height: int,
    fps: int,
    audio_wav: bytes,
    seconds: float,
    crf: int = 20,
) -> bytes:
    """``encode`` of the frames ``distinct[i] for i in order``, told apart already.

    ``distinct`` holds different frames in order of first use, as ``encode`` finds them.

    Raises:
        EncodingError: ffmpeg failed.
    """
    yuv = _to_yuv420p(list(distinct), width=width, height=height, fps=fps)
    pool, pix_fmt = (yuv, "yuv420p") if yuv is not None else (list(distinct), "rgb24")
    return _encode(
        (pool[i] for i in order),
        pix_fmt=pix_fmt,
        width=width,
        height=height,
        fps=fps,
        audio_wav=audio_wav,
        seconds=seconds,
        crf=crf,
    )


def _to_yuv420p(frames: list[bytes], *, width: int, height: int, fps: int) -> list[bytes] | None:
    """RGB24 frames as yuv420p by ffmpeg's own conversion (None: not converted)."""
    size = width * height * 3 // 2
    if width % 2 or height % 2 or not frames:
        return None
    cmd = [
        ffmpeg(),
        "-loglevel",
        "error",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{width}x{height}",
        "-r",
        str(fps),
        "-i",
        "-",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "yuv420p",
        "-",
    ]
    proc = subprocess.run(cmd, input=b"".join(frames), capture_output=True, check=False)
    out = proc.stdout
    if proc.returncode != 0 or len(out) != size * len(frames):
        logger.info("yuv420p conversion failed; encoding from RGB24")
        return None
    return [out[i * size : (i + 1) * size] for i in range(len(frames))]


def _encode(
    frames: Iterable[bytes],
    *,
    pix_fmt: str,
    width: int,
    height: int,
    fps: int,
    audio_wav: bytes,
    seconds: float,
    crf: int,
) -> bytes:
    with tempfile.TemporaryDirectory(prefix="encode-") as tmp:
        wav = os.path.join(tmp, "audio.wav")
        out = os.path.join(tmp, "video.mp4")
        with open(wav, "wb") as fh:
            fh.write(audio_wav)
        cmd = [
            ffmpeg(),
            "-y",
            "-loglevel",
            "error",
            "-f",
            "rawvideo",
            "-pix_fmt",
            pix_fmt,
            "-s",
            f"{width}x{height}",
            "-r",
            str(fps),
            "-i",
            "-",
            "-i",
            wav,
            "-map",
            "0:v",
            "-map",
            "1:a",
            "-c:v",
            "libx264",
            # x264's output differs with its thread count, which it would take from the
            # machine's cores: one thread gives the same bytes on every machine (a build
            # runs several items at once for its throughput)
            "-threads",
            "1",
            "-preset",
            "veryfast",
            "-crf",
            str(crf),
            "-pix_fmt",
            "yuv420p",
            "-c:a",
            "aac",
            "-b:a",
            "64k",
            "-t",
            f"{seconds:.3f}",
            "-movflags",
            "+faststart",
            out,
        ]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None
        try:
            for frame in frames:
                proc.stdin.write(frame)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if proc.wait() != 0 or not os.path.exists(out):
            raise EncodingError(f"ffmpeg failed: {err.strip()[-300:]}")
        with open(out, "rb") as fh:
            return fh.read()


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What a full decode of a video found."""

    seconds: float
    frames: int
    has_audio: bool
    has_video: bool
    width: int
    height: int
    errors: str = ""


def probe(data: bytes) -> Probe:
    """Decode a video completely and describe it."""
    return probe_frames(data, (), width=0, height=0)[0]


def probe_frames(
    data: bytes, indices: Iterable[int], *, width: int, height: int
) -> tuple[Probe, dict[int, Any]]:
    """``probe``, and the frames at these indices (grayscale numpy arrays) from the same decode.

    One ffmpeg process decodes the file once for both: the description comes from its
    first output (the full decode ``probe`` runs), the frames from a second output that
    selects them. An index past the last frame is missing from the mapping.
    """
    import numpy as np

    wanted = sorted(set(indices))
    with tempfile.NamedTemporaryFile(suffix=".mp4") as fh:
        fh.write(data)
        fh.flush()
        cmd = [
            ffmpeg(),
            "-hide_banner",
            "-v",
            "info",
            "-i",
            fh.name,
            "-map",
            "0:v",
            "-f",
            "null",
            "-",
        ]
        if wanted:
            select = "+".join(f"eq(n,{n})" for n in wanted)
            cmd += [
                "-map",
                "0:v",
                "-vf",
                f"select='{select}',format=gray",
                "-fps_mode",
                "passthrough",
                "-f",
                "rawvideo",
                "pipe:1",
            ]
        proc = subprocess.run(cmd, capture_output=True, timeout=600, check=False)
    err = proc.stderr.decode(errors="replace")
    size = width * height
    raw = proc.stdout if wanted and size else b""
    frames = {
        n: np.frombuffer(raw[i * size : (i + 1) * size], dtype=np.uint8).reshape(height, width)
        for i, n in enumerate(wanted[: len(raw) // size if size else 0])
    }
    return _described(err, proc.returncode), frames


def _described(err: str, returncode: int) -> Probe:
    frames = [int(m) for m in re.findall(r"frame=\s*(\d+)", err)]
    times = re.findall(r"time=(\d+):(\d+):(\d+\.\d+)", err)
    seconds = 0.0
    if times:
        h, m, s = times[-1]
        seconds = int(h) * 3600 + int(m) * 60 + float(s)
    dur = re.search(r"Duration: (\d+):(\d+):(\d+\.\d+)", err)
    if dur:
        seconds = max(
            seconds, int(dur.group(1)) * 3600 + int(dur.group(2)) * 60 + float(dur.group(3))
        )
    size = re.search(r"Video: .*?(\d{2,5})x(\d{2,5})", err)
    bad = "\n".join(
        line for line in err.splitlines() if re.search(r"error|invalid|corrupt", line, re.I)
    )
    return Probe(
        seconds=seconds,
        frames=frames[-1] if frames else 0,
        has_audio=bool(re.search(r"Stream #\S+.*Audio:", err)),
        has_video=bool(re.search(r"Stream #\S+.*Video:", err)),
        width=int(size.group(1)) if size else 0,
        height=int(size.group(2)) if size else 0,
        errors=bad if returncode == 0 else (bad or err[-300:]),
    )


def frame_index(seconds: float, *, rate: int, fps: float | None = None) -> int:
    """The index of the frame ``frame_at`` returns, in a stream of ``rate`` frames a second.

    ``frame_at`` seeks to a time given in milliseconds and gets the first frame whose
    timestamp (``n / rate``, the first at 0) is not before it.

    >>> frame_index(2.6, rate=8, fps=8.0), frame_index(2.6, rate=8)
    (20, 21)
    """
    import math

    if fps:
        seconds = max(0.0, math.floor(seconds * fps + 1e-6) / fps - 0.001)
    micro = int(f"{seconds:.3f}".replace(".", "")) * 1000
    return -(-micro * rate // 1_000_000)


def frame_at(
    data: bytes, seconds: float, *, width: int, height: int, fps: float | None = None
) -> Any:
    """The frame shown at a time, as a grayscale numpy array (height x width).

    ffmpeg's seek returns the first frame whose timestamp is not before the seek time, so
    with ``fps`` the time is moved back to the start of the frame on screen at that moment.
    """
    import math

    import numpy as np

    if fps:
        seconds = max(0.0, math.floor(seconds * fps + 1e-6) / fps - 0.001)

    with tempfile.NamedTemporaryFile(suffix=".mp4") as fh:
        fh.write(data)
        fh.flush()
        for at in (seconds, max(0.0, seconds - 0.25), max(0.0, seconds - 0.5)):
            proc = subprocess.run(
                [
                    ffmpeg(),
                    "-v",
                    "error",
                    "-ss",
                    f"{at:.3f}",
                    "-i",
                    fh.name,
                    "-frames:v",
                    "1",
                    "-f",
                    "rawvideo",
                    "-pix_fmt",
                    "gray",
                    "-",
                ],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if proc.returncode == 0 and len(proc.stdout) >= width * height:
                break
    raw = proc.stdout
    if proc.returncode != 0 or len(raw) < width * height:
        raise EncodingError(
            f"cannot decode a frame at {seconds:.2f}s: "
            f"{proc.stderr.decode(errors='replace')[-200:]}"
        )
    return np.frombuffer(raw[: width * height], dtype=np.uint8).reshape(height, width)


__all__ = [
    "EncodingError",
    "Probe",
    "distinct_frames",
    "encode",
    "encode_distinct",
    "ffmpeg",
    "frame_at",
    "frame_index",
    "probe",
    "probe_frames",
]
