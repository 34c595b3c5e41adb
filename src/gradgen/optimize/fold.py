"""Constant folding and algebraic identities that never change a float result."""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Ref, aval_of
from ..ops import OPS
from .rewrite import Rewriter

# Not folded: they have side effects, carry names, or must stay visible (the seed).
_KEEP = {"input", "const", "seed", "guard", "adjoint", "copy"}


def _const_value(ref: Ref):
    node = ref.node
    return node.attrs["value"] if node.op.name == "const" else _NOT_CONST


_NOT_CONST = object()


def _is(ref: Ref, number) -> bool:
    """Is ``ref`` a constant that equals ``number`` everywhere?"""
    value = _const_value(ref)
    if type(value) is float or type(value) is int:  # the common case, without NumPy's cost
        return value == number
    if value is _NOT_CONST or isinstance(value, bool | np.bool_):
        return False
    try:
        return bool(np.all(np.asarray(value) == number))
    except (TypeError, ValueError):
        return False


def _identity(node: Node) -> Ref | None:
    """The input ``node`` equals exactly (same value, shape, dtype, kind), if any."""
    name, ins = node.op.name, node.inputs
    candidates: list[Ref] = []
    if name == "mul":
        candidates = [ins[0]] if _is(ins[1], 1) else [ins[1]] if _is(ins[0], 1) else []
        if node.aval.shape and not candidates:  # an array times the seed (1): scalar code
            seeds = [i for i, r in enumerate(ins) if r.node.op.name == "seed"]  # keeps it
            candidates = [ins[1 - seeds[0]]] if seeds else []
    elif name == "add":
        candidates = [ins[0]] if _is(ins[1], 0) else [ins[1]] if _is(ins[0], 0) else []
    elif (name == "sub" and _is(ins[1], 0) or name == "div" and _is(ins[1], 1)
          or name == "pow" and _is(ins[1], 1)):
        candidates = [ins[0]]
    elif name == "neg" and ins[0].node.op.name == "neg":
        candidates = [ins[0].node.inputs[0]]
    elif name == "transpose":
        axes, ndim = node.attrs.get("axes"), ins[0].aval.ndim
        if (axes is None and ndim <= 1) or axes == tuple(range(ndim)):
            candidates = [ins[0]]
    elif name == "stack" and node.attrs.get("axis") == 0:
        whole = _rows_in_order(ins)
        candidates = [whole] if whole is not None else []
    elif name in ("reshape", "broadcast_to", "cast"):
        candidates = [ins[0]]  # only when nothing changes: the aval check below
    for ref in candidates:
        if ref.aval == node.aval:
            return ref
    return None


def _rows_in_order(ins) -> Ref | None:
    """``np.stack([x[0], x[1], ..., x[n - 1]])`` is ``x``: the array whose rows these are."""
    whole = ins[0].node.inputs[0] if ins[0].node.op.name == "getitem" else None
    if whole is None or whole.aval.shape[:1] != (len(ins),):
        return None
    for i, ref in enumerate(ins):
        node = ref.node
        if (node.op.name != "getitem" or len(node.inputs) != 1 or node.inputs[0] != whole
                or node.attrs["index"] not in ((i,), (i - len(ins),))):
            return None
    return whole


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


def _unbroadcast(node: Node) -> Node | None:
    """``broadcast_to(v, S) * y`` with y of shape S is ``v * y``: NumPy broadcasts anyway."""
    if not node.op.elementwise or len(node.inputs) != 2:
        return None
    ins = list(node.inputs)
    for i, ref in enumerate(ins):
        other = ins[1 - i]
        if ref.node.op.name == "broadcast_to" and other.aval.shape == node.aval.shape:
            ins[i] = ref.node.inputs[0]
            return node.with_inputs(ins)
    return None


def _stand_in(aval):
    return aval.py(1) if aval.py is not None else np.ones(aval.shape, aval.dtype)[()]


