"""Finite differences NumPy offers beside np.diff: np.gradient and np.ediff1d, built from
slices, arithmetic and slice writes into a new array exactly as NumPy's own code computes
them, so values agree to the bit and the emitted module reads like that code (``out[1:-1] =
(f[2:] - f[:-2]) / 2.0``). The spacing of np.gradient (scalars or coordinate arrays) is a
constant of the trace: a traced spacing is refused by name.
"""

from __future__ import annotations

import numpy as np

from .adapt import as_array, has_traced, hinted, new_array, refuse, value
from .registry import route

_NO = np._NoValue


def _spacing(distances, length: int):
    """One axis's spacing as NumPy reads it: a scalar, or the steps of a coordinate array
    (a scalar again when they are all equal)."""
    if has_traced(distances):
        refuse("np.gradient with traced spacing has no gradient rule in gradgen",
               "pass the spacing or coordinates as constants (the gradient in f is computed)")
    if isinstance(distances, int | float):  # 1.0 by default: a Python number, as in NumPy
        return distances
    distances = np.asanyarray(getattr(distances, "value", distances))
    if distances.ndim == 0:
        return distances[()]
    if distances.ndim != 1:
        raise ValueError("distances must be either scalars or 1d")
    if len(distances) != length:
        raise ValueError("when 1d, distances must match the length of the corresponding "
                         "dimension")
    if np.issubdtype(distances.dtype, np.integer):
        distances = distances.astype(np.float64)
    steps = np.diff(distances)
    return steps[0] if (steps == steps[0]).all() else steps


def _np_gradient(f, *varargs, axis=None, edge_order=1):
    f = as_array(f)
    shape = np.shape(value(f))
    nd = len(shape)
    axes = tuple(range(nd)) if axis is None else np.lib.array_utils.normalize_axis_tuple(
        axis, nd)
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(value(varargs[0])) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order > 2:
        raise ValueError("'edge_order' greater than 2 not supported")
    dtype = np.result_type(value(f))
    if dtype.kind not in "fc":
        f = f.astype(np.float64)
        dtype = np.dtype(np.float64)
    outs = []
    for ax, distances in zip(axes, spacings, strict=True):
        if shape[ax] < edge_order + 1:
            raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                             "least (edge_order + 1) elements are required.")
        outs.append(_along(f, ax, nd, shape, dtype, _spacing(distances, shape[ax]), edge_order))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _along(f, axis, nd, shape, dtype, dx, edge_order):
    """np.gradient's loop body for one axis (numpy/lib/_function_base_impl.py)."""

    def at(k):
        index = [slice(None)] * nd
        index[axis] = k
        return tuple(index)

    out = new_array(np.zeros(shape, dtype))
    uniform = np.ndim(dx) == 0
    if uniform:
        out[at(slice(1, -1))] = (f[at(slice(2, None))] - f[at(slice(None, -2))]) / (2.0 * dx)
    else:
        dx1, dx2 = dx[0:-1], dx[1:]
        a = -dx2 / (dx1 * (dx1 + dx2))
        b = (dx2 - dx1) / (dx1 * dx2)
        c = dx1 / (dx2 * (dx1 + dx2))
        along = [1] * nd
        along[axis] = -1
        a, b, c = (np.reshape(w, along) for w in (a, b, c))
        out[at(slice(1, -1))] = (a * f[at(slice(None, -2))] + b * f[at(slice(1, -1))]
                                 + c * f[at(slice(2, None))])
    if edge_order == 1:
        first, last = (dx, dx) if uniform else (dx[0], dx[-1])
        out[at(0)] = (f[at(1)] - f[at(0)]) / first
        out[at(-1)] = (f[at(-1)] - f[at(-2)]) / last
        return _named(out)
    if uniform:
        a, b, c = -1.5 / dx, 2.0 / dx, -0.5 / dx
    else:
        dx1, dx2 = dx[0], dx[1]
        a = -(2.0 * dx1 + dx2) / (dx1 * (dx1 + dx2))
        b = (dx1 + dx2) / (dx1 * dx2)
        c = -dx1 / (dx2 * (dx1 + dx2))
    out[at(0)] = a * f[at(0)] + b * f[at(1)] + c * f[at(2)]
    if uniform:
        a, b, c = 0.5 / dx, -2.0 / dx, 1.5 / dx
    else:
        dx1, dx2 = dx[-2], dx[-1]
        a = dx2 / (dx1 * (dx1 + dx2))
        b = -(dx2 + dx1) / (dx1 * dx2)
        c = (2.0 * dx2 + dx1) / (dx2 * (dx1 + dx2))
    out[at(-1)] = a * f[at(-3)] + b * f[at(-2)] + c * f[at(-1)]
    return _named(out)


def _named(out):
    """The array np.gradient writes is named ``slope`` in the module (its first version
    names the statements that fill it), unless the user names it."""
    node = out.ref.node
    while node.op.extra.get("statement") and node.inputs[0].node.op.extra.get("statement"):
        node = node.inputs[0].node
    hinted(out, "slope")
    if node is not out.ref.node and node.name is None and node.hint is None:
        node.hint = "slope"
    return out


def _np_ediff1d(ary, to_end=None, to_begin=None):
    """np.ediff1d: the differences of the flattened array, with values put before and after."""
    x = as_array(ary)
    size = int(np.size(value(x)))
    flat = np.reshape(x, (size,))
    parts = [flat[1:] - flat[:-1]]
    for extra, at_end in ((to_begin, False), (to_end, True)):
        if extra is None:
            continue
        extra = as_array(extra)
        extra = np.reshape(extra, (int(np.size(value(extra))),))
        parts = [*parts, extra] if at_end else [extra, *parts]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


route(np.gradient, _np_gradient, "getitem", "sub", "div", "index_update")
route(np.ediff1d, _np_ediff1d, "getitem", "sub", "concatenate")
