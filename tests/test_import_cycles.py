"""No import cycle inside ``builder``, ``dataspace`` or ``evaluator``, and none between the
parts of ``dataspace`` (its subpackages and top-level modules).

The graph is built statically (``ast``) from every module's explicit import statements,
wherever they are: module level, ``try``/``if`` blocks and inside functions and methods
(``if TYPE_CHECKING:`` blocks are left out: they never run; nor are ``if __name__ ==
"__main__":`` blocks: they run only in ``python -m pkg.mod``, where the file is the module
``__main__``, and what they import loads ``pkg.mod`` afresh, without that block).
``from pkg import sub`` is an edge to the submodule, ``from pkg import name`` an edge to
``pkg``. Importing ``a.b.c`` first runs ``a/__init__`` and ``a/b/__init__``, so those are
edges too, except for the importer's own packages (already running when it imports a
sibling): a cycle through a package's ``__init__`` fails at import time as surely as a
direct one.

The parts of ``dataspace`` are layers: ``dataspace.traces`` below ``dataspace.llm`` below
``dataspace.agents`` below ``dataspace.runs`` and so on. Two parts that import each other,
through any modules, are one layer in two folders, so the module graph is also collapsed
onto the parts (``dataspace.llm.wires.chat`` counts as ``dataspace.llm``) and checked again.

Function-level imports count: they keep ``import dataspace`` cheap, but two modules that
import each other, even lazily, are one layer that pretends to be two, and the lazy import
only moves the failure to the first call. Pluggable families therefore name their
providers as ``"module:attr"`` strings in ``dataspace.registry.Registry`` instead of
importing them.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("builder", "dataspace", "evaluator")


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_main_block(test: ast.expr) -> bool:
    """``__name__ == "__main__"``."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, except under ``if TYPE_CHECKING:`` and
    ``if __name__ == "__main__":``."""
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If) and (
            _is_type_checking(node.test) or _is_main_block(node.test)
        ):
            out += _imports(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    out += _imports([child] if isinstance(child, ast.stmt) else child.body)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports (anywhere in its code)."""
    files = {
        _module_name(p): p
        for pkg in PACKAGES
        for p in (REPO / pkg).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    graph: dict[str, set[str]] = {m: set() for m in files}

    def resolve(name: str) -> str | None:
        while name:
            if name in files:
                return name
            name = name.rpartition(".")[0]
        return None

    for mod, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _imports(tree.body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import sub`` imports the submodule; ``from pkg import name``
                # imports the package (or module) that defines the name.
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names
                ]
            for t in targets:
                hit = resolve(t)
                if hit and hit != mod:
                    graph[mod].add(hit)
    return with_package_inits(graph)


@functools.cache
def parsed_graph() -> dict[str, set[str]]:
    """:func:`import_graph`, computed in a fresh interpreter.

    CPython 3.11's AST validator keeps its recursion depth per interpreter, not per thread:
    ``ast.parse`` here while another thread compiles (a server thread an earlier test left
    behind, importing) fails with "AST constructor recursion depth mismatch". A child
    process has no such threads.
    """
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_import_cycles as t; "
        "print(json.dumps({k: sorted(v) for k, v in t.import_graph().items()}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(Path(__file__).resolve().parent)],
        capture_output=True, text=True, timeout=300, check=True, cwd=REPO,
    )  # fmt: skip
    return {k: set(v) for k, v in json.loads(run.stdout).items()}


