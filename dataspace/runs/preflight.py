"""Preflight: everything a run needs, checked before anything is recorded or started.

``check_spec`` runs before the spec is recorded and before Ray starts (and on its own as
``dataspace doctor SPEC``): each agent's harness and settings, its key variable, one
minimal metered call to its endpoint with its model id, its prices, the sandbox backend
and image, the local workbench (its manifest complete, its tools there), the release, the
store (written and deleted), on a resumed run the sandbox runtime it recorded, on a cluster
backend what an attempt's pod will meet (its namespace, a server-side dry run of the exact
pod, its image, whether it fits a node), and the Ray address (a bounded check that a Ray
head answers). ``check_machine`` (``dataspace
doctor``) checks this host: a local sandbox starts, runs a command and has no network;
the workbench and its tools; native harness binaries.

Each check is a :class:`~dataspace.checks.Check` naming the spec key it is about and, when
it fails, the fix. What the sandbox backend checks is its own (``SandboxBackend.preflight``
and ``host_checks``): this module never asks which backend a run has.
"""

from __future__ import annotations

import functools
import logging
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dataspace.checks import Check, one_line, timed
from dataspace.errors import ConfigError, DataSpaceError
from dataspace.llm.models import ModelSpec
from dataspace.runs.spec import RunSpec
from dataspace.sandbox import DEFAULT_BACKEND, PreflightRequest, RuntimeChange, backend_class

logger = logging.getLogger(__name__)

PREFLIGHT_MAX_TOKENS = 16
PREFLIGHT_READ_TIMEOUT = 30.0
PROBE_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Statuses of the endpoint probe that are retried with backoff (a busy or restarting
gateway), until ``PROBE_RETRY_SECONDS`` or ``PROBE_MAX_TRIES`` is spent."""
PROBE_RETRY_SECONDS = 60.0
PROBE_MAX_TRIES = 8
PROBE_MAX_BACKOFF = 8.0


@dataclass(kw_only=True)
class PreflightReport:
    """Every check that ran, in order."""

    checks: list[Check] = field(default_factory=list)

    @property
    def problems(self) -> list[Check]:
        """The failed checks."""
        return [c for c in self.checks if not c.ok]

    @property
    def ok(self) -> bool:
        """True when nothing failed (warnings allowed)."""
        return not self.problems

    @property
    def cost_usd(self) -> float:
        """The cost of the metered preflight calls."""
        return sum(c.cost_usd for c in self.checks)

    def raise_for_problems(self, source: str) -> None:
        """Raise PreflightError listing every failed check, one per line."""
        if self.problems:
            raise PreflightError(source, self.problems)


class PreflightError(ConfigError):
    """Preflight found problems; nothing was recorded or started."""

    def __init__(self, source: str, problems: list[Check]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {c.key}: {c.message}" for c in problems)
        n = len(problems)
        super().__init__(
            f"{source}: preflight found {n} problem{'s' * (n != 1)} (nothing was recorded "
            f"or started):\n{lines}"
        )


CheckFn = Callable[[Check], None]

KEYS_FROM_SHELL = "shell"
"""Keys come from the environment of the shell that runs ``dataspace`` (the default)."""
KEYS_FROM_CLUSTER = "cluster"
"""Keys come from the Ray cluster's environment (a run submitted with ``ray job submit``)."""


