"""Graph -> Graphviz DOT: forward and backward side by side, edges labelled by output index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .printing import _names

if TYPE_CHECKING:  # a view of a graph: ir calls down into it (tests/test_layering.py)
    from .ir import Graph


def _quote(text: str) -> str:
    """A DOT string; a newline becomes Graphviz's ``\\n`` line break (escaped only once)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def graph_to_dot(graph: Graph) -> str:
    names = _names(graph)
    lines = ["digraph gradgen {", "  rankdir=TB;", '  node [fontname="monospace"];']
    clusters = {"fwd": [], "bwd": []}
    for node in graph.nodes:
        if node.op.name == "const":
            continue
        label = node.op.name
        show = node.op.extra.get("show_attrs")
        if show is not None:
            label += f"\n{show(node.attrs)}"
        if node.avals:
            label = f"{names[node]} = {label}\n{node.aval}"
        shape = "box" if node.op.name in ("input",) else "ellipse"
        if node.op.name == "guard":
            label = f"guard == {node.attrs['expect']}"
            shape = "diamond"
        if node.role == "input":
            shape = "box"
        side = "bwd" if node.role == "bwd" else "fwd"
        clusters[side].append(f"    n{node.serial} [label={_quote(label)}, shape={shape}];")
    for side, title in (("fwd", "forward"), ("bwd", "backward")):
        if clusters[side]:
            lines += [f"  subgraph cluster_{side} {{", f"    label={_quote(title)};"]
            lines += clusters[side]
            lines.append("  }")
    for node in graph.nodes:
        for ref in node.inputs:
            if ref.node.op.name == "const":
                continue
            lines.append(f'  n{ref.node.serial} -> n{node.serial} [label="{ref.index}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph: Graph, path: str) -> str:
    import os
    import shutil
    import subprocess

    from .errors import GradgenError

    text = graph_to_dot(graph)
    kind = os.path.splitext(path)[1].lower().lstrip(".")
    if kind in ("dot", "gv"):
        with open(path, "w") as fh:
            fh.write(text)
        return path
    if kind not in ("svg", "png", "pdf"):
        raise GradgenError(f"{path}: a graph can be written as .dot, .svg, .png or .pdf")
    dot = shutil.which("dot")
    if dot is None:
        raise GradgenError(
            f"writing {path} needs Graphviz's `dot`, which is not installed",
            hint="install the graphviz package (e.g. apt-get install graphviz), or write .dot")
    result = subprocess.run([dot, f"-T{kind}", "-o", path], input=text, text=True,
                            capture_output=True, check=False)
    if result.returncode != 0:
        raise GradgenError(f"dot failed to write {path}: {result.stderr.strip()}")
    return path
