"""The import rules of CONTRIBUTING.md, read statically from the source (every import
statement, also those inside functions): no import cycles; imports flow service → worker →
gpu; the gpu families (peaks, conv, compress) import none of each other and share only the
modules at the top of gpu/, which import no family."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("gpu", "worker", "service")  # each may import only the ones before it
FAMILIES = ("gpu.peaks", "gpu.conv", "gpu.compress")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` (at ``path``) imports anywhere in its code, functions
    included: ``from a import b`` names module ``a.b`` where it is one, else ``a``. Imports
    under ``if TYPE_CHECKING:`` are left out: annotations name a type, they run no import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def add(target: str) -> None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)

    tree = ast.parse(path.read_text(), str(path))
    typing_only = {id(inner) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for statement in node.body for inner in ast.walk(statement)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    found.discard(name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, set(modules)) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(components)


def _edges(graph, source, target) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() if source(a) for b in targets if target(b))


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_imports_are_read_inside_functions_and_relative(tmp_path):
    """The lazy imports light modules rely on (inside functions) count, relative imports
    resolve, and ``from a import b`` names the module a.b where there is one."""
    module = tmp_path / "mod.py"
    module.write_text("from . import sibling\nfrom .pkg import name\n\n"
                      "def run():\n    from x.y import z\n    import x.w.deep\n")
    known = {"p.q.mod", "p.q.sibling", "p.q.pkg", "x.y", "x.y.z", "x.w"}
    assert _imported("p.q.mod", module, known) == {"p.q.sibling", "p.q.pkg", "x.y.z", "x.w"}


def test_cycle_detection_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles(graph):
    assert _cycles(graph) == []


def test_imports_flow_from_service_to_worker_to_gpu(graph):
    for lower, upper in (("gpu", "worker"), ("gpu", "service"), ("worker", "service")):
        assert _edges(graph, lambda a: _within(a, lower), lambda b: _within(b, upper)) == []


@pytest.mark.parametrize("family", FAMILIES)
def test_families_import_no_other_family(graph, family):
    others = [f for f in FAMILIES if f != family]
    assert _edges(graph, lambda a: _within(a, family), lambda b: any(_within(b, o) for o in others)) == []


def test_shared_gpu_modules_import_no_family(graph):
    def shared(name: str) -> bool:
        return _within(name, "gpu") and not any(_within(name, f) for f in FAMILIES)

    assert _edges(graph, shared, lambda b: any(_within(b, f) for f in FAMILIES)) == []
