"""The one way passes change a graph: substitute refs, rebuilding nodes in a single sweep."""

from __future__ import annotations

import numpy as np

from ..abstract import Pending, abstract_value, shaped_value
from ..ir import Graph, Node, Ref
from ..ops import OPS
from ..peephole import names_adjoint

_ADJOINT = OPS["adjoint"]


class Rewriter:
    """Walks a graph once in order; a pass maps each node to a replacement Ref (or keeps it),
    and every later reader sees the replacement. Values travel with replaced nodes."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.values = graph.meta.get("values")
        self.subst: dict[Ref, Ref] = {}
        self.nodes: list[Node] = []
        # keep(node): the node as it is, next in the new graph (list.append itself: a pass
        # calls it per node)
        self.keep = self.nodes.append
        self.changed = False

    def resolve(self, ref: Ref) -> Ref:
        return self.subst.get(ref, ref)

    def rebuilt(self, node: Node) -> Node:
        """``node`` with its inputs resolved (the same object when nothing changed)."""
        if not self.subst:  # nothing replaced yet: a sweep that changes nothing stops here
            return node
        old = node.inputs
        inputs = tuple(map(self.subst.get, old, old))  # C-level loops: this runs per node
        if inputs == old:  # compares the Refs in C (identity first)
            return node
        new = node.with_inputs(inputs)
        if self.values is not None and node in self.values:
            self.values[new] = self.values[node]
        for i in range(len(node.avals)):
            self.subst[Ref(node, i)] = Ref(new, i)
        return new

    def add(self, nodes) -> None:
        """Keep new nodes a pass built, with what is known of their values when the graph
        carries values: built on shapes like the backward (abstract.py), or computed from
        known inputs for a row without an abstract rule (else left to be computed if asked)."""
        for node in nodes:
            if self.values is not None:
                self._describe(node)
            self.nodes.append(node)

    def _describe(self, node: Node) -> None:
        if node.op.name == "const":
            self.values[node] = node.attrs["value"]
            return
        args = [shaped_value(self.values, r) for r in node.inputs]
        if any(a is None for a in args):
            return
        found = abstract_value(node.op, args, node.attrs)
        if found is not None:
            self.values[node] = found[1]
        elif not any(type(self.values[r.node]) is Pending for r in node.inputs):
            with np.errstate(all="ignore"):
                self.values[node] = node.op.impl(*args, **node.attrs)

    def replace(self, node: Node, ref: Ref) -> None:
        """Every reader of ``node`` (single output) reads ``ref`` instead. A value's adjoint
        keeps its name and its place: ``grad_y = <what replaces it>``, an ``adjoint`` rename
        (what reverse mode writes where a rule's node cannot carry the name; a write into an
        array, ``g[i] += v``, prints under its array's name, so it is renamed too)."""
        if names_adjoint(node) and (ref.node.name != node.name or ref.index != 0
                                    or ref.node.op.extra.get("statement")):
            renamed = Node(_ADJOINT, (ref,), {}, (ref.node.avals[ref.index],), node.loc,
                           node.name, node.role, origin=node.origin)
            self.add((renamed,))
            ref = renamed.out
        self.subst[Ref(node, 0)] = ref
        if ref.index == 0:  # the same value: it holds what node was said to hold
            ref.node.takes_hints_of(node)
            if node.name is not None and ref.node.name == node.name and ref.node.grad_of is None:
                ref.node.grad_of = node.grad_of  # (a rewrite that built it under the name)
        self.changed = True

    def result(self) -> Graph:
        inputs = [self.resolve(n.out).node for n in self.graph.inputs]
        outputs = [self.resolve(r) for r in self.graph.outputs]
        g = self.graph.with_nodes(self.nodes, outputs, inputs)
        if self.values is not None:
            g.meta["values"] = self.values
        return g