def with_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus an edge to every package whose ``__init__`` an import runs first."""
    out = {mod: set(targets) for mod, targets in graph.items()}
    for mod, targets in graph.items():
        for hit in targets:
            parts = hit.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if parent in graph and parent != mod and not mod.startswith(parent + "."):
                    out[mod].add(parent)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return out


LAYERED = ("dataspace",)


def part_of(module: str) -> str | None:
    """The part of a layered package a module belongs to (None outside them or for the
    package's own ``__init__``).

    >>> part_of("dataspace.llm.wires.chat"), part_of("dataspace.stats"), part_of("dataspace")
    ('dataspace.llm', 'dataspace.stats', None)
    """
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in LAYERED and len(parts) > 1 else None


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` collapsed onto the parts of the layered packages."""
    out: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        a = part_of(mod)
        if a is None:
            continue
        out.setdefault(a, set())
        for t in targets:
            b = part_of(t)
            if b is not None and b != a:
                out[a].add(b)
                out.setdefault(b, set())
    return out


def part_edges(graph: dict[str, set[str]], a: str, b: str) -> list[str]:
    """The module imports that make part ``a`` depend on part ``b``."""
    return sorted(
        f"{m} -> {t}" for m, ts in graph.items() if part_of(m) == a for t in ts if part_of(t) == b
    )


def test_the_import_graph_sees_the_packages():
    graph = parsed_graph()
    assert "builder.driver" in graph and "dataspace.cli" in graph and "evaluator" in graph
    assert "builder.stages" in graph["builder.driver"]


def test_the_detector_finds_a_planted_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_a_cycle_through_a_package_init_is_found():
    # p.x imports q.y, which first runs q/__init__, which imports q.z, which imports p.x.
    graph = {"p": set(), "p.x": {"q.y"}, "q": {"q.z"}, "q.y": set(), "q.z": {"p.x", "q.y"}}
    assert cycles(graph) == []
    assert cycles(with_package_inits(graph)) == [["p.x", "q", "q.z"]]
    # A module importing a sibling does not depend on its own, already running, package.
    assert "q" not in with_package_inits(graph)["q.z"]


def test_imports_under_a_main_block_are_no_edges():
    tree = ast.parse(
        "import a\ndef f():\n    import b\n"
        "if __name__ == '__main__':\n    import c\nelse:\n    import d\n"
    )
    assert [n.names[0].name for n in _imports(tree.body)] == ["a", "b", "d"]


def test_no_import_cycle_in_the_packages():
    found = cycles(parsed_graph())
    assert not found, "import cycles (module-level imports):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_a_cycle_between_parts_is_found():
    graph = {"dataspace.a.x": {"dataspace.b.y"}, "dataspace.b.y": set(),
             "dataspace.b.z": {"dataspace.a"}, "dataspace.a": set()}  # fmt: skip
    assert cycles(part_graph(graph)) == [["dataspace.a", "dataspace.b"]]
    assert part_edges(graph, "dataspace.b", "dataspace.a") == ["dataspace.b.z -> dataspace.a"]


def test_no_import_cycle_between_the_parts_of_dataspace():
    """Guards the layers: no two subpackages (or top-level modules) of ``dataspace`` import
    each other, through any chain of modules."""
    graph = parsed_graph()
    found = cycles(part_graph(graph))
    lines = []
    for comp in found:
        lines.append(" <-> ".join(comp))
        for a in comp:
            for b in comp:
                lines += [f"    {e}" for e in part_edges(graph, a, b)[:5] if a != b]
    assert not found, "import cycles between parts of dataspace:\n" + "\n".join(lines)


FAMILIES = (
    "dataspace.agents:HARNESSES",
    "dataspace.sandbox:BACKENDS",
    "dataspace.store:STORES",
    "builder.documents.writers:WRITERS",
    "builder.render.base:RENDERERS",
    "builder.sources.base:LOADERS",
    "builder.taskdb:TASK_DB_STEPS",
    "builder.translate.base:TRANSLATORS",
    "builder.video.storyboard:PLANNERS",
)


def test_every_pluggable_family_is_one_registry_of_lazy_targets():
    """Guards the one registry: each family is a ``dataspace.registry.Registry`` whose
    built-in providers are ``module:attr`` strings (imported on first use, never by the
    family's own module)."""
    import importlib

    from dataspace.registry import Registry

    graph = parsed_graph()
    for spec in FAMILIES:
        module, _, attr = spec.partition(":")
        family = getattr(importlib.import_module(module), attr)
        assert isinstance(family, Registry), spec
        lazy = [n for n in family.names() if family.target(n)]
        assert lazy, f"{spec} names no built-in provider as a module:attr target"
        for name in lazy:
            target = str(family.target(name)).partition(":")[0]
            assert target not in graph.get(module, set()) or target == module, (
                f"{module} imports its provider {target} ({name})"
            )
        # importing the providers leaves the family as it was (no module re-registers
        # itself as an object over its lazy target)
        for name in lazy:
            importlib.import_module(str(family.target(name)).partition(":")[0])
        assert [n for n in family.names() if family.target(n)] == lazy, spec


def test_no_base_module_imports_its_own_package():
    """A family's ``base.py`` defines the contract; its providers import it, never the
    other way round."""
    graph = parsed_graph()
    for mod, deps in graph.items():
        if mod.endswith(".base"):
            package = mod.rpartition(".")[0]
            own = sorted(d for d in deps if d.startswith(package + ".") and d != mod)
            assert not own, f"{mod} imports {own}"


SHARED_TYPES = {
    "EventLog": "dataspace.traces",
    "Usage": "dataspace.traces",
    "ModelSpec": "dataspace.llm",
}
"""A type shared by several layers -> the package it lives in (one level down)."""


def test_shared_types_are_imported_from_their_home():
    """Guards a shared type reached through a layer above its home (events and usage
    through ``dataspace.agents``, model specs through ``dataspace.runs.spec``): such an
    old path keeps the upward import alive and names one concept in two places."""
    found = []
    for folder in (*PACKAGES, "ray_jobs", "scripts", "tests"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ImportFrom) or not node.module:
                    continue
                for alias in node.names:
                    home = SHARED_TYPES.get(alias.name)
                    if home and node.module != home and not node.module.startswith(home + "."):
                        where = f"{path.relative_to(REPO)}:{node.lineno}"
                        found.append(f"{where}: {alias.name} from {node.module}, not {home}")
    assert found == [], "\n".join(found)
