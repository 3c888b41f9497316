"""PDF layout of a Markdown document with pymupdf, and its text read back.

Layout is our own (A4, running title and page numbers outside the body), so that the text
extracted again reproduces the Markdown paragraphs: lines break only at spaces or next to
CJK characters, a paragraph is never split across pages when it fits on one, and headings
use a larger size. Latin text uses Helvetica; anything else (Chinese, symbols) uses
pymupdf's built-in CJK font (Droid Sans Fallback), embedded and subset, so no system
fonts are needed. ``pdf_paragraphs`` extracts the body text and regroups it into
paragraphs by line gaps and font size, for the coverage check.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from builder.documents.validators import strip_markdown

logger = logging.getLogger(__name__)

PAGE_W, PAGE_H = 595.0, 842.0
_FIXED_DATE = "D:20000101000000Z"
MARGIN_X, BODY_TOP, BODY_BOTTOM = 60.0, 64.0, 782.0
BODY_SIZE, BODY_LEAD, PARA_GAP = 10.5, 15.0, 7.0
H2_SIZE, H2_LEAD, H2_GAP = 13.0, 18.0, 12.0
TITLE_SIZE, TITLE_LEAD = 18.0, 24.0
_UNIT = re.compile(
    r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]|"
    r"[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]+\s*|\s+"
)


@lru_cache(maxsize=1)
def _fonts() -> dict[str, Any]:
    import pymupdf

    return {"helv": pymupdf.Font("helv"), "hebo": pymupdf.Font("hebo"), "cjk": pymupdf.Font("cjk")}


@dataclass(frozen=True, kw_only=True)
class _Para:
    kind: str  # title | h2 | body
    text: str


def _parse(markdown: str) -> list[_Para]:
    out = []
    for raw in re.split(r"\n\s*\n", markdown):
        if not raw.strip():
            continue
        first = raw.lstrip()
        kind = "title" if first.startswith("# ") else "h2" if first.startswith("#") else "body"
        text = " ".join(strip_markdown(raw).split())
        out.append(_Para(kind=kind, text=text))
    return out


@lru_cache(maxsize=65536)
def _has(font: str, ch: str) -> bool:
    return bool(_fonts()[font].has_glyph(ord(ch)))


@lru_cache(maxsize=65536)
def _advance(font: str, ch: str) -> float:
    return float(_fonts()[font].glyph_advance(ord(ch)))


@lru_cache(maxsize=65536)
def _advances(font: str, text: str) -> float:
    return sum(_advance(font, ch) for ch in text)


def _width(font: str, text: str, size: float) -> float:
    """Advance width of ``text`` (pymupdf's ``text_length`` without its per-call cost)."""
    return _advances(font, text) * size


def _font_for(unit: str, bold: bool) -> str:
    latin = "hebo" if bold else "helv"
    if all(_has(latin, ch) for ch in unit if not ch.isspace()):
        return latin
    return "cjk"


def _lines(text: str, size: float, width: float, bold: bool) -> list[list[tuple[str, str]]]:
    """Wrap text into lines of (font, text) runs.

    A paragraph with any character outside the Latin font is set entirely in the CJK font
    (which covers Latin too): one run per line keeps PDF writing fast.
    """
    lines: list[list[tuple[str, str]]] = [[]]
    x = 0.0
    font = _font_for(text, bold)
    for unit in _UNIT.findall(text):
        w = _width(font, unit, size)
        if x + _width(font, unit.rstrip(), size) > width and lines[-1]:
            if unit.isspace():
                continue
            lines.append([])
            x = 0.0
        if not lines[-1] and unit.isspace():
            continue
        line = lines[-1]
        if line and line[-1][0] == font:
            line[-1] = (font, line[-1][1] + unit)
        else:
            line.append((font, unit))
        x += w
    return [ln for ln in lines if ln]


def markdown_to_pdf(markdown: str, *, title: str, language: str = "en") -> bytes:
    """Lay a Markdown document (title, ``##`` headings, paragraphs) out as an A4 PDF."""
    import pymupdf

    fonts = _fonts()
    doc = pymupdf.open()
    # fixed dates and no fresh /ID: the same document gives the same bytes (reproducible builds)
    doc.set_metadata(
        {
            "title": title,
            "producer": "DataSpace-Builder",
            "creator": "DataSpace-Builder",
            "creationDate": _FIXED_DATE,
            "modDate": _FIXED_DATE,
        }
    )
    width = PAGE_W - 2 * MARGIN_X
    state: dict[str, Any] = {"page": None, "writers": {}}
    y = BODY_TOP

    def flush() -> None:
        page, writers = state["page"], state["writers"]
        if page is not None:
            writers["head"].write_text(page, color=(0.08, 0.18, 0.38))
            writers["body"].write_text(page, color=(0.1, 0.1, 0.12))

    def new_page() -> None:
        nonlocal y
        flush()
        page = doc.new_page(width=PAGE_W, height=PAGE_H)
        state["page"] = page
        state["writers"] = {k: pymupdf.TextWriter(page.rect) for k in ("body", "head")}
        y = BODY_TOP

    def put(line: list[tuple[str, str]], size: float, key: str, baseline: float) -> None:
        tw = state["writers"][key]
        x = MARGIN_X
        for font, text in line:
            tw.append((x, baseline), text, font=fonts[font], fontsize=size)
            x += _width(font, text, size)

    new_page()
    paras = _parse(markdown)
    for n, para in enumerate(paras):
        if para.kind == "title":
            size, lead, gap, key = TITLE_SIZE, TITLE_LEAD, 0.0, "head"
        elif para.kind == "h2":
            size, lead, gap, key = H2_SIZE, H2_LEAD, H2_GAP, "head"
        else:
            size, lead, gap, key = BODY_SIZE, BODY_LEAD, PARA_GAP, "body"
        lines = _lines(para.text, size, width, bold=para.kind != "body")
        need = len(lines) * lead
        if para.kind == "h2" and n + 1 < len(paras):
            need += 2 * BODY_LEAD + gap  # keep a heading with the start of its section
        if y > BODY_TOP and y + gap + need > BODY_BOTTOM:
            new_page()
        elif y > BODY_TOP:
            y += gap
        for line in lines:
            if y + lead > BODY_BOTTOM:
                new_page()
            y += lead
            put(line, size, key, y - lead * 0.25)
    flush()
    total = doc.page_count
    head = title if len(title) < 90 else title[:87] + "..."
    for i in range(total):
        page = doc[i]
        meta = pymupdf.TextWriter(page.rect)
        meta.append((MARGIN_X, 40), head, font=fonts[_font_for(head, False)], fontsize=8)
        foot = f"第 {i + 1} 页，共 {total} 页" if language == "zh" else f"Page {i + 1} of {total}"
        meta.append((MARGIN_X, PAGE_H - 30), foot, font=fonts[_font_for(foot, False)], fontsize=8)
        meta.write_text(page, color=(0.45, 0.45, 0.5))
    doc.subset_fonts()
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    doc.close()
    return bytes(data)


def pdf_page_count(data: bytes) -> int:
    """Pages of a PDF."""
    import pymupdf

    with pymupdf.open(stream=data, filetype="pdf") as doc:
        return int(doc.page_count)


def pdf_paragraphs(data: bytes) -> list[str]:
    """The body text of a PDF regrouped into paragraphs (line gaps, size changes, pages).

    Raises:
        ValueError: the bytes are not a readable PDF.
    """
    import pymupdf

    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # pymupdf raises its own error types
        raise ValueError(f"not a readable PDF: {exc}") from None
    paras: list[str] = []
    with doc:
        clip = pymupdf.Rect(0, BODY_TOP - 2, PAGE_W, BODY_BOTTOM + 4)
        for page in doc:  # type: ignore[attr-defined]  # pymupdf's Document is iterable; its annotations omit __iter__
            lines: dict[float, list[tuple[float, float, str]]] = {}
            for block in page.get_text("dict", clip=clip)["blocks"]:
                for line in block.get("lines", []):
                    for span in line["spans"]:
                        base = round(span["origin"][1], 1)
                        lines.setdefault(base, []).append(
                            (span["origin"][0], span["size"], span["text"])
                        )
            current: list[str] = []
            prev_base, prev_size = None, None
            for base in sorted(lines):
                spans = sorted(lines[base])
                size = round(max(s[1] for s in spans), 1)
                text = "".join(s[2] for s in spans)
                lead = (
                    BODY_LEAD
                    if size <= BODY_SIZE + 0.5
                    else (H2_LEAD if size <= H2_SIZE + 0.5 else TITLE_LEAD)
                )
                if prev_base is not None and (size != prev_size or base - prev_base > lead + 2.0):
                    paras.append(" ".join(current))
                    current = []
                current.append(text)
                prev_base, prev_size = base, size
            if current:
                paras.append(" ".join(current))
    return [p for p in paras if p.strip()]


__all__ = ["PAGE_H", "PAGE_W", "markdown_to_pdf", "pdf_page_count", "pdf_paragraphs"]
