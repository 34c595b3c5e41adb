"""Dead-code elimination: keep what the outputs and the guards need, nothing else."""

from __future__ import annotations

import operator

from ..ir import Graph


def dce(graph: Graph) -> tuple[Graph, bool]:
    live = {r.node for r in graph.outputs}
    # guards, and loops with guards inside (gradgen.loops), are checks that must still run
    live.update(n for n in graph.nodes if n.op.name == "guard" or n.attrs.get("guarded"))
    input_node = operator.attrgetter("node")  # C-level reads: this runs per node
    for node in reversed(graph.nodes):  # one backward sweep: readers come after what they read
        if node in live:
            live.update(map(input_node, node.inputs))
    kept = [n for n in graph.nodes if n in live or n.op.name == "input"]
    if len(kept) == len(graph.nodes):
        return graph, False
    return graph.with_nodes(kept, graph.outputs), True
