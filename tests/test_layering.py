"""gradgen's modules stand in layers: each imports only from its own layer or lower ones, and
the import graph has no cycle.

Every import statement counts, at module level and inside functions alike: a lazy import
that only dodges a cycle is still a cycle. Importing ``gradgen.loops.region`` runs
``gradgen/loops/__init__.py`` first, so it counts as importing the package as well; the
root package ``gradgen`` (the public surface, entered before any module) counts only where a
module names it (``from . import __version__`` did). Not counted: imports under
``if TYPE_CHECKING:``, which never run (views of a graph name ``ir.Graph`` in annotations
only).

When a lower module needs something from a higher one, move the function to the layer it
belongs to, or hand it down: ``ops.registry.set_bind`` (the tracer applies every op),
``BOUND["setitem"]`` and friends (inplace.py writes for the tracer), a callable argument.
A new module gets a row in ``LAYERS``.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections import deque
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "gradgen"

# Lowest first. A name ending in ".*" stands for every module of that package without a row
# of its own; "ops" is the package itself (its __init__), which only re-exports the registry.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_version", "errors", "pytree", "layout", "compile"),  # nothing of gradgen below them
    ("linemap", "source"),  # the user's files: lines, targets, locations, signatures
    # Views of a graph: they name ir.Graph in annotations only, so ir's methods (str(graph),
    # to_dot, render, _repr_html_) call down into them. The explainer package's __init__ is
    # empty, so drawing a graph does not load the page.
    ("printing", "dot", "explainer", "explainer.svg", "explainer.graphview"),
    ("ir",),
    ("abstract",),  # shapes and dtypes without data
    ("peephole",),  # exact one-node rewrites (a node's CSE key, x ** 1): reverse and optimize
    ("ops.registry", "ops"),  # the table, the op record and its printers; no row yet
    ("tracer",),  # applies every op (registry.set_bind) and records it
    ("ops.*", "dialects"),  # the rows, family by family, and how each target spells them
    ("optimize.*", "optimize", "symbolic", "inplace", "intercept", "naming"),
    ("loops.region", "loops.gather", "loops.batch"),  # the loop op (its reverse mode gets
    # reverse.reverse handed down); per-trip values gathered after a loop, moved into its
    # trips; per-trip products of a backward loop batched into one after it
    ("loops.detect", "loops"),  # rolling traced iterations into a loop node
    ("function", "reverse"),
    ("tracing", "loops.emit", "emit"),  # loops/emit.py gets emit's body printer handed down
    ("build", "extend", "opsdoc"),  # build gets api's gradient handed down for a Hessian
    ("explainer.*",),  # the learner's page
    ("api",),
    ("check",),
    ("cli", "__main__", "gradgen"),  # the root package: the public names
)


def _module_names() -> dict[str, Path]:
    """Dotted name relative to gradgen ("ops.registry", "ops" for ops/__init__.py; "gradgen"
    for the root package) -> file."""
    names = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts) or "gradgen"] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_statements(tree: ast.Module):
    """Every import statement of a module, with the function it sits in (or None); those
    under ``if TYPE_CHECKING:`` are skipped."""
    stack = [(tree, None)]
    while stack:
        node, function = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend((n, function) for n in child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, function
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                else function
            stack.append((child, inner))


@functools.cache
def import_graph() -> dict[str, dict[str, str]]:
    """module -> {imported module: where ("ir.py:231 in __str__")}, gradgen modules only."""
    modules = _module_names()
    graph: dict[str, dict[str, str]] = {name: {} for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        package = "" if package == "gradgen" else package
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for statement, function in _import_statements(tree):
            targets = []
            if isinstance(statement, ast.Import):
                targets = [a.name for a in statement.names]
            else:
                if statement.level:
                    base = ["gradgen", *package.split(".")] if package else ["gradgen"]
                    base = base[:len(base) - statement.level + 1]
                    module = ".".join(base + ([statement.module] if statement.module else []))
                else:
                    module = statement.module or ""
                # `from . import linemap` imports a module; `from .ir import Graph` a name
                targets = [f"{module}.{a.name}" for a in statement.names]
                targets = [t for t in targets if t.removeprefix("gradgen.") in modules] or [module]
            where = f"{path.relative_to(SRC)}:{statement.lineno}" + (
                f" in {function}" if function else "")
            for target in targets:
                if target == "gradgen" and name != "gradgen":
                    graph[name].setdefault("gradgen", where)  # the root, named explicitly
                if not target.startswith("gradgen."):
                    continue
                parts = target.removeprefix("gradgen.").split(".")
                # the module itself and the packages above it that the importer is not in
                for n in range(1, len(parts) + 1):
                    imported = ".".join(parts[:n])
                    if imported in modules and imported != name \
                            and not name.startswith(imported + "."):
                        graph[name].setdefault(imported, where)
    return graph


def layer_of(module: str) -> int | None:
    exact = [i for i, row in enumerate(LAYERS) if module in row]
    if exact:
        return exact[0]
    package = module.rpartition(".")[0]
    found = [i for i, row in enumerate(LAYERS) if f"{package}.*" in row]
    return found[0] if found else None


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """A shortest cycle of the graph as [a, b, ..., a], or None: a breadth-first search from
    each module back to itself (no recursion)."""
    best = None
    for start in sorted(graph):
        parent: dict[str, str | None] = {start: None}
        queue, last = deque([start]), None
        while queue and last is None:
            node = queue.popleft()
            for imported in sorted(graph[node]):
                if imported == start:
                    last = node
                    break
                if imported not in parent:
                    parent[imported] = node
                    queue.append(imported)
        if last is not None:
            path = [last]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            cycle = [*reversed(path), start]
            if best is None or len(cycle) < len(best):
                best = cycle
    return best


def _describe(cycle: list[str], graph) -> str:
    steps = [f"  {a} -> {b}   ({graph[a][b]})" for a, b in itertools.pairwise(cycle)]
    return "import cycle: " + " -> ".join(cycle) + "\n" + "\n".join(steps)


def test_every_module_has_a_layer():
    missing = [m for m in _module_names() if layer_of(m) is None]
    assert not missing, f"add these modules to LAYERS in {Path(__file__).name}: {missing}"


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, _describe(cycle, graph)


def test_each_module_imports_only_its_layer_and_lower():
    graph = import_graph()
    upward = []
    for module, imports in sorted(graph.items()):
        for imported, where in sorted(imports.items()):
            mine, theirs = layer_of(module), layer_of(imported)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"  {module} (layer {mine}) imports {imported} (layer {theirs})"
                              f"   ({where})")
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_the_checker_sees_a_cycle_and_a_lazy_import():
    """The analysis itself: a function-level import counts, a TYPE_CHECKING one does not."""
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from .ir import Graph\n"
                     "def f():\n    from .tracer import bind\n")
    found = [(s.module, fn) for s, fn in _import_statements(tree)]
    assert ("tracer", "f") in found and ("ir", None) not in found
    graph = {"a": {"b": "a.py:1"}, "b": {"c": "b.py:1"}, "c": {"a": "c.py:2 in f"}, "d": {}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ""}, "b": {}}) is None


def test_importing_gradgen_does_not_load_sympy_or_libcst():
    """sympy is the checker's and libcst the CLI's: a rule row that reads ``sp.Max`` at import
    time would make every user's import pay for sympy (about a second)."""
    import os
    import subprocess
    import sys

    code = "import sys, gradgen; print(sorted({'sympy', 'libcst', 'scipy'} & set(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(SRC.parent))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.strip()
    assert out == "[]", f"import gradgen loaded {out}"
