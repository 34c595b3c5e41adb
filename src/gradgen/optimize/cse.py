"""Common-subexpression elimination: one node per (op, inputs, attrs)."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .rewrite import Rewriter

# Never merged: inputs, the seed, guards (side effects) and adjoints (each carries a name).
_UNIQUE = {"input", "seed", "guard", "adjoint"}


def _hashable(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, float | np.floating):
        return (type(value), repr(value))  # keeps 0.0 and -0.0 apart, and nan equal to itself
    return (type(value), value)


def _key(node: Node):
    # The Refs themselves (hashed in C): within one sweep every input is resolved to the one
    # node object that holds its serial, so equal Refs are equal (serial, index) pairs.
    inputs = node.inputs
    attrs = node.attrs
    if not attrs:  # most nodes: skip the generic (slow) attribute hashing
        return (node.op.name, inputs)
    if node.op.name == "const" and len(attrs) == 1 and type(attrs["value"]) in (int, bool):
        return ("const", type(attrs["value"]), attrs["value"])
    return (node.op.name, inputs, _hashable(attrs))


def cse(graph: Graph) -> tuple[Graph, bool]:
    rw = Rewriter(graph)
    seen: dict[tuple, Node] = {}
    for node in graph.nodes:
        new = rw.rebuilt(node)
        if node.op.name in _UNIQUE:
            rw.keep(new)
            continue
        key = _key(new)
        first = seen.get(key)
        if first is None:
            seen[key] = new
            rw.keep(new)
            continue
        if first.name is None and new.name is not None and new.role == first.role:
            first.name = new.name  # the user named the duplicate: keep their name
        first.takes_hints_of(new)
        for i in range(len(node.avals)):
            rw.subst[node.out._replace(index=i)] = first.out._replace(index=i)
        rw.changed = True
    return rw.result(), rw.changed
