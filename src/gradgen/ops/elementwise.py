"""Elementwise math functions: one row each, the same op for ``math.f`` and ``np.f``.

Also ``where`` (the select every rule and adapter builds on), ``clip``, ``np.select``,
``np.nan_to_num`` and the boolean rows (logical_*, isfinite, isnan, isinf, signbit).

Conventions at kinks and domain edges (as in JAX):
- abs, fabs: the derivative at 0 is sign(0) = 0; copysign(u, v) passes sign(u) * ±1 to u
  (0 at u = 0) and nothing to v.
- hypot: the gradient at the origin is 0 (like abs).
- clip(u, lo, hi): u gets the cotangent where lo <= u <= hi, bounds included (JAX passes the
  gradient to u at ties); lo where u < lo (and lo <= hi), hi where u > hi or lo > hi (NumPy's
  result is then hi).
- fmax/fmin: like maximum/minimum (a tie goes to the first argument), but a nan argument
  is ignored: the other one gets the cotangent.
- heaviside(u, h0): zero gradient in u; h0 gets the cotangent where u == 0.
- nan_to_num: 1 where u is finite, 0 where it was replaced.
- sinc: derivative 0 at 0 and second derivative -pi**2 / 3 there, exactly.
- sign, floor, ceil, trunc, rint/round, comparisons, logical ops, isfinite/isnan/isinf,
  signbit: locally constant, zero gradient (nondiff rows).
- cbrt at 0, sqrt at 0, log at 0: the derivative is infinite, as it is mathematically.
"""

from __future__ import annotations

import math

import numpy as np

from ..tracer import _numpy_scalars
from ._sym import locally_constant_floor, sp
from .adapt import as_array, hinted, new_array, refuse, value
from .core import literal
from .registry import (
    BOUND,
    OPS,
    PREC_ADD,
    PREC_COMPARE,
    Domain,
    Expr,
    call,
    defop,
    dual,
    is_python_scalar,
    route,
)

REALS = (-3.0, 3.0)
POSITIVE = (0.2, 3.0)
UNIT = (-0.9, 0.9)
SMALL = (-1.4, 1.4)  # tan: stay away from the poles at +-pi/2
LN2 = math.log(2)  # Python floats: a float32 array times them stays float32

# Python's precedence below the comparisons (PREC_COMPARE): not, and, or, a conditional.
PREC_NOT, PREC_AND, PREC_OR, PREC_COND = 4, 3, 2, 1


def _unary(name, math_fn, np_fn, rule, sym, bounds, text, math_name=None, np_name=None,
           **kw):
    binds = tuple(f for f in (math_fn, np_fn) if f is not None)
    return defop(
        name,
        dual(math_fn or np_fn, np_fn),
        call(math_name or (name if math_fn is not None else None), np_name or name),
        vjp=(rule,),
        sympy=sym,
        domain=Domain((bounds,), **kw),
        binds=binds,
        rule_text=(text,),
        elementwise=True,
    )


def _py_kind(x):
    """The Python type of a Python scalar or a tracer of one, else None."""
    if is_python_scalar(x):
        return type(x)
    aval = getattr(x, "aval", None)
    return aval.py if aval is not None else None


def _is_traced(x) -> bool:
    return getattr(x, "aval", None) is not None


def zeros_like(x):
    """A constant zero contribution shaped and typed like the input ``x`` (a rule whose
    input gets no gradient, e.g. a locally constant argument)."""
    if _py_kind(x) is not None:
        return 0.0
    v = value(x)
    dtype = np.result_type(v)
    if dtype.kind != "f":
        dtype = np.dtype(np.float64)
    out = np.zeros(np.shape(v), dtype)
    return out if isinstance(v, np.ndarray) else out[()]


def _print_sign(node, args):
    if node.aval.py is not None:  # a Python number: sign as the difference of two booleans
        x = args[0].at(PREC_COMPARE + 1)
        return Expr(f"({x} > 0) - ({x} < 0)", PREC_ADD)
    return Expr(f"np.sign({args[0].text})")


def _py_sign(x):
    return (x > 0) - (x < 0)


# sign is locally constant; abs, fabs and the kink rules use it (sign(0) = 0).
sign = defop("sign", dual(_py_sign, np.sign), _print_sign, nondiff=True,
             sympy=lambda x: sp.sign(x), binds=(np.sign,), elementwise=True)


