"""np.searchsorted (an index: no gradient) and the functions built on rows as NumPy computes
them: np.interp, np.quantile / np.percentile, np.polyval and np.piecewise. Each gradient is
compared with central differences, with the emitted module and with sympy (gradgen.check);
values are compared with NumPy's to the bit, and the conventions at knots and ends pinned."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gradgen
from gradgen.errors import UnsupportedOperation

from .conftest import assert_gradient, run_emitted

RNG = np.random.default_rng(5)
XP = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
FP = np.array([0.0, 1.0, 0.5, 2.0, 1.0])
X8 = np.array([-0.1, 0.05, 0.3, 0.45, 0.6, 0.8, 0.99, 1.3])  # no knot: differences are smooth
M45 = RNG.normal(size=(4, 5))


def _agrees_with_sympy(report):
    """gradgen.check raises on a mismatch; here the comparison was sympy's, and close."""
    assert report.results and all(r.method in ("proved", "sympy") for r in report.results), (
        report.table())
    assert all(r.max_rel_error < 1e-7 for r in report.results), report.table()


def _weights(out):
    return np.linspace(0.5, 1.5, max(np.size(out), 1)).reshape(np.shape(out))


# --- np.searchsorted --------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_indexes_without_a_gradient(side):
    def f(x):
        k = np.searchsorted(XP, x, side=side)
        table = np.asarray(FP)  # an array of the traced code: a traced index reads it
        return np.sum(x * k) + np.sum(table[k] * x)

    grad, source = assert_gradient(f, np.array([0.2, 0.3, 0.9, -1.0]))
    k = np.searchsorted(XP, [0.2, 0.3, 0.9, -1.0], side=side)
    np.testing.assert_array_equal(grad, k + FP[k])
    assert "np.searchsorted(" in source


def test_searchsorted_of_a_traced_table_and_the_method():
    def f(table, x):
        return np.sum(table[table.searchsorted(x)] * x)

    assert_gradient(f, XP + 0.01, X8[1:6], argnums=(0, 1))


def test_searchsorted_refuses_sorter():
    with pytest.raises(UnsupportedOperation, match="sorter="):
        gradgen.grad(lambda x: np.sum(np.searchsorted(x, 0.5, sorter=np.arange(5)) * x))(XP)


# --- np.interp --------------------------------------------------------------------------------


def _interp_loss(x, xp, fp):
    return np.sum(_weights(np.interp(x, xp, fp)) * np.interp(x, xp, fp) ** 2)


@pytest.mark.parametrize("argnum", [0, 1, 2], ids=["x", "xp", "fp"])
def test_interp_gradient_in_each_argument(argnum):
    assert_gradient(_interp_loss, X8, XP, FP, argnums=argnum)
    _agrees_with_sympy(gradgen.check(_interp_loss, X8, XP, FP, argnums=argnum))


def test_interp_values_equal_numpy_to_the_bit():
    x = np.concatenate([X8, XP, RNG.uniform(-0.5, 1.5, 50)])
    w = RNG.normal(size=x.size)

    def f(x):
        return np.sum(np.interp(x, XP, FP) * w)

    assert gradgen.value_and_grad(f)(x)[0] == f(x)
    module = run_emitted(gradgen.emit(f, x))
    assert module["f_value_and_grad"](x)[0] == f(x)


def test_interp_conventions_at_knots_and_ends():
    # at an interior knot: the slope of the segment to its right; at and past the ends: 0
    x = np.array([0.0, 0.25, 0.5, 1.0, -2.0, 3.0])
    grad = gradgen.grad(lambda x: np.sum(np.interp(x, XP, FP)))(x)
    np.testing.assert_array_equal(grad, [4.0, -2.0, 6.0, 0.0, 0.0, 0.0])
    # the end values reach fp[0] and fp[-1] with weight 1 (exactly, not through a slope)
    g_fp = gradgen.grad(lambda fp: np.sum(np.interp(x, XP, fp)))(FP)
    np.testing.assert_array_equal(g_fp, [1.0 + 1.0, 1.0, 1.0, 0.0, 1.0 + 1.0])


