"""SciPy's most used special functions, spelled with NumPy rows: scipy.special's logsumexp,
softmax, log_softmax and expit, reached by their qualified names (ops.registry.FOREIGN), so
SciPy is never imported for them and the emitted module still imports NumPy and math only.

logsumexp is NumPy's own stable form, ``m + log(sum(exp(x - m)))`` with ``m`` the maximum
(0 where it is not finite, as SciPy does); ``m`` passes no gradient (``stop_gradient``, as
JAX's logsumexp does), since the result does not depend on it: the gradient is the softmax,
with no cancelling terms through the maximum. expit is ``0.5 * (1 + tanh(x / 2))``, stable at
both ends with a stable derivative. Values agree with SciPy's up to rounding.
"""

from __future__ import annotations

import numpy as np

from .adapt import as_array, hinted, refuse, value
from .registry import CALLED_AS, FOREIGN, Expr, defop

# Identity in value, no gradient: for a quantity the result mathematically does not depend
# on (logsumexp's shift). The module prints the value itself.
stop_gradient = defop(
    "stop_gradient", lambda x: x, lambda node, args: Expr(args[0].text, args[0].prec),
    nondiff=True, sympy=lambda x: 1.0 * x,  # (a bare Symbol would read as a sympy Boolean)
    extra={"doc": "no gradient: a value the result does not depend on (logsumexp's shift)"})


def _axes(x, axis):
    nd = np.ndim(value(x))
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    return tuple(sorted(int(a) % nd for a in axes))


def _shift(a, axis):
    """The maximum along ``axis`` (kept), 0 where it is not finite, passing no gradient."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return hinted(stop_gradient(m), "shift")


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    if return_sign:
        refuse("scipy.special.logsumexp(..., return_sign=True) has no gradient rule in gradgen",
               "call it without return_sign (the weights b must keep the sum positive)")
    a = as_array(a)
    axis = _axes(a, axis)
    m = _shift(a, axis)
    terms = np.exp(a - m)
    if b is not None:
        terms = terms * b
    out = np.log(np.sum(terms, axis=axis, keepdims=True)) + m
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else np.reshape(out, ())
    return out


def softmax(x, axis=None):
    x = as_array(x)
    axis = _axes(x, axis)
    e = hinted(np.exp(x - _shift(x, axis)), "exp_shifted")
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=None):
    x = as_array(x)
    axis = _axes(x, axis)
    shifted = hinted(x - _shift(x, axis), "shifted")
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def expit(x, /, out=None, **kwargs):
    if out is not None or kwargs:
        refuse("scipy.special.expit with out= or other ufunc arguments has no gradient rule in "
               "gradgen", "call expit(x) and assign the result")
    return 0.5 * (1.0 + np.tanh(0.5 * x))


FOREIGN.update({
    "scipy.special.logsumexp": logsumexp,
    "scipy.special.softmax": softmax,
    "scipy.special.log_softmax": log_softmax,
    "scipy.special.expit": expit,
})
for _name, _ops in (("logsumexp", ("stop_gradient", "max", "exp", "log", "sum")),
                    ("softmax", ("stop_gradient", "max", "exp", "sum")),
                    ("log_softmax", ("stop_gradient", "max", "exp", "log", "sum")),
                    ("expit", ("tanh",))):
    for _op in _ops:  # docs/ops.md lists them under the rows they are spelled with
        CALLED_AS.setdefault(_op, []).append(f"scipy.special.{_name}")
