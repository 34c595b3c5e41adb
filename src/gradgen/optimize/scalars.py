"""Scalars stay scalars: broadcasts of scalars, and the seed of ``grad``, moved out of the
elementwise arithmetic of arrays, so ``np.broadcast_to(grad_out, S) * 2 * y`` is ``2 * y``;
and the negation of a product moved onto its scalar factor, ``-(s * E)`` as ``(-s) * E``."""

from __future__ import annotations

import numpy as np

from ..ir import Node, Ref, aval_of
from ..ops import OPS
from ..peephole import names_adjoint


def _is_const(ref: Ref) -> bool:
    return ref.node.op.name == "const"


def _stand_in(aval):
    return aval.py(1) if aval.py is not None else np.ones(aval.shape, aval.dtype)[()]


def broadcast_outward(node: Node) -> tuple[list[Node], Ref] | None:
    """An elementwise op of scalars and broadcasts of scalars, ``broadcast_to(g, S) * 2``,
    is the broadcast of the scalar result, ``broadcast_to(g * 2, S)``: one multiplication
    instead of S, then ``broadcast_to(c, S) * y`` loses the broadcast (fold's ``_unbroadcast``).
    A seed times c is c itself (the seed of ``grad`` is 1), however NumPy types the product.
    Returns the new nodes (the scalar op and the broadcast) and the broadcast."""
    if not node.op.elementwise or not node.aval.shape:
        return None
    scalars, broadcast = [], False
    for ref in node.inputs:
        if (ref.node.op.name == "broadcast_to" and ref.node.inputs[0].aval.shape == ()
                and not names_adjoint(ref.node)):
            scalars.append(ref.node.inputs[0])
            broadcast = True
        elif ref.aval.shape == ():
            scalars.append(ref)
        else:
            return None
    if not broadcast:
        return None

    def broadcasts_as(ref: Ref) -> bool:  # np.broadcast_to(ref, S) has the node's dtype
        return np.asarray(_stand_in(ref.aval)).dtype == node.aval.dtype

    nodes: list[Node] = []
    seeds = [i for i, r in enumerate(scalars) if r.node.op.name == "seed"]
    if node.op.name == "mul" and seeds and broadcasts_as(scalars[1 - seeds[0]]):  # 1 * k
        scalar = scalars[1 - seeds[0]]
    else:
        with np.errstate(all="ignore"):
            try:
                aval = aval_of(node.op.impl(*map(_stand_in, (r.aval for r in scalars)),
                                            **node.attrs))
            except Exception:  # noqa: BLE001 - not an op of plain scalars after all
                return None
        inner = Node(node.op, tuple(scalars), node.attrs, (aval,), node.loc, None, node.role,
                     origin=node.origin)
        nodes.append(inner)
        scalar = inner.out
        if not broadcasts_as(scalar):
            return None  # float32 code: a Python float broadcast would come out float64
    out = Node(OPS["broadcast_to"], (scalar,), {"shape": node.aval.shape}, node.avals, node.loc,
               node.name, node.role, origin=node.origin)
    return [*nodes, out], out.out


def _seed_times(ref: Ref) -> Ref | None:
    """k when ``ref`` is ``seed * k`` (or ``k * seed``): the seed of ``grad`` is 1."""
    node = ref.node
    if node.op.name != "mul" or names_adjoint(node):
        return None
    a, b = node.inputs
    return b if a.node.op.name == "seed" else a if b.node.op.name == "seed" else None


def _scalar_aval(op, refs, attrs):
    with np.errstate(all="ignore"):
        try:
            return aval_of(op.impl(*(_stand_in(r.aval) for r in refs), **attrs))
        except Exception:  # noqa: BLE001 - not an op of plain scalars after all
            return None


