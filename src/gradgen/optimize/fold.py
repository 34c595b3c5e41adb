"""Constant folding and algebraic identities that never change a float result."""

from __future__ import annotations

import itertools
import operator

import numpy as np

from ..ir import Graph, Node, Ref, aval_of
from ..ops import OPS
from ..peephole import MAX_SIGN_DEPTH, SIGN_CARRIERS, identical_input, names_adjoint
from .rewrite import Rewriter
from .scalars import Readers, broadcast_outward, negation_inward, seed_outward
from .scan import BY_NAME, KEEP, PRODUCTS, SPECIAL_INPUTS, is_seed_product, scan


def _identity(node: Node) -> Ref | None:
    """The input ``node`` equals exactly (same value, shape, dtype, kind), if any."""
    return identical_input(node.op.name, node.inputs, node.attrs, node.aval)


def _owned_by_caller(ref: Ref) -> bool:
    """Is ``ref`` an argument's, a constant's or the seed's own array, or a view of one?
    Returning it would hand the caller an alias where ``-(-x)`` or ``x * 1`` is a new value
    (and a 0-d array where NumPy computes a scalar)."""
    if ref.aval.py is not None:  # Python numbers are immutable
        return False
    node = ref.node
    while node.is_view:
        node = node.inputs[0].node
    return node.op.name in ("input", "const", "seed")


_SCATTERS = ("index_update", "index_add")  # a[idx] = v, np.add.at(a, idx, v): v broadcasts


def _unbroadcast(node: Node) -> Node | None:
    """``broadcast_to(v, S) * y`` with y of shape S is ``v * y``, and ``np.where(m, 0.0,
    broadcast_to(g, S))`` with m of shape S is ``np.where(m, 0.0, g)``: NumPy broadcasts
    anyway, as long as another input already has the result's shape. So does a write through
    an index array of a broadcast number: ``np.add.at(g, idx, s)`` is the gradient of
    ``mean(x[idx])``. (Not a slice write: optimize/pieces.py cuts its value in slices.)"""
    if node.op.name in _SCATTERS and len(node.inputs) > 2:
        value = node.inputs[1].node
        if value.op.name == "broadcast_to" and value.inputs[0].aval.shape == () \
                and value.inputs[0].aval.dtype == value.aval.dtype:
            return node.with_inputs((node.inputs[0], value.inputs[0], *node.inputs[2:]))
        return None
    if not (node.op.elementwise or node.op.name == "add_n") or len(node.inputs) < 2:
        return None
    ins = list(node.inputs)
    for i, ref in enumerate(ins):
        if ref.node.op.name == "broadcast_to" and not names_adjoint(ref.node) and any(
                other.aval.shape == node.aval.shape for k, other in enumerate(ins) if k != i
        ) and _keeps_dtype(ref.node.inputs[0].aval, node.aval):
            ins[i] = ref.node.inputs[0]
            return node.with_inputs(ins)
    return None


def _keeps_dtype(value, result) -> bool:
    """Does NumPy give ``result``'s dtype when ``value`` takes its broadcast's place? A NumPy
    number has the broadcast's dtype; a Python float is weak (``0.5 + x32`` stays float32)
    where its broadcast, a float64 array, is not, so it may go only from a float64 result."""
    return value.py is None or result.dtype == np.float64


def _collapsed_view(node: Node) -> Node | None:
    """``x.T.T`` is ``np.transpose(x, (0, 1))`` (which ``_identity`` then drops), and
    ``x.reshape(a).reshape(b)`` is ``x.reshape(b)``: one view of x instead of two."""
    name = node.op.name
    if (name not in ("transpose", "reshape") or node.inputs[0].node.op.name != name
            or names_adjoint(node.inputs[0].node)):
        return None
    inner = node.inputs[0].node
    x = inner.inputs[0]
    if name == "reshape":
        attrs = node.attrs
    else:
        first = inner.attrs.get("axes") or tuple(reversed(range(x.aval.ndim)))
        second = node.attrs.get("axes") or tuple(reversed(range(len(first))))
        attrs = {**node.attrs, "axes": tuple(first[i] for i in second)}
    return Node(node.op, (x,), attrs, node.avals, node.loc, node.name, node.role,
                origin=node.origin)


