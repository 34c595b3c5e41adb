"""Reductions: the rows that reduce over axes (mean, prod, max, min, their nan forms, var,
std, the 2-norm), the cumulative ones (cumsum, cumprod), the index and count rows that have no
gradient (argmax, argsort, count_nonzero, any, all), and the adapters that bring NumPy's
spellings to them (np.average, np.ptp, np.median and np.linalg.norm's other orders are built
from rows).

Conventions at kinks, as in JAX:
- max/min (and nanmax/nanmin, the inf-norms, ptp): tied extremes share the cotangent equally.
- prod: the derivative is the product of the other entries, computed without dividing by a
  zero (one zero: the product of the others; two or more: 0), right at second order too.
- cumprod: the same without division; second derivatives are right but for one term (the
  second zero's slope in the first zero) when a slice holds two or more zeros.
- std and the 2-norm: at zero spread (a constant input, a zero vector) the gradient is nan,
  as d sqrt(u)/du is infinite at 0 (JAX gives nan too).
- nan forms: nan entries get a zero gradient; an all-nan slice gives zero gradient.
- median: np.sort's gradient (tied entries as np.argsort placed them) through the mean of
  the middle one or two entries.
- matrix norms ord=2, -2 and 'nuc' go through np.linalg.svd(..., compute_uv=False) (the
  linalg family's svdvals row: distinct nonzero singular values assumed).
"""

from __future__ import annotations

import numpy as np

from .. import abstract
from ._sym import extreme, sp
from .adapt import has_traced, normalize_axis, refuse
from .arith import abs_, eq, maximum
from .arrays import (
    _axis_text,
    _count,
    _kept_shape,
    _print_reduction,
    _unreduce,
    _value,
    broadcast_to,
    reduction,
    reshape,
    sum_,
    transpose,
)
from .core import cast, copy
from .index import getitem
from .registry import OPS, PREC_ATOM, Domain, Expr, defop, route, value_text

REALS = (-2.0, 2.0)
_NO = np._NoValue  # NumPy's "argument not given"

# Small cases (the sympy check runs on every one at order 1 and 2): everything, one axis with
# keepdims, two axes of a 3-d array, a vector, a Python float, a 0-d array. Adapters have
# already made axis a sorted tuple of non-negative ints (or None).
_CASES = (
    (((3, 4),), {"axis": None, "keepdims": False}),
    (((3, 4),), {"axis": (1,), "keepdims": True}),
    (((2, 3, 2),), {"axis": (0, 2), "keepdims": False}),
    (((4,),), {"axis": (0,), "keepdims": False}),
    (("py",), {"axis": None, "keepdims": False}),
    (((),), {"axis": None, "keepdims": True}),
)


def _shape(x) -> tuple[int, ...]:
    return tuple(np.shape(_value(x)))


def _dtype(x) -> str:
    return np.result_type(_value(x)).name


def _as_float(cond, like):
    """A traced condition as 1.0/0.0 in ``like``'s dtype (no upcast of float32)."""
    return cast(cond, dtype=_dtype(like))


def _keep(y, shape, axis, keepdims):
    """A reduced value (a cotangent or a result) shaped to broadcast against the input."""
    if axis is None or keepdims or _shape(y) == ():  # a 0-d value broadcasts as it is
        return y
    kept = _kept_shape(shape, axis)
    if _shape(y) == kept:
        return y
    return reshape(y, shape=kept)


# --- sympy meanings ----------------------------------------------------------------------


def _sym_reduce(fn, x, axis, keepdims):
    """``fn`` (a function of a list of entries) applied over ``axis`` of an object array."""
    x = np.asarray(x, dtype=object)
    axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))
    moved = moved.reshape([x.shape[i] for i in rest] + [-1])
    out = np.empty(moved.shape[:-1], dtype=object)
    for idx in np.ndindex(out.shape):
        out[idx] = fn(list(moved[idx]))
    if keepdims:
        out = out.reshape(_kept_shape(x.shape, axis))
    return out[()] if out.ndim == 0 else out


def _sym_map(fn, x):
    if isinstance(x, np.ndarray):
        return np.vectorize(fn, otypes=[object])(x) if x.ndim else fn(x[()])
    return fn(x)


def _sym_sum(xs):
    return sp.Add(*xs)


# --- printers ------------------------------------------------------------------------------


def _print_np(fn, keys=("axis", "keepdims"), defaults=None):
    """``fn(x, axis=..., ddof=..., keepdims=True)``: attributes printed when not default."""
    defaults = {"axis": None, "keepdims": False, "ddof": 0, **(defaults or {})}

    def print_(node, args):
        parts = [args[0].text]
        for key in keys:
            value = node.attrs.get(key, defaults.get(key))
            if key in defaults and value == defaults[key]:
                continue
            parts.append(f"{key}={_axis_text(value) if key == 'axis' else value_text(value)}")
        return Expr(f"{fn}({', '.join(parts)})")

    return print_


def _xp_reduction(fn, ddof_as=None):
    """The array API's spelling: ``xp.var(x, axis=..., correction=1)`` for NumPy's ``ddof``."""

    def print_(node, args, scope):
        parts = [args[0].text]
        if node.attrs.get("axis") is not None:
            parts.append(f"axis={_axis_text(node.attrs['axis'])}")
        if ddof_as and node.attrs.get("ddof", 0):
            parts.append(f"{ddof_as}={node.attrs['ddof']!r}")
        if node.attrs.get("keepdims"):
            parts.append("keepdims=True")
        return Expr(f"{fn}({', '.join(parts)})")

    return print_


