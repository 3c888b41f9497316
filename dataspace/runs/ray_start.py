"""The one way DataSpace connects to Ray (the CLI, the demo and the Ray job entrypoints).

``connect_ray`` joins the cluster at an address (``ray.address`` of the spec, the job's
``RAY_ADDRESS``) or starts a local instance, with the same arguments everywhere:

- an address is first checked with a plain TCP connection bounded by ``timeout`` seconds,
  and must answer as a gRPC (HTTP/2) server does, so an unreachable head, or a port where
  something other than Ray listens, is one clear error instead of minutes of retries;
  then (``check_cluster``) one request to the head's GCS tells a refused token
  (``InvalidAuthToken``) and a Ray or Python version other than the cluster's apart, each
  in one line with its fix, before ``ray.init`` would retry for 20 s and say only
  "Failed to connect";
- a local instance is started by a child process of its own (its own session), which
  must report the instance's address within the start-up timeout (``start_timeout``,
  ``DATASPACE_RAY_START_TIMEOUT``; by default :data:`DEFAULT_START_TIMEOUT` seconds). A
  start-up that fails or runs out of time (a busy machine: "node timed out during
  startup") has every process it started killed and is tried once more; when that fails
  too, a one-line :class:`RayStartError` says why and what to do. The instance lives
  until this process exits (it also ends when this process is killed: the child watches
  its stdin), and is reused when Ray is connected again in this process. The variables
  named in ``hide_env`` (the model keys: only this process holds them) are removed from
  the environment the instance starts with, so no Ray process (GCS, raylet, dashboard,
  workers) has them;
- Ray's start-up banners and the raw lines its C++ core writes to the terminal are kept
  off the user's screen: they go to this module's logger (``-v`` shows them);
- Ray replaces the process's SIGTERM handler while it starts; the caller's handler is put
  back, so a SIGTERM is handled the way the caller decided (the CLI treats it as Ctrl-C).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from dataspace.errors import ConfigError, DataSpaceError, InfrastructureError

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_START_TIMEOUT = 90.0
"""Seconds a local Ray instance may take to start (each of the two tries)."""
START_TIMEOUT_ENV = "DATASPACE_RAY_START_TIMEOUT"
START_TRIES = 2
RAY_DEFAULT_PORT = 6379
# ray.init arguments that belong to the driver, not to the instance it starts
_DRIVER_KWARGS = frozenset(
    {"log_to_driver", "configure_logging", "logging_level", "logging_format", "namespace",
     "runtime_env", "job_config"}
)  # fmt: skip
_HEAD_MARK = "DATASPACE_RAY_HEAD "
LEAN_HEAD_SKIPS = ("start_api_server", "start_monitor", "start_log_monitor")
"""The Ray processes a local instance does without (``ray._private.node.Node`` methods made
no-ops in its child). A run's own instance has no dashboard or job server to serve (Ray
starts its API server even without the dashboard, and waits for it), no autoscaler to run,
and sends no worker output to the driver (``log_to_driver`` is off), so a log monitor would
only tail files. Without them a local start-up takes about half the time on a busy 2-core
machine (``scripts/bench_ray_start.py``). A cluster joined at ``ray.address`` is the
user's own and keeps all of its processes."""
LEAN_AGENT = "stub"
"""The local instance's dashboard agent: ``"stub"``, a shell in its place; ``"minimal"``,
Ray's agent as in its minimal install (``--minimal``); ``"full"``, Ray's whole agent.

Nothing queries the agent of a run's own instance (it has no dashboard or API server, and
DataSpace uses no state or metrics API). Ray's minimal agent serves nothing either: it
writes -1 ("not in use") as its metrics and HTTP ports, which the raylet waits for, and
watches the raylet. The stub does just that (:data:`_AGENT_STUB`): it writes the three port
files as Ray's own ``persist_port`` does (a temporary file renamed) and exits when the
raylet closes the pipe it holds as the agent's stdin (also when the raylet is killed).
Ray's minimal agent is a Python process of about 1 CPU second; the stub costs next to
nothing, and the starting child no longer imports the dashboard's own dependencies to find
out whether they are installed (``scripts/bench_ray_start.py`` shows all three).

With ``"stub"`` the raylet's runtime-env agent is a shell too, unless the driver asks for a
``runtime_env`` (or a ``job_config``): the raylet asks that agent for nothing else, and
DataSpace asks for no runtime environment (a key in one would be written to Ray's logs).
The stand-in writes -1 as the agent's port; a runtime environment asked of such an instance
would end its raylet (after 30 s), so :func:`connect_ray` starts one with Ray's agent for a
driver that asks for one."""


