"""Narration: speech from espeak-ng when the system has it, else a silent track.

Each scene's narration is synthesized to 16-bit mono PCM and its measured length sets the
scene's minimum duration; the track is then laid out scene by scene (speech at the start of
its scene, silence to the scene's end). Without ``espeak-ng`` on the PATH the track is
silence of the same length and ``Narration.warning`` says why, for the ledger.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)

SAMPLE_RATE = 22050
VOICES = {"en": "en-us", "zh": "cmn"}


@dataclass(frozen=True, kw_only=True)
class Clip:
    """One scene's speech: 16-bit mono PCM at ``SAMPLE_RATE``."""

    pcm: bytes

    @property
    def seconds(self) -> float:
        """Length in seconds."""
        return len(self.pcm) / 2 / SAMPLE_RATE


@dataclass(frozen=True, kw_only=True)
class Narration:
    """Every scene's clip, and how it was made."""

    clips: tuple[Clip, ...]
    engine: str
    warning: str | None = None


def espeak_path() -> str | None:
    """The espeak-ng executable, or None."""
    return shutil.which("espeak-ng")


def _read_wav(data: bytes) -> bytes:
    import numpy as np

    with wave.open(io.BytesIO(data)) as w:
        frames = w.readframes(w.getnframes())
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
    if width != 2:
        raise ValueError(f"espeak-ng wrote {8 * width}-bit audio")
    pcm = np.frombuffer(frames, dtype="<i2")
    if channels > 1:
        pcm = pcm.reshape(-1, channels).mean(axis=1).astype("<i2")
    if rate != SAMPLE_RATE:
        n = int(len(pcm) * SAMPLE_RATE / rate)
        pcm = np.interp(np.linspace(0, len(pcm) - 1, n), np.arange(len(pcm)), pcm).astype("<i2")
    return pcm.tobytes()


def synthesize(texts: Sequence[str], language: str, *, speed: int = 165) -> Narration:
    """Speech for each text (empty text: no speech), or silence without espeak-ng."""
    exe = espeak_path()
    if exe is None:
        return Narration(
            clips=tuple(Clip(pcm=b"") for _ in texts),
            engine="silent",
            warning="espeak-ng is not installed; the video has a silent audio track",
        )
    voice = VOICES.get(language, "en-us")
    clips = []
    with tempfile.TemporaryDirectory(prefix="narration-") as tmp:
        for i, text in enumerate(texts):
            if not text.strip():
                clips.append(Clip(pcm=b""))
                continue
            out = os.path.join(tmp, f"{i}.wav")
            proc = subprocess.run(
                [exe, "-v", voice, "-s", str(speed), "-w", out, text],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if proc.returncode != 0 or not os.path.exists(out):
                err = proc.stderr.decode(errors="replace").strip()[:200]
                return Narration(
                    clips=tuple(Clip(pcm=b"") for _ in texts),
                    engine="silent",
                    warning=f"espeak-ng failed ({err or proc.returncode}); the "
                    "video has a silent audio track",
                )
            with open(out, "rb") as fh:
                clips.append(Clip(pcm=_read_wav(fh.read())))
    return Narration(clips=tuple(clips), engine="espeak-ng")


def track(clips: Sequence[Clip], durations: Sequence[float]) -> bytes:
    """A WAV file: each clip at the start of its scene, padded with silence to its end."""
    out = bytearray()
    for clip, seconds in zip(clips, durations, strict=True):
        n = round(seconds * SAMPLE_RATE) * 2
        pcm = clip.pcm[:n]
        out += pcm + b"\0" * (n - len(pcm))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(bytes(out))
    return buf.getvalue()


__all__ = ["SAMPLE_RATE", "Clip", "Narration", "espeak_path", "synthesize", "track"]