def _negated_chain(upper: Node, old: Node, cur: Node, rw: Rewriter, readers: Readers,
                   outputs: set[Node]) -> tuple[list[Node], Node] | None:
    """``cur`` (``old`` resolved, read by ``upper`` alone) is ``-g * s / c * e``: (the
    products and quotients down its left operands, outermost first; the negation at their
    end), or None. Only nodes reverse mode made, each read by the one above alone and none
    an output, so a rebuild computes nothing twice and changes the sign of no adjoint the
    caller sees. A negation moves through * and / exactly: see peephole.negated_path."""
    path: list[Node] = []
    while len(path) <= MAX_SIGN_DEPTH:
        if (cur.role != "bwd" or old in outputs or cur.avals[0].dtype.kind != "f"
                or rw.resolve(old.out).node is not cur
                or [r for r, _ in readers.of(old)] != [upper]):
            return None
        if cur.op.name == "neg":
            return path, cur
        if cur.op.name not in SIGN_CARRIERS or cur.attrs or len(cur.inputs) != 2:
            return None
        path.append(cur)
        upper, old, cur = old, old.inputs[0].node, cur.inputs[0].node
    return None


def _without_sign(path: list[Node], negation: Node) -> list[Node]:
    """The chain ``path`` rebuilt on what ``negation`` negates: the new nodes, the last one
    the chain's value with the opposite sign (none for an empty path: that is the negated
    value itself)."""
    value = negation.inputs[0]
    built = []
    for step in reversed(path):
        made = Node(step.op, (value, step.inputs[1]), {}, step.avals, step.loc, None,
                    step.role, origin=step.origin)
        built.append(made)
        value = made.out
    return built


def _signs_cancelled(node: Node, new: Node, rw: Rewriter, readers: Readers,
                     outputs: set[Node]) -> list[Node] | None:
    """``-(-g * s / c * e)`` is ``g * s / c * e``: the same bits, two passes over an array
    fewer, and no ``-(-x)`` in the module (ruff's B002). What reverse mode writes for a
    sigmoid spelled out, ``1 / (1 + np.exp(-x))``: the quotient's rule negates, the
    negation's rule negates back, and reverse mode cannot cancel them as it builds (the
    quotient's adjoint is a value of its own then; only here is it known to have no other
    reader). Arrays only: in scalar code reverse mode cancels most pairs as it builds, and
    the rebuild one pair left costs (the sweep after it, one more round of the passes) is
    far more than the pair: it took a first call's optimize stage from 22k to 118k
    instructions per op on 1,000 ops of math. Returns the new nodes, the last one standing
    for ``node``, or None."""
    if not new.aval.shape or new.aval.dtype.kind != "f":
        return None
    found = _negated_chain(node, node.inputs[0].node, new.inputs[0].node, rw, readers, outputs)
    if found is None or not found[0]:  # an array's -(-x) is x: _identity's (aliasing)
        return None
    built = _without_sign(*found)
    top = built[-1]
    top.name, top.hint, top.grad_of, top.origin = new.name, new.hint, new.grad_of, new.origin
    return built


def _sum_of_negation(node: Node, new: Node, rw: Rewriter, readers: Readers,
                     outputs: set[Node]) -> list[Node] | None:
    """``np.sum(-g * s, axis=1)`` is ``-np.sum(g * s, axis=1)``: the same bits (each partial
    sum is the negated one), the sign on the smaller array, and a sum reads it as a
    subtraction (``grad_m = grad_out - np.sum(...)``). What a difference's rule gives its
    second operand, summed back to its shape."""
    if new.role != "bwd" or new.aval.dtype.kind != "f":
        return None
    found = _negated_chain(node, node.inputs[0].node, new.inputs[0].node, rw, readers, outputs)
    if found is None:
        return None
    built = _without_sign(*found)
    value = built[-1].out if built else found[1].inputs[0]
    total = Node(new.op, (value,), new.attrs, new.avals, new.loc, None, new.role,
                 origin=new.origin)
    negated = Node(OPS["neg"], (total.out,), {}, new.avals, new.loc, new.name, new.role,
                   origin=new.origin, hint=new.hint)
    negated.grad_of = new.grad_of
    return [*built, total, negated]


_VIEWS = ("transpose", "reshape")  # what _collapsed_view collapses
_INPUT_OP = operator.attrgetter("node.op.name")  # read in C, per input
_ONLY_CONST = {"const"}