def _agent_stub(*ports: str) -> str:
    """A shell that stands in for a Ray agent.

    It writes -1 as each of ``ports``, as Ray's own ``persist_port`` writes a port (a
    temporary file renamed), then waits for the raylet to close its stdin.
    """
    return f"""
for a; do case $a in --node-id=*) n=${{a#*=}};; --session-dir=*) d=${{a#*=}};; esac; done
for p in {" ".join(ports)}; do
    printf %s -1 > "$d/.$p.$n" && mv "$d/.$p.$n" "$d/${{p}}_$n" || exit 1
done
while read -r _; do :; done
"""


_AGENT_STUB = _agent_stub(
    "metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port"
)
_RUNTIME_ENV_AGENT_STUB = _agent_stub("runtime_env_agent_port")

# The child that starts a local instance: Ray's output goes to its stderr (a log file), the
# address to its stdout; it keeps the instance until its stdin closes (this process exited).
_HEAD_SCRIPT = """
import json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
import ray
from ray._private.node import Node
for name in json.loads(sys.argv[3]):
    if hasattr(Node, name):
        setattr(Node, name, lambda self, **kw: None)
node = json.loads(sys.argv[1])
if sys.argv[4] != "full":  # no dashboard dependencies to look for
    import ray._private.utils
    ray._private.utils.get_dashboard_dependency_error = lambda: "no dashboard"
import ray._private.services as services
python_command = getattr(services, "_build_python_executable_command_memory_profileable", None)
if sys.argv[4] == "stub" and python_command is not None:  # the agent's command: the stub
    from ray._private.ray_constants import PROCESS_TYPE_DASHBOARD_AGENT as DASHBOARD
    from ray._private.ray_constants import PROCESS_TYPE_RUNTIME_ENV_AGENT as RUNTIME_ENV
    def agent_or_python(kind, session_dir, unbuffered=True):
        if kind == DASHBOARD:  # the agent's arguments follow: $1, $2 ...
            return ["/bin/sh", "-c", sys.argv[5], "dashboard-agent"]
        if kind == RUNTIME_ENV and sys.argv[6]:
            return ["/bin/sh", "-c", sys.argv[6], "runtime-env-agent"]
        return python_command(kind, session_dir, unbuffered)
    services._build_python_executable_command_memory_profileable = agent_or_python
ray.init(**node)
out.write(sys.argv[2] + ray.get_runtime_context().gcs_address + "\\n")
out.flush()
sys.stdin.read()
ray.shutdown()
"""


