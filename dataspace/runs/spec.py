"""Run specs: what to run, validated once at the edge and fingerprinted.

A spec (YAML or JSON) names the release, the store, the agents, limits, the sandbox and
how much to run at once. Example::

    schema_version: "1.0"
    run_id: demo
    release: ./demo-out/release        # a folder (or file:// URI)
    store: ./demo-out/store            # file:// folder or s3://bucket/prefix
    agents:
      - name: gold
        harness: gold
    protocol: official                 # or extended (dataspace.agents.protocol)
    limits: {model_turns: 60, tool_actions: 50, wall_seconds: 1800, command_timeout: 180}
    sandbox: {backend: local, cpus: 4, memory: 16g, pids: 256, tmp: 2g}
    concurrency: 2                     # agents running at once
    # prestart: 8                      # sandboxes prepared ahead (opt-in; default 0)
    attempts: 1

Limits and resources left out take the official baseline's values (``dataspace.limits``,
the values of this example).

Identity: the fingerprint covers what changes results (release content, agents, models,
protocol profile, limits, sandbox runtime, attempts, task selection), not how fast they are produced
(concurrency, prestart, Ray address), so a run can be resumed with more workers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError
from dataspace.limits import AGENT_FIELDS, DEFAULT_LIMITS, Limits, format_size
from dataspace.llm.models import ModelSpec, parse_model_entry
from dataspace.sandbox import DEFAULT_BACKEND
from dataspace.validation import Reader

SPEC_SCHEMA_VERSION = "1.0"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTkmgt](?:i|I)?[Bb]?|[Bb])?\s*$")
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4}
# A placeholder left in a spec: FILL_IN, CHANGE_ME, REPLACE_ME, <your-model-id>.
_PLACEHOLDER_RE = re.compile(
    r"(?<![A-Za-z0-9])(FILL[_-]?IN|CHANGE[_-]?ME|REPLACE[_-]?ME)(?![A-Za-z0-9])"
    r"|^\s*<[^<>]+>\s*$"
)


MIN_MEMORY_BYTES = 256 * 1024**2
"""The least ``sandbox.memory`` a run accepts: below it no agent's tools start."""
MIN_FOLDER_BYTES = 1024**2
"""The least ``sandbox.tmp`` and ``sandbox.output`` a run accepts."""
MAX_SIZE_BYTES = 1024**5
"""Any size above 1 PiB is a typo, never a sandbox's resource."""


