"""The fake kubelet's container runtime: container processes, their views and limits.

Containers run their real commands on this host. With the ``chroot`` runtime (root,
``unshare`` and ``setpriv``) each container's first process gets its own mount, network
and PID namespace with a private root made of read-only bind mounts of the host's system
folders plus the pod's volumes (read-only where the spec says so), runs as the pod's user
without capabilities, in a memory cgroup of its limit where the host delegates one; exec
joins those namespaces. With the ``host`` runtime processes run directly on the host with
``DS_SANDBOX_ROOT`` pointing at a folder of links standing for the pod's mounts (enough
for the helper, not for commands that name absolute paths).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataspace.testing.fake_k8s.network import PodNetwork, wire_network
from dataspace.testing.fake_k8s.store import Pod

logger = logging.getLogger(__name__)

KUBELET_ENV = {
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}
"""What the kubelet adds to every container's environment: the API server's service,
even with ``enableServiceLinks: false``."""


class ContainerRuntime:
    """Starts and kills the containers of pods, in the views their specs describe.

    Args:
        runtime: ``chroot`` or ``host`` (see :func:`pick_runtime`).
        claims: PersistentVolumeClaim name -> host folder (shared with the API server,
            which may be given more while it serves).
        image_binds: host folders every container also sees, read-only, at the same path.
        image_folders: container path -> host folder, read-only in every container.
        network: the cluster network, or None: pods have no network at all.
        alive: whether a pod still exists and has not ended (the pod network's forwarders
            stop with it).
    """

    def __init__(
        self,
        runtime: str,
        *,
        claims: dict[str, Path],
        image_binds: tuple[str, ...],
        image_folders: dict[str, Path],
        network: PodNetwork | None,
        alive: Callable[[Pod], bool],
    ) -> None:
        self.runtime = runtime
        self.claims = claims
        self.image_binds = image_binds
        self.image_folders = image_folders
        self.network = network
        self.alive = alive
        self._cgroup_v2, self._cgroup_base = _memory_cgroup_base(runtime)

    @property
    def memory_cgroups(self) -> bool:
        """Whether containers get memory cgroups of their limits (the kernel OOM-kills)."""
        return self._cgroup_base is not None

    def close(self) -> None:
        """Remove the runtime's memory cgroups (their processes are gone by now)."""
        if self._cgroup_base is not None:
            _remove_cgroup_tree(self._cgroup_base)

    def mounts(self, pod: Pod, container: dict[str, Any]) -> list[tuple[str, Path, bool]]:
        """(mount path, host folder, read-only) for each volume mount of a container."""
        volumes = {v["name"]: v for v in pod.obj["spec"].get("volumes") or []}
        out = []
        for m in container.get("volumeMounts") or []:
            vol = volumes[m["name"]]
            if "emptyDir" in vol:
                # Without mount namespaces the folder must sit where the helper looks.
                src = (
                    pod.root / "view" / m["mountPath"].lstrip("/")
                    if self.runtime == "host"
                    else pod.root / "volumes" / m["name"]
                )
                src.mkdir(parents=True, exist_ok=True)
                src.chmod(0o777)
                pod.empty_dirs[m["name"]] = src
            elif "hostPath" in vol:
                src = Path(vol["hostPath"]["path"])
            elif "persistentVolumeClaim" in vol:
                src = self.claims[vol["persistentVolumeClaim"]["claimName"]]
            else:
                raise ValueError(f"fake kubelet: unsupported volume {vol}")
            if m.get("subPath"):
                src = src / m["subPath"]
            out.append((m["mountPath"], src, bool(m.get("readOnly"))))
        out.extend((path, src, True) for path, src in self.image_folders.items())
        return out

    def spawn(
        self,
        pod: Pod,
        container: dict[str, Any],
        argv: list[str],
        stdin: bool,
        into: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a process in a container's view of the pod.

        With ``into`` (a container's first process) the process joins that process's
        namespaces and root, as exec does; without, it starts a container.
        """
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOSTNAME": pod.obj["metadata"]["name"],
            **KUBELET_ENV,
        }
        for e in container.get("env") or []:
            env[e["name"]] = e.get("value", "")
        mounts = self.mounts(pod, container)
        ctx = container.get("securityContext") or {}
        uid = int(
            ctx.get("runAsUser")
            or (pod.obj["spec"].get("securityContext") or {}).get("runAsUser")
            or 65534
        )
        workdir = container.get("workingDir") or "/"
        drop = [
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
        enter = f'cd {_q(workdir)} 2>/dev/null || cd /; exec "$0" "$@"'
        group = self.memory_group(pod, container)
        join = (
            []
            if group is None
            else ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(group / "cgroup.procs")]
        )
        if self.runtime == "chroot" and into is not None:
            full = [
                *join,
                "nsenter",
                "-t",
                str(into),
                "-m",
                "-n",
                "-p",
                "-r",
                "--",
                "setpriv",
                *drop,
                "--",
                "/bin/sh",
                "-c",
                enter,
                *argv,
            ]
        elif self.runtime == "chroot":
            rootfs = pod.root / "rootfs"
            rootfs.mkdir(parents=True, exist_ok=True)
            lines = [
                "set -e",
                f"R={_q(str(rootfs))}",
                'mount -t tmpfs -o size=4m,mode=755 none "$R"',
                'for d in bin sbin lib lib64 lib32; do [ -L "/$d" ] && '
                'ln -s "$(readlink /$d)" "$R/$d" || true; done',
                'for d in usr etc; do mkdir -p "$R/$d"; mount --rbind "/$d" "$R/$d"; '
                'mount -o remount,bind,ro "$R/$d"; done',
                'mkdir -p "$R/proc" "$R/dev"; mount -t proc proc "$R/proc"; '
                'mount --rbind /dev "$R/dev"',
            ]
            # volumes first, then the "image" (the host's Python): a venv that lives under
            # /tmp on the host must not be hidden by the pod's /tmp volume
            for path, src, ro in mounts:
                lines.append(f'mkdir -p "$R"{_q(path)}; mount --bind {_q(str(src))} "$R"{_q(path)}')
                if ro:
                    lines.append(f'mount -o remount,bind,ro "$R"{_q(path)}')
            for extra in self.image_binds:
                lines.append(
                    f'mkdir -p "$R"{_q(extra)}; mount --rbind {_q(extra)} "$R"{_q(extra)}; '
                    f'mount -o remount,bind,ro "$R"{_q(extra)}'
                )
            if group is not None:
                # the container's own memory cgroup where a container finds it (v1 layout)
                cgroup_dir = "/sys/fs/cgroup" if self._cgroup_v2 else "/sys/fs/cgroup/memory"
                lines.append(
                    f'mkdir -p "$R"{cgroup_dir}; mount --bind {_q(str(group))} "$R"{cgroup_dir}; '
                    f'mount -o remount,bind,ro "$R"{cgroup_dir}'
                )
            lines.append(
                f'cd "$R"; exec chroot "$R" setpriv {" ".join(drop)} -- /bin/sh -c {_q(enter)} "$@"'
            )
            full = [
                *join,
                "unshare",
                "--mount",
                "--net",
                "--pid",
                "--fork",
                "--",
                "/bin/sh",
                "-c",
                "\n".join(lines),
                "sh",
                *argv,
            ]
        else:
            view = pod.root / "view"
            view.mkdir(parents=True, exist_ok=True)
            for path, src, _ in mounts:
                target = view / path.lstrip("/")
                if not target.exists() and not target.is_symlink():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.symlink_to(src)
            env["DS_SANDBOX_ROOT"] = str(view)
            full = argv
        return subprocess.Popen(
            full,
            env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def memory_group(self, pod: Pod, container: dict[str, Any]) -> Path | None:
        """The container's memory cgroup, limited as its spec says (chroot runtime only).

        Made on first use; None where this host gives the fake no memory cgroups.
        """
        if self._cgroup_base is None:
            return None
        meta = pod.obj["metadata"]
        group = self._cgroup_base / f"{meta['namespace']}.{meta['name']}" / container["name"]
        if group.is_dir():
            return group
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        try:
            group.mkdir(parents=True)
            if limit:
                name = "memory.max" if self._cgroup_v2 else "memory.limit_in_bytes"
                (group / name).write_text(str(quantity_bytes(str(limit))))
        except OSError as exc:
            logger.warning("fake kubelet: no memory cgroup for %s: %s", meta["name"], exc)
            return None
        return group

    def remove_memory_groups(self, pod: Pod) -> None:
        """Remove the memory cgroups of a pod's containers."""
        if self._cgroup_base is None:
            return
        meta = pod.obj["metadata"]
        folder = self._cgroup_base / f"{meta['namespace']}.{meta['name']}"
        _remove_cgroup_tree(folder)

    def start_container(self, pod: Pod, container: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Start a container's command (and, for the main one, wire the pod network)."""
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        proc = self.spawn(pod, container, argv, stdin=False)
        pod.procs[container["name"]] = proc
        if self.runtime == "chroot":
            ns_pid = _container_init(proc, pod.root / "rootfs")
            if ns_pid is not None:
                pod.ns_pids[container["name"]] = ns_pid
                main = pod.obj["spec"]["containers"][0]["name"]
                if self.network is not None and container["name"] == main:
                    wire_network(self.network, pod, ns_pid, self.alive)
        return proc

    def kill(self, pod: Pod) -> None:
        """Kill every process of a pod and close its network and exec connections."""
        for proc in [*pod.procs.values(), *pod.execs]:
            kill_group(proc)
        for lsock in pod.listeners:
            with contextlib.suppress(OSError):
                lsock.close()
        if pod.net_holder is not None:
            kill_group(pod.net_holder)
        for sock in pod.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def pick_runtime(runtime: str) -> str:
    """``chroot`` or ``host`` for ``runtime`` (``auto``: chroot where this host allows it).

    Raises:
        ValueError: an unknown runtime.
        RuntimeError: ``chroot`` asked for where it cannot run.
    """
    if runtime not in ("auto", "chroot", "host"):
        raise ValueError(f"runtime must be auto, chroot or host, got {runtime!r}")
    possible = (
        os.geteuid() == 0
        and shutil.which("unshare") is not None
        and shutil.which("setpriv") is not None
    )
    if runtime == "chroot" and not possible:
        raise RuntimeError("the chroot runtime needs root, unshare and setpriv")
    if runtime == "auto":
        if possible:
            probe = subprocess.run(
                ["unshare", "--mount", "--net", "--pid", "--fork", "true"],
                capture_output=True,
                check=False,
            )
            return "chroot" if probe.returncode == 0 else "host"
        return "host"
    return runtime


def _container_init(proc: subprocess.Popen[bytes], rootfs: Path) -> int | None:
    """The host pid of a container's first process once it has entered its root."""
    end = time.monotonic() + 10.0
    while time.monotonic() < end and proc.poll() is None:
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            if children and os.readlink(f"/proc/{children[0]}/root") == str(rootfs):
                return int(children[0])
        except OSError:
            pass
        time.sleep(0.005)
    return None


def _memory_cgroup_base(runtime: str) -> tuple[bool, Path | None]:
    """(v2?, a fresh memory cgroup folder of this fake), or (False, None) where there is none."""
    if runtime != "chroot":
        return False, None
    v1 = Path("/sys/fs/cgroup/memory")
    v2 = Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").exists() or (v1 / "tasks").exists():
        parent, is_v2 = v1, False
    elif "memory" in _read(v2 / "cgroup.subtree_control").split():
        parent, is_v2 = v2, True
    else:
        return False, None
    base = parent / f"ds-fake-k8s-{uuid.uuid4().hex[:8]}"
    try:
        base.mkdir()
        if is_v2:
            (base / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        with contextlib.suppress(OSError):
            base.rmdir()
        return False, None
    return is_v2, base


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_cgroup_tree(folder: Path) -> None:
    """Remove a cgroup folder and its children (their processes are gone by now)."""
    if not folder.is_dir():
        return
    for child in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            child.rmdir()
    for _ in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # the last process of the group is still being reaped
    logger.warning("fake kubelet: cgroup %s could not be removed", folder)


def quantity_bytes(text: str) -> int:
    """Bytes of a Kubernetes memory quantity.

    >>> quantity_bytes("512Mi"), quantity_bytes("1G"), quantity_bytes("1000")
    (536870912, 1000000000, 1000)
    """
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 10**6}
    units.update({"G": 10**9, "T": 10**12})
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * units[suffix])
    return int(float(text))


def chroot_runtime_available() -> bool:
    """Whether this host can run the fake's isolated container runtime."""
    try:
        return pick_runtime("auto") == "chroot"
    except (OSError, RuntimeError):
        return False


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def signal_tree(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal a process, everything it started and its process group."""
    if proc.poll() is None:
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill a process and everything it started; close its pipes."""
    if proc.poll() is None:
        signal_tree(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


__all__ = [
    "KUBELET_ENV",
    "ContainerRuntime",
    "chroot_runtime_available",
    "kill_group",
    "pick_runtime",
    "quantity_bytes",
    "signal_tree",
]
