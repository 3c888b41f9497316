"""The ``>>>`` examples of the stage 1 and 2 modules run and hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ["builder.transform", "builder.translate", "builder.sampling"]
MODULES = ["builder.parallel"] + [
    f"{pkg}.{info.name}"
    for pkg in PACKAGES
    for info in pkgutil.iter_modules(importlib.import_module(pkg).__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_small_pure_functions_carry_examples():
    attempted = sum(doctest.testmod(importlib.import_module(n)).attempted for n in MODULES)
    assert attempted >= 40
