"""Scene frames drawn with Pillow in a CJK-capable font.

Components: title cards, KPI cards, tables, bar and line charts, configuration panels and
time windows.

The font is pymupdf's built-in Droid Sans Fallback (Latin and CJK in one file), so frames
need no system fonts. Text is drawn glyph by glyph at integer advances, and every text's
position, size and colours go into the frame layout (``TextItem``), so checks can read the
rendered text back from decoded frames (``builder.video.checks``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

BG = (246, 247, 251)
PANEL = (255, 255, 255)
INK = (24, 28, 40)
MUTED = (96, 104, 120)
HEADER = (28, 45, 80)
ACCENT = (46, 110, 200)
GOOD = (30, 130, 80)
BAD = (190, 60, 50)
WHITE = (255, 255, 255)


@dataclass(frozen=True, kw_only=True)
class TextItem:
    """One text drawn on a frame.

    Attributes:
        text: the text.
        x, y: top-left of the text (Pillow's ``la`` anchor).
        size: font size in pixels.
        width: the slot width reserved for it (no other text inside).
        fg, bg: text and background colours.
        atom: the evidence atom it carries, if any.
    """

    text: str
    x: int
    y: int
    size: int
    width: int
    fg: tuple[int, int, int]
    bg: tuple[int, int, int]
    atom: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "text": self.text,
            "x": self.x,
            "y": self.y,
            "size": self.size,
            "width": self.width,
            "fg": list(self.fg),
            "bg": list(self.bg),
            "atom": self.atom,
        }


@lru_cache(maxsize=1)
def font_bytes() -> bytes:
    """The bytes of the CJK-capable font (pymupdf's built-in Droid Sans Fallback)."""
    import pymupdf

    return bytes(pymupdf.Font("cjk").buffer)


@lru_cache(maxsize=64)
def font(size: int) -> Any:
    """The font at a pixel size."""
    from PIL import ImageFont

    return ImageFont.truetype(io.BytesIO(font_bytes()), size)


@lru_cache(maxsize=65536)
def advance(size: int, ch: str) -> int:
    """Integer advance of one character at a size."""
    return max(1, round(font(size).getlength(ch)))


def text_width(text: str, size: int) -> int:
    """Width of a text drawn glyph by glyph."""
    return sum(advance(size, ch) for ch in text)


def line_height(size: int) -> int:
    """Height of a text line at a size."""
    ascent, descent = font(size).getmetrics()
    return int(ascent + descent)


class Canvas:
    """A frame being drawn, with the layout of every text on it."""

    def __init__(self, width: int, height: int) -> None:
        from PIL import Image, ImageDraw

        self.w, self.h = width, height
        self.s = width / 640.0
        self.image = Image.new("RGB", (width, height), BG)
        self.draw = ImageDraw.Draw(self.image)
        self.items: list[TextItem] = []

    def px(self, v: float) -> int:
        """Scale a 640-wide design unit to pixels."""
        return round(v * self.s)

    def fit(self, text: str, size: int, width: int, minimum: int = 10) -> int:
        """The largest size up to ``size`` at which ``text`` fits ``width``."""
        while size > minimum and text_width(text, size) > width:
            size -= 1
        return size

    def text(
        self,
        x: int,
        y: int,
        text: str,
        size: int,
        *,
        fg: tuple[int, int, int] = INK,
        bg: tuple[int, int, int] = BG,
        width: int | None = None,
        atom: str | None = None,
    ) -> None:
        """Draw a text glyph by glyph and record it."""
        f = font(size)
        cx = x
        for ch in text:
            self.draw.text((cx, y), ch, font=f, fill=fg)
            cx += advance(size, ch)
        self.items.append(
            TextItem(
                text=text,
                x=x,
                y=y,
                size=size,
                width=width if width is not None else cx - x,
                fg=fg,
                bg=bg,
                atom=atom,
            )
        )

    def rect(
        self,
        box: Sequence[int],
        fill: tuple[int, int, int],
        outline: tuple[int, int, int] | None = None,
        radius: int = 0,
    ) -> None:
        """A filled (rounded) rectangle."""
        self.draw.rounded_rectangle(list(box), radius=radius, fill=fill, outline=outline)


def _header(c: Canvas, title: str) -> int:
    h = c.px(44)
    c.rect((0, 0, c.w, h), HEADER)
    size = c.fit(title, c.px(20), c.w - c.px(40))
    c.text(c.px(20), (h - line_height(size)) // 2, title, size, fg=WHITE, bg=HEADER)
    return h


def _subtitle(c: Canvas, narration: str) -> None:
    if not narration:
        return
    h = c.px(34)
    c.rect((0, c.h - h, c.w, c.h), (40, 44, 56))
    size = c.fit(narration, c.px(13), c.w - c.px(30), minimum=c.px(9))
    text = narration
    while text_width(text, size) > c.w - c.px(30) and len(text) > 4:
        text = text[:-2]
    c.text(c.px(15), c.h - h + (h - line_height(size)) // 2, text, size, fg=WHITE, bg=(40, 44, 56))


def draw_scene(
    component: Mapping[str, Any], narration: str, *, width: int = 640, height: int = 360
) -> Canvas:
    """Draw one scene's frame.

    Raises:
        ValueError: the component cannot be laid out legibly at this size.
    """
    c = Canvas(width, height)
    kind = component["type"]
    top = _header(c, str(component.get("title") or "")) if kind != "title" else 0
    bottom = c.h - c.px(40)
    if kind == "title":
        c.rect((0, 0, c.w, c.h), HEADER)
        title = str(component["title"])
        size = c.fit(title, c.px(30), c.w - c.px(60))
        c.text(
            (c.w - text_width(title, size)) // 2,
            c.h // 2 - c.px(40),
            title,
            size,
            fg=WHITE,
            bg=HEADER,
        )
        sub = str(component.get("subtitle") or "")
        ss = c.fit(sub, c.px(18), c.w - c.px(60))
        c.text(
            (c.w - text_width(sub, ss)) // 2,
            c.h // 2 + c.px(10),
            sub,
            ss,
            fg=(200, 210, 230),
            bg=HEADER,
        )
    elif kind in ("card", "config_panel"):
        rows = component["items"] if kind == "card" else component["rows"]
        n = len(rows)
        cols = 1 if kind == "config_panel" else min(3, n)
        lines = (n + cols - 1) // cols
        gap = c.px(12)
        cw = (c.w - c.px(40) - gap * (cols - 1)) // cols
        ch = min(c.px(90), (bottom - top - c.px(20) - gap * (lines - 1)) // max(lines, 1))
        for i, (label, value, atom) in enumerate(rows):
            x = c.px(20) + (i % cols) * (cw + gap)
            y = top + c.px(14) + (i // cols) * (ch + gap)
            c.rect((x, y, x + cw, y + ch), PANEL, outline=(220, 224, 232), radius=c.px(8))
            if kind == "config_panel":
                ls = c.fit(str(label), c.px(16), cw // 2 - c.px(20))
                c.text(
                    x + c.px(14),
                    y + (ch - line_height(ls)) // 2,
                    str(label),
                    ls,
                    fg=MUTED,
                    bg=PANEL,
                )
                vs = c.fit(str(value), c.px(24), cw // 2 - c.px(20), minimum=c.px(14))
                if text_width(str(value), vs) > cw // 2 - c.px(20):
                    raise ValueError(f"value {value!r} does not fit a panel row")
                c.text(
                    x + cw // 2,
                    y + (ch - line_height(vs)) // 2,
                    str(value),
                    vs,
                    fg=ACCENT if atom else INK,
                    bg=PANEL,
                    width=cw // 2 - c.px(14),
                    atom=atom,
                )
            else:
                ls = c.fit(str(label), c.px(14), cw - c.px(24))
                c.text(x + c.px(12), y + c.px(10), str(label), ls, fg=MUTED, bg=PANEL)
                vs = c.fit(str(value), c.px(24), cw - c.px(24), minimum=c.px(13))
                if text_width(str(value), vs) > cw - c.px(24):
                    raise ValueError(f"value {value!r} does not fit a card")
                c.text(
                    x + c.px(12),
                    y + c.px(14) + line_height(ls),
                    str(value),
                    vs,
                    fg=INK,
                    bg=PANEL,
                    width=cw - c.px(20),
                    atom=atom,
                )
    elif kind == "time_window":
        x0, x1 = c.px(60), c.w - c.px(60)
        y = top + c.px(40)
        c.text(c.px(30), top + c.px(14), str(component["field"]), c.px(16), fg=MUTED)
        c.rect((x0, y + c.px(40), x1, y + c.px(52)), (210, 216, 228), radius=c.px(6))
        c.rect(
            (x0 + (x1 - x0) // 3, y + c.px(36), x0 + 2 * (x1 - x0) // 3, y + c.px(56)),
            ACCENT,
            radius=c.px(6),
        )
        label = str(component["label"])
        c.text(x0, y + c.px(80), label, c.px(16), fg=MUTED)
        vs = c.px(30)
        c.text(
            x0 + (x1 - x0) // 3,
            y + c.px(76),
            str(component["value"]),
            vs,
            fg=INK,
            width=(x1 - x0) // 3,
            atom=component["atom"],
        )
    elif kind == "table":
        _table(c, component, top, bottom)
    elif kind in ("bar_chart", "line_chart"):
        _chart(c, component, top, bottom)
    else:
        raise ValueError(f"unknown component {kind!r}")
    _subtitle(c, narration)
    return c


def _table(c: Canvas, comp: Mapping[str, Any], top: int, bottom: int) -> None:
    columns = [str(x) for x in comp["columns"]]
    rows = comp["rows"]
    pad = c.px(10)
    avail = c.w - c.px(40)
    for size in range(c.px(17), c.px(10) - 1, -1):
        widths = [
            max(text_width(columns[j], size), *(text_width(str(r[j][0]), size) for r in rows))
            + 2 * pad
            for j in range(len(columns))
        ]
        if sum(widths) <= avail:
            break
    else:
        raise ValueError("the table is too wide to read at this size")
    extra = (avail - sum(widths)) // len(widths)
    widths = [w + extra for w in widths]
    lh = line_height(size) + c.px(12)
    if top + c.px(12) + lh * (len(rows) + 1) > bottom:
        raise ValueError("the table has too many rows for one scene")
    x0, y = c.px(20), top + c.px(12)
    c.rect((x0, y, x0 + sum(widths), y + lh), (226, 232, 244))
    x = x0
    for j, name in enumerate(columns):
        c.text(
            x + pad, y + c.px(6), name, size, fg=MUTED, bg=(226, 232, 244), width=widths[j] - pad
        )
        x += widths[j]
    for i, row in enumerate(rows):
        y += lh
        fill = PANEL if i % 2 == 0 else (250, 251, 253)
        c.rect((x0, y, x0 + sum(widths), y + lh), fill)
        x = x0
        for j, (value, atom) in enumerate(row):
            fg = INK
            c.text(
                x + pad,
                y + c.px(6),
                str(value),
                size,
                fg=fg,
                bg=fill,
                width=widths[j] - pad,
                atom=atom,
            )
            x += widths[j]


def _chart(c: Canvas, comp: Mapping[str, Any], top: int, bottom: int) -> None:
    values = [float(v) for v in comp["values"]]
    labels = [str(x) for x in comp["labels"]]
    n = len(values)
    x0, x1 = c.px(50), c.w - c.px(30)
    vsize, lsize = c.px(15), c.px(13)
    y_top = top + c.px(16) + line_height(vsize)
    y_base = bottom - c.px(10) - line_height(lsize)
    c.draw.line((x0, y_base, x1, y_base), fill=(180, 186, 200), width=max(1, c.px(1)))
    lo = min(0.0, *values)
    hi = max(values) if max(values) > lo else lo + 1.0
    slot = (x1 - x0) // max(n, 1)
    points = []
    for i, (v, (text, atom)) in enumerate(zip(values, comp["value_text"], strict=True)):
        cx = x0 + i * slot + slot // 2
        h = int((v - lo) / (hi - lo) * (y_base - y_top - c.px(8)))
        top_y = y_base - max(h, c.px(2))
        if comp["type"] == "bar_chart":
            bw = max(c.px(8), slot // 2)
            c.rect((cx - bw // 2, top_y, cx + bw // 2, y_base), ACCENT)
        else:
            points.append((cx, top_y))
        vs = c.fit(text, vsize, slot - c.px(6), minimum=c.px(10))
        if text_width(text, vs) > slot - c.px(4):
            raise ValueError(f"value {text!r} does not fit its chart slot")
        tx = cx - text_width(text, vs) // 2
        c.text(
            tx,
            top_y - line_height(vs) - c.px(4),
            text,
            vs,
            fg=INK,
            width=cx + slot // 2 - tx - 1,
            atom=atom,
        )
        ls = c.fit(labels[i], lsize, slot - c.px(6), minimum=c.px(9))
        c.text(cx - text_width(labels[i], ls) // 2, y_base + c.px(6), labels[i], ls, fg=MUTED)
    if points:
        c.draw.line(points, fill=ACCENT, width=max(2, c.px(3)))
        for p in points:
            r = c.px(4)
            c.draw.ellipse((p[0] - r, p[1] - r, p[0] + r, p[1] + r), fill=ACCENT)


__all__ = [
    "Canvas",
    "TextItem",
    "advance",
    "draw_scene",
    "font",
    "font_bytes",
    "line_height",
    "text_width",
]
