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
    sandbox: {backend: local, cpus: 1, memory: 2GiB, pids: 256}
    concurrency: 2
    attempts: 1

Identity: the fingerprint covers what changes results (release content, agents, models,
protocol profile, limits, sandbox runtime, attempts, task selection), not how fast they are produced
(concurrency, Ray address), so a run can be resumed with more workers.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from dataspace.errors import ConfigError

SPEC_SCHEMA_VERSION = "1.0"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "B": 1,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "KI": 1024,
    "MI": 1024**2,
    "GI": 1024**3,
    "TI": 1024**4,
}


def parse_size(value: object, *, what: str) -> int:
    """Bytes from an int or a string like ``2GiB``, ``512Mi`` or ``1G``.

    >>> parse_size("2GiB", what="memory")
    2147483648
    >>> parse_size("512M", what="memory")
    512000000
    """
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected a size, got {value!r}")
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ConfigError(f"{what}: cannot read size {value!r} (use e.g. 2GiB, 512Mi, 1G)")
    unit = (m.group(2) or "").upper().rstrip("B")
    return int(float(m.group(1)) * _UNITS[unit])


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model behind an OpenAI-compatible endpoint, with prices per million tokens."""

    id: str
    base_url: str | None = None
    key_env: str | None = None
    price_input: float = 0.0
    price_cached_input: float = 0.0
    price_output: float = 0.0
    max_concurrency: int = 8


@dataclass(frozen=True, kw_only=True)
class AgentSpec:
    """One agent of the run: a harness, optionally with a model, and its settings."""

    name: str
    harness: str
    model: ModelSpec | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class LimitsSpec:
    """Agent budgets."""

    model_turns: int = 60
    tool_actions: int = 50
    wall_seconds: float = 1800.0
    command_timeout: float = 180.0


@dataclass(frozen=True, kw_only=True)
class SandboxConfig:
    """Sandbox backend and resources (requests equal limits)."""

    backend: str = "local"
    cpus: float = 1.0
    memory_bytes: int = 2 * 1024**3
    pids: int = 256
    tmp_bytes: int = 512 * 1024**2
    output_bytes: int = 1024**3
    image: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """A validated run spec."""

    run_id: str
    release: str
    store: str
    agents: tuple[AgentSpec, ...]
    limits: LimitsSpec = field(default_factory=LimitsSpec)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    concurrency: int = 2
    attempts: int = 1
    tasks: tuple[str, ...] | None = None
    ray_address: str | None = None
    max_infra_retries: int = 3
    spend_limit_usd: float | None = None
    protocol: str = "official"
    schema_version: str = SPEC_SCHEMA_VERSION

    def identity(self, release_fingerprint: str) -> dict[str, Any]:
        """The part of the spec that decides results (what the fingerprint covers)."""
        d = asdict(self)
        for key in ("concurrency", "ray_address", "store", "release", "spend_limit_usd"):
            d.pop(key)
        d["release_fingerprint"] = release_fingerprint
        return d

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-safe)."""
        return json.loads(json.dumps(asdict(self), default=list))


def fingerprint(identity: Mapping[str, Any]) -> str:
    """SHA-256 of a canonical JSON encoding.

    >>> fingerprint({"b": 1, "a": [1, 2]})[:12]
    '94a786c3662b'
    """
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()


