"""Model specs: a model's endpoint, key variable, prices and pace; and models files.

``ModelSpec`` is what the LLM clients and relays read of a model, with the defaults of what
a model leaves out (``DEFAULT_MAX_CONCURRENCY``, ``DEFAULT_CONNECT_TIMEOUT``); a run spec's
agents and a models file give it with the same keys, read by ``parse_model_entry``.

A models file (YAML or JSON) keeps endpoints and prices in one place, apart from run specs::

    schema_version: "1.0"
    models:
      my-model:
        id: provider/model-name          # the id the endpoint expects
        base_url: https://gateway.example/v1
        key_env: GATEWAY_API_KEY         # the variable holding the key (never the key)
        prices: {input: 1.0, cached_input: 0.1, output: 4.0}   # USD per million tokens
        max_concurrency: 8
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError
from dataspace.validation import Reader

logger = logging.getLogger(__name__)

MODELS_SCHEMA_VERSION = "1.0"
_MODEL_KEYS = {"id", "base_url", "key_env", "prices", "max_concurrency", "timeouts"}
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

DEFAULT_MAX_CONCURRENCY = 8
"""Requests in flight at once to one endpoint when its model sets no ``max_concurrency``."""
DEFAULT_CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection to a model endpoint when its model sets no timeout."""


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model behind an OpenAI-compatible endpoint, with prices per million tokens."""

    id: str
    base_url: str | None = None
    key_env: str | None = None
    price_input: float = 0.0
    price_cached_input: float = 0.0
    price_output: float = 0.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float | None = None  # None: the harness's request_timeout

    @property
    def endpoint_identity(self) -> dict[str, Any]:
        """What of the model decides outcomes: its id and endpoint (not prices or pace)."""
        return {"id": self.id, "base_url": self.base_url}


def parse_model_entry(r: Reader, obj: object, where: str) -> ModelSpec:
    """One model mapping (id, base_url, key_env, prices, max_concurrency, timeouts).

    Read with ``r`` (a spec's reader or a models file's); errors name ``where`` and the key.
    """
    md = ModelSpec(id="x")
    m = r.mapping(obj, where)
    r.no_extra(m, _MODEL_KEYS, where)
    prices = r.mapping(m.get("prices", {}), f"{where}.prices")
    r.no_extra(prices, {"input", "cached_input", "output"}, f"{where}.prices")
    timeouts = r.mapping(m.get("timeouts", {}), f"{where}.timeouts")
    r.no_extra(timeouts, {"connect", "read"}, f"{where}.timeouts")
    key_env = r.optional_string(m.get("key_env"), f"{where}.key_env")
    if key_env is not None and not _ENV_NAME_RE.match(key_env):
        r.fail(
            f"{where}.key_env",
            "must be the NAME of the environment variable holding the key (letters, digits, "
            "_), never the key itself",
        )
    read = timeouts.get("read")
    return ModelSpec(
        id=r.string(m.get("id"), f"{where}.id"),
        base_url=r.optional_string(m.get("base_url"), f"{where}.base_url"),
        key_env=key_env,
        price_input=r.number(prices.get("input", 0), f"{where}.prices.input"),
        price_cached_input=r.number(
            prices.get("cached_input", prices.get("input", 0)), f"{where}.prices.cached_input"
        ),
        price_output=r.number(prices.get("output", 0), f"{where}.prices.output"),
        max_concurrency=r.positive_int(
            m.get("max_concurrency", md.max_concurrency), f"{where}.max_concurrency"
        ),
        connect_timeout=r.positive(
            timeouts.get("connect", md.connect_timeout), f"{where}.timeouts.connect"
        ),
        read_timeout=None if read is None else r.positive(read, f"{where}.timeouts.read"),
    )


def read_model(obj: object, *, source: str, where: str) -> ModelSpec:
    """One model mapping read from ``source`` (a models file, a spec); errors name the key."""
    return parse_model_entry(Reader(source), obj, where)


def parse_model(obj: object, *, where: str) -> ModelSpec:
    """Validate one model entry (the run spec's own rules); errors name ``where`` and the key.

    >>> parse_model({"id": "m", "prices": {"input": 1, "output": 2}}, where="x").price_cached_input
    1.0
    """
    source, _, key = where.rpartition(": ")
    return read_model(obj, source=source or where, where=key if source else "model")


def load_models(path: Path | str) -> dict[str, ModelSpec]:
    """Read a models file into name -> ``ModelSpec``."""
    import yaml

    path = Path(path)
    try:
        obj: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read models file: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{path}: a models file must hold a mapping")
    version = str(obj.get("schema_version", MODELS_SCHEMA_VERSION))
    if version != MODELS_SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: schema_version {version!r} is not supported "
            f"(this version reads {MODELS_SCHEMA_VERSION!r})"
        )
    models = obj.get("models")
    if not isinstance(models, Mapping) or not models:
        raise ConfigError(f"{path}: models: must be a non-empty mapping of name -> model")
    return {str(name): parse_model(m, where=f"{path}: models.{name}") for name, m in models.items()}


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_CONCURRENCY",
    "MODELS_SCHEMA_VERSION",
    "ModelSpec",
    "load_models",
    "parse_model",
    "parse_model_entry",
    "read_model",
]
