"""Every exception class the project defines is in the one error tree, and the tree is drawn.

Guards the rule of ``dataspace.errors``: a class deriving from a builtin exception alone
(``ValueError``, ``RuntimeError``, ``Exception``) is refused, whether public or private, as
is one missing from the tree's docstring. Every module of the packages is imported and every
exception class created so far is checked, so classes nested in other classes count too.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import dataspace.errors
from dataspace.errors import DataSpaceError

PACKAGES = ("dataspace", "builder", "ray_jobs")
OUTSIDE = {
    # runs inside the sandbox, where dataspace is not installed; a SystemExit on purpose
    "dataspace.agents._smol_entry.Terminated",
}


def _project_modules() -> list[str]:
    names = []
    for pkg in PACKAGES:
        root = importlib.import_module(pkg)
        names.append(pkg)
        names += [m.name for m in pkgutil.walk_packages(root.__path__, f"{pkg}.")]
    return [n for n in names if not n.endswith("__main__")]


def _exception_classes() -> list[type[BaseException]]:
    for name in _project_modules():
        importlib.import_module(name)
    seen: list[type[BaseException]] = []
    stack: list[type[BaseException]] = [BaseException]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                stack.append(sub)
    return [c for c in seen if c.__module__.split(".")[0] in PACKAGES]


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def test_every_exception_class_derives_from_the_root() -> None:
    classes = _exception_classes()
    assert len(classes) > 30  # the walk found the project's classes
    outside = sorted(
        _qualname(c)
        for c in classes
        if not issubclass(c, DataSpaceError) and _qualname(c) not in OUTSIDE
    )
    assert outside == [], (
        f"exception classes outside the error tree: {outside}; derive each from "
        "DataSpaceError or one of its subclasses (dataspace/errors.py)"
    )


def test_the_tree_docstring_names_every_class() -> None:
    doc = dataspace.errors.__doc__ or ""
    drawn = {"DataSpaceError", *re.findall(r"[├└]── (\w+)", doc)}
    missing = sorted(
        _qualname(c)
        for c in _exception_classes()
        if issubclass(c, DataSpaceError) and c.__name__ not in drawn
    )
    assert missing == [], f"add these to the tree in dataspace/errors.py's docstring: {missing}"
