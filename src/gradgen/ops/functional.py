"""NumPy's higher-order helpers, run on traced values the way NumPy runs them: each call of
the user's function is traced like any other code (np.apply_along_axis calls it once per
1-D slice), so its gradient is the gradient of those calls. Long arrays make long traces:
a loop over the slices in the user's code reads the same and rolls into a loop.
"""

from __future__ import annotations

import numpy as np

from .adapt import as_array, refuse, value
from .registry import BOUND, route


def _np_apply_along_axis(func1d, axis, arr, *args, **kwargs):
    arr = as_array(arr)
    shape = np.shape(value(arr))
    nd = len(shape)
    axis = np.lib.array_utils.normalize_axis_index(axis, nd)
    moved = np.moveaxis(arr, axis, -1) if axis != nd - 1 else arr
    outer = shape[:axis] + shape[axis + 1:]
    if 0 in outer:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    results = [func1d(moved[index], *args, **kwargs) for index in np.ndindex(outer)]
    results = [as_array(r) for r in results]
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
    a = as_array(a)
    shape = np.shape(value(a))
    if not shape:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar)"
                         ".nonzero() instead.")
    mask = a if np.result_type(value(a)) == np.bool_ else a != 0
    return tuple(BOUND["getitem"](positions, mask) for positions in np.indices(shape))


def _np_flatnonzero(a):
    a = as_array(a)
    return _np_nonzero(np.ravel(a))[0]


def _np_argwhere(a):
    a = as_array(a)
    if not np.shape(value(a)):  # NumPy: one row (or none) with no coordinates
        return np.stack(_np_nonzero(np.reshape(a, (1,))), axis=1)[:, :0]
    return np.stack(_np_nonzero(a), axis=1)


route(np.nonzero, _np_nonzero, "getitem")
route(np.flatnonzero, _np_flatnonzero, "getitem")
route(np.argwhere, _np_argwhere, "getitem", "stack")


def _np_block(arrays):
    """np.block: the innermost lists joined along the last axis, the next ones along the one
    before, each piece first given the result's number of dimensions (leading 1s)."""
    def depth_of(obj) -> int:
        depth = 0
        while isinstance(obj, list):
            if not obj:
                raise ValueError("List at arrays cannot be empty")
            obj, depth = obj[0], depth + 1
        return depth

    depth = depth_of(arrays)
    if depth == 0:
        return np.copy(arrays) if hasattr(arrays, "ref") else np.array(arrays)
    leaves, stack = [], [arrays]
    while stack:  # every leaf's number of dimensions, in any order
        obj = stack.pop()
        if isinstance(obj, list):
            if not all(isinstance(o, list) == isinstance(obj[0], list) for o in obj):
                raise ValueError("List depths are mismatched")
            stack.extend(obj)
        else:
            leaves.append(np.ndim(value(obj)))
    ndim = max(depth, *leaves)

    def joined(obj, level):
        if not isinstance(obj, list):
            shape = np.shape(value(obj))
            full = (1,) * (ndim - len(shape)) + shape
            return np.reshape(obj, full) if full != shape else obj
        parts = [joined(o, level + 1) for o in obj]
        return np.concatenate(parts, axis=level - depth) if len(parts) > 1 else parts[0]

    return joined(arrays, 0)


def _np_put(a, ind, v, mode="raise"):
    """np.put: ``a.flat[ind] = v`` in place (v repeated as needed), as a new version of a
    traced array (see inplace.py)."""
    if not hasattr(a, "ref"):
        refuse("np.put of traced values into an array that is not traced (a global, say) has "
               "no rule in gradgen", "make the array inside the function (np.zeros, x.copy())")
    if mode != "raise":
        refuse(f"np.put(..., mode={mode!r}) has no rule in gradgen", "call np.put(a, ind, v)")
    shape = np.shape(value(a))
    size = int(np.prod(shape, dtype=int))
    flat = np.ravel(np.asarray(getattr(ind, "value", ind)))
    if flat.size and (flat.max() >= size or flat.min() < -size):
        raise IndexError(f"index {int(flat.max())} is out of bounds for size {size}")
    where = np.unravel_index(np.where(flat < 0, flat + size, flat), shape)
    v = as_array(v)
    count = int(np.size(value(v)))
    values = np.reshape(v, (count,)) if np.ndim(value(v)) != 1 else v
    if count != flat.size:
        values = values[np.arange(flat.size) % count]  # NumPy repeats v
    a[where] = values


route(np.block, _np_block, "concatenate", "reshape")
route(np.put, _np_put, "index_update")
