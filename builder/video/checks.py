"""Video checks, and a glyph reader that reads rendered text back from decoded frames.

``read_text`` reads one text slot of a decoded (grayscale) frame without being told the
text: it renders every glyph of an alphabet with the frame's font, size and colours and
finds, by dynamic programming over the slot's columns, the glyph sequence whose rendering
best explains the pixels (blank columns allowed, so trailing background costs nothing).
Glyphs the typeface draws identically (``l`` and ``I`` in some fonts) form one class and
compare equal.

``check_video`` decodes the whole file (it must decode without errors, have a video and an
audio stream and the planned duration), reads each scene's frame at 60% of its length
(taken from that same decode when the frame rate is known, else by a seek), requires
readable (non-blank) frames, and reads every evidence atom's constant back from its slot,
which must equal the atom's display text. The question leak check lives with the
strategies (``builder.video.strategies.leaks``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from builder.video.encoding import frame_at, frame_index, probe, probe_frames
from builder.video.frames import TextItem, advance, font, line_height

logger = logging.getLogger(__name__)

ASCII = "".join(chr(c) for c in range(33, 127))


@lru_cache(maxsize=4096)
def _glyph(ch: str, size: int, fg: int, bg: int) -> Any:
    import numpy as np
    from PIL import Image, ImageDraw

    w, h = advance(size, ch), line_height(size)
    img = Image.new("L", (w, h), bg)
    ImageDraw.Draw(img).text((0, 0), ch, font=font(size), fill=fg)
    return np.asarray(img, dtype=np.float32)


def _gray(rgb: Sequence[int]) -> int:
    r, g, b = rgb
    return round(0.299 * r + 0.587 * g + 0.114 * b)


def glyph_classes(alphabet: str, size: int, fg: int, bg: int) -> dict[str, str]:
    """Map each glyph to the first glyph the font draws identically at this size."""
    return dict(_glyph_classes(alphabet, size, fg, bg))


@lru_cache(maxsize=256)
def _glyph_classes(alphabet: str, size: int, fg: int, bg: int) -> tuple[tuple[str, str], ...]:
    import numpy as np

    out: dict[str, str] = {}
    reps: list[tuple[str, Any]] = []
    for ch in alphabet:
        g = _glyph(ch, size, fg, bg)
        same = next(
            (r for r, t in reps if t.shape == g.shape and float(np.abs(t - g).mean()) < 2.0), None
        )
        out[ch] = same or ch
        if same is None:
            reps.append((ch, g))
    return tuple(out.items())


def read_text(frame: Any, item: TextItem, alphabet: str) -> str:
    """Read the text in one slot of a grayscale frame.

    Position, size and colours come from ``item``; its text is not used.
    """
    import numpy as np

    size = item.size
    h = line_height(size)
    fg, bg = _gray(item.fg), _gray(item.bg)
    region = frame[item.y : item.y + h, item.x : item.x + item.width].astype(np.float32)
    h, width = region.shape
    glyphs = [ch for ch in dict.fromkeys(alphabet) if not ch.isspace()]
    inf = float("inf")
    # cost[g][x]: mismatch of glyph g placed at column x
    costs, widths = [], []
    for ch in glyphs:
        t = _glyph(ch, size, fg, bg)[:h]
        w = t.shape[1]
        if w > width:
            costs.append(np.full(width + 1, inf))
            widths.append(w)
            continue
        win = np.lib.stride_tricks.sliding_window_view(region, (h, w))[0]
        c = np.abs(win - t[None]).sum(axis=(1, 2))
        costs.append(np.concatenate([c, np.full(width + 1 - len(c), inf)]))
        widths.append(w)
    blank = np.abs(region - bg).sum(axis=0)
    space_w = advance(size, " ")
    best = np.full(width + 1, inf)
    best[0] = 0.0
    back: list[tuple[int, int]] = [(-1, -1)] * (width + 1)
    cost_m = np.vstack(costs) if costs else np.zeros((0, width + 1))
    w_arr = np.array(widths, dtype=int)
    for x in range(width):
        if not np.isfinite(best[x]):
            continue
        if best[x] + blank[x] < best[x + 1]:
            best[x + 1] = best[x] + blank[x]
            back[x + 1] = (x, -1)
        if len(glyphs):
            cand = best[x] + cost_m[:, x]
            ends = x + w_arr
            for g in np.nonzero((ends <= width) & np.isfinite(cand))[0]:
                e = int(ends[g])
                if cand[g] < best[e]:
                    best[e] = cand[g]
                    back[e] = (x, int(g))
    out: list[str] = []
    x = width
    run = 0
    while x > 0:
        prev, g = back[x]
        if prev < 0:
            break
        if g < 0:
            run += 1
        else:
            if run >= 0.6 * space_w:
                out.append(" ")
            run = 0
            out.append(glyphs[g])
        x = prev
    return " ".join("".join(reversed(out)).split())


def same_text(read: str, expected: str, item: TextItem, alphabet: str) -> bool:
    """Whether a read text equals the expected one, up to glyphs the font cannot tell apart.

    >>> same_text("a b", "a b", TextItem(text="", x=0, y=0, size=20, width=10,
    ...           fg=(0, 0, 0), bg=(255, 255, 255)), "ab")
    True
    """
    classes = glyph_classes(
        "".join(dict.fromkeys(alphabet + read + expected)),
        item.size,
        _gray(item.fg),
        _gray(item.bg),
    )

    def canon(s: str) -> str:
        return "".join(classes.get(ch, ch) for ch in " ".join(s.split()))

    return canon(read) == canon(expected)


def alphabet_for(texts: Iterable[str]) -> str:
    """Printable ASCII plus every other character of the given texts."""
    extra = sorted({ch for t in texts for ch in t if ord(ch) > 126 and not ch.isspace()})
    return ASCII + "".join(extra)


@dataclass(frozen=True, kw_only=True)
class VideoCheck:
    """The verdict of the video checks."""

    decodes: bool
    has_audio: bool
    duration: float
    expected_duration: float
    frames: int
    readable_frames: int
    scenes: int
    atoms_read: dict[str, str] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Every check passed."""
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (for the ledger)."""
        return {
            "ok": self.ok,
            "decodes": self.decodes,
            "has_audio": self.has_audio,
            "duration": round(self.duration, 3),
            "expected_duration": round(self.expected_duration, 3),
            "frames": self.frames,
            "readable_frames": self.readable_frames,
            "scenes": self.scenes,
            "atoms_read": dict(self.atoms_read),
            "errors": list(self.errors),
        }


def check_video(
    data: bytes,
    *,
    timeline: Sequence[tuple[float, float]],
    layouts: Sequence[Sequence[TextItem]],
    expected: Mapping[str, str],
    width: int,
    height: int,
    tolerance: float = 0.25,
    rate: int | None = None,
) -> VideoCheck:
    """Check an encoded video against its timeline, frame layouts and evidence.

    Args:
        data: the MP4 bytes.
        timeline: (start, end) seconds of each scene.
        layouts: the text layout of each scene's frame.
        expected: atom id -> the display text that must be read back.
        width: the frame width.
        height: the frame height.
        tolerance: allowed duration difference in seconds.
        rate: the frame rate the video was encoded at: the scenes' frames then come from
            the full decode (the frames a seek would give, ``frame_index``), else from a
            seek each.
    """
    import numpy as np

    errors: list[str] = []
    times = [start + 0.6 * (end - start) for start, end in timeline]
    decoded: dict[int, Any] = {}
    if rate:
        # the frames a seek gives when the decode finds the planned rate, and their
        # neighbours; a frame the decode did not keep is sought as before
        near = (frame_index(t, rate=rate, fps=rate) + d for t in times for d in (-1, 0, 1))
        p, decoded = probe_frames(data, near, width=width, height=height)
    else:
        p = probe(data)
    total = timeline[-1][1] if timeline else 0.0
    if p.errors or not p.has_video or p.frames == 0:
        errors.append(f"the file does not decode cleanly: {p.errors or 'no video frames'}")
    if not p.has_audio:
        errors.append("the file has no audio track")
    if abs(p.seconds - total) > tolerance:
        errors.append(f"duration {p.seconds:.2f}s differs from the planned {total:.2f}s")
    if (p.width, p.height) != (width, height):
        errors.append(f"frame size {p.width}x{p.height}, expected {width}x{height}")
    fps = p.frames / p.seconds if p.seconds > 0 and p.frames else None
    alphabet = alphabet_for(i.text for layout in layouts for i in layout)
    read: dict[str, str] = {}
    readable = 0
    for t, layout in zip(times, layouts, strict=True):
        frame = decoded.get(frame_index(t, rate=rate, fps=fps)) if rate else None
        try:
            if frame is None:
                frame = frame_at(data, t, width=width, height=height, fps=fps)
        except Exception as exc:  # a decode failure is a check failure, not a crash
            errors.append(f"no frame at {t:.2f}s: {exc}")
            continue
        if float(np.asarray(frame).std()) > 5.0:
            readable += 1
        else:
            errors.append(f"the frame at {t:.2f}s is blank")
        for item in layout:
            if item.atom is None or item.atom in read:
                continue
            text = read_text(frame, item, alphabet)
            if same_text(text, expected.get(item.atom, ""), item, alphabet):
                read[item.atom] = text
    for atom, want in expected.items():
        if atom not in read:
            errors.append(f"evidence {atom} ({want!r}) could not be read back from the frames")
    return VideoCheck(
        decodes=not p.errors and p.frames > 0,
        has_audio=p.has_audio,
        duration=p.seconds,
        expected_duration=total,
        frames=p.frames,
        readable_frames=readable,
        scenes=len(timeline),
        atoms_read=read,
        errors=tuple(errors),
    )


__all__ = [
    "ASCII",
    "VideoCheck",
    "alphabet_for",
    "check_video",
    "glyph_classes",
    "read_text",
    "same_text",
]