# --- where: the one select every rule and adapter builds on ----------------------------------


def _where_impl(cond, a, b):
    if is_python_scalar(cond) and is_python_scalar(a) and is_python_scalar(b):
        return a if cond else b
    return np.where(cond, a, b)


def _print_where(node, args):
    c, a, b = args
    if node.aval.py is not None:  # Python numbers: Python's own conditional expression
        return Expr(f"{a.at(PREC_COND + 1)} if {c.at(PREC_COND + 1)} else {b.at(PREC_COND)}",
                    PREC_COND)
    return Expr(f"np.where({c.text}, {a.text}, {b.text})")


def _sym_where(cond, a, b):
    if isinstance(cond, bool | np.bool_):
        return a if cond else b
    return sp.Piecewise((a, _truth(cond)), (b, True))


_MASK3 = np.array([True, False, True])

# The condition is a boolean (a mask): it gets no gradient. The branch not taken gets zeros,
# so a rule can hide a nan in it only if it also keeps the nan out of that branch's *input*
# (the "double where": where(c, 0, f(where(c, 1, x)))), or the nan comes back at order 2.
_where = defop(
    "where", _where_impl, _print_where,
    vjp=(None,
         lambda g, ans, c, a, b: where(c, g, 0.0),
         lambda g, ans, c, a, b: where(c, 0.0, g)),
    sympy=_sym_where,
    domain=Domain((REALS,), cases=(
        ((_MASK3, (3,), (3,)), {}),
        ((np.array([[True], [False]]), (3,), (2, 3)), {}),
        ((np.array(True), (), (3,)), {}),
        ((_MASK3, "py", (3,)), {}),
    )),
    rule_text=("no gradient (a condition)", "the cotangent where the condition holds, else 0",
               "the cotangent where the condition fails, else 0"),
    elementwise=True)


def where(cond, a, b):
    """``np.where(cond, a, b)`` as a builder (``cond`` a bool array or tracer, no gradient).
    On Python numbers it is ``a if cond else b``, an int branch made a float when the other
    branch is one, so the result's type never depends on the data."""
    ka, kb = _py_kind(a), _py_kind(b)
    if _py_kind(cond) is not None and ka is not None and kb is not None and ka is not kb:
        if ka is float:
            b = _to_float(b)
        elif kb is float:
            a = _to_float(a)
    return _where(cond, a, b)


def _to_float(x):
    if is_python_scalar(x):
        return float(x)
    return OPS["cast"](x, dtype="float")


# --- booleans: locally constant, no gradient -----------------------------------------------


def _truth(x):
    """A value as sympy sees it in a boolean context."""
    if isinstance(x, bool | np.bool_):
        return sp.true if x else sp.false
    if isinstance(x, sp.Expr) or not isinstance(x, sp.Basic):  # a number (a Symbol too)
        return sp.Ne(x, 0)
    return x  # a relational or a boolean already


def _print_logical(np_name, symbol, prec):
    def print_logical(node, args):
        if node.aval.py is None:
            return Expr(f"np.{np_name}({', '.join(a.text for a in args)})")
        kinds = [r.aval.py for r in node.inputs] or [None] * len(args)
        parts = [a.at(prec + 1) if kind is bool else f"bool({a.text})"
                 for a, kind in zip(args, kinds, strict=True)]
        if len(parts) == 1:
            return Expr(f"{symbol} {parts[0]}", prec)
        return Expr(f"{parts[0]} {symbol} {parts[1]}", prec)

    return print_logical


def _py_logical(fn):
    def impl(*xs):
        if all(is_python_scalar(x) for x in xs):
            return fn(*(bool(x) for x in xs))
        return None

    return impl


def _logical(name, np_fn, py_fn, symbol, prec, sym):
    py = _py_logical(py_fn)

    def impl(*xs):
        out = py(*xs)
        return np_fn(*xs) if out is None else out

    impl.__name__ = name
    return defop(name, impl, _print_logical(name, symbol, prec), nondiff=True, sympy=sym,
                 binds=(np_fn,), elementwise=True)


logical_and = _logical("logical_and", np.logical_and, lambda a, b: a and b, "and", PREC_AND,
                       lambda x, y: sp.And(_truth(x), _truth(y)))
