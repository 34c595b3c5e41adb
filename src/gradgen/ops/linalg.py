"""Linear algebra: matmul and its relatives, with their VJPs."""

from __future__ import annotations

import operator

import numpy as np

from .adapt import refuse
from .arrays import REALS, _value, reshape, sum_to, transpose
from .registry import PREC_MUL, Domain, Expr, defop, infix, route


def _swap_last(x):
    n = np.ndim(_value(x))
    axes = tuple(range(n - 2)) + (n - 1, n - 2)
    return transpose(x, axes=None if n == 2 else axes)


def _matmul_vjp_a(g, ans, a, b):
    na, nb = np.ndim(_value(a)), np.ndim(_value(b))
    if na == 1 and nb == 1:
        return g * b
    if na == 1 and nb == 2:
        return b @ g
    if na == 2 and nb == 1:
        return outer(g, b)
    if na == 2 and nb == 2:
        return g @ _swap_last(b)
    return _matmul_vjp_batched(g, a, b)[0]


def _matmul_vjp_b(g, ans, a, b):
    na, nb = np.ndim(_value(a)), np.ndim(_value(b))
    if na == 1 and nb == 1:
        return g * a
    if na == 1 and nb == 2:
        return outer(a, g)
    if na == 2 and nb == 1:
        return g @ a
    if na == 2 and nb == 2:
        return _swap_last(a) @ g
    return _matmul_vjp_batched(g, a, b)[1]


def _matmul_vjp_batched(g, a, b):
    """Batched matmul: promote vectors to matrices, then sum over broadcast batch axes."""
    a_shape, b_shape = np.shape(_value(a)), np.shape(_value(b))
    a2 = reshape(a, shape=(1,) + a_shape) if len(a_shape) == 1 else a
    b2 = reshape(b, shape=b_shape + (1,)) if len(b_shape) == 1 else b
    g_shape = np.shape(np.matmul(np.empty(np.shape(_value(a2))), np.empty(np.shape(_value(b2)))))
    g2 = reshape(g, shape=g_shape) if np.shape(_value(g)) != g_shape else g
    ga = g2 @ _swap_last(b2)
    gb = _swap_last(a2) @ g2
    ga = sum_to(ga, np.shape(_value(a2))) if np.shape(_value(ga)) != np.shape(_value(a2)) else ga
    gb = sum_to(gb, np.shape(_value(b2))) if np.shape(_value(gb)) != np.shape(_value(b2)) else gb
    if len(a_shape) == 1:
        ga = reshape(ga, shape=a_shape)
    if len(b_shape) == 1:
        gb = reshape(gb, shape=b_shape)
    return ga, gb


_MATMUL_CASES = tuple(
    ((sa, sb), {}) for sa, sb in [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                                  ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,))])

matmul = defop(
    "matmul", operator.matmul, infix("@", PREC_MUL), vjp=(_matmul_vjp_a, _matmul_vjp_b),
    sympy=lambda a, b: np.matmul(a, b), domain=Domain((REALS, REALS), cases=_MATMUL_CASES),
    binds=(np.matmul,),
    rule_text=("d(A @ B)/dA: G @ B.T", "d(A @ B)/dB: A.T @ G"))

outer = defop(
    "outer", np.outer, lambda node, args: Expr(f"np.outer({args[0].text}, {args[1].text})"),
    vjp=(lambda g, ans, a, b: g @ b, lambda g, ans, a, b: a @ g),
    sympy=lambda a, b: np.outer(a, b), domain=Domain((REALS, REALS),
                                                     cases=((((3,), (2,)), {}),)),
    rule_text=("d outer(u, v)/du: G @ v", "d outer(u, v)/dv: u @ G"))


# --- how NumPy reaches these rows ------------------------------------------------------------


def _dot(a, b, out=None):
    if out is not None:
        refuse("np.dot(..., out=...) writes in place", "use the returned value")
    na, nb = np.ndim(_value(a)), np.ndim(_value(b))
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    refuse("np.dot of arrays with more than 2 dimensions has no gradient rule in gradgen",
           "use np.matmul (or @), which gradgen differentiates")


def _outer(a, b, out=None):
    if np.ndim(_value(a)) != 1 or np.ndim(_value(b)) != 1 or out is not None:
        refuse("np.outer of arrays that are not vectors has no gradient rule in gradgen")
    return outer(a, b)


route(np.dot, _dot, "matmul")
route(np.outer, _outer, "outer")
