"""The common runner of the native CLIs (Codex, Claude Code, Grok Build) inside a sandbox.

Each harness is the stock CLI at its pinned version, installed on the host
(``install.py``) and bound read-only into the attempt's sandbox, run with a fresh
task-local home holding exactly the official configuration. The runner only does what the
official ``NativeCliRunner`` does around the CLI, plus the relay:

- **Model path.** A ``WireRelay`` for the harness's wire API serves the attempt; inside
  the sandbox the supervisor (``_supervisor.py``) listens on ``127.0.0.1:RELAY_PORT`` and
  forwards each connection to it, so the CLI's configuration is the same on every
  backend. On the local backend the relay listens on a Unix socket in the attempt's relay
  folder, which the sandbox has bound at ``RELAY_DIR`` (no network route at all); on the
  kubernetes backend, where a socket cannot cross pods, it listens on a TCP port of the
  controller in the range the NetworkPolicies open to this pod alone
  (``info()["relay"]``). The CLI is configured with a one-attempt token; the real key
  stays on the controller.
- **The CLI.** On the local backend, the host's install (``install.py``) bound read-only
  at ``/opt/harness/<name>``; on the kubernetes backend, the runtime image's own
  ``/opt/dataspace/harnesses/<name>`` (``images/Dockerfile.runtime``), checked in the pod
  against the pinned version before the run.
- **Lifecycle.** One wall-clock deadline (the attempt's ``wall_seconds``): at it the
  supervisor sends SIGTERM to the CLI's process group, then SIGKILL after
  ``grace_seconds`` (5 s, as the official runner).
- **End states**, in the official order: the deadline passed -> ``wall_time_exhausted``;
  the run was cancelled -> ``stopped``; a non-zero exit -> the harness's own classifier
  (``model_output_exhausted``, ``context_window_exhausted``, ``runtime_error``) or
  ``runtime_error``; a clean exit -> the single-backbone validator (``runtime_error`` when
  the trace shows another model, or the relay refused one), then ``no_prediction``,
  ``invalid_prediction`` or ``submitted`` from ``/output/prediction.csv``. When the CLI
  ended (not submitted, not out of time, not cancelled) after the relay's last request
  found no endpoint (refused, reset, DNS, TLS, no byte before the timeout), its retries ran
  out on an outage: marked ``endpoint_unreachable`` under the official profile (the end
  state kept), an infrastructure fault with that code under the extended one.
- **Trace.** ``agent_start`` records the generated configuration files, the command, the
  environment's names and the harness's sandbox policy; the relay records every model call
  with the raw stream; ``harness_output`` keeps the CLI's own stdout (its JSON event
  stream) and the end of its stderr.

A harness subclass supplies ``config_files``, ``command``, ``environment``,
``classify_exit``, ``validate`` and ``summarize``.
"""

from __future__ import annotations

import errno
import json
import logging
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dataspace.agents._react_tools import (
    check_prediction,
    read_prediction_csv,
    stat_in_sandbox,
)
from dataspace.agents.base import (
    Agent,
    AgentContext,
    AgentResult,
    SandboxNeeds,
    unknown_settings,
)
from dataspace.agents.native.install import (
    DEFAULT_ROOT,
    PINS,
    SANDBOX_ROOT,
    harness_dir,
    harness_state,
)
from dataspace.errors import ConfigError, InfrastructureError, SandboxError
from dataspace.llm.client import DEFAULT_MAX_OUTPUT_TOKENS
from dataspace.sandbox.base import OUTPUT_DIR, RELAY_DIR, WORKSPACE_DIR
from dataspace.traces import AgentEnd, AgentStart, Error, HarnessOutput

logger = logging.getLogger(__name__)

RUNTIME_DIR = f"{OUTPUT_DIR}/.harness"
HOME_DIR = f"{RUNTIME_DIR}/home"
RELAY_PORT = 18765
RELAY_SOCKET_NAME = "relay.sock"
PREDICTION_PATH = f"{OUTPUT_DIR}/prediction.csv"
CONTEXT_WINDOW = 262144
GRACE_SECONDS = 5.0
STDOUT_KEEP = 16 * 1024 * 1024
_ALLOWED = {
    "context_window",
    "max_output_tokens",
    "upstream_base",
    "grace_seconds",
    "harness_sandbox",
    "request_timeout",
}