logical_or = _logical("logical_or", np.logical_or, lambda a, b: a or b, "or", PREC_OR,
                      lambda x, y: sp.Or(_truth(x), _truth(y)))
logical_xor = _logical("logical_xor", np.logical_xor, lambda a, b: a != b, "!=", PREC_COMPARE,
                       lambda x, y: sp.Xor(_truth(x), _truth(y)))
logical_not = _logical("logical_not", np.logical_not, lambda a: not a, "not", PREC_NOT,
                       lambda x: sp.Not(_truth(x)))


def _bool_test(name, math_fn, np_fn, sym):
    binds = tuple(f for f in (math_fn, np_fn) if f is not None)
    return defop(name, dual(math_fn, np_fn), call(name, name), nondiff=True, sympy=sym,
                 binds=binds, elementwise=True)


# Real numbers are finite and never nan in sympy: the meanings at the points tests sample.
isfinite = _bool_test("isfinite", math.isfinite, np.isfinite, lambda x: sp.true)
isnan = _bool_test("isnan", math.isnan, np.isnan, lambda x: sp.false)
isinf = _bool_test("isinf", math.isinf, np.isinf, lambda x: sp.false)


_CLOSE = {"rtol": 1e-05, "atol": 1e-08}


def _print_isclose(node, args):
    parts = [args[0].text, args[1].text]
    parts += [f"{key}={node.attrs[key]!r}" for key, default in _CLOSE.items()
              if node.attrs.get(key, default) != default]
    if node.attrs.get("equal_nan"):
        parts.append("equal_nan=True")
    return Expr(f"np.isclose({', '.join(parts)})")


# |a - b| <= atol + rtol * |b|, NumPy's test (not symmetric in a and b, unlike math.isclose)
isclose = defop(
    "isclose",
    lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: np.isclose(
        a, b, rtol=rtol, atol=atol, equal_nan=equal_nan),
    _print_isclose, nondiff=True, elementwise=True,
    sympy=lambda a, b, rtol=1e-05, atol=1e-08, equal_nan=False: (
        sp.Abs(a - b) <= atol + rtol * sp.Abs(b)),
    xp="np.isclose has no array-API form (the standard has no isclose)")


def _print_signbit(node, args):
    if node.aval.py is not None:  # math has no signbit: the sign copied onto 1.0
        return Expr(f"math.copysign(1.0, {args[0].text}) < 0", PREC_COMPARE)
    return Expr(f"np.signbit({args[0].text})")


signbit = defop("signbit", dual(lambda x: math.copysign(1.0, x) < 0, np.signbit),
                _print_signbit, nondiff=True, sympy=lambda x: x < 0, binds=(np.signbit,),
                elementwise=True)


# --- unary functions -------------------------------------------------------------------------


def _sinc_vjp(g, ans, x):
    """sinc'(u) = (cos(pi u) - sinc(u)) / u, and 0 at u = 0, where it is computed as
    u * (-pi**2 / 3): the same value with sinc's second derivative at 0 as its slope."""
    zero = x == 0
    safe = where(zero, 1.0, x)
    slope = (cos(math.pi * safe) - sinc(safe)) / safe
    return g * where(zero, x * (-math.pi ** 2 / 3), slope)


def _sym_cbrt(x):  # the real cube root, which sympy's x ** (1/3) is not for x < 0
    third = sp.Rational(1, 3)
    return sp.Piecewise((x ** third, x >= 0), (-((-x) ** third), True))


def _sym_sinc(x):
    return sp.sin(sp.pi * x) / (sp.pi * x)


# fmt: off
sin = _unary("sin", math.sin, np.sin, lambda g, ans, x: g * cos(x), lambda x: sp.sin(x),
             REALS, "d sin(u)/du = cos(u)")
cos = _unary("cos", math.cos, np.cos, lambda g, ans, x: -g * sin(x), lambda x: sp.cos(x),
             REALS, "d cos(u)/du = -sin(u)")
tan = _unary("tan", math.tan, np.tan, lambda g, ans, x: g * (1 + ans * ans),
             lambda x: sp.tan(x), SMALL, "d tan(u)/du = 1 + tan(u) ** 2")
asin = _unary("asin", math.asin, np.arcsin, lambda g, ans, x: g / sqrt(1 - x * x),
              lambda x: sp.asin(x), UNIT, "d asin(u)/du = 1 / sqrt(1 - u * u)",
              np_name="arcsin")
