"""Copying writes scheduled early: ``g[1:] = v`` moved up to where ``v`` is made, ahead of
``v``'s other readers, so that those readers run after the copy and may reuse ``v``'s array
in place (emit.py's ``_Temporaries``).

Rosenbrock's backward makes ``v = 200.0 * d``, then ``v * 2.0 * x_head`` (one of its two
uses), then ``grad_x[1:] = v`` (the other). In that order ``v`` is still to be copied when the
product is computed, so the product needs two new arrays. With the copy first, ``v`` is
dead by the time the product runs, and the emitter writes ``v *= 2.0; v *= x_head``: the same
ufuncs on the same elements, two fewer arrays, no float changed. A graph is SSA, so any
order that keeps each node after its inputs computes the same values; what a move must not
do is put a write ahead of a read of the array it writes into (the emitter would then copy
that array rather than write into it), nor move it into another source line's group.
"""

from __future__ import annotations

from ..ir import Graph, Node

# How far a write is moved up, in nodes: the gain is a read just before the write (the
# backward of one source line), and a bound keeps the pass linear on long graphs.
_REACH = 16


def hoist_copying_writes(graph: Graph) -> tuple[Graph, bool]:
    nodes = graph.nodes
    position = {node: i for i, node in enumerate(nodes)}
    writes = [n for n in nodes if n.op.extra.get("statement") and len(n.inputs) > 1]
    # The array each value lives in: a view, a rename or a new version of an array lives in
    # the array of its first input (the emitter writes versions in place when it can).
    root: dict[Node, Node] = {}
    for node in nodes:
        if node.op.name == "adjoint" or node.is_view or node.op.extra.get("statement"):
            first = node.inputs[0].node
            root[node] = root.get(first, first)
    after: dict[Node, list[Node]] = {}  # a node -> the writes moved to follow it
    moved: set[Node] = set()
    for write in writes:
        at = position[write]
        # A literal it reads (the zeros it writes into) goes up with it: a literal reads
        # nothing, so it may stand anywhere before its first reader.
        literals = {r.node for r in write.inputs if r.node.op.name == "const"}
        earliest = max((position[r.node] for r in write.inputs if r.node not in literals),
                       default=-1) + 1
        between = [n for n in nodes[earliest:at] if n not in literals]
        if at - earliest > _REACH or not between:
            continue
        values = {r.node for r in write.inputs[1:] if r.aval.shape != ()}
        if not any(r.node in values for n in between for r in n.inputs):
            continue  # nothing before the write reads what it copies: no gain
        base = write.inputs[0].node
        written = root.get(base, base)
        if any(n.loc != write.loc and n.op.name != "const" or n.op.extra.get("statement")
               or n in moved
               or any(root.get(r.node, r.node) is written for r in n.inputs)
               for n in between):
            continue
        carried = [n for n in nodes[earliest:at] if n in literals] + [write]
        after.setdefault(nodes[earliest - 1], []).extend(carried)
        moved.update(carried)
    if not moved:
        return graph, False
    order: list[Node] = []
    for node in nodes:
        if node in moved:
            continue
        todo = [node]
        while todo:  # a node, then the writes moved after it (and the writes after those)
            placed = todo.pop()
            order.append(placed)
            todo.extend(reversed(after.get(placed, ())))
    return graph.with_nodes(order, graph.outputs), True
