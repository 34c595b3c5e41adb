"""Arithmetic operators and comparisons: the rows for + - * / ** and friends."""

from __future__ import annotations

import math
import operator

import numpy as np

from ._sym import locally_constant_floor, sp
from .elementwise import isnan, log, logical_and, logical_or, sign, where, zeros_like
from .registry import (
    PREC_ADD,
    PREC_COMPARE,
    PREC_MUL,
    PREC_POW,
    Domain,
    Expr,
    call,
    defop,
    dual,
    infix,
    prefix,
)

REALS = (-3.0, 3.0)
POSITIVE = (0.2, 3.0)

add = defop("add", operator.add, infix("+", PREC_ADD),
            vjp=(lambda g, ans, x, y: g, lambda g, ans, x, y: g),
            sympy=operator.add, domain=Domain((REALS, REALS)),
            rule_text=("d(u + v)/du = 1", "d(u + v)/dv = 1"), elementwise=True)

sub = defop("sub", operator.sub, infix("-", PREC_ADD),
            vjp=(lambda g, ans, x, y: g, lambda g, ans, x, y: -g),
            sympy=operator.sub, domain=Domain((REALS, REALS)),
            rule_text=("d(u - v)/du = 1", "d(u - v)/dv = -1"), elementwise=True)

mul = defop("mul", operator.mul, infix("*", PREC_MUL),
            vjp=(lambda g, ans, x, y: g * y, lambda g, ans, x, y: g * x),
            sympy=operator.mul, domain=Domain((REALS, REALS)),
            rule_text=("d(u * v)/du = v", "d(u * v)/dv = u"), elementwise=True)

div = defop("div", operator.truediv, infix("/", PREC_MUL),
            vjp=(lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * ans / y),
            sympy=operator.truediv, domain=Domain((REALS, REALS), away_from=(0.0,)),
            rule_text=("d(u / v)/du = 1 / v", "d(u / v)/dv = -(u / v) / v"), elementwise=True)

def _pow_dx(g, ans, x, y):
    """d(u ** v)/du = v * u ** (v - 1), and 0 where v == 0 (also at u == 0, where the formula
    reads 0 * inf), as in JAX and autograd, right at every order."""
    if not _is_traced(y):  # a constant exponent: decide with its value, no select needed
        if type(y) in (int, float) or np.ndim(y) == 0:  # (a Python number: no NumPy call)
            if y == 0:
                return zeros_like(x)
            return g * y * x ** (y - 1)
        y = np.asarray(y)
        if not (y == 0).any():
            return g * y * x ** (y - 1)
        return g * y * x ** np.where(y == 0, 1, y - 1)  # y * u ** 1 = 0 where y == 0
    # A traced exponent: the select hides 0 * inf where u == 0 == v, and the inner one keeps
    # it out of the branch's input too (the double where), so no nan leaks into order 2.
    both_zero = logical_and(y == 0, x == 0)
    safe_x = where(both_zero, 1.0, x)
    return where(both_zero, 0.0, g * y * safe_x ** (y - 1))


def _pow_dy(g, ans, x, y):
    """d(u ** v)/dv = u ** v * log(u), and 0 at u == 0 (log(u) read as log(1), as in JAX)."""
    if not _is_traced(x):
        xv = np.asarray(x)
        if not (xv == 0).any():
            return g * ans * log(x)
        safe = np.where(xv == 0, 1, x) if np.ndim(x) else (1.0 if x == 0 else x)
        return g * ans * log(safe)
    return g * ans * log(where(x == 0, 1.0, x))


def _is_traced(x) -> bool:
    return getattr(x, "aval", None) is not None


# Conventions: d(u ** 0)/du = 0 everywhere, u = 0 included (JAX, autograd); d(u ** v)/dv = 0
# at u = 0. u ** v for u < 0 and a fractional v is nan, and so is its derivative.
pow_ = defop("pow", operator.pow, infix("**", PREC_POW, right_assoc=True),
             vjp=(_pow_dx, _pow_dy),
             sympy=operator.pow, domain=Domain((POSITIVE, (-2.0, 2.0))),
             rule_text=("d(u ** v)/du = v * u ** (v - 1) (0 where v == 0)",
                        "d(u ** v)/dv = u ** v * log(u) (0 at u == 0)"),
             elementwise=True)

# math.pow always returns a float; otherwise it is `**`.
math_pow = defop("math_pow", dual(math.pow, np.power), call("pow", "power"),
                 vjp=(_pow_dx, _pow_dy),
                 sympy=operator.pow, domain=Domain((POSITIVE, (-2.0, 2.0))),
                 rule_text=("d pow(u, v)/du = v * u ** (v - 1) (0 where v == 0)",
                            "d pow(u, v)/dv = pow(u, v) * log(u) (0 at u == 0)"),
                 binds=(math.pow,), elementwise=True)

neg = defop("neg", operator.neg, prefix("-"), vjp=(lambda g, ans, x: -g,),
            sympy=operator.neg, domain=Domain((REALS,)), rule_text=("d(-u)/du = -1",),
            elementwise=True)

# Kink convention: the derivative of abs at 0 is sign(0) = 0 (as in JAX and PyTorch).
abs_ = defop("abs", dual(abs, np.abs), lambda node, args: _abs_printer(node, args),
             vjp=(lambda g, ans, x: g * sign(x),), sympy=lambda x: sp.Abs(x),
             domain=Domain((REALS,), away_from=(0.0,)), rule_text=("d|u|/du = sign(u)",),
             elementwise=True)