def check_spec(
    spec: RunSpec,
    *,
    call_models: bool = True,
    check_release: bool = True,
    ray_timeout: float | None = None,
    on_check: CheckFn | None = None,
    keys_from: str = KEYS_FROM_SHELL,
) -> PreflightReport:
    """Run every preflight check of ``spec``; never raises for a failed check.

    Args:
        spec: the validated spec.
        call_models: make the one minimal metered call per endpoint and model.
        check_release: validate the release (the controller has already done it).
        ray_timeout: seconds the Ray address may take to answer (None: the connect
            timeout of ``dataspace.runs.ray_start``).
        on_check: called with each check as it finishes (for live output).
        keys_from: where this process's environment, and so the model keys, comes from
            (:data:`KEYS_FROM_SHELL` or :data:`KEYS_FROM_CLUSTER`): a missing key's fix.
    """
    report = PreflightReport()

    def add(check: Check) -> None:
        report.checks.append(check)
        if on_check is not None:
            on_check(check)

    if check_release:
        add(_timed("release", lambda: _check_release(spec)))
    from_host = _harnesses_from_host(spec)
    for i, agent in enumerate(spec.agents):
        add(_timed(f"agents[{i}].harness", functools.partial(_check_harness, agent)))
        if from_host:  # else the backend's image carries the CLI (its preflight checks it)
            install = _check_native_install(agent, f"agents[{i}].install")
            if install is not None:
                add(install)
    called: set[tuple[Any, ...]] = set()
    for i, agent in enumerate(spec.agents):
        m = agent.model
        if m is None:
            continue
        where = f"agents[{i}].model"
        key_check = _check_key(m, where, keys_from)
        add(key_check)
        if m.price_input == m.price_output == m.price_cached_input == 0:
            add(
                Check(
                    key=f"{where}.prices",
                    ok=True,
                    warning=True,
                    message="all prices are 0: costs will be reported as $0 (set prices: "
                    "{input, cached_input, output} in USD per million tokens)",
                )
            )
        wire = _wire_of(agent.harness)
        # a native harness may reach its wire API elsewhere (settings.upstream_base)
        upstream = (agent.settings or {}).get("upstream_base") if wire != "chat" else None
        probed = replace(m, base_url=str(upstream)) if upstream else m
        ident = (probed.base_url, m.id, m.key_env, wire)
        if call_models and key_check.ok and ident not in called:
            called.add(ident)
            add(_check_endpoint(probed, where, wire=wire))
    for check in _check_sandbox(spec):
        add(check)
    add(_timed("store", lambda: _check_store(spec)))
    add(_timed("sandbox.runtime", lambda: _check_recorded_runtime(spec)))
    if spec.ray_address:
        add(_timed("ray.address", lambda: _check_ray(spec.ray_address or "", ray_timeout)))
    return report


_timed = timed
_strip = one_line


def _check_release(spec: RunSpec) -> str:
    from dataspace.release import Release

    rel = Release(spec.release)
    rel.check()
    ids = rel.task_ids()
    if spec.tasks is not None:
        unknown = sorted(set(spec.tasks) - set(ids))
        if unknown:
            raise ConfigError(f"tasks not in release {rel.root}: {unknown[:10]}")
    return f"{rel.root}: {len(ids)} tasks, valid"


def _check_harness(agent: Any) -> str:
    check_agents(RunSpec(run_id="preflight", release="", store="", agents=(agent,)))
    return f"{agent.harness} (settings valid)"


def _check_native_install(agent: Any, key: str) -> Check | None:
    """A native CLI's install on this host (None for other harnesses)."""
    from dataspace.agents.native.install import PINS, harness_state

    if agent.harness not in PINS:
        return None
    state = harness_state(agent.harness)
    if state.ready:
        return Check(key=key, ok=True, message=f"{agent.harness} {state.pinned} at {state.path}")
    return Check(
        key=key,
        ok=False,
        message=f"{agent.harness} {state.pinned} is not installed ({state.problem}): "
        f"{state.fix}; or remove agent {agent.name!r} from the spec",
    )


def _check_key(m: ModelSpec, where: str, keys_from: str = KEYS_FROM_SHELL) -> Check:
    from dataspace.llm.keys import lookup_key

    if not m.key_env:
        return Check(key=f"{where}.key_env", ok=True, message="no key variable (none sent)")
    if lookup_key(m.key_env):
        return Check(key=f"{where}.key_env", ok=True, message=f"${m.key_env} is set")
    if keys_from == KEYS_FROM_CLUSTER:
        message = (
            f"environment variable {m.key_env} is not set in the Ray job's environment: the "
            "key must be in the cluster's environment (exported where `ray start` runs on the "
            "head, or set on the head container, e.g. from the dataspace-model-keys Secret); "
            "the shell that runs `ray job submit` does not pass it on"
        )
    else:
        message = (
            f"environment variable {m.key_env} is not set; export {m.key_env}=<your key> "
            "in the shell that runs dataspace"
        )
    return Check(key=f"{where}.key_env", ok=False, message=message)


