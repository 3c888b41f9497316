"""Before a run's first attempt: wait until every node that may run a sandbox holds its image.

A cold pull of the runtime image (30 s median, 90 s P90 for a multi-GB image) on a node
that takes a sandbox pod holds a creation slot and delays that attempt; spread over a run
it costs 1.7x the ideal makespan (docs/cluster.md). The pre-pull DaemonSet
(``k8s/base/prepull-daemonset.yaml``) pulls the image on every node; the run waits,
bounded by ``image_wait``, until every schedulable node for its pods (cordoned, not Ready,
tainted and ``node_selector``-excluded nodes do not count) lists the image in its status,
then fans out. Nodes that join later get the DaemonSet's pod at once, and the scheduler's
``ImageLocality`` score already prefers the nodes that hold the image.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from dataspace.errors import SandboxError
from dataspace.sandbox.kubernetes._api import ApiCallError, KubeApi
from dataspace.sandbox.kubernetes._preflight import (
    NODES_FIX,
    ClusterCheck,
    _holds,
    _schedulable,
    _some,
)

logger = logging.getLogger(__name__)

DAEMONSET = "pre-pull DaemonSet runtime-prepull"
REPORT_EVERY = 30.0
"""Seconds between two waiting lines when nothing changed."""


def image_nodes(
    nodes: list[Mapping[str, Any]], manifest: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """The schedulable nodes for ``manifest`` that hold its image, and those that do not."""
    image = manifest["spec"]["containers"][0]["image"]
    fit = [n for n in nodes if _schedulable(n, manifest)]
    holders = [n["metadata"]["name"] for n in fit if _holds(n, image)]
    missing = [n["metadata"]["name"] for n in fit if not _holds(n, image)]
    return holders, missing


def wait_for_image(
    api: KubeApi,
    manifest: Mapping[str, Any],
    *,
    timeout: float,
    poll: float,
    progress: Callable[[ClusterCheck], None],
) -> None:
    """Return once every schedulable node holds the pod's image (see the module docstring).

    ``progress`` gets a ``prepull`` check when the wait starts, whenever the nodes without
    the image change, every ``REPORT_EVERY`` seconds, and at the end.

    Raises:
        SandboxError: nodes still lacked the image after ``timeout`` seconds.
    """
    image = manifest["spec"]["containers"][0]["image"]
    if timeout <= 0:
        progress(
            ClusterCheck(
                key="prepull",
                ok=True,
                message=f"not waiting for {image} on every node (sandbox.options.image_wait: 0)",
            )
        )
        return
    t0 = time.monotonic()
    shown: tuple[list[str], float] | None = None
    while True:
        try:
            holders, missing = image_nodes(api.list_nodes(), manifest)
        except ApiCallError as exc:
            fix = NODES_FIX if exc.cause == "rbac" else "check the API server"
            progress(
                ClusterCheck(
                    key="prepull",
                    ok=True,
                    warning=True,
                    message=f"cannot list nodes ({exc.detail or exc}): not waiting for "
                    f"{image} on every node; {fix}",
                )
            )
            return
        waited = time.monotonic() - t0
        total = len(holders) + len(missing)
        if holders and not missing:
            after = f" after {waited:.0f} s" if shown is not None else ""
            progress(
                ClusterCheck(
                    key="prepull",
                    ok=True,
                    message=f"{image} is on every schedulable node ({total}){after}: "
                    "attempts start now",
                )
            )
            return
        what = (
            f"{len(missing)} of {total} schedulable nodes to hold {image} ({DAEMONSET})"
            if total
            else f"a schedulable node for the sandbox pods to hold {image} ({DAEMONSET})"
        )
        if waited >= timeout:
            where = f" on {len(missing)} of {total} schedulable nodes ({_some(missing)})"
            raise SandboxError(
                f"sandbox image {image} is still missing{where if total else ''} after "
                f"{waited:.0f} s (sandbox.options.image_wait {timeout:g} s): apply "
                "k8s/base/prepull-daemonset.yaml with the run's image and check "
                "`kubectl -n dataspace rollout status daemonset/runtime-prepull`, or set "
                "image_wait: 0 to start attempts that wait for their own pulls"
            )
        if shown is None or shown[0] != missing or time.monotonic() - shown[1] >= REPORT_EVERY:
            progress(
                ClusterCheck(
                    key="prepull",
                    ok=True,
                    warning=True,
                    message=f"waiting for {what}: {waited:.0f} s of at most {timeout:g} s"
                    + (f"; not yet on {_some(missing)}" if missing else ""),
                )
            )
            shown = (missing, time.monotonic())
        time.sleep(max(0.0, min(poll, timeout - waited)))


__all__ = ["image_nodes", "wait_for_image"]