def _abs_printer(node, args):
    fn = "abs" if node.aval.py is not None else "np.abs"
    return Expr(f"{fn}({args[0].text})")


# x % y = x - floor(x / y) * y: slope 1 in x and -floor(x / y) in y between the jumps.
mod = defop("mod", operator.mod, infix("%", PREC_MUL),
            vjp=(lambda g, ans, x, y: g, lambda g, ans, x, y: -g * (x // y)),
            sympy=lambda x, y: x - y * locally_constant_floor(x / y),
            domain=Domain(((0.3, 2.7), (1.1, 1.4))),
            rule_text=("d(u % v)/du = 1", "d(u % v)/dv = -(u // v)"), elementwise=True)

# Locally constant ops: their derivative is zero wherever it exists (between the jumps); at a
# jump there is none, and gradgen passes zero there too (JAX and PyTorch do the same). np.fix
# reaches trunc, np.rint/np.round/np.around reach round (NumPy rounds halves to even).
_STEP = "locally constant: zero gradient (between its jumps, and 0 at them)"
floordiv = defop("floordiv", operator.floordiv, infix("//", PREC_MUL), nondiff=True,
                 sympy=lambda x, y: sp.floor(x / y), elementwise=True, rule_text=(_STEP,))
floor = defop("floor", dual(math.floor, np.floor), call("floor", "floor"), nondiff=True,
              sympy=lambda x: sp.floor(x), elementwise=True, rule_text=(_STEP,))
ceil = defop("ceil", dual(math.ceil, np.ceil), call("ceil", "ceil"), nondiff=True,
             sympy=lambda x: sp.ceiling(x), elementwise=True, rule_text=(_STEP,))
trunc = defop("trunc", dual(math.trunc, np.trunc), call("trunc", "trunc"), nondiff=True,
              sympy=lambda x: sp.sign(x) * sp.floor(sp.Abs(x)), elementwise=True,
              rule_text=(_STEP,))
round_ = defop("round", dual(round, np.round), lambda node, args: _round_printer(node, args),
               nondiff=True, sympy=lambda x: sp.floor(x + sp.Rational(1, 2)), elementwise=True,
               rule_text=(_STEP,))


def _round_printer(node, args):
    fn = "round" if node.aval.py is not None else "np.round"
    return Expr(f"{fn}({args[0].text})")


def _compare(name, fn, symbol, sym):
    def print_compare(node, args):
        # never let two comparisons print as a chained comparison
        return Expr(f"{args[0].at(PREC_COMPARE + 1)} {symbol} {args[1].at(PREC_COMPARE + 1)}",
                    PREC_COMPARE)

    return defop(name, fn, print_compare, nondiff=True, sympy=sym, elementwise=True)


lt = _compare("lt", operator.lt, "<", lambda x, y: x < y)
le = _compare("le", operator.le, "<=", lambda x, y: x <= y)
gt = _compare("gt", operator.gt, ">", lambda x, y: x > y)
ge = _compare("ge", operator.ge, ">=", lambda x, y: x >= y)
eq = _compare("eq", operator.eq, "==", lambda x, y: sp.Eq(x, y))
ne = _compare("ne", operator.ne, "!=", lambda x, y: sp.Ne(x, y))

# Kink convention for ties: the first argument takes the gradient (like builtin max(a, b)).
maximum = defop("maximum", np.maximum, call(None, "maximum"),
                vjp=(lambda g, ans, x, y: g * (x >= y), lambda g, ans, x, y: g * (x < y)),
                sympy=lambda x, y: sp.Max(x, y), domain=Domain((REALS, REALS)),
                rule_text=("d max(u, v)/du = [u >= v]", "d max(u, v)/dv = [u < v]"),
                elementwise=True)
minimum = defop("minimum", np.minimum, call(None, "minimum"),
                vjp=(lambda g, ans, x, y: g * (x <= y), lambda g, ans, x, y: g * (x > y)),
                sympy=lambda x, y: sp.Min(x, y), domain=Domain((REALS, REALS)),
                rule_text=("d min(u, v)/du = [u <= v]", "d min(u, v)/dv = [u > v]"),
                elementwise=True)


# fmax/fmin: maximum/minimum that ignore a nan argument (the other one is the result and
# gets the cotangent); a tie goes to the first argument, as for maximum/minimum.
def _fmax_first(x, y):
    return logical_or(x >= y, isnan(y))


def _fmin_first(x, y):
    return logical_or(x <= y, isnan(y))


fmax = defop("fmax", np.fmax, call(None, "fmax"),
             vjp=(lambda g, ans, x, y: where(_fmax_first(x, y), g, 0.0),
                  lambda g, ans, x, y: where(_fmax_first(x, y), 0.0, g)),
             sympy=lambda x, y: sp.Max(x, y), domain=Domain((REALS, REALS)), binds=(np.fmax,),
             rule_text=("d fmax(u, v)/du = [u >= v or v is nan]",
                        "d fmax(u, v)/dv = [u < v or u is nan, v is not]"),
             elementwise=True)
fmin = defop("fmin", np.fmin, call(None, "fmin"),
             vjp=(lambda g, ans, x, y: where(_fmin_first(x, y), g, 0.0),
                  lambda g, ans, x, y: where(_fmin_first(x, y), 0.0, g)),
             sympy=lambda x, y: sp.Min(x, y), domain=Domain((REALS, REALS)), binds=(np.fmin,),
             rule_text=("d fmin(u, v)/du = [u <= v or v is nan]",
                        "d fmin(u, v)/dv = [u > v or u is nan, v is not]"),
             elementwise=True)
