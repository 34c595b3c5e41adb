"""Graph optimization: run the passes to a fixed point. Each pass returns (graph, changed)."""

from __future__ import annotations

from ..ir import Graph
from .accumulate import flatten_sums
from .cse import cse
from .dce import dce
from .fold import fold

PASSES = (dce, cse, fold, flatten_sums)


def optimize(graph: Graph, verify: bool = False, max_rounds: int = 8) -> Graph:
    for _ in range(max_rounds):
        any_change = False
        for run in PASSES:
            graph, changed = run(graph)
            if verify:
                graph.verify()
            any_change |= changed
        if not any_change:
            break
    graph, _ = dce(graph)
    return graph


__all__ = ["cse", "dce", "flatten_sums", "fold", "optimize"]
