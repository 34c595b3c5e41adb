"""Searching sorted values: the searchsorted row (an index, so no gradient) and np.interp,
built from it the way NumPy's own C loop computes each value.

np.interp(x, xp, fp) finds the segment of ``xp`` each ``x`` falls in (``xp[j] <= x <
xp[j + 1]``), then computes ``slope * (x - xp[j]) + fp[j]`` with ``slope = (fp[j + 1] -
fp[j]) / (xp[j + 1] - xp[j])``, exactly NumPy's expression, so values agree to the bit. The
gradient flows to ``x`` (the slope), to ``fp`` (the interpolation weights) and to ``xp``.

Conventions at the edges:
- at a knot (``x == xp[j]``) the slope is the segment to its right, the one the search picks
  (as JAX's jnp.interp);
- at and beyond the last knot the value is ``fp[-1]`` (or ``right``), exactly as NumPy returns
  it: slope 0 in ``x``, gradient 1 to ``fp[-1]`` (JAX takes the last segment's slope at
  ``x == xp[-1]`` itself); left of the first knot ``fp[0]`` (or ``left``), slope 0.
``xp`` must increase strictly where the trace sees it (a repeated knot makes NumPy's slope a
division by zero); ``period=`` and complex values are refused.
"""

from __future__ import annotations

import numpy as np

from ._sym import sp
from .adapt import as_array, hinted, refuse
from .arrays import _value
from .core import cast
from .elementwise import where
from .index import getitem
from .registry import BOUND, Expr, defop, route, value_text

_NO = np._NoValue


def _sym_searchsorted(a, v, side="left"):
    """How many entries of the sorted ``a`` lie before ``v`` (left: below it; right: at or
    below it), entry by entry of ``v``."""
    entries = list(np.ravel(np.asarray(a, dtype=object)))

    def count(u):
        return sp.Add(*[sp.Piecewise((1, (e < u) if side == "left" else (e <= u)), (0, True))
                        for e in entries])

    if isinstance(v, np.ndarray):
        return np.vectorize(count, otypes=[object])(v) if v.ndim else count(v[()])
    return count(v)


def _print_searchsorted(node, args):
    side = node.attrs.get("side", "left")
    tail = "" if side == "left" else f", side={value_text(side)}"
    return Expr(f"np.searchsorted({args[0].text}, {args[1].text}{tail})")


searchsorted = defop(
    "searchsorted", lambda a, v, side="left": np.searchsorted(a, v, side=side),
    _print_searchsorted, nondiff=True, sympy=_sym_searchsorted,
    # the rule tests sort the first input (a search in unsorted entries means nothing)
    extra={"sorted_inputs": (0,), "nondiff_layouts": (((4,), "py"), ((4,), (4,)))})


def _np_searchsorted(a, v, side="left", sorter=None):
    if sorter is not None:
        refuse("np.searchsorted with sorter= has no rule in gradgen",
               "sort the array first: np.searchsorted(np.sort(a), v)")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    a, v = as_array(a), as_array(v)
    if np.ndim(_value(a)) != 1:
        raise ValueError("object too deep for desired array")  # NumPy's own message
    return searchsorted(a, v, side=side)


route(np.searchsorted, _np_searchsorted, "searchsorted")




def _np_digitize(x, bins, right=False):
    """np.digitize as NumPy computes it: a search in increasing bins (side right unless
    right=True), or in the reversed decreasing bins counted from the end."""
    x, bins = as_array(x), as_array(bins)
    edges = np.asarray(getattr(bins, "value", bins))
    if edges.ndim != 1:
        raise ValueError("bins must be one-dimensional")
    steps = np.diff(edges)
    if np.all(steps >= 0):
        return searchsorted(bins, x, side="left" if right else "right")
    if np.all(steps <= 0):
        flipped = getitem(bins, index=(("slice", None, None, -1),)) if hasattr(bins, "ref") \
            else np.ascontiguousarray(edges[::-1])
        return len(edges) - searchsorted(flipped, x, side="left" if right else "right")
    raise ValueError("bins must be monotonically increasing or decreasing")


route(np.digitize, _np_digitize, "searchsorted")


# --- np.interp -------------------------------------------------------------------------------


def _as_float64(x):
    """np.interp computes in float64 whatever it is given (float32 and ints included)."""
    x = as_array(x)
    kind = np.result_type(_value(x))
    if kind.kind == "c":
        refuse("np.interp of complex values has no gradient rule in gradgen")
    if kind == np.float64:
        return x
    if isinstance(x, int | float) or not hasattr(x, "ref") and not isinstance(x, np.ndarray):
        return float(x)
    if not hasattr(x, "ref"):  # a constant
        return np.asarray(x, dtype=np.float64)
    return cast(x, dtype="float64")


def _np_interp(x, xp, fp, left=None, right=None, period=None):
    if period is not None:
        refuse("np.interp with period= has no gradient rule in gradgen",
               "wrap x yourself: np.interp(np.mod(x - xp[0], period) + xp[0], ...) on a "
               "sorted, extended xp")
    x, xp, fp = (_as_float64(v) for v in (x, xp, fp))
    xp_value, fp_value = np.asarray(_value(xp)), np.asarray(_value(fp))
    if xp_value.ndim != 1 or fp_value.ndim != 1:
        raise ValueError("object too deep for desired array")
    if len(xp_value) != len(fp_value):
        raise ValueError("fp and xp are not of the same length.")
    if len(xp_value) == 0:
        raise ValueError("array of sample points is empty")
    known = getattr(xp, "value", xp)  # the knots the trace sees (traced or not)
    if np.any(np.diff(np.asarray(known, dtype=np.float64)) <= 0):
        refuse("np.interp with knots xp that do not increase strictly has no gradient rule in "
               "gradgen (a repeated knot divides by zero)",
               "sort xp (and fp with it) and drop repeated knots")
    # a knot or value of a constant table is a Python float in the module (0.0, not
    # np.float64(0.0)); a traced one is read from its array
    first, last = (_entry(fp, 0), _entry(fp, -1))
    start, end = (_entry(xp, 0), _entry(xp, -1))
    below = first if left is None else _as_float64(left)
    above = last if right is None else _as_float64(right)
    at_end = last if right is None else where(x > end, above, last)
    if len(xp_value) == 1:
        return where(x < start, below, where(x > end, above, first))
    # the segment: xp[j] <= x < xp[j + 1]; left of xp[1] the first one, from xp[-2] on the
    # last one (x >= xp[-1] is replaced below)
    j = hinted(searchsorted(getitem(xp, index=(("slice", 1, -1, None),)), x, side="right"),
                "segment")
    j_next = j + 1
    x_lo = hinted(BOUND["getitem"](xp, j), "xp_lo")
    x_hi = hinted(BOUND["getitem"](xp, j_next), "xp_hi")
    f_lo = hinted(BOUND["getitem"](fp, j), "fp_lo")
    f_hi = hinted(BOUND["getitem"](fp, j_next), "fp_hi")
    slope = hinted((f_hi - f_lo) / (x_hi - x_lo), "slope")
    inside = slope * (x - x_lo) + f_lo  # NumPy's expression, term for term
    return where(x >= end, at_end, where(x < start, below, inside))


def _entry(table, k):
    return table[k] if hasattr(table, "ref") else float(table[k])


route(np.interp, _np_interp, "searchsorted", "getitem", "where")