acos = _unary("acos", math.acos, np.arccos, lambda g, ans, x: -g / sqrt(1 - x * x),
              lambda x: sp.acos(x), UNIT, "d acos(u)/du = -1 / sqrt(1 - u * u)",
              np_name="arccos")
atan = _unary("atan", math.atan, np.arctan, lambda g, ans, x: g / (1 + x * x),
              lambda x: sp.atan(x), REALS, "d atan(u)/du = 1 / (1 + u * u)",
              np_name="arctan")
sinh = _unary("sinh", math.sinh, np.sinh, lambda g, ans, x: g * cosh(x),
              lambda x: sp.sinh(x), REALS, "d sinh(u)/du = cosh(u)")
cosh = _unary("cosh", math.cosh, np.cosh, lambda g, ans, x: g * sinh(x),
              lambda x: sp.cosh(x), REALS, "d cosh(u)/du = sinh(u)")
tanh = _unary("tanh", math.tanh, np.tanh, lambda g, ans, x: g * (1 - ans * ans),
              lambda x: sp.tanh(x), REALS, "d tanh(u)/du = 1 - tanh(u) ** 2")
asinh = _unary("asinh", math.asinh, np.arcsinh, lambda g, ans, x: g / sqrt(x * x + 1),
               lambda x: sp.asinh(x), REALS, "d asinh(u)/du = 1 / sqrt(u * u + 1)",
               np_name="arcsinh")
acosh = _unary("acosh", math.acosh, np.arccosh, lambda g, ans, x: g / sqrt(x * x - 1),
               lambda x: sp.acosh(x), (1.2, 3.0), "d acosh(u)/du = 1 / sqrt(u * u - 1)",
               np_name="arccosh")
atanh = _unary("atanh", math.atanh, np.arctanh, lambda g, ans, x: g / (1 - x * x),
               lambda x: sp.atanh(x), UNIT, "d atanh(u)/du = 1 / (1 - u * u)",
               np_name="arctanh")
exp = _unary("exp", math.exp, np.exp, lambda g, ans, x: g * ans, lambda x: sp.exp(x),
             REALS, "d exp(u)/du = exp(u)")
exp2 = _unary("exp2", math.exp2, np.exp2, lambda g, ans, x: g * ans * LN2,
              lambda x: 2 ** x, REALS, "d exp2(u)/du = exp2(u) * log(2)")
expm1 = _unary("expm1", math.expm1, np.expm1, lambda g, ans, x: g * (ans + 1),
               lambda x: sp.exp(x) - 1, REALS, "d expm1(u)/du = exp(u)")
log = _unary("log", math.log, np.log, lambda g, ans, x: g / x, lambda x: sp.log(x),
             POSITIVE, "d log(u)/du = 1 / u")
log1p = _unary("log1p", math.log1p, np.log1p, lambda g, ans, x: g / (1 + x),
               lambda x: sp.log(1 + x), (-0.8, 3.0), "d log1p(u)/du = 1 / (1 + u)")
log2 = _unary("log2", math.log2, np.log2, lambda g, ans, x: g / (x * LN2),
              lambda x: sp.log(x, 2), POSITIVE, "d log2(u)/du = 1 / (u * log(2))")
log10 = _unary("log10", math.log10, np.log10, lambda g, ans, x: g / (x * math.log(10)),
               lambda x: sp.log(x, 10), POSITIVE, "d log10(u)/du = 1 / (u * log(10))")
sqrt = _unary("sqrt", math.sqrt, np.sqrt, lambda g, ans, x: g / (2 * ans),
              lambda x: sp.sqrt(x), POSITIVE, "d sqrt(u)/du = 1 / (2 * sqrt(u))")
cbrt = _unary("cbrt", math.cbrt, np.cbrt, lambda g, ans, x: g / (3 * (ans * ans)),
              lambda x: _sym_cbrt(x), REALS,
              "d cbrt(u)/du = 1 / (3 * cbrt(u) ** 2)", away_from=(0.0,))
fabs = _unary("fabs", math.fabs, np.fabs, lambda g, ans, x: g * sign(x),
              lambda x: sp.Abs(x), REALS, "d fabs(u)/du = sign(u) (0 at 0)", away_from=(0.0,))
