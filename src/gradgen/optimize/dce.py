"""Dead-code elimination: keep what the outputs and the guards need, nothing else."""

from __future__ import annotations

import operator

from ..ir import Graph


def dce(graph: Graph) -> tuple[Graph, bool]:
    live = {r.node for r in graph.outputs}
    input_node = operator.attrgetter("node")  # C-level reads: this runs per node
    dead = 0
    for node in reversed(graph.nodes):  # one backward sweep: readers come after what they read
        # guards, and loops with guards inside (gradgen.loops), are checks that must still run
        if node in live or node.op.name == "guard" or node.attrs.get("guarded"):
            live.add(node)
            live.update(map(input_node, node.inputs))
        elif node.op.name != "input":
            dead += 1
    if not dead:
        return graph, False
    kept = [n for n in graph.nodes if n in live or n.op.name == "input"]
    return graph.with_nodes(kept, graph.outputs), True