class RayStartError(InfrastructureError):
    """Ray could not be started or joined (the message names ``ray`` and the fix)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="ray_start")


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """The (host, port) a Ray address names, or None for ``auto``/``local``.

    >>> ray_endpoint("10.0.0.5:6379"), ray_endpoint("ray://head:10001"), ray_endpoint("auto")
    (('10.0.0.5', 6379), ('head', 10001), None)
    >>> ray_endpoint("http://head:8265")
    ('head', 8265)
    """
    if address in ("auto", "local", ""):
        return None
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or RAY_DEFAULT_PORT


# the client connection preface of HTTP/2 and an empty SETTINGS frame
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def check_reachable(address: str, *, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Raise ConfigError unless a Ray head answers at ``address`` within ``timeout`` seconds.

    A Ray head (GCS or Ray Client server) is a gRPC server: it answers the HTTP/2 connection
    preface with a SETTINGS frame. Anything else (nothing listening, a port of another
    service that stays silent or answers otherwise) is refused here, in bounded time.
    """
    endpoint = ray_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    scheme = urlsplit(address).scheme if "://" in address else ""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if scheme in ("http", "https"):
                return  # a dashboard / job server address: HTTP/1, not gRPC
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(_H2_PREFACE)
            head = _read_exactly(sock, 9)
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        if isinstance(exc, TimeoutError) or "timed out" in str(exc):
            reason = "no answer"
        raise ConfigError(
            f"ray.address {address!r}: nothing answers at {host}:{port} ({reason} within "
            f"{timeout:g} s); start the cluster (`ray start --head`) or fix the address"
        ) from None
    if len(head) < 9 or head[3] != 0x4:  # frame type 4: SETTINGS
        raise ConfigError(
            f"ray.address {address!r}: {host}:{port} answers but is not a Ray head (no gRPC "
            "answer); give the GCS address of the head (port 6379 by default) or ray://HOST:10001"
        )


def check_cluster(address: str, *, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> str:
    """Raise ConfigError unless this process can join the Ray head at ``address``.

    Beyond :func:`check_reachable`: one request to the head's GCS, as ``ray.init`` makes
    first, tells apart a token the cluster refuses (or none sent) and a Ray or Python
    version other than the cluster's. Ray Client (``ray://``) and dashboard (``http://``)
    addresses are only checked for reachability. Returns what was found, for doctor.
    """
    check_reachable(address, timeout=timeout)
    endpoint = ray_endpoint(address)
    scheme = urlsplit(address).scheme if "://" in address else ""
    if endpoint is None or scheme in ("ray", "http", "https"):
        return f"{address} answers"
    host, port = endpoint
    meta = _cluster_metadata(address, f"{host}:{port}")
    if not meta:
        return f"{address} answers"
    from ray._private.utils import check_version_info, compute_version_info

    ray_version, python_version = compute_version_info()
    try:
        with _terminal_to_log():
            check_version_info(meta, "this machine")
    except RuntimeError:
        raise ConfigError(
            f"ray.address {address!r}: version mismatch: the cluster runs Ray "
            f"{meta.get('ray_version')} on Python {meta.get('python_version')}, this process "
            f"Ray {ray_version} on Python {python_version}; run dataspace where both match "
            f"(pip install ray=={meta.get('ray_version')} on Python "
            f"{meta.get('python_version')}) or join a cluster started from this environment"
        ) from None
    return f"{address} answers (Ray {ray_version}, Python {python_version}, as this process)"


def _cluster_metadata(address: str, gcs: str) -> dict[str, Any] | None:
    """The versions the head recorded (None when it recorded none)."""
    from ray._common.usage import usage_constants
    from ray._private import ray_constants
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.exceptions import AuthenticationError

    try:
        with _terminal_to_log():
            client = GcsClient(address=gcs)
            raw = client.internal_kv_get(
                usage_constants.CLUSTER_METADATA_KEY,
                namespace=ray_constants.KV_NAMESPACE_CLUSTER,
                timeout=DEFAULT_CONNECT_TIMEOUT,
            )
    except AuthenticationError:
        raise ConfigError(f"ray.address {address!r}: {_token_problem()}") from None
    except Exception as exc:  # the join itself will say more; this check is best effort
        logger.info("ray: the GCS at %s did not answer the version request: %s", gcs, exc)
        return None
    if not raw:
        return None
    try:
        meta = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


def _token_problem() -> str:
    """Why the cluster refused this process's token (Ray's InvalidAuthToken) and the fix."""
    mode = (os.environ.get("RAY_AUTH_MODE") or "").strip().lower()
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    has_token = bool(os.environ.get("RAY_AUTH_TOKEN")) or os.path.isfile(path)
    if not has_token:
        return (
            "the cluster requires token authentication and this process has no token "
            "(InvalidAuthToken); export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=<the cluster's "
            "token> (`ray get-auth-token` on the head prints it) where dataspace runs"
        )
    if mode != "token":
        return (
            "the cluster requires token authentication and RAY_AUTH_MODE is not 'token' "
            "here, so no token is sent (InvalidAuthToken); export RAY_AUTH_MODE=token "
            "where dataspace runs"
        )
    where = "$RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN") else path
    return (
        f"the cluster refused the token of this process from {where} (InvalidAuthToken); "
        "set RAY_AUTH_TOKEN to the cluster's token (`ray get-auth-token` on the head "
        "prints it)"
    )


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def resolve_start_timeout(value: float | None = None) -> float:
    """Seconds a local start-up may take: ``DATASPACE_RAY_START_TIMEOUT``, else ``value``.

    Raises:
        ConfigError: the variable is not a positive number.
    """
    raw = os.environ.get(START_TIMEOUT_ENV)
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            seconds = 0.0
        if not seconds > 0:
            raise ConfigError(f"{START_TIMEOUT_ENV}={raw!r}: must be a positive number of seconds")
        return seconds
    return DEFAULT_START_TIMEOUT if value is None else float(value)


