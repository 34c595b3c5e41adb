"""Per-trip values gathered after a loop, moved into its trips so that the loop can roll.

``hs.append(h)`` in the loop and ``np.stack(hs)`` (or ``np.array(hs)``) after it: the stack
reads a value of every trip, which stops the trips from becoming one loop (detect.py). The
same stack is a buffer with one row written per trip, so it is rewritten as that: the writes
``hs[k] = h`` placed right after each ``h`` is computed, where they repeat with the trips.
Likewise ``sum(losses)``: Python adds ``((0 + l0) + l1) + ...``, and each add moved right
after its ``l`` makes a running total the loop carries. Both compute the same numbers in the
same order; the rewrite is kept only where it lets the loop roll (roll_loops).
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from ..abstract import Pending
from ..ir import Graph, Node, Ref
from ..ops import OPS

MIN_GATHERED = 8  # fewer per-trip values are left alone: no loop that long to roll


def gather_into_trips(graph: Graph, values: dict) -> tuple[Graph, set[Node]] | None:
    """``graph`` with every long stack of computed values and every long chain of adds moved
    into the trips that compute their terms, and the set of nodes moved; None when there is
    nothing to move."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    after: dict[Node, list[Node]] = {}  # a computed value -> nodes placed right after it
    replaced: dict[Node, Ref] = {}
    moved: set[Node] = set()
    relocated: set[Node] = set()  # constants placed elsewhere
    named: dict[Node, str] = {}
    readers = graph.readers()
    for node in graph.nodes:
        if node.op.name == "stack":
            writes = _stack_as_writes(node, position, values)
            if writes is not None:
                for term, write in writes:
                    after.setdefault(term, []).append(write)
                    if write.op.name != "const":  # (the zeros stay before the loop)
                        moved.add(write)
                replaced[node] = writes[-1][1].out
        elif node.op.name == "add" and not any(  # the last add of a chain: none continues it
                u is not None and u.op.name == "add" and u.inputs[0].node is node
                for u in readers.get(node, ())):
            chain = _add_chain(node, position, readers)
            if chain is not None:
                start = chain[0].inputs[0].node
                if start.op.name == "const" and position.get(start, -1) > position[
                        chain[0].inputs[1].node]:  # sum's 0, made after the loop: moved too
                    after.setdefault(chain[0].inputs[1].node, []).append(start)
                    relocated.add(start)
                for add in chain:  # the running total takes the sum's name
                    after.setdefault(add.inputs[1].node, []).append(add)
                    moved.add(add)
                    named[add] = chain[-1].name or "total"
    if not moved:
        return None
    nodes: list[Node] = []
    mapping: dict[Node, Node] = {}

    def place(node: Node) -> None:
        ins = tuple(replaced.get(r.node) or Ref(mapping.get(r.node, r.node), r.index)
                    for r in node.inputs)
        new = node if ins == node.inputs else node.with_inputs(ins)
        if node in named:
            new = Node(new.op, new.inputs, new.attrs, new.avals, new.loc, named[node],
                       new.role, new.serial, new.origin)
        if new is not node:
            mapping[node] = new
            if node in values:
                values[new] = values[node]
        nodes.append(new)
        for follower in after.get(node, ()):
            place(follower)

    for node in graph.nodes:
        if node in replaced or node in relocated or (node in moved and node.op.name == "add"):
            continue  # a stack is gone; a moved add is placed after its term
        place(node)
    outputs = [replaced.get(r.node) or Ref(mapping.get(r.node, r.node), r.index)
               for r in graph.outputs]
    moved_now = {mapping.get(n, n) for n in moved}
    return graph.with_nodes(nodes, outputs), moved_now


def _stack_as_writes(node: Node, position, values) -> list[tuple[Node, Node]] | None:
    """``np.stack([x0, x1, ...])`` (axis 0) of computed values, in the order they are
    computed: the writes ``buffer[k] = xk``, each with the value it follows."""
    terms = [r.node for r in node.inputs]
    if (node.attrs.get("axis", 0) != 0 or len(terms) < MIN_GATHERED
            or any(r.index != 0 or r.node.op.name in ("input", "const") for r in node.inputs)
            or len(set(terms)) != len(terms)
            or any(position[a] >= position[b] for a, b in pairwise(terms))):
        return None
    aval = node.aval
    zeros = Node(OPS["const"], (), {"value": np.zeros(aval.shape, aval.dtype)}, node.avals,
                 None, None, "const")
    values[zeros] = zeros.attrs["value"]
    name = node.name or (f"{terms[0].name}s" if terms[0].name else "stacked")
    buffer, writes = zeros.out, []
    for k, term in enumerate(terms):
        write = Node(OPS["index_update"], (buffer, Ref(term, 0)), {"index": (k,)}, node.avals,
                     term.loc, name, node.role)
        values[write] = Pending((True,))  # computed if asked for (the loop's values are)
        writes.append((term, write))
        buffer = write.out
    # the zeros come first: placed right before the first write, after the first term
    return [(terms[0], zeros), *writes]


def _add_chain(last: Node, position, readers) -> list[Node] | None:
    """``sum(xs)``: the adds ``((c + x0) + x1) + ...`` ending at ``last``, each read only by
    the next, with terms computed in order after ``c``; the adds from first to last."""
    chain = [last]
    node = last
    while True:
        prev = node.inputs[0].node
        if prev.op.name != "add" or readers.get(prev) != [node] or node.inputs[0].index:
            break
        chain.append(prev)
        node = prev
    chain.reverse()
    if len(chain) < MIN_GATHERED:
        return None
    terms = [a.inputs[1].node for a in chain]
    start = chain[0].inputs[0].node
    if (any(t.op.name in ("input", "const") for t in terms)
            or any(a.inputs[1].node is a.inputs[0].node for a in chain)
            or start.op.name != "const" and position.get(start, -1) >= position[terms[0]]
            or any(position[a] >= position[b] for a, b in pairwise(terms))):
        return None
    return chain
