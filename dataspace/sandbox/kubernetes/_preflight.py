"""What a run on Kubernetes will meet, checked before it runs (``dataspace doctor SPEC``).

A list of pods says only that the API answers: a namespace that does not exist lists as
empty, and Pod Security, the admission policy, the quota, a missing image or a pod too big
for every node show only when an attempt creates its pod. So preflight asks what the run
will ask, without running it:

* ``namespace``: the sandbox namespace exists (read; where the controller may not read
  namespaces, the dry run below tells: a create into a missing namespace is a 404);
* ``pod``: a server-side dry run (``dryRun=All``) of the exact pod an attempt creates:
  Pod Security, admission policies and the quota admit it (a quota that is only full now
  is a warning: attempts wait for room); its volume claim exists (a dry run does not
  look at claims);
* ``image``: every schedulable node holds the image (its status' ``images``); some but
  not all is a warning naming the nodes without it (an attempt placed there waits for a
  cold pull: pre-pull with ``k8s/base/prepull-daemonset.yaml``); none: a one-off pod of the
  same manifest pulls it within ``preflight_pull_timeout`` (then is deleted);
* ``resources``: the pod's requests fit the allocatable resources of a schedulable node.

Reading nodes needs the ClusterRole ``dataspace-node-reader`` (``k8s/base/rbac.yaml``);
without it the last two are warnings, not failures.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dataspace.sandbox.kubernetes._api import REFUSAL_HINTS, ApiCallError, KubeApi, quota_never_fits
from dataspace.sandbox.kubernetes._options import KubernetesOptions
from dataspace.sandbox.kubernetes._pod import (
    bytes_quantity,
    classify_pod,
    format_events,
    parse_quantity,
)

logger = logging.getLogger(__name__)

RESOURCES = ("cpu", "memory", "ephemeral-storage")
NAMESPACE_FIX = (
    "apply the manifests first (kubectl apply -f k8s/base/namespaces.yaml, see k8s/README.md) "
    "or set sandbox.options.namespace"
)
PREPULL_FIX = (
    "pre-pull it on every node (kubectl apply -f k8s/base/prepull-daemonset.yaml, then "
    "kubectl -n dataspace rollout status daemonset/runtime-prepull)"
)
NODES_FIX = "apply the ClusterRole dataspace-node-reader of k8s/base/rbac.yaml to check it"


@dataclass(frozen=True, kw_only=True)
class ClusterCheck:
    """One preflight finding about the cluster.

    Attributes:
        key: ``namespace``, ``pod``, ``volume``, ``image`` or ``resources``.
        ok: False when the run would fail.
        message: what was found; for a failure, the fix.
        warning: a problem that does not stop the run.
    """

    key: str
    ok: bool
    message: str
    warning: bool = False


def cluster_checks(
    api: KubeApi, opts: KubernetesOptions, manifest: Mapping[str, Any]
) -> list[ClusterCheck]:
    """Every check of the module docstring for the pod ``manifest`` (see there)."""
    ns = opts.namespace
    out: list[ClusterCheck] = []
    namespace = _namespace(api, ns)
    if namespace is not None and not namespace.ok:
        return [namespace]
    pod = _dry_run(api, ns, manifest)
    if pod.key == "namespace":
        return [pod]
    out.append(
        namespace
        or ClusterCheck(key="namespace", ok=True, message=f"{ns} exists (the dry run reached it)")
    )
    out.append(pod)
    out.extend(_claims(api, ns, manifest))
    if not pod.ok and not pod.warning:
        return out
    try:
        nodes = [n for n in api.list_nodes() if _schedulable(n, manifest)]
    except ApiCallError as exc:
        why = f"cannot list nodes ({exc.detail or exc})"
        fix = NODES_FIX if exc.cause == "rbac" else "check the API server"
        out.append(_resources_unknown(manifest, why, fix))
        out.append(_pull(api, opts, manifest, why))
        return out
    out.append(_fits(manifest, nodes))
    image = manifest["spec"]["containers"][0]["image"]
    holders = [n["metadata"]["name"] for n in nodes if _holds(n, image)]
    missing = [n["metadata"]["name"] for n in nodes if not _holds(n, image)]
    placed = (
        f"a run waits up to {opts.image_wait:g} s (image_wait) for them before its first attempt"
        if opts.image_wait > 0
        else "an attempt placed there waits for the pull"
    )
    if holders and not missing:
        out.append(
            ClusterCheck(
                key="image",
                ok=True,
                message=f"{image} is on every schedulable node ({_some(holders)})",
            )
        )
    elif holders:
        out.append(
            ClusterCheck(
                key="image",
                ok=True,
                warning=True,
                message=f"{image} is on {len(holders)} of {len(nodes)} schedulable nodes, not "
                f"on {_some(missing)}: {placed}; {PREPULL_FIX}",
            )
        )
    else:
        out.append(_pull(api, opts, manifest, "no schedulable node holds it"))
    return out


def _some(names: list[str], shown: int = 3) -> str:
    """Node names for a message, the first few.

    >>> _some(["a"]), _some(["a", "b", "c", "d", "e"])
    ('a', 'a, b, c and 2 more')
    """
    head = ", ".join(names[:shown])
    return head + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _namespace(api: KubeApi, ns: str) -> ClusterCheck | None:
    """The namespace line; None when the controller may not read namespaces."""
    try:
        obj = api.read_namespace(ns)
    except ApiCallError as exc:
        if exc.status == 404:
            return ClusterCheck(
                key="namespace", ok=False, message=f"{ns} does not exist; {NAMESPACE_FIX}"
            )
        if exc.cause == "rbac":
            return None
        return ClusterCheck(key="namespace", ok=False, message=str(exc))
    labels = (obj.get("metadata") or {}).get("labels") or {}
    level = labels.get("pod-security.kubernetes.io/enforce", "privileged")
    return ClusterCheck(key="namespace", ok=True, message=f"{ns} exists (Pod Security: {level})")


def _dry_run(api: KubeApi, ns: str, manifest: Mapping[str, Any]) -> ClusterCheck:
    """The dry-run create of the attempt's pod, its refusal named by cause."""
    try:
        api.dry_run_pod(ns, manifest)
    except ApiCallError as exc:
        detail = exc.detail or str(exc)
        if exc.status == 404 and "namespaces" in detail:
            return ClusterCheck(
                key="namespace", ok=False, message=f"{ns} does not exist; {NAMESPACE_FIX}"
            )
        if exc.cause == "quota":
            never = quota_never_fits(detail)
            if never:
                return ClusterCheck(
                    key="pod",
                    ok=False,
                    message=f"the attempt's pod alone exceeds the namespace's quota ({never}): "
                    f"{detail}; raise the ResourceQuota (k8s/base/resourcequota.yaml) or "
                    "lower the spec's sandbox limits",
                )
            return ClusterCheck(
                key="pod",
                ok=True,
                warning=True,
                message=f"the namespace's quota is full now ({detail}): attempts will wait "
                "for room",
            )
        named = {
            "pod_security": "refused by Pod Security (a bad sandbox spec)",
            "admission": "refused by an admission policy (a bad sandbox spec)",
            "rbac": "refused by RBAC",
        }.get(exc.cause, "refused")
        hint = REFUSAL_HINTS.get(exc.cause, "")
        return ClusterCheck(
            key="pod",
            ok=False,
            message=f"the attempt's pod is {named}: HTTP {exc.status} {detail}{hint}",
        )
    return ClusterCheck(
        key="pod",
        ok=True,
        message="the attempt's pod is admitted (server-side dry run: Pod Security, "
        "admission policies, quota)",
    )


