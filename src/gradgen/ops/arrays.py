"""Array plumbing every family builds on: sum, broadcast_to, reshape, transpose, sum_to."""

from __future__ import annotations

import operator

import numpy as np

from .. import abstract
from ..tracer import shaped
from .adapt import normalize_axis, refuse
from .core import cast, copy
from .registry import Domain, Expr, defop, method, route

try:  # NumPy >= 2.0
    from numpy.lib.array_utils import normalize_axis_tuple
except ImportError:  # pragma: no cover - NumPy 1.26
    from numpy.core.numeric import normalize_axis_tuple

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


def _value(x):  # for shape, dtype and kind questions only
    return shaped(x)


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
    rule_text=("d sum(u)/du = 1 for every element",), abstract=abstract.reduction)

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


def _xp_broadcast_to(node, args, scope):
    shape = node.attrs["shape"]
    if node.inputs[0].aval.py is not None:  # a Python float: filled, no array to broadcast
        return Expr(scope.allocate("full", shape, node.aval.dtype, args[0].text))
    return Expr(f"xp.broadcast_to({args[0].text}, {tuple(shape)!r})")


broadcast_to = defop(
    "broadcast_to", lambda x, shape: np.broadcast_to(x, shape),
    lambda node, args: Expr(f"np.broadcast_to({args[0].text}, {node.attrs['shape']!r})"),
    vjp=(lambda g, ans, x, shape: sum_to(g, np.shape(_value(x))),),
    sympy=lambda x, shape: np.broadcast_to(x, shape),
    domain=Domain((REALS,), cases=((((3,),), {"shape": (2, 3)}),
                                   (((2, 1),), {"shape": (2, 4)}),
                                   (((),), {"shape": (3,)}))),
    rule_text=("the cotangent is summed over the broadcast axes",),
    extra={"view": "readonly"},
    abstract=abstract.view, xp=_xp_broadcast_to)


def _print_reshape(node, args):
    shape = node.attrs["shape"]
    inner = ", ".join(map(str, shape)) if len(shape) > 0 else "()"
    if len(shape) == 1:
        inner = f"{shape[0]}"
    return method(f".reshape({inner})")(node, args)


def _xp_reshape(node, args, scope):
    return Expr(f"xp.reshape({_xp_array(node, args, scope)}, {tuple(node.attrs['shape'])!r})")


def _xp_array(node, args, scope) -> str:
    """The first input as an array: a Python float has no shape to change."""
    if node.inputs[0].aval.py is not None:
        return f"xp.asarray({args[0].text}, dtype={scope.dtype(node.aval.dtype)})"
    return args[0].text


reshape = defop(
    "reshape", lambda x, shape: np.reshape(x, shape), _print_reshape,
    vjp=(lambda g, ans, x, shape: reshape(g, shape=np.shape(_value(x))),),
    sympy=lambda x, shape: np.reshape(x, shape),
    domain=Domain((REALS,), cases=((((2, 3),), {"shape": (3, 2)}),
                                   (((6,),), {"shape": (2, 1, 3)}),
                                   (((1,),), {"shape": ()}))),
    rule_text=("the cotangent is reshaped back",), extra={"view": True},
    abstract=abstract.view, xp=_xp_reshape)


def _print_transpose(node, args):
    axes = node.attrs["axes"]
    if axes is None or tuple(axes) == tuple(reversed(range(len(axes)))):
        return method(".T")(node, args)
    return Expr(f"np.transpose({args[0].text}, {tuple(axes)!r})")


def _xp_transpose(node, args, scope):
    axes = node.attrs["axes"]
    ndim = node.aval.ndim
    if axes is None:
        axes = tuple(reversed(range(ndim)))
    if ndim < 2:
        return args[0]
    if ndim == 2 and tuple(axes) == (1, 0):
        return Expr(f"xp.matrix_transpose({args[0].text})")
    return Expr(f"xp.permute_dims({args[0].text}, {tuple(axes)!r})")


def _inverse_perm(axes):
    return tuple(int(i) for i in np.argsort(axes)) if axes is not None else None


transpose = defop(
    "transpose", lambda x, axes=None: np.transpose(x, axes), _print_transpose,
    vjp=(lambda g, ans, x, axes=None: transpose(g, axes=_inverse_perm(axes)),),
    sympy=lambda x, axes=None: np.transpose(x, axes),
    domain=Domain((REALS,), cases=((((2, 3),), {"axes": None}),
                                   (((2, 3, 4),), {"axes": (1, 2, 0)}))),
    rule_text=("the cotangent is transposed back",), extra={"view": True},
    abstract=abstract.view, xp=_xp_transpose)