def _ports_text(ports: tuple[int, ...]) -> str:
    """Ports as ``lo-hi`` when they are a contiguous range, else listed.

    >>> _ports_text((20100, 20101, 20102)), _ports_text((20100, 20105))
    ('20100-20102', '20100,20105')
    """
    if ports and list(ports) == list(range(ports[0], ports[0] + len(ports))):
        return f"{ports[0]}-{ports[-1]}" if len(ports) > 1 else str(ports[0])
    return ",".join(map(str, ports))


@dataclass(frozen=True, kw_only=True)
class RelayPath:
    """How this attempt's sandbox reaches its relay."""

    unix: Path | None = None
    """The relay's Unix socket on the host (bound into the sandbox at ``RELAY_DIR``)."""
    bind: str | None = None
    ports: tuple[int, ...] | None = None
    address: str | None = None
    """TCP: where the relay listens on the controller, on which ports (the first free
    one), and the address the sandbox dials."""
    harness_root: str = SANDBOX_ROOT
    """Where the harness installs are inside the sandbox."""
    in_image: bool = False
    """The CLI comes from the sandbox's image (checked there), not from this host."""


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Everything a harness's configuration is generated from, for one attempt."""

    task_id: str
    prompt: str
    model_id: str
    relay_url: str
    """``http://127.0.0.1:RELAY_PORT`` inside the sandbox (no ``/v1``)."""
    token: str
    home: str
    executable: str
    context_window: int
    max_output_tokens: int
    harness_sandbox: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the CLI left: its status record, stdout and stderr."""

    exit_code: int | None
    timed_out: bool
    stopped: bool
    signal: str | None
    stdout: str
    stderr: str
    files: Mapping[str, str] = field(default_factory=dict)
    """The harness's own files named by ``trace_files``, by home-relative path."""


