"""Fused accumulation: one add_n per adjoint, never a chain of partial sums."""

from __future__ import annotations

from ..ir import Graph
from ..ops.core import add_n
from ..reverse import MAX_FUSED_TERMS
from .rewrite import Rewriter


def flatten_sums(graph: Graph) -> tuple[Graph, bool]:
    """add_n(add_n(a, b), c) -> add_n(a, b, c) when the inner sum has no other reader.
    Only the first operand is flattened, so the order of the additions never changes."""
    uses = graph.uses()
    rw = Rewriter(graph)
    for node in graph.nodes:
        new = rw.rebuilt(node)
        first = node.inputs[0].node if node.inputs else None
        if (node.op is add_n and first is not None and first.op is add_n
                and uses[first] == 1 and first.aval == node.aval
                and len(first.inputs) + len(node.inputs) - 1 <= MAX_FUSED_TERMS):
            inner = rw.resolve(first.out).node
            merged = new.with_inputs(inner.inputs + new.inputs[1:])
            merged.attrs = dict(new.attrs, uses=inner.attrs.get("uses", ()) + new.attrs.get(
                "uses", ()))
            if rw.values is not None:
                rw.values[merged] = rw.values.get(new)
            rw.keep(merged)
            rw.replace(node, merged.out)
            continue
        rw.keep(new)
    return rw.result(), rw.changed