def _claims(api: KubeApi, ns: str, manifest: Mapping[str, Any]) -> list[ClusterCheck]:
    out = []
    for vol in manifest["spec"].get("volumes") or []:
        claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
        if not claim:
            continue
        try:
            api.read_claim(ns, claim)
        except ApiCallError as exc:
            if exc.status == 404:
                message = (
                    f"persistentvolumeclaim {claim} does not exist in {ns}: create it (see "
                    "k8s/README.md) or fix sandbox.options.workspace_volume"
                )
                out.append(ClusterCheck(key="volume", ok=False, message=message))
            else:
                out.append(
                    ClusterCheck(
                        key="volume",
                        ok=True,
                        warning=True,
                        message=f"cannot read persistentvolumeclaim {claim}: {exc}",
                    )
                )
            continue
        out.append(ClusterCheck(key="volume", ok=True, message=f"claim {claim} exists in {ns}"))
    return out


def requests_of(manifest: Mapping[str, Any]) -> dict[str, Fraction]:
    """The pod's effective requests (the larger of its containers' sum and any init's)."""
    spec = manifest["spec"]
    out = {}
    for res in RESOURCES:

        def amount(c: Mapping[str, Any], res: str = res) -> Fraction:
            value = ((c.get("resources") or {}).get("requests") or {}).get(res)
            return parse_quantity(value) if value is not None else Fraction(0)

        total = sum((amount(c) for c in spec.get("containers") or []), Fraction(0))
        init = max((amount(c) for c in spec.get("initContainers") or []), default=Fraction(0))
        out[res] = max(total, init)
    return out


def _show(res: str, value: Fraction) -> str:
    if res == "cpu":
        return str(int(value)) if value.denominator == 1 else f"{int(value * 1000)}m"
    return bytes_quantity(int(value))


