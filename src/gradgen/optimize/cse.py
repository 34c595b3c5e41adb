"""Common-subexpression elimination: one node per (op, inputs, attrs)."""

from __future__ import annotations

from ..ir import Graph, Node
from ..peephole import UNIQUE, names_adjoint, node_key
from .rewrite import Rewriter
from .scan import scan


def cse(graph: Graph) -> tuple[Graph, bool]:
    if not scan(graph).duplicates:
        return graph, False  # (a merge is what makes further duplicates: none to start one)
    rw = Rewriter(graph)
    keep = rw.keep
    seen: dict[tuple, Node] = {}
    for node in graph.nodes:  # (calls kept few: this runs per node, usually changing nothing)
        new = rw.rebuilt(node) if rw.subst else node
        name = node.op.name
        if name in UNIQUE:
            keep(new)
            continue
        attrs = new.attrs
        key = (name, new.inputs) if not attrs else node_key(name, new.inputs, attrs)
        first = seen.get(key)
        if first is None:
            seen[key] = new
            keep(new)
            continue
        if names_adjoint(new) and first.name != new.name:
            rw.replace(node, first.out)  # grad_y = the first: a rename keeps the adjoint's name
            continue
        if first.name is None and new.name is not None and new.role == first.role:
            first.name = new.name  # the user named the duplicate: keep their name
        first.takes_hints_of(new)
        for i in range(len(node.avals)):
            rw.subst[node.out._replace(index=i)] = first.out._replace(index=i)
        rw.changed = True
    return rw.result(), rw.changed
