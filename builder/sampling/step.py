"""Constraint-aware sampling as the pipeline's task database step.

Importing this module registers the step ``sample`` (default policy) with
``builder.taskdb``; ``register_sampling_step(policy)`` registers a step for any other
policy under a name derived from it. The step hands the pipeline the sampled database's
bytes, so the gold the pipeline executes is exactly the result on the ledger's
``task_db.sqlite``; the sampling ledger travels in ``TaskDatabase.info["sampling"]``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from builder.sampling.policy import SamplingPolicy
from builder.sampling.sample import sample
from builder.taskdb import TaskDatabase, register_task_db_step

logger = logging.getLogger(__name__)

DEFAULT_STEP = "sample"


def sampling_step(policy: SamplingPolicy) -> Any:
    """A task database step that samples with ``policy`` (seeded by the task seed)."""

    def step(item: Any, *, seed: int) -> Any:
        pol = dataclasses.replace(policy, seed=seed)
        with tempfile.TemporaryDirectory(prefix="dataspace-sample-") as tmp:
            res = sample(
                Path(item.db_path),
                item.sql,
                dest=Path(tmp) / "task_db.sqlite",
                policy=pol,
                question=item.question,
                item_id=str(item.id),
            )
            data = res.db_path.read_bytes()
        return TaskDatabase(data=data, step="sample", info={"sampling": res.ledger})

    return step


def step_name(policy: SamplingPolicy | None) -> str:
    """The registry name of the step for ``policy`` (``sample`` for the default policy)."""
    if policy is None or dataclasses.replace(policy, seed=0) == SamplingPolicy():
        return DEFAULT_STEP
    body = json.dumps(dataclasses.replace(policy, seed=0).to_json(), sort_keys=True)
    return f"{DEFAULT_STEP}-{hashlib.sha256(body.encode()).hexdigest()[:12]}"


def register_sampling_step(policy: SamplingPolicy | None = None) -> str:
    """Register the sampling step for ``policy`` and return its name."""
    name = step_name(policy)
    register_task_db_step(name)(sampling_step(policy or SamplingPolicy()))
    return name


default_step = sampling_step(SamplingPolicy())
register_task_db_step(DEFAULT_STEP)(default_step)

__all__ = ["DEFAULT_STEP", "default_step", "register_sampling_step", "sampling_step", "step_name"]
