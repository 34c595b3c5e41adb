"""Structural ops every graph uses: inputs, constants, guards, seeds, adjoints, sums, copies."""

from __future__ import annotations

import math

import numpy as np

from .. import abstract
from ..ir import Aval
from ..tracer import shaped
from .registry import PREC_UNARY, Domain, Expr, defop, method, sum_expr

REALS = (-2.0, 2.0)


def literal(value) -> Expr:
    """A constant as Python source that evaluates to the same value and type."""
    if isinstance(value, np.ndarray):
        dtype = f"np.{value.dtype.name}"
        structured = _structured_literal(value, dtype)
        if structured is not None:
            return Expr(structured)
        if value.size > 1 and (value == value.flat[0]).all():
            fill = value.flat[0]
            if fill == 0:
                return Expr(f"np.zeros({value.shape!r}, dtype={dtype})")
            if fill == 1:
                return Expr(f"np.ones({value.shape!r}, dtype={dtype})")
            return Expr(f"np.full({value.shape!r}, {_scalar_text(fill.item())}, dtype={dtype})")
        if value.ndim == 0:
            return Expr(f"np.array({_scalar_text(value.item())}, dtype={dtype})")
        body = _nested(value)
        return Expr(f"np.array({body}, dtype={dtype})")
    if isinstance(value, np.generic):
        inner = _scalar_text(value.item())
        return Expr(f"np.{value.dtype.name}({inner})")
    text = _scalar_text(value)
    if text.startswith("-"):
        return Expr(text, PREC_UNARY, Expr(text[1:]))
    return Expr(text)


def _structured_literal(value: np.ndarray, dtype: str) -> str | None:
    """np.arange(n) and np.eye(n) as the calls that make them, not as their elements."""
    if value.size < 2 or value.dtype.kind not in "iuf":
        return None
    if value.ndim == 1 and (value == np.arange(value.size)).all():
        if value.dtype == np.arange(1).dtype:
            return f"np.arange({value.size})"
        return f"np.arange({value.size}, dtype={dtype})"
    if value.ndim == 2 and value.shape[0] == value.shape[1] and (value == np.eye(len(value))).all():
        return f"np.eye({len(value)}, dtype={dtype})"
    return None


def _scalar_text(v) -> str:
    if isinstance(v, bool | int):
        return repr(v)
    if math.isnan(v):
        return "math.nan"
    if math.isinf(v):
        return "math.inf" if v > 0 else "-math.inf"
    return repr(float(v)).replace("e+", "e")  # 1e20 as ruff format writes it, not 1e+20


def _nested(a: np.ndarray) -> str:
    if a.ndim == 1:
        return "[" + ", ".join(_scalar_text(x) for x in a.tolist()) + "]"
    return "[" + ", ".join(_nested(row) for row in a) + "]"


def _identity(x):
    return x


def _print_name(node, args):
    raise AssertionError("inputs are printed by name")


input_ = defop("input", _identity, _print_name)

const = defop("const", lambda value: value, lambda node, args: literal(node.attrs["value"]))

# A guard reads a traced boolean; the emitter turns it into an explicit check.
guard = defop("guard", lambda cond, expect: None, lambda node, args: args[0], n_out=0)


def _seed_value(aval: Aval):
    if aval.py is not None:
        return aval.py(1)
    return np.ones(aval.shape, aval.dtype)[()] if aval.shape == () else np.ones(
        aval.shape, aval.dtype)


def _print_seed(node, args):
    aval = node.aval
    if aval.py is not None:
        return Expr("1.0")
    if aval.shape == ():
        return Expr(f"np.{aval.dtype.name}(1.0)")
    return Expr(f"np.ones({aval.shape!r}, dtype=np.{aval.dtype.name})")


def _xp_seed(node, args, scope):
    aval = node.aval
    if aval.py is not None:
        return Expr("1.0")
    if aval.shape == ():
        return Expr(f"xp.asarray(1.0, dtype={scope.dtype(aval.dtype)})")
    return Expr(scope.allocate("ones", aval.shape, aval.dtype))


# The cotangent 1.0 that starts reverse mode: nullary, its aval set by reverse. Not a const,
# so folding keeps it visible as `grad_out = 1.0  # seed`.
seed = defop("seed", lambda: None, _print_seed, nondiff=True, xp=_xp_seed)


