"""Dead-code elimination: keep what the outputs and the guards need, nothing else."""

from __future__ import annotations

import itertools
import operator
from collections import Counter

from ..ir import Graph, Node
from ..peephole import NO_DUPLICATES

_REF_NODE = operator.itemgetter(0)  # Ref.node, read in C without the property
_NODE_INPUTS = operator.attrgetter("inputs")
# graph.meta key: (nodes, reads, unread) of the last graph dce looked at, where reads
# counts the edges into each node and unread lists the nodes no edge reads. The build asks
# for the graph again without its first output, and a pass that changes nothing hands the
# same nodes on: the counts are reused when the nodes are the same (one list comparison,
# in C) instead of being counted again.
_READS = "dce.reads"


def dce(graph: Graph) -> tuple[Graph, bool]:
    # A dead node is one nothing live reads, so the last dead node in the graph is read by
    # nothing at all: the search starts from the unread nodes and follows inputs that lose
    # their last reader. Graphs with no dead code, most of them, cost a count of the edges
    # (in C) and no walk.
    nodes = graph.nodes
    cached = graph.meta.get(_READS)
    if cached is not None and cached[0] == nodes:
        _, edge_reads, unread = cached
    else:
        edge_reads = Counter(map(_REF_NODE, itertools.chain.from_iterable(
            map(_NODE_INPUTS, nodes))))
        unread = [node for node in itertools.filterfalse(edge_reads.__contains__, nodes)
                  if _removable(node)]  # (in C, in order: no set of the nodes to build)
        graph.meta[_READS] = (list(nodes), edge_reads, unread)
    returned = set(map(_REF_NODE, graph.outputs))
    todo = [node for node in unread if node not in returned]
    if not todo:
        return graph, False
    reads = edge_reads.copy()  # becomes the pruned graph's
    dead: set[Node] = set()
    kept_unread = [node for node in unread if node in returned]
    while todo:
        node = todo.pop()
        dead.add(node)
        for ref in node.inputs:
            read = ref.node
            reader_count = reads[read] - 1
            reads[read] = reader_count
            if not reader_count and _removable(read):
                (kept_unread if read in returned else todo).append(read)
    kept = list(itertools.filterfalse(dead.__contains__, nodes))
    pruned = graph.with_nodes(kept, graph.outputs)
    pruned.meta[_READS] = (list(kept), reads, kept_unread)
    if graph.meta.get(NO_DUPLICATES) == nodes:  # nodes taken away make no two alike
        pruned.meta[NO_DUPLICATES] = list(kept)
    return pruned, True


def forget_reads(graph: Graph) -> Graph:
    """``graph`` without dce's counts, once no pass will run on it again (a built function's
    graphs: they would hold a copy of the node list and a count per node for as long as the
    function lives, and the cyclic GC would walk them)."""
    graph.meta.pop(_READS, None)
    return graph


def _removable(node: Node) -> bool:
    """Inputs stay (they are the signature), and so do guards and loops with guards inside
    (gradgen.loops): they are checks that must still run."""
    return node.op.name not in ("input", "guard") and not node.attrs.get("guarded")