class NativeHarness(Agent):
    """Base of the native CLI adapters (see the module docstring)."""

    name: ClassVar[str] = ""
    default_harness_sandbox: ClassVar[str] = "off"

    def __init__(self, **settings: Any) -> None:
        self._defaults = dict(settings)
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._live: list[Any] = []
        self._version: str | None = None

    # ---- what a harness supplies ------------------------------------------------------------
    def config_files(self, plan: Plan) -> dict[str, str]:
        """Files to write, by path relative to the task-local home."""
        raise NotImplementedError

    def command(self, plan: Plan) -> list[str]:
        """The CLI's argv inside the sandbox."""
        raise NotImplementedError

    def environment(self, plan: Plan) -> dict[str, str]:
        """Harness-specific environment variables (never the real key)."""
        return {}

    def classify_exit(self, outcome: Outcome) -> tuple[str, str | None] | None:
        """The end state of a non-zero exit, when the harness's output tells one."""
        return None

    def validate(self, outcome: Outcome, expected_model: str) -> None:
        """Raise ``RuntimeError`` when the run broke the single-backbone policy."""

    def summarize(self, outcome: Outcome) -> tuple[int, int]:
        """Model turns and tool actions as the harness's own trace counts them."""
        return 0, 0

    def trace_files(self) -> tuple[str, ...]:
        """Home-relative files the validator and summary read after the run."""
        return ()

    def policy(self, plan: Plan) -> dict[str, Any]:
        """The configuration facts recorded in the attempt (``agent_start.harness_config``)."""
        return {}

    def relay_options(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """Extra ``WireRelay`` options (finish-reason normalization, image cap)."""
        return {}

    def upstream_base(self, model: Any, settings: Mapping[str, Any]) -> str:
        """The endpoint's base URL for this harness's wire API."""
        base = settings.get("upstream_base") or model.base_url
        if not base:
            raise ValueError(f"{self.name}: the model has no base_url; set it in the models file")
        return str(base)

    # ---- protocol ---------------------------------------------------------------------------
    @classmethod
    def check_settings(cls, settings: Mapping[str, Any], *, has_model: bool) -> None:
        """Refuse a spec this harness cannot run (before any attempt).

        Raises:
            ConfigError: no model, an unknown setting or a bad ``harness_sandbox``.
        """
        if not has_model:
            raise ConfigError(f"{cls.name} needs a model: add `model:` to the agent")
        extra = unknown_settings(settings, _ALLOWED)
        if extra:
            raise ConfigError(
                f"{cls.name} settings: unknown keys {extra} (allowed: {sorted(_ALLOWED)})"
            )
        mode = settings.get("harness_sandbox", cls.default_harness_sandbox)
        if mode not in ("on", "off"):
            raise ConfigError(f"{cls.name} settings.harness_sandbox: 'on' or 'off', not {mode!r}")

    def sandbox_needs(self) -> SandboxNeeds:
        """The relay socket and the CLI's install, bound read-only at the same path.

        A missing install binds nothing: ``run`` then ends the attempt with the fix.
        """
        host = harness_dir(self.name)
        if not host.is_dir():
            return SandboxNeeds(relay=True)
        return SandboxNeeds(
            relay=True,
            runtime_binds=((str(harness_dir(self.name)), f"{SANDBOX_ROOT}/{self.name}"),),
        )

    def cancel(self) -> None:
        """Stop the runs of this agent (SIGTERM to the CLI, then SIGKILL; ``stopped``)."""
        self._cancel.set()
        with self._lock:
            live = list(self._live)
        for sb in live:
            self._signal_supervisor(sb)

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run the CLI on one task to an end state."""
        from dataspace.agents.protocol import end_on_outage
        from dataspace.agents.smolagents_adapter import relation_prompt
        from dataspace.llm.wire_relay import WireRelay

        t0 = time.monotonic()
        merged = {**self._defaults, **dict(ctx.settings)}
        model = merged.get("model")
        extra = unknown_settings(merged, _ALLOWED)
        problem = None
        path: RelayPath | None = None
        if model is None:
            problem = f"{self.name} needs a model: add `model:` to the agent in the run spec"
        elif extra:
            problem = f"{self.name} settings: unknown keys {extra} (allowed: {sorted(_ALLOWED)})"
        else:
            path = self._relay_path(ctx)
            if path is None:
                problem = (
                    f"{self.name}: this sandbox offers no path to a relay (neither a bound "
                    "socket nor relay ports); native harnesses run on the local and "
                    "kubernetes sandbox backends"
                )
            else:
                problem = self._check_install(ctx, path)
        if problem is not None:
            ctx.events.emit(Error(message=problem))
            return AgentResult(end_state="runtime_error", error=problem)
        assert path is not None and model is not None
        try:
            upstream = self.upstream_base(model, merged)
            relay = WireRelay(
                wire=self.wire,
                model=model,
                upstream_base=upstream,
                events=ctx.events,
                time_left=ctx.remaining,
                request_timeout=float(merged.get("request_timeout", 900.0)),
                on_call=ctx.usage_sink,
                **self.relay_options(merged),
            )
        except ValueError as exc:
            ctx.events.emit(Error(message=str(exc)))
            return AgentResult(end_state="runtime_error", error=str(exc))
        plan = Plan(
            task_id=ctx.task.task_id,
            prompt=relation_prompt(
                ctx.task.task_id, ctx.task.question, workspace=WORKSPACE_DIR, output=PREDICTION_PATH
            ),
            model_id=model.id,
            relay_url=f"http://127.0.0.1:{RELAY_PORT}",
            token=relay.token,
            home=HOME_DIR,
            executable=f"{path.harness_root}/{self.name}/bin/{PINS[self.name].executable}",
            context_window=int(merged.get("context_window", CONTEXT_WINDOW)),
            max_output_tokens=int(merged.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)),
            harness_sandbox=str(merged.get("harness_sandbox", self.default_harness_sandbox)),
            settings=merged,
        )
        try:
            files = self.config_files(plan)
            argv = self.command(plan)
        except ValueError as exc:
            relay.close()
            ctx.events.emit(Error(message=str(exc)))
            return AgentResult(end_state="runtime_error", error=str(exc))
        env = {
            "HOME": HOME_DIR,
            "PATH": f"{path.harness_root}/{self.name}/bin:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "TMPDIR": "/tmp",
            "DATASPACE_TOOLS_MANIFEST": "/opt/dataspace/TOOLS.md",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "NUMEXPR_NUM_THREADS": "1",
            **self.environment(plan),
        }
        wall = max(1.0, ctx.remaining())
        grace = float(merged.get("grace_seconds", GRACE_SECONDS))
        sup: dict[str, Any] = {
            "port": RELAY_PORT,
            "argv": argv,
            "env": env,
            "cwd": OUTPUT_DIR,
            "wall_seconds": wall,
            "grace_seconds": grace,
            "stdout": f"{RUNTIME_DIR}/stdout.jsonl",
            "stderr": f"{RUNTIME_DIR}/stderr.log",
            "status": f"{RUNTIME_DIR}/status.json",
            "pid_file": f"{RUNTIME_DIR}/supervisor.pid",
        }
        ctx.events.emit(
            AgentStart(
                harness=self.name,
                model=model.id,
                wire=self.wire,
                version=self._version,
                prompt_contract="relation-v2",
                upstream=upstream,
                limits={"wall_seconds": ctx.limits.wall_seconds, "grace_seconds": grace},
                harness_config={
                    "files": {k: v.replace(relay.token, "<relay-token>") for k, v in files.items()},
                    "command": [a.replace(relay.token, "<relay-token>") for a in argv],
                    "environment_keys": sorted(env),
                    "relay_path": (
                        f"unix socket bound at {RELAY_DIR}"
                        if path.unix is not None
                        else f"tcp to {path.address}, ports {_ports_text(path.ports or ())}"
                    ),
                    "harness_from": "sandbox image" if path.in_image else "host install, bound",
                    **self.policy(plan),
                },
            )
        )
        sb = ctx.sandbox
        outcome: Outcome | None = None
        try:
            sup.update(self._serve(relay, path))
            sb.write_file(f"{RUNTIME_DIR}/supervisor.json", json.dumps(sup).encode())
            sb.write_file(f"{RUNTIME_DIR}/supervisor.py", _supervisor_source())
            for rel, text in files.items():
                sb.write_file(f"{HOME_DIR}/{rel}", text.encode())
            with self._lock:
                self._live.append(sb)
            if self._cancel.is_set():
                outcome = Outcome(
                    exit_code=None, timed_out=False, stopped=True, signal=None, stdout="", stderr=""
                )
            else:
                res = sb.exec(
                    [
                        "python3",
                        "-I",
                        "-S",
                        f"{RUNTIME_DIR}/supervisor.py",
                        f"{RUNTIME_DIR}/supervisor.json",
                    ],
                    timeout=wall + grace + 60.0,
                    cwd=OUTPUT_DIR,
                )
                outcome = self._outcome(sb, res)
        finally:
            with self._lock:
                if sb in self._live:
                    self._live.remove(sb)
            relay.close()
        end_state, error = self._end_state(outcome, relay, model.id, sb)
        ended = end_state not in ("submitted", "wall_time_exhausted", "stopped")
        # an outage ended it when the CLI gave up on a request that found no endpoint
        unreachable = bool(ended and relay.unreachable)
        if unreachable:  # the end state stays the CLI's own (the official outcome)
            try:
                error = end_on_outage(
                    self.name, str(relay.unreachable_error), merged.get("protocol")
                )
            except InfrastructureError:
                self._cleanup(sb)
                raise
        elif relay.infra_errors and ended:
            self._cleanup(sb)
            raise InfrastructureError(
                f"{self.name}: {relay.infra_errors[-1]}", code="model_endpoint"
            )
        turns, actions = self.summarize(outcome)
        self._cleanup(sb)
        usage = relay.snapshot()
        working = time.monotonic() - t0
        ctx.events.emit(
            HarnessOutput(
                harness=self.name,
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                signal=outcome.signal,
                stdout=outcome.stdout,
                stderr=outcome.stderr[-8000:],
            )
        )
        submitted = _scored_path(sb) if end_state == "submitted" else None
        ctx.events.emit(
            AgentEnd(
                end_state=end_state,
                model_turns=turns,
                tool_actions=actions,
                submitted_path=submitted,
                error=error,
                working_seconds=round(working, 6),
                usage=usage.to_dict(),
                relay_calls=relay.calls,
                refused_models=relay.refused_models,
            )
        )
        return AgentResult(
            end_state=end_state,
            submitted_path=submitted,
            model_turns=turns,
            tool_actions=actions,
            usage=usage,
            error=error,
            working_seconds=working,
            endpoint_unreachable=unreachable,
        )

    # ---- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _relay_path(ctx: AgentContext) -> RelayPath | None:
        """The socket bound into a local sandbox, or the relay ports of a pod."""
        if ctx.relay_dir is not None:
            return RelayPath(unix=Path(ctx.relay_dir) / RELAY_SOCKET_NAME)
        info = ctx.sandbox.info()
        relay = info.get("relay") if isinstance(info, dict) else None
        if not isinstance(relay, dict):
            return None
        return RelayPath(
            bind=str(relay["bind"]),
            ports=tuple(int(p) for p in relay["ports"]),
            address=str(relay["address"]),
            harness_root=DEFAULT_ROOT,
            in_image=True,
        )

    def _check_install(self, ctx: AgentContext, path: RelayPath) -> str | None:
        """Why the pinned CLI cannot run in this sandbox, or None (it can)."""
        pin = PINS[self.name]
        if not path.in_image:
            state = harness_state(self.name)
            self._version = state.installed
            if not state.ready:
                return f"{self.name} {state.pinned} is not installed: {state.problem}; {state.fix}"
            return None
        home = f"{path.harness_root}/{self.name}"
        exe = f"{home}/bin/{pin.executable}"
        res = ctx.sandbox.exec(
            ["/bin/sh", "-c", 'test -x "$1" && cat "$2"', "sh", exe, f"{home}/VERSION"],
            timeout=60.0,
        )
        found = res.stdout.strip() if res.exit_code == 0 else None
        self._version = found
        if found == pin.version:
            return None
        why = f"{exe} is missing" if found is None else f"{home}/VERSION says {found!r}"
        return (
            f"{self.name} {pin.version} is not in the sandbox image: {why}; build the runtime "
            "image with images/Dockerfile.runtime (it installs Codex and Claude Code under "
            f"{path.harness_root}), or add {self.name} there in a derived image"
        )

    @staticmethod
    def _serve(relay: Any, path: RelayPath) -> dict[str, Any]:
        """Start the relay; the supervisor's upstream (``socket`` or ``connect``)."""
        if path.unix is not None:
            relay.serve_unix(path.unix)
            return {"socket": f"{RELAY_DIR}/{RELAY_SOCKET_NAME}", "sweep": "all"}
        assert path.bind is not None and path.ports is not None and path.address is not None
        for port in path.ports:
            try:
                relay.serve_tcp(path.bind, port)
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    continue
                raise InfrastructureError(
                    f"relay: cannot listen on {path.bind}:{port}: {exc}", code="relay"
                ) from exc
            # a pod's own init and exec helper run as the sandbox user: spare them
            return {"connect": [path.address, port], "sweep": "new"}
        raise InfrastructureError(
            f"relay: every port {_ports_text(path.ports)} of {path.bind} is in use; add ports "
            "to sandbox.options.relay_ports (and the NetworkPolicies of "
            "k8s/base/harness-relay.yaml)",
            code="relay",
        )

    def _outcome(self, sb: Any, res: Any) -> Outcome:
        def read(name: str, limit: int) -> str:
            try:
                return sb.read_file(f"{RUNTIME_DIR}/{name}", max_bytes=limit).decode(
                    "utf-8", "replace"
                )
            except OSError:
                return ""

        try:
            status = json.loads(read("status.json", 65536) or "{}")
        except ValueError:
            status = {}
        stdout = read("stdout.jsonl", STDOUT_KEEP)
        stderr = read("stderr.log", STDOUT_KEEP)
        files = {rel: read(f"home/{rel}", STDOUT_KEEP) for rel in self.trace_files()}
        if not status:  # the supervisor itself died (the sandbox's deadline, say)
            stderr += "\n" + res.stderr[-4000:]
            return Outcome(
                exit_code=res.exit_code,
                timed_out=res.status == "deadline",
                stopped=self._cancel.is_set(),
                signal=None,
                stdout=stdout,
                stderr=stderr,
                files=files,
            )
        return Outcome(
            exit_code=status.get("exit_code"),
            timed_out=bool(status.get("timed_out")),
            stopped=bool(status.get("stopped")) or self._cancel.is_set(),
            signal=status.get("signal"),
            stdout=stdout,
            stderr=stderr,
            files=files,
        )

    def _end_state(
        self, outcome: Outcome, relay: Any, model_id: str, sb: Any
    ) -> tuple[str, str | None]:
        if outcome.stopped:
            return "stopped", None
        if outcome.timed_out:
            return "wall_time_exhausted", f"{self.name} ran past the wall-clock deadline"
        if outcome.exit_code != 0:
            found = self.classify_exit(outcome)
            if found is not None:
                return found
            tail = outcome.stderr.strip().splitlines()[-1:] or [""]
            return (
                "runtime_error",
                f"{self.name} exited with code {outcome.exit_code}: {tail[0][:300]}",
            )
        try:
            if relay.refused_models:
                raise RuntimeError(
                    f"{self.name} asked for model(s) outside the single-backbone policy: "
                    f"{', '.join(sorted(set(relay.refused_models)))}; expected {model_id}"
                )
            self.validate(outcome, model_id)
        except RuntimeError as exc:
            return "runtime_error", f"run validation failed: {exc}"
        try:  # a link is followed inside the sandbox, as the official runner copies it
            _, data = read_prediction_csv(sb)
        except FileNotFoundError:
            return "no_prediction", "required prediction.csv was not created"
        except (OSError, ValueError) as exc:
            return "invalid_prediction", f"prediction.csv is not usable: {exc}"
        try:
            check_prediction(data)
        except ValueError as exc:
            return "invalid_prediction", str(exc)
        return "submitted", None

    @staticmethod
    def _signal_supervisor(sb: Any) -> None:
        pid_file = shlex.quote(f"{RUNTIME_DIR}/supervisor.pid")
        script = f'p=$(cat {pid_file} 2>/dev/null) && kill -TERM "$p"; exit 0'
        try:
            sb.exec(["/bin/sh", "-c", script], timeout=30.0)
        except SandboxError:
            logger.warning("could not signal the harness supervisor", exc_info=True)

    @staticmethod
    def _cleanup(sb: Any) -> None:
        try:
            sb.exec(["rm", "-rf", "--", RUNTIME_DIR], timeout=60.0)
        except SandboxError:
            logger.warning("could not remove the harness's runtime files", exc_info=True)


def _supervisor_source() -> bytes:
    return Path(__file__).with_name("_supervisor.py").read_bytes()


def jsonl(text: str) -> list[dict[str, Any]]:
    r"""The JSON objects of a JSON-lines text (other lines skipped).

    >>> jsonl('{"a": 1}\nnot json\n[1]\n')
    [{'a': 1}]
    """
    out = []
    for line in text.splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict):
            out.append(v)
    return out


def _scored_path(sb: Any) -> str:
    """The file ``prediction.csv`` names (a link followed inside ``/output``), to collect."""
    try:
        return stat_in_sandbox(sb, PREDICTION_PATH)[0]
    except (OSError, ValueError):
        return PREDICTION_PATH


__all__ = ["NativeHarness", "Outcome", "Plan", "RelayPath", "jsonl"]
