"""What an adjudicator needs to decide: why the task is there, what differs, what contradicts.

Pure functions over a folded task and its gold, used by the service for the adjudication
view, the phase-2 warnings and the version diff:

* :func:`config_fields` flattens a config to ``population.comparison.digits``-style keys, so
  two configs differ *at* named keys rather than as two JSON blobs;
* :func:`differences` lists, for one version, the verdicts, dispositions and config keys on
  which the reviewers part, and which cells of each blind answer are not in the gold;
* :func:`contradiction` is the evaluator's verdict on a blind answer against the gold under
  the reviewer's own config, when the reviewer still chose Match: their own record
  contradicts itself;
* :func:`version_diff` is the change from one version to the next (question, gold rows,
  config keys, files).
"""

from __future__ import annotations

import difflib
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from builder.review.protocol import TaskFold
from builder.review.taxonomy import Disposition, Verdict

logger = logging.getLogger(__name__)


def config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config as flat ``key -> value`` pairs named by gold column.

    >>> config_fields({"order_sensitive": False, "columns": [{"gold_name": "n",
    ...     "type": "number", "comparison": {"mode": "decimal_places", "digits": 1}}]})
    {'order_sensitive': False, 'n.type': 'number', 'n.comparison.mode': 'decimal_places', \
'n.comparison.digits': 1}
    """
    out: dict[str, Any] = {"order_sensitive": bool(config.get("order_sensitive"))}
    for j, col in enumerate(config.get("columns") or []):
        name = str(col.get("gold_name") or f"column {j + 1}")
        for key, value in col.items():
            if key in ("gold_index", "gold_name"):
                continue
            if isinstance(value, Mapping):
                for k2, v2 in value.items():
                    out[f"{name}.{key}.{k2}"] = v2
            else:
                out[f"{name}.{key}"] = value
    return out


def differing_keys(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The config keys on which a set of configs do not all agree."""
    flat = [config_fields(c) for c in configs]
    keys = sorted({k for f in flat for k in f})
    return [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1]


def _canon_rows(
    header: Sequence[str], rows: Sequence[Sequence[str]], config: Mapping[str, Any]
) -> list[tuple[str, ...]]:
    import evaluator

    cfg = evaluator.parse_config(dict(config), source="config")
    out = []
    for r in rows:
        cells = []
        for j, col in enumerate(cfg.columns):
            text = r[j] if j < len(r) else ""
            try:
                v = evaluator.canonicalize(text, col)
                cells.append("∅" if v is evaluator.NULL else str(v))
            except evaluator.CellError:
                cells.append(f"⟂{text.strip()}")
        out.append(tuple(cells))
    return out


def answer_cells(
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    answer: Mapping[str, Any],
    config: Mapping[str, Any],
) -> list[list[int]]:
    """``[row, column]`` (0-based) of answer cells that are not where the gold has them.

    A row equal to a gold row (under the config) is clean; in any other row, the cells whose
    value no gold row holds in that column are marked (all of the row's cells when every
    value exists somewhere, since then it is the pairing that differs). An answer of another
    width marks every cell.
    """
    header, rows = list(answer["header"]), [list(r) for r in answer["rows"]]
    if len(header) != len(gold_header):
        return [[i, j] for i in range(len(rows)) for j in range(len(header))]
    gold_c = _canon_rows(gold_header, gold_rows, config)
    ans_c = _canon_rows(gold_header, rows, config)
    left = Counter(gold_c)
    columns = [{g[j] for g in gold_c} for j in range(len(gold_header))]
    marked: list[list[int]] = []
    for i, row in enumerate(ans_c):
        if left[row] > 0:
            left[row] -= 1
            continue
        cells = [j for j, v in enumerate(row) if v not in columns[j]]
        marked += [[i, j] for j in (cells or range(len(row)))]
    return marked


def missing_gold_rows(
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    answer: Mapping[str, Any],
    config: Mapping[str, Any],
) -> list[int]:
    """Gold row numbers (1 = the first data row) that no row of the answer equals."""
    if len(answer["header"]) != len(gold_header):
        return list(range(1, len(gold_rows) + 1))
    left = Counter(_canon_rows(gold_header, [list(r) for r in answer["rows"]], config))
    out = []
    for i, row in enumerate(_canon_rows(gold_header, gold_rows, config)):
        if left[row] > 0:
            left[row] -= 1
        else:
            out.append(i + 1)
    return out


def contradiction(
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    answer: Mapping[str, Any],
    config: Mapping[str, Any],
    verdict: str,
) -> dict[str, Any] | None:
    """The evaluator's case against a Match whose own blind answer scores wrong.

    Returns:
        None when the verdict is not Match or the answer passes; else ``{"error_code",
        "summary"}`` from the evaluator's explanation.
    """
    import evaluator
    from evaluator.explain import explain

    if verdict != Verdict.MATCH:
        return None
    cfg = evaluator.parse_config(dict(config), source="config")
    verdict_ = evaluator.evaluate_rows(
        gold_header=gold_header,
        gold_rows=gold_rows,
        prediction_header=answer["header"],
        prediction_rows=answer["rows"],
        config=cfg,
    )
    if verdict_.passed:
        return None
    result = explain(cfg, gold_header, gold_rows, answer["header"], answer["rows"])
    return {"error_code": verdict_.error_code, "summary": list(result.get("summary") or [])}


