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


TEST_CPU_VARIABLE = "DATASPACE_K8S_TEST_CPU"
TEST_MEMORY_VARIABLE = "DATASPACE_K8S_TEST_MEMORY"
DEFAULT_TEST_CPU = "0.5"
DEFAULT_TEST_MEMORY = "512Mi"


def contract_resources() -> dict[str, Any]:
    """CPU and memory of the contract suite's pods (requests equal limits).

    From ``DATASPACE_K8S_TEST_CPU`` (cores, or millicores such as ``500m``) and
    ``DATASPACE_K8S_TEST_MEMORY`` (``512Mi``, ``2Gi``...), so the suite fits a small node;
    the defaults fit the fake's node and a laptop's kind cluster alike.

    Raises:
        ConfigError: a value that is not a positive CPU count or a size.
    """
    import os

    from dataspace.errors import ConfigError
    from dataspace.runs.spec import parse_size

    cpu_text = os.environ.get(TEST_CPU_VARIABLE, DEFAULT_TEST_CPU).strip()
    try:
        cpus = float(cpu_text[:-1]) / 1000 if cpu_text.endswith("m") else float(cpu_text)
    except ValueError:
        cpus = 0.0
    if not cpus > 0:
        raise ConfigError(
            f"{TEST_CPU_VARIABLE}={cpu_text!r}: expected a positive CPU count such as 0.5 or 500m"
        )
    memory = parse_size(
        os.environ.get(TEST_MEMORY_VARIABLE, DEFAULT_TEST_MEMORY), what=TEST_MEMORY_VARIABLE
    )
    return {"cpus": cpus, "memory_bytes": memory}
