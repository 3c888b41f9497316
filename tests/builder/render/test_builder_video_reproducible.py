"""A video's bytes are the same on any machine: they must not depend on its cores."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

# frames that move (x264 codes still frames alike with any threads), a silent WAV
_ENCODE = """
import hashlib, io, os, sys, wave
import numpy as np
os.sched_setaffinity(0, {int(c) for c in sys.argv[1].split(",")})  # ffmpeg inherits it
from builder.video.encoding import encode
w, h, fps, n = 320, 240, 8, 40
y, x = np.mgrid[0:h, 0:w]
frames = [
    np.stack([(x + 5 * y + 9 * k) % 256, (x * y + k) % 256, (3 * y - 7 * k) % 256], axis=-1)
    .astype(np.uint8).tobytes()
    for k in range(n)
]
buf = io.BytesIO()
with wave.open(buf, "wb") as wav:
    wav.setnchannels(1)
    wav.setsampwidth(2)
    wav.setframerate(8000)
    wav.writeframes(bytes(2 * 8000 * n // fps))
data = encode(frames, width=w, height=h, fps=fps, audio_wav=buf.getvalue(), seconds=n / fps)
print(hashlib.sha256(data).hexdigest())
"""


def _encoded_on(cpus: set[int]) -> str:
    out = subprocess.run(
        [sys.executable, "-c", _ENCODE, ",".join(map(str, sorted(cpus)))],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_video_is_the_same_bytes_on_one_core_and_on_all():
    """Guards release fingerprints across machines: x264 picks its thread count from the
    cores it may use, and its output differs with that count, so a release built on a
    machine with other cores had other video bytes. The encoder's threads are fixed."""
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip(f"this process may use {len(cpus)} core; the check needs two")
    one = _encoded_on({min(cpus)})
    assert _encoded_on(cpus) == one
    assert len(one) == len(hashlib.sha256().hexdigest())