square = _unary("square", None, np.square, lambda g, ans, x: g * (2 * x),
                lambda x: x ** 2, REALS, "d square(u)/du = 2 * u")
sinc = _unary("sinc", None, np.sinc, _sinc_vjp, _sym_sinc, REALS,
              "d sinc(u)/du = (cos(pi * u) - sinc(u)) / u, 0 at 0", away_from=(0.0,))
deg2rad = _unary("deg2rad", math.radians, np.deg2rad, lambda g, ans, x: g * (math.pi / 180),
                 lambda x: x * sp.pi / 180, REALS, "d deg2rad(u)/du = pi / 180",
                 math_name="radians")
rad2deg = _unary("rad2deg", math.degrees, np.rad2deg, lambda g, ans, x: g * (180 / math.pi),
                 lambda x: x * 180 / sp.pi, REALS, "d rad2deg(u)/du = 180 / pi",
                 math_name="degrees")
# fmt: on

_SQRT_PI = math.sqrt(math.pi)


def _math_only(name, fn, rule, sym, text):
    """A row for a math function NumPy has no ufunc for: Python floats only."""
    return defop(name, fn, call(name, name), vjp=(rule,), sympy=sym,
                 domain=Domain((SMALL,), cases=((("py",), {}),)), binds=(fn,),
                 rule_text=(text,))


erf = _math_only("erf", math.erf, lambda g, ans, x: g * (2 / _SQRT_PI) * exp(-(x * x)),
                 lambda x: sp.erf(x), "d erf(u)/du = 2 / sqrt(pi) * exp(-u * u)")
erfc = _math_only("erfc", math.erfc, lambda g, ans, x: g * (-2 / _SQRT_PI) * exp(-(x * x)),
                  lambda x: sp.erfc(x), "d erfc(u)/du = -2 / sqrt(pi) * exp(-u * u)")


def _print_nan_to_num(node, args):
    parts = [args[0].text]
    for key in ("nan", "posinf", "neginf"):
        v = node.attrs.get(key)
        if v is not None and not (key == "nan" and v == 0.0):
            parts.append(f"{key}={literal(v).text}")
    return Expr(f"np.nan_to_num({', '.join(parts)})")


nan_to_num = defop(
    "nan_to_num",
    lambda x, nan=0.0, posinf=None, neginf=None: np.nan_to_num(
        x, nan=nan, posinf=posinf, neginf=neginf),
    _print_nan_to_num,
    vjp=(lambda g, ans, x, **_: where(isfinite(x), g, 0.0),),
    sympy=lambda x, **_: x, domain=Domain((REALS,)),
    rule_text=("1 where u is finite, 0 where nan or inf was replaced",), elementwise=True)


# --- binary functions ------------------------------------------------------------------------


def _binary(name, math_fn, np_fn, rules, sym, bounds, texts, np_name=None, **kw):
    binds = tuple(f for f in (math_fn, np_fn) if f is not None)
    return defop(name, dual(math_fn or np_fn, np_fn),
                 call(name if math_fn is not None else None, np_name or name), vjp=rules,
                 sympy=sym, domain=Domain(bounds, **kw), binds=binds, rule_text=texts,
                 elementwise=True)


def _hypot_vjp(g, ans, x, y):
    return g * x / where(ans == 0, 1.0, ans)  # 0 at the origin, like abs


atan2 = _binary(
    "atan2", math.atan2, np.arctan2,
    (lambda g, ans, y, x: g * x / (x * x + y * y),
     lambda g, ans, y, x: -g * y / (x * x + y * y)),
    lambda y, x: sp.atan2(y, x), ((0.3, 3.0), (0.3, 3.0)),
    ("d atan2(u, v)/du = v / (u * u + v * v)", "d atan2(u, v)/dv = -u / (u * u + v * v)"),
    np_name="arctan2")
hypot = _binary(
    "hypot", math.hypot, np.hypot,
    (_hypot_vjp, lambda g, ans, x, y: _hypot_vjp(g, ans, y, x)),
    lambda x, y: sp.sqrt(x * x + y * y), (REALS, REALS),
    ("d hypot(u, v)/du = u / hypot(u, v) (0 at the origin)",
     "d hypot(u, v)/dv = v / hypot(u, v) (0 at the origin)"),
    away_from=(0.0,))