def _xp_cumulative(fn):
    """``xp.cumulative_sum(x, axis=...)``; the reversed sum flips with ``xp.flip``."""

    def print_(node, args, scope):
        axis = node.attrs["axis"]
        if not node.attrs.get("reverse"):
            return Expr(f"xp.{fn}({args[0].text}, axis={axis})")
        flipped = f"xp.flip({args[0].text}, axis={axis})"
        return Expr(f"xp.flip(xp.{fn}({flipped}, axis={axis}), axis={axis})")

    return print_


# --- max and min: tied extremes share the cotangent equally (JAX's convention) --------------


def _extreme_vjp(floor_count=False):
    def rule(g, ans, x, axis=None, keepdims=False):
        shape = _shape(x)
        hit = _as_float(x == _keep(ans, shape, axis, keepdims), x)  # 1.0 at each extreme
        ties = sum_(hit, axis=axis, keepdims=True)
        if floor_count:  # an all-nan slice hits nothing: zero gradient, not 0 / 0
            ties = maximum(ties, 1)
        return _keep(g, shape, axis, keepdims) * hit / ties

    return rule


def _extreme_row(name, np_fn, sym, text, floor_count=False):
    return defop(
        name, lambda x, axis=None, keepdims=False: np_fn(x, axis=axis, keepdims=keepdims),
        _print_reduction(name),
        vjp=(_extreme_vjp(floor_count),),
        sympy=lambda x, axis=None, keepdims=False: _sym_reduce(lambda xs: sym(*xs), x, axis,
                                                              keepdims),
        domain=Domain((REALS,), cases=_CASES),
        rule_text=(text,), abstract=abstract.reduction)


_TIES = "(ties share it equally)"
max_ = _extreme_row("max", np.max, lambda *xs: extreme("max", *xs),
                    f"d max(u)/du = 1 at the maximum, 0 elsewhere {_TIES}")
min_ = _extreme_row("min", np.min, lambda *xs: extreme("min", *xs),
                    f"d min(u)/du = 1 at the minimum, 0 elsewhere {_TIES}")
nanmax = _extreme_row("nanmax", np.nanmax, lambda *xs: extreme("max", *xs),
                      f"d nanmax(u)/du = 1 at the maximum, 0 elsewhere and at nan {_TIES}",
                      floor_count=True)
nanmin = _extreme_row("nanmin", np.nanmin, lambda *xs: extreme("min", *xs),
                      f"d nanmin(u)/du = 1 at the minimum, 0 elsewhere and at nan {_TIES}",
                      floor_count=True)


# --- mean, nansum, nanmean ------------------------------------------------------------------

mean = defop(
    "mean", lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims),
    _print_reduction("mean"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False:
         _unreduce(g / _count(_shape(x), axis), _shape(x), axis, keepdims),),
    sympy=lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims)
    / _count(np.shape(x), axis),
    domain=Domain((REALS,), cases=_CASES),
    rule_text=("d mean(u)/du = 1 / n for every element",), abstract=abstract.reduction)


def _not_nan(x):
    return _as_float(eq(x, x), x)  # 1.0 where x is a number, 0.0 at nan


nansum = defop(
    "nansum", lambda x, axis=None, keepdims=False: np.nansum(x, axis=axis, keepdims=keepdims),
    _print_reduction("nansum"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False:
         _keep(g, _shape(x), axis, keepdims) * _not_nan(x),),
    sympy=lambda x, axis=None, keepdims=False: _sym_reduce(_sym_sum, x, axis, keepdims),
    domain=Domain((REALS,), cases=_CASES),
    rule_text=("d nansum(u)/du = 1, 0 at nan",),
    abstract=abstract.reduction)


def _nanmean_vjp(g, ans, x, axis=None, keepdims=False):
    numbers = _not_nan(x)
    count = maximum(sum_(numbers, axis=axis, keepdims=True), 1)  # an all-nan slice: 0, not nan
    return _keep(g, _shape(x), axis, keepdims) * numbers / count


nanmean = defop(
    "nanmean", lambda x, axis=None, keepdims=False: np.nanmean(x, axis=axis, keepdims=keepdims),
    _print_reduction("nanmean"),
    vjp=(_nanmean_vjp,),
    sympy=lambda x, axis=None, keepdims=False: _sym_reduce(
        lambda xs: sp.Add(*xs) / len(xs), x, axis, keepdims),
    domain=Domain((REALS,), cases=_CASES),
    rule_text=("d nanmean(u)/du = 1 / (number of non-nan entries), 0 at nan",),
    abstract=abstract.reduction)


# --- prod: the product of the others, never a division by a zero ----------------------------


def _prod_vjp(g, ans, x, axis=None, keepdims=False):
    """d prod(x)/dx_i = prod of x_j, j != i. With z the zero indicator and ``safe`` x with its
    zeros held at 1, P = prod(safe) / safe_i is that product when x has no zero; a single zero
    x_k gives P at k and P * x_k elsewhere (value 0, slope P in x_k); two zeros give
    x_other_zero * P at each zero. Written with x_k kept symbolic, second derivatives are
    right with up to two zeros (with three or more, every first and second derivative is 0)."""
    z = _as_float(x == 0, x)
    zeros = sum_(z, axis=axis, keepdims=True)
    live = 1 - z
    safe = x * live + z  # the zeros held at 1 (their slope in x is 0 there)
    others = prod(safe, axis=axis, keepdims=True) / safe
    zero_sum = sum_(x * z, axis=axis, keepdims=True)  # the zero entries: value 0, slope 1
    none, one, two = (_as_float(zeros == k, x) for k in (0, 1, 2))
    factor = none + one * (z + live * zero_sum) + two * z * (zero_sum - x)
    return _keep(g, _shape(x), axis, keepdims) * others * factor


