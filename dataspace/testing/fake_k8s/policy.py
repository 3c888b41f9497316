"""What a real API server refuses, for the loopback fake: RBAC, namespaces, admission, quota.

``ApiPolicy`` holds the cluster objects that decide whether the fake API server
(``server.FakeKubernetes``) serves a request, and answers refusals with the bodies a real
kube-apiserver sends, in its order:

1. **RBAC** (``Rbac``): the requesting user's Roles and ClusterRoles, from the
   RoleBindings and ClusterRoleBindings that name it; a verb it lacks is ``403 Forbidden``
   ``pods is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "pods"
   in API group "" in the namespace "ns"``. Exec needs ``get`` and ``create`` on
   ``pods/exec`` (the websocket check of Kubernetes 1.31 and later).
2. **Namespaces**: creating in a namespace that does not exist is ``404 namespaces "x"
   not found``; listing in one is an empty ``200`` (as real).
3. **Pod Security** (the namespace's ``pod-security.kubernetes.io/enforce`` label):
   ``403 pods "x" is forbidden: violates PodSecurity "restricted:latest": ...`` with the
   real check names and details (the checks our pods can fail: host namespaces,
   privileged, hostPath volumes, restricted volume types, privilege escalation,
   capabilities, non-root, runAsUser 0, seccomp).
4. **ValidatingAdmissionPolicy**: the policies and bindings given (e.g.
   ``k8s/base/sandbox-admission-policy.yaml``), their CEL expressions evaluated by
   ``celpy``: ``422 Invalid`` ``pods "x" is forbidden: ValidatingAdmissionPolicy 'p'
   with binding 'b' denied request: <message>``.
5. **ResourceQuota**: counted per namespace over its live pods (``pods``, ``cpu``,
   ``memory``, ``ephemeral-storage``, their ``requests.``/``limits.`` forms) and its
   ConfigMaps (each namespace holds ``kube-root-ca.crt`` from the start, as the
   controller manager makes it): ``403 pods "x" is forbidden: exceeded quota:
   sandboxes, requested: pods=1, used: pods=1, limited: pods=1``.

``dryRun=All`` runs every check and persists nothing. ``ApiPolicy()`` enforces nothing
and every namespace exists (the fake's behaviour without a policy).

Not modelled: mutating admission, LimitRange defaults, quota scopes and priority classes,
the quota's ``must specify`` refusals, aggregated ClusterRoles, resourceNames in rules,
Pod Security versions other than ``latest``, warn and audit modes.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from dataspace.sandbox.kubernetes._pod import parse_quantity as quantity

CONTROLLER_USER = "system:serviceaccount:dataspace:dataspace-controller"
"""The user the controller's API calls run as (``k8s/base/serviceaccount.yaml``)."""
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
NODE = "fake-node-1"
"""The fake cluster's one node (where its kubelet runs every pod)."""

_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def format_quantity(resource: str, value: Fraction) -> str:
    """A quantity as the API server prints it in a quota refusal.

    >>> format_quantity("limits.cpu", Fraction(3, 2)), format_quantity("memory", 2 * 1024**3)
    ('1500m', '2Gi')
    """
    if resource == "cpu" or resource.endswith(".cpu"):
        return str(int(value)) if value.denominator == 1 else f"{int(value * 1000)}m"
    whole = int(value)
    for i, suffix in reversed(list(enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1))):
        if whole and whole % 1024**i == 0:
            return f"{whole // 1024**i}{suffix}"
    return str(whole)


