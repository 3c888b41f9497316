"""Translate a whole database once per (database, target language, translator), cached.

Translation units → schema map and value map through the translator (validated replies,
bounded retries with the validator errors as feedback) → the map gate → the transactional
migration. Many questions share one database, so the translated database and its map are
content-addressed in a cache folder (source file hash, languages, translator settings,
unit options, code version) and reused; a file lock keeps two workers from translating the
same database at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import Rejected
from builder.transform.mapping import (
    ColumnMapping,
    ReplacementMap,
    TableMapping,
    ValueMapping,
    check_map,
)
from builder.transform.migrate import MigrationError, migrate
from builder.transform.schema import Schema, file_sha256, read_schema
from builder.transform.units import Units, extract_units, has_cjk
from builder.translate.base import (
    TranslationError,
    TranslationRequest,
    Translator,
    ask,
    items_validator,
    targets_by_id,
)

logger = logging.getLogger(__name__)

CODE_VERSION = "clt-1"


class DatabaseTranslationError(Rejected):
    """The database could not be translated (map gate, translator or migration)."""

    stage_name = "transform"


@dataclass(frozen=True, kw_only=True)
class UnitOptions:
    """Options of translation-unit extraction and map generation.

    Attributes:
        theta: overlap coefficient a cluster merge must exceed.
        k_min: distinct values two clusters must share to merge.
        protected: names and values that must stay unchanged.
        chunk_chars: most characters of values per request.
        chunk_items: most values per request.
        schema_chunk: most schema items per request.
        max_attempts: replies per request before giving up.
        domain: a domain hint for the translator (``finance``, ``healthcare`` ...).
    """

    theta: float = 0.5
    k_min: int = 3
    protected: tuple[str, ...] = ()
    chunk_chars: int = 3000
    chunk_items: int = 200
    schema_chunk: int = 150
    max_attempts: int = 3
    domain: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "theta": self.theta,
            "k_min": self.k_min,
            "protected": list(self.protected),
            "chunk_chars": self.chunk_chars,
            "chunk_items": self.chunk_items,
            "schema_chunk": self.schema_chunk,
            "max_attempts": self.max_attempts,
            "domain": self.domain,
        }


@dataclass(frozen=True, kw_only=True)
class TranslatedDatabase:
    """A database in the target language and the map that produced it.

    Attributes:
        path: the translated database (the source itself when nothing had to change).
        mapping: the replacement map.
        unknown: terms the translator left unchanged.
        ledger: provenance of the database translation.
    """

    path: Path
    mapping: ReplacementMap
    unknown: tuple[str, ...] = ()
    ledger: dict[str, Any] = field(default_factory=dict)


_MEMO: dict[str, TranslatedDatabase] = {}
_SHAS: dict[tuple[str, int, int], str] = {}


def _sha(path: Path) -> str:
    """File hash, remembered per (path, size, mtime) so many items share one read."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHAS:
        _SHAS[key] = file_sha256(path)
    return _SHAS[key]