prod = defop(
    "prod", lambda x, axis=None, keepdims=False: np.prod(x, axis=axis, keepdims=keepdims),
    _print_reduction("prod"),
    vjp=(_prod_vjp,),
    sympy=lambda x, axis=None, keepdims=False: _sym_reduce(lambda xs: sp.Mul(*xs), x, axis,
                                                           keepdims),
    domain=Domain((REALS,), cases=_CASES),
    rule_text=("d prod(u)/du_i = product of the other entries (no division: right at zeros)",),
    abstract=abstract.reduction)


# --- var and std -------------------------------------------------------------------------


def _centered(x, axis):
    return x - mean(x, axis=axis, keepdims=True)


def _var_vjp(g, ans, x, axis=None, keepdims=False, ddof=0):
    scale = 2.0 / (_count(_shape(x), axis) - ddof)
    return _keep(g, _shape(x), axis, keepdims) * _centered(x, axis) * scale


def _std_vjp(g, ans, x, axis=None, keepdims=False, ddof=0):
    shape = _shape(x)
    dof = _count(shape, axis) - ddof
    return _keep(g, shape, axis, keepdims) * _centered(x, axis) / (_keep(ans, shape, axis,
                                                                         keepdims) * dof)


def _sym_var(x, axis=None, keepdims=False, ddof=0):
    x = np.asarray(x, dtype=object)
    n = _count(x.shape, axis)
    centered = x - np.sum(x, axis=axis, keepdims=True) / n
    return np.sum(centered * centered, axis=axis, keepdims=keepdims) / (n - ddof)


_VAR_CASES = (
    (((3, 4),), {"axis": None, "keepdims": False, "ddof": 0}),
    (((3, 4),), {"axis": (1,), "keepdims": True, "ddof": 1}),
    (((2, 3, 2),), {"axis": (0, 2), "keepdims": False, "ddof": 0}),
    (((5,),), {"axis": (0,), "keepdims": False, "ddof": 1}),
)
_VAR_ONLY_CASES = (  # one entry: variance 0, where std's gradient is nan
    (("py",), {"axis": None, "keepdims": False, "ddof": 0}),
    (((),), {"axis": None, "keepdims": True, "ddof": 0}),
)

var = defop(
    "var", lambda x, axis=None, keepdims=False, ddof=0: np.var(x, axis=axis, keepdims=keepdims,
                                                                ddof=ddof),
    _print_np("np.var", ("axis", "ddof", "keepdims")),
    vjp=(_var_vjp,), sympy=_sym_var, domain=Domain((REALS,), cases=_VAR_CASES + _VAR_ONLY_CASES),
    rule_text=("d var(u)/du = 2 (u - mean(u)) / (n - ddof)",),
    abstract=abstract.reduction,
    xp=_xp_reduction("xp.var", "correction"))

# At zero variance (a constant slice) the gradient is nan, like JAX: sqrt has an infinite
# slope at 0 and the centered entries are all 0.
std = defop(
    "std", lambda x, axis=None, keepdims=False, ddof=0: np.std(x, axis=axis, keepdims=keepdims,
                                                                ddof=ddof),
    _print_np("np.std", ("axis", "ddof", "keepdims")),
    vjp=(_std_vjp,),
    sympy=lambda x, axis=None, keepdims=False, ddof=0: _sym_map(
        sp.sqrt, _sym_var(x, axis, keepdims, ddof)),
    domain=Domain((REALS,), cases=_VAR_CASES),
    rule_text=("d std(u)/du = (u - mean(u)) / ((n - ddof) std(u)); nan at zero variance",),
    abstract=abstract.reduction,
    xp=_xp_reduction("xp.std", "correction"))


# --- the 2-norm (vectors) and the Frobenius norm (matrices) -------------------------------

# Its derivative u / norm(u) is undefined at u = 0: the gradient there is nan (as in JAX).
norm = defop(
    "norm", lambda x, axis=None, keepdims=False: np.linalg.norm(x, axis=axis, keepdims=keepdims),
    _print_np("np.linalg.norm"), xp=_xp_reduction("xp.linalg.vector_norm"),
    vjp=(lambda g, ans, x, axis=None, keepdims=False:
         _keep(g, _shape(x), axis, keepdims) * x / _keep(ans, _shape(x), axis, keepdims),),
    sympy=lambda x, axis=None, keepdims=False: _sym_map(
        sp.sqrt, _sym_reduce(lambda xs: sp.Add(*(u * u for u in xs)), x, axis, keepdims)),
    domain=Domain((REALS,), cases=(
        (((3,),), {}),
        (((2, 3),), {"axis": None, "keepdims": False}),
        (((3, 4),), {"axis": (1,), "keepdims": True}),
        (((2, 3, 2),), {"axis": (0, 2), "keepdims": False}),
    )),
    rule_text=("d norm(u)/du = u / norm(u) (nan at u = 0)",),
    abstract=abstract.reduction)


# --- cumulative sums and products --------------------------------------------------------


def _flip_text(expr, axis):
    return f"{expr}[{', '.join([':'] * axis + ['::-1'])}]"


def _print_cumsum(node, args):
    axis = node.attrs["axis"]
    tail = f", axis={axis}" if node.aval.ndim > 1 else ""  # the result has the input's shape
    if not node.attrs.get("reverse"):
        return Expr(f"np.cumsum({args[0].text}{tail})")
    flipped = _flip_text(args[0].at(PREC_ATOM - 1), axis)
    return Expr(_flip_text(f"np.cumsum({flipped}{tail})", axis), PREC_ATOM - 1)


def _cumsum_impl(x, axis=0, reverse=False):
    if not reverse:
        return np.cumsum(x, axis=axis)
    return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis)


def _sym_cumsum(x, axis=0, reverse=False):
    x = np.asarray(x, dtype=object)
    if not reverse:
        return np.cumsum(x, axis=axis)
    return np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis)


