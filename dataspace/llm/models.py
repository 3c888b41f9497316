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
from dataspace.runs.spec import ModelSpec, read_model

logger = logging.getLogger(__name__)

MODELS_SCHEMA_VERSION = "1.0"


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


__all__ = ["MODELS_SCHEMA_VERSION", "load_models", "parse_model"]