# --- how NumPy reaches these rows ------------------------------------------------------------


def reduction(op, np_name):
    """An adapter for ``np.<np_name>(a, axis=None, dtype=None, out=None, keepdims=False)``;
    a float ``dtype=`` reduces ``a`` cast to it, as NumPy does."""

    def handler(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        kw = {k: v for k, v in kw.items() if v is not np._NoValue}
        keepdims = False if keepdims is np._NoValue else keepdims
        if "where" in kw or "initial" in kw and np_name == "sum":
            return _masked(handler, np_name, a, axis, dtype, out, keepdims, **kw)
        float_dtype = dtype is not None and np.dtype(dtype).kind == "f"
        if (dtype is not None and not float_dtype) or out is not None or kw:
            extra = ", ".join([*(["dtype="] if dtype is not None else []),
                               *(["out="] if out is not None else []), *(f"{k}=" for k in kw)])
            refuse(f"np.{np_name}(..., {extra}) has no gradient rule in gradgen",
                   f"call np.{np_name}(x, axis=..., keepdims=...)")
        axis = normalize_axis(axis, np.ndim(_value(a)))
        if float_dtype and (np.result_type(_value(a)) != np.dtype(dtype)
                            or isinstance(_value(a), float)):
            a = cast(a, dtype=np.dtype(dtype).name)
        return op(a, axis=axis, keepdims=bool(keepdims))

    return handler


def _masked(handler, np_name, a, axis, dtype, out, keepdims, where=None, initial=None):
    """``np.sum(a, where=m, initial=v)`` and ``np.mean(a, where=m)``: the entries the mask
    leaves out count as 0 (the mean divides by how many it keeps along ``axis``, as NumPy
    does); the gradient is the cotangent where ``m`` holds and 0 elsewhere."""
    kept = a
    if where is not None:
        kept = np.where(where, a, 0.0 if np.result_type(_value(a)).kind == "f" else 0)
    if np_name == "sum":
        total = handler(kept, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
        return total if initial is None else total + initial
    shape = np.shape(_value(a))
    count = np.sum(np.broadcast_to(where, shape), axis=axis, keepdims=keepdims)
    return np.sum(kept, axis=axis, dtype=dtype, out=out, keepdims=keepdims) / count


def _reshape(a, *shape, order="C", **kw):
    """``np.reshape(a, shape)`` / ``a.reshape(*shape)``: one -1 is worked out. order='F'
    reads and writes the elements with the first index fastest, which is C order on the
    transposes: ``a.T.reshape(shape[::-1]).T``. Not 'A' or 'K' (they follow the memory
    order of ``a``, not known for a traced array)."""
    for key in ("shape", "newshape"):
        if kw.get(key, np._NoValue) is not np._NoValue:
            shape = (kw.pop(key),)
        kw.pop(key, None)
    copy_ = kw.pop("copy", None)
    if order not in ("C", "F") or kw:
        extra = ", ".join([*([f"order={order!r}"] if order != "C" else []), *(f"{k}=" for k in kw)])
        refuse(f"np.reshape with {extra} has no gradient rule in gradgen",
               "reshape in C order (the default) or order='F'")
    if not shape:
        raise TypeError("reshape() missing required argument 'shape'")
    shape = shape[0] if len(shape) == 1 else shape
    shape = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    if order == "F":
        out = _transpose(_reshape(_transpose(a), tuple(reversed(shape))))
        return copy(out) if copy_ else out
    shape = tuple(operator.index(d) for d in shape)
    size = int(np.prod(np.shape(_value(a)), dtype=np.int64))
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known > 0 and size % known == 0:
            shape = tuple(size // known if d == -1 else d for d in shape)
    out = reshape(a, shape=shape)  # NumPy itself rejects a shape that does not fit
    if copy_:
        out = copy(out)
    return out


def _transpose(a, axes=None):
    if axes is not None:
        n = np.ndim(_value(a))
        axes = tuple(axes) if isinstance(axes, tuple | list) else (axes,)
        if len(axes) != n:
            raise ValueError("axes don't match array")
        axes = normalize_axis_tuple(axes, n)
    return transpose(a, axes=axes)


def _broadcast_to(array, shape, subok=False):
    shape = (shape,) if not isinstance(shape, tuple | list) else tuple(shape)
    return broadcast_to(array, shape=tuple(operator.index(d) for d in shape))


route(np.sum, reduction(sum_, "sum"), "sum")
route(np.reshape, _reshape, "reshape")
route(np.transpose, _transpose, "transpose")
route(np.broadcast_to, _broadcast_to, "broadcast_to")
