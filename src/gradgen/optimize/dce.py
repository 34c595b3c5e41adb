"""Dead-code elimination: keep what the outputs and the guards need, nothing else."""

from __future__ import annotations

import itertools
import operator
from collections import Counter

from ..ir import Graph, Node

_REF_NODE = operator.attrgetter("node")
_NODE_INPUTS = operator.attrgetter("inputs")


def dce(graph: Graph) -> tuple[Graph, bool]:
    # A dead node is one nothing live reads, so the last dead node in the graph is read by
    # nothing at all: the search starts from the unread nodes (found in C, over every edge
    # at once) and follows inputs that lose their last reader. Graphs with no dead code,
    # most of them, cost a few set operations and no walk.
    nodes = graph.nodes
    reads = Counter(map(_REF_NODE, itertools.chain.from_iterable(map(_NODE_INPUTS, nodes))))
    reads.update(map(_REF_NODE, graph.outputs))
    todo = [node for node in set(nodes).difference(reads) if _removable(node)]
    if not todo:
        return graph, False
    dead: set[Node] = set()
    while todo:
        node = todo.pop()
        dead.add(node)
        for ref in node.inputs:
            reader_count = reads[ref.node] - 1
            reads[ref.node] = reader_count
            if not reader_count and _removable(ref.node):
                todo.append(ref.node)
    kept = list(itertools.filterfalse(dead.__contains__, nodes))
    return graph.with_nodes(kept, graph.outputs), True


def _removable(node: Node) -> bool:
    """Inputs stay (they are the signature), and so do guards and loops with guards inside
    (gradgen.loops): they are checks that must still run."""
    return node.op.name not in ("input", "guard") and not node.attrs.get("guarded")