copysign = _binary(
    "copysign", math.copysign, np.copysign,
    (lambda g, ans, x, y: g * sign(x) * copysign(1.0, y),
     lambda g, ans, x, y: zeros_like(y)),
    lambda x, y: sp.Piecewise((sp.Abs(x), y >= 0), (-sp.Abs(x), True)), (REALS, REALS),
    ("d copysign(u, v)/du = sign(u) * copysign(1, v) (0 at u = 0)",
     "d copysign(u, v)/dv = 0 (locally constant)"),
    away_from=(0.0,))


def _sigmoid(d):
    """``1 / (1 + exp(-d))`` with one exp that never overflows: ``exp(-|d|)``. The rule of
    logaddexp reads this and not its own result, so where only the gradient is asked for the
    forward logaddexp (dearer than an exp) is never computed. ``-|d|`` is a select on the
    same condition as the quotient, not abs: abs's kink at 0 would give the second derivative
    there as 0, not sigmoid's 1/4."""
    right = d >= 0
    small = hinted(exp(where(right, -d, d)), "exp_neg_abs")  # exp(-|d|)
    return where(right, 1.0, small) / (1.0 + small)


logaddexp = _binary(
    "logaddexp", None, np.logaddexp,
    (lambda g, ans, x, y: g * _sigmoid(x - y), lambda g, ans, x, y: g * _sigmoid(y - x)),
    lambda x, y: sp.log(sp.exp(x) + sp.exp(y)), (REALS, REALS),
    ("d logaddexp(u, v)/du = sigmoid(u - v)", "d logaddexp(u, v)/dv = sigmoid(v - u)"))
logaddexp2 = _binary(
    "logaddexp2", None, np.logaddexp2,
    (lambda g, ans, x, y: g * _sigmoid((x - y) * LN2),
     lambda g, ans, x, y: g * _sigmoid((y - x) * LN2)),
    lambda x, y: sp.log(2 ** x + 2 ** y, 2), (REALS, REALS),
    ("d logaddexp2(u, v)/du = sigmoid((u - v) * log(2))",
     "d logaddexp2(u, v)/dv = sigmoid((v - u) * log(2))"))
heaviside = _binary(
    "heaviside", None, np.heaviside,
    (lambda g, ans, x, h0: zeros_like(x), lambda g, ans, x, h0: where(x == 0, g, 0.0)),
    lambda x, h0: sp.Piecewise((0, x < 0), (h0, sp.Eq(x, 0)), (1, True)), (REALS, REALS),
    ("0 (locally constant)", "the cotangent where u == 0, else 0"), away_from=(0.0,))


def _sym_trunc(u):
    """Rounding toward zero, with derivative 0 between the jumps (see locally_constant_floor)."""
    return sp.Piecewise((locally_constant_floor(u), u >= 0), (-locally_constant_floor(-u), True))


# x mod y toward zero (C's fmod): x - trunc(x / y) * y, slope 1 in x, -trunc(x / y) in y.
fmod = _binary(
    "fmod", math.fmod, np.fmod,
    (lambda g, ans, x, y: g, lambda g, ans, x, y: -g * OPS["trunc"](x / y)),
    lambda x, y: x - y * _sym_trunc(x / y),
    ((0.3, 2.7), (1.1, 1.4)),
    ("d fmod(u, v)/du = 1", "d fmod(u, v)/dv = -trunc(u / v)"))


# --- clip ------------------------------------------------------------------------------------


def _clip_impl(x, lo, hi):
    if is_python_scalar(x) and is_python_scalar(lo) and is_python_scalar(hi):
        return min(max(x, lo), hi)
    return np.clip(x, lo, hi)


def _print_clip(node, args):
    x, lo, hi = (a.text for a in args)
    if node.aval.py is not None:
        return Expr(f"min(max({x}, {lo}), {hi})")
    return Expr(f"np.clip({x}, {lo}, {hi})")


