"""Data flows one way and the imports show it: no module imports a module of a later
layer (function-level imports included), and no import circle exists anywhere in the
package. The layers are ARCHITECTURE.md's table, in order."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Source folder -> the import name it installs as (pyproject.toml's package-dir).
SOURCES = {"gnnpipe": "gnnpipe", "data": "gnnpipe.data", "partition": "gnnpipe.partition"}
#: Import-name prefixes by layer; a module may import its own layer and earlier ones.
LAYERS = (
    ("gnnpipe.errors", "gnnpipe.atomic", "gnnpipe.logs", "gnnpipe.config", "gnnpipe.huge_pages"),
    ("gnnpipe.data",),
    ("gnnpipe.partition",),
    ("gnnpipe.kernels",),
    ("gnnpipe.models",),
    ("gnnpipe.engine",),
    ("gnnpipe.plan",),
    ("gnnpipe.trainer",),
    ("gnnpipe.api", "gnnpipe.cli", "gnnpipe.train", "gnnpipe.__main__"),
)


def _modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in SOURCES.items():
        for f in (ROOT / folder).rglob("*.py"):
            parts = [p for p in f.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            out[".".join([pkg, *parts])] = f
    return out


def _imports(path: Path, modules: dict[str, Path], name: str) -> set[str]:
    deps = set()
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                deps.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
    return {d for d in deps if d in modules and d != name and d != "gnnpipe"}


def _layer(name: str) -> int:
    for i, prefixes in enumerate(LAYERS):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{name} is in no layer of tests/test_layers.py")


GRAPH = {n: _imports(p, _modules(), n) for n, p in _modules().items()}


def test_every_module_has_a_layer():
    for name in GRAPH:
        if name != "gnnpipe":
            _layer(name)


def test_no_import_runs_back_up():
    upward = [f"{m} -> {d}" for m, deps in GRAPH.items() if m != "gnnpipe"
              for d in deps if _layer(d) > _layer(m)]
    assert upward == []


def test_no_import_circle():
    # Tarjan-free: a circle exists iff some module reaches itself.
    def reach(start: str) -> set[str]:
        seen, todo = set(), list(GRAPH[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(GRAPH.get(m, ()))
        return seen

    circles = sorted(m for m in GRAPH if m in reach(m))
    assert circles == []