def parse_size(value: object, *, what: str, minimum: int = 1, maximum: int = MAX_SIZE_BYTES) -> int:
    """Bytes from a size string, read the way Docker and Kubernetes read it.

    ``Ki Mi Gi Ti`` (``KiB``...) are powers of 1024 and ``K M G T`` (``KB``...) powers of
    1000, as in Kubernetes; a lower-case unit (``16g``, ``512m``, ``2gb``) is Docker's
    notation, powers of 1024; ``b`` is bytes. A number without a unit is refused with the
    unit it most likely lacks (``16`` means 16 bytes to Docker, never what was meant).

    >>> parse_size("2GiB", what="memory"), parse_size("16g", what="memory")
    (2147483648, 17179869184)
    >>> parse_size("512M", what="memory"), parse_size("512Mi", what="memory")
    (512000000, 536870912)
    >>> try:
    ...     parse_size(16, what="sandbox.memory")
    ... except ConfigError as exc:
    ...     print(str(exc)[:49])
    sandbox.memory: 16 has no unit; did you mean 16g?
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"{what}: expected a size such as 2GiB, 16g or 512Mi, got {value!r}")
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ConfigError(f"{what}: cannot read size {value!r} (use e.g. 2GiB, 16g, 512Mi, 1G)")
    unit = m.group(2) or ""
    if not unit:
        raise ConfigError(
            f"{what}: {value} has no unit; did you mean {_unit_hint(m.group(1))}? (units: b, k, "
            "m, g, t as Docker reads them, or Ki, Mi, Gi, Ti)"
        )
    letter = unit[:1]
    if letter in ("B", "b"):
        factor = 1
    elif letter.islower() or "i" in unit or "I" in unit:
        factor = 1024 ** _POWERS[letter.upper()]
    else:
        factor = 1000 ** _POWERS[letter]
    number = float(m.group(1))
    if number * factor > maximum:
        raise ConfigError(
            f"{what}: {value} is more than {format_size(maximum)}; write the size meant (e.g. 16g)"
        )
    n = int(number * factor)
    if n < minimum:
        raise ConfigError(f"{what}: {value} is less than the minimum, {format_size(minimum)}")
    return n


def _unit_hint(number: str) -> str:
    """The size a unitless number most likely meant (a few gibibytes, or many mebibytes).

    >>> _unit_hint("16"), _unit_hint("2048"), _unit_hint("17179869184")
    ('16g', '2048m', '17179869184b')
    """
    n = float(number)
    text = number if "." in number else str(int(n))
    if n < 1024:
        return f"{text}g"
    if n < 1024**2:
        return f"{text}m"
    return f"{text}b"


def is_placeholder(value: str) -> bool:
    """True for a value left to be filled in (``FILL_IN``, ``<model-id>``, ``CHANGE_ME``).

    >>> is_placeholder("FILL_IN"), is_placeholder("https://FILL_IN/v1"), is_placeholder("gpt-5")
    (True, True, False)
    >>> is_placeholder("<your model id>"), is_placeholder("fill-in-the-blanks-7b")
    (True, False)
    """
    return bool(_PLACEHOLDER_RE.search(value))


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent of the run: a harness, optionally with a model, and its settings."""

    name: str
    harness: str
    model: ModelSpec | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SandboxConfig:
    """Sandbox backend and image; its resources are on the run's ``Limits``."""

    backend: str = DEFAULT_BACKEND
    image: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """A validated run spec."""

    run_id: str
    release: str
    store: str
    agents: tuple[AgentSpec, ...]
    limits: Limits = field(default_factory=Limits)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    concurrency: int = 2
    attempts: int = 1
    tasks: tuple[str, ...] | None = None
    ray_address: str | None = None
    ray_start_timeout: float | None = None  # None: dataspace.runs.ray_start's default
    max_infra_retries: int = 3
    fail_fast_after: int = 3
    spend_limit_usd: float | None = None
    prestart: int | None = None  # None: dataspace.runs.turns' default
    protocol: str = "official"
    schema_version: str = SPEC_SCHEMA_VERSION

    def identity(self, release_fingerprint: str) -> dict[str, Any]:
        """The part of the spec that decides results (what the fingerprint covers).

        Release content, task selection, each agent's harness, model id and endpoint and
        settings, limits, sandbox runtime, protocol profile and attempts. Not what only
        changes pace or price:
        concurrency, ``prestart``, ``max_concurrency``, retry pacing (``settings.retry``, timeouts,
        ``max_infra_retries``, ``fail_fast_after``), prices (costs are recomputed from
        tokens with the prices of the latest invocation), the spend limit, where the
        release is read from, the store and the Ray address.
        """
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "release_fingerprint": release_fingerprint,
            "tasks": None if self.tasks is None else list(self.tasks),
            "agents": [agent_identity(a) for a in self.agents],
            "limits": self.limits.agent_budgets(),
            "sandbox": sandbox_identity(self),
            "attempts": self.attempts,
            "protocol": self.protocol,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-safe)."""
        return json.loads(json.dumps(asdict(self), default=list))


def sandbox_identity(spec: RunSpec) -> dict[str, Any]:
    """The spec's ``sandbox`` as the fingerprint has always recorded it.

    Backend, image and options with the sandbox's resources (``cpus``, ``memory_bytes``,
    ``pids``, ``tmp_bytes``, ``output_bytes``), which live on the run's ``Limits``.
    """
    sb = spec.sandbox
    return {"backend": sb.backend, **spec.limits.resources(), "image": sb.image,
            "options": dict(sb.options)}  # fmt: skip


# settings that only pace model calls (they never change what an attempt does)
PACE_SETTINGS = frozenset({"retry"})


def agent_identity(agent: AgentSpec) -> dict[str, Any]:
    """What of one agent decides its outcomes (see ``RunSpec.identity``)."""
    return {
        "name": agent.name,
        "harness": agent.harness,
        "model": agent.model.endpoint_identity if agent.model else None,
        "settings": {k: v for k, v in agent.settings.items() if k not in PACE_SETTINGS},
    }


def fingerprint(identity: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical JSON encoding.

    >>> fingerprint({"b": 1, "a": [1, 2]})[:12]
    '94a786c3662b'
    """
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()


