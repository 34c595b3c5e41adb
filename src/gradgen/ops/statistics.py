"""np.cov and np.corrcoef, built from rows the way NumPy's own code computes them (center
each variable, X @ X.T times 1 / (the degrees of freedom), divided by the standard deviations
and clipped to [-1, 1] for the correlation), so values agree to the bit and the gradient
reaches the data. Frequency and analytic weights are constants of the trace (a traced
weight is refused by name); complex data is refused.
"""

from __future__ import annotations

import warnings

import numpy as np

from .adapt import has_traced, hinted, new_array, refuse, value
from .registry import route

_NO = np._NoValue


def _as_rows(x, rowvar: bool, dtype):
    """NumPy's ``array(m, ndmin=2, dtype=dtype)``, variables in rows."""
    shape = np.shape(value(x))
    if len(shape) > 2:
        raise ValueError("m has more than 2 dimensions")
    if np.result_type(value(x)) != dtype:
        x = x.astype(dtype) if hasattr(x, "astype") else np.asarray(x, dtype)
    if len(shape) < 2:
        x = np.reshape(x, (1, int(np.size(value(x)))))
        return x
    return x if rowvar else x.T


def _constant_weights(name: str, w):
    if w is None:
        return None
    if has_traced(w):
        refuse(f"np.cov with traced {name} has no gradient rule in gradgen",
               f"pass {name} as constants")
    return np.asarray(getattr(w, "value", w), dtype=float)


def _np_cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
            dtype=None):
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if np.result_type(value(m)).kind == "c" or y is not None and \
            np.result_type(value(y)).kind == "c":
        refuse("np.cov of complex data has no gradient rule in gradgen")
    if dtype is None:
        dtype = np.result_type(value(m), np.float64) if y is None else np.result_type(
            value(m), value(y), np.float64)
    dtype = np.dtype(dtype)
    X = _as_rows(m, rowvar or np.ndim(value(m)) == 1, dtype)
    if y is not None:
        rows = _as_rows(y, rowvar or np.shape(value(y))[:1] == (1,) or np.ndim(value(y)) == 1,
                        dtype)
        X = np.concatenate((X, rows), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    n = np.shape(value(X))[1]
    w = _constant_weights("fweights", fweights)
    if w is not None:
        if not np.all(w == np.around(w)):
            raise TypeError("fweights must be integer")
        if w.ndim > 1 or w.shape[0] != n or np.any(w < 0):
            raise ValueError("fweights must be non-negative, one per observation")
    a = _constant_weights("aweights", aweights)
    if a is not None:
        if a.ndim > 1 or a.shape[0] != n or np.any(a < 0):
            raise ValueError("aweights must be non-negative, one per observation")
        w = a if w is None else w * a
    if w is None:
        avg = np.mean(X, axis=1)
        fact = n - ddof
    else:
        w_sum = w.sum()
        avg = np.sum(X * w, axis=1) / w_sum  # np.average(X, axis=1, weights=w)
        if ddof == 0:
            fact = w_sum
        elif a is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * sum(w * a) / w_sum
    if fact <= 0:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    centered = hinted(X - avg[:, None], "centered")
    c = centered @ (centered.T if w is None else (centered * w).T)
    c = hinted(c * float(np.true_divide(1, fact)), "covariance")  # c *= 1 / fact: c's dtype
    return np.squeeze(c)


def _np_corrcoef(x, y=None, rowvar=True, bias=_NO, ddof=_NO, *, dtype=None):
    c = _np_cov(x, y, rowvar, dtype=dtype)
    if np.ndim(value(c)) == 0:  # one variable: nan for nan, inf or 0, else 1
        return c / c
    stddev = hinted(np.sqrt(np.diagonal(c)), "stddev")
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    return np.clip(c, -1, 1)


route(np.cov, _np_cov, "matmul", "mean", "sub")
route(np.corrcoef, _np_corrcoef, "matmul", "mean", "sqrt", "clip")


def _np_bincount(x, /, weights=None, minlength=0):
    """np.bincount: the weights added per bin (np.add.at into a new array), so the gradient
    of each weight is its bin's cotangent. The number of bins comes from the largest index;
    when the indices are traced (np.digitize of the data, say) the module checks that it
    still does (a guard), as for any shape the data decides."""
    idx = np.asarray(x) if isinstance(x, list | tuple) else x
    known = np.asarray(getattr(idx, "value", idx))
    if known.ndim != 1:
        raise ValueError("object too deep for desired array")
    if known.size and (known.dtype.kind not in "iu" or known.min() < 0):
        raise ValueError("'list' argument must have no negative elements")
    length = max(int(minlength), int(known.max()) + 1 if known.size else 0)
    traced_bins = has_traced(idx)
    if traced_bins and known.size:
        largest = np.max(idx) + 1
        # (each a guard of the traced path: the bins the module makes are the ones seen here)
        if length > int(minlength):
            bool(largest == length)
        else:
            bool(largest <= length)
    if weights is None:  # counts: integers, no gradient
        counts = np.zeros(length, dtype=np.intp)
        if not traced_bins:
            np.add.at(counts, known, 1)
            return counts
        out = new_array(counts)
        np.add.at(out, idx, 1)
        return out
    weights = np.asarray(weights, dtype=float) if isinstance(weights, list | tuple) else weights
    out = new_array(np.zeros(length))  # NumPy adds the weights as float64
    np.add.at(out, idx, weights)
    return out


route(np.bincount, _np_bincount, "index_add")