def _wire_of(harness: str) -> str:
    """The wire API a harness speaks to its model (``chat`` unless a native CLI says so)."""
    from dataspace.agents import HARNESSES

    return HARNESSES.get(harness).wire


# the minimal request of each wire API: (path, body, answer field that must be present)
PROBE_PROMPT = "Reply with the word ok."


def _probe(wire: str, model_id: str) -> tuple[str, dict[str, Any], str]:
    if wire == "responses":
        body = {"model": model_id, "input": PROBE_PROMPT, "max_output_tokens": 16}
        return "/responses", body, "output"
    if wire == "messages":
        msgs = [{"role": "user", "content": PROBE_PROMPT}]
        body = {"model": model_id, "max_tokens": PREFLIGHT_MAX_TOKENS, "messages": msgs}
        return "/v1/messages", body, "content"
    msgs = [{"role": "user", "content": PROBE_PROMPT}]
    body = {"model": model_id, "messages": msgs, "max_tokens": PREFLIGHT_MAX_TOKENS}
    return "/chat/completions", body, "choices"


def _probe_tokens(usage: Any) -> Any:
    """Token counts of any wire's ``usage`` (chat's names, or Responses'/Messages' names)."""
    from dataspace.llm.usage import token_counts

    if isinstance(usage, dict) and "prompt_tokens" not in usage and "input_tokens" in usage:
        usage = {"prompt_tokens": usage.get("input_tokens"),
                 "completion_tokens": usage.get("output_tokens")}  # fmt: skip
    return token_counts(usage if isinstance(usage, dict) else None)


def _reply_usage(data: bytes, answer_field: str) -> Any:
    """The ``usage`` of a reply: one JSON object, or an event stream.

    Some endpoints stream whatever the request asks. Raises ValueError when the body is no
    model reply at all.
    """
    from dataspace.llm.wires.sse import sse_objects

    objects = sse_objects(data)
    if not objects:
        raise ValueError("not a model reply")
    if data.lstrip().startswith(b"{"):  # one JSON reply, not a stream
        if answer_field not in objects[0]:
            raise ValueError(f"no {answer_field}")
        return objects[0].get("usage")
    usage = None
    for event in objects:
        for holder in (event, event.get("response"), event.get("message")):
            if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
                usage = holder["usage"]
    return usage


def _check_endpoint(m: ModelSpec, where: str, *, wire: str = "chat") -> Check:
    """One minimal metered call: the endpoint answers and accepts the model id.

    The call speaks the harness's wire API (Chat Completions, Responses for Codex,
    Anthropic Messages for Claude Code). Plain ``http.client`` (not the SDK, whose import
    alone takes seconds): a refused or unroutable endpoint is reported within the connect
    timeout and one retry.
    """
    from dataspace.llm.keys import lookup_key
    from dataspace.llm.usage import Prices, cost_usd

    t0 = time.monotonic()
    key = f"{where}.id" if m.base_url is None else f"{where}.base_url/id"
    base = (m.base_url or "https://api.openai.com/v1").rstrip("/")
    path, body, answer_field = _probe(wire, m.id)
    if wire == "messages" and base.endswith("/v1"):
        base = base[: -len("/v1")]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    secret = lookup_key(m.key_env) if m.key_env else None
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
        if wire == "messages":
            headers["x-api-key"] = secret
    if wire == "messages":
        headers["anthropic-version"] = "2023-06-01"
    read = min(PREFLIGHT_READ_TIMEOUT, m.read_timeout or PREFLIGHT_READ_TIMEOUT)
    problem = ""
    unreachable = 0
    tries = 0
    wait = 0.0
    while True:
        if wait:
            time.sleep(wait)
        tries += 1
        try:
            status, data, latency, retry_after = _post_json(
                f"{base}{path}", body, headers, connect=m.connect_timeout, read=read
            )
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            problem = f"model endpoint {base} cannot be reached ({reason}); check base_url"
            unreachable += 1
            if unreachable >= 3:  # a refused or unroutable endpoint: said within seconds
                break
            wait = 0.5 * unreachable
            continue
        snippet = data[:300].decode("utf-8", "replace").replace("\n", " ")
        if 200 <= status < 300:
            try:
                usage = _reply_usage(data, answer_field)
            except ValueError:
                problem = f"model endpoint {base} answered 200 with no {wire} reply: {snippet}"
                if tries >= 3:
                    break
                wait = 0.5 * tries
                continue
            tokens = _probe_tokens(usage)
            cost = cost_usd(tokens, Prices.of(m))
            n = tokens.input_tokens + tokens.output_tokens
            again = f" after {tries - 1} transient failures" if tries > 1 else ""
            return Check(
                key=key,
                ok=True,
                message=f"{base} accepted {m.id!r} in {latency:.2f} s ({n} tokens, "
                f"${cost:.6f}){again}",
                seconds=time.monotonic() - t0,
                cost_usd=cost,
            )
        if status in (401, 403, 404):
            problem = (
                f"model endpoint {base} refused model {m.id!r} with HTTP {status}: {snippet} "
                f"(check base_url, model id and the key in ${m.key_env})"
            )
            break
        problem = f"model endpoint {base} answered HTTP {status}: {snippet}"
        if status not in PROBE_TRANSIENT_STATUSES:
            break
        wait = probe_backoff(tries, retry_after)
        spent = time.monotonic() - t0
        if tries >= PROBE_MAX_TRIES or spent + wait > PROBE_RETRY_SECONDS:
            problem = (
                f"model endpoint {base} answered HTTP {status} {tries} times over "
                f"{spent:.1f} s (transient statuses are retried for up to "
                f"{PROBE_RETRY_SECONDS:.0f} s): {snippet}; retry when the endpoint recovers"
            )
            break
        logger.info("preflight: %s answered HTTP %d; retrying in %.2f s", base, status, wait)
    return Check(key=key, ok=False, message=problem, seconds=time.monotonic() - t0)