def status(code: int, reason: str, message: str, **details: str) -> dict[str, Any]:
    """A ``Status`` body as the API server sends it with an error."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return body


# ---- RBAC -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Rbac:
    """The permissions of one user, from Role/ClusterRole objects and their bindings.

    Attributes:
        user: the user name the API server sees (a service account's is
            ``system:serviceaccount:<namespace>:<name>``).
        rules: namespace (None: every namespace and cluster-scoped resources) -> the
            PolicyRules that apply there.
    """

    user: str
    rules: Mapping[str | None, Sequence[Mapping[str, Any]]]

    @classmethod
    def from_manifests(cls, docs: Iterable[Mapping[str, Any]], user: str) -> Rbac:
        """The rules bound to ``user`` by the RoleBindings and ClusterRoleBindings in ``docs``."""
        docs = list(docs)
        roles = {
            (d["metadata"].get("namespace"), d["metadata"]["name"]): d.get("rules") or []
            for d in docs
            if d.get("kind") == "Role"
        }
        cluster_roles = {
            d["metadata"]["name"]: d.get("rules") or []
            for d in docs
            if d.get("kind") == "ClusterRole"
        }
        rules: dict[str | None, list[Mapping[str, Any]]] = {}
        for d in docs:
            kind = d.get("kind")
            if kind not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            if not any(_subject(s, d["metadata"].get("namespace")) == user for s in d["subjects"]):
                continue
            ns = d["metadata"].get("namespace") if kind == "RoleBinding" else None
            ref = d["roleRef"]
            granted = (
                cluster_roles.get(ref["name"], [])
                if ref["kind"] == "ClusterRole"
                else roles.get((ns, ref["name"]), [])
            )
            rules.setdefault(ns, []).extend(granted)
        return cls(user=user, rules=rules)

    def allows(self, verb: str, resource: str, namespace: str | None) -> bool:
        """Whether a rule grants ``verb`` on ``resource`` (``pods/exec`` for a subresource)."""
        scopes = [None] if namespace is None else [namespace, None]
        for scope in scopes:
            for rule in self.rules.get(scope, ()):
                if (
                    any(g in ("", "*") for g in rule.get("apiGroups") or [])
                    and any(r in (resource, "*") for r in rule.get("resources") or [])
                    and any(v in (verb, "*") for v in rule.get("verbs") or [])
                    and not rule.get("resourceNames")
                ):
                    return True
        return False

    def refusal(
        self, verbs: Sequence[str], resource: str, namespace: str | None, name: str | None
    ) -> tuple[int, dict[str, Any]] | None:
        """The 403 for the first of ``verbs`` the user lacks, or None (allowed)."""
        for verb in verbs:
            if self.allows(verb, resource, namespace):
                continue
            kind = resource.split("/")[0]
            what = f'{kind} "{name}"' if name else kind
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            message = (
                f'{what} is forbidden: User "{self.user}" cannot {verb} resource '
                f'"{resource}" in API group "" {where}'
            )
            details = {"kind": kind, **({"name": name} if name else {})}
            return 403, status(403, "Forbidden", message, **details)
        return None


def _subject(subject: Mapping[str, Any], binding_ns: str | None) -> str:
    if subject.get("kind") == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return f"system:serviceaccount:{ns}:{subject['name']}"
    return str(subject.get("name"))


# ---- Pod Security ---------------------------------------------------------------------------


def _names(kind: str, names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"{kind}{'s' if len(names) > 1 else ''} {quoted}"


def pod_security_violations(pod: Mapping[str, Any], level: str) -> list[str]:
    """The Pod Security checks ``pod`` fails at ``level`` (``baseline`` or ``restricted``).

    Each entry is the API server's ``reason (detail)`` text, in its order.
    """
    if level not in ("baseline", "restricted"):
        return []
    spec = pod.get("spec") or {}
    pod_ctx = spec.get("securityContext") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    volumes = spec.get("volumes") or []
    out: list[str] = []

    def ctx(c: Mapping[str, Any]) -> Mapping[str, Any]:
        return c.get("securityContext") or {}

    host = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if host:
        out.append(f"host namespaces ({', '.join(host)})")
    hostpath = [v["name"] for v in volumes if "hostPath" in v]
    if hostpath:
        out.append(f"hostPath volumes ({_names('volume', hostpath)})")
    privileged = [c["name"] for c in containers if ctx(c).get("privileged")]
    if privileged:
        out.append(
            f"privileged ({_names('container', privileged)} must not set "
            "securityContext.privileged=true)"
        )
    if level != "restricted":
        return out
    escalate = [
        c["name"] for c in containers if ctx(c).get("allowPrivilegeEscalation") is not False
    ]
    if escalate:
        out.append(
            f"allowPrivilegeEscalation != false ({_names('container', escalate)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    caps = [
        c["name"]
        for c in containers
        if "ALL" not in ((ctx(c).get("capabilities") or {}).get("drop") or [])
    ]
    if caps:
        out.append(
            f"unrestricted capabilities ({_names('container', caps)} must set "
            'securityContext.capabilities.drop=["ALL"])'
        )
    allowed = {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
    bad = []
    for v in volumes:
        kinds = [k for k in v if k != "name"]
        if kinds and kinds[0] not in allowed:
            bad.append(f'volume "{v["name"]}" uses restricted volume type "{kinds[0]}"')
    if bad:
        out.append(f"restricted volume types ({', '.join(bad)})")
    if not pod_ctx.get("runAsNonRoot"):
        root = [c["name"] for c in containers if not ctx(c).get("runAsNonRoot")]
        if root:
            out.append(
                f"runAsNonRoot != true (pod or {_names('container', root)} must set "
                "securityContext.runAsNonRoot=true)"
            )
    uid0 = [c["name"] for c in containers if ctx(c).get("runAsUser") == 0]
    if pod_ctx.get("runAsUser") == 0 or uid0:
        who = "pod" if pod_ctx.get("runAsUser") == 0 else _names("container", uid0)
        out.append(f"runAsUser=0 ({who} must not set runAsUser=0)")
    good = ("RuntimeDefault", "Localhost")
    pod_seccomp = (pod_ctx.get("seccompProfile") or {}).get("type")
    unconfined = [
        c["name"]
        for c in containers
        if (ctx(c).get("seccompProfile") or {}).get("type", pod_seccomp) not in good
    ]
    if unconfined:
        out.append(
            f"seccompProfile (pod or {_names('container', unconfined)} must set "
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
        )
    return out


# ---- ValidatingAdmissionPolicy --------------------------------------------------------------


class AdmissionPolicies:
    """ValidatingAdmissionPolicies and their bindings, CEL evaluated by ``celpy``."""

    def __init__(self, docs: Iterable[Mapping[str, Any]]) -> None:
        docs = list(docs)
        self.policies = {
            d["metadata"]["name"]: d for d in docs if d.get("kind") == "ValidatingAdmissionPolicy"
        }
        self.bindings = [d for d in docs if d.get("kind") == "ValidatingAdmissionPolicyBinding"]
        self._programs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _program(self, expression: str) -> Any:
        with self._lock:
            prog = self._programs.get(expression)
            if prog is None:
                import celpy

                env = celpy.Environment()
                prog = env.program(env.compile(expression))
                self._programs[expression] = prog
            return prog

    def refusal(
        self, pod: Mapping[str, Any], namespace_labels: Mapping[str, str]
    ) -> tuple[int, dict[str, Any]] | None:
        """The refusal of the first binding whose policy denies creating ``pod``, or None."""
        import celpy

        name = pod["metadata"]["name"]
        for binding in self.bindings:
            spec = binding["spec"]
            if "Deny" not in (spec.get("validationActions") or []):
                continue
            ns_sel = (spec.get("matchResources") or {}).get("namespaceSelector") or {}
            if not _selects(ns_sel, namespace_labels):
                continue
            policy = self.policies.get(spec["policyName"])
            if policy is None or not _matches_pod_create(policy):
                continue
            activation: dict[str, Any] = {"object": celpy.json_to_cel(copy.deepcopy(dict(pod)))}
            variables: dict[Any, Any] = {}
            for var in policy["spec"].get("variables") or []:
                activation["variables"] = celpy.celtypes.MapType(variables)
                value = self._program(var["expression"]).evaluate(activation)
                variables[celpy.celtypes.StringType(var["name"])] = value
            activation["variables"] = celpy.celtypes.MapType(variables)
            for check in policy["spec"].get("validations") or []:
                result = self._program(check["expression"]).evaluate(activation)
                if result is True or (not isinstance(result, Exception) and bool(result)):
                    continue
                text = check.get("message") or f"failed expression: {check['expression']}"
                reason = check.get("reason") or "Invalid"
                code = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422}.get(reason, 422)
                message = (
                    f'pods "{name}" is forbidden: ValidatingAdmissionPolicy '
                    f"'{policy['metadata']['name']}' with binding "
                    f"'{binding['metadata']['name']}' denied request: {text}"
                )
                return code, status(code, reason, message, name=name, kind="pods")
        return None


def _matches_pod_create(policy: Mapping[str, Any]) -> bool:
    rules = ((policy["spec"].get("matchConstraints") or {}).get("resourceRules")) or []
    return any(
        "pods" in (r.get("resources") or [])
        and any(op in ("CREATE", "*") for op in r.get("operations") or [])
        for r in rules
    )


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise ValueError("fake API server: matchExpressions are not supported")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


# ---- ResourceQuota --------------------------------------------------------------------------


def pod_usage(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """What one pod counts against a quota (init containers as the scheduler counts them)."""
    spec = pod.get("spec") or {}
    usage: dict[str, Fraction] = {"pods": Fraction(1)}
    for kind in ("requests", "limits"):
        for res in _COMPUTE:

            def amount(c: Mapping[str, Any], kind: str = kind, res: str = res) -> Fraction:
                value = ((c.get("resources") or {}).get(kind) or {}).get(res)
                return quantity(value) if value is not None else Fraction(0)

            total = sum((amount(c) for c in spec.get("containers") or []), Fraction(0))
            init = max((amount(c) for c in spec.get("initContainers") or []), default=Fraction(0))
            usage[f"{kind}.{res}"] = max(total, init)
    for res in _COMPUTE:
        usage[res] = usage[f"requests.{res}"]
    return usage


def quota_refusal(
    kind: str,
    name: str,
    requested: Mapping[str, Fraction],
    used: Mapping[str, Fraction],
    quotas: Sequence[Mapping[str, Any]],
) -> tuple[int, dict[str, Any]] | None:
    """The 403 of the first quota ``requested`` would exceed, or None."""
    for quota in quotas:
        hard = {k: quantity(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
        over = sorted(
            r
            for r, limit in hard.items()
            if r in requested and used.get(r, Fraction(0)) + requested[r] > limit
        )
        if not over:
            continue

        def show(values: Mapping[str, Fraction], over: list[str] = over) -> str:
            return ",".join(f"{r}={format_quantity(r, values.get(r, Fraction(0)))}" for r in over)

        message = (
            f'{kind} "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, '
            f"requested: {show(requested)}, used: {show(used)}, limited: {show(hard)}"
        )
        return 403, status(403, "Forbidden", message, name=name, kind=kind)
    return None


# ---- the policy ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ApiPolicy:
    """The cluster objects the fake API server enforces (see the module docstring).

    Attributes:
        namespaces: namespace -> labels; None: every namespace exists, without labels.
        rbac: the requesting user's permissions; None: everything is allowed.
        quotas: ResourceQuota objects (each applies to its ``metadata.namespace``).
        admission: the ValidatingAdmissionPolicies and bindings.
        nodes: the Node objects ``GET /api/v1/nodes`` lists (default: ``NODE`` with 8 CPUs,
            32 GiB and no image).
        configmaps: namespace -> ConfigMap names (each namespace starts with
            ``kube-root-ca.crt``).
    """

    namespaces: dict[str, dict[str, str]] | None = None
    rbac: Rbac | None = None
    quotas: list[Mapping[str, Any]] = field(default_factory=list)
    admission: AdmissionPolicies = field(default_factory=lambda: AdmissionPolicies(()))
    nodes: list[dict[str, Any]] = field(default_factory=lambda: [node(NODE)])
    configmaps: dict[str, set[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_manifests(
        cls,
        docs: Iterable[Mapping[str, Any]],
        *,
        user: str | None = CONTROLLER_USER,
        nodes: Sequence[dict[str, Any]] = (),
    ) -> ApiPolicy:
        """The policy a cluster has after ``kubectl apply`` of ``docs`` (e.g. ``k8s/base``).

        Args:
            docs: the applied objects: Namespaces, Roles and bindings, ResourceQuotas,
                ValidatingAdmissionPolicies and bindings (other kinds are ignored).
            user: whose requests are authorized (None: RBAC is not enforced).
            nodes: the cluster's Node objects (default: ``NODE`` alone).
        """
        docs = [d for d in docs if d]
        namespaces: dict[str, dict[str, str]] = {"default": {}, "kube-system": {}}
        for d in docs:
            if d.get("kind") == "Namespace":
                namespaces[d["metadata"]["name"]] = dict(d["metadata"].get("labels") or {})
        return cls(
            namespaces=namespaces,
            rbac=Rbac.from_manifests(docs, user) if user else None,
            quotas=[d for d in docs if d.get("kind") == "ResourceQuota"],
            admission=AdmissionPolicies(docs),
            nodes=list(nodes) or [node(NODE)],
        )

    def exists(self, namespace: str) -> bool:
        """Whether ``namespace`` exists."""
        return self.namespaces is None or namespace in self.namespaces

    def labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels (with the ``kubernetes.io/metadata.name`` every one has)."""
        own = (self.namespaces or {}).get(namespace) or {}
        return {**own, "kubernetes.io/metadata.name": namespace}

    def authorize(
        self, verbs: Sequence[str], resource: str, namespace: str | None, name: str | None
    ) -> tuple[int, dict[str, Any]] | None:
        """RBAC's refusal, or None."""
        if self.rbac is None:
            return None
        return self.rbac.refusal(verbs, resource, namespace, name)

    def missing_namespace(self, namespace: str) -> tuple[int, dict[str, Any]] | None:
        """The 404 of a create into a namespace that does not exist, or None."""
        if self.exists(namespace):
            return None
        message = f'namespaces "{namespace}" not found'
        return 404, status(404, "NotFound", message, name=namespace, kind="namespaces")

    def admit_pod(
        self, namespace: str, pod: Mapping[str, Any], live: Sequence[Mapping[str, Any]]
    ) -> tuple[int, dict[str, Any]] | None:
        """Pod Security, admission policies and quota for a new pod; None: admitted.

        Args:
            namespace: where the pod is created.
            pod: the pod as posted.
            live: the namespace's pods that count against its quota (not yet ended).
        """
        name = pod["metadata"]["name"]
        labels = self.labels(namespace)
        level = labels.get("pod-security.kubernetes.io/enforce", "privileged")
        version = labels.get("pod-security.kubernetes.io/enforce-version", "latest")
        violations = pod_security_violations(pod, level)
        if violations:
            message = (
                f'pods "{name}" is forbidden: violates PodSecurity "{level}:{version}": '
                + ", ".join(violations)
            )
            return 403, status(403, "Forbidden", message, name=name, kind="pods")
        refused = self.admission.refusal(pod, labels)
        if refused is not None:
            return refused
        used: dict[str, Fraction] = {}
        for other in live:
            for key, value in pod_usage(other).items():
                used[key] = used.get(key, Fraction(0)) + value
        return quota_refusal("pods", name, pod_usage(pod), used, self._quotas(namespace))

    def create_configmap(self, namespace: str, body: Mapping[str, Any], *, dry_run: bool) -> Any:
        """Create (or dry-run) a ConfigMap: the refusal, or ``(201, object)``."""
        name = (body.get("metadata") or {}).get("name") or ""
        held = self.configmaps_in(namespace)
        if name in held:
            return 409, status(409, "AlreadyExists", f'configmaps "{name}" already exists')
        refused = quota_refusal(
            "configmaps",
            name,
            {"configmaps": Fraction(1)},
            {"configmaps": Fraction(len(held))},
            self._quotas(namespace),
        )
        if refused is not None:
            return refused
        if not dry_run:
            held.add(name)
        obj = copy.deepcopy(dict(body))
        obj.setdefault("metadata", {}).update(namespace=namespace, uid=str(uuid.uuid4()))
        return 201, obj

    def configmaps_in(self, namespace: str) -> set[str]:
        """The ConfigMap names of a namespace (``kube-root-ca.crt`` from the start)."""
        return self.configmaps.setdefault(namespace, {ROOT_CA_CONFIGMAP})

    def _quotas(self, namespace: str) -> list[Mapping[str, Any]]:
        return [q for q in self.quotas if (q.get("metadata") or {}).get("namespace") == namespace]


