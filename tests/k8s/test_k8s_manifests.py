"""Every manifest of k8s/ and every pod the backend generates validates strictly.

Kubernetes version: 1.32 (the schemas ``kubernetes-validate`` ships, offline). KubeRay
objects are checked against ``ray_crd_schemas`` and their pod templates strictly against
the core ``PodTemplateSpec``. Overlays are rendered with ``kubectl kustomize`` when kubectl
is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="strict manifest validation needs kubernetes-validate"
)

from ray_crd_schemas import SCHEMAS, pod_templates  # noqa: E402

from dataspace.runs.spec import parse_spec  # noqa: E402
from dataspace.sandbox.base import Limits  # noqa: E402
from dataspace.sandbox.kubernetes import KubernetesOptions  # noqa: E402
from dataspace.sandbox.kubernetes._exec import helper_argv  # noqa: E402
from dataspace.sandbox.kubernetes._pod import (  # noqa: E402
    PodTemplate,
    StreamedWorkspace,
    VolumeWorkspace,
    pod_manifest,
)
from dataspace.sandbox.kubernetes._staging import CLAIM_LABEL, claim_volume  # noqa: E402
from dataspace.testing.fake_k8s.policy import ApiPolicy, pod_security_violations  # noqa: E402

K8S_VERSION = "1.32.0"
K8S = Path(__file__).resolve().parents[2] / "k8s"
OVERLAYS = ["small", "large"]
SANDBOX_UID = 65532  # the runtime image's sandbox user (images/Dockerfile.runtime)


def validate(doc: dict[str, Any], where: str) -> None:
    """Validate one object strictly; raise with the file and object named."""
    import jsonschema

    name = f"{where}: {doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"
    try:
        if doc["apiVersion"].startswith("ray.io/"):
            jsonschema.Draft202012Validator(SCHEMAS[doc["kind"]]).validate(doc)
            for _, template in pod_templates(doc):
                wrapped = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": "t", "namespace": "x"},
                    "template": template,
                }
                kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as exc:
        path = "/".join(str(p) for p in exc.absolute_path)
        raise AssertionError(f"{name} is invalid at {path or '<root>'}: {exc.message}") from None


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(K8S / overlay)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def manifest_files() -> list[Path]:
    """Every file holding whole objects: the base, the jobs, overlay resources."""
    files = [
        *(K8S / "base").glob("*.yaml"),
        *(K8S / "jobs").glob("*.yaml"),
        K8S / "overlays" / "small" / "minio.yaml",
        K8S / "overlays" / "small" / "store-credentials.yaml",
        K8S / "secrets.example.yaml",
    ]
    return sorted(p for p in files if p.name != "kustomization.yaml")


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_manifest_file_validates_strictly(path: Path) -> None:
    docs = load_docs(path)
    assert docs, f"{path} holds no object"
    for doc in docs:
        validate(doc, path.name)


@pytest.mark.parametrize("overlay", ["base", *[f"overlays/{o}" for o in OVERLAYS]])
def test_every_rendered_overlay_validates_strictly(overlay: str) -> None:
    docs = render(overlay)
    kinds = {d["kind"] for d in docs}
    assert {
        "Namespace",
        "Role",
        "RoleBinding",
        "NetworkPolicy",
        "ResourceQuota",
        "LimitRange",
        "RayCluster",
        "ValidatingAdmissionPolicy",
        "DaemonSet",
    } <= kinds
    for doc in docs:
        validate(doc, overlay)


def _restricted_problems(pod: dict[str, Any]) -> list[str]:
    """What in a pod spec breaks the restricted Pod Security Standard (its checks that apply)."""
    problems = []
    pod_sc = pod.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            problems.append(flag)
    for v in pod.get("volumes") or []:
        if not ({"configMap", "secret", "emptyDir", "projected", "downwardAPI",
                 "persistentVolumeClaim", "ephemeral", "csi"} & set(v)):  # fmt: skip
            problems.append(f"volume {v['name']}")
    for c in [*pod.get("initContainers", []), *pod["containers"]]:
        sc = c.get("securityContext") or {}
        where = f"container {c['name']}"
        if sc.get("privileged"):
            problems.append(f"{where}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation")
        caps = sc.get("capabilities") or {}
        if "ALL" not in caps.get("drop", []) or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{where}: capabilities")
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")):
            problems.append(f"{where}: runAsNonRoot")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            problems.append(f"{where}: runAsUser 0")
        seccomp = sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{where}: seccompProfile")
        if any(port.get("hostPort") for port in c.get("ports", [])):
            problems.append(f"{where}: hostPort")
    return problems


@pytest.mark.parametrize("overlay", ["base", *[f"overlays/{o}" for o in OVERLAYS]])
def test_the_prepull_daemonset_holds_the_runs_sandbox_image_on_every_node(overlay: str) -> None:
    """Guards the image pre-pull: the run's own image, every node, restricted, tiny, no token."""
    docs = render(overlay)
    (ds,) = [
        d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "runtime-prepull"
    ]
    config = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "dataspace-run"
    )
    image = yaml.safe_load(config["data"]["spec.yaml"])["sandbox"]["image"]
    pod = ds["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == [image]
    assert pod["initContainers"][0]["command"] == ["true"]
    # the sandbox namespace admits only run-once pods with a deadline; a DaemonSet's pods
    # restart forever, so it lives with the controllers
    assert ds["metadata"]["namespace"] == "dataspace"
    assert not {"nodeSelector", "affinity", "tolerations"} & set(pod)  # every schedulable node
    assert pod["automountServiceAccountToken"] is False
    assert _restricted_problems(pod) == []
    for c in [*pod["initContainers"], *pod["containers"]]:
        assert c["resources"]["requests"] == c["resources"]["limits"], c["name"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, c["name"]


def test_the_restricted_check_names_what_breaks_the_standard() -> None:
    """Guards the pre-pull test's own check: a root, privileged pod is caught."""
    pod = load_docs(K8S / "base" / "prepull-daemonset.yaml")[0]["spec"]["template"]["spec"]
    pod["securityContext"]["runAsNonRoot"] = False
    pod["containers"][0]["securityContext"]["capabilities"] = {"add": ["SYS_ADMIN"], "drop": []}
    pod["volumes"] = [{"name": "host", "hostPath": {"path": "/"}}]
    problems = _restricted_problems(pod)
    assert "volume host" in problems
    assert "container hold: capabilities" in problems
    assert "container pull-runtime: runAsNonRoot" in problems


def test_a_strict_schema_catches_a_typo() -> None:
    """Guards the validator itself: an unknown field must fail, not pass silently."""
    doc = load_docs(K8S / "base" / "limitrange.yaml")[0]
    doc["spec"]["limits"][0]["maxx"] = {"cpu": "1"}
    with pytest.raises(AssertionError, match="maxx"):
        validate(doc, "typo")
    ray = load_docs(K8S / "jobs" / "run.yaml")[0]
    ray["spec"]["entrypint"] = "x"
    with pytest.raises(AssertionError, match="entrypint"):
        validate(ray, "typo")


def _options_of(docs: list[dict[str, Any]]) -> tuple[Any, KubernetesOptions]:
    config = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "dataspace-run"
    )
    spec = parse_spec(yaml.safe_load(config["data"]["spec.yaml"]), source="dataspace-run")
    return spec, KubernetesOptions.from_options(dict(spec.sandbox.options))


@pytest.mark.parametrize("overlay", ["base", *[f"overlays/{o}" for o in OVERLAYS]])
def test_the_run_spec_of_each_deployment_is_valid_and_its_pods_validate(overlay: str) -> None:
    """Guards the agreement of manifests and code: the deployed spec builds valid pods."""
    spec, options = _options_of(render(overlay))
    assert spec.sandbox.backend == "kubernetes"
    limits = Limits(
        cpus=spec.limits.cpus,
        memory_bytes=spec.limits.memory_bytes,
        pids=spec.limits.pids,
        wall_seconds=spec.limits.wall_seconds + 60,
        output_bytes=spec.limits.output_bytes,
        tmp_bytes=spec.limits.tmp_bytes,
    )
    template = PodTemplate.from_options(options, helper_argv=helper_argv(), uid=SANDBOX_UID)
    docs = render(overlay)
    claims = [
        d
        for d in docs
        if d["kind"] == "PersistentVolumeClaim"
        and d["metadata"]["namespace"] == options.namespace
        and (d["metadata"].get("labels") or {}).get(CLAIM_LABEL) == "true"
    ]
    volume: Any = options.workspace_volume
    if volume == "auto" and claims:  # what the backend finds in the cluster
        volume = claim_volume(claims[0]["metadata"]["name"])
    if volume in (None, "auto", "stream"):
        workspace: Any = StreamedWorkspace(size_bytes=74 * 1024**2)
    else:
        workspace = VolumeWorkspace(
            volume=volume if isinstance(volume, dict) else claim_volume(volume),
            sub_path="ws/abc",
            node="node-1" if options.pin_to_node else None,
        )
    pod = pod_manifest(
        template=template,
        name="ds-x-task-1-a1-abc",
        sandbox_id="abc",
        labels={"run": spec.run_id, "task": "task_1"},
        limits=limits,
        workspace=workspace,
        image=spec.sandbox.image,
    )
    validate(pod, f"{overlay} sandbox pod")
    main = pod["spec"]["containers"][0]["resources"]
    assert main["requests"] == main["limits"]
    # the namespace's Pod Security level and the admission policy admit it
    policy = ApiPolicy.from_manifests(docs, user=None)
    level = policy.labels(options.namespace)["pod-security.kubernetes.io/enforce"]
    assert level == "restricted" and pod_security_violations(pod, level) == []
    assert policy.admission.refusal(pod, policy.labels(options.namespace)) is None


def test_the_large_overlays_workspace_claim_is_bound_to_the_nfs_export_read_only() -> None:
    """Guards the default staging of the large overlay: the claim, its volume, the quota."""
    docs = render("overlays/large")
    claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim"
                 and d["metadata"]["namespace"] == "dataspace-sandboxes")  # fmt: skip
    volume = next(d for d in docs if d["kind"] == "PersistentVolume")
    assert claim["metadata"]["labels"][CLAIM_LABEL] == "true"
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert volume["spec"]["claimRef"] == {
        "namespace": "dataspace-sandboxes",
        "name": claim["metadata"]["name"],
    }
    assert claim["spec"]["accessModes"] == volume["spec"]["accessModes"] == ["ReadOnlyMany"]
    ray = next(d for d in docs if d["kind"] == "RayCluster")
    head = ray["spec"]["headGroupSpec"]["template"]["spec"]
    data = next(v for v in head["volumes"] if v["name"] == "data")
    mount = next(m for m in head["containers"][0]["volumeMounts"] if m["name"] == "data")
    assert {k: v for k, v in volume["spec"]["nfs"].items() if k != "readOnly"} == data["nfs"]
    assert claim["metadata"]["annotations"]["dataspace.io/controller-path"] == mount["mountPath"]
    quota = next(d for d in docs if d["kind"] == "ResourceQuota")
    assert quota["spec"]["hard"]["persistentvolumeclaims"] == "1"