# The adjoint of a named value under its name, grad_<name>, where no node of its own can carry
# it: an identity (grad_a = grad_c, when d(u + v)/du = 1 hands the adjoint on unchanged).
adjoint = defop("adjoint", _identity, lambda node, args: args[0],
                vjp=(lambda g, ans, x, **_: g,), sympy=lambda x, **_: x,
                abstract=abstract.same_as_first,
                domain=Domain((REALS,), cases=((((3,),), {}), (("py",), {}))))


def _print_add_n(node, args):
    return sum_expr(args[0], args[1:], getattr(node, "role", None) == "bwd")


def _add_n(*xs, uses=()):
    total = xs[0] + xs[1]
    for x in xs[2:]:
        total = total + x
    return total


# Every contribution to a reused value's adjoint, summed in one place (fused accumulation).
MAX_FUSED_TERMS = 16  # a longer sum continues in the next statement, in the same order
add_n = defop("add_n", _add_n, _print_add_n, vjp=(lambda g, ans, *xs, uses=(): g,),
              sympy=_add_n, extra={"variadic": True}, abstract=abstract.elementwise,
              domain=Domain((REALS,), cases=((((3,), (3,), (3,)), {"uses": ()}),
                                             (((2, 3), (2, 3)), {"uses": ()}),
                                             (("py", "py"), {"uses": ()}))))


def _copy(x):
    return np.array(x) if isinstance(x, np.ndarray) else x


# A fresh array for a gradient that would otherwise alias an argument, a constant or a view.
def _xp_copy(node, args, scope):
    if node.inputs[0].aval.py is not None:  # a Python float becomes an array of the library
        return Expr(f"xp.asarray({args[0].text}, dtype={scope.dtype(node.aval.dtype)})")
    return Expr(f"xp.asarray({args[0].text}, copy=True)")


copy = defop("copy", _copy, method(".copy()"), vjp=(lambda g, ans, x: g,),
             sympy=lambda x: x, domain=Domain((REALS,), cases=((((2, 3),), {}),)),
             abstract=abstract.fresh, xp=_xp_copy)


def _cast(x, dtype):
    if dtype == "float":  # a Python float, as math functions see a NumPy scalar
        return float(x)
    if dtype == "int":  # int() of a NumPy float: a Python int, truncated toward zero
        return int(x)
    return np.asarray(x).astype(dtype)[()] if np.ndim(x) == 0 else x.astype(dtype)


def _print_cast(node, args):
    dtype = node.attrs["dtype"]
    if dtype == "float" or dtype == "int":
        return Expr(f"{dtype}({args[0].text})")
    if node.aval.shape == ():
        return Expr(f"np.{dtype}({args[0].text})")
    return method(f".astype(np.{dtype})")(node, args)


def _xp_cast(node, args, scope):
    dtype = node.attrs["dtype"]
    if dtype == "float" or dtype == "int":
        return Expr(f"{dtype}({args[0].text})")
    if node.inputs[0].aval.py is not None:
        return Expr(f"xp.asarray({args[0].text}, dtype={scope.dtype(dtype)})")
    return Expr(f"xp.astype({args[0].text}, {scope.dtype(dtype)})")


def _cast_back(g, ans, x, dtype):
    return cast(g, dtype=np.result_type(shaped(x)).name)


# A dtype change, inserted by reverse mode where a contribution's dtype differs from its input,
# and by the tracer where NumPy or math would change a scalar's kind (dtype "float": a Python
# float, as math.sin sees np.float64; "int": int() of a NumPy float, whose value a guard
# fixes; a NumPy dtype for a ufunc of Python numbers).
cast = defop("cast", _cast, _print_cast, vjp=(_cast_back,), sympy=lambda x, dtype: x,
             abstract=abstract.elementwise,
             domain=Domain((REALS,), cases=((((3,),), {"dtype": "float32"}),
                                            (((3,),), {"dtype": "float64"}),
                                            (((),), {"dtype": "float32"}),
                                            (((),), {"dtype": "float"}))),
             rule_text=("the cotangent is cast back",), xp=_xp_cast)
