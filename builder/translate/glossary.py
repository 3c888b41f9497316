"""The ``glossary`` translator: offline, deterministic, from bilingual term lists.

It answers every request kind except ``judge`` (``supports_judge`` is False, so the
question–SQL judge is skipped with a recorded reason). Terms it does not know are left
unchanged and listed under ``unknown`` in the reply, which the builder copies to the ledger.

The shipped glossary (``data/glossary.json``) covers the table names, column names and text
values of the bundled corpora and the common question words; more files can be layered on
top. Its shape::

    {"schema_version": "1.0",
     "tables":  [{"en": "PATIENTS", "zh": "患者"}, ...],
     "columns": [{"table": "lc_stockarchives", "en": "ChiName", "zh": "中文名称"}, ...],
     "values":  [{"en": "Hangzhou", "zh": "杭州市"}, ...],
     "phrases": [{"en": "how many", "zh": "多少"}, {"en": "the", "zh": "", "only": "en>zh"}]}

Question translation is phrase based: quoted literals, numbers, dates and thresholds are
kept as they are; the request's focused glossary goes first, then values and phrases,
longest match first (whole words for English). A Chinese question is built only through a
whole-sentence template (the glossary's ``templates``), which gives it Chinese word order;
a question no template covers is refused (``ReplyError``), so the item is rejected rather
than given English syntax in Chinese words. English targets may fall back to phrases.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from builder.translate.base import ReplyError, TranslationRequest, register_translator
from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_GLOSSARY = Path(__file__).with_name("data") / "glossary.json"
_SECTIONS = ("tables", "columns", "values", "phrases")
_SLOT = re.compile(r"\{(\w+)\}")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ZH_DATE = re.compile(r"(\d{4})年(?:(\d{1,2})月(?:(\d{1,2})[日号])?)?")
_MARK = re.compile(r"\x00(\d+)\x00")
_PROTECT = re.compile(
    r"\x00\d+\x00"  # focused-glossary entities already translated
    r"|'[^']*'|\"[^\"]*\"|“[^”]*”|‘[^’]*’"  # quoted literals
    r"|\d{4}年(?:\d{1,2}月(?:\d{1,2}[日号])?)?"  # Chinese dates
    r"|\d{4}-\d{1,2}(?:-\d{1,2})?(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?"  # dates and times
    r"|(?<![A-Za-z0-9.])[+-]?\d+(?:[.,:/]\d+)*%?(?![A-Za-z0-9])"
)  # numbers and thresholds
_ZH_PUNCT = {"?": "？", ",": "，", ";": "；", ":": "：", "!": "！", "(": "（", ")": "）", ".": "。"}
_EN_PUNCT = {v: k for k, v in _ZH_PUNCT.items()} | {"。": ".", "、": ",", "“": '"', "”": '"'}


def norm(text: str, language: str) -> str:
    """Lookup key of a term: case- and space-insensitive for English, trimmed for Chinese.

    >>> norm("  Emergency   Room ", "en"), norm(" 杭州市 ", "zh")
    ('emergency room', '杭州市')
    """
    if language == "en":
        return " ".join(text.casefold().split())
    return "".join(text.split())


class Glossary:
    """Bilingual term lists, looked up in either direction.

    Args:
        documents: parsed glossary files, later ones overriding earlier ones.
    """

    def __init__(self, documents: Sequence[Mapping[str, Any]]) -> None:
        self.documents = list(documents)
        self._maps: dict[tuple[str, str, str], dict[Any, str]] = {}
        for doc in self.documents:
            for section in _SECTIONS:
                for entry in doc.get(section, []):
                    self._add(section, entry)

    def _add(self, section: str, entry: Mapping[str, Any]) -> None:
        en, zh = entry.get("en"), entry.get("zh")
        if not isinstance(en, str) or not isinstance(zh, str):
            raise ConfigError(f"glossary {section} entry needs 'en' and 'zh' strings: {entry}")
        only = entry.get("only")
        table = entry.get("table")
        for src, tgt, s_text, t_text in (("en", "zh", en, zh), ("zh", "en", zh, en)):
            if only and only != f"{src}>{tgt}":
                continue
            if not s_text.strip():
                continue
            key: Any = norm(s_text, src)
            if section == "columns":
                key = (table.lower() if isinstance(table, str) else "", key)
            self._maps.setdefault((section, src, tgt), {})[key] = t_text

    @classmethod
    def load(cls, paths: Iterable[Path | str]) -> Glossary:
        """Read glossary files (raises ``ConfigError`` naming a bad file)."""
        docs = []
        for p in paths:
            path = Path(p)
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ConfigError(f"{path}: cannot read glossary ({exc})") from None
            if not isinstance(doc, dict):
                raise ConfigError(f"{path}: a glossary must be a JSON object")
            docs.append(doc)
        return cls(docs)

    def fingerprint(self) -> str:
        """SHA-256 of the glossary content (part of build cache keys)."""
        body = json.dumps(self.documents, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()

    def table(self, name: str, src: str, tgt: str) -> str | None:
        """Translation of a table name."""
        return self._maps.get(("tables", src, tgt), {}).get(norm(name, src))

    def column(self, table: str | None, name: str, src: str, tgt: str) -> str | None:
        """Translation of a column name (table-scoped entries first)."""
        m = self._maps.get(("columns", src, tgt), {})
        key = norm(name, src)
        if table:
            hit = m.get((table.lower(), key))
            if hit is not None:
                return hit
            # A scoped entry may name the table in the other language.
            for (t, k), v in m.items():
                if k == key and t and t == norm(table, src):
                    return v
        return m.get(("", key))

    def value(self, text: str, src: str, tgt: str) -> str | None:
        """Translation of a database value (values first, then whole phrases)."""
        key = norm(text, src)
        hit = self._maps.get(("values", src, tgt), {}).get(key)
        if hit is None:
            hit = self._maps.get(("phrases", src, tgt), {}).get(key)
        return hit if hit else None

    def templates(self, src: str, tgt: str) -> list[tuple[re.Pattern[str], str]]:
        """Whole-question templates ``(pattern, target with {slots})`` for a direction."""
        out = []
        for doc in self.documents:
            for entry in doc.get("templates", []):
                only = entry.get("only")
                if (only and only != f"{src}>{tgt}") or src not in entry or tgt not in entry:
                    continue
                parts = _SLOT.split(entry[src].strip())
                rx = "".join(
                    re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)
                )
                rx = re.sub(r"(\\ )+", r"\\s+", rx)
                out.append((re.compile(rf"^\s*{rx}\s*$", re.I | re.S), entry[tgt]))
        return out

    def phrase_pairs(self, src: str, tgt: str) -> dict[str, str]:
        """``{source key: target}`` over values and phrases, for running text."""
        out = dict(self._maps.get(("values", src, tgt), {}))
        out.update(self._maps.get(("phrases", src, tgt), {}))
        return out


def _distinct(
    targets: dict[str, str], sources: Mapping[str, str], taken: Iterable[str], language: str
) -> dict[str, str]:
    """Make targets unique (case-insensitive) by suffixing the source of later duplicates."""
    used = {t.lower() for t in taken}
    out: dict[str, str] = {}
    for i, tgt in targets.items():
        cand = tgt
        if cand.lower() in used:
            cand = f"{tgt}（{sources[i]}）" if language == "zh" else f"{tgt} ({sources[i]})"
        n = 2
        while cand.lower() in used:
            cand = f"{tgt}_{n}"
            n += 1
        used.add(cand.lower())
        out[i] = cand
    return out


def translate_text(
    text: str,
    src: str,
    tgt: str,
    pairs: Mapping[str, str],
    priority: Mapping[str, str] | None = None,
    templates: Sequence[tuple[re.Pattern[str], str]] = (),
    *,
    template_required: bool = False,
) -> tuple[str, list[str], list[str]]:
    """Phrase-based translation of running text, optionally through a sentence template.

    A template whose pattern matches the whole text reorders it (``what is the {a} of
    {b}?`` becomes ``{b}的{a}是什么？``); each slot is translated phrase by phrase.

    Returns:
        The translation, the priority keys used, and the words left untranslated.

    Raises:
        ReplyError: ``template_required`` and no template matches the whole text.

    >>> out, used, unknown = translate_text("How many funds cost over 2.5?", "en", "zh",
    ...     {"how many": "多少", "funds": "基金", "cost over": "费用超过"})
    >>> out, unknown
    ('多少基金费用超过2.5？', [])
    """
    # Entities of the focused glossary are protected first, over the whole text, so that
    # neither a sentence template nor a number or phrase rule can split one ("calculated
    # total CO2", "tincture of opium").
    marks: list[str] = []
    used: list[str] = []
    prio = {norm(k, src): v for k, v in (priority or {}).items() if norm(k, src)}
    if prio:
        text = _compile(prio, src).sub(lambda m: _mark(m, prio, src, marks, used), text)
    for pattern_, target in templates:
        m = pattern_.match(text)
        if m is not None:
            filled: dict[str, str] = {}
            unknown: list[str] = []
            for slot, value in m.groupdict().items():
                out, slot_unknown = _translate_marked(value, src, tgt, pairs, marks, used)
                filled[slot] = out
                unknown += slot_unknown
            out = _SLOT.sub(lambda s, f=filled: f.get(s.group(1), ""), target)  # type: ignore[misc]
            return out, used, unknown
    if template_required:
        raise ReplyError(
            "no sentence template covers this question (the glossary translator writes "
            f"{tgt} questions from templates only: add one to the glossary, or use the llm "
            "translator)"
        )
    out, unknown = _translate_marked(text, src, tgt, pairs, marks, used)
    return out, used, unknown


def _restore(text: str, marks: Sequence[str]) -> str:
    """Put the protected entities back into a piece of text."""
    return _MARK.sub(lambda m: marks[int(m.group(1))], text)


def _translate_marked(
    text: str,
    src: str,
    tgt: str,
    pairs: Mapping[str, str],
    marks: Sequence[str],
    used: list[str],
) -> tuple[str, list[str]]:
    pattern = _compile(pairs, src) if pairs else None
    table = {k: (v, False) for k, v in pairs.items()}
    pieces: list[tuple[str, bool]] = []  # (text, is_target_language)
    unknown: list[str] = []
    pos = 0
    for m in _PROTECT.finditer(text):
        _scan(text[pos : m.start()], src, tgt, pattern, table, pieces, used, unknown)
        kept = m.group()
        if tgt == "en" and (date := _ZH_DATE.fullmatch(kept)) is not None:
            kept = "-".join(f"{int(g):02d}" if i else g for i, g in enumerate(date.groups()) if g)
        # A quoted literal may hold a protected entity: restore it inside the quotes too.
        pieces.append((_restore(kept, marks), True))
        pos = m.end()
    _scan(text[pos:], src, tgt, pattern, table, pieces, used, unknown)
    return _assemble(pieces, tgt), unknown


def _compile(keys: Mapping[str, Any], src: str) -> re.Pattern[str]:
    ordered = sorted((k for k in keys if k), key=len, reverse=True)
    if src == "en":
        return re.compile(
            "|".join(rf"(?<![A-Za-z0-9]){re.escape(k)}(?![A-Za-z0-9])" for k in ordered), re.I
        )
    return re.compile("|".join(re.escape(k) for k in ordered))


def _mark(
    m: re.Match[str], prio: Mapping[str, str], src: str, marks: list[str], used: list[str]
) -> str:
    key = norm(m.group(), src)
    used.append(key)
    marks.append(prio.get(key, m.group()))
    return f"\x00{len(marks) - 1}\x00"


def _scan(
    seg: str,
    src: str,
    tgt: str,
    pattern: re.Pattern[str] | None,
    table: Mapping[str, tuple[str, bool]],
    pieces: list[tuple[str, bool]],
    used: list[str],
    unknown: list[str],
) -> None:
    pos = 0
    if pattern is not None:
        for m in pattern.finditer(seg):
            _leftover(seg[pos : m.start()], src, tgt, pieces, unknown)
            key = norm(m.group(), src)
            target, prio = table.get(key, (m.group(), False))
            if prio:
                used.append(key)
            if target:
                pieces.append((target, True))
            pos = m.end()
    _leftover(seg[pos:], src, tgt, pieces, unknown)


def _leftover(
    seg: str, src: str, tgt: str, pieces: list[tuple[str, bool]], unknown: list[str]
) -> None:
    if not seg.strip():
        if seg:
            pieces.append((" ", False))
        return
    for tok in re.findall(r"[A-Za-z0-9][A-Za-z0-9'\-]*|[\u3400-\u9fff\uf900-\ufaff]+|\S", seg):
        if tgt == "zh" and tok in _ZH_PUNCT:
            pieces.append((_ZH_PUNCT[tok], True))
        elif tgt == "en" and tok in _EN_PUNCT:
            pieces.append((_EN_PUNCT[tok], True))
        elif (src == "en" and re.search(r"[A-Za-z]", tok)) or (src == "zh" and _CJK.match(tok)):
            unknown.append(tok)
            pieces.append((tok, False))
        else:
            pieces.append((tok, True))


def _assemble(pieces: list[tuple[str, bool]], tgt: str) -> str:
    out = ""
    for text, _ok in pieces:
        if text == " ":
            continue
        if not out:
            out = text
            continue
        a, b = out[-1], text[0]
        if tgt == "zh":
            space = a.isascii() and a.isalnum() and b.isascii() and b.isalnum()
            out += (" " if space else "") + text
        else:
            space = not (b in ",.?!;:)%" or a in "(")
            out += (" " if space else "") + text
    out = re.sub(r"\s+", " ", out).strip()
    if tgt == "en" and out:
        out = out[0].upper() + out[1:]
    return out


@register_translator("glossary")
class GlossaryTranslator:
    """Deterministic translator over bilingual glossaries.

    Args:
        glossary: extra glossary files layered over the shipped one.
        include_default: also load the shipped glossary.
    """

    name = "glossary"
    supports_judge = False

    def __init__(
        self,
        glossary: Sequence[Path | str] | Path | str | None = None,
        *,
        include_default: bool = True,
    ) -> None:
        extra = [glossary] if isinstance(glossary, str | Path) else list(glossary or [])
        paths = ([DEFAULT_GLOSSARY] if include_default else []) + [Path(p) for p in extra]
        self.paths = paths
        self.glossary = Glossary.load(paths)

    def describe(self) -> dict[str, Any]:
        """Provider settings for ledgers and cache keys."""
        return {
            "name": self.name,
            "glossary_sha256": self.glossary.fingerprint(),
            "files": [p.name for p in self.paths],
        }

    def complete(self, request: TranslationRequest) -> dict[str, Any]:
        """Answer a request from the glossary (``judge`` is not supported)."""
        handler = {"schema": self._schema, "values": self._values, "question": self._question}.get(
            request.kind
        )
        if handler is None:
            raise ReplyError(f"the glossary translator cannot answer {request.kind!r} requests")
        return handler(request)

    def _schema(self, req: TranslationRequest) -> dict[str, Any]:
        src, tgt = req.source_language, req.target_language
        items = req.payload.get("schema_items", [])
        protected = set(req.payload.get("protected_glossary", []))
        existing = req.payload.get("existing", {}) or {}
        unknown: list[str] = []
        tables: dict[str, str] = {}
        table_src: dict[str, str] = {}
        columns: dict[str, dict[str, str]] = {}
        column_src: dict[str, str] = {}
        for it in items:
            name = str(it.get("name", ""))
            if it.get("kind") == "table":
                hit = None if name in protected else self.glossary.table(name, src, tgt)
                tables[it["id"]] = hit or name
                table_src[it["id"]] = name
            else:
                table = str(it.get("table", ""))
                hit = None if name in protected else self.glossary.column(table, name, src, tgt)
                columns.setdefault(table.lower(), {})[it["id"]] = hit or name
                column_src[it["id"]] = name
            if hit is None and name not in protected:
                unknown.append(name if it.get("kind") == "table" else f"{it.get('table')}.{name}")
        out = _distinct(tables, table_src, existing.get("tables", []), tgt)
        kept_cols = {str(k).lower(): v for k, v in (existing.get("columns", {}) or {}).items()}
        for table, cols in columns.items():
            out.update(_distinct(cols, column_src, kept_cols.get(table, []), tgt))
        return {
            "items": [{"id": it["id"], "target": out[it["id"]]} for it in items],
            "unknown": unknown,
        }

    def _values(self, req: TranslationRequest) -> dict[str, Any]:
        src, tgt = req.source_language, req.target_language
        items = req.payload.get("values", [])
        found: dict[str, str] = {}
        sources: dict[str, str] = {}
        unknown: list[str] = []
        for it in items:
            value = str(it.get("value", ""))
            hit = self.glossary.value(value, src, tgt)
            if hit is None:
                unknown.append(value)
            found[it["id"]] = hit if hit is not None else value
            sources[it["id"]] = value
        distinct = _distinct(found, sources, [], tgt)
        return {
            "cluster_id": req.payload.get("cluster_id", ""),
            "items": [{"id": it["id"], "target": distinct[it["id"]]} for it in items],
            "unknown": unknown,
        }

    def _question(self, req: TranslationRequest) -> dict[str, Any]:
        src, tgt = req.source_language, req.target_language
        question = str(req.payload.get("source_question", ""))
        focused = req.payload.get("focused_glossary", []) or []
        priority: dict[str, str] = {}
        ids: dict[str, str] = {}
        for entry in focused:
            s, t = str(entry.get("source", "")), str(entry.get("target", ""))
            if s and t:
                priority[s] = t
                ids[norm(s, src)] = str(entry.get("id", ""))
        text, used, unknown = translate_text(
            question,
            src,
            tgt,
            self.glossary.phrase_pairs(src, tgt),
            priority,
            self.glossary.templates(src, tgt),
            template_required=tgt == "zh",
        )
        return {
            "question": text,
            "used_mapping_ids": sorted({ids[u] for u in used if u in ids}),
            "unknown": unknown,
        }


__all__ = ["DEFAULT_GLOSSARY", "Glossary", "GlossaryTranslator", "norm", "translate_text"]
