"""Discrete convolution of two 1-D arrays: the convolve row (np.convolve), and np.correlate
built on it (correlating with v is convolving with v reversed).

``np.convolve(a, v, mode)`` is a slice of the full convolution ``full[k] = sum_j a[k - j] *
v[j]`` (length n + m - 1): ``valid`` keeps the max(n, m) - min(n, m) + 1 entries where the
shorter array lies inside the longer one, ``same`` the max(n, m) centred ones. Its VJP
places the cotangent back into a full-length zero array at that offset and correlates it
with the other operand, which is again a valid convolution with that operand reversed:

    d a = np.convolve(g_full, v[::-1], mode="valid")    (length n)
    d v = np.convolve(g_full, a[::-1], mode="valid")    (length m)

so the rule is linear in ``g`` and differentiates again through the same row.
"""

from __future__ import annotations

import numpy as np

from .. import abstract
from .adapt import as_array, refuse, shape, value
from .index import getitem
from .registry import Domain, Expr, defop, route, value_text
from .shape import pad

_REALS = (-2.0, 2.0)
_MODES = ("full", "valid", "same")


def _lengths(n: int, m: int, mode: str) -> tuple[int, int]:
    """(the output's length, where it starts in the full convolution)."""
    if mode == "full":
        return n + m - 1, 0
    if mode == "valid":
        return max(n, m) - min(n, m) + 1, min(n, m) - 1
    return max(n, m), (min(n, m) - 1) // 2


def _reversed(x):
    return getitem(x, index=(("slice", None, None, -1),))


def _full_cotangent(g, n: int, m: int, mode: str):
    """The cotangent of ``mode``'s output placed into the full convolution's length."""
    length, start = _lengths(n, m, mode)
    after = n + m - 1 - start - length
    if start == 0 and after == 0:
        return g
    return pad(g, pad_width=((start, after),), mode="constant", constant_values=((0.0, 0.0),))


def _vjp_first(g, ans, a, v, mode="full"):
    (n,), (m,) = shape(a), shape(v)
    return convolve(_full_cotangent(g, n, m, mode), _reversed(v), mode="valid")


def _vjp_second(g, ans, a, v, mode="full"):
    (n,), (m,) = shape(a), shape(v)
    return convolve(_full_cotangent(g, n, m, mode), _reversed(a), mode="valid")


def _sym_convolve(a, v, mode="full"):
    a, v = np.ravel(np.asarray(a, dtype=object)), np.ravel(np.asarray(v, dtype=object))
    n, m = len(a), len(v)
    full = [sum((a[k - j] * v[j] for j in range(m) if 0 <= k - j < n), 0)
            for k in range(n + m - 1)]
    length, start = _lengths(n, m, mode)
    return np.array(full[start:start + length], dtype=object)


def _abstract(op, a, v, mode="full"):
    found = abstract.result_kind(op, (a, v), {"mode": mode})
    if found is None or np.ndim(a) != 1 or np.ndim(v) != 1:
        return None
    length, _ = _lengths(np.shape(a)[0], np.shape(v)[0], mode)
    return abstract.make((length,), *found)


def _print_convolve(node, args):
    mode = node.attrs.get("mode", "full")
    tail = "" if mode == "full" else f", mode={value_text(mode)}"
    return Expr(f"np.convolve({args[0].text}, {args[1].text}{tail})")


convolve = defop(
    "convolve", lambda a, v, mode="full": np.convolve(a, v, mode=mode), _print_convolve,
    vjp=(_vjp_first, _vjp_second), sympy=_sym_convolve, abstract=_abstract,
    domain=Domain((_REALS,), cases=(
        (((5,), (3,)), {"mode": "full"}),
        (((5,), (3,)), {"mode": "valid"}),
        (((3,), (6,)), {"mode": "valid"}),
        (((6,), (4,)), {"mode": "same"}),
        (((2,), (5,)), {"mode": "same"}))),
    rule_text=("the cotangent, placed in the full length, correlated with v",
               "the cotangent, placed in the full length, correlated with a"),
    xp="np.convolve has no array-API form (the standard has no convolution)")


def _check(name: str, a, v, mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))} (got {mode!r})")
    for x in (a, v):
        if len(shape(x)) != 1:
            raise ValueError(f"{name} takes 1-D arrays; use a loop or np.apply_along_axis "
                             "for more dimensions")
        if shape(x)[0] == 0:
            raise ValueError(f"{name}: neither array may be empty")


def _as_array(x):
    """A list of numbers or traced values as an array, a 0-d value as one entry (NumPy's
    reading of both)."""
    x = as_array(x)
    if np.ndim(value(x)) == 0:
        return np.reshape(x, (1,))
    return x


def _np_convolve(a, v, mode="full"):
    a, v = _as_array(a), _as_array(v)
    _check("np.convolve", a, v, mode)
    return convolve(a, v, mode=mode)


def _np_correlate(a, v, mode="valid"):
    """np.correlate(a, v) is np.convolve(a, v[::-1]) for real arrays (NumPy's default mode
    is valid here, full for np.convolve)."""
    if any(np.ndim(value(x)) == 0 for x in (a, v) if not isinstance(x, list | tuple)):
        raise ValueError("object of too small depth for desired array")  # as NumPy says
    a, v = _as_array(a), _as_array(v)
    _check("np.correlate", a, v, mode)
    if np.result_type(value(a), value(v)).kind == "c":
        refuse("np.correlate of complex arrays has no gradient rule in gradgen")
    if shape(a)[0] < shape(v)[0]:  # NumPy swaps them (and reverses the result):
        return _reversed(convolve(v, _reversed(a), mode=mode))  # the same sums, in its order
    return convolve(a, _reversed(v), mode=mode)


route(np.convolve, _np_convolve, "convolve")
route(np.correlate, _np_correlate, "convolve", "getitem")