# ``reverse``: the sums from each entry to the end (cumsum's own VJP; never reached from
# NumPy directly), printed as np.cumsum(g[::-1])[::-1].
cumsum = defop(
    "cumsum", _cumsum_impl, _print_cumsum,
    vjp=(lambda g, ans, x, axis=0, reverse=False: cumsum(g, axis=axis, reverse=not reverse),),
    sympy=_sym_cumsum,
    domain=Domain((REALS,), cases=(
        (((4,),), {"axis": 0}),
        (((3, 4),), {"axis": 1}),
        (((3, 4),), {"axis": 0, "reverse": True}),
    )),
    rule_text=("d cumsum(u)_i/du_j = 1 for j <= i: the cotangent summed from the end",),
    abstract=abstract.scan,
    xp=_xp_cumulative("cumulative_sum"))


def _cumprod_vjp(g, ans, x, axis=0):
    """d y_i/dx_j = prod(x_l, l <= i, l != j) for j <= i, y = cumprod(x). Before the first
    zero k that is sum_{i>=j} g_i y_i / x_j; at k it is the same sum for the cumprod with x_k
    held at 1 (``tail``); between the first and the second zero it is x_k times that over x_j
    (value 0, slope in x_k). After the second zero it is 0. Second derivatives are right
    except the one between the first two zeros (the second zero's slope in the first)."""
    z = _as_float(x == 0, x)
    zeros_so_far = cumsum(z, axis=axis)
    before = _as_float(zeros_so_far == 0, x)
    first = z * _as_float(zeros_so_far == 1, x)
    between = (1 - z) * _as_float(zeros_so_far == 1, x)
    safe = x * (1 - z) + z  # zeros held at 1
    to_end = cumsum(g * ans, axis=axis, reverse=True)
    tail = cumsum(g * cumprod(x * (1 - first) + first, axis=axis), axis=axis, reverse=True)
    x_first = sum_(x * first, axis=(axis,), keepdims=True)  # value 0, slope 1 in x_k
    return (before * to_end + between * x_first * tail) / safe + first * tail


cumprod = defop(
    "cumprod", lambda x, axis=0: np.cumprod(x, axis=axis),
    lambda node, args: Expr(f"np.cumprod({args[0].text}"
                            + (f", axis={node.attrs['axis']})" if node.aval.ndim > 1 else ")")),
    vjp=(_cumprod_vjp,), abstract=abstract.scan,
    sympy=lambda x, axis=0: np.cumprod(np.asarray(x, dtype=object), axis=axis),
    domain=Domain((REALS,), cases=((((4,),), {"axis": 0}), (((2, 3),), {"axis": 1}),
                                   (((3, 2),), {"axis": 0}))),
    rule_text=("d cumprod(u)_i/du_j = product of u_l for l <= i, l != j (right at zeros)",),
    xp=_xp_cumulative("cumulative_prod"))


# --- indices and counts: locally constant, no gradient ---------------------------------------


def _sym_first_best(xs, better):
    """The index of the first entry no other beats (argmax: better is >), as a sympy sum."""
    terms = []
    for i, xi in enumerate(xs):
        wins = [better(xi, xj) if j < i else sp.Not(better(xj, xi))
                for j, xj in enumerate(xs) if j != i]
        terms.append(i * sp.Piecewise((1, sp.And(*wins)), (0, True)))
    return sp.Add(*terms)


def _sym_argsort(x):
    """np.argsort of a vector (ties in index order): out[k] is the index of rank k."""
    xs = list(np.ravel(np.asarray(x, dtype=object)))

    def before(j, i):  # does entry j sort before entry i?
        ahead = xs[j] < xs[i]
        return sp.Or(ahead, sp.Eq(xs[j], xs[i])) if j < i else ahead

    ranks = [sp.Add(*[sp.Piecewise((1, before(j, i)), (0, True))
                      for j in range(len(xs)) if j != i]) for i in range(len(xs))]
    out = np.empty(len(xs), dtype=object)
    half = sp.Rational(1, 2)
    for k in range(len(xs)):  # rank == k, written |rank - k| < 1/2: no kink at the integers
        out[k] = sp.Add(*[i * sp.Piecewise((1, sp.And(r > k - half, r < k + half)), (0, True))
                          for i, r in enumerate(ranks)])
    return out


# The fuzzer calls a row at its Domain cases; rows without a rule are called with their
# default attributes (their sympy meanings take the value alone).
_NONDIFF_CASES = Domain((REALS,), cases=((((4,),), {}), (((2, 3),), {})))


def _print_arg(fn):
    def print_(node, args):
        parts = [args[0].text]
        axis = node.attrs.get("axis")
        if axis is not None:
            parts.append(f"axis={axis}")
        if node.attrs.get("keepdims"):
            parts.append("keepdims=True")
        return Expr(f"np.{fn}({', '.join(parts)})")

    return print_


argmax = defop(
    "argmax", lambda x, axis=None, keepdims=False: np.argmax(x, axis=axis, keepdims=keepdims),
    _print_arg("argmax"), nondiff=True, domain=_NONDIFF_CASES,
    sympy=lambda x: _sym_first_best(list(np.ravel(np.asarray(x, dtype=object))),
                                    lambda a, b: a > b))
argmin = defop(
    "argmin", lambda x, axis=None, keepdims=False: np.argmin(x, axis=axis, keepdims=keepdims),
    _print_arg("argmin"), nondiff=True, domain=_NONDIFF_CASES,
    sympy=lambda x: _sym_first_best(list(np.ravel(np.asarray(x, dtype=object))),
                                    lambda a, b: a < b))


