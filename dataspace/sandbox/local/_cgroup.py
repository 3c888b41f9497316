"""Control groups for local sandboxes: limits, per-command tracking, counters, removal.

Each sandbox gets one group ``dataspace-sandbox/<name>`` (in each v1 hierarchy, or once in
the v2 unified hierarchy) that carries its memory, pids and cpu limits, and each running
command a child group ``<name>/e<k>`` (in the pids hierarchy on v1, reused once empty)
that only tracks what the command started, so that a timeout can kill all of it, daemons
included. Processes join by writing their pid to the ``cgroup.procs`` files that
:meth:`SandboxCgroup.join_files` returns, before they enter the sandbox's namespaces.
The group name carries the owning controller's identity (see :func:`group_name`), so a
sweep can tell a leftover from the live group of another controller with no other record.

CPU weight. Each sandbox's cpu limit is a cfs quota, a cap; how the sandboxes share a busy
host with everything else is the weight of their common ``dataspace-sandbox`` group, which
the kernel would leave at one process's worth for all of them together: a hundred
sandboxes would then get, between them, what one other process of the host gets. So the
weight of that group follows the number of sandbox groups in it (:func:`reweigh`, at each
create and removal): each sandbox weighs as one ordinary process, as it would without a
cpu cgroup, and kubelet weighs its pods' parent likewise.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dataspace.errors import SandboxError
from dataspace.sandbox.base import Limits

logger = logging.getLogger(__name__)

GROUP = "dataspace-sandbox"
CONTROLLERS = ("memory", "pids", "cpu")
CFS_PERIOD_US = 100_000


@dataclass(frozen=True, kw_only=True)
class CgroupLayout:
    """Where our groups live: ``version`` 1 with one folder per controller, or 2."""

    version: int
    parents: dict[str, Path]

    @property
    def enforcement(self) -> str:
        """The ``info()`` label of this layout."""
        return f"cgroup-v{self.version}"

    def folders(self, name: str) -> list[Path]:
        """The folders of group ``name``, one per hierarchy."""
        return sorted({parent / name for parent in self.parents.values()})

    def group_names(self) -> set[str]:
        """Names of every sandbox group present, live or left over."""
        names: set[str] = set()
        for parent in set(self.parents.values()):
            with contextlib.suppress(OSError):
                names.update(entry.name for entry in parent.iterdir() if entry.is_dir())
        return names


def group_name(sandbox_id: str, owner_pid: int, owner_start: int) -> str:
    """The group name of a sandbox: its id and its controller's (pid, start time).

    >>> group_name("lsb-0a1b", 4242, 987654)
    'lsb-0a1b@4242-987654'
    """
    return f"{sandbox_id}@{owner_pid}-{owner_start}"


def parse_group_name(name: str) -> tuple[str, int, int] | None:
    """Split a group name into sandbox id, owner pid and owner start time.

    >>> parse_group_name("lsb-0a1b@4242-987654")
    ('lsb-0a1b', 4242, 987654)
    >>> parse_group_name("probe-12") is None
    True
    """
    sandbox_id, _, owner = name.partition("@")
    pid, _, start = owner.partition("-")
    if not (sandbox_id and pid.isdigit() and start.isdigit()):
        return None
    return sandbox_id, int(pid), int(start)


def parse_mounts(text: str) -> list[tuple[str, str, set[str]]]:
    r"""Cgroup mounts of a ``/proc/self/mounts`` text as (type, mount point, options).

    >>> mounts = parse_mounts("cgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\\n"
    ...                       "proc /proc proc rw 0 0\\n")
    >>> [(kind, point, sorted(options)) for kind, point, options in mounts]
    [('cgroup', '/sys/fs/cgroup/pids', ['pids', 'rw'])]
    """
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            point = fields[1].replace("\\040", " ")
            mounts.append((fields[2], point, set(fields[3].split(","))))
    return mounts


def detect(prefer: str = "auto") -> CgroupLayout | None:
    """Find writable memory, pids and cpu controllers; ``None`` when there are none.

    Args:
        prefer: ``auto`` (v2 when its unified hierarchy has the controllers, else v1),
            ``v1`` or ``v2``.
    """
    try:
        mounts = parse_mounts(Path("/proc/self/mounts").read_text())
    except OSError:
        return None
    if prefer in ("auto", "v2"):
        layout = _detect_v2(mounts)
        if layout is not None or prefer == "v2":
            return layout
    return _detect_v1(mounts)


def own_groups(text: str) -> dict[str, str]:
    r"""This process's group per controller from a ``/proc/self/cgroup`` text (v2: ``""``).

    >>> own_groups("4:memory:/jobs/7\n2:cpu,cpuacct:/\n0::/user.slice/run-1.scope\n")
    {'memory': '/jobs/7', 'cpu': '/', 'cpuacct': '/', '': '/user.slice/run-1.scope'}
    """
    groups: dict[str, str] = {}
    for line in text.splitlines():
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for name in controllers.split(",") if controllers else [""]:
            groups.setdefault(name, path or "/")
    return groups


def _own_groups() -> dict[str, str]:
    try:
        return own_groups(Path("/proc/self/cgroup").read_text())
    except OSError:
        return {}


def _under(point: str, group: str) -> Path:
    """The folder of our groups: ``GROUP`` inside the controller's own group."""
    return Path(point) / group.strip("/") / GROUP if group.strip("/") else Path(point) / GROUP


