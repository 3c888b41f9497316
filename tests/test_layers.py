"""What may import what across the layers, beyond the cycle test.

- Command lines are parsed only in ``dataspace.cli`` (one module per subcommand): no other
  module of ``dataspace`` or ``builder`` imports ``argparse``. (``evaluator`` keeps the
  official evaluator's own command line; ``ray_jobs/`` and ``scripts/`` are entrypoints.)
- The loopback fakes and test servers in ``dataspace.testing`` are never imported by the
  runtime: only ``dataspace.testing`` itself and the command line of its scripted model
  server (``python -m dataspace.testing.scripted_server``) reach them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_import_cycles import parsed_graph

REPO = Path(__file__).resolve().parents[1]
CLI = "dataspace.cli"
TESTING = "dataspace.testing"
# the one command line that serves a fake: ``python -m dataspace.testing.scripted_server``
TESTING_COMMANDS = frozenset({"dataspace.cli.scripted_server"})


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _imported_top_names(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.partition(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


def test_only_the_cli_package_parses_command_lines():
    """Guards one command-line package: a library module that builds its own parser
    (``argparse``) is a command line outside ``dataspace.cli``."""
    offenders = []
    for pkg in ("dataspace", "builder"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO)
            module = ".".join(rel.with_suffix("").parts)
            if _inside(module, CLI):
                continue
            if "argparse" in _imported_top_names(path):
                offenders.append(str(rel))
    assert not offenders, "argparse outside dataspace/cli/: " + ", ".join(offenders)


def test_the_runtime_never_imports_the_test_fakes():
    """Guards ``dataspace.testing`` being test-only: no runtime module imports it, even
    lazily inside a function."""
    graph = parsed_graph()
    assert any(_inside(m, TESTING) for m in graph), "the graph lacks dataspace.testing"
    offenders = sorted(
        f"{mod} -> {dep}"
        for mod, deps in graph.items()
        if not _inside(mod, TESTING) and mod not in TESTING_COMMANDS
        for dep in deps
        if _inside(dep, TESTING)
    )
    assert not offenders, "runtime modules importing dataspace.testing:\n" + "\n".join(offenders)


def test_the_dataspace_command_does_not_load_the_test_fakes():
    """The ``dataspace`` command's modules never reach the scripted server's command line."""
    graph = parsed_graph()
    reached, todo = set(), [CLI]
    while todo:
        mod = todo.pop()
        if mod in reached:
            continue
        reached.add(mod)
        todo += sorted(graph.get(mod, ()))
    assert not {m for m in reached if _inside(m, TESTING) or m in TESTING_COMMANDS}


# what a command module may import from the library without calling it: the values its
# flags' help and choices show, and the errors it turns into exit codes
_NOT_CALLED_OK = re.compile(r"^[A-Z][A-Z0-9_]*$|Error$")
_CLI_INTERNALS = frozenset({"root", "screen", "args", "__init__", "__main__"})


def _library_imports(tree: ast.AST) -> list[tuple[str, str, str]]:
    """(module, name, local name) of each ``from M import name`` of a module outside the CLI."""
    return [
        (node.module, alias.name, alias.asname or alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level
        if node.module.partition(".")[0] in {"dataspace", "builder", "evaluator"}
        and not _inside(node.module, CLI)
        for alias in node.names
    ]


def _called_names(tree: ast.AST) -> set[str]:
    """Names called or read from in the module: ``f(...)``, ``C.method(...)`` and
    ``C.default`` count for f and C, and a function handed to a call (``on_finished=f``)
    for f."""
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            handed = [*node.args, *(k.value for k in node.keywords)]
            called.update(a.id for a in handed if isinstance(a, ast.Name))
        if isinstance(node, ast.Call | ast.Attribute):
            func = node.func if isinstance(node, ast.Call) else node
            while isinstance(func, ast.Attribute):
                func = func.value
            if isinstance(func, ast.Name):
                called.add(func.id)
    return called


def _public_names(module: str) -> set[str]:
    """A module's ``__all__`` (its names without a leading underscore when it has none) and
    its submodules."""
    import importlib
    import pkgutil

    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    subs = {m.name for m in pkgutil.iter_modules(getattr(mod, "__path__", []))}
    return set(names) | subs


def test_command_modules_import_only_the_entry_points_they_call():
    """Guards the command modules as parse, call, print: each imports from the library only
    public names (in their module's ``__all__``) that it calls or reads a default from,
    besides constants shown in its help and errors it catches: a command module that
    reaches into a library module's private helpers is doing that module's work."""
    offenders = []
    for path in sorted((REPO / "dataspace" / "cli").glob("*.py")):
        if path.stem in _CLI_INTERNALS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        called = _called_names(tree)
        for module, name, local in _library_imports(tree):
            if name not in _public_names(module):
                offenders.append(f"{path.name}: {module}.{name} is not in its __all__")
            elif local not in called and not _NOT_CALLED_OK.search(name):
                offenders.append(f"{path.name}: imports {module}.{name} without calling it")
    assert not offenders, "\n".join(offenders)
