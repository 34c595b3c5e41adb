"""Matrix-vector products with the rows of one array as one matrix product."""

from __future__ import annotations

from ..ir import Aval, Graph, Node, Ref
from ..ops import OPS
from .rewrite import Rewriter

# Fewer products than this (or than half the rows) stay as written.
MIN_BATCHED_ROWS = 4


def batch_matvecs(graph: Graph) -> tuple[Graph, bool]:
    """``U @ xs[t]`` for the steps t of an unrolled loop becomes one product before the
    first step, ``U_xs = xs @ U.T``, and each step reads its row, ``U_xs[t]``: what a person
    writes, one BLAS call instead of one per step. BLAS sums each row in its own order, so
    the last bits may differ from the per-step products (arrays only, never scalar code)."""
    groups: dict[tuple[Ref, Ref], list[Node]] = {}
    for node in graph.nodes:
        key = _matrix_times_row(node)
        if key is not None:
            groups.setdefault(key, []).append(node)
    first_of: dict[Node, tuple[Ref, Ref]] = {}
    members: set[Node] = set()
    for key, nodes in groups.items():
        rows = key[1].aval.shape[0]
        if len(nodes) >= MIN_BATCHED_ROWS and 2 * len(nodes) >= rows:
            first_of[nodes[0]] = key
            members.update(nodes)
    if not members:
        return graph, False
    rw = Rewriter(graph)
    products: dict[tuple[Ref, Ref], Ref] = {}
    for node in graph.nodes:
        new = rw.rebuilt(node)
        if node not in members:
            rw.keep(new)
            continue
        if node in first_of:
            key = first_of[node]
            m, x = rw.resolve(key[0]), rw.resolve(key[1])
            (n, k), rows = m.aval.shape, x.aval.shape[0]
            mt = Node(OPS["transpose"], (m,), {"axes": None}, (Aval((k, n), m.aval.dtype),),
                      node.loc, None, node.role)
            named = m.node.name and x.node.name and node.role != "bwd"
            product = Node(OPS["matmul"], (x, mt.out), {},
                           (Aval((rows, n), node.aval.dtype),), node.loc,
                           f"{m.node.name}_{x.node.name}" if named else None, node.role)
            rw.add([mt, product])
            products[key] = product.out
        key = _matrix_times_row(node)
        row = Node(OPS["getitem"], (products[key],), {"index": node.inputs[1].node.attrs[
            "index"]}, node.avals, node.loc, node.name, node.role)
        rw.add([row])
        rw.replace(node, row.out)
    return rw.result(), rw.changed


def _matrix_times_row(node: Node) -> tuple[Ref, Ref] | None:
    """(M, X) when ``node`` is ``M @ X[t]`` for a matrix M, a 2-D X and an integer t."""
    if node.op.name != "matmul":
        return None
    m, v = node.inputs
    row = v.node
    if (m.aval.ndim != 2 or v.aval.ndim != 1 or row.op.name != "getitem"
            or len(row.inputs) != 1 or row.inputs[0].aval.ndim != 2):
        return None
    index = row.attrs["index"]
    if len(index) != 1 or type(index[0]) is not int:
        return None
    return m, row.inputs[0]
