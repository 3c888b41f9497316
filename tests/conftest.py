"""Fixtures shared by every test package: one build cache, and the demo release built once."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DEMO_BUILD_TIMEOUT = 1800
"""Seconds a test that uses the demo release may take (its first user pays for the build;
mark it ``pytest.mark.timeout(DEMO_BUILD_TIMEOUT)``)."""


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One item cache for every build of this session: a build of items already built
    (same inputs, same code) copies them from here instead of building them again."""
    return tmp_path_factory.mktemp("build-cache")


@pytest.fixture(scope="session")
def demo_release(tmp_path_factory: pytest.TempPathFactory, build_cache: Path) -> Path:
    """The release ``dataspace demo`` builds (both bundled corpora, every stage), built
    once per session in this process (into :func:`build_cache`, so a later ``dataspace
    demo --build-cache`` reuses every item), readable by the sandbox's user."""
    from dataspace.demo import build_demo_release

    release = tmp_path_factory.mktemp("demo-release") / "release"
    build_demo_release(release, workers=0, cache_dir=build_cache)
    for p in [release, *release.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return release


@pytest.fixture(scope="session")
def demo_tasks(demo_release: Path) -> tuple[str, ...]:
    """Three demo tasks that differ: one whose answer needs a video, one of the clinical
    corpus that needs a PDF (or any clinical one), one asked in Chinese."""
    meta = {
        p.stem: json.loads(p.read_text()) for p in (demo_release / "metadata").glob("task_*.json")
    }
    ids = sorted(meta, key=lambda t: int(t.split("_")[1]))
    chosen: list[str] = []

    def first(pred: object) -> None:
        for t in ids:
            if t not in chosen and pred(meta[t]):  # type: ignore[operator]
                chosen.append(t)
                return

    first(lambda m: "video" in m.get("modalities_required", []))
    first(lambda m: m.get("corpus") == "clinical" and "pdf" in m.get("modalities_required", []))
    if len(chosen) < 2:
        first(lambda m: m.get("corpus") == "clinical")
    first(lambda m: m.get("question_language") == "zh")
    assert len(chosen) == 3, f"the demo release has no three such tasks: {chosen}"
    return tuple(chosen)