def _detect_v1(mounts: list[tuple[str, str, set[str]]]) -> CgroupLayout | None:
    parents: dict[str, Path] = {}
    own = _own_groups()
    for kind, point, options in mounts:
        if kind != "cgroup":
            continue
        for controller in CONTROLLERS:
            if controller in options and controller not in parents:
                parents[controller] = _under(point, own.get(controller, "/"))
    if "memory" not in parents or "pids" not in parents:
        return None
    for controller, parent in list(parents.items()):
        try:
            _probe(parent)
        except OSError as exc:
            logger.debug("cgroup v1 %s is not writable: %s", controller, exc)
            if controller != "cpu":
                return None
            del parents[controller]
    return CgroupLayout(version=1, parents=parents)


def _detect_v2(mounts: list[tuple[str, str, set[str]]]) -> CgroupLayout | None:
    own = _own_groups().get("", "/")
    for kind, point, _ in mounts:
        if kind != "cgroup2":
            continue
        # Inside the controller's own group first. v2 lets a group with processes in it
        # have no controller-enabled children (unless it is the root), so where the
        # controller shares its group, the hierarchy's root is the fallback.
        homes = [Path(point) / own.strip("/")] if own.strip("/") else []
        for home in [*homes, Path(point)]:
            layout = _v2_at(home)
            if layout is not None:
                if not homes or home != homes[0]:
                    logger.info("cgroup v2: sandbox groups under %s", home)
                return layout
    return None


def _v2_at(home: Path) -> CgroupLayout | None:
    try:
        available = set((home / "cgroup.controllers").read_text().split())
    except OSError:
        return None
    wanted = [c for c in CONTROLLERS if c in available]
    if "memory" not in wanted or "pids" not in wanted:
        return None
    parent = home / GROUP
    try:
        enable = " ".join(f"+{c}" for c in wanted)
        (home / "cgroup.subtree_control").write_text(enable)
        _probe(parent)
        (parent / "cgroup.subtree_control").write_text(enable)
    except OSError as exc:
        logger.debug("cgroup v2 at %s is not writable: %s", home, exc)
        return None
    return CgroupLayout(version=2, parents=dict.fromkeys(wanted, parent))


def _probe(parent: Path) -> None:
    """Create ``parent`` if needed and check that we may create groups in it."""
    parent.mkdir(exist_ok=True)
    probe = parent / f"probe-{os.getpid()}"
    probe.mkdir()
    probe.rmdir()


