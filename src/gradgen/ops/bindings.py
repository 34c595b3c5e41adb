"""How NumPy's and math's callables reach the ops: argument adapters for the bound names."""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedOperation
from ..source import current_loc
from . import arith, arrays, core, elementwise
from .registry import BOUND


def _refuse(what: str, hint: str | None = None):
    raise UnsupportedOperation(what, current_loc(), hint)


def _normalize_axis(axis, ndim):
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim)
    return tuple(sorted(set(out)))


def _reduction(op, np_name):
    def handler(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        if dtype is not None or out is not None or kw:
            extra = ", ".join([*(["dtype="] if dtype is not None else []),
                               *(["out="] if out is not None else []), *(f"{k}=" for k in kw)])
            _refuse(f"np.{np_name}(..., {extra}) has no gradient rule in gradgen",
                    f"call np.{np_name}(x, axis=..., keepdims=...)")
        ndim = np.ndim(a.value) if hasattr(a, "value") else np.ndim(a)
        return op(a, axis=_normalize_axis(axis, ndim), keepdims=bool(keepdims))

    return handler


def _dot(a, b, out=None):
    if out is not None:
        _refuse("np.dot(..., out=...) writes in place", "use the returned value")
    na, nb = np.ndim(_val(a)), np.ndim(_val(b))
    if na == 0 or nb == 0:
        return arith.mul(a, b)
    if na <= 2 and nb <= 2:
        return arrays.matmul(a, b)
    _refuse("np.dot of arrays with more than 2 dimensions has no gradient rule in gradgen",
            "use np.matmul (or @), which gradgen differentiates")


def _val(x):
    from ..tracer import tracer_value

    return tracer_value(x)


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims:
        _refuse("np.linalg.norm with ord=, axis= or keepdims= has no gradient rule in gradgen",
                "np.sqrt(np.sum(x * x, axis=...)) is differentiable")
    return arrays.norm(x)


def _reshape(a, *shape, order="C", **kw):
    if "newshape" in kw:
        shape = (kw.pop("newshape"),)
    if "shape" in kw:
        shape = (kw.pop("shape"),)
    if order != "C" or kw:
        _refuse("np.reshape with order= has no gradient rule in gradgen")
    shape = shape[0] if len(shape) == 1 else shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    size = int(np.prod(np.shape(_val(a))))
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        shape = tuple(size // known if d == -1 else d for d in shape)
    return arrays.reshape(a, shape=tuple(int(d) for d in shape))


def _transpose(a, axes=None):
    if axes is not None:
        ndim = np.ndim(_val(a))
        axes = tuple(int(i) % ndim for i in axes)
    return arrays.transpose(a, axes=axes)


def _outer(a, b, out=None):
    if np.ndim(_val(a)) != 1 or np.ndim(_val(b)) != 1 or out is not None:
        _refuse("np.outer of arrays that are not vectors has no gradient rule in gradgen")
    return arrays.outer(a, b)


def _broadcast_to(a, shape, subok=False):
    shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    return arrays.broadcast_to(a, shape=shape)


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
    # array functions
    np.sum: _reduction(arrays.sum_, "sum"), np.mean: _reduction(arrays.mean, "mean"),
    np.dot: _dot, np.linalg.norm: _norm, np.reshape: _reshape, np.transpose: _transpose,
    np.outer: _outer, np.broadcast_to: _broadcast_to, np.round: _round,
    # math functions that need an adapter
    math.log: _math_log, math.hypot: _math_hypot, math.floor: arith.floor,
    math.ceil: arith.ceil, math.trunc: arith.trunc,
})
