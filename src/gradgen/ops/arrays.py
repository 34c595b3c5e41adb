"""Array ops: reductions, shape changes and linear algebra, with their VJPs."""

from __future__ import annotations

import operator

import numpy as np

from ._sym import sp
from .registry import PREC_MUL, Domain, Expr, defop, infix, method

REALS = (-2.0, 2.0)


def _axis_text(axis):
    if axis is None:
        return None
    return repr(axis[0]) if len(axis) == 1 else repr(tuple(axis))


def _print_reduction(np_name):
    def print_reduction(node, args):
        parts = [args[0].text]
        if node.attrs.get("axis") is not None:
            parts.append(f"axis={_axis_text(node.attrs['axis'])}")
        if node.attrs.get("keepdims"):
            parts.append("keepdims=True")
        return Expr(f"np.{np_name}({', '.join(parts)})")

    return print_reduction


def _kept_shape(shape, axis):
    """The shape of a reduction with keepdims=True."""
    if axis is None:
        return tuple(1 for _ in shape)
    return tuple(1 if i in axis else d for i, d in enumerate(shape))


def _unreduce(g, x_shape, axis, keepdims):
    """Spread a reduction's cotangent back over the reduced axes."""
    if axis is not None and not keepdims:
        g = reshape(g, shape=_kept_shape(x_shape, axis))
    if tuple(np.shape(_value(g))) == tuple(x_shape):
        return g
    return broadcast_to(g, shape=tuple(x_shape))


def _value(x):
    from ..tracer import tracer_value

    return tracer_value(x)


def _count(x_shape, axis):
    n = 1
    for i, d in enumerate(x_shape):
        if axis is None or i in axis:
            n *= d
    return n


_REDUCE_CASES = (
    (((3, 4),), {"axis": None, "keepdims": False}),
    (((3, 4),), {"axis": (0,), "keepdims": False}),
    (((3, 4),), {"axis": (1,), "keepdims": True}),
    (((2, 3, 4),), {"axis": (0, 2), "keepdims": False}),
    (((5,),), {"axis": None, "keepdims": True}),
)

sum_ = defop(
    "sum", lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
    _print_reduction("sum"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False:
         _unreduce(g, np.shape(_value(x)), axis, keepdims),),
    sympy=lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
    domain=Domain((REALS,), cases=_REDUCE_CASES),
    rule_text=("d sum(u)/du = 1 for every element",))

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


def sum_to(g, shape):
    """Sum a broadcast cotangent back to ``shape`` (only called where the shapes differ)."""
    g_shape = np.shape(_value(g))
    lead = len(g_shape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and g_shape[lead + i] != 1)
    if axes:
        keep = lead == 0
        g = sum_(g, axis=axes, keepdims=keep)
    if tuple(np.shape(_value(g))) != tuple(shape):
        g = reshape(g, shape=tuple(shape))
    return g


broadcast_to = defop(
    "broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
    lambda node, args: Expr(f"np.broadcast_to({args[0].text}, {node.attrs['shape']!r})"),
    vjp=(lambda g, ans, x, shape: sum_to(g, np.shape(_value(x))),),
    sympy=lambda x, shape: np.broadcast_to(x, shape),
    domain=Domain((REALS,), cases=((((3,),), {"shape": (2, 3)}),
                                   (((2, 1),), {"shape": (2, 4)}),
                                   (((),), {"shape": (3,)}))),
    rule_text=("the cotangent is summed over the broadcast axes",),
    extra={"view": "readonly"})


def _print_reshape(node, args):
    shape = node.attrs["shape"]
    inner = ", ".join(map(str, shape)) if len(shape) > 0 else "()"
    if len(shape) == 1:
        inner = f"{shape[0]}"
    return method(f".reshape({inner})")(node, args)


reshape = defop(
    "reshape", lambda x, shape: np.reshape(x, shape), _print_reshape,
    vjp=(lambda g, ans, x, shape: reshape(g, shape=np.shape(_value(x))),),
    sympy=lambda x, shape: np.reshape(x, shape),
    domain=Domain((REALS,), cases=((((2, 3),), {"shape": (3, 2)}),
                                   (((6,),), {"shape": (2, 1, 3)}),
                                   (((1,),), {"shape": ()}))),
    rule_text=("the cotangent is reshaped back",), extra={"view": True})


def _print_transpose(node, args):
    axes = node.attrs["axes"]
    if axes is None or tuple(axes) == tuple(reversed(range(len(axes)))):
        return method(".T")(node, args)
    return Expr(f"np.transpose({args[0].text}, {tuple(axes)!r})")


def _inverse_perm(axes):
    return tuple(int(i) for i in np.argsort(axes)) if axes is not None else None


transpose = defop(
    "transpose", lambda x, axes=None: np.transpose(x, axes), _print_transpose,
    vjp=(lambda g, ans, x, axes=None: transpose(g, axes=_inverse_perm(axes)),),
    sympy=lambda x, axes=None: np.transpose(x, axes),
    domain=Domain((REALS,), cases=((((2, 3),), {"axes": None}),
                                   (((2, 3, 4),), {"axes": (1, 2, 0)}))),
    rule_text=("the cotangent is transposed back",), extra={"view": True})


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

# The 2-norm of all elements. Its derivative x / norm(x) is undefined at x = 0 (gives nan).
norm = defop(
    "norm", lambda x: np.linalg.norm(x), lambda node, args: Expr(f"np.linalg.norm({args[0].text})"),
    vjp=(lambda g, ans, x: g * x / ans,),
    sympy=lambda x: sp.sqrt(np.sum(x * x)),
    domain=Domain((REALS,), cases=((((3,),), {}), (((2, 3),), {}))),
    rule_text=("d norm(u)/du = u / norm(u)",))