def probe_backoff(tries: int, retry_after: float | None) -> float:
    """Seconds before the next probe: the server's ``Retry-After``, else doubling from 0.5 s.

    >>> probe_backoff(1, None), probe_backoff(3, None), probe_backoff(9, None)
    (0.5, 2.0, 8.0)
    >>> probe_backoff(2, 0.05), probe_backoff(2, 600.0)
    (0.05, 8.0)
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, PROBE_MAX_BACKOFF)
    return min(0.5 * 2 ** (tries - 1), PROBE_MAX_BACKOFF)


def _post_json(
    url: str, body: Any, headers: dict[str, str], *, connect: float, read: float
) -> tuple[int, bytes, float, float | None]:
    """POST ``body`` as JSON; (status, body, seconds, Retry-After seconds or None).

    Raises OSError when unreachable.
    """
    import http.client
    import json
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn_cls = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    conn = conn_cls(parts.hostname or "", parts.port, timeout=connect)
    t0 = time.monotonic()
    try:
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(read)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        try:
            retry_after: float | None = float(resp.getheader("Retry-After") or "")
        except ValueError:
            retry_after = None
        return resp.status, data, time.monotonic() - t0, retry_after
    except http.client.HTTPException as exc:
        raise OSError(f"bad HTTP answer: {exc}") from exc
    finally:
        conn.close()


def check_backend_name(spec: RunSpec) -> None:
    """Raise ConfigError (with the nearest known name) for an unknown ``sandbox.backend``."""
    import difflib

    from dataspace.sandbox import backend_names

    name = spec.sandbox.backend
    if name not in backend_names():
        close = difflib.get_close_matches(name, backend_names(), n=1, cutoff=0.5)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"sandbox.backend {name!r} is unknown; {hint}known backends: "
            f"{', '.join(backend_names())}"
        )


def _harnesses_from_host(spec: RunSpec) -> bool:
    """Whether the run's backend binds native harness CLIs from this host's install."""
    try:
        return backend_class(spec.sandbox.backend).harnesses_from_host
    except ConfigError:  # an unknown backend: the sandbox check names it
        return False


def _check_sandbox(spec: RunSpec) -> list[Check]:
    """The backend's own checks of what the run will meet, then its checks of this host."""
    from dataspace.sandbox import get_backend

    sb = spec.sandbox
    t0 = time.monotonic()
    try:
        check_backend_name(spec)
        cls = backend_class(sb.backend)
    except ConfigError as exc:
        return [Check(key="sandbox", ok=False, message=one_line(str(exc)))]
    try:
        backend = get_backend(sb.backend, **dict(sb.options))
    except DataSpaceError as exc:
        elapsed = time.monotonic() - t0
        checks = [Check(key="sandbox", ok=False, message=one_line(str(exc)), seconds=elapsed)]
    else:
        checks = backend.preflight(sandbox_request(spec))
    return checks + cls.host_checks(dict(sb.options))