def diff_identity(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Full paths (``agents[1].model.id``) whose values differ between two identities.

    >>> diff_identity({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}})
    ['b.c']
    >>> diff_identity({"agents": [{"m": 1}, {"m": 2}]}, {"agents": [{"m": 1}, {"m": 3}]})
    ['agents[1].m']
    """
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        out.extend(_diff(old.get(key), new.get(key), f"{prefix}{key}"))
    return out


def _diff(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return diff_identity(a, b, prefix=f"{path}.")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for p in _diff(x, y, f"{path}[{i}]")
        ]
    same = json.dumps(a, sort_keys=True, default=list) == json.dumps(
        b, sort_keys=True, default=list
    )
    return [] if same else [path]


# ---- parsing -------------------------------------------------------------------------------


def load_spec(path: Path | str) -> RunSpec:
    """Read a YAML or JSON run spec file; relative paths resolve against its folder."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read run spec: {exc.strerror or exc}") from exc
    try:
        obj = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        marked = exc if isinstance(exc, yaml.MarkedYAMLError) else None
        mark = None if marked is None else marked.problem_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = None if marked is None else marked.problem
        raise ConfigError(f"{path}:{where} invalid YAML: {problem or exc}") from exc
    return parse_spec(obj, source=str(path), base_dir=path.parent)


def parse_spec(obj: object, *, source: str, base_dir: Path | None = None) -> RunSpec:
    """Validate a spec object; every problem is a ConfigError naming ``source`` and the key.

    Every key is checked by type; an unknown key is refused with the nearest known one
    (``ray.adress``: did you mean ``address``?); a value left as a placeholder
    (``FILL_IN``, ``<model-id>``) is an error wherever it is.
    """
    r = _Reader(source)
    d = r.mapping(obj, "spec")
    r.no_placeholders(d, "")
    version = str(d.get("schema_version", SPEC_SCHEMA_VERSION))
    if version != SPEC_SCHEMA_VERSION:
        r.fail(
            "schema_version",
            f"unsupported {version!r} (this version reads {SPEC_SCHEMA_VERSION!r})",
        )
    r.no_extra(d, _TOP_KEYS, "spec")
    run_id = r.name(d.get("run_id"), "run_id")
    release = _location(r.string(d.get("release"), "release"), base_dir)
    store = _location(r.string(d.get("store"), "store"), base_dir)
    agents_raw = d.get("agents")
    if not isinstance(agents_raw, list) or not agents_raw:
        r.fail("agents", "must be a non-empty list")
    agents = tuple(_agent(r, a, f"agents[{i}]") for i, a in enumerate(agents_raw))
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        r.fail("agents", f"agent names must be unique, got {names}")
    lim = r.mapping(d.get("limits", {}), "limits")
    r.no_extra(lim, set(AGENT_FIELDS), "limits")
    sb = r.mapping(d.get("sandbox", {}), "sandbox")
    r.no_extra(sb, {"backend", *_RESOURCE_KEYS, "image", "options"}, "sandbox")
    dl = DEFAULT_LIMITS
    limits = Limits(
        model_turns=r.positive_int(
            lim.get("model_turns", dl.model_turns), "limits.model_turns", maximum=_MAX_COUNT
        ),
        tool_actions=r.positive_int(
            lim.get("tool_actions", dl.tool_actions), "limits.tool_actions", maximum=_MAX_COUNT
        ),
        wall_seconds=r.positive(
            lim.get("wall_seconds", dl.wall_seconds), "limits.wall_seconds", maximum=_MAX_SECONDS
        ),
        command_timeout=r.positive(
            lim.get("command_timeout", dl.command_timeout),
            "limits.command_timeout",
            maximum=_MAX_SECONDS,
        ),
        cpus=r.positive(sb.get("cpus", dl.cpus), "sandbox.cpus", maximum=_MAX_CPUS),
        memory_bytes=r.size(sb, "memory", dl.memory_bytes, "sandbox", minimum=MIN_MEMORY_BYTES),
        pids=r.positive_int(sb.get("pids", dl.pids), "sandbox.pids", maximum=_MAX_PIDS),
        tmp_bytes=r.size(sb, "tmp", dl.tmp_bytes, "sandbox", minimum=MIN_FOLDER_BYTES),
        output_bytes=r.size(sb, "output", dl.output_bytes, "sandbox", minimum=MIN_FOLDER_BYTES),
    )
    sandbox = SandboxConfig(
        backend=r.string(sb.get("backend", _default(SandboxConfig, "backend")), "sandbox.backend"),
        image=r.optional_string(sb.get("image"), "sandbox.image"),
        options=r.mapping(sb.get("options", {}), "sandbox.options"),
    )
    tasks_raw = d.get("tasks")
    tasks = None
    if tasks_raw is not None:
        if not isinstance(tasks_raw, list) or not all(isinstance(t, str) for t in tasks_raw):
            r.fail("tasks", "must be a list of task ids")
        tasks = tuple(tasks_raw)
    ray = r.mapping(d.get("ray") or {}, "ray")
    r.no_extra(ray, {"address", "start_timeout"}, "ray")
    ray_start = ray.get("start_timeout")
    spend = d.get("spend_limit_usd")
    from dataspace.agents.protocol import DEFAULT_PROTOCOL, PROFILES

    protocol = r.string(d.get("protocol", DEFAULT_PROTOCOL), "protocol")
    if protocol not in PROFILES:
        known = ", ".join(sorted(PROFILES))
        r.fail("protocol", f"unknown profile {protocol!r} (use one of: {known})")
    return RunSpec(
        run_id=run_id,
        release=release,
        store=store,
        agents=agents,
        limits=limits,
        sandbox=sandbox,
        concurrency=r.positive_int(
            d.get("concurrency", _default(RunSpec, "concurrency")),
            "concurrency",
            maximum=MAX_CONCURRENCY,
        ),
        attempts=r.positive_int(
            d.get("attempts", _default(RunSpec, "attempts")), "attempts", maximum=_MAX_ATTEMPTS
        ),
        tasks=tasks,
        ray_address=r.optional_string(ray.get("address"), "ray.address"),
        ray_start_timeout=None
        if ray_start is None
        else r.positive(ray_start, "ray.start_timeout", maximum=_MAX_SECONDS),
        max_infra_retries=r.positive_int(
            d.get("max_infra_retries", _default(RunSpec, "max_infra_retries")),
            "max_infra_retries",
            allow_zero=True,
            maximum=_MAX_RETRIES,
        ),
        fail_fast_after=r.positive_int(
            d.get("fail_fast_after", _default(RunSpec, "fail_fast_after")),
            "fail_fast_after",
            allow_zero=True,
            maximum=_MAX_COUNT,
        ),
        spend_limit_usd=None if spend is None else r.positive(spend, "spend_limit_usd"),
        prestart=None
        if d.get("prestart") is None
        else r.positive_int(d["prestart"], "prestart", allow_zero=True, maximum=MAX_CONCURRENCY),
        protocol=protocol,
    )


