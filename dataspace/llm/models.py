"""Models files: named models with their endpoint, key variable and prices.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError
from dataspace.runs.spec import ModelSpec

logger = logging.getLogger(__name__)

MODELS_SCHEMA_VERSION = "1.0"
_MODEL_KEYS = {"id", "base_url", "key_env", "prices", "max_concurrency"}
_PRICE_KEYS = {"input", "cached_input", "output"}


def parse_model(obj: object, *, where: str) -> ModelSpec:
    """Validate one model entry; errors name ``where`` and the key.

    >>> parse_model({"id": "m", "prices": {"input": 1, "output": 2}}, where="x").price_cached_input
    1.0
    """
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{where}: must be a mapping, got {type(obj).__name__}")
    extra = sorted(set(obj) - _MODEL_KEYS)
    if extra:
        raise ConfigError(f"{where}: unknown keys {extra} (allowed: {sorted(_MODEL_KEYS)})")
    mid = obj.get("id")
    if not isinstance(mid, str) or not mid.strip():
        raise ConfigError(f"{where}.id: must be a non-empty string")
    prices = obj.get("prices", {})
    if not isinstance(prices, Mapping):
        raise ConfigError(f"{where}.prices: must be a mapping")
    extra = sorted(set(prices) - _PRICE_KEYS)
    if extra:
        raise ConfigError(f"{where}.prices: unknown keys {extra} (allowed: {sorted(_PRICE_KEYS)})")

    def price(key: str, default: object = 0) -> float:
        v = prices.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            raise ConfigError(
                f"{where}.prices.{key}: must be a non-negative number (USD per "
                f"million tokens), got {v!r}"
            )
        return float(v)

    conc = obj.get("max_concurrency", 8)
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
        raise ConfigError(f"{where}.max_concurrency: must be a positive integer, got {conc!r}")
    for key in ("base_url", "key_env"):
        if obj.get(key) is not None and not isinstance(obj.get(key), str):
            raise ConfigError(f"{where}.{key}: must be a string")
    return ModelSpec(
        id=mid,
        base_url=obj.get("base_url"),
        key_env=obj.get("key_env"),
        price_input=price("input"),
        price_cached_input=price("cached_input", prices.get("input", 0)),
        price_output=price("output"),
        max_concurrency=conc,
    )


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


__all__ = ["MODELS_SCHEMA_VERSION", "load_models", "parse_model"]
