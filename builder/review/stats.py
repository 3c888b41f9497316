"""Agreement, issue, repair and acceptance statistics, computed from the event log alone."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Any

from builder.review.protocol import Event, canonical_config, replay

logger = logging.getLogger(__name__)


def _rate(n: int, d: int) -> float | None:
    return None if d == 0 else round(n / d, 4)


def review_stats(events: Iterable[Event]) -> dict[str, Any]:
    """Statistics of a review, by replaying its log.

    Agreement is measured on each task's first version whose every assigned reviewer
    locked phase 2 (the independent judgments before any discussion).
    """
    folds = replay(list(events))
    states = Counter(str(f.state) for f in folds.values())
    judged = verdict_agree = config_agree = disp_agree = first_consensus = 0
    flags: Counter[str] = Counter()
    confidence: Counter[int] = Counter()
    scopes: Counter[str] = Counter()
    repaired_tasks = repair_count = reopened = by_adjudication = 0
    accepted_first = accepted_repaired = 0
    removal_reasons: list[dict[str, str]] = []
    rounds: Counter[int] = Counter()
    for f in folds.values():
        first_done = next(
            (
                v
                for v in sorted(f.versions)
                if f.reviewers and all(f.phase2_locked(r, v) for r in f.reviewers)
            ),
            None,
        )
        if first_done is not None:
            judged += 1
            p2 = [f.records[first_done][r].phase2 or {} for r in f.reviewers]
            verdict_agree += len({p["verdict"] for p in p2}) == 1
            disp_agree += len({p["disposition"] for p in p2}) == 1
            config_agree += len({canonical_config(p["config"]) for p in p2}) == 1
            first_consensus += f.consensus(first_done) and first_done == 1
        for recs in f.records.values():
            for rec in recs.values():
                for phase in (rec.phase1, rec.phase2):
                    if phase:
                        flags.update(phase.get("issues") or [])
                if rec.phase1:
                    confidence[int(rec.phase1["confidence"])] += 1
        # a version with no scope was reopened for phase 2 without a content change
        repairs = [v for v in f.versions.values() if v.number > 1 and v.scope]
        reopened += sum(1 for v in f.versions.values() if v.number > 1 and not v.scope)
        repair_count += len(repairs)
        if repairs:
            repaired_tasks += 1
        for v in repairs:
            scopes.update(v.scope)
        rounds[len(f.versions)] += 1
        if str(f.state) == "accepted" and f.decision and f.decision.get("via") == "adjudication":
            by_adjudication += 1
        if str(f.state) == "accepted":
            if repairs:
                accepted_repaired += 1
            else:
                accepted_first += 1
        if str(f.state) == "removed" and f.decision:
            removal_reasons.append({"task_id": f.task_id, "reason": str(f.decision["reason"])})
    categories: Counter[str] = Counter()
    for flag, n in flags.items():
        categories[flag.split(".", 1)[0]] += n
    return {
        "tasks": len(folds),
        "states": dict(sorted(states.items())),
        "agreement": {
            "judged_tasks": judged,
            "verdict_agreement": _rate(verdict_agree, judged),
            "disposition_agreement": _rate(disp_agree, judged),
            "config_agreement": _rate(config_agree, judged),
            "first_pass_consensus": _rate(first_consensus, judged),
        },
        "issues": {
            "flags": dict(sorted(flags.items())),
            "categories": dict(sorted(categories.items())),
            "confidence": {str(k): v for k, v in sorted(confidence.items())},
        },
        "repairs": {
            "repaired_tasks": repaired_tasks,
            "repairs": repair_count,
            "reopened_for_phase2": reopened,
            "by_scope": dict(sorted(scopes.items())),
            "versions_per_task": {str(k): v for k, v in sorted(rounds.items())},
        },
        "acceptance": {
            "accepted": states.get("accepted", 0),
            "accepted_first_pass": accepted_first,
            "accepted_after_repair": accepted_repaired,
            "accepted_by_adjudication": by_adjudication,
            "post_repair_acceptance": _rate(accepted_repaired, repaired_tasks),
            "removed": states.get("removed", 0),
            "removal_reasons": removal_reasons,
        },
    }


__all__ = ["review_stats"]