NODE_ALLOCATABLE = {"cpu": "32", "memory": "128Gi"}
"""The fake node's allocatable resources (room for several default-sized sandboxes); the
kubelet side schedules by them and the API side serves them on the Node object."""


def node(
    name: str,
    *,
    cpu: str = NODE_ALLOCATABLE["cpu"],
    memory: str = NODE_ALLOCATABLE["memory"],
    ephemeral_storage: str = "100Gi",
    images: Sequence[str] = (),
    schedulable: bool = True,
) -> dict[str, Any]:
    """A Node object with its allocatable resources and the images it holds."""
    alloc = {"cpu": cpu, "memory": memory, "ephemeral-storage": ephemeral_storage, "pods": "110"}
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {} if schedulable else {"unschedulable": True},
        "status": {
            "allocatable": alloc,
            "capacity": dict(alloc),
            "images": [{"names": [image], "sizeBytes": 100 * 1024**2} for image in images],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


__all__ = [
    "CONTROLLER_USER",
    "NODE",
    "NODE_ALLOCATABLE",
    "ROOT_CA_CONFIGMAP",
    "AdmissionPolicies",
    "ApiPolicy",
    "Rbac",
    "format_quantity",
    "node",
    "pod_security_violations",
    "pod_usage",
    "quota_refusal",
    "status",
]
