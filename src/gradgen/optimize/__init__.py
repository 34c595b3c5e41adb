"""Graph optimization: run the passes to a fixed point. Each pass returns (graph, changed)."""

from __future__ import annotations

import bisect
import itertools

import numpy as np
from numpy.lib.array_utils import byte_bounds

from ..abstract import shaped_value
from ..ir import Graph, Node, Ref
from ..ops import OPS
from .accumulate import flatten_sums, slice_updates
from .batch_rows import batch_matvecs
from .cse import cse
from .dce import dce, forget_reads
from .dead_writes import drop_dead_writes
from .early_writes import hoist_copying_writes
from .fold import fold
from .outer_sums import stack_outer_products
from .scan import forget_scan, scan

# The passes in the order they run, each with the ops it rewrites: a pass is skipped while
# the graph has none of them (None: any graph). The ops are counted by the one walk that
# cse and fold read too (scan.py), where each pass's own test would be one more walk.
PASS_TABLE = (
    (dce, None),
    (cse, None),
    (fold, None),
    (flatten_sums, {"add_n"}),
    (slice_updates, {"scatter"}),
    (drop_dead_writes, {"index_update"}),
    (stack_outer_products, {"outer"}),
    (batch_matvecs, {"matmul"}),
    (hoist_copying_writes, {"index_update", "index_add", "add_along_axis"}),
)
PASSES = tuple(run for run, _ in PASS_TABLE)
# Passes whose one sweep leaves nothing for a second sweep of the same pass to do (dce keeps
# everything a live node reads; cse resolves readers before it keys them, so the readers of
# merged duplicates merge in the same sweep): tests/test_optimize.py checks both.
IDEMPOTENT = (dce, cse)


def optimize(graph: Graph, verify: bool = False, max_rounds: int = 8) -> Graph:
    # A fixed point is reached once every pass in a row has run without changing anything;
    # there is no need to finish the round that found it. An idempotent pass that changed
    # the graph counts itself as done: running it again (cse is the dearest pass) would
    # only confirm that.
    unchanged = 0
    ops, census_of = set(), None  # the op names in the graph last counted
    for run, needs in itertools.islice(itertools.cycle(PASS_TABLE), max_rounds * len(PASSES)):
        if needs is not None:
            if census_of is not graph:
                ops, census_of = scan(graph).ops, graph
            if ops.isdisjoint(needs):
                unchanged += 1
                if unchanged == len(PASSES):
                    return forget_scan(graph)
                continue
        graph, changed = run(graph)
        if verify:
            graph.verify()
        unchanged = (1 if run in IDEMPOTENT else 0) if changed else unchanged + 1
        if unchanged == len(PASSES):
            return forget_scan(graph)  # dce was among the passes that found nothing to do
    graph, _ = dce(graph)
    return forget_scan(graph)


def own_outputs(graph: Graph, positions) -> Graph:
    """The outputs at ``positions`` (gradients) as arrays the caller may mutate. After the
    passes one may be an argument, a constant or the seed, a read-only view, or share memory
    with an earlier one (CSE gives x and y of ``x + y`` one cotangent): it gets a copy. Each
    output's views are replayed on one stand-in array per computed value, so NumPy says
    which of them overlap (``g[0]`` and ``g[1]`` do not)."""
    outputs, nodes = list(graph.outputs), list(graph.nodes)
    values = graph.meta.get("values") or {}
    stand_ins: dict[Ref, np.ndarray] = {}
    # per stand-in, the byte ranges of the views of it handed out so far, sorted: they never
    # overlap one another (an overlapping one gets a copy), so an output's range is compared
    # with its neighbours only (np.may_share_memory compares the same ranges), and views of
    # different stand-ins never overlap
    handed_out: dict[Ref, list[tuple[int, int]]] = {}
    readers = None  # the nodes some node reads: made when a named view needs a copy
    for i in positions:
        ref = outputs[i]
        if ref.aval.py is not None or isinstance(shaped_value(values, ref), np.generic):
            continue  # Python numbers and NumPy scalars are immutable
        views, base = [], ref
        while base.node.op.name == "adjoint" or base.node.is_view:
            if base.node.op.name != "adjoint":
                views.append(base.node)
            base = base.node.inputs[0]
        own = base.node.op.name not in ("input", "const", "seed")
        if own:
            array = stand_ins.setdefault(base, np.empty(base.aval.shape, base.aval.dtype))
            for view in reversed(views):
                array = view.op.impl(array, **view.attrs)
            if not isinstance(array, np.ndarray):  # x[i, j] of an array: a NumPy scalar
                continue
            own = array.flags.writeable
            if own and array.size:  # (an empty array shares no memory)
                ranges = handed_out.setdefault(base, [])
                low, high = byte_bounds(array)
                at = bisect.bisect_left(ranges, (low, high))
                own = not (at > 0 and ranges[at - 1][1] > low
                           or at < len(ranges) and ranges[at][0] < high)
                if own:
                    ranges.insert(at, (low, high))
        if not own:
            copy = Node(OPS["copy"], (ref,), {}, (ref.aval,), ref.node.loc, None, "bwd")
            if ref.node in values:
                values[copy] = values[ref.node]  # same kind; pending or not (a copy)
            held = ref.node
            if held.name is not None and held.is_view:
                if readers is None:
                    readers = {r.node for node in nodes for r in node.inputs}
                if held not in readers:  # the copy is what the name holds: grad_x =
                    copy.name, copy.grad_of = held.name, held.grad_of  # np.broadcast_to(
                    held.name = held.grad_of = None  # grad_out, (3,)).copy(), in one line
            nodes.append(copy)
            outputs[i] = copy.out
    if outputs == graph.outputs:
        return graph
    return graph.with_nodes(nodes, outputs)


__all__ = ["batch_matvecs", "cse", "dce", "drop_dead_writes", "flatten_sums", "fold",
           "forget_reads", "hoist_copying_writes", "optimize", "own_outputs", "slice_updates", "stack_outer_products"]