# np.clip(u, lo, hi) is minimum(maximum(u, lo), hi): each bound binds where it wins, and u
# keeps the cotangent at the bounds themselves (ties go to u, as in JAX).
clip = defop(
    "clip", _clip_impl, _print_clip,
    vjp=(lambda g, ans, x, lo, hi: where(logical_and(lo <= x, x <= hi), g, 0.0),
         lambda g, ans, x, lo, hi: where(logical_and(x < lo, lo <= hi), g, 0.0),
         lambda g, ans, x, lo, hi: where(logical_or(hi < x, hi < lo), g, 0.0)),
    sympy=lambda x, lo, hi: sp.Min(sp.Max(x, lo), hi),
    domain=Domain((REALS,), cases=(
        (((5,), (), ()), {}),
        (((2, 3), (3,), (2, 1)), {}),
        (((4,), (4,), (4,)), {}),
        (("py", "py", "py"), {}),
    )),
    rule_text=("1 where lo <= u <= hi (bounds included), else 0",
               "1 where u < lo (and lo <= hi), else 0", "1 where u > hi or lo > hi, else 0"),
    elementwise=True)


# --- NumPy's spellings -----------------------------------------------------------------------

_NO = np._NoValue  # NumPy's "argument not given"


def _numpy_kinds(*xs):
    """NumPy computes on NumPy scalars: Python numbers (traced or not) become them when no
    array is involved, so the result has NumPy's type (np.where(c, 1.0, x) is a 0-d array)."""
    return _numpy_scalars(xs)




def _as_condition(c):
    c = as_array(c)
    if np.result_type(value(c)) == np.bool_:
        return c
    if _is_traced(c):
        return c != 0
    return np.asarray(c) != 0


def _np_where(condition, x=_NO, y=_NO, /):
    if x is _NO and y is _NO:  # np.where(c) is np.nonzero(c)
        handler = BOUND.get(np.nonzero)
        if handler is None:
            refuse("np.where(condition) with one argument has no rule in gradgen",
                   "use np.where(condition, x, y), or boolean indexing x[condition]")
        return handler(condition)
    if x is _NO or y is _NO:
        raise ValueError("either both or neither of x and y should be given")
    condition, x, y = _numpy_kinds(_as_condition(condition), as_array(x), as_array(y))
    return where(condition, x, y)


def _np_select(condlist, choicelist, default=0):
    if not isinstance(condlist, list | tuple) or not isinstance(choicelist, list | tuple):
        refuse("np.select with array condlist/choicelist has no rule in gradgen",
               "pass lists of conditions and choices")
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if not condlist:
        raise ValueError("select with an empty condition list is not possible")
    conds = [as_array(c) for c in condlist]
    for i, c in enumerate(conds):
        if np.result_type(value(c)) != np.bool_:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    # the first condition that holds wins: the last where is the outermost
    out = as_array(default)
    shape = np.broadcast_shapes(*(np.shape(value(v)) for v in (*conds, *choicelist)),
                                np.shape(value(out)))
    for cond, choice in reversed(list(zip(conds, choicelist, strict=True))):
        out = where(*_numpy_kinds(cond, as_array(choice), out))
    if np.shape(value(out)) != shape:  # NumPy's result has the shape of every input
        out = BOUND[np.broadcast_to](out, shape)
    return out


def _np_piecewise(x, condlist, funclist, *args, **kw):
    """np.piecewise as NumPy runs it: each function sees only the entries its condition
    selects (x[cond]) and its results are written there (y[cond] = ...), later conditions
    over earlier ones, 0 where none holds. A function is never evaluated outside its piece,
    so a branch that is undefined there (np.sqrt of a negative) cannot put a nan into the
    gradient the way np.where's unselected branch does."""
    x = as_array(x)
    x_shape = np.shape(value(x))
    if isinstance(condlist, list | tuple) and condlist and all(
            np.ndim(value(c)) == 0 for c in condlist) and len(x_shape) > 0:
        condlist = [condlist]  # one condition given as a list of bools (NumPy's reading)
    if not isinstance(condlist, list | tuple):
        condlist = [condlist]
    conds = [as_array(c) for c in condlist]
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    if len(funclist) == len(conds) + 1:  # the last one: where no condition holds
        otherwise = conds[0]
        for c in conds[1:]:
            otherwise = otherwise | c
        conds.append(~otherwise if _is_traced(otherwise) else ~np.asarray(otherwise))
    scalar = len(x_shape) == 0
    if scalar:  # NumPy reads a 0-d x and its conditions as one-entry arrays
        x = np.reshape(x, (1,))
        conds = [np.reshape(c, (1,)) for c in conds]
    # the result is a new array of x's shape and dtype, traced once a piece is written in
    y = new_array(np.zeros(np.shape(value(x)), np.result_type(value(x))))
    for cond, func in zip(conds, funclist, strict=False):
        if not callable(func):
            y[cond] = func
            continue
        piece = x[cond]
        if np.size(value(piece)):
            y[cond] = func(piece, *args, **kw)
    return np.reshape(y, ()) if scalar else y