def sandbox_request(spec: RunSpec) -> PreflightRequest:
    """What the run asks of its sandbox backend (its preflight and its wait before fan-out)."""
    from dataspace.agents.native.install import PINS

    return PreflightRequest(
        image=spec.sandbox.image,
        limits=spec.limits.for_sandbox(),
        labels={
            "run": spec.run_id,
            "agent": spec.agents[0].name if spec.agents else "preflight",
        },
        relay=any(a.harness in PINS for a in spec.agents),
        distributed=bool(spec.ray_address),
    )


def _check_store(spec: RunSpec) -> str:
    from dataspace.store import open_store

    store = open_store(spec.store)
    probe = f"runs/{spec.run_id}/.preflight-{uuid.uuid4().hex[:12]}"
    store.put_bytes(probe, b"preflight\n")
    store.delete(probe)
    return f"{spec.store} writable"


def _check_recorded_runtime(spec: RunSpec) -> str:
    """On a resumed run: the sandbox runtime is the one the run recorded."""
    import json

    from dataspace.errors import NotFoundError
    from dataspace.runs.layout import RunLayout
    from dataspace.store import open_store

    store = open_store(spec.store)
    try:
        doc = json.loads(store.get_bytes(RunLayout(run_id=spec.run_id).key("spec.json")))
    except NotFoundError:
        return "a new run (nothing recorded yet)"
    recorded = (doc.get("identity") or {}).get("runtime")
    sb = spec.sandbox
    cls = backend_class(sb.backend)
    current = cls.runtime_identity(dict(sb.options), sb.image)
    problem = runtime_mismatch(
        spec.run_id, recorded, current, cls.runtime_change(dict(sb.options), spec.run_id)
    )
    if problem:
        raise ConfigError(problem)
    return f"the runtime run {spec.run_id} recorded"


def runtime_mismatch(
    run_id: str, recorded: Any, current: dict[str, Any], why: RuntimeChange
) -> str | None:
    """The one-line refusal when a run's recorded sandbox runtime differs from this one.

    ``why`` is the backend's words for it (``SandboxBackend.runtime_change``).

    >>> why = RuntimeChange(what="the runtime differs", fix="restore it")
    >>> runtime_mismatch("r", {"python": "3.11.2"}, {"python": "3.11.9"}, why)
    'sandbox: the runtime differs (changed: runtime.python); restore it'
    >>> runtime_mismatch("r", {"python": "3.11.2"}, {"python": "3.11.2"}, why) is None
    True
    """
    from dataspace.runs.spec import diff_identity

    if not isinstance(recorded, dict) or recorded == current:
        return None
    changed = [f"runtime.{p}" for p in diff_identity(recorded, current)]
    return f"sandbox: {why.what} (changed: {', '.join(changed)}); {why.fix}"


def _check_ray(address: str, timeout: float | None) -> str:
    from dataspace.runs.ray_start import DEFAULT_CONNECT_TIMEOUT, check_cluster

    return check_cluster(address, timeout=DEFAULT_CONNECT_TIMEOUT if timeout is None else timeout)


# ---- the machine --------------------------------------------------------------------------

WORKBENCH_TOOLS = ("python3", "sqlite3", "sh")
_DOCTOR_MEMORY = 512 * 1024**2  # the doctor's probe sandbox runs three tiny commands
NATIVE_HARNESSES = ("codex", "claude-code", "grok-build")


