"""Elementwise math functions: one row each, the same op for ``math.f`` and ``np.f``."""

from __future__ import annotations

import math

import numpy as np

from ._sym import sp
from .registry import PREC_ADD, PREC_COMPARE, Domain, Expr, call, defop, dual

REALS = (-3.0, 3.0)
POSITIVE = (0.2, 3.0)
UNIT = (-0.9, 0.9)
SMALL = (-1.4, 1.4)  # tan: stay away from the poles at +-pi/2


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
exp = _unary("exp", math.exp, np.exp, lambda g, ans, x: g * ans, lambda x: sp.exp(x),
             REALS, "d exp(u)/du = exp(u)")
expm1 = _unary("expm1", math.expm1, np.expm1, lambda g, ans, x: g * (ans + 1),
               lambda x: sp.exp(x) - 1, REALS, "d expm1(u)/du = exp(u)")
log = _unary("log", math.log, np.log, lambda g, ans, x: g / x, lambda x: sp.log(x),
             POSITIVE, "d log(u)/du = 1 / u")
log1p = _unary("log1p", math.log1p, np.log1p, lambda g, ans, x: g / (1 + x),
               lambda x: sp.log(1 + x), (-0.8, 3.0), "d log1p(u)/du = 1 / (1 + u)")
log2 = _unary("log2", math.log2, np.log2, lambda g, ans, x: g / (x * math.log(2)),
              lambda x: sp.log(x, 2), POSITIVE, "d log2(u)/du = 1 / (u * log(2))")
log10 = _unary("log10", math.log10, np.log10, lambda g, ans, x: g / (x * math.log(10)),
               lambda x: sp.log(x, 10), POSITIVE, "d log10(u)/du = 1 / (u * log(10))")
sqrt = _unary("sqrt", math.sqrt, np.sqrt, lambda g, ans, x: g / (2 * ans),
              lambda x: sp.sqrt(x), POSITIVE, "d sqrt(u)/du = 1 / (2 * sqrt(u))")
fabs = _unary("fabs", math.fabs, np.fabs, lambda g, ans, x: g * sign(x),
              lambda x: sp.Abs(x), REALS, "d fabs(u)/du = sign(u)", away_from=(0.0,))
square = _unary("square", None, np.square, lambda g, ans, x: g * (2 * x),
                lambda x: x ** 2, REALS, "d square(u)/du = 2 * u")
# fmt: on


def _binary(name, math_fn, np_fn, rules, sym, bounds, texts, np_name=None, **kw):
    binds = tuple(f for f in (math_fn, np_fn) if f is not None)
    return defop(name, dual(math_fn, np_fn), call(name, np_name or name), vjp=rules,
                 sympy=sym, domain=Domain(bounds, **kw), binds=binds, rule_text=texts,
                 elementwise=True)


atan2 = _binary(
    "atan2", math.atan2, np.arctan2,
    (lambda g, ans, y, x: g * x / (x * x + y * y),
     lambda g, ans, y, x: -g * y / (x * x + y * y)),
    lambda y, x: sp.atan2(y, x), ((0.3, 3.0), (0.3, 3.0)),
    ("d atan2(u, v)/du = v / (u * u + v * v)", "d atan2(u, v)/dv = -u / (u * u + v * v)"),
    np_name="arctan2")
hypot = _binary(
    "hypot", math.hypot, np.hypot,
    (lambda g, ans, x, y: g * x / ans, lambda g, ans, x, y: g * y / ans),
    lambda x, y: sp.sqrt(x * x + y * y), (REALS, REALS),
    ("d hypot(u, v)/du = u / hypot(u, v)", "d hypot(u, v)/dv = v / hypot(u, v)"),
    away_from=(0.0,))