def seed_outward(node: Node) -> list[Node] | None:
    """``seed * 2 * 3`` is ``seed * 6`` exactly (the seed is 1), and ``seed * k * y`` for an
    array y is ``k * y``: a product that starts from the seed sheds it. Returns the
    new nodes, the last one standing for ``node``."""
    if node.op.name not in ("mul", "div") or len(node.inputs) != 2:
        return None
    for i, ref in enumerate(node.inputs):
        k = _seed_times(ref)
        if k is None or (node.op.name == "div" and i == 1):
            continue
        others = list(node.inputs)
        others[i] = k
        if node.aval.shape:  # an array: the seed's scalar type no longer matters
            if _scalar_aval(node.op, others, node.attrs) is None or k.aval.shape:
                return None
            if np.result_type(_stand_in(k.aval), *(np.zeros(0, r.aval.dtype) for r in others
                                                   if r is not k)) != node.aval.dtype:
                return None
            return [node.with_inputs(others)]
        if not all(_is_const(r) for r in others):
            return None  # scalar code keeps its products as written
        aval = _scalar_aval(node.op, others, node.attrs)
        seed = ref.node.inputs[0] if ref.node.inputs[0].node.op.name == "seed" else (
            ref.node.inputs[1])
        if aval is None:
            return None
        inner = Node(node.op, tuple(others), node.attrs, (aval,), node.loc, None, node.role,
                     origin=node.origin)
        if _scalar_aval(OPS["mul"], (seed, inner.out), {}) != node.aval:
            return None
        outer = Node(OPS["mul"], (seed, inner.out), {}, node.avals, node.loc, node.name,
                     node.role, origin=node.origin)
        return [inner, outer]
    return None


# Readers that take a negation for free: a sum prints ``a + -b`` as ``a - b`` (not a first
# term: ``-a + b`` negates a), and the updates of a buffer carry a sign (emit.py's
# _Temporaries) or add it slice by slice.
_SUMS = frozenset(("add", "sub", "add_n"))
_UPDATES = frozenset(("scatter", "index_add", "index_update", "add_along_axis"))


class Readers:
    """Who reads each node of a graph, seen through adjoints (the value renamed) and views
    (``g[1:]`` of a negation prints as ``-g[1:]``), found on the first question only: most
    graphs never ask."""

    def __init__(self, graph):
        self.graph = graph
        self._of: dict[Node, list[Node | None]] | None = None

    def of(self, node: Node) -> list[tuple[Node | None, Node]]:
        """(reader, the node it reads: ``node``, an adjoint or a view of it) pairs; the
        reader None is the caller, for an output."""
        if self._of is None:
            self._of = self.graph.readers()
        found, todo = [], [(r, node) for r in self._of.get(node, ())]
        while todo:
            reader, read = todo.pop()
            if reader is not None and (reader.op.name == "adjoint" or reader.is_view):
                todo.extend((r, reader) for r in self._of.get(reader, ()))
            else:
                found.append((reader, read))
        return found


def _takes_the_sign(reader: Node | None, read: Node) -> bool:
    if reader is None:
        return False
    name = reader.op.name
    return name in _UPDATES or name in _SUMS and reader.inputs[0].node is not read


def negation_inward(node: Node, new: Node, readers: Readers) -> list[Node] | None:
    """``-(s * E)`` for a scalar (or any smaller operand) s and an array E is ``(-s) * E``,
    and ``-(E / s)`` is ``E / (-s)``: the same bits (rounding is symmetric in the sign), one
    pass over the array instead of two. Only where the product is read by the negation alone
    (else both are computed) and the negation is real work, not taken by a sum as a
    subtraction. ``node`` is the negation in the graph ``readers`` counts,
    ``new`` the same with its inputs resolved. Returns the new nodes, the last one standing
    for ``node``."""
    if not new.aval.shape or new.aval.dtype.kind != "f":
        return None
    product = new.inputs[0].node
    if product.op.name not in ("mul", "div") or len(product.inputs) != 2 or names_adjoint(
            product):  # grad_y = s * E is a statement of its own: its name stays
        return None
    size = new.aval.size
    for i, ref in enumerate(product.inputs):
        aval = ref.aval
        if aval.size >= size or not (aval.py is float or aval.dtype.kind == "f"):
            continue
        if len(readers.of(node.inputs[0].node)) != 1 or any(
                _takes_the_sign(*pair) for pair in readers.of(node)):
            return None
        negated = Node(OPS["neg"], (ref,), {}, (aval,), new.loc, None, new.role,
                       origin=new.origin)
        inputs = list(product.inputs)
        inputs[i] = negated.out
        out = Node(product.op, tuple(inputs), product.attrs, new.avals, new.loc, new.name,
                   new.role, origin=new.origin, hint=new.hint)
        out.grad_of = new.grad_of
        return [negated, out]
    return None