def check_machine(
    *, on_check: CheckFn | None = None, backend: str = DEFAULT_BACKEND
) -> PreflightReport:
    """Check this host: a sandbox of ``backend`` (isolation), its host checks, harnesses, Ray."""
    report = PreflightReport()

    def add(check: Check) -> None:
        report.checks.append(check)
        if on_check is not None:
            on_check(check)

    add(_timed("python", _check_python))
    add(_timed("ray", _check_ray_package))
    add(_timed(f"sandbox.{backend}", functools.partial(_check_isolation, backend)))
    try:
        host_checks = backend_class(backend).host_checks({})
    except ConfigError as exc:
        host_checks = [Check(key="sandbox", ok=False, message=one_line(str(exc)))]
    for check in host_checks:
        add(check)
    for name in NATIVE_HARNESSES:
        add(_timed(f"harness.{name}", functools.partial(_check_native, name)))
    return report


def _check_python() -> str:
    import sys

    v = sys.version_info
    if v[:2] != (3, 11):
        raise ConfigError(f"Python {v.major}.{v.minor} found; DataSpace needs Python 3.11")
    return f"Python {v.major}.{v.minor}.{v.micro}"


def _check_ray_package() -> str:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            "the ray package is missing: pip install -e . (it is a dependency)"
        ) from exc
    return f"ray {ray.__version__} installed"


def _check_isolation(name: str) -> str:
    """A real sandbox of backend ``name``: it runs a command, has the tools and no network."""
    from dataspace.errors import SandboxError
    from dataspace.sandbox import Limits, SandboxSpec, get_backend

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    ws = Path(tempfile.mkdtemp(prefix="ds-doctor-"))
    try:
        (ws / "hello.txt").write_text("hello\n")
        ws.chmod(0o755)
        (ws / "hello.txt").chmod(0o644)
        try:
            backend = get_backend(name)
            sb = backend.create(
                SandboxSpec(
                    workspace=ws,
                    limits=Limits(cpus=1, memory_bytes=_DOCTOR_MEMORY, wall_seconds=60),
                )
            )
        except SandboxError as exc:
            raise ConfigError(f"the {name} sandbox cannot start here: {exc}") from exc
        try:
            r = sb.exec("cat /workspace/hello.txt", timeout=30)
            if r.stdout.strip() != "hello":
                raise ConfigError(f"the {name} sandbox cannot read its workspace: {r.stderr!r}")
            missing = [
                t for t in WORKBENCH_TOOLS if sb.exec(f"command -v {t}", timeout=30).exit_code
            ]
            probe = (
                "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
                f'{port}), timeout=3)"'
            )
            net = sb.exec(probe, timeout=30)
            if net.exit_code == 0:
                raise ConfigError(
                    f"the {name} sandbox reached the host's loopback: network isolation is "
                    "NOT working on this host (network namespaces needed)"
                )
            enforcement = sb.info().get("enforcement", "?")
        finally:
            sb.close()
    finally:
        listener.close()
        shutil.rmtree(ws, ignore_errors=True)
    if missing:
        raise ConfigError(f"workbench tools missing in the sandbox: {', '.join(missing)}")
    return f"starts, reads /workspace, no network, limits by {enforcement}"


def _check_native(harness: str) -> str | tuple[str, bool]:
    """A native harness at its pinned version (a warning when it is missing)."""
    from dataspace.agents.native.install import harness_state

    state = harness_state(harness)
    if not state.ready:
        return (f"{state.problem} (needed only for the {harness} harness); {state.fix}", True)
    return f"{harness} {state.installed} at {state.path}"


def check_agents(spec: RunSpec) -> None:
    """Resolve every agent's harness and validate its settings before anything runs.

    Raises:
        ConfigError: an unknown harness or invalid settings (one line naming the agent).
    """
    from dataspace.agents import get_agent

    for i, a in enumerate(spec.agents):
        try:
            agent = get_agent(a.harness)
            type(agent).check_settings(dict(a.settings), has_model=a.model is not None)
        except ConfigError as exc:
            raise ConfigError(f"agents[{i}] (agent {a.name!r}): {exc}") from None


def lines(checks: Iterable[Check]) -> list[str]:
    """The screen lines of ``checks``."""
    return [c.line() for c in checks]


__all__ = [
    "KEYS_FROM_CLUSTER",
    "KEYS_FROM_SHELL",
    "Check",
    "PreflightError",
    "PreflightReport",
    "check_agents",
    "check_backend_name",
    "check_machine",
    "check_spec",
    "lines",
    "probe_backoff",
    "runtime_mismatch",
]
