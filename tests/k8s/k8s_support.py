"""Helpers shared by the kubernetes backend tests (a module of its own, not conftest)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dataspace.sandbox.kubernetes import BASE_PATH, KubernetesBackend
from dataspace.testing.fake_k8s import FakeKubernetes

NAMESPACE = "ds-test"
#: The fake's containers see this Python environment, as a runtime image would ship one.
IMAGE_BINDS = tuple(sorted({sys.prefix, sys.base_prefix}))


def make_backend(fake: FakeKubernetes, tmp_path: Path, **options: Any) -> KubernetesBackend:
    """A backend talking to ``fake`` with quick timeouts and short API backoff."""
    settings: dict[str, Any] = {
        "api_host": fake.url,
        "namespace": NAMESPACE,
        "ready_timeout": 20.0,
        "slots": "thread",
        "api_backoff_base": 0.02,
        "api_retry_window": 0.0,  # api_retries alone, unless a test gives a window
        "workspace_cache_dir": str(tmp_path / "ws-cache"),
        "path": f"{sys.prefix}/bin:{BASE_PATH}",
    }
    settings.update(options)
    return KubernetesBackend(**settings)
