"""Query-conditioned data videos: atoms, strategies, storyboards, frames, audio, checks.

``builder.render.video.build_video`` runs the whole branch.

Public names are imported lazily, so ``import builder.video`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AnswerAtom": "builder.video.atoms",
    "AtomSet": "builder.video.atoms",
    "DeterministicPlanner": "builder.video.storyboard",
    "EvidencePlan": "builder.video.strategies",
    "LlmPlanner": "builder.video.storyboard",
    "PredicateAtom": "builder.video.atoms",
    "Scene": "builder.video.storyboard",
    "Storyboard": "builder.video.storyboard",
    "StoryboardRejected": "builder.video.storyboard",
    "StrategyRejected": "builder.video.strategies",
    "TextItem": "builder.video.frames",
    "VideoCheck": "builder.video.checks",
    "answer_evidence": "builder.video.strategies",
    "check_storyboard": "builder.video.storyboard",
    "check_video": "builder.video.checks",
    "extract_atoms": "builder.video.atoms",
    "get_planner": "builder.video.storyboard",
    "predicate_abstraction": "builder.video.strategies",
    "read_text": "builder.video.checks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder.video' has no attribute {name!r}")