_TOP_KEYS = {
    "schema_version",
    "run_id",
    "release",
    "store",
    "agents",
    "limits",
    "sandbox",
    "concurrency",
    "attempts",
    "tasks",
    "ray",
    "max_infra_retries",
    "fail_fast_after",
    "spend_limit_usd",
    "prestart",
    "protocol",
}
# the spec's names of the sandbox's resources (``memory: 16g``; Limits.memory_bytes ...)
_RESOURCE_KEYS = ("cpus", "memory", "pids", "tmp", "output")
# the fingerprint's names of them -> the keys a user writes (a refusal names the latter)
_IDENTITY_TO_SPEC_KEYS = {
    "sandbox.memory_bytes": "sandbox.memory",
    "sandbox.tmp_bytes": "sandbox.tmp",
    "sandbox.output_bytes": "sandbox.output",
}
# upper bounds: past them a value is a typo, not a setting
MAX_CONCURRENCY = 100_000
_MAX_ATTEMPTS = 1_000
_MAX_COUNT = 1_000_000
_MAX_RETRIES = 1_000
_MAX_SECONDS = 30 * 24 * 3600.0
_MAX_CPUS = 4096.0
_MAX_PIDS = 4_194_304  # the kernel's largest pid_max


def spec_key(identity_path: str) -> str:
    """The spec key a user writes for a path of the fingerprint's identity.

    >>> spec_key("sandbox.memory_bytes"), spec_key("limits.model_turns")
    ('sandbox.memory', 'limits.model_turns')
    """
    return _IDENTITY_TO_SPEC_KEYS.get(identity_path, identity_path)


