"""The ``docker`` sandbox backend: each attempt in its own container, the official baseline's way.

The official baseline runs every attempt in ``docker run`` of its workbench image with 4
CPUs, 16 GiB of memory, 256 pids, a 2 GiB ``/tmp``, no network and a read-only
workspace; this backend does the same with Debian's ``docker.io`` daemon and the runtime
image ``scripts/dev.sh`` builds from ``images/Dockerfile.workbench`` on the Debian 12
root every backend shares (``rootfs.py``), so the agent sees the same files as in a local
sandbox or a pod. The limits come from ``dataspace.limits.Limits``; a host with fewer
CPUs than asked gets a CFS quota of all of its own (``docker run`` refuses more).

Native harnesses reach their relay through a Unix socket bound in (``relay_transport``
``socket``) and run the CLI installed on this host, bound read-only under ``/opt``, as in
the local backend. The controller talks to the daemon only (its client, ``docker``):
a user who may use the daemon's socket needs no root, and nothing assumes the daemon's
machine is this one, but for the folders bound in (the workspace, the relay's, a
harness's), which the daemon must see at the same paths.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from dataspace.checks import Check, timed
from dataspace.errors import ConfigError, SandboxError
from dataspace.limits import format_size
from dataspace.sandbox import workbench
from dataspace.sandbox.base import (
    PreflightRequest,
    RelayTransport,
    RuntimeChange,
    SandboxBackend,
    SandboxSpec,
)
from dataspace.sandbox.docker import _daemon
from dataspace.sandbox.docker.sandbox import (
    CONTROLLER_LABEL,
    HOST_LABEL,
    LABEL,
    LABEL_PREFIX,
    DockerSandbox,
)

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "dataspace-workbench:1.0"
"""The runtime image ``scripts/dev.sh`` builds (the official baseline's image name)."""
SANDBOX_UID = 65534
_BUILD_HINT = "build it with 'scripts/dev.sh shell true' as root, or load it into the daemon"


def _image_id(docker: str, image: str) -> str:
    try:
        return _daemon.call(docker, "image", "inspect", "--format", "{{.Id}}", image).strip()
    except SandboxError as exc:
        raise SandboxError(f"docker sandbox backend: image {image!r} not found ({exc}); "
                           f"{_BUILD_HINT}") from None  # fmt: skip


class DockerBackend(SandboxBackend):
    """Creates containers with Debian's Docker daemon (see the module docstring).

    Args:
        image: the runtime image (default :data:`DEFAULT_IMAGE`); a spec's
            ``sandbox.image`` wins.
        docker: the ``docker`` client to call (a name on PATH or a path).
        uid: the uid and gid commands run as inside the container.
        sweep: remove now the containers of controllers that are gone.

    Raises:
        SandboxError: no client, or no daemon this user may reach.
        ConfigError: a bad option.
    """

    name: ClassVar[str] = "docker"
    relay_transport: RelayTransport = "socket"
    harnesses_from_host: bool = True
    default_image: ClassVar[str | None] = DEFAULT_IMAGE

    def __init__(
        self,
        *,
        image: str = DEFAULT_IMAGE,
        docker: str = "docker",
        uid: int = SANDBOX_UID,
        sweep: bool = True,
    ) -> None:
        if not isinstance(image, str) or not image:
            raise ConfigError("sandbox.options.image: a docker image reference, e.g. "
                              f"{DEFAULT_IMAGE!r}")  # fmt: skip
        if not isinstance(uid, int) or uid <= 0:
            raise ConfigError(f"sandbox.options.uid: a positive uid, not {uid!r}")
        self.image = image
        self.uid = uid
        self.docker = _daemon.client(docker)
        facts = _daemon.daemon_facts(self.docker)
        self.server = str(facts["version"])
        self.daemon_cpus = int(facts["cpus"]) or os.cpu_count() or 1
        self.daemon_memory = int(facts["memory_bytes"])
        self.controller = _daemon.controller_identity()
        self._runtimes: dict[str, dict[str, Any]] = {}
        self._runtimes_lock = threading.Lock()
        if sweep:
            self.sweep()

    def cpus_for(self, cpus: float) -> float:
        """The CPUs a container gets: as asked, at most the daemon's machine's own."""
        return min(float(cpus), float(self.daemon_cpus))

    def runtime_of(self, image_id: str, container: str) -> dict[str, Any]:
        """The runtime identity of an image, read from its manifest in ``container`` once.

        The container's root is the image's, read-only: every container of an image shows
        the same manifest.

        Raises:
            SandboxError: the manifest cannot be read or is not one.
        """
        with self._runtimes_lock:
            if image_id in self._runtimes:
                return dict(self._runtimes[image_id])
        done = _daemon.exec_bytes(self.docker, "--user", f"{self.uid}:{self.uid}", container,
                                  "cat", workbench.MANIFEST_PATH, timeout=60)  # fmt: skip
        if done.returncode != 0:
            raise SandboxError(
                f"docker sandbox backend: image {image_id[:19]} has no readable runtime "
                f"manifest at {workbench.MANIFEST_PATH} "
                f"({done.stderr.decode(errors='replace').strip()}); {_BUILD_HINT}"
            )
        try:
            identity = workbench.manifest_identity(workbench.parse_manifest(done.stdout))
        except ValueError as exc:
            raise SandboxError(f"docker sandbox backend: image {image_id[:19]}: {exc}") from None
        with self._runtimes_lock:
            self._runtimes[image_id] = identity
        return dict(identity)

    def enforced_by(self) -> dict[str, str]:
        """How each limit is enforced by this backend."""
        return {
            "memory_bytes": "docker --memory (cgroup memory limit, OOM kill), no swap",
            "pids": "docker --pids-limit (cgroup pids limit)",
            "cpus": f"docker --cpus (cfs quota, at most the daemon's {self.daemon_cpus})",
            "wall_seconds": "controller timer kills every process of the sandbox user",
            "command_timeout": "in-container wrapper kills what the command started",
            "output_bytes": "tmpfs size and collect budget",
            "tmp_bytes": "tmpfs size",
        }

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        """Start one container with ``spec.workspace`` bound read-only at /workspace."""
        return DockerSandbox(self, spec)

    def sweep(self, labels: dict[str, str] | None = None) -> int:
        """Remove the containers of controllers that are gone; return how many.

        With ``labels``, only containers whose labels include all of them.
        """
        listed = _daemon.call(
            self.docker, "ps", "--all", "--no-trunc", "--filter", f"label={LABEL}",
            "--format", "{{.ID}}\t{{json .Labels}}",
        )  # fmt: skip
        removed = 0
        for line in listed.splitlines():
            container, _, text = line.partition("\t")
            found = dict(
                part.split("=", 1) for part in json.loads(text or '""').split(",") if "=" in part
            )
            if any(found.get(LABEL_PREFIX + k) != v for k, v in (labels or {}).items()):
                continue
            if _daemon.controller_alive(found.get(CONTROLLER_LABEL, ""), found.get(HOST_LABEL)):
                continue
            logger.info("sweep: removing container %s of a dead controller", container[:12])
            try:
                _daemon.call(self.docker, "rm", "--force", "--volumes", container)
                removed += 1
            except SandboxError as exc:
                logger.warning("sweep: %s", exc)
        return removed

    # -- what the layers above ask ---------------------------------------------------

    def preflight(self, request: PreflightRequest) -> list[Check]:
        """The daemon and the image (``sandbox``) and the limits (``sandbox.resources``)."""
        image = request.image or self.image

        def ready() -> str:
            _image_id(self.docker, image)
            return f"docker backend: daemon {self.server}, image {image} present"

        def resources() -> str | tuple[str, bool]:
            limits = request.limits
            total = self.daemon_memory
            if total and limits.memory_bytes > total:
                raise ConfigError(
                    f"sandbox.memory: {format_size(limits.memory_bytes)} is more than the "
                    f"Docker daemon's machine has ({format_size(total)}); set sandbox.memory "
                    f"to at most {total // 1024**3}g"
                )
            cpus = self.cpus_for(limits.cpus)
            if cpus < limits.cpus:
                return (f"sandbox.cpus {limits.cpus:g} asked, the Docker daemon's machine has "
                        f"{cpus:g}: each container gets {cpus:g}", True)  # fmt: skip
            return f"{limits.cpus:g} CPUs, {format_size(limits.memory_bytes)} per container"

        return [timed("sandbox", ready), timed("sandbox.resources", resources)]

    @classmethod
    def host_checks(cls, options: Mapping[str, Any]) -> list[Check]:
        """The client, the daemon and the image (``dataspace doctor``)."""
        docker = str(options.get("docker") or "docker")
        image = str(options.get("image") or DEFAULT_IMAGE)

        def daemon() -> str:
            facts = _daemon.daemon_facts(_daemon.client(docker))
            return (
                f"Docker daemon {facts['version']} ({facts['os']}, {facts['cpus']} CPUs, "
                f"{format_size(int(facts['memory_bytes']))})"
            )

        def present() -> str:
            return f"{image} ({_image_id(_daemon.client(docker), image)[:19]})"

        return [timed("docker.daemon", daemon), timed("docker.image", present)]

    @classmethod
    def runtime_identity(cls, options: Mapping[str, Any], image: str | None) -> dict[str, Any]:
        """The image reference and its id (a rebuilt image is another runtime).

        Raises:
            SandboxError: no client or daemon, or the image is missing.
        """
        ref = image or options.get("image") or DEFAULT_IMAGE
        docker = _daemon.client(str(options.get("docker") or "docker"))
        return {"backend": cls.name, "image": ref, "image_id": _image_id(docker, str(ref))}

    @classmethod
    def runtime_change(cls, options: Mapping[str, Any], run_id: str) -> RuntimeChange:
        """The refusal's words: the image was rebuilt or another one named."""
        return RuntimeChange(
            what=f"the docker image is not the one run {run_id!r} was made with (rebuilt?)",
            fix="restore the recorded image, or give the run a new run_id",
        )


__all__ = ["DEFAULT_IMAGE", "DockerBackend"]