def _describe(values: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{r}={_show(r, v)}" for r, v in values.items())


def _fits(manifest: Mapping[str, Any], nodes: list[dict[str, Any]]) -> ClusterCheck:
    want = requests_of(manifest)
    if not nodes:
        return ClusterCheck(
            key="resources",
            ok=False,
            message="no schedulable node matches the sandbox pods (node_selector, taints, "
            "cordoned or not Ready)",
        )
    fitting = []
    best: tuple[str, dict[str, Fraction]] | None = None
    for n in nodes:
        alloc = (n.get("status") or {}).get("allocatable") or {}
        have = {r: parse_quantity(alloc.get(r, 0)) for r in RESOURCES}
        if all(want[r] <= have[r] or (have[r] == 0 and r == "ephemeral-storage") for r in want):
            fitting.append(n["metadata"]["name"])
        if best is None or have["cpu"] > best[1]["cpu"]:
            best = (n["metadata"]["name"], have)
    if fitting:
        return ClusterCheck(
            key="resources",
            ok=True,
            message=f"requests {_describe(want)} fit {len(fitting)} of {len(nodes)} "
            f"schedulable nodes ({fitting[0]}, ...)",
        )
    assert best is not None
    return ClusterCheck(
        key="resources",
        ok=False,
        message=f"requests {_describe(want)} fit no schedulable node (largest: {best[0]} "
        f"with {_describe(best[1])}); lower the spec's sandbox cpus/memory/disk limits or add "
        "a larger node",
    )


def _resources_unknown(manifest: Mapping[str, Any], why: str, fix: str) -> ClusterCheck:
    return ClusterCheck(
        key="resources",
        ok=True,
        warning=True,
        message=f"requests {_describe(requests_of(manifest))} not checked: {why}; {fix}",
    )


def _schedulable(node: Mapping[str, Any], manifest: Mapping[str, Any]) -> bool:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    if spec.get("unschedulable"):
        return False
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = manifest["spec"].get("nodeSelector") or {}
    if not ready or any(labels.get(k) != v for k, v in selector.items()):
        return False
    tolerations = manifest["spec"].get("tolerations") or []
    for taint in spec.get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(
            (t.get("operator") == "Exists" and t.get("key") in (None, taint.get("key")))
            or (t.get("key") == taint.get("key") and t.get("value") == taint.get("value"))
            for t in tolerations
        ):
            return False
    return True


def _image_names(image: str) -> set[str]:
    """The names a node may list an image under (with and without the default registry)."""
    names = {image}
    first = image.split("/")[0]
    if "." not in first and ":" not in first and first != "localhost":
        path = image if "/" in image else f"library/{image}"
        names.add(f"docker.io/{path}")
    if image.startswith("docker.io/"):
        names.add(image.removeprefix("docker.io/").removeprefix("library/"))
    if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
        names |= {f"{n}:latest" for n in set(names)}
    return names


def _holds(node: Mapping[str, Any], image: str) -> bool:
    want = _image_names(image)
    return any(
        want & set(entry.get("names") or [])
        for entry in (node.get("status") or {}).get("images") or []
    )


def _pull(
    api: KubeApi, opts: KubernetesOptions, manifest: Mapping[str, Any], why: str
) -> ClusterCheck:
    """A one-off pod of the attempt's manifest: is the image pulled (then it is deleted)?"""
    image = manifest["spec"]["containers"][0]["image"]
    ns, name = opts.namespace, manifest["metadata"]["name"]
    t0 = time.monotonic()
    try:
        api.create_pod(ns, manifest)
    except ApiCallError as exc:
        return ClusterCheck(
            key="image", ok=False, message=f"{image}: {why}, and a one-off pod failed: {exc}"
        )
    try:
        end = t0 + opts.preflight_pull_timeout
        state = classify_pod(None)
        while time.monotonic() < end:
            state = classify_pod(api.get_pod(ns, name))
            if state.kind in ("stageable", "ready"):
                return ClusterCheck(
                    key="image",
                    ok=True,
                    message=f"{image} pulled by a one-off pod on node {state.node} in "
                    f"{time.monotonic() - t0:.1f}s ({why} before)",
                )
            if state.terminal:
                break
            time.sleep(0.25)
        events = format_events(api.pod_events(ns, name)).replace("\n", " | ")
        if state.kind == "image_error":
            return ClusterCheck(
                key="image",
                ok=False,
                message=f"{image} cannot be pulled ({state.reason}: {state.message}); build and "
                f"push it (images/build.sh) or fix sandbox.image; events: {events}",
            )
        if state.terminal:
            return ClusterCheck(
                key="image",
                ok=False,
                message=f"{image}: a one-off pod ended {state.kind} ({state.reason}: "
                f"{state.message}); events: {events}",
            )
        return ClusterCheck(
            key="image",
            ok=True,
            warning=True,
            message=f"{image}: {why}, and a one-off pod did not start within "
            f"{opts.preflight_pull_timeout:.0f}s (sandbox option preflight_pull_timeout); "
            f"events: {events or 'none'}",
        )
    finally:
        try:
            api.delete_pod(ns, name)
        except ApiCallError:
            logger.exception("could not delete the preflight pod %s/%s", ns, name)


__all__ = ["ClusterCheck", "cluster_checks", "requests_of"]
