"""What every adapter needs: refusing clearly, reading a value's shape, normalizing axes."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOperation
from ..source import current_loc
from ..tracer import _stack, from_nested, has_traced, shaped


def refuse(what: str, hint: str | None = None):
    """Stop tracing with an UnsupportedOperation at the user's line."""
    raise UnsupportedOperation(what, current_loc(), hint)


def as_array(x):
    """A list or tuple argument (of numbers or traced values) as the array NumPy reads it
    as (the traced stack np.array would make); anything else as it is."""
    return from_nested(x, None) if isinstance(x, list | tuple) else x


def new_array(array: np.ndarray):
    """A new array of the traced code (np.zeros inside the function, as intercept.py makes
    them): a constant that turns traced once a traced value is written into it."""
    return _stack()[-1].buffer(array)


def value(x):
    """A traced or plain argument shaped as its value (for its shape, dtype and kind only:
    a value not computed yet is a stand-in, see abstract.py)."""
    return shaped(x)


def ndim(x) -> int:
    return np.ndim(value(x))


def shape(x) -> tuple[int, ...]:
    return tuple(np.shape(value(x)))


def normalize_axis(axis, n: int) -> tuple[int, ...] | None:
    """``axis`` (None, an int, a tuple or list, negative allowed) as sorted non-negative ints."""
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -n <= a < n:
            raise np.exceptions.AxisError(a, n)
        out.append(a % n)
    return tuple(sorted(set(out)))


def hinted(x, hint: str):
    """Say what an intermediate an adapter or rule builds holds, for its name in the module
    (``segment``, ``argmax_so_far``); a value the user names keeps the user's name."""
    node = getattr(getattr(x, "ref", None), "node", None)
    if node is not None and node.name is None and node.hint is None:
        node.hint = hint
    return x


__all__ = ["as_array", "has_traced", "hinted", "ndim", "new_array", "normalize_axis",
           "refuse", "shape", "value"]
