"""str(graph): a jaxpr-like listing with the user's names and source lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a view of a graph: ir calls down into it (tests/test_layering.py)
    from .ir import Graph, Node



def _names(graph: Graph) -> dict[Node, str]:
    names: dict[Node, str] = {}
    taken: dict[str, int] = {}
    for node in graph.nodes:
        if not node.avals:
            continue
        base = node.name or f"%{len(names)}"
        if node.name:
            n = taken.get(base, 0)
            taken[base] = n + 1
            base = base if n == 0 else f"{base}_{n}"
        names[node] = base
    return names


def _arg(ref, names) -> str:
    node = ref.node
    if node.op.name == "const":
        return repr(node.attrs["value"]) if node.aval.size <= 4 else f"<const {node.aval}>"
    text = names[node]
    return text if ref.index == 0 and len(node.avals) == 1 else f"{text}[{ref.index}]"


def graph_listing(graph: Graph) -> str:
    names = _names(graph)
    params = ", ".join(f"{names[n]}:{n.aval}" for n in graph.inputs)
    lines = [f"{{ lambda {params} ."]
    for node in graph.nodes:
        if node.op.name in ("input", "const"):
            continue
        args = " ".join(_arg(r, names) for r in node.inputs)
        attrs = {k: v for k, v in node.attrs.items() if k not in ("uses",)}
        attr_text = "[" + ", ".join(f"{k}={v!r}" for k, v in attrs.items()) + "]" if attrs else ""
        show = node.op.extra.get("show_attrs")
        if show is not None:
            attr_text = f"[{show(node.attrs)}]"
        where = f"   # {node.loc}" if node.loc is not None else ""
        if node.role == "bwd":
            where += " (backward)" if where else "   # backward"
        if node.op.name == "guard":
            lines.append(f"  guard {args} == {node.attrs['expect']}{where}")
            continue
        outs = " ".join(f"{names[node]}:{a}" for a in node.avals)
        lines.append(f"  {outs} = {node.op.name}{attr_text} {args}{where}".rstrip())
        if node.op.name == "loop":  # the body, once: carries, slices, invariants -> carries
            body = graph_listing(node.attrs["region"].body)
            lines.extend(f"    {line}" for line in body.splitlines())
    outs = ", ".join(_arg(r, names) for r in graph.outputs)
    lines.append(f"  in ({outs}) }}")
    return "\n".join(lines)
