"""``dataspace/runs/`` and ``ray_jobs/`` never ask which sandbox backend they have.

Guards the contracts (``dataspace.sandbox.base``, ``dataspace.agents.base``): a layer above
that compares with a backend's name, imports a backend's subpackage or a private sandbox
module makes every new backend an edit there; one that probes anything with
``getattr``/``hasattr`` (a backend, a sandbox, a harness, an error) asks for a capability
its contract does not declare. The only reads by name allowed are listed in
``NOT_PROBES``, each with why it is no probe.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dataspace.sandbox import BACKENDS, backend_names

REPO = Path(__file__).resolve().parents[2]
ABOVE = (REPO / "dataspace" / "runs", REPO / "ray_jobs")
PUBLIC_SANDBOX_MODULES = {
    "dataspace.sandbox",
    "dataspace.sandbox.base",
    "dataspace.sandbox.staging",
    "dataspace.sandbox.workbench",
}
NOT_PROBES = {
    # a result row reads its own dataclass fields by column name (to_dict, __getitem__)
    ("dataspace/runs/results.py", "getattr(self, name)"): 2,
}
"""``getattr``/``hasattr`` calls that read no capability: (file, call) -> how many."""


def _names() -> set[str]:
    """Every registered backend name, and the class each is registered as."""
    names = set(backend_names())
    for name in backend_names():
        target = BACKENDS.target(name)
        if target:
            names.add(target.rpartition(":")[2])
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _ray_address(node: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """A literal compared with a Ray address (``"local"`` is Ray's own word there)."""
    parent = parents.get(id(node))
    while parent is not None and not isinstance(parent, ast.Compare):
        parent = parents.get(id(parent))
    return isinstance(parent, ast.Compare) and ast.unparse(parent.left) == "address"


def problems_in(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` names a backend, imports a backend's module or probes a backend."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path.name
    found = []
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in names and not _ray_address(node, parents):
                found.append(f"{line}: names the backend {node.value!r}")
        elif isinstance(node, ast.Name) and node.id in names and node.id[:1].isupper():
            found.append(f"{line}: uses {node.id}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            )
            for module in modules:
                if module.startswith("dataspace.sandbox.") and not (
                    module in PUBLIC_SANDBOX_MODULES
                    or (
                        module.rpartition(".")[0] in PUBLIC_SANDBOX_MODULES
                        and not module.rpartition(".")[2].startswith("_")
                        and module.rpartition(".")[2] not in names
                    )
                ):
                    found.append(f"{line}: imports {module}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
        ):
            found.append(f"{line}: probes {ast.unparse(node)}")
    return found


def _unlisted(found: list[str]) -> list[str]:
    """``found`` without the reads by name that ``NOT_PROBES`` lists."""
    left = dict(NOT_PROBES)
    out = []
    for problem in found:
        where, _, what = problem.partition(": probes ")
        key = (where.rpartition(":")[0], what)
        if what and left.get(key, 0) > 0:
            left[key] -= 1
        else:
            out.append(problem)
    return out


def test_runs_and_ray_jobs_never_ask_which_backend_they_have() -> None:
    names = _names()
    assert {"local", "kubernetes", "LocalBackend", "KubernetesBackend"} <= names
    found = [p for folder in ABOVE for path in sorted(folder.rglob("*.py"))
             for p in problems_in(path, names)]  # fmt: skip
    found = _unlisted(found)
    assert found == [], (
        "declare it on the contract (dataspace.sandbox.base, dataspace.agents.base) instead:\n"
        + "\n".join(found)
    )


def test_the_scan_finds_what_it_guards_against(tmp_path: Path) -> None:
    """The scan itself: each kind of look behind the contract is found."""
    sample = tmp_path / "sample.py"
    code = (
        "from dataspace.sandbox.kubernetes import KubernetesBackend\n"
        "from dataspace.sandbox import _paths\n"
        "import dataspace.sandbox.local._cgroup\n"
        "def f(spec, backend, address):\n"
        "    '''A docstring may say local.'''\n"
        "    if spec.sandbox.backend == 'local':\n"
        "        return getattr(backend, 'check_cluster', None)\n"
        "    return address == 'local' or hasattr(spec.sandbox, 'x')\n"
        "def g(agent, exc):\n"
        "    needs = agent.sandbox_needs() if hasattr(agent, 'sandbox_needs') else None\n"
        "    return needs, getattr(exc, 'code', None)\n"
    )
    sample.write_text(code)
    found = problems_in(sample, _names())
    text = "\n".join(found)
    assert "imports dataspace.sandbox.kubernetes" in text
    assert "imports dataspace.sandbox._paths" in text
    assert "imports dataspace.sandbox.local._cgroup" in text
    assert "names the backend 'local'" in text and text.count("names the backend") == 1
    assert "probes getattr(backend, 'check_cluster', None)" in text
    assert "probes hasattr(spec.sandbox, 'x')" in text
    assert "probes hasattr(agent, 'sandbox_needs')" in text
    assert "probes getattr(exc, 'code', None)" in text


def test_only_the_listed_reads_by_name_pass() -> None:
    """A listed read passes as often as listed; the same call elsewhere is still a probe."""
    listed = "dataspace/runs/results.py:1: probes getattr(self, name)"
    elsewhere = "dataspace/runs/attempt.py:1: probes getattr(self, name)"
    assert _unlisted([listed, listed, elsewhere]) == [elsewhere]
    assert _unlisted([listed, listed, listed]) == [listed]
