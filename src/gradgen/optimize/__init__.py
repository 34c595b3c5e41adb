"""Graph optimization: run the passes to a fixed point. Each pass returns (graph, changed)."""

from __future__ import annotations

import itertools

from ..ir import Graph
from .accumulate import flatten_sums
from .cse import cse
from .dce import dce
from .fold import fold

PASSES = (dce, cse, fold, flatten_sums)


def optimize(graph: Graph, verify: bool = False, max_rounds: int = 8) -> Graph:
    # A fixed point is reached once every pass in a row has run without changing anything;
    # there is no need to finish the round that found it.
    unchanged = 0
    for run in itertools.islice(itertools.cycle(PASSES), max_rounds * len(PASSES)):
        graph, changed = run(graph)
        if verify:
            graph.verify()
        unchanged = 0 if changed else unchanged + 1
        if unchanged == len(PASSES):
            break
    graph, _ = dce(graph)
    return graph


__all__ = ["cse", "dce", "flatten_sums", "fold", "optimize"]