LIMITS = Limits(
    cpus=4,
    memory_bytes=16 * 1024**3,
    pids=256,
    wall_seconds=1860,
    output_bytes=4 * 1024**3,
    tmp_bytes=2 * 1024**3,
)
FULL_TEMPLATE = PodTemplate.from_options(
    KubernetesOptions(
        namespace="dataspace-sandboxes",
        image="ghcr.io/dataspace-bench/runtime:1.0.0",
        tmp_medium="Memory",
        node_selector={"pool": "sandboxes"},
        tolerations=[{"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"}],
        runtime_class="gvisor",
        priority_class="dataspace-sandbox",
        image_pull_secrets=["regcred"],
    ),
    helper_argv=helper_argv(),
    uid=200123,
    extra_annotations={"dataspace.io/controller": "worker-1"},
)


@pytest.mark.parametrize("mode", ["stream", "pvc", "hostpath"])
def test_generated_sandbox_pods_validate_and_are_locked_down(mode: str) -> None:
    workspace: StreamedWorkspace | VolumeWorkspace
    if mode == "stream":
        workspace = StreamedWorkspace(size_bytes=31 * 1024**2)
    elif mode == "pvc":
        workspace = VolumeWorkspace(
            volume={"persistentVolumeClaim": {"claimName": "ws", "readOnly": True}},
            sub_path="ws/0123",
        )
    else:
        workspace = VolumeWorkspace(
            volume={"hostPath": {"path": "/var/lib/dataspace/cache", "type": "Directory"}},
            sub_path="ws/0123",
            node="node-7",
        )
    labels = {"run": "bench@v1+x", "agent": "gpt-5.6", "task": "task_410", "attempt": "3"}
    pod = pod_manifest(
        template=FULL_TEMPLATE,
        name="ds-bench-v1-x-task-410-a3-abcdef",
        sandbox_id="abcdef",
        labels=labels,
        limits=LIMITS,
        workspace=workspace,
    )
    validate(pod, f"generated {mode} pod")
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    assert spec["activeDeadlineSeconds"] >= LIMITS.wall_seconds
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in [*spec["containers"], *spec.get("initContainers", [])]:
        sc = container["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] == container["resources"]["limits"]
        assert container["resources"]["limits"]["cpu"] == "4"
        assert container["resources"]["limits"]["memory"] == "16Gi"
        assert "env" not in container or all("valueFrom" not in e for e in container["env"])
        assert "envFrom" not in container
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/workspace"]["readOnly"] is True
    assert set(mounts) == {"/workspace", "/output", "/tmp"}
    meta = pod["metadata"]["labels"]
    assert meta["dataspace.io/task"] == "task_410" and meta["dataspace.io/attempt"] == "3"
    assert meta["dataspace.io/run"].startswith("bench-v1-x-")
    if mode == "hostpath":
        assert spec["nodeSelector"]["kubernetes.io/hostname"] == "node-7"


def test_rbac_grants_exactly_what_the_controller_calls() -> None:
    role = next(d for d in load_docs(K8S / "base" / "rbac.yaml") if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "dataspace-sandboxes"
    grants = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    needed = {("pods", v) for v in ("create", "get", "list", "watch", "delete")} | {
        ("pods/exec", "create"),
        ("pods/exec", "get"),
        ("events", "list"),
    }
    assert needed <= grants
    assert not any(
        r.startswith("secrets") or v in ("*", "patch", "update", "escalate", "bind")
        for r, v in grants
    )


def test_sandboxes_get_no_egress_and_no_secrets() -> None:
    policies = load_docs(K8S / "base" / "networkpolicies.yaml")
    deny = next(p for p in policies if p["metadata"]["namespace"] == "dataspace-sandboxes")
    assert deny["spec"]["podSelector"] == {}
    assert set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "egress" not in deny["spec"] and "ingress" not in deny["spec"]
    for doc in load_docs(K8S / "secrets.example.yaml"):
        assert doc["metadata"]["namespace"] == "dataspace"
    for overlay in ["base", *[f"overlays/{o}" for o in OVERLAYS]]:
        docs = render(overlay)
        assert not [
            d
            for d in docs
            if d["kind"] == "Secret" and d["metadata"]["namespace"] == "dataspace-sandboxes"
        ]
        secret_users = [d for d in docs if "secretRef" in str(d) or "secretKeyRef" in str(d)]
        assert {d["kind"] for d in secret_users} <= {"RayCluster", "Deployment", "Job"}
        assert all(d["metadata"]["namespace"] == "dataspace" for d in secret_users)
    quota = load_docs(K8S / "base" / "resourcequota.yaml")[0]
    assert quota["spec"]["hard"]["secrets"] == "0"


def test_jobs_run_the_entrypoints_on_the_deployed_cluster() -> None:
    cluster = load_docs(K8S / "base" / "raycluster.yaml")[0]
    for name in ("build", "run", "report"):
        job = load_docs(K8S / "jobs" / f"{name}.yaml")[0]
        assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
        assert job["spec"]["entrypoint"].startswith(f"python -m ray_jobs.{name}")
        assert job["metadata"]["namespace"] == cluster["metadata"]["namespace"]


def test_the_kind_cluster_config_parses() -> None:
    config = yaml.safe_load((K8S / "kind" / "cluster.yaml").read_text())
    assert config["kind"] == "Cluster" and config["nodes"]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_pods_use_runtime_default_seccomp_or_the_documented_profile_and_own_users() -> None:
    import dataclasses

    workspace = StreamedWorkspace(size_bytes=1024**2)

    def pod_of(template: PodTemplate) -> dict:
        pod = pod_manifest(
            template=template, name="ds-x-a1-abcdef", sandbox_id="abcdef",
            labels={"run": "r"}, limits=LIMITS, workspace=workspace,
        )  # fmt: skip
        validate(pod, "generated pod")
        return pod

    default = pod_of(FULL_TEMPLATE)["spec"]
    assert "hostUsers" not in default  # clusters without user namespaces get no field
    assert default["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert all(
        c["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in [*default["containers"], *default["initContainers"]]
    )
    hardened = pod_of(
        dataclasses.replace(
            FULL_TEMPLATE, host_users=False, seccomp_profile="dataspace-sandbox.json"
        )
    )["spec"]
    assert hardened["hostUsers"] is False
    local = {"type": "Localhost", "localhostProfile": "dataspace-sandbox.json"}
    assert hardened["securityContext"]["seccompProfile"] == local
    assert hardened["containers"][0]["securityContext"]["seccompProfile"] == local


def test_the_documented_seccomp_profile_is_the_local_sandboxs_deny_list() -> None:
    import json

    from dataspace.sandbox.local import _seccomp

    shipped = json.loads((K8S / "seccomp" / "dataspace-sandbox.json").read_text())
    assert shipped == _seccomp.oci_profile()
    denied = next(r for r in shipped["syscalls"] if r.get("errnoRet") == 1 and "args" not in r)
    assert {"add_key", "keyctl", "request_key", "bpf", "ptrace", "mount"} <= set(denied["names"])
    unshare = [r for r in shipped["syscalls"] if r["names"] == ["unshare"]]
    assert any(r["args"][0]["value"] == _seccomp.CLONE_NEWUSER for r in unshare)
    readme = (K8S / "README.md").read_text()
    assert "seccomp/dataspace-sandbox.json" in readme and "host_users" in readme


def test_the_quota_leaves_room_for_the_configmaps_every_namespace_gets() -> None:
    """Guards ``configmaps: "1"``, full on a fresh namespace (``kube-root-ca.crt``; and
    distributions add their own): base and both overlays leave a few."""
    for path in (
        K8S / "base" / "resourcequota.yaml",
        K8S / "overlays" / "small" / "quota.yaml",
        K8S / "overlays" / "large" / "quota.yaml",
    ):
        (quota,) = load_docs(path)
        assert int(quota["spec"]["hard"]["configmaps"]) >= 4, path


def test_the_readme_applies_the_namespaces_before_a_server_side_dry_run() -> None:
    """Guards the deploy steps: a server-side dry run creates no namespace, so on a fresh
    cluster every namespaced object fails unless the namespaces exist first."""
    readme = (K8S / "README.md").read_text()
    commands = [ln.split("#")[0].strip() for ln in readme.splitlines() if "kubectl apply" in ln]
    first = commands.index("kubectl apply -f k8s/base/namespaces.yaml")
    dry = next(i for i, c in enumerate(commands) if "--dry-run=server" in c)
    kustomize = next(i for i, c in enumerate(commands) if c.startswith("kubectl apply -k"))
    assert first < dry and first < kustomize
    assert {d["kind"] for d in load_docs(K8S / "base" / "namespaces.yaml")} == {"Namespace"}


def test_preflight_reads_only_what_it_needs() -> None:
    """The node reader grants reading nodes and nothing else; the Role reads the sandbox
    namespace and its claims (preflight) but no Secret."""
    docs = load_docs(K8S / "base" / "rbac.yaml")
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}
    ]
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dataspace-controller", "namespace": "dataspace"}
    ]
    role = next(d for d in docs if d["kind"] == "Role")
    grants = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert {
        ("namespaces", "get"),
        ("persistentvolumeclaims", "get"),
        ("persistentvolumeclaims", "list"),  # the workspace claim, found by its label
    } <= grants
