"""The ``>>>`` examples of every module of every package run and hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("dataspace", "builder", "evaluator", "ray_jobs")


def _modules() -> list[str]:
    names = []
    for top in PACKAGES:
        pkg = importlib.import_module(top)
        names.append(top)
        for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{top}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue  # running it would run a command line
            names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_small_pure_functions_carry_examples():
    attempted = sum(doctest.testmod(importlib.import_module(n)).attempted for n in MODULES)
    assert attempted >= 250
