"""How NumPy's and math's callables reach the ops: argument adapters for the bound names."""

from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import UnsupportedOperation
from ..source import current_loc
from . import arith, core, elementwise
from .adapt import value
from .registry import BOUND, route


def _refuse(what: str, hint: str | None = None):
    raise UnsupportedOperation(what, current_loc(), hint)


def _positive(x):
    """np.positive makes a new array (a write into it must not reach x); scalars are values."""
    return core.copy(x) if isinstance(value(x), np.ndarray) else x


def _reciprocal(x):
    if np.result_type(value(x)).kind != "f":
        _refuse("np.reciprocal of integers (integer division) has no gradient rule in gradgen",
                "use 1.0 / x")
    return 1.0 / x  # the same IEEE division; a Python 1.0 keeps float32 float32


def _float_power(x, y):
    """np.float_power computes in float64 (float32 included): x ** y on float64 values."""
    return arith.pow_(*(_as_float64(v) for v in (x, y)))


def _as_float64(v):
    if getattr(v, "aval", None) is not None:
        return v if v.dtype == np.float64 else core.cast(v, dtype="float64")
    if isinstance(v, np.ndarray | np.generic):
        return v.astype(np.float64)
    return v  # a Python number: weak, the float64 side decides


def _real(val):
    return val  # a real array is its own real part (NumPy returns the array itself)


def _imag(val):
    return np.array(np.imag(value(val)))[()]  # zeros, whatever the values: a constant


def _conjugate(x):
    """np.conj of a real array is a copy of it; of a scalar, the scalar."""
    return core.copy(x) if isinstance(value(x), np.ndarray) else x


def _numpy_rounding(op):
    """np.floor of a Python float is a NumPy float, where math.floor gives an int: make the
    operand a NumPy scalar first so the traced value has NumPy's type."""

    def handler(x):
        return op(_numpy_scalar(x))

    return handler


def _round(a, decimals=0, out=None):
    """np.round(x, d) as NumPy computes it: rint(x * 10**d) / 10**d (x / 10**-d for d < 0),
    with a Python float factor so a float32 array stays float32. Zero gradient."""
    if out is not None:
        _refuse("np.round with out= has no gradient rule in gradgen", "assign the result")
    decimals = operator.index(decimals)
    rint = BOUND[np.rint]
    if decimals == 0:
        return rint(a)  # both round halves to even
    if np.result_type(value(a)).kind != "f":
        _refuse("np.round of integers with decimals= has no rule in gradgen",
                "round a float array, e.g. np.round(x.astype(float), 2)")
    factor = _power_of_ten(abs(decimals))
    if decimals > 0:
        return rint(_numpy_scalar(a) * factor) / factor
    return rint(_numpy_scalar(a) / factor) * factor


def _power_of_ten(n: int) -> float:
    """10.0 ** n exactly as NumPy's round computes it (so results match it bit for bit)."""
    if n < 9:
        return float(10 ** n)
    out = 1e9
    for _ in range(n - 9):
        out *= 10.0
    return out


def _numpy_scalar(x):
    """A Python number (traced or not) as the NumPy float64 NumPy would compute on."""
    aval = getattr(x, "aval", None)
    if aval is not None and aval.py is not None:
        return core.cast(x, dtype="float64")
    if isinstance(x, float | int):
        return np.float64(x)
    return x


def _fix(x, out=None):
    if out is not None:
        _refuse("np.fix with out= has no gradient rule in gradgen", "assign the result")
    return _numpy_rounding(arith.trunc)(x)


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
    # ufuncs (most bind their rows directly in the rows' modules)
    np.add: arith.add, np.subtract: arith.sub, np.multiply: arith.mul,
    np.divide: arith.div, np.power: arith.pow_, np.negative: arith.neg,
    np.absolute: arith.abs_, np.floor_divide: arith.floordiv,
    np.remainder: arith.mod, np.maximum: arith.maximum, np.minimum: arith.minimum,
    np.less: arith.lt, np.less_equal: arith.le, np.greater: arith.gt,
    np.greater_equal: arith.ge, np.equal: arith.eq, np.not_equal: arith.ne,
    np.radians: elementwise.deg2rad, np.degrees: elementwise.rad2deg,
    # math functions that need an adapter
    math.floor: arith.floor,
    math.ceil: arith.ceil, math.trunc: arith.trunc,
})
# np.true_divide is np.divide, np.conj is np.conjugate, np.abs is np.absolute (one object each)
route(np.positive, _positive, "copy", called="np.positive")
route(np.reciprocal, _reciprocal, "div")
route(np.float_power, _float_power, "pow", "cast")
route(np.floor, _numpy_rounding(arith.floor), "floor")
route(np.ceil, _numpy_rounding(arith.ceil), "ceil")
route(np.trunc, _numpy_rounding(arith.trunc), "trunc")
route(np.fix, _fix, "trunc")
route(np.rint, _numpy_rounding(arith.round_), "round")
route(np.round, _round, "round")
route(np.around, _round, "round")
# real inputs only (gradgen traces no complex values): x itself, and constant zeros
BOUND.update({np.real: _real, np.imag: _imag})
route(np.conjugate, _conjugate, "copy", called="np.conjugate (np.conj; real: a copy)")
route(math.log, _math_log, "log", called="math.log(x, base)")
route(math.hypot, _math_hypot, "hypot")
