"""Common-subexpression elimination: one node per (op, inputs, attrs)."""

from __future__ import annotations

from ..ir import Graph, Node
from ..peephole import UNIQUE, node_key
from .rewrite import Rewriter


def cse(graph: Graph) -> tuple[Graph, bool]:
    if not _has_duplicates(graph.nodes):
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
        if first.name is None and new.name is not None and new.role == first.role:
            first.name = new.name  # the user named the duplicate: keep their name
        first.takes_hints_of(new)
        for i in range(len(node.avals)):
            rw.subst[node.out._replace(index=i)] = first.out._replace(index=i)
        rw.changed = True
    return rw.result(), rw.changed


def _has_duplicates(nodes: list[Node]) -> bool:
    """Do two nodes have one key? (One comprehension and one set: most graphs have none.)"""
    plain = [(node.op.name, node.inputs) for node in nodes
             if not node.attrs and node.op.name not in UNIQUE]
    if len(set(plain)) != len(plain):
        return True
    keys = [node_key(node.op.name, node.inputs, node.attrs) for node in nodes
            if node.attrs and node.op.name not in UNIQUE]
    return len(set(keys)) != len(keys)
