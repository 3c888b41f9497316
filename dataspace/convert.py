"""Official baseline configs (``vercel.yaml``, ``harness.yaml``) as an equivalent run spec.

The official baseline (``baseline/configs`` of HKUSTDial/DataSpace) keeps models in one
file and harness choices in another::

    vercel.yaml                              harness.yaml
      agent:   {max_model_turns, ...}          experiment:
      sandbox: {image, cpus, memory, ...}        model: {key, model, api_key_env, ...}
      models:  {KEY: {model, base_url,           wall_time_seconds, concurrency,
                      api_key_env, ...}}         workbench: {image, ...}
                                               harnesses: {NAME: {enabled, version, ...}}

:func:`convert_official` maps them key for key onto a run spec in the official profile
(``protocol: official``, written out: the official limits and settings, DataSpace-Agent
without the remaining-time note). The workbench image is not named: the local backend
runs the installed Data Workbench Runtime, whose manifest every attempt records. What the
official files do not hold (prices, the release, the store) is written as a ``FILL_IN``
placeholder; the spec validator lists every one left, one line each, until they are
filled in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

PLACEHOLDER = "FILL_IN"
# official harness name -> ours (the same names, listed so a rename is one line)
_HARNESS_NAMES = {
    "dataspace-agent": "dataspace-agent",
    "smolagents": "smolagents",
    "codex": "codex",
    "claude-code": "claude-code",
    "grok-build": "grok-build",
}
_AGENT_LIMITS = {
    "max_model_turns": "model_turns",
    "max_tool_actions": "tool_actions",
    "max_wall_time_seconds": "wall_seconds",
    "max_command_seconds": "command_timeout",
}
_AGENT_SETTINGS = ("max_tool_output_chars", "image_max_edge", "image_jpeg_quality")
_SANDBOX = {"cpus": "cpus", "memory": "memory", "pids_limit": "pids", "tmpfs_size": "tmp"}
_MODEL_SETTINGS = ("max_output_tokens", "temperature", "extra_body", "default_headers")
# a harness whose wire API has its own address in ``experiment.model`` (Claude Code speaks
# the Anthropic Messages API at ``anthropic_base_url``; the others use ``openai_base_url``)
_WIRE_BASE_URL_KEYS = {"claude-code": "anthropic_base_url"}
_RUNNER_NOTE = (
    "protocol: official is the official dataspace-agent command's behaviour (vercel.yaml); "
    "the official harness runner also caps each dataspace-agent command by the wall time "
    "left (enforce_remaining_wall_time), which that profile does not"
)


@dataclass(frozen=True, kw_only=True)
class ConvertedSpec:
    """A run-spec document and notes on what the user must still decide."""

    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _load(path: Path, what: str) -> dict[str, Any]:
    import yaml

    try:
        obj = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{path}: the {what} must be a mapping")
    return dict(obj)


def _mapping(obj: Any, where: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {type(obj).__name__}")
    return dict(obj)


def _model(raw: Mapping[str, Any], where: str, *, base_url_key: str = "base_url") -> dict[str, Any]:
    model_id = raw.get("model")
    key_env = raw.get("api_key_env")
    if not isinstance(model_id, str) or not model_id.strip():
        raise ConfigError(f"{where}.model: the model id is required")
    if not isinstance(key_env, str) or not key_env.strip():
        raise ConfigError(f"{where}.api_key_env: the key variable is required")
    out: dict[str, Any] = {"id": model_id, "key_env": key_env}
    if raw.get(base_url_key):
        out["base_url"] = raw[base_url_key]
    out["prices"] = {"input": PLACEHOLDER, "cached_input": PLACEHOLDER, "output": PLACEHOLDER}
    return out


def _model_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: raw[k] for k in _MODEL_SETTINGS if raw.get(k) not in (None, {}, "")}


def convert_official(
    config: Path,
    harness: Path | None = None,
    *,
    release: str | None = None,
    store: str | None = None,
    run_id: str = "official",
    models: list[str] | None = None,
) -> ConvertedSpec:
    """The run spec equivalent to an official ``vercel.yaml`` (and ``harness.yaml``).

    Without ``harness``, one DataSpace-Agent per model of ``config`` (or of ``models``).
    With it, one agent per enabled harness, all on ``experiment.model``; the wall time,
    concurrency and workbench image of ``experiment`` win over ``config``.

    Raises:
        ConfigError: a file is missing or malformed, or a model key is unknown.
    """
    from dataspace.agents import harness_names

    raw = _load(config, "models config")
    notes: list[str] = []
    agent_raw = _mapping(raw.get("agent"), f"{config}: agent")
    sandbox_raw = _mapping(raw.get("sandbox"), f"{config}: sandbox")
    models_raw = _mapping(raw.get("models"), f"{config}: models")

    limits = {
        ours: agent_raw[theirs] for theirs, ours in _AGENT_LIMITS.items() if theirs in agent_raw
    }
    base_settings = {k: agent_raw[k] for k in _AGENT_SETTINGS if k in agent_raw}
    sandbox: dict[str, Any] = {"backend": "local"}
    image = sandbox_raw.get("image")
    for theirs, ours in _SANDBOX.items():
        if theirs in sandbox_raw:
            sandbox[ours] = sandbox_raw[theirs]
    concurrency: Any = None

    agents: list[dict[str, Any]] = []
    if harness is None:
        wanted = models or list(models_raw)
        for key in wanted:
            if key not in models_raw:
                raise ConfigError(
                    f"{config}: models: no model {key!r}; available: {', '.join(models_raw)}"
                )
            m = _mapping(models_raw[key], f"{config}: models.{key}")
            agents.append(
                {
                    "name": str(key),
                    "harness": "dataspace-agent",
                    "model": _model(m, f"{config}: models.{key}"),
                    "settings": {**base_settings, **_model_settings(m)},
                }
            )
    else:
        hraw = _load(harness, "harness config")
        exp = _mapping(hraw.get("experiment"), f"{harness}: experiment")
        m = _mapping(exp.get("model"), f"{harness}: experiment.model")
        model = _model(m, f"{harness}: experiment.model", base_url_key="openai_base_url")
        key = str(m.get("key") or m.get("model"))
        if exp.get("wall_time_seconds") is not None:
            limits["wall_seconds"] = exp["wall_time_seconds"]
        concurrency = exp.get("concurrency")
        bench = _mapping(exp.get("workbench"), f"{harness}: experiment.workbench")
        image = bench.get("image") or image
        known = set(harness_names())
        for name, h in _mapping(hraw.get("harnesses"), f"{harness}: harnesses").items():
            h = _mapping(h, f"{harness}: harnesses.{name}")
            if not h.get("enabled", True):
                continue
            ours = _HARNESS_NAMES.get(str(name), str(name))
            if ours not in known:
                notes.append(
                    f"harness {name!r} (version {h.get('version', '?')}) is not available in "
                    f"this installation; it was left out (known: {', '.join(sorted(known))})"
                )
                continue
            settings: dict[str, Any] = _model_settings(m)
            if ours == "dataspace-agent":
                settings = {**base_settings, **settings}
                notes.append(_RUNNER_NOTE)
            agent_model = dict(model)
            own_url = _WIRE_BASE_URL_KEYS.get(ours)
            if own_url and m.get(own_url):  # the harness's own wire API has its own address
                agent_model = {**agent_model, "base_url": m[own_url]}
            agents.append(
                {
                    "name": f"{ours}@{key}",
                    "harness": ours,
                    "model": agent_model,
                    "settings": settings,
                }
            )
    if not agents:
        raise ConfigError(f"{config}: no model or enabled harness to convert")
    if image:
        # The local backend runs the installed Data Workbench Runtime, the image's own
        # contents; its manifest hash is recorded with every attempt, so no image is named.
        notes.append(
            f"sandbox.image {image!r} is not set: the local backend runs the installed Data "
            "Workbench Runtime (its manifest is recorded per attempt); name the image only "
            "with a backend that pulls images (sandbox.backend: kubernetes)"
        )
    notes[:] = list(dict.fromkeys(notes))
    doc: dict[str, Any] = {
        "schema_version": "1.0",
        "run_id": run_id,
        "release": release or PLACEHOLDER,
        "store": store or PLACEHOLDER,
        "protocol": "official",
        "agents": agents,
        "limits": limits,
        "sandbox": sandbox,
    }
    if concurrency is not None:
        doc["concurrency"] = concurrency
    doc["attempts"] = 1
    if not release:
        notes.append("release: set it to the release folder or URI (or pass --release)")
    if not store:
        notes.append("store: set it to a folder or s3:// URI for the results (or pass --store)")
    notes.append(
        "prices: the official configs hold none; fill in each model's prices (USD per million "
        "tokens) so costs are reported"
    )
    return ConvertedSpec(document=doc, notes=notes)


def dump_spec(doc: Mapping[str, Any], *, notes: list[str] | None = None) -> str:
    """The spec as YAML, with the notes as a comment header."""
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # every agent spelled out: no &id001 anchors for shared values

    head = "# Run spec converted from the official baseline configs.\n"
    for n in notes or []:
        head += f"# - {n}\n"
    return head + yaml.dump(dict(doc), Dumper=_NoAliases, sort_keys=False, allow_unicode=True)


__all__ = ["PLACEHOLDER", "ConvertedSpec", "convert_official", "dump_spec"]