def _print_argsort(node, args):
    parts = [args[0].text]
    axis = node.attrs.get("axis", -1)
    ndim = node.aval.ndim  # the input's, when an axis is given
    if axis is None:
        parts.append("axis=None")
    elif axis not in (-1, ndim - 1) and ndim > 0:
        parts.append(f"axis={axis}")
    for key in ("kind", "stable"):
        if node.attrs.get(key) is not None:
            parts.append(f"{key}={value_text(node.attrs[key])}")
    return Expr(f"np.argsort({', '.join(parts)})")


argsort = defop(
    "argsort", lambda x, axis=-1, kind=None, stable=None: np.argsort(x, axis=axis, kind=kind,
                                                                     stable=stable),
    _print_argsort, nondiff=True, sympy=_sym_argsort, domain=_NONDIFF_CASES)

count_nonzero = defop(
    "count_nonzero",
    lambda x, axis=None, keepdims=False: np.count_nonzero(x, axis=axis, keepdims=keepdims),
    _print_np("np.count_nonzero"), nondiff=True, domain=_NONDIFF_CASES,
    sympy=lambda x: sp.Add(*[sp.Piecewise((1, sp.Ne(u, 0)), (0, True))
                             for u in np.ravel(np.asarray(x, dtype=object))]))

any_ = defop(
    "any", lambda x, axis=None, keepdims=False: np.any(x, axis=axis, keepdims=keepdims),
    _print_np("np.any"), nondiff=True, domain=_NONDIFF_CASES,
    sympy=lambda x: sp.Or(*[sp.Ne(u, 0) for u in np.ravel(np.asarray(x, dtype=object))]))

all_ = defop(
    "all", lambda x, axis=None, keepdims=False: np.all(x, axis=axis, keepdims=keepdims),
    _print_np("np.all"), nondiff=True, domain=_NONDIFF_CASES,
    sympy=lambda x: sp.And(*[sp.Ne(u, 0) for u in np.ravel(np.asarray(x, dtype=object))]))


# --- how NumPy reaches these rows ------------------------------------------------------------


def _given(v) -> bool:
    return v is not None and v is not _NO


def _refuse_args(name, hint=None, **args):
    """Refuse the arguments of ``name`` that were given (out=, where=, initial=...)."""
    given = [k for k, v in args.items() if _given(v)]
    if given:
        refuse(f"{name}(..., {', '.join(k + '=' for k in given)}) has no gradient rule in "
               "gradgen", hint)


def _flag(keepdims) -> bool:
    return False if keepdims is _NO else bool(keepdims)


def _axes(a, axis):
    return normalize_axis(axis, np.ndim(_value(a)))


def _with_dtype(a, dtype, name):
    """``dtype=`` of a reduction: a float dtype computes on ``a`` cast to it (what NumPy
    does); any other is refused."""
    if not _given(dtype):
        return a
    dt = np.dtype(dtype)
    if dt.kind != "f":
        refuse(f"{name}(..., dtype={dt.name}) has no gradient rule in gradgen",
               "reduce in a float dtype")
    if np.result_type(_value(a)) == dt and not isinstance(_value(a), float):
        return a
    return cast(a, dtype=dt.name)


def _extreme(op, name):
    masked = op.name in ("max", "min")  # (the nan forms take neither initial= nor where=)

    def handler(a, axis=None, out=None, keepdims=_NO, initial=_NO, where=_NO):
        if masked and not _given(out) and (_given(initial) or _given(where)):
            return _masked_extreme(op, a, axis, keepdims, initial, where)
        _refuse_args(name, f"call {name}(x, axis=..., keepdims=...)", out=out,
                     initial=initial, where=where)
        return op(a, axis=_axes(a, axis), keepdims=_flag(keepdims))

    return handler


def _masked_extreme(op, a, axis, keepdims, initial, where):
    """np.max(x, where=m, initial=v): the entries the mask leaves out read as v, and v joins
    the reduction (NumPy asks for initial= with where=); a tie with v shares the gradient
    as any tie does, and v itself is a constant."""
    if not _given(initial):
        raise ValueError(f"reduction operation '{'maximum' if op.name == 'max' else 'minimum'}'"
                         " does not have an identity, so to use a where mask one has to "
                         "specify 'initial'")
    if _given(where):
        a = np.where(where, a, initial)
    result = op(a, axis=_axes(a, axis), keepdims=_flag(keepdims))
    pair = np.maximum if op.name == "max" else np.minimum
    return pair(result, initial)  # (a tie: the data's side, np.maximum's first argument)


def _sum_like(op, name):
    def handler(a, axis=None, dtype=None, out=None, keepdims=_NO, initial=_NO, where=_NO):
        _refuse_args(name, f"call {name}(x, axis=..., keepdims=...)", out=out,
                     initial=initial, where=where)
        return op(_with_dtype(a, dtype, name), axis=_axes(a, axis), keepdims=_flag(keepdims))

    return handler


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=_NO, *, where=_NO):
    _refuse_args("np.nanmean", None, out=out, where=where)
    return nanmean(_with_dtype(a, dtype, "np.nanmean"), axis=_axes(a, axis),
                   keepdims=_flag(keepdims))


def _spread(op, name):
    def handler(a, axis=None, dtype=None, out=None, ddof=0, keepdims=_NO, *, where=_NO,
                mean=_NO, correction=_NO):
        _refuse_args(name, f"call {name}(x, axis=..., ddof=..., keepdims=...)", out=out,
                     where=where, mean=mean)
        if _given(correction):
            if ddof != 0:
                raise ValueError("ddof and correction can't be provided simultaneously.")
            ddof = correction
        axes = _axes(a, axis)
        if _count(np.shape(_value(a)), axes) - ddof <= 0:
            refuse(f"{name} with ddof >= the number of entries (a nan or inf result) has no "
                   "gradient rule in gradgen")
        return op(_with_dtype(a, dtype, name), axis=axes, keepdims=_flag(keepdims),
                  ddof=int(ddof) if float(ddof).is_integer() else float(ddof))

    return handler


