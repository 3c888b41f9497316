"""One registry for every pluggable family (translators, renderers, loaders, stores ...).

A family names its built-in providers as lazy ``"module:attr"`` targets, so the module
that defines the family never imports its providers (no import cycle, and ``import``
stays cheap); a provider module may also register an object directly. Looking a name up
imports its target on first use. An unknown name, or a provider whose optional dependency
is missing, raises ``ConfigError`` with one line naming the family, the known names and,
where one is given, how to install what is missing.

>>> colors = Registry("color", {"red": "colorsys:rgb_to_hsv"})
>>> colors.names()
['red']
>>> colors.get("red").__name__
'rgb_to_hsv'
>>> colors.get("blue")
Traceback (most recent call last):
...
dataspace.errors.ConfigError: unknown color 'blue'; known colors: red
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from dataspace.errors import ConfigError

T = TypeVar("T")


def _module_of(obj: object) -> str:
    """The module an object (a function, a class or an instance of one) is defined in."""
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) else type(obj).__module__


class Registry(Generic[T]):
    """Named providers of one family.

    Args:
        family: what a provider is, in the singular (``translator``, ``renderer``).
        builtins: ``{name: "module:attr"}`` resolved on first use.
        hints: ``{name: install hint}`` shown when a provider's import fails.
        prefixes: ``{prefix: "module"}``: a name starting with the prefix that is not yet
            registered imports that module first (which registers it), for families whose
            names are made at run time.
        plural: how error messages name the known providers (default: ``family + "s"``).
    """

    def __init__(
        self,
        family: str,
        builtins: Mapping[str, str] | None = None,
        *,
        hints: Mapping[str, str] | None = None,
        prefixes: Mapping[str, str] | None = None,
        plural: str | None = None,
    ) -> None:
        self.family = family
        self.plural = plural or f"{family}s"
        self._targets: dict[str, Any] = dict(builtins or {})
        self._resolved: dict[str, T] = {}
        self._hints = dict(hints or {})
        self._prefixes = dict(prefixes or {})
        self._lock = threading.Lock()
        for name, target in self._targets.items():
            if not (isinstance(target, str) and ":" in target):
                raise ValueError(f"{family} {name!r}: a built-in target is 'module:attr'")

    def register(self, name: str, target: T | str | None = None, *, hint: str = "") -> Any:
        """Register ``target`` (an object or ``"module:attr"``) as ``name``.

        Without ``target`` it is a decorator: ``@registry.register("name")``. A later
        registration of the same name replaces the earlier one, except that a built-in
        provider registering itself from the module its ``"module:attr"`` names (a
        decorator at import time) keeps the name lazy. ``hint`` says what the provider
        needs and how to install it.
        """
        if target is None:

            def deco(obj: T) -> T:
                self.register(name, obj, hint=hint)
                return obj

            return deco
        with self._lock:
            if hint:
                self._hints[name] = hint
            current = self._targets.get(name)
            if (
                isinstance(current, str)
                and not isinstance(target, str)
                and current.partition(":")[0] == _module_of(target)
            ):
                self._resolved[name] = target
                return target
            self._targets[name] = target
            self._resolved.pop(name, None)
            if not isinstance(target, str):
                self._resolved[name] = target
        return target

    def target(self, name: str) -> str | None:
        """The ``"module:attr"`` a name is registered as, without importing it.

        None for an unknown name or one registered as an object.

        >>> Registry("color", {"red": "colorsys:rgb_to_hsv"}).target("red")
        'colorsys:rgb_to_hsv'
        """
        target = self._targets.get(name)
        return target if isinstance(target, str) else None

    def copy(self) -> Registry[T]:
        """An independent registry with the same providers (for tests that register more)."""
        new: Registry[T] = Registry(self.family, plural=self.plural)
        new._targets = dict(self._targets)
        new._resolved = dict(self._resolved)
        new._hints = dict(self._hints)
        new._prefixes = dict(self._prefixes)
        return new

    def hint(self, name: str) -> str | None:
        """The install hint of a provider, if it has one."""
        return self._hints.get(name)

    def names(self) -> list[str]:
        """Every known name, sorted (built-in and registered)."""
        return sorted(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """The provider called ``name`` (imported on first use).

        Raises:
            ConfigError: unknown name, or its module cannot be imported.
        """
        if name in self._resolved:
            return self._resolved[name]
        if name not in self._targets:
            for prefix, module in self._prefixes.items():
                if name.startswith(prefix):
                    self._import(name, module)
                    break
        if name not in self._targets:
            known = ", ".join(
                f"{n} ({self._hints[n]})" if n in self._hints else n for n in self.names()
            )
            raise ConfigError(
                f"unknown {self.family} {name!r}; known {self.plural}: {known or 'none'}"
            )
        target = self._targets[name]
        if not isinstance(target, str):
            return target
        module, _, attr = target.partition(":")
        mod = self._import(name, module)
        obj: Any = mod
        try:
            for part in attr.split("."):  # ``module:Class.factory`` names a class's method
                obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{self.family} {name!r}: {module} has no {attr!r}") from None
        with self._lock:
            # The import may have registered an object under the name: that one wins.
            current = self._targets.get(name)
            if isinstance(current, str) or current is None:
                self._resolved[name] = obj
            else:
                self._resolved[name] = current
            return self._resolved[name]

    def _import(self, name: str, module: str) -> Any:
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                raise  # a bug in the target itself, not a missing optional dependency
            hint = self._hints.get(name)
            extra = f" ({hint})" if hint else ""
            raise ConfigError(
                f"{self.family} {name!r} needs the missing module {exc.name!r}{extra}"
            ) from None

    def factory(self, name: str) -> Callable[..., Any]:
        """The provider as a callable (classes and factory functions alike)."""
        obj = self.get(name)
        if not callable(obj):
            raise ConfigError(f"{self.family} {name!r} is not callable")
        return obj


__all__ = ["Registry"]
