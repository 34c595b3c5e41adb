"""A graph replayed in sympy: each node's value as an expression, through its op's ``sympy``
meaning (check.py differentiates it; a loop region replays its body with it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .abstract import concrete
from .errors import GradgenError
from .ir import Graph, Node
from .ops._sym import sp


def apply_elementwise(fn, *args):
    """``fn`` on scalar expressions, or element by element over object arrays of them."""
    if any(isinstance(a, np.ndarray) for a in args):
        return np.frompyfunc(fn, len(args), 1)(*args)
    return fn(*args)


def to_sympy_constant(value):
    """A traced number as sympy's (integers exact, floats to 17 digits), arrays element by
    element; integer and boolean arrays stay NumPy arrays."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biu":
        return value  # indices, masks, counts: never differentiated, and NumPy indexes with them
    if isinstance(value, np.ndarray):
        return np.vectorize(to_sympy_constant, otypes=[object])(value) if value.size else value
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer):
        return sp.Integer(int(value))
    return sp.Float(float(value), 17)


def _as_number(value):
    """Booleans (masks, comparisons) in arithmetic: sympy multiplies integers, not bools."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "b":
        return value.astype(np.int64)
    if isinstance(value, bool | np.bool_):
        return sp.Integer(int(value))
    return value


def symbolic_values(graph: Graph, inputs: dict[Node, object],
                    attrs_of: Callable[[Node], dict] | None = None) -> dict[Node, object]:
    """Each node's value as a sympy expression (object arrays for arrays). Locally constant
    ops (comparisons, floor, ...) keep their traced values: their derivative is zero.
    ``attrs_of(node)`` gives the attributes to apply a node with (a loop body's trip k: its
    moving index items at that trip, loops/region.py); by default the node's own."""
    values = graph.meta["values"]
    env: dict[Node, object] = {}
    for node in graph.nodes:
        op = node.op
        if op.name == "input":
            env[node] = inputs.get(node, to_sympy_constant(values[node]))
        elif op.name == "const":
            env[node] = to_sympy_constant(node.attrs["value"])
        elif op.name == "guard":
            continue
        elif op.name == "seed" or op.nondiff or (  # a backward mask may not be computed yet
                len(node.avals) == 1 and node.aval.dtype.kind in "iub"):
            # (an integer is locally constant too, np.searchsorted(...) + 1 say: it indexes)
            env[node] = to_sympy_constant(concrete(values, node.out))
        else:
            if op.sympy is None:
                raise GradgenError(f"op {op.name} has no sympy meaning; it cannot be checked",
                                   node.loc)
            args = [env[r.node] for r in node.inputs]
            if op.elementwise and op.name != "where":  # x * (x > 0): a mask as 0 and 1
                args = [_as_number(a) for a in args]
            if op.elementwise:
                env[node] = apply_elementwise(op.sympy, *args)
            else:
                env[node] = op.sympy(*args, **(node.attrs if attrs_of is None
                                               else attrs_of(node)))
    return env