class SandboxCgroup:
    """The groups of one sandbox.

    Args:
        layout: where the groups live.
        name: the group name (see :func:`group_name`).
        limits: the limits written into the groups.
    """

    def __init__(self, layout: CgroupLayout, name: str, limits: Limits) -> None:
        self.layout = layout
        self.name = name
        self.paths = {c: parent / name for c, parent in layout.parents.items()}
        self._lock = threading.Lock()
        self._made = 0
        self._free: list[Path] = []
        self._trackers: dict[int, tuple[Path, int]] = {}
        try:
            for path in set(self.paths.values()):
                path.mkdir()
            self._write_limits(limits)
        except OSError as exc:
            self.remove()
            raise SandboxError(f"cgroup {name}: cannot set it up: {exc}") from exc
        reweigh(layout)
        # Which event files this kernel has is looked up once, not at every command.
        self._pid_events = (
            tuple(n for n in _PID_EVENTS if (self.paths["pids"] / n).exists()) or _PID_EVENTS
        )

    def _write_limits(self, limits: Limits) -> None:
        memory, pids, cpu = self.paths["memory"], self.paths["pids"], self.paths.get("cpu")
        quota = max(1000, int(limits.cpus * CFS_PERIOD_US))
        if self.layout.version == 1:
            (memory / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
            _write_if_present(memory / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
            (pids / "pids.max").write_text(str(limits.pids))
            if cpu is not None:
                (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(str(quota))
        else:
            (memory / "memory.max").write_text(str(limits.memory_bytes))
            _write_if_present(memory / "memory.swap.max", "0")
            (pids / "pids.max").write_text(str(limits.pids))
            if cpu is not None:
                (cpu / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}")

    def join_files(self, number: int) -> list[str]:
        """Give command ``number`` a tracking group; return the files its process joins by.

        Tracking groups are reused once empty: creating and removing a group costs more
        than the command ``true`` itself.
        """
        with self._lock:
            if self._free:
                tracker = self._free.pop()
            else:
                self._made += 1
                tracker = self.paths["pids"] / f"e{self._made}"
                tracker.mkdir()
            self._trackers[number] = (tracker, _pids_hits(tracker, self._pid_events))
        files = {tracker / "cgroup.procs"}
        if self.layout.version == 1:
            files.update(p / "cgroup.procs" for c, p in self.paths.items() if c != "pids")
        return sorted(str(f) for f in files)

    def counters(self, number: int) -> tuple[int, int]:
        """(OOM kills, pids-limit hits) so far, of the sandbox and of command ``number``."""
        oom_file = "memory.oom_control" if self.layout.version == 1 else "memory.events"
        ooms = _read_key(self.paths["memory"] / oom_file, "oom_kill")
        tracker, baseline = self._trackers[number]
        hits = _pids_hits(self.paths["pids"], self._pid_events)
        return ooms, hits + _pids_hits(tracker, self._pid_events) - baseline

    def members(self) -> list[int]:
        """Pids in the sandbox's groups and their children groups."""
        found: set[int] = set()
        for path in set(self.paths.values()):
            found.update(_procs(path))
            for child in [p for p in path.iterdir() if p.is_dir()]:
                found.update(_procs(child))
        return sorted(found)

    def kill_all(self) -> None:
        """Kill every process of the sandbox's groups (the groups stay)."""
        for path in set(self.paths.values()):
            for child in [p for p in path.iterdir() if p.is_dir()]:
                _kill_group(child)
            _kill_group(path)

    def kill_exec(self, number: int, spare: int | None = None) -> None:
        """Kill every process that command ``number`` started, except ``spare``.

        The command's ``nsenter`` (outside the sandbox) is best spared: it reaps the
        command and then exits by the same signal. Were it killed first, the kernel would
        hand the command's remains to the host's init, and the sandbox's PID namespace
        could only end once that init got round to reaping them.
        """
        _kill_group(self._trackers[number][0], spare)

    def release_exec(self, number: int) -> None:
        """Take back command ``number``'s group for reuse unless something still runs in it."""
        with self._lock:
            tracker, _ = self._trackers.pop(number)
            if not _procs(tracker):
                self._free.append(tracker)

    def remove(self) -> None:
        """Kill whatever is left in the groups and remove them; idempotent."""
        remove_group(self.layout, self.name)


def remove_group(layout: CgroupLayout, name: str) -> None:
    """Kill what runs in group ``name`` and its children, and remove them all."""
    for path in layout.folders(name):
        if not path.is_dir():
            continue
        for child in [p for p in path.iterdir() if p.is_dir()]:
            _kill_group(child)
            _rmdir(child)
        _kill_group(path)
        _rmdir(path)
    reweigh(layout)


WEIGHT_V1 = (1024, 2, 262_144)
"""``cpu.shares``: one process's weight, the least and the most the kernel takes."""
WEIGHT_V2 = (100, 1, 10_000)
"""``cpu.weight``: likewise on the unified hierarchy."""


def reweigh(layout: CgroupLayout) -> None:
    """Weigh the sandboxes' common cpu group as one process per sandbox group in it.

    Several controllers may share the group; each sets the weight from what it counts, so
    the last change wins and the next one corrects it.
    """
    parent = layout.parents.get("cpu")
    if parent is None:
        return
    one, least, most = WEIGHT_V1 if layout.version == 1 else WEIGHT_V2
    try:
        count = sum(1 for e in os.scandir(parent) if e.is_dir() and parse_group_name(e.name))
        weight = min(most, max(least, one * max(1, count)))
        name = "cpu.shares" if layout.version == 1 else "cpu.weight"
        (parent / name).write_text(str(weight))
    except OSError as exc:  # the weight is a nicety: the limits hold without it
        logger.debug("cgroup %s: cannot set its cpu weight: %s", parent, exc)


def _procs(group: Path) -> list[int]:
    try:
        return [int(line) for line in (group / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_group(group: Path, spare: int | None = None) -> None:
    """SIGKILL everything in ``group`` but ``spare`` until nothing else is left.

    The pids limit bounds how many processes a fork loop can make meanwhile.
    """
    kill_file = group / "cgroup.kill"
    if spare is None and kill_file.exists():
        _write_if_present(kill_file, "1")
    for attempt in range(200):
        pids = [pid for pid in _procs(group) if pid != spare]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001 if attempt < 20 else 0.01)
    logger.warning("cgroup %s still has processes after repeated SIGKILL", group)


def _rmdir(group: Path) -> None:
    # A killed process leaves its group only once reaped: retry briefly on EBUSY.
    for attempt in range(300):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            time.sleep(0.001 if attempt < 50 else 0.01)
    logger.warning("cgroup %s could not be removed: still busy", group)


_PID_EVENTS = ("pids.events", "pids.events.local")


def _pids_hits(group: Path, names: tuple[str, ...] = _PID_EVENTS) -> int:
    """Forks refused by a pids limit, as counted in ``group``'s event files ``names``."""
    return max(_read_key(group / name, "max") for name in names)


def _read_key(path: Path, key: str) -> int:
    try:
        with open(path, "rb") as fh:
            text = fh.read()
        for line in text.decode().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _write_if_present(path: Path, text: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.write_text(text)
