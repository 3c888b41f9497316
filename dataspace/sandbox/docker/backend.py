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
the local backend. The controller runs as root beside the daemon: it reads a container's
output folder and processes through ``/proc``.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any, ClassVar

from dataspace.checks import Check, timed
from dataspace.errors import ConfigError, SandboxError
from dataspace.limits import format_size
from dataspace.sandbox import _procfs
from dataspace.sandbox.base import (
    PreflightRequest,
    RelayTransport,
    RuntimeChange,
    SandboxBackend,
    SandboxSpec,
)
from dataspace.sandbox.docker import _daemon
from dataspace.sandbox.docker.sandbox import CONTROLLER_LABEL, LABEL, LABEL_PREFIX, DockerSandbox

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "dataspace-workbench:1.0"
"""The runtime image ``scripts/dev.sh`` builds (the official baseline's image name)."""
SANDBOX_UID = 65534
_BUILD_HINT = "build it with 'scripts/dev.sh shell true' as root"


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
        SandboxError: no client, no daemon, or the controller is not root.
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
        if os.geteuid() != 0:
            raise SandboxError(
                "docker sandbox backend: the controller reads each container's output "
                "folder through /proc and must run as root beside the daemon; run it as root"
            )
        self.image = image
        self.uid = uid
        self.docker = _daemon.client(docker)
        self.server = self._server_version()
        pid = os.getpid()
        self.controller = f"{pid}:{_procfs.start_time(pid)}"
        if sweep:
            self.sweep()

    def _server_version(self) -> str:
        try:
            return _daemon.call(self.docker, "version", "--format", "{{.Server.Version}}",
                                timeout=30).strip()  # fmt: skip
        except SandboxError as exc:
            raise SandboxError(
                f"docker sandbox backend: no Docker daemon answers ({exc}); start Debian's "
                "dockerd (scripts/dev.sh does, as root)"
            ) from None

    def cpus_for(self, cpus: float) -> float:
        """The CPUs a container gets: as asked, at most this host's own."""
        return min(float(cpus), float(os.cpu_count() or 1))

    def enforced_by(self) -> dict[str, str]:
        """How each limit is enforced by this backend."""
        return {
            "memory_bytes": "docker --memory (cgroup memory limit, OOM kill), no swap",
            "pids": "docker --pids-limit (cgroup pids limit)",
            "cpus": f"docker --cpus (cfs quota, at most this host's {os.cpu_count()})",
            "wall_seconds": "controller timer stops every command at the deadline",
            "command_timeout": "controller kills what the command started",
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
            pid, _, started = found.get(CONTROLLER_LABEL, "").partition(":")
            if pid.isdigit() and started.isdigit() and _procfs.alive(int(pid), int(started)):
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
            total = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
            if total and limits.memory_bytes > total:
                raise ConfigError(
                    f"sandbox.memory: {format_size(limits.memory_bytes)} is more than this "
                    f"machine's memory ({format_size(total)}); set sandbox.memory to at most "
                    f"{total // 1024**3}g"
                )
            cpus = self.cpus_for(limits.cpus)
            if cpus < limits.cpus:
                return (f"sandbox.cpus {limits.cpus:g} asked, this host has {cpus:g}: each "
                        f"container gets {cpus:g}", True)  # fmt: skip
            return f"{limits.cpus:g} CPUs, {format_size(limits.memory_bytes)} per container"

        return [timed("sandbox", ready), timed("sandbox.resources", resources)]

    @classmethod
    def host_checks(cls, options: Mapping[str, Any]) -> list[Check]:
        """The client, the daemon and the image (``dataspace doctor``)."""
        docker = str(options.get("docker") or "docker")
        image = str(options.get("image") or DEFAULT_IMAGE)

        def daemon() -> str:
            version = _daemon.call(_daemon.client(docker), "version", "--format",
                                   "{{.Server.Version}}", timeout=30).strip()  # fmt: skip
            return f"Docker daemon {version}"

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