def _broadcast_outward(node: Node) -> tuple[list[Node], Ref] | None:
    """An elementwise op of scalars and broadcasts of scalars, ``broadcast_to(g, S) * 2``,
    is the broadcast of the scalar result, ``broadcast_to(g * 2, S)``: one multiplication
    instead of S, then ``broadcast_to(c, S) * y`` loses the broadcast (``_unbroadcast``).
    A seed times c is c itself (the seed of ``grad`` is 1), however NumPy types the product.
    Returns the new nodes (the scalar op and the broadcast) and the broadcast."""
    if not node.op.elementwise or not node.aval.shape or node.op.name in _KEEP:
        return None
    scalars, broadcast = [], False
    for ref in node.inputs:
        if ref.node.op.name == "broadcast_to" and ref.node.inputs[0].aval.shape == ():
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


def _collapsed_view(node: Node) -> Node | None:
    """``x.T.T`` is ``np.transpose(x, (0, 1))`` (which ``_identity`` then drops), and
    ``x.reshape(a).reshape(b)`` is ``x.reshape(b)``: one view of x instead of two."""
    name = node.op.name
    if name not in ("transpose", "reshape") or node.inputs[0].node.op.name != name:
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


def _seed_times(ref: Ref) -> Ref | None:
    """k when ``ref`` is ``seed * k`` (or ``k * seed``): the seed of ``grad`` is 1."""
    node = ref.node
    if node.op.name != "mul":
        return None
    a, b = node.inputs
    return b if a.node.op.name == "seed" else a if b.node.op.name == "seed" else None


def _scalar_aval(op, refs, attrs):
    with np.errstate(all="ignore"):
        try:
            return aval_of(op.impl(*(_stand_in(r.aval) for r in refs), **attrs))
        except Exception:  # noqa: BLE001 - not an op of plain scalars after all
            return None


def _seed_outward(node: Node) -> list[Node] | None:
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
        if any(_const_value(r) is _NOT_CONST for r in others):
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


def fold(graph: Graph) -> tuple[Graph, bool]:
    rw = Rewriter(graph)
    outputs = set()  # what the caller gets back, seen through adjoint (an identity with a name)
    for ref in graph.outputs:
        node = ref.node
        outputs.add(node)
        while node.op.name == "adjoint":
            node = node.inputs[0].node
            outputs.add(node)
    for node in graph.nodes:
        new = rw.rebuilt(node)
        if node.op.name in _KEEP or node.op.n_out != 1:
            rw.keep(new)
            continue
        same = _identity(new)
        if same is not None and node in outputs and _owned_by_caller(same):
            same = None
        if same is not None:
            rw.replace(node, same)
            if new.name and same.node.name is None and same.node.role == new.role:
                same.node.name = new.name
            continue
        outward = _broadcast_outward(new)
        if outward is not None:
            added, ref = outward
            rw.add(added)
            rw.replace(node, ref)
            continue
        collapsed = _collapsed_view(new)
        if collapsed is not None:
            rw.add([collapsed])
            rw.replace(node, collapsed.out)
            continue
        shed = _seed_outward(new)
        if shed is not None:
            rw.add(shed)
            rw.replace(node, shed[-1].out)
            continue
        simpler = _unbroadcast(new)
        if simpler is not None:
            if rw.values is not None:
                rw.values[simpler] = rw.values.get(new)
            rw.keep(simpler)
            rw.replace(node, simpler.out)
            continue
        values = [_const_value(r) for r in new.inputs]
        if new.inputs and all(v is not _NOT_CONST for v in values):
            with np.errstate(all="ignore"):
                try:
                    value = new.op.impl(*values, **new.attrs)
                    aval = aval_of(value)
                except Exception:  # noqa: BLE001 - left to run (and raise) where the user sees it
                    rw.keep(new)
                    continue
            if aval == new.aval:
                const = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
                if rw.values is not None:
                    rw.values[const] = value
                rw.keep(const)
                rw.replace(node, const.out)
                continue
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
            continue
        rw.keep(new)
    return rw.result(), rw.changed
