"""Sums of outer products as one matrix product of stacked vectors."""

from __future__ import annotations

from ..ir import Aval, Graph, Node, Ref
from ..ops import OPS
from ..ops.core import add_n
from ..peephole import names_adjoint
from .rewrite import Rewriter

# Below this many terms a few np.outer calls cost about what stacking them does.
MIN_STACKED_TERMS = 4


def stack_outer_products(graph: Graph) -> tuple[Graph, bool]:
    """``outer(a1, b1) + outer(a2, b2) + ...`` (the weight gradient of a matrix-vector
    product used at every step of an unrolled loop) becomes
    ``np.stack([a1, a2, ...]).T @ np.stack([b1, b2, ...])``, what a person writes: one matrix
    product instead of one outer product and one addition per term; and ``a1 + a2 + ...`` of
    the same vectors (the bias gradient) becomes a sum over the rows of that same stack.

    BLAS and np.sum add in their own order, so the last bits may differ from the
    left-to-right sum: the pass only touches sums of arrays, never scalar code. A sum split
    over several statements (``MAX_FUSED_TERMS``) is gathered back when its partial sums
    have no other reader."""
    # Both rewrites need outer products: without one (scalar code) a cheap scan says so.
    if not any(n.op.name == "outer" for n in graph.nodes):
        return graph, False
    uses = graph.uses()
    terms_of: dict[Node, list[Ref]] = {}  # sum -> its terms, through gathered partial sums
    gathered: set[Node] = set()  # partial sums that a later sum takes in
    stacked: set[tuple[Ref, ...]] = set()  # the left vectors of every sum of outer products
    for node in graph.nodes:
        if node.op is not add_n or node.aval.ndim not in (1, 2):
            continue
        terms = list(node.inputs)
        first = terms[0].node
        if first in terms_of and uses[first] == 1 and first.aval == node.aval:
            terms = terms_of[first] + terms[1:]
            gathered.add(first)
        terms_of[node] = terms
        if _outer_products(terms, node):
            stacked.add(tuple(t.node.inputs[0] for t in terms))
    if not stacked:  # the bias-gradient rewrite reads the stacks of outer-product sums
        return graph, False
    rw = Rewriter(graph)
    stacks: dict[tuple[Ref, ...], Ref] = {}
    for node in graph.nodes:
        new = rw.rebuilt(node)
        terms = terms_of.get(node)
        if terms is None or node in gathered or len(terms) < MIN_STACKED_TERMS:
            rw.keep(new)
            continue
        if _outer_products(terms, node):
            lefts = tuple(t.node.inputs[0] for t in terms)
            a = _stack(lefts, stacks, rw, node)
            rights = [rw.resolve(t.node.inputs[1]) for t in terms]
            (n, k), m = a.aval.shape, rights[0].aval.shape[0]
            b = _node(OPS["stack"], rights, {"axis": 0}, node, (k, m), rights[0].aval.dtype)
            total = _node(OPS["matmul"], [a, b.out], {}, node, (n, m), node.aval.dtype)
            rw.add([b, total])
        elif tuple(terms) in stacked and all(t.aval == node.aval for t in terms):
            a = _stack(tuple(terms), stacks, rw, node)
            total = _node(OPS["sum"], [a], {"axis": (1,), "keepdims": False}, node,
                          node.aval.shape, node.aval.dtype)
            rw.add([total])
        else:
            rw.keep(new)
            continue
        total.name = new.name
        rw.replace(node, total.out)
    return rw.result(), rw.changed


def _outer_products(terms: list[Ref], total: Node) -> bool:
    """Are all terms outer products of vectors of one shape and the sum's dtype?"""
    first = terms[0].node
    if first.op.name != "outer" or any(names_adjoint(t.node) for t in terms):
        return False
    shapes = (first.inputs[0].aval, first.inputs[1].aval)
    return all(
        t.node.op.name == "outer" and t.aval == total.aval
        and (t.node.inputs[0].aval, t.node.inputs[1].aval) == shapes for t in terms) and all(
        a.ndim == 1 and a.dtype == total.aval.dtype for a in shapes)


def _stack(vectors: tuple[Ref, ...], stacks: dict, rw: Rewriter, like: Node) -> Ref:
    """``np.stack(vectors).T``, built once for all the sums that need it."""
    if vectors not in stacks:
        refs = [rw.resolve(v) for v in vectors]
        (n,), k, dtype = refs[0].aval.shape, len(refs), refs[0].aval.dtype
        rows = _node(OPS["stack"], refs, {"axis": 0}, like, (k, n), dtype)
        columns = _node(OPS["transpose"], [rows.out], {"axes": None}, like, (n, k), dtype)
        rw.add([rows, columns])
        stacks[vectors] = columns.out
    return stacks[vectors]


def _node(op, inputs: list[Ref], attrs: dict, like: Node, shape, dtype) -> Node:
    return Node(op, tuple(inputs), attrs, (Aval(tuple(shape), dtype),), like.loc, None,
                like.role)
