"""Arithmetic operators and comparisons: the rows for + - * / ** and friends."""

from __future__ import annotations

import math
import operator

import numpy as np

from ._sym import locally_constant_floor, sp
from .elementwise import log, sign
from .registry import (
    PREC_ADD,
    PREC_COMPARE,
    PREC_MUL,
    PREC_POW,
    Domain,
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

pow_ = defop("pow", operator.pow, infix("**", PREC_POW, right_assoc=True),
             vjp=(lambda g, ans, x, y: g * y * x ** (y - 1),
                  lambda g, ans, x, y: g * ans * log(x)),
             sympy=operator.pow, domain=Domain((POSITIVE, (-2.0, 2.0))),
             rule_text=("d(u ** v)/du = v * u ** (v - 1)", "d(u ** v)/dv = u ** v * log(u)"),
             elementwise=True)

# math.pow always returns a float; otherwise it is `**`.
math_pow = defop("math_pow", dual(math.pow, np.power), call("pow", "power"),
                 vjp=(lambda g, ans, x, y: g * y * x ** (y - 1),
                      lambda g, ans, x, y: g * ans * log(x)),
                 sympy=operator.pow, domain=Domain((POSITIVE, (-2.0, 2.0))),
                 rule_text=("d pow(u, v)/du = v * u ** (v - 1)",
                            "d pow(u, v)/dv = pow(u, v) * log(u)"),
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
    from .registry import Expr

    fn = "abs" if node.aval.py is not None else "np.abs"
    return Expr(f"{fn}({args[0].text})")


# x % y = x - floor(x / y) * y: slope 1 in x and -floor(x / y) in y between the jumps.
mod = defop("mod", operator.mod, infix("%", PREC_MUL),
            vjp=(lambda g, ans, x, y: g, lambda g, ans, x, y: -g * (x // y)),
            sympy=lambda x, y: x - y * locally_constant_floor(x / y),
            domain=Domain(((0.3, 2.7), (1.1, 1.4))),
            rule_text=("d(u % v)/du = 1", "d(u % v)/dv = -(u // v)"), elementwise=True)

# Locally constant ops: their derivative is zero wherever it exists.
floordiv = defop("floordiv", operator.floordiv, infix("//", PREC_MUL), nondiff=True,
                 sympy=lambda x, y: sp.floor(x / y), elementwise=True)
floor = defop("floor", dual(math.floor, np.floor), call("floor", "floor"), nondiff=True,
              sympy=lambda x: sp.floor(x), elementwise=True)
ceil = defop("ceil", dual(math.ceil, np.ceil), call("ceil", "ceil"), nondiff=True,
             sympy=lambda x: sp.ceiling(x), elementwise=True)
trunc = defop("trunc", dual(math.trunc, np.trunc), call("trunc", "trunc"), nondiff=True,
              sympy=lambda x: sp.sign(x) * sp.floor(sp.Abs(x)), elementwise=True)
round_ = defop("round", dual(round, np.round), lambda node, args: _round_printer(node, args),
               nondiff=True, sympy=lambda x: sp.floor(x + sp.Rational(1, 2)), elementwise=True)


def _round_printer(node, args):
    from .registry import Expr

    fn = "round" if node.aval.py is not None else "np.round"
    return Expr(f"{fn}({args[0].text})")


def _compare(name, fn, symbol, sym):
    def print_compare(node, args):
        from .registry import Expr

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