def cache_key(
    db_sha256: str,
    source_language: str,
    target_language: str,
    translator: Translator,
    options: UnitOptions,
) -> str:
    """The content address of one database translation."""
    body = json.dumps(
        {
            "db": db_sha256,
            "source": source_language,
            "target": target_language,
            "translator": translator.describe(),
            "options": options.to_json(),
            "version": CODE_VERSION,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def translate_database(
    db_path: Path | str,
    *,
    source_language: str,
    target_language: str,
    translator: Translator,
    options: UnitOptions | None = None,
    cache_dir: Path | str | None = None,
) -> TranslatedDatabase:
    """Translate the names and text values of a database into ``target_language``.

    Args:
        db_path: the source database (only read).
        source_language: language of the source database's values.
        target_language: ``zh`` or ``en``.
        translator: the provider.
        options: unit and request options.
        cache_dir: where translated databases are kept and reused (a temporary folder
            per process when None).

    Raises:
        DatabaseTranslationError: one line, naming the failing gate.
    """
    options = options or UnitOptions()
    src = Path(db_path)
    sha = _sha(src)
    key = cache_key(sha, source_language, target_language, translator, options)
    if key in _MEMO and _MEMO[key].path.exists():
        return _MEMO[key]
    base = (
        Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "dataspace-clt"
    )
    folder = base / "databases" / key[:32]
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / ".lock"):
        done = folder / "done.json"
        if done.is_file():
            result = _load(folder, src)
        else:
            result = _translate(
                src, sha, key, source_language, target_language, translator, options, folder
            )
            done.write_text(json.dumps({"key": key}), encoding="utf-8")
    _MEMO[key] = result
    return result


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load(folder: Path, src: Path) -> TranslatedDatabase:
    ledger = json.loads((folder / "ledger.json").read_text(encoding="utf-8"))
    mapping = ReplacementMap.from_json(json.loads((folder / "map.json").read_text("utf-8")))
    path = folder / "db.sqlite" if (folder / "db.sqlite").is_file() else src
    return TranslatedDatabase(
        path=path,
        mapping=mapping,
        unknown=tuple(ledger.get("unknown", {}).get("terms", [])),
        ledger=ledger,
    )


def _translate(
    src: Path,
    sha: str,
    key: str,
    source_language: str,
    target_language: str,
    translator: Translator,
    options: UnitOptions,
    folder: Path,
) -> TranslatedDatabase:
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{src.resolve()}?mode=ro", uri=True)
    try:
        schema = read_schema(conn)
        units = extract_units(
            conn,
            schema,
            target_language=target_language,
            theta=options.theta,
            k_min=options.k_min,
            protected=options.protected,
            chunk_chars=options.chunk_chars,
            chunk_items=options.chunk_items,
        )
    finally:
        conn.close()
    t_units = time.perf_counter() - t0
    unknown: list[str] = []
    requests = {"schema": 0, "values": 0, "replies": 0}
    # What still needs translating is, by the unit filters, in the other language, whatever
    # the database's main language (English schema names over Chinese values, say).
    other = "en" if target_language == "zh" else "zh"
    try:
        tables, columns = _schema_map(
            schema, other, target_language, translator, options, unknown, requests
        )
        values = _value_map(
            units,
            schema,
            tables,
            columns,
            other,
            target_language,
            translator,
            options,
            unknown,
            requests,
        )
    except TranslationError as exc:
        raise DatabaseTranslationError(f"translator gave no valid map: {exc}") from None
    mapping = ReplacementMap(
        source_language=source_language,
        target_language=target_language,
        tables=tables,
        columns=columns,
        values=values,
        protected=options.protected,
    )
    existing = {k: v for k, v in units.column_values.items() if mapping.changed_values(*k)}
    errors = check_map(
        mapping,
        tables=schema.columns_by_table(),
        existing_values=existing,
        protected=options.protected,
    )
    if errors:
        raise DatabaseTranslationError(
            f"replacement map rejected: {errors[0]}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")
        )
    t_map = time.perf_counter() - t0 - t_units
    migration: dict[str, Any] = {"skipped": "the map changes nothing"}
    path = src
    if not mapping.is_identity:
        try:
            report = migrate(src, folder / "db.sqlite", mapping, schema=schema)
        except MigrationError as exc:
            raise DatabaseTranslationError(f"migration rolled back: {exc}") from None
        migration = report.to_json()
        path = folder / "db.sqlite"
    map_json = mapping.to_json()
    (folder / "map.json").write_text(
        json.dumps(map_json, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    ledger: dict[str, Any] = {
        "cache_key": key,
        "source_db": src.name,
        "source_db_sha256": sha,
        "languages": {"source": source_language, "target": target_language},
        "translator": translator.describe(),
        "options": options.to_json(),
        "units": units.stats(),
        "requests": requests,
        "map": {
            "tables": sum(1 for m in tables if m.source != m.target),
            "columns": sum(1 for m in columns if m.source != m.target),
            "values": len(values),
            "sha256": hashlib.sha256(
                json.dumps(map_json, sort_keys=True, ensure_ascii=False).encode()
            ).hexdigest(),
        },
        "unknown": {"count": len(unknown), "terms": unknown[:200]},
        "migration": migration,
        "db_sha256": file_sha256(path),
        "timings": {
            "units_s": round(t_units, 3),
            "map_s": round(t_map, 3),
            "total_s": round(time.perf_counter() - t0, 3),
        },
    }
    (folder / "ledger.json").write_text(
        json.dumps(ledger, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    logger.info(
        "translated %s to %s: %d tables, %d columns, %d values renamed (%d unknown)",
        src.name,
        target_language,
        ledger["map"]["tables"],
        ledger["map"]["columns"],
        len(values),
        len(unknown),
    )
    return TranslatedDatabase(
        path=path, mapping=mapping, unknown=tuple(unknown[:200]), ledger=ledger
    )


def _needs(name: str, target_language: str) -> bool:
    return has_cjk(name) != (target_language == "zh")


def _schema_map(
    schema: Schema,
    src: str,
    tgt: str,
    translator: Translator,
    options: UnitOptions,
    unknown: list[str],
    requests: dict[str, int],
) -> tuple[tuple[TableMapping, ...], tuple[ColumnMapping, ...]]:
    prot = set(options.protected)
    items: list[dict[str, Any]] = []
    for ti, t in enumerate(schema.tables):
        if _needs(t.name, tgt) and t.name not in prot:
            items.append({"id": f"t{ti}", "kind": "table", "name": t.name})
        for ci, c in enumerate(t.columns):
            if _needs(c.name, tgt) and c.name not in prot:
                items.append(
                    {"id": f"t{ti}c{ci}", "kind": "column", "name": c.name, "table": t.name}
                )
    if not items:
        return (), ()
    sent = {(it.get("table") or "", it["name"]) for it in items}
    existing = {
        "tables": [t.name for t in schema.tables if ("", t.name) not in sent],
        "columns": {
            t.name: [c.name for c in t.columns if (t.name, c.name) not in sent]
            for t in schema.tables
        },
    }
    answers: dict[str, str] = {}
    for start in range(0, len(items), options.schema_chunk):
        # A table and its columns travel together so uniqueness can be checked per reply.
        chunk = items[start : start + options.schema_chunk]
        req = TranslationRequest(
            kind="schema",
            source_language=src,
            target_language=tgt,
            payload={
                "domain": options.domain,
                "protected_glossary": sorted(prot),
                "schema_items": chunk,
                "existing": existing,
            },
        )
        validate = items_validator(
            [it["id"] for it in chunk], extra=_schema_unique(chunk, existing)
        )
        ans = ask(translator, req, validate, max_attempts=options.max_attempts)
        requests["schema"] += 1
        requests["replies"] += ans.attempts
        unknown.extend(ans.unknown)
        answers.update(targets_by_id(ans.reply))
    tables, columns = [], []
    for it in items:
        target = answers[it["id"]]
        if it["kind"] == "table":
            tables.append(TableMapping(source=it["name"], target=target))
        else:
            columns.append(
                ColumnMapping(table_source=it["table"], source=it["name"], target=target)
            )
    return tuple(tables), tuple(columns)


def _schema_unique(chunk: list[dict[str, Any]], existing: dict[str, Any]) -> Any:
    def check(reply: dict[str, Any]) -> list[str]:
        got = targets_by_id(reply)
        errors: list[str] = []
        seen: dict[str, str] = {t.lower(): t for t in existing["tables"]}
        for it in chunk:
            if it["kind"] != "table":
                continue
            tgt = got[it["id"]].lower()
            if tgt in seen:
                errors.append(f"table target {got[it['id']]!r} of {it['id']} is not unique")
            seen[tgt] = it["id"]
        per: dict[str, dict[str, str]] = {}
        for it in chunk:
            if it["kind"] != "column":
                continue
            cols = per.setdefault(
                it["table"], {c.lower(): c for c in existing["columns"].get(it["table"], [])}
            )
            tgt = got[it["id"]].lower()
            if tgt in cols:
                errors.append(
                    f"column target {got[it['id']]!r} of {it['id']} is not unique "
                    f"in table {it['table']}"
                )
            cols[tgt] = it["id"]
        return errors

    return check


def _value_map(
    units: Units,
    schema: Schema,
    tables: tuple[TableMapping, ...],
    columns: tuple[ColumnMapping, ...],
    src: str,
    tgt: str,
    translator: Translator,
    options: UnitOptions,
    unknown: list[str],
    requests: dict[str, int],
) -> tuple[ValueMapping, ...]:
    glossary: dict[str, str] = {m.source: m.target for m in tables}
    glossary.update({m.source: m.target for m in columns})
    by_cluster = {c.id: c for c in units.clusters}
    out: list[ValueMapping] = []
    for chunk in units.chunks:
        cluster = by_cluster[chunk.cluster_id]
        ids = [f"v{i}" for i in range(len(chunk.values))]
        req = TranslationRequest(
            kind="values",
            source_language=src,
            target_language=tgt,
            payload={
                "domain": options.domain,
                "cluster_id": cluster.id,
                "columns": [f"{t}.{c}" for t, c in cluster.columns],
                "schema_glossary": {
                    k: v
                    for k, v in glossary.items()
                    if any(k in (t, c) for t, c in cluster.columns)
                },
                "values": [{"id": i, "value": v} for i, v in zip(ids, chunk.values, strict=True)],
            },
        )
        validate = items_validator(ids, extra=_values_unique(ids, chunk.values))
        ans = ask(translator, req, validate, max_attempts=options.max_attempts)
        requests["values"] += 1
        requests["replies"] += ans.attempts
        unknown.extend(ans.unknown)
        got = targets_by_id(ans.reply)
        for i, v in zip(ids, chunk.values, strict=True):
            if got[i] != v:
                out.append(
                    ValueMapping(
                        cluster_id=cluster.id, source=v, target=got[i], occurrences=cluster.columns
                    )
                )
    return tuple(out)


def _values_unique(ids: list[str], values: tuple[str, ...]) -> Any:
    def check(reply: dict[str, Any]) -> list[str]:
        got = targets_by_id(reply)
        seen: dict[str, str] = {}
        errors = []
        for i, v in zip(ids, values, strict=True):
            tgt = got[i]
            if tgt in seen and seen[tgt] != v:
                errors.append(
                    f"{i} ({v!r}) and another value both map to {tgt!r}; "
                    "each value needs its own target"
                )
            seen[tgt] = v
        return errors

    return check


__all__ = [
    "CODE_VERSION",
    "DatabaseTranslationError",
    "TranslatedDatabase",
    "UnitOptions",
    "cache_key",
    "translate_database",
]
