"""Fixtures for agent loops: a real local sandbox, the scripted model server, a tiny release."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents_helpers import CITIES, KEY_ENV, SECRET, _csv

from dataspace.testing.scripted_server import ScriptedServer


@pytest.fixture(scope="session")
def local_backend() -> Any:
    """The real local sandbox backend (skips where the host cannot run it)."""
    try:
        from dataspace.sandbox import get_backend

        return get_backend("local")
    except Exception as exc:  # the backend refuses hosts without namespaces
        pytest.skip(f"local sandbox backend unavailable: {exc}")


@pytest.fixture(autouse=True)
def _model_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def tiny_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tasks with a CSV workspace, gold answers and evaluation configs."""
    evaluator = pytest.importorskip("evaluator")
    if not hasattr(evaluator, "evaluate_task") or not hasattr(evaluator, "parse_config"):
        pytest.skip("the evaluator package is not complete in this tree")
    from dataspace.release import ReleaseWriter, TaskArtifacts

    dest = tmp_path_factory.mktemp("agents-release") / "release"
    rows = [["Lyon", 522000], ["Graz", 291000], ["Porto", 232000], ["Turku", 195000]]
    with ReleaseWriter(dest) as w:
        for k, threshold in ((1, 250000), (2, 200000)):
            ans = [r for r in rows if r[1] > threshold]
            cfg = {
                "schema_version": "1.0",
                "task_id": f"task_{k}",
                "order_sensitive": False,
                "columns": [
                    {"gold_index": 0, "gold_name": "city", "type": "text"},
                    {
                        "gold_index": 1,
                        "gold_name": "population",
                        "type": "number",
                        "comparison": {"mode": "integer"},
                    },
                ],
            }
            w.add_task(
                TaskArtifacts(
                    task_id=f"task_{k}",
                    question=f"Which cities have a population above {threshold}?",
                    context={"cities.csv": CITIES},
                    gold_csv=_csv([["city", "population"], *ans]),
                    config=cfg,
                )
            )
    for p in [dest, *dest.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return dest