def test_interp_left_right_python_float_and_float32():
    def f(x):
        return np.interp(x, XP, FP, left=-1.0, right=5.0) * 3.0

    for x, expected in ((-0.5, 0.0), (2.0, 0.0), (0.3, 3 * -2.0)):
        g = gradgen.grad(f)(x)
        assert type(g) is float and g == pytest.approx(expected)
    value, _ = gradgen.value_and_grad(f)(2.0)
    assert value == 15.0
    x32 = X8.astype(np.float32)
    v32, g32 = gradgen.value_and_grad(lambda x: np.sum(np.interp(x, XP, FP) ** 2))(x32)
    assert np.result_type(v32) == np.float64  # np.interp computes in float64
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, gradgen.grad(lambda x: np.sum(np.interp(x, XP, FP) ** 2))(
        x32.astype(np.float64)), rtol=1e-6)


def test_interp_second_order_in_the_table():
    # d/dfp of the interpolated value is the weights: linear in fp, so the Hessian in fp of
    # the squared loss is 2 W^T W, W the weight matrix
    hess = gradgen.hessian(lambda fp: np.sum(np.interp(X8, XP, fp) ** 2))(FP)
    weights = np.stack([np.interp(X8, XP, e) for e in np.eye(5)], axis=1)
    np.testing.assert_allclose(hess, 2 * weights.T @ weights, atol=1e-12)


def test_interp_refusals():
    with pytest.raises(UnsupportedOperation, match="period="):
        gradgen.grad(lambda x: np.sum(np.interp(x, XP, FP, period=1.0)))(X8)
    with pytest.raises(UnsupportedOperation, match="increase strictly"):
        gradgen.grad(lambda x: np.sum(np.interp(x, np.array([0.0, 0.5, 0.5, 1.0]),
                                                np.arange(4.0))))(X8)


# --- np.quantile and np.percentile ------------------------------------------------------------

QUANTILE_CASES = list(itertools.product(
    [(np.quantile, 0.3), (np.quantile, 1.0), (np.quantile, [0.1, 0.75]),
     (np.percentile, 45), (np.percentile, [[20, 90], [50, 0]])],
    [{}, {"axis": 1}, {"axis": 0, "keepdims": True}],
    ["linear", "lower", "higher", "nearest", "midpoint"]))


@pytest.mark.parametrize(("fn_q", "kw", "method"), QUANTILE_CASES)
def test_quantile(fn_q, kw, method):
    fn, q = fn_q

    def quantile(x):
        out = fn(x, q, method=method, **kw)
        return np.sum(_weights(out) * out)

    assert_gradient(quantile, M45)
    value, _ = gradgen.value_and_grad(quantile)(M45)
    assert value == quantile(M45)  # NumPy's lerp, to the bit


def test_quantile_agrees_with_sympy_and_keeps_float32():
    def f(x):
        return np.sum(np.quantile(x, [0.2, 0.6], axis=0) ** 2)

    _agrees_with_sympy(gradgen.check(f, M45[:, :3]))
    x32 = M45.astype(np.float32)
    for q, dtype in ((0.3, np.float32), ([0.3, 0.6], np.float64)):  # NumPy's result types
        value, grad = gradgen.value_and_grad(lambda x, q=q: np.sum(np.quantile(x, q, axis=1)))(x32)
        assert np.result_type(value) == dtype and grad.dtype == np.float32
        assert value == np.sum(np.quantile(x32, q, axis=1))


def test_quantile_of_python_float_and_nan():
    assert gradgen.grad(lambda x: np.percentile(x, 30) * 2.0)(2.5) == 2.0
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 4.0]])
    with np.errstate(invalid="ignore"):
        out = gradgen.value_and_grad(lambda x: np.quantile(x, 0.3, axis=1) @ np.ones(2))(x)[0]
    assert np.isnan(out)  # a slice holding a nan: nan, as NumPy says


