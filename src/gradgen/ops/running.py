"""Running extremes: np.maximum.accumulate and np.minimum.accumulate (the cummax and cummin
rows), along one axis.

Each output entry is one input entry, the extreme so far; the gradient sends each output's
cotangent to the entry it holds, found in the module from the data: the last position so far
where the input equals the running extreme (``np.maximum.accumulate`` of those positions),
and added there (``np.add.at``), so the rule is linear in the cotangent and differentiates
again. Convention at ties, as PyTorch's ``torch.cummax`` indices: an entry equal to the
extreme before it takes over, so the latest of tied entries gets the cotangent. A nan makes
the rest of the slice nan, and its gradient is not defined there.
"""

from __future__ import annotations

import numpy as np

from .. import abstract
from ._sym import sp
from .adapt import hinted, shape, value
from .arith import eq
from .elementwise import where
from .registry import OPS, Domain, Expr, defop, route
from .shape import add_along_axis

_REALS = (-2.0, 2.0)
_CASES = ((((5,),), {"axis": 0}), (((3, 4),), {"axis": 1}), (((3, 2),), {"axis": 0}))


def _source(x, ans, axis):
    """Where each running extreme came from: the last position so far holding it."""
    x_shape = shape(x)
    n = x_shape[axis]
    positions = np.arange(n).reshape((1,) * axis + (n,) + (1,) * (len(x_shape) - axis - 1))
    held = where(eq(x, ans), positions, 0)
    kind = "max" if ans.ref.node.op.name == "cummax" else "min"
    return hinted(OPS["cummax"](held, axis=axis), f"arg{kind}_so_far")


def _vjp(g, ans, x, axis=0):
    zeros = np.zeros(shape(x), np.result_type(value(g)))
    return add_along_axis(zeros, g, _source(x, ans, axis), axis=axis)


def _sym_running(extreme):
    def meaning(x, axis=0):
        x = np.asarray(x, dtype=object)
        out = np.empty(x.shape, dtype=object)
        for index in np.ndindex(x.shape):
            upto = list(index)
            upto[axis] = slice(0, index[axis] + 1)
            out[index] = extreme(*np.ravel(x[tuple(upto)]))
        return out

    return meaning


def _printer(ufunc):
    def print_(node, args):
        axis = node.attrs.get("axis", 0)
        tail = f", axis={axis}" if axis else ""
        return Expr(f"np.{ufunc}.accumulate({args[0].text}{tail})")

    return print_


def _running_row(name, ufunc, extreme):
    word = "maximum" if name == "cummax" else "minimum"
    return defop(
        name, lambda x, axis=0: ufunc.accumulate(x, axis=axis), _printer(ufunc.__name__),
        vjp=(_vjp,), sympy=_sym_running(lambda *xs: getattr(sp, extreme)(*xs)),
        abstract=abstract.scan, domain=Domain((_REALS,), cases=_CASES),
        rule_text=(f"the cotangent to the entry each running {word} holds (ties: the latest)",),
        xp="a running maximum or minimum has no array-API form (the standard has no "
           "cumulative max)")


cummax = _running_row("cummax", np.maximum, "Max")
cummin = _running_row("cummin", np.minimum, "Min")


def _accumulate(op):
    def handler(x, axis=0):
        nd = len(shape(x))
        if nd == 0:
            raise TypeError("cannot accumulate on a scalar")
        return op(x, axis=int(axis) % nd)

    return handler


route((np.maximum, "accumulate"), _accumulate(cummax), "cummax",
      called="np.maximum.accumulate")
route((np.minimum, "accumulate"), _accumulate(cummin), "cummin",
      called="np.minimum.accumulate")