def _default(cls: type, name: str) -> Any:
    """The default of one field of a spec record (defaults live only on the records)."""
    return cls.__dataclass_fields__[name].default  # type: ignore[attr-defined]


def _location(value: str, base_dir: Path | None) -> str:
    if "://" in value:
        return value
    p = Path(value).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    return str(p.resolve())


def _agent(r: _Reader, obj: object, where: str) -> AgentSpec:
    d = r.mapping(obj, where)
    r.no_extra(d, {"name", "harness", "model", "settings"}, where)
    name = r.name(d.get("name"), f"{where}.name")
    harness = r.string(d.get("harness"), f"{where}.harness")
    model = None
    if d.get("model") is not None:
        model = parse_model_entry(r, d["model"], f"{where}.model")
    settings = r.mapping(d.get("settings", {}), f"{where}.settings")
    return AgentSpec(name=name, harness=harness, model=model, settings=settings)


def _placeholders(v: object, key: str) -> Iterator[tuple[str, str]]:
    """(key path, value) of every placeholder in ``v``, in document order."""
    if isinstance(v, str):
        if is_placeholder(v):
            yield key, v
    elif isinstance(v, Mapping):
        for k, x in v.items():
            yield from _placeholders(x, f"{key}.{k}" if key else str(k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _placeholders(x, f"{key}[{i}]")


_FILL_HINTS = (
    (re.compile(r"^release$"), "the release folder or URI (file://..., s3://...)"),
    (re.compile(r"^store$"), "a folder or s3:// URI where the run's results go"),
    (re.compile(r"\.prices\.input$"), "the model's price in USD per million input tokens"),
    (
        re.compile(r"\.prices\.cached_input$"),
        "the model's price in USD per million cached input tokens",
    ),
    (re.compile(r"\.prices\.output$"), "the model's price in USD per million output tokens"),
    (re.compile(r"\.model\.id$"), "the model id the endpoint serves"),
    (re.compile(r"\.model\.base_url$"), "the endpoint's base URL (https://.../v1)"),
    (re.compile(r"\.model\.key_env$"), "the NAME of the environment variable holding the key"),
)


def _fill_hint(key: str) -> str:
    """What a placeholder at ``key`` stands for.

    >>> _fill_hint("agents[2].model.prices.output")
    "the model's price in USD per million output tokens"
    >>> _fill_hint("sandbox.options.namespace")
    'the real value'
    """
    return next((hint for pattern, hint in _FILL_HINTS if pattern.search(key)), "the real value")


class _Reader(Reader):
    """The spec's reader: names, sizes and placeholders besides the generic reads."""

    def no_placeholders(self, v: object, key: str) -> None:
        """Refuse every placeholder left in ``v`` at once: one line each, with what to put."""
        found = list(_placeholders(v, key))
        if not found:
            return
        lines = [
            f"{self.source}: {k or 'spec'}: {x!r} is a placeholder; put {_fill_hint(k)} here"
            for k, x in found
        ]
        if len(lines) == 1:
            raise ConfigError(lines[0])
        raise ConfigError(
            f"{self.source}: {len(lines)} placeholders left to fill in:\n"
            + "\n".join(f"  {line}" for line in lines)
        )

    def name(self, v: object, key: str) -> str:
        s = self.string(v, key)
        if not _NAME_RE.match(s):
            self.fail(key, f"{s!r} must be letters, digits and . _ @ + - (max 128)")
        return s

    def size(
        self, d: Mapping[str, Any], name: str, default: int, section: str, *, minimum: int
    ) -> int:
        """``d[name]`` as bytes (a unit is required), or ``default`` when it is left out."""
        if name not in d:
            return default
        return parse_size(d[name], what=f"{self.source}: {section}.{name}", minimum=minimum)


__all__ = [
    "PACE_SETTINGS",
    "AgentSpec",
    "Limits",
    "RunSpec",
    "SandboxConfig",
    "agent_identity",
    "diff_identity",
    "fingerprint",
    "format_size",
    "is_placeholder",
    "load_spec",
    "parse_size",
    "parse_spec",
    "sandbox_identity",
    "spec_key",
]
