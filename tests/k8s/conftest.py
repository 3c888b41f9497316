"""Fixtures of the kubernetes backend tests: the loopback fake cluster and a workspace."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# k8s_support (beside this file) and the shared sandbox contract suite (tests/sandbox).
for folder in (HERE, HERE.parent / "sandbox"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from k8s_support import IMAGE_BINDS  # noqa: E402

from dataspace.testing.fake_k8s import FakeKubernetes  # noqa: E402


@pytest.fixture
def fake() -> Iterator[FakeKubernetes]:
    """A fresh fake cluster; asserts on the way out that no pod was left behind."""
    with FakeKubernetes(image_binds=IMAGE_BINDS) as server:
        yield server
        leaked = server.pod_names()
        assert leaked == [], f"pods leaked: {leaked}"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    (folder / "docs").mkdir(parents=True)
    (folder / "data.csv").write_text("id,name\n1,alpha\n2,beta\n")
    (folder / "docs" / "notes.md").write_text("# notes\n")
    return folder