def _cumulative(op, name):
    def handler(a, axis=None, dtype=None, out=None):
        _refuse_args(name, f"call {name}(x, axis=...)", out=out)
        a = _with_dtype(a, dtype, name)
        if axis is None:  # NumPy flattens
            size = int(np.size(_value(a)))
            if _shape(a) != (size,):
                a = reshape(a, shape=(size,))
            axis = 0
        return op(a, axis=_axes(a, axis)[0])

    return handler


def _ptp(a, axis=None, out=None, keepdims=_NO):
    _refuse_args("np.ptp", None, out=out)
    axes, keep = _axes(a, axis), _flag(keepdims)
    return max_(a, axis=axes, keepdims=keep) - min_(a, axis=axes, keepdims=keep)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """np.median as NumPy computes it: sort along ``axis`` (np.sort: its gradient follows the
    entries), the mean of the middle one or two, and nan where the slice holds a nan (the
    largest sorted entry is nan then): the middle plus 0 / [last == last], 0 or nan."""
    _refuse_args("np.median", "call np.median(x, axis=..., keepdims=...)", out=out)
    shape = _shape(a)
    axes = _axes(a, axis)
    if axes is not None and len(axes) > 1:
        refuse("np.median over several axes has no gradient rule in gradgen",
               "move the axes together with np.moveaxis and reshape, then take the median "
               "over one axis")
    if axes is None:
        a, k = (reshape(a, shape=(int(np.prod(shape, dtype=int)),)) if len(shape) != 1
                else a), 0
    else:
        k = axes[0]
    n = _shape(a)[k]
    lead = (slice(None),) * k
    ordered = np.sort(a, axis=k)
    middle = mean(ordered[(*lead, slice((n - 1) // 2, n // 2 + 1))], axis=(k,), keepdims=False)
    last = ordered[(*lead, -1)]
    result = middle + 0.0 / _as_float(eq(last, last), last)
    if keepdims:
        result = reshape(result, shape=_kept_shape(shape, axes))
    return result


_QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile(name, scale):
    """np.quantile (scale 1) and np.percentile (scale 100) as NumPy computes them: sort along
    ``axis``, read the order statistics at each quantile's position, and interpolate between
    the two neighbours (method linear, midpoint) or take one (lower, higher, nearest), with
    NumPy's own lerp, so values agree to the bit. The gradient follows np.sort's (ties as
    np.argsort placed them) into the one or two entries each quantile reads; nan where the
    slice holds a nan, as for np.median."""

    def handler(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
        _refuse_args(name, f"call {name}(x, q, axis=..., method=..., keepdims=...)", out=out,
                     weights=weights)
        if interpolation is not None:  # NumPy's old spelling of method=
            method = interpolation
        if method not in _QUANTILE_METHODS:
            refuse(f"{name}(..., method={method!r}) has no gradient rule in gradgen",
                   f"the methods {', '.join(_QUANTILE_METHODS)} are differentiable")
        if has_traced(q):
            refuse(f"{name} at a traced q has no gradient rule in gradgen",
                   "the quantile's position must be a constant (its gradient in the data "
                   "is what gradgen computes)")
        q_value = getattr(q, "value", q)
        qs = np.true_divide(np.asanyarray(q_value, dtype=np.float64), scale)
        if not (np.all(qs >= 0) and np.all(qs <= 1)):  # NumPy's own check and message
            raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100
                             else "Quantiles must be in the range [0, 1]")
        a_shape = _shape(a)
        axes = _axes(a, axis)
        if axes is not None and len(axes) > 1:
            refuse(f"{name} over several axes has no gradient rule in gradgen",
                   "move the axes together with np.moveaxis and reshape, then take the "
                   "quantile over one axis")
        if axes is None:
            a = reshape(a, shape=(int(np.prod(a_shape, dtype=int)),)) if len(a_shape) != 1 \
                else a
            k = 0
        else:
            k = axes[0]
        ordered = np.sort(a, axis=k)
        if k:  # the sorted axis first, as NumPy moves it: the quantiles' axis replaces it
            ordered = np.moveaxis(ordered, k, 0)
        n = _shape(ordered)[0]
        lo, hi, gamma = _quantile_positions(qs, n, method)
        if qs.ndim == 0:  # one quantile: scalar positions, the weight a Python float
            lo, hi, gamma = int(lo), int(hi), float(gamma)
        result = ordered[lo]
        if method in ("linear", "midpoint") and np.any(gamma != 0):
            after = ordered[hi]
            if qs.ndim:  # the weights broadcast over the rest of the axes
                gamma = np.reshape(gamma, gamma.shape + (1,) * (len(_shape(ordered)) - 1))
            diff = after - result
            low = result + diff * gamma  # NumPy's _lerp, both halves
            high = after - diff * (1.0 - gamma)
            upper = np.asarray(gamma) >= 0.5
            result = high if upper.all() else low if not upper.any() else np.where(
                upper, high, low)
        last = ordered[-1]
        result = result + 0.0 / _as_float(eq(last, last), last)  # nan where the slice has one
        if keepdims:
            kept = _kept_shape(a_shape, axes)
            result = reshape(result, shape=qs.shape + kept)
        return result

    return handler


def _quantile_positions(qs, n: int, method: str):
    """(lower index, upper index, weight of the upper) per quantile, as NumPy finds them."""
    virtual = (n - 1) * qs
    if method in ("lower", "higher", "nearest"):
        pick = {"lower": np.floor, "higher": np.ceil, "nearest": np.around}[method]
        index = np.asarray(pick(virtual)).astype(np.intp)
        return index, index, np.zeros(np.shape(qs))
    if method == "midpoint":
        virtual = 0.5 * (np.floor(virtual) + np.ceil(virtual))
    lo = np.asarray(np.floor(virtual)).astype(np.intp)
    hi = lo + 1
    gamma = np.asarray(virtual - lo, dtype=np.float64)
    if method == "midpoint":
        gamma = np.where(np.asarray(virtual) % 1 == 0, 0.0, 0.5)
    at_end = np.asarray(virtual) >= n - 1  # the last entry itself
    lo, hi = np.where(at_end, n - 1, lo), np.where(at_end, n - 1, hi)
    return lo, hi, np.where(at_end, 0.0, gamma)


def _average(a, axis=None, weights=None, returned=False, *, keepdims=_NO):
    """np.average: the mean, or sum(a * w) / sum(w) with weights (both get a gradient)."""
    keep = _flag(keepdims)
    kw = {} if keepdims is _NO else {"keepdims": keepdims}
    w_value = None if weights is None else _value(weights)
    if not hasattr(w_value, "shape") and w_value is not None:
        weights = w_value = np.asarray(w_value)
    # NumPy's own checks (shapes, axis, weights summing to 0) on the traced values
    np.average(_value(a), axis=axis, weights=w_value, **kw)
    axes = _axes(a, axis)
    if weights is None:
        avg = mean(a, axis=axes, keepdims=keep)
        if not returned:
            return avg
        size = int(np.size(_value(a))) // max(int(np.size(_value(avg))), 1)
        scale = np.result_type(_value(avg)).type(size)
        return avg, np.broadcast_to(scale, _shape(avg)).copy() if _shape(avg) else scale
    a_shape = _shape(a)
    if _shape(weights) != a_shape:  # weights along ``axis``: made to broadcast against a
        order = tuple(int(i) for i in np.argsort(axis if isinstance(axis, tuple | list)
                                                 else (axis,)))
        if order != tuple(range(len(order))):
            weights = transpose(weights, axes=order)
        weights = reshape(weights, shape=tuple(s if i in axes else 1
                                               for i, s in enumerate(a_shape)))
    scale = sum_(weights, axis=axes, keepdims=keep)
    avg = sum_(a * weights, axis=axes, keepdims=keep) / scale
    if not returned:
        return avg
    if _shape(scale) != _shape(avg):
        scale = copy(broadcast_to(scale, shape=_shape(avg)))
    return avg, scale


_NORM_HINT = "ord=None, 'fro', 1, -1, inf and -inf are differentiable for matrices"


def _norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: the 2-norm and Frobenius norm are the norm row; the other orders are
    built from rows (sum of |x|, max/min of |x|, (sum |x|**p) ** (1/p)) as NumPy computes
    them, so they differentiate (and print) like that code."""
    value = _value(x)
    np.linalg.norm(value, ord=ord, axis=axis, keepdims=keepdims)  # NumPy's argument errors
    nd = np.ndim(value)
    keepdims = bool(keepdims)
    if axis is None:
        if ord is None:
            return norm(x, axis=None, keepdims=keepdims)
        axis = tuple(range(nd))
    elif not isinstance(axis, tuple):
        axis = (int(axis),)
    axis = tuple(int(a) % nd for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis, keepdims)
    return _matrix_norm(x, ord, axis, keepdims)


def _np_vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """np.linalg.vector_norm (NumPy 2): the vector norm over ``axis`` (all axes, or a tuple
    of them, as one flattened vector)."""
    value = _value(x)
    np.linalg.vector_norm(value, axis=axis, keepdims=keepdims, ord=ord)  # NumPy's errors
    axes = _axes(x, axis) or tuple(range(np.ndim(value)))
    if ord == 2 and axis is None:
        return norm(x, axis=None, keepdims=bool(keepdims))
    return _vector_norm(x, ord, axes, bool(keepdims))


def _np_matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """np.linalg.matrix_norm (NumPy 2): the matrix norm over the last two axes."""
    value = _value(x)
    np.linalg.matrix_norm(value, keepdims=keepdims, ord=ord)  # NumPy's errors
    nd = np.ndim(value)
    return _matrix_norm(x, ord, (nd - 2, nd - 1), bool(keepdims))


def _vector_norm(x, ord, axis, keepdims):
    if ord is None or ord == 2:
        return norm(x, axis=axis, keepdims=keepdims)
    if ord == np.inf:
        return max_(abs_(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return min_(abs_(x), axis=axis, keepdims=keepdims)
    if ord == 0:  # a count of the nonzero entries: locally constant
        return sum_(_as_float(x != 0, x), axis=axis, keepdims=keepdims)
    if ord == 1:
        return sum_(abs_(x), axis=axis, keepdims=keepdims)
    total = sum_(abs_(x) ** ord, axis=axis, keepdims=keepdims)
    return total ** (1.0 / ord)


def _matrix_norm(x, ord, axis, keepdims):
    row, col = axis
    if ord is None or ord == "fro":
        return norm(x, axis=tuple(sorted(axis)), keepdims=keepdims)
    if ord in (2, -2, "nuc"):
        return _singular_value_norm(x, ord, axis, keepdims)
    if ord in (1, -1):  # the largest (smallest) column sum of |x|
        inner, outer = row, col - (col > row)
    else:  # inf, -inf: the largest (smallest) row sum of |x|
        inner, outer = col, row - (row > col)
    pick = max_ if ord in (1, np.inf) else min_
    result = pick(sum_(abs_(x), axis=(inner,), keepdims=False), axis=(outer,), keepdims=False)
    if keepdims:
        result = reshape(result, shape=_kept_shape(_shape(x), axis))
    return result


def _singular_value_norm(x, ord, axis, keepdims):
    """ord=2, -2, 'nuc': the largest, smallest or summed singular values, as NumPy computes
    them (the two axes moved last, np.linalg.svd(..., compute_uv=False)); svdvals' rule
    assumes distinct nonzero singular values."""
    svdvals = OPS.get("svdvals")
    if svdvals is None:
        refuse(f"np.linalg.norm(..., ord={ord!r}) of a matrix needs singular values, which "
               "have no gradient rule in gradgen", _NORM_HINT)
    nd = len(_shape(x))
    order = tuple(i for i in range(nd) if i not in axis) + tuple(axis)
    moved = x if order == tuple(range(nd)) else transpose(x, axes=order)
    values = svdvals(moved)
    last = (len(_shape(values)) - 1,)
    if ord == "nuc":
        result = sum_(values, axis=last, keepdims=False)
    else:
        result = (max_ if ord == 2 else min_)(values, axis=last, keepdims=False)
    if keepdims:
        result = reshape(result, shape=_kept_shape(_shape(x), axis))
    return result


def _arg(op, name):
    def handler(a, axis=None, out=None, *, keepdims=_NO):
        _refuse_args(name, None, out=out)
        axes = _axes(a, axis)
        return op(a, axis=None if axes is None else axes[0], keepdims=_flag(keepdims))

    return handler


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse_args("np.argsort", None, order=order)
    if axis is not None and np.ndim(_value(a)) > 0:  # NumPy sorts a 0-d value along -1
        axis = _axes(a, axis)[0]
    return argsort(a, axis=axis, kind=kind, stable=stable)


def _count_nonzero(a, axis=None, *, keepdims=False):
    return count_nonzero(a, axis=_axes(a, axis), keepdims=bool(keepdims))


def _truth(op, name):
    def handler(a, axis=None, out=None, keepdims=_NO, *, where=_NO):
        _refuse_args(name, None, out=out, where=where)
        return op(a, axis=_axes(a, axis), keepdims=_flag(keepdims))

    return handler


route(np.mean, reduction(mean, "mean"), "mean")
for _fn, _op in ((np.max, max_), (np.amax, max_), (np.min, min_), (np.amin, min_),
                 (np.nanmax, nanmax), (np.nanmin, nanmin)):
    route(_fn, _extreme(_op, f"np.{_fn.__name__}"), _op.name)
route(np.prod, _sum_like(prod, "np.prod"), "prod")
route(np.nansum, _sum_like(nansum, "np.nansum"), "nansum")
route(np.nanmean, _nanmean, "nanmean")
route(np.var, _spread(var, "np.var"), "var")
route(np.std, _spread(std, "np.std"), "std")
route(np.cumsum, _cumulative(cumsum, "np.cumsum"), "cumsum")
route(np.cumprod, _cumulative(cumprod, "np.cumprod"), "cumprod")
route(np.ptp, _ptp, "max", "min")
route(np.average, _average, "mean", "sum")
route(np.linalg.norm, _norm, "norm", "sum", "max", "min")
if hasattr(np.linalg, "vector_norm"):  # NumPy 2's array API spellings
    route(np.linalg.vector_norm, _np_vector_norm, "norm", "sum", "max", "min")
    route(np.linalg.matrix_norm, _np_matrix_norm, "norm", "sum", "max", "min")
route(np.median, _median, "mean")
route(np.quantile, _quantile("np.quantile", 1), "argsort", "take_along_axis", "getitem")
route(np.percentile, _quantile("np.percentile", 100), "argsort", "take_along_axis",
      "getitem")
route(np.argmax, _arg(argmax, "np.argmax"), "argmax")
route(np.argmin, _arg(argmin, "np.argmin"), "argmin")
route(np.argsort, _argsort, "argsort")
route(np.count_nonzero, _count_nonzero, "count_nonzero")
route(np.any, _truth(any_, "np.any"), "any")
route(np.all, _truth(all_, "np.all"), "all")


def _cumulative_named(op, name):
    """np.cumulative_sum / cumulative_prod (NumPy 2.1): np.cumsum's row, axis required for
    more than one dimension, and the optional leading identity."""

    def handler(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        if axis is None and np.ndim(_value(x)) > 1:
            raise ValueError(f"{name} needs axis= for an array of more than one dimension")
        result = _cumulative(op, name)(x, axis=axis, dtype=dtype, out=out)
        if not include_initial:
            return result
        refuse(f"{name}(..., include_initial=True) has no gradient rule in gradgen",
               "concatenate the identity yourself")

    return handler


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoid rule, from the sum and slicing rows (np.trapezoid)."""
    n = np.ndim(_value(y))
    axis = int(axis) % n
    full = ("slice", None, None, None)
    head = getitem(y, index=(full,) * axis + (("slice", None, -1, None),))
    tail = getitem(y, index=(full,) * axis + (("slice", 1, None, None),))
    if x is None:
        widths = dx
    else:
        x_head = getitem(x, index=(("slice", None, -1, None),)) if np.ndim(_value(x)) == 1 \
            else getitem(x, index=(full,) * axis + (("slice", None, -1, None),))
        x_tail = getitem(x, index=(("slice", 1, None, None),)) if np.ndim(_value(x)) == 1 \
            else getitem(x, index=(full,) * axis + (("slice", 1, None, None),))
        widths = x_tail - x_head
        if np.ndim(_value(x)) == 1 and n > 1:
            shape = [1] * n
            shape[axis] = -1
            widths = reshape(widths, shape=tuple(np.size(_value(widths)) if d == -1 else d
                                                 for d in shape))
    return sum_(widths * (head + tail) / 2.0, axis=(axis,), keepdims=False)


route(np.cumulative_sum, _cumulative_named(cumsum, "np.cumulative_sum"), "cumsum")
route(np.cumulative_prod, _cumulative_named(cumprod, "np.cumulative_prod"), "cumprod")
route(np.trapezoid, _trapezoid, "sum", "getitem")
