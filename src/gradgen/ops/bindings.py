"""How NumPy's and math's callables reach the ops: argument adapters for the bound names."""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedOperation
from ..source import current_loc
from . import arith, core, elementwise
from .registry import BOUND, route


def _refuse(what: str, hint: str | None = None):
    raise UnsupportedOperation(what, current_loc(), hint)


def _positive(x):
    return x


def _numpy_rounding(op):
    """np.floor of a Python float is a NumPy float, where math.floor gives an int: make the
    operand a NumPy scalar first so the traced value has NumPy's type."""

    def handler(x):
        aval = getattr(x, "aval", None)
        if aval is not None and aval.py is not None:
            x = core.cast(x, dtype="float64")
        elif isinstance(x, float | int):
            x = np.float64(x)
        return op(x)

    return handler


def _round(a, decimals=0, out=None):
    if decimals != 0 or out is not None:
        _refuse("np.round with decimals= or out= has no gradient rule in gradgen",
                "np.round(x * 100) / 100 is what np.round(x, 2) computes")
    return BOUND[np.rint](a)  # both round halves to even


def _math_log(x, base=None):
    if base is None:
        return elementwise.log(x)
    return elementwise.log(x) / elementwise.log(base)


def _math_hypot(*coords):
    if len(coords) != 2:
        _refuse(f"math.hypot of {len(coords)} values has no gradient rule in gradgen",
                "use math.sqrt(a * a + b * b + ...)")
    return elementwise.hypot(*coords)


BOUND.update({
    # ufuncs
    np.add: arith.add, np.subtract: arith.sub, np.multiply: arith.mul,
    np.divide: arith.div, np.power: arith.pow_, np.negative: arith.neg,
    np.positive: _positive, np.absolute: arith.abs_, np.floor_divide: arith.floordiv,
    np.remainder: arith.mod, np.floor: _numpy_rounding(arith.floor),
    np.ceil: _numpy_rounding(arith.ceil), np.trunc: _numpy_rounding(arith.trunc),
    np.rint: _numpy_rounding(arith.round_), np.maximum: arith.maximum,
    np.minimum: arith.minimum,
    np.less: arith.lt, np.less_equal: arith.le, np.greater: arith.gt,
    np.greater_equal: arith.ge, np.equal: arith.eq, np.not_equal: arith.ne,
    np.round: _round,
    # math functions that need an adapter
    math.floor: arith.floor,
    math.ceil: arith.ceil, math.trunc: arith.trunc,
})
route(math.log, _math_log, "log", called="math.log(x, base)")
route(math.hypot, _math_hypot, "hypot")
