"""Smoke test of the kubernetes backend on a real cluster (or on the loopback fake).

Runs ``tests/k8s/test_k8s_smoke.py`` (marker ``k8s``): ``dataspace doctor``, gold and
DataSpace-Agent attempts through ``dataspace run`` (the agent against the scripted model
server), a command killed at the pod's deadline, an eviction for the output volume, a pod
bigger than the quota, a bad image and isolation probes from inside a pod, against the
cluster of a kubeconfig context. Without one the suite is skipped with the reason.

    .venv/bin/python scripts/k8s_smoke.py --context kind-dataspace --image dataspace/runtime:dev
    .venv/bin/python scripts/k8s_smoke.py --fake      # the same code paths on the loopback fake
    .venv/bin/python scripts/k8s_smoke.py --fake -- -k isolation   # extra pytest arguments

How to point it at kind, k3d, minikube or a cloud cluster: k8s/README.md, "Smoke test on a
real cluster". Exit code: pytest's (0 passed, 5 nothing ran).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/k8s_smoke.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--context",
        default=os.environ.get("DATASPACE_K8S_CONTEXT"),
        help="kubeconfig context of the cluster (default: $DATASPACE_K8S_CONTEXT)",
    )
    p.add_argument("--namespace", help="sandbox namespace (default: dataspace-sandboxes)")
    p.add_argument("--image", help="the runtime image, pullable by the cluster")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--fake", action="store_true", help="run against the loopback fake cluster")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (e.g. -k isolation)")
    a = p.parse_args(argv)
    env = dict(os.environ)
    for name, value in (
        ("DATASPACE_K8S_CONTEXT", a.context),
        ("DATASPACE_K8S_NAMESPACE", a.namespace),
        ("DATASPACE_K8S_IMAGE", a.image),
        ("KUBECONFIG", a.kubeconfig),
    ):
        if value:
            env[name] = value
    if a.fake:
        env["DATASPACE_K8S_SMOKE_FAKE"] = "1"
        env.pop("DATASPACE_K8S_CONTEXT", None)
    where = "the loopback fake" if a.fake else (a.context or "no cluster (skipped)")
    print(f"k8s smoke suite against {where}", flush=True)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "k8s",
        "-p",
        "no:cacheprovider",
        "-ra",
        "-q",
        "tests/k8s/test_k8s_smoke.py",
        *a.pytest_args,
    ]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
