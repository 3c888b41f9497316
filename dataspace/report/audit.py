"""The audit's place in the run report: Figure 7's stage × symptom matrix and Table 13.

Only human-confirmed causes are counted (as in the paper); proposals still awaiting a
decision are reported as a number.
"""

from __future__ import annotations

import html
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.failure_taxonomy import STAGES, SUBTYPE_BY_CODE, SUBTYPES, SYMPTOMS

logger = logging.getLogger(__name__)


def audit_tables(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Counts of confirmed causes: by stage × symptom, and by subtype with shares."""
    confirmed = [i for i in doc.get("items", []) if i.get("confirmed")]
    matrix: dict[str, Counter[str]] = {s: Counter() for s in STAGES}
    subtypes: Counter[str] = Counter()
    for item in confirmed:
        code = item["confirmed"]["subtype"]
        matrix[code[0]][str(item.get("symptom"))] += 1
        subtypes[code] += 1
    total = len(confirmed)
    return {
        "agent": doc.get("agent"),
        "confirmed": total,
        "pending": len(doc.get("items", [])) - total,
        "revised": sum(1 for i in confirmed if i["confirmed"].get("revised")),
        "matrix": {s: dict(c) for s, c in matrix.items()},
        "subtypes": [
            {
                "stage": code[0],
                "subtype": code,
                "definition": SUBTYPE_BY_CODE[code].definition,
                "tasks": n,
                "share": n / total,
            }
            for code, n in sorted(
                subtypes.items(), key=lambda kv: [s.code for s in SUBTYPES].index(kv[0])
            )
        ],
    }


def audit_section_html(docs: Sequence[Mapping[str, Any]]) -> str:
    """The report section for every audited agent (empty when there is no audit)."""
    if not docs:
        return ""
    parts = ['<h2 id="audit">Failure audit (human-confirmed root causes)</h2>']
    for doc in docs:
        t = audit_tables(doc)
        agent = html.escape(str(t["agent"]))
        parts.append(
            f'<h3>{agent}</h3><p class="muted">{t["confirmed"]} confirmed causes '
            f"({t['revised']} revised from the proposal), {t['pending']} awaiting a decision.</p>"
        )
        symptoms = [s for s in SYMPTOMS if any(s in row for row in t["matrix"].values())] or list(
            SYMPTOMS[:1]
        )
        head = "".join(f"<th>{html.escape(s)}</th>" for s in symptoms)
        rows = []
        for stage, name in STAGES.items():
            row = t["matrix"][stage]
            cells = "".join(f"<td>{row.get(s, 0)}</td>" for s in symptoms)
            rows.append(
                f"<tr><th>{stage} {html.escape(name)}</th>{cells}<td>{sum(row.values())}</td></tr>"
            )
        parts.append(
            f'<table class="audit-matrix" id="audit-matrix-{agent}"><thead><tr><th>stage</th>{head}'
            f"<th>total</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        sub_rows = "".join(
            f"<tr><td>{s['stage']}</td><td>{s['subtype']}</td><td>{html.escape(s['definition'])}</td>"
            f"<td>{s['tasks']}</td><td>{100 * s['share']:.1f}%</td></tr>"
            for s in t["subtypes"]
        )
        parts.append(
            f'<table class="audit-subtypes" id="audit-subtypes-{agent}"><thead><tr><th>stage</th>'
            "<th>subtype</th><th>operational definition</th><th>tasks</th><th>share</th></tr>"
            f"</thead><tbody>{sub_rows}<tr><td></td><td>Total</td><td></td><td>{t['confirmed']}"
            "</td><td>100.0%</td></tr></tbody></table>"
        )
    return "".join(parts)


def read_audits(source: Any) -> list[dict[str, Any]]:
    """Every ``audit/<agent>/audit.json`` of a run (a ``RunSource``)."""
    prefix = source.prefix.strip("/")
    base = f"{prefix}/audit/" if prefix else "audit/"
    out = []
    try:
        keys = [k for k in source.store.list(base) if k.endswith("/audit.json")]
    except Exception:  # no audit folder: nothing to add
        return []
    for key in sorted(keys):
        try:
            out.append(json.loads(source.store.get_bytes(key)))
        except (ValueError, OSError) as exc:
            logger.warning("%s: unreadable audit (%s); left out of the report", key, exc)
    return out


__all__ = ["audit_section_html", "audit_tables", "read_audits"]