def diff_identity(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths whose values differ between two identity dicts.

    >>> diff_identity({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}})
    ['b.c']
    """
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out.extend(diff_identity(a, b, prefix=f"{path}."))
        elif json.dumps(a, sort_keys=True, default=list) != json.dumps(
            b, sort_keys=True, default=list
        ):
            out.append(path)
    return out


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
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}:{where} invalid YAML: {getattr(exc, 'problem', None) or exc}"
        ) from exc
    return parse_spec(obj, source=str(path), base_dir=path.parent)


def parse_spec(obj: object, *, source: str, base_dir: Path | None = None) -> RunSpec:
    """Validate a spec object; every problem is a ConfigError naming ``source`` and the key."""
    r = _Reader(source)
    d = r.mapping(obj, "spec")
    version = str(d.get("schema_version", SPEC_SCHEMA_VERSION))
    if version != SPEC_SCHEMA_VERSION:
        r.fail(
            "schema_version",
            f"unsupported {version!r} (this version reads {SPEC_SCHEMA_VERSION!r})",
        )
    allowed = {
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
        "spend_limit_usd",
        "protocol",
    }
    r.no_extra(d, allowed, "spec")
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
    r.no_extra(lim, {"model_turns", "tool_actions", "wall_seconds", "command_timeout"}, "limits")
    limits = LimitsSpec(
        model_turns=r.positive_int(lim.get("model_turns", 60), "limits.model_turns"),
        tool_actions=r.positive_int(lim.get("tool_actions", 50), "limits.tool_actions"),
        wall_seconds=r.positive(lim.get("wall_seconds", 1800), "limits.wall_seconds"),
        command_timeout=r.positive(lim.get("command_timeout", 180), "limits.command_timeout"),
    )
    sb = r.mapping(d.get("sandbox", {}), "sandbox")
    r.no_extra(
        sb, {"backend", "cpus", "memory", "pids", "tmp", "output", "image", "options"}, "sandbox"
    )
    sandbox = SandboxConfig(
        backend=r.string(sb.get("backend", "local"), "sandbox.backend"),
        cpus=r.positive(sb.get("cpus", 1), "sandbox.cpus"),
        memory_bytes=parse_size(sb.get("memory", "2GiB"), what=f"{source}: sandbox.memory"),
        pids=r.positive_int(sb.get("pids", 256), "sandbox.pids"),
        tmp_bytes=parse_size(sb.get("tmp", "512MiB"), what=f"{source}: sandbox.tmp"),
        output_bytes=parse_size(sb.get("output", "1GiB"), what=f"{source}: sandbox.output"),
        image=sb.get("image"),
        options=r.mapping(sb.get("options", {}), "sandbox.options"),
    )
    tasks_raw = d.get("tasks")
    tasks = None
    if tasks_raw is not None:
        if not isinstance(tasks_raw, list) or not all(isinstance(t, str) for t in tasks_raw):
            r.fail("tasks", "must be a list of task ids")
        tasks = tuple(tasks_raw)
    ray = r.mapping(d.get("ray", {}), "ray")
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
        concurrency=r.positive_int(d.get("concurrency", 2), "concurrency"),
        attempts=r.positive_int(d.get("attempts", 1), "attempts"),
        tasks=tasks,
        ray_address=ray.get("address"),
        max_infra_retries=r.positive_int(
            d.get("max_infra_retries", 3), "max_infra_retries", allow_zero=True
        ),
        spend_limit_usd=None if spend is None else r.positive(spend, "spend_limit_usd"),
        protocol=protocol,
    )


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
        m = r.mapping(d["model"], f"{where}.model")
        r.no_extra(m, {"id", "base_url", "key_env", "prices", "max_concurrency"}, f"{where}.model")
        prices = r.mapping(m.get("prices", {}), f"{where}.model.prices")
        r.no_extra(prices, {"input", "cached_input", "output"}, f"{where}.model.prices")
        model = ModelSpec(
            id=r.string(m.get("id"), f"{where}.model.id"),
            base_url=m.get("base_url"),
            key_env=m.get("key_env"),
            price_input=r.number(prices.get("input", 0), f"{where}.model.prices.input"),
            price_cached_input=r.number(
                prices.get("cached_input", prices.get("input", 0)),
                f"{where}.model.prices.cached_input",
            ),
            price_output=r.number(prices.get("output", 0), f"{where}.model.prices.output"),
            max_concurrency=r.positive_int(
                m.get("max_concurrency", 8), f"{where}.model.max_concurrency"
            ),
        )
    settings = r.mapping(d.get("settings", {}), f"{where}.settings")
    return AgentSpec(name=name, harness=harness, model=model, settings=settings)


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> NoReturn:
        raise ConfigError(f"{self.source}: {key}: {problem}")

    def mapping(self, v: object, key: str) -> dict[str, Any]:
        if not isinstance(v, Mapping):
            self.fail(key, f"must be a mapping, got {type(v).__name__}")
        return dict(v)

    def no_extra(self, d: Mapping[str, Any], allowed: set[str], key: str) -> None:
        extra = sorted(set(d) - allowed)
        if extra:
            self.fail(key, f"unknown keys {extra} (allowed: {sorted(allowed)})")

    def string(self, v: object, key: str) -> str:
        if not isinstance(v, str) or not v.strip():
            self.fail(key, "must be a non-empty string")
        return v

    def name(self, v: object, key: str) -> str:
        s = self.string(v, key)
        if not _NAME_RE.match(s):
            self.fail(key, f"{s!r} must be letters, digits and . _ @ + - (max 128)")
        return s

    def number(self, v: object, key: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            self.fail(key, f"must be a non-negative number, got {v!r}")
        return float(v)

    def positive(self, v: object, key: str) -> float:
        x = self.number(v, key)
        if x <= 0:
            self.fail(key, f"must be positive, got {v!r}")
        return x

    def positive_int(self, v: object, key: str, *, allow_zero: bool = False) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if allow_zero else 1):
            self.fail(
                key, f"must be a {'non-negative' if allow_zero else 'positive'} integer, got {v!r}"
            )
        return v


__all__ = [
    "AgentSpec",
    "LimitsSpec",
    "ModelSpec",
    "RunSpec",
    "SandboxConfig",
    "diff_identity",
    "fingerprint",
    "load_spec",
    "parse_size",
    "parse_spec",
]