def fold(graph: Graph) -> tuple[Graph, bool]:
    rw = Rewriter(graph)
    outputs = set()  # what the caller gets back, seen through adjoint (an identity with a name)
    for ref in graph.outputs:
        node = ref.node
        outputs.add(node)
        while node.op.name == "adjoint":
            node = node.inputs[0].node
            outputs.add(node)
    nodes = graph.nodes
    readers = Readers(graph)
    looked = scan(graph).foldable
    done = 0
    if looked is not None:
        # Up to the first rewrite nothing is rebuilt: only the nodes a rewrite may apply to
        # are looked at, and when none applies (scalar code, usually) that is all.
        for i in itertools.compress(range(len(nodes)), map(looked.__contains__, nodes)):
            rw.nodes += nodes[done:i]
            _fold_node(nodes[i], nodes[i], rw, outputs, readers)
            done = i + 1
            if rw.subst:
                break
        else:
            return graph, False
    keep = rw.keep
    for node in nodes[done:]:
        new = rw.rebuilt(node) if rw.subst else node
        if looked is not None and new is node and node not in looked:
            keep(node)
        else:
            _fold_node(node, new, rw, outputs, readers)
    return rw.result(), rw.changed


def _fold_node(node: Node, new: Node, rw: Rewriter, outputs: set[Node],
               readers: Readers) -> None:
    """Keep ``new`` (``node`` with its inputs resolved), or replace ``node`` by what a
    rewrite makes of it."""
    name = node.op.name
    if name in KEEP or node.op.n_out != 1:
        rw.keep(new)
        return
    if not new.avals[0].shape and name not in BY_NAME:  # most nodes of scalar code
        for ref in new.inputs:
            kind = ref.node.op.name
            if kind in SPECIAL_INPUTS or (kind == "mul" and name in PRODUCTS
                                           and is_seed_product(ref.node)):
                break
        else:
            ins = new.inputs
            if name != "add_n" or len(ins) != 2 or ins[0] != ins[1]:
                rw.keep(new)  # no rewrite below applies: each needs one of these
                return
    same = _identity(new)
    if same is not None and node in outputs and _owned_by_caller(same):
        same = None
    if same is not None:
        rw.replace(node, same)
        if (new.name and same.node.name is None and same.node.role == new.role
                and not names_adjoint(new)):  # (an adjoint's name: replace renamed it)
            same.node.name = new.name
        return
    # The rewrites below are tried only where they can apply (each also checks): most
    # nodes of scalar code are scalar sin/mul/add, and these calls add up per node.
    outward = broadcast_outward(new) if new.aval.shape else None
    if outward is not None:
        added, ref = outward
        rw.add(added)
        rw.replace(node, ref)
        return
    collapsed = _collapsed_view(new) if node.op.name in _VIEWS else None
    if collapsed is not None:
        rw.add([collapsed])
        rw.replace(node, collapsed.out)
        return
    shed = seed_outward(new) if node.op.name in PRODUCTS else None
    if shed is not None:
        rw.add(shed)
        rw.replace(node, shed[-1].out)
        return
    outward = _sum_of_negation(node, new, rw, readers, outputs) if name == "sum" else None
    if outward is not None:
        rw.add(outward)
        rw.replace(node, outward[-1].out)
        return
    cancelled = _signs_cancelled(node, new, rw, readers, outputs) if name == "neg" else None
    if cancelled is not None:
        rw.add(cancelled)
        rw.replace(node, cancelled[-1].out)
        return
    inward = negation_inward(node, new, readers) if node.op.name == "neg" else None
    if inward is not None:
        rw.add(inward)
        rw.replace(node, inward[-1].out)
        return
    simpler = _unbroadcast(new)
    if simpler is not None:
        if rw.values is not None:
            rw.values[simpler] = rw.values.get(new)
        rw.keep(simpler)
        rw.replace(node, simpler.out)
        return
    if new.inputs and set(map(_INPUT_OP, new.inputs)) == _ONLY_CONST:
        values = [r.node.attrs["value"] for r in new.inputs]
        with np.errstate(all="ignore"):
            try:
                value = new.op.impl(*values, **new.attrs)
                aval = aval_of(value)
            except Exception:  # noqa: BLE001 - left to run (and raise) where the user sees it
                rw.keep(new)
                return
        if aval == new.aval:
            const = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
            if rw.values is not None:
                rw.values[const] = value
            rw.keep(const)
            rw.replace(node, const.out)
            return
    if node.op.name == "add_n" and len(new.inputs) == 2 and new.inputs[0] == new.inputs[1]:
        # t + t == 2 * t exactly in binary floating point
        two = Node(OPS["const"], (), {"value": 2}, (aval_of(2),), None, None, "const")
        doubled = Node(OPS["mul"], (two.out, new.inputs[0]), {}, new.avals, new.loc,
                       new.name, new.role)
        if rw.values is not None:
            rw.values[two] = 2
            rw.values[doubled] = rw.values.get(new)
        rw.keep(two)
        rw.keep(doubled)
        rw.replace(node, doubled.out)
        return
    rw.keep(new)