def connect_ray(
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    start_timeout: float | None = None,
    hide_env: Iterable[str] = (),
    **extra: Any,
) -> bool:
    """Connect to Ray unless already connected; return True when this call connected.

    Args:
        address: a cluster address; None (and no ``RAY_ADDRESS``) starts a local instance.
        num_cpus: CPUs of a local instance (ignored when joining a cluster).
        timeout: seconds to wait for a TCP answer at ``address``.
        start_timeout: seconds a local instance may take to start, per try (None: the
            default; ``DATASPACE_RAY_START_TIMEOUT`` overrides both).
        hide_env: variables a local instance must not see (the model keys this process
            holds); ignored when joining a cluster, whose environment is its own.
        **extra: further ``ray.init`` keyword arguments (e.g. ``_temp_dir``).

    Raises:
        ConfigError: the address does not answer as a Ray head, refuses this process's
            token, or runs other Ray or Python versions.
        RayStartError: a local instance did not start in two tries, or joining failed.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address == "local":
        address = None
    driver = {"log_to_driver": False, "configure_logging": False}
    driver.update({k: v for k, v in extra.items() if k in _DRIVER_KWARGS})
    if address:
        check_cluster(address, timeout=timeout)
        _init(address, driver, what=f"cannot join the Ray cluster at {address!r}", fix=_JOIN_FIX)
        return True
    node: dict[str, Any] = {"include_dashboard": False}
    if num_cpus is not None:
        node["num_cpus"] = max(1, int(num_cpus))
    node.update({k: v for k, v in extra.items() if k not in _DRIVER_KWARGS})
    runtime_envs = "runtime_env" in driver or "job_config" in driver
    head = _local_head(
        node, resolve_start_timeout(start_timeout), frozenset(hide_env), runtime_envs
    )
    _init(head.address, driver, what="cannot join the local Ray instance it started")
    return True


def _init(address: str, kwargs: dict[str, Any], *, what: str, fix: str | None = None) -> None:
    import ray

    try:
        with _keep_sigterm_handler(), _terminal_to_log():
            ray.init(address=address, **kwargs)
    except (KeyboardInterrupt, DataSpaceError):
        raise
    except Exception as exc:  # Ray raises bare Exception, ConnectionError, RuntimeError ...
        with contextlib.suppress(Exception):
            ray.shutdown()
        raise RayStartError(f"ray: {what}: {_last_line(str(exc))}; {fix or _FIX}") from None


_FIX = (
    "the machine may be busy: rerun, raise DATASPACE_RAY_START_TIMEOUT (seconds), or start "
    "Ray yourself (`ray start --head`) and set ray.address: auto in the spec"
)


_JOIN_FIX = (
    "check ray.address (the head's GCS address, port 6379 by default), that the head runs "
    "the same Ray and Python versions, and its token (RAY_AUTH_TOKEN); `-v` shows Ray's own lines"
)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else "no message")[:300]


# ---- the local instance -------------------------------------------------------------------


@dataclass(kw_only=True)
class _Head:
    """A local Ray instance started by a child process of this one."""

    proc: subprocess.Popen[bytes]
    address: str
    log_path: str
    runtime_envs: bool  # it runs Ray's runtime-env agent (a stand-in cannot make one)
    stopped: bool = False  # by stop_local_ray: its process id may be another's by now

    def alive(self) -> bool:
        return not self.stopped and self.proc.poll() is None


_head: _Head | None = None
_head_lock = threading.Lock()


def _local_head(
    node: dict[str, Any], seconds: float, hide_env: frozenset[str], runtime_envs: bool
) -> _Head:
    """The local instance of this process: the running one, else a new one (two tries).

    A driver that asks for runtime environments gets an instance with Ray's runtime-env
    agent: one started without it is stopped first.
    """
    global _head
    with _head_lock:
        _token_auth()
        if _head is not None and _head.alive():
            if _head.runtime_envs or not runtime_envs:
                return _head
            _stop_head(_head)
        problems: list[str] = []
        for n in range(1, START_TRIES + 1):
            try:
                _head = _start_head(node, seconds, hide_env, runtime_envs)
            except _StartFailed as exc:
                problems.append(str(exc))
                logger.warning("ray: local start-up try %d of %d failed: %s", n, START_TRIES, exc)
                continue
            atexit.register(_stop_head, _head)
            return _head
        raise RayStartError(
            f"ray: the local Ray instance did not start ({START_TRIES} tries of at most "
            f"{seconds:g} s: {problems[-1]}); {_FIX}"
        )


class _StartFailed(RayStartError):
    pass


_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _token_auth() -> None:
    """Token authentication for the local instance, unless the environment configures it.

    The instance and this process (and the workers it starts) share a fresh random token,
    held only in their environments: nothing is written to disk, and only processes that
    have it can join the instance, which listens on the host's address.

    Ray reads its authentication settings from the environment when it is imported and
    when ``ray.init`` runs; they are read again here in every case, so a process whose
    earlier ``ray.init`` saw other settings (a cluster joined without authentication)
    still sends the token its new instance expects.
    """
    if not any(os.environ.get(name) for name in _AUTH_VARS):
        import secrets

        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    reread_auth_settings()


def reread_auth_settings() -> None:
    """Make this process's Ray read its authentication settings from the environment again.

    As ``ray get-auth-token`` does: Ray keeps what it read last, and an instance it starts
    takes the environment as it is, so the two must agree before a start.
    """
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _start_head(
    node: dict[str, Any], seconds: float, hide_env: frozenset[str], runtime_envs: bool
) -> _Head:
    """Start one local instance; on any failure kill everything it started.

    Its environment is this process's without ``RAY_ADDRESS`` and without ``hide_env``:
    every Ray process (and every worker) inherits it.
    """
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and k not in hide_env}
    fd, log_path = tempfile.mkstemp(prefix="dataspace-ray-head-", suffix=".log")
    skips = json.dumps(LEAN_HEAD_SKIPS)
    stub_runtime_envs = LEAN_AGENT == "stub" and not runtime_envs
    runtime_env_stub = _RUNTIME_ENV_AGENT_STUB if stub_runtime_envs else ""
    argv = [json.dumps(node), _HEAD_MARK, skips, LEAN_AGENT, _AGENT_STUB, runtime_env_stub]
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _HEAD_SCRIPT, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            start_new_session=True,  # its own session: Ctrl-C reaches only this process
        )
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    try:
        return _await_head(proc, lines, seconds, log_path, runtime_envs=not stub_runtime_envs)
    except BaseException:  # Ctrl-C or SIGTERM meanwhile: leave nothing running
        _kill_tree(proc)
        raise


def _await_head(
    proc: subprocess.Popen[bytes],
    lines: queue.Queue[str | None],
    seconds: float,
    log_path: str,
    *,
    runtime_envs: bool,
) -> _Head:
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(0.0, left)) if left > 0 else None
        except queue.Empty:
            line = None
        if line is not None and line.startswith(_HEAD_MARK):
            address = line[len(_HEAD_MARK) :].strip()
            logger.info("ray: local instance at %s (its log: %s)", address, log_path)
            return _Head(proc=proc, address=address, log_path=log_path, runtime_envs=runtime_envs)
        if line is not None:
            logger.info("ray: %s", line.rstrip())
            continue
        exited = proc.poll()
        _kill_tree(proc)
        tail = _log_tail(log_path)
        if exited is not None:
            raise _StartFailed(f"it exited with code {exited}: {tail}; its log: {log_path}")
        raise _StartFailed(f"no instance after {seconds:g} s: {tail}; its log: {log_path}")


def _pump(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    for raw in stream:
        lines.put(raw.decode("utf-8", "replace"))
    lines.put(None)


def _log_tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            text = fh.read()[-20000:].decode("utf-8", "replace")
    except OSError:
        return "no log"
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and not line.startswith(("File ", "^", "~")):
            return line[:300]
    return "nothing logged"


def _descendants(pid: int) -> list[int]:
    """``pid``'s descendants, from /proc (children first found, then theirs)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child and every process it started (its session and its descendants)."""
    victims = _descendants(proc.pid)
    for pid in (proc.pid, *victims):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        proc.wait(timeout=30)