def test_quantile_refusals():
    with pytest.raises(UnsupportedOperation, match="method='weibull'"):
        gradgen.grad(lambda x: np.quantile(x, 0.3, method="weibull"))(M45)
    with pytest.raises(UnsupportedOperation, match="weights="):
        gradgen.grad(lambda x: np.quantile(x, 0.3, method="inverted_cdf", weights=np.ones((4, 5))))(M45)
    with pytest.raises(UnsupportedOperation, match="traced q"):
        gradgen.grad(lambda q: np.quantile(M45, q), argnums=0)(0.3)
    with pytest.raises(ValueError, match=r"range \[0, 100\]"):
        gradgen.grad(lambda x: np.percentile(x, 120))(M45)


# --- np.polyval -------------------------------------------------------------------------------


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)], ids=["p", "x", "both"])
def test_polyval_gradients(argnums):
    def f(p, x):
        return np.sum(_weights(x) * np.polyval(p, x) ** 2)

    p = np.array([0.5, -1.0, 2.0, 0.25])
    assert_gradient(f, p, X8, argnums=argnums)
    _agrees_with_sympy(gradgen.check(f, p, X8[:4], argnums=argnums))


def test_polyval_lists_scalars_and_values():
    def f(x):
        return np.polyval([1.0, -2.0, 0.5], x)

    assert gradgen.grad(f)(0.7) == pytest.approx(2 * 0.7 - 2.0)
    np.testing.assert_array_equal(gradgen.value_and_grad(lambda x: np.sum(f(x)))(X8)[0],
                                  np.sum(f(X8)))
    grad = gradgen.grad(lambda p: np.sum(np.polyval(p, X8)))(np.array([3.0]))
    np.testing.assert_array_equal(grad, [8.0])  # a constant polynomial: x's shape, weight 1
    source = gradgen.emit(lambda p, x: np.sum(np.polyval(p, x)), np.ones(3), X8)
    assert "(p[0] * x + p[1]) * x + p[2]" in source  # Horner's rule, as a person writes it


# --- np.piecewise -----------------------------------------------------------------------------


def _pieces(x):
    return np.piecewise(x, [x < 0, x >= 1], [lambda v: v**2, np.sqrt, lambda v: 3 * v])


def test_piecewise_gradient_and_values():
    def f(x):
        return np.sum(_weights(x) * _pieces(x))

    assert_gradient(f, X8 * 2 - 0.5)
    value, _ = gradgen.value_and_grad(f)(X8 * 2 - 0.5)
    assert value == f(X8 * 2 - 0.5)


def test_piecewise_never_differentiates_another_piece():
    # np.where would evaluate sqrt(-x) on the positive entries too: nan * 0 is nan
    def f(x):
        return np.sum(np.piecewise(x, [x < 0], [lambda v: np.sqrt(-v), lambda v: v]))

    x = np.array([-4.0, 1.0, 2.0])
    with np.errstate(invalid="raise"):
        grad = gradgen.grad(f)(x)
    np.testing.assert_array_equal(grad, [-0.25, 1.0, 1.0])


def test_piecewise_constants_scalars_and_guards():
    def f(x):
        return np.sum(np.piecewise(x, [x < 0], [1.5, lambda v: v * v]))

    np.testing.assert_array_equal(gradgen.grad(f)(np.array([-1.0, 2.0])), [0.0, 4.0])
    g = gradgen.grad(lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v**3]))
    assert g(0.5) == pytest.approx(0.75) and g(-0.5) == -1.0
    df = gradgen.grad(f)
    df(np.array([-1.0, 2.0]))
    # a piece holding another number of entries is another path: traced again, not wrong
    np.testing.assert_array_equal(df(np.array([1.0, 2.0])), [2.0, 4.0])


def test_lists_where_numpy_reads_arrays():
    def f(x):
        k = np.searchsorted([0.0, 0.5, 1.0], x) + np.digitize(x, [0.25, 0.75])
        return np.sum(np.interp(x, [0, 1, 2], [1, 3, 2]) * k)

    x = np.array([0.1, 0.6, 1.5])
    grad = gradgen.grad(f)(x)
    k = np.searchsorted([0.0, 0.5, 1.0], x) + np.digitize(x, [0.25, 0.75])
    np.testing.assert_array_equal(grad, np.array([2.0, 2.0, -1.0]) * k)
