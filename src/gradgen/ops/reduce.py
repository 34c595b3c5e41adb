"""Reductions: mean, norm, and the rows that reduce over axes, with their VJPs."""

from __future__ import annotations

import numpy as np

from ._sym import sp
from .adapt import refuse
from .arrays import _REDUCE_CASES, REALS, _count, _print_reduction, _unreduce, _value, reduction
from .registry import Domain, Expr, defop, route

mean = defop(
    "mean", lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
    _print_reduction("mean"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False:
         _unreduce(g / _count(np.shape(_value(x)), axis), np.shape(_value(x)), axis,
                   keepdims),),
    sympy=lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims)
    / _count(np.shape(x), axis),
    domain=Domain((REALS,), cases=_REDUCE_CASES),
    rule_text=("d mean(u)/du = 1 / n for every element",))

# The 2-norm of all elements. Its derivative x / norm(x) is undefined at x = 0 (gives nan).
norm = defop(
    "norm", lambda x: np.linalg.norm(x), lambda node, args: Expr(f"np.linalg.norm({args[0].text})"),
    vjp=(lambda g, ans, x: g * x / ans,),
    sympy=lambda x: sp.sqrt(np.sum(x * x)),
    domain=Domain((REALS,), cases=((((3,),), {}), (((2, 3),), {}))),
    rule_text=("d norm(u)/du = u / norm(u)",))


# --- how NumPy reaches these rows ------------------------------------------------------------


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims:
        refuse("np.linalg.norm with ord=, axis= or keepdims= has no gradient rule in gradgen",
               "np.sqrt(np.sum(x * x, axis=...)) is differentiable")
    return norm(x)


route(np.mean, reduction(mean, "mean"), "mean")
route(np.linalg.norm, _norm, "norm")