def stop_local_ray() -> bool:
    """Disconnect from Ray and stop this process's local instance; True when there was one.

    The next :func:`connect_ray` starts a new instance. A process that runs attempts
    in-process and goes on without Ray (a notebook, a test file) frees the instance's
    processes and memory here instead of at its exit.
    """
    import ray

    global _head
    with _head_lock:
        head, _head = _head, None
    if head is None or head.stopped:
        with contextlib.suppress(Exception):
            ray.shutdown()
        return False
    _stop_head(head)  # disconnects first
    return True


def _stop_head(head: _Head) -> None:
    """At exit: disconnect, let the child shut its instance down, kill what is left."""
    import ray

    if head.stopped:  # stopped already: its process ids may have been reused
        return
    head.stopped = True
    with contextlib.suppress(Exception):
        ray.shutdown()
    if head.proc.poll() is None:
        with contextlib.suppress(OSError):
            if head.proc.stdin is not None:
                head.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.proc.wait(timeout=30)
    _kill_tree(head.proc)
    with contextlib.suppress(OSError):
        os.unlink(head.log_path)


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and before is not None:
            signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def _terminal_to_log() -> Iterator[None]:
    """Send what is written to fds 1 and 2 meanwhile to the logger instead of the terminal."""
    try:
        fd1, fd2 = os.dup(1), os.dup(2)
    except OSError:  # no standard streams (a daemon): nothing to hide
        yield
        return
    with tempfile.TemporaryFile(prefix="dataspace-ray-start-") as tmp:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(fd1, 1)
            os.dup2(fd2, 2)
            os.close(fd1)
            os.close(fd2)
            tmp.seek(0)
            for line in tmp.read().decode("utf-8", "replace").splitlines():
                if line.strip():
                    logger.info("ray: %s", line)


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "START_TIMEOUT_ENV",
    "RayStartError",
    "check_cluster",
    "check_reachable",
    "connect_ray",
    "ray_endpoint",
    "resolve_start_timeout",
    "stop_local_ray",
]