def _np_polyval(p, x):
    """np.polyval by Horner's rule, y = y * x + p[k] from the highest power down, so the
    gradient reaches both p and x. NumPy starts from y = 0 * x + p[0]; from p[0] itself the
    values are the same for every finite x and the module reads as a person writes it."""
    if isinstance(p, list | tuple):
        coefficients = list(p)
    else:
        p_shape = np.shape(value(p))
        if len(p_shape) != 1:
            refuse("np.polyval with coefficients that are not one-dimensional has no gradient "
                   "rule in gradgen", "pass a 1-D array or list of coefficients")
        coefficients = [p[k] for k in range(p_shape[0])]
    x = as_array(x)
    if len(coefficients) < 2:  # NumPy's 0 * x + p[0]: a constant polynomial has x's shape
        zeros = zeros_like(x) if not isinstance(value(x), np.generic) else np.zeros(())
        return zeros * x + coefficients[0] if coefficients else zeros
    y = coefficients[0] * x + coefficients[1]
    for c in coefficients[2:]:
        y = y * x + c
    return y


def _close_args(name, rtol, atol, equal_nan):
    for key, v in (("rtol", rtol), ("atol", atol)):
        if _is_traced(v) or np.ndim(v):
            refuse(f"{name} with a traced or array {key}= has no rule in gradgen",
                   f"pass {key} as a number")
    return {"rtol": float(rtol), "atol": float(atol), "equal_nan": bool(equal_nan)}


def _np_isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = _numpy_kinds(as_array(a), as_array(b))
    return isclose(a, b, **_close_args("np.isclose", rtol, atol, equal_nan))


def _np_allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """A Python bool, as NumPy gives: the trace takes it as a guard of its path."""
    return bool(np.all(_np_isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def _np_clip(a, a_min=_NO, a_max=_NO, out=None, *, min=_NO, max=_NO, **kwargs):
    if out is not None or kwargs:
        given = ["out"] if out is not None else []
        refuse(f"np.clip with {', '.join(given + list(kwargs))}= has no gradient rule in "
               "gradgen", "call np.clip(x, lo, hi) and assign the result")
    lo = min if a_min is _NO else a_min
    hi = max if a_max is _NO else a_max
    lo, hi = (None if v is _NO else as_array(v) for v in (lo, hi))
    a = as_array(a)
    if lo is None and hi is None:
        return OPS["copy"](a) if isinstance(value(a), np.ndarray) else a
    if lo is None:
        a, hi = _numpy_kinds(a, hi)
        return OPS["minimum"](a, hi)
    if hi is None:
        a, lo = _numpy_kinds(a, lo)
        return OPS["maximum"](a, lo)
    return clip(*_numpy_kinds(a, lo, hi))


def _np_nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    if not copy:
        refuse("np.nan_to_num(x, copy=False) writes into x: it has no gradient rule in gradgen",
               "use x = np.nan_to_num(x)")
    for key, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if _is_traced(v) or isinstance(v, np.ndarray) and v.ndim:
            refuse(f"np.nan_to_num with a traced or array {key}= has no gradient rule in "
                   "gradgen", "use np.where(np.isnan(x), value, x)")
    attrs = {k: float(v) for k, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf))
             if v is not None and not (k == "nan" and v == 0.0)}
    (x,) = _numpy_kinds(as_array(x))
    return nan_to_num(x, **attrs)


route(np.where, _np_where, "where")
route(np.select, _np_select, "where", called="np.select")
route(np.piecewise, _np_piecewise, "getitem", "setitem")
route(np.polyval, _np_polyval, "mul", "add")
route(np.isclose, _np_isclose, "isclose")
route(np.allclose, _np_allclose, "isclose", "all")
route(np.clip, _np_clip, "clip", "maximum", "minimum")
route(np.nan_to_num, _np_nan_to_num, "nan_to_num")
