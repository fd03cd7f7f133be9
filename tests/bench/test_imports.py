"""The modules of ``bench/`` import each other without a cycle.

The graph is read from the source with :mod:`ast`: every import of a ``bench`` module
(relative or absolute, at module level or inside a function, so that a cycle cannot
hide behind a function-level import) is an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
PACKAGE = "bench"


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(BENCH.glob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The ``bench`` modules one import statement imports."""
    if isinstance(node, ast.Import):
        names = [a.name.split(".") for a in node.names]
        return {n[1] for n in names if len(n) > 1 and n[0] == PACKAGE and n[1] in modules}
    if node.level > 1 or (node.level == 0 and (node.module or "").split(".")[0] != PACKAGE):
        return set()
    parts = (node.module or "").split(".") if node.level else (node.module or "").split(".")[1:]
    parts = [p for p in parts if p]
    if parts:
        return {parts[0]} if parts[0] in modules else set()
    return {a.name for a in node.names if a.name in modules}  # from . import x / from bench import x


def import_graph() -> dict[str, set[str]]:
    """Module -> the ``bench`` modules it imports anywhere in its source."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = set().union(*(_targets(n, set(modules)) for n in ast.walk(tree)
                                    if isinstance(n, (ast.Import, ast.ImportFrom)))) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_graph_sees_relative_absolute_and_function_level_imports():
    graph = import_graph()
    assert {"report_common", "report_drift", "runner"} <= graph["report"]
    assert "report_common" in graph["report_drift"] and "report" in graph["headline"]
    assert "report" in graph["__main__"]  # imported inside cmd_report
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_bench_modules_import_each_other_without_a_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in bench/: " + " -> ".join(cycle)
