"""NumPy's higher-order helpers, run on traced values the way NumPy runs them: each call of
the user's function is traced like any other code (np.apply_along_axis calls it once per
1-D slice), so its gradient is the gradient of those calls. Long arrays make long traces:
a loop over the slices in the user's code reads the same and rolls into a loop.
"""

from __future__ import annotations

import numpy as np

from ..tracer import from_nested
from .adapt import value
from .registry import BOUND, route


def _np_apply_along_axis(func1d, axis, arr, *args, **kwargs):
    arr = from_nested(arr, None) if isinstance(arr, list | tuple) else arr
    shape = np.shape(value(arr))
    nd = len(shape)
    axis = np.lib.array_utils.normalize_axis_index(axis, nd)
    moved = np.moveaxis(arr, axis, -1) if axis != nd - 1 else arr
    outer = shape[:axis] + shape[axis + 1:]
    if 0 in outer:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [func1d(moved[index], *args, **kwargs) for index in np.ndindex(outer)]
    results = [from_nested(r, None) if isinstance(r, list | tuple) else r for r in results]
    inner = np.shape(value(results[0]))
    stacked = np.stack(results) if inner else np.stack([np.reshape(r, ()) for r in results])
    out = np.reshape(stacked, outer + inner)
    if not inner or axis == len(outer):
        return out
    # the function's own axes take the place of ``axis``, as NumPy puts them
    order = (list(range(axis)) + list(range(len(outer), len(outer) + len(inner)))
             + list(range(axis, len(outer))))
    return np.transpose(out, order)


route(np.apply_along_axis, _np_apply_along_axis, "getitem", "stack", "reshape")


def _np_nonzero(a):
    """np.nonzero (and np.where(c), np.flatnonzero, np.argwhere) of a traced mask: the
    positions read through the mask, ``np.arange(n)[mask]`` per axis, so the number of
    entries is a guard of the traced path like any boolean index."""
    a = from_nested(a, None) if isinstance(a, list | tuple) else a
    shape = np.shape(value(a))
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar)"
                         ".nonzero() instead.")
    mask = a if np.result_type(value(a)) == np.bool_ else a != 0
    return tuple(BOUND["getitem"](positions, mask) for positions in np.indices(shape))


def _np_flatnonzero(a):
    a = from_nested(a, None) if isinstance(a, list | tuple) else a
    return _np_nonzero(np.ravel(a))[0]


def _np_argwhere(a):
    a = from_nested(a, None) if isinstance(a, list | tuple) else a
    if not np.shape(value(a)):  # NumPy: one row (or none) with no coordinates
        return np.stack(_np_nonzero(np.reshape(a, (1,))), axis=1)[:, :0]
    return np.stack(_np_nonzero(a), axis=1)


route(np.nonzero, _np_nonzero, "getitem")
route(np.flatnonzero, _np_flatnonzero, "getitem")
route(np.argwhere, _np_argwhere, "getitem", "stack")