def differences(
    fold: TaskFold, version: int, gold_header: Sequence[str], gold_rows: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """Where the reviewers of one version part, and why the task is in adjudication."""
    recs = {n: fold.record(n, version) for n in fold.reviewers}
    p2 = {n: r.phase2 for n, r in recs.items() if r is not None and r.phase2 is not None}
    verdicts = {n: str(p["verdict"]) for n, p in p2.items()}
    dispositions = {n: str(p["disposition"]) for n, p in p2.items()}
    keys = differing_keys([p["config"] for p in p2.values()])
    reasons: list[str] = []
    if len(set(verdicts.values())) > 1:
        reasons.append("the verdicts differ")
    not_match = sorted(n for n, v in verdicts.items() if v != Verdict.MATCH)
    if not_match:
        reasons.append(
            ", ".join(f"{n} chose {verdicts[n]}" for n in not_match) + " (consensus needs match)"
        )
    not_pass = sorted(n for n, d in dispositions.items() if d != Disposition.PASS)
    if not_pass:
        reasons.append(
            ", ".join(f"{n} chose {dispositions[n].replace('_', ' ')}" for n in not_pass)
            + " (consensus needs pass)"
        )
    if keys:
        reasons.append("the configs differ at " + ", ".join(keys))
    cells: dict[str, list[list[int]]] = {}
    missing: dict[str, list[int]] = {}
    for name in p2:
        rec1 = fold.phase1_record(name, version)
        if rec1 is None or rec1.phase1 is None:
            continue
        answer, config = rec1.phase1["result"], p2[name]["config"]
        try:
            cells[name] = answer_cells(gold_header, gold_rows, answer, config)
            missing[name] = missing_gold_rows(gold_header, gold_rows, answer, config)
        except Exception:  # an aid for the eye: a config the evaluator refuses marks nothing
            logger.debug("cannot mark %s's answer", name, exc_info=True)
            cells[name], missing[name] = [], []
    return {
        "reasons": reasons,
        "verdicts": verdicts,
        "dispositions": dispositions,
        "verdicts_differ": len(set(verdicts.values())) > 1,
        "dispositions_differ": len(set(dispositions.values())) > 1,
        "config_keys": keys,
        "configs": {n: config_fields(p["config"]) for n, p in p2.items()},
        "answer_cells": cells,
        "missing_gold_rows": missing,
        "config_only": fold.config_only_disagreement(version),
    }


def version_diff(
    old: Mapping[str, Any], new: Mapping[str, Any], *, config_values: bool = True
) -> dict[str, Any]:
    """The change between two versions.

    Each side is ``{question, gold_header, gold_rows, config, overlay}``.

    Args:
        old: the earlier version.
        new: the later version.
        config_values: False lists the changed config keys without their values (for
            reviewers, who write their own configs).
    """
    question = None
    if old["question"] != new["question"]:
        question = [f"- {old['question']}", f"+ {new['question']}"]
    gold = None
    if old["gold_header"] != new["gold_header"] or old["gold_rows"] != new["gold_rows"]:
        a = [",".join(r) for r in [old["gold_header"], *old["gold_rows"]]]
        b = [",".join(r) for r in [new["gold_header"], *new["gold_rows"]]]
        gold = list(difflib.unified_diff(a, b, "gold before", "gold after", lineterm="", n=2))[2:]
    fa, fb = config_fields(old["config"]), config_fields(new["config"])
    keys = sorted(k for k in {*fa, *fb} if repr(fa.get(k)) != repr(fb.get(k)))
    config = [
        {"key": k, **({"before": fa.get(k), "after": fb.get(k)} if config_values else {})}
        for k in keys
    ]
    ov_a, ov_b = old["overlay"], new["overlay"]
    files = sorted(p for p in {*ov_a, *ov_b} if ov_a.get(p) != ov_b.get(p))
    return {"question": question, "gold": gold, "config": config, "files": files}


def contradiction_text(who: str, found: Mapping[str, Any]) -> str:
    """One sentence for a :func:`contradiction` (``who`` is a name, or ``you``)."""
    own = "your" if who == "you" else f"{who}'s"
    why = " ".join(found.get("summary") or []) or str(found.get("error_code"))
    return (
        f"{own} blind answer scores wrong against the gold under {own} config "
        f"({found.get('error_code')}: {why}), yet {who} chose match"
    )


def explanation(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    answer: Mapping[str, Any],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """The evaluator's verdict and explanation of an answer against the gold."""
    import evaluator
    from evaluator.explain import explain

    cfg = evaluator.parse_config(dict(config), source="config")
    out = explain(cfg, header, rows, answer["header"], answer["rows"])
    return {
        "error_code": out["error_code"],
        "summary": list(out["summary"]),
        "near_misses": out["near_misses"],
    }


def normalized_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A config with the evaluator's defaults written out (as reviewers' configs are)."""
    import evaluator

    try:
        return evaluator.config.config_to_dict(
            evaluator.parse_config(dict(config), source="config")
        )
    except evaluator.FatalError:
        return config


__all__ = [
    "answer_cells",
    "config_fields",
    "contradiction",
    "contradiction_text",
    "differences",
    "differing_keys",
    "explanation",
    "missing_gold_rows",
    "normalized_config",
    "version_diff",
]
