"""NumPy's everyday helpers built on the rows as NumPy's own code computes them: np.cov and
np.corrcoef, np.gradient and np.ediff1d, np.digitize, np.fill_diagonal, np.diagflat,
np.linalg.vector_norm / matrix_norm, np.isclose / np.allclose, and np.sum / np.mean with
where= and initial=. Each gradient is compared with central differences and the emitted
module (and sympy, through gradgen.check, for one of each); values with NumPy's."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient as _assert_gradient

RNG = np.random.default_rng(21)
X36 = RNG.normal(size=(3, 6))
A33 = RNG.normal(size=(3, 3))
W33 = np.linspace(0.0, 1.0, 9).reshape(3, 3)
V7 = RNG.normal(size=7)
COORDS = np.array([0.0, 0.1, 0.3, 0.35, 0.6, 0.9, 1.0])


def assert_gradient(f, *args):
    if f.__name__ == "<lambda>":  # the emitted module is named after the function
        f.__name__ = "f"
    return _assert_gradient(f, *args)


def _same_value(f, *args):
    assert gradgen.value_and_grad(f)(*args)[0] == f(*args)


def _by_sympy(f, *args):
    report = gradgen.check(f, *args)
    assert all(r.method in ("proved", "sympy") for r in report.results), report.table()


# --- np.cov and np.corrcoef -------------------------------------------------------------------

FW = np.array([1, 2, 1, 1, 3, 1])
AW = np.linspace(0.5, 1.5, 6)
COV_CASES = {
    "rows": lambda X: np.sum(np.cov(X) * W33),
    "bias": lambda X: np.sum(np.cov(X, bias=True) * W33),
    "columns": lambda X: np.sum(np.cov(X.T, rowvar=False) * W33),
    "weights": lambda X: np.sum(np.cov(X, fweights=FW, aweights=AW) * W33),
    "ddof0_aweights": lambda X: np.sum(np.cov(X, ddof=0, aweights=AW) * W33),
    "x_and_y": lambda X: np.sum(np.cov(X[0], X[1]) * W33[:2, :2]),
    "one_variable": lambda X: np.cov(X[0]) * 1.0,
    "corrcoef": lambda X: np.sum(np.corrcoef(X) * W33),
    "corrcoef_x_y": lambda X: np.sum(np.corrcoef(X[0], X[2]) * W33[:2, :2]),
}


@pytest.mark.parametrize("name", list(COV_CASES))
def test_cov_and_corrcoef(name):
    f = COV_CASES[name]
    assert_gradient(f, X36)
    _same_value(f, X36)


def test_cov_agrees_with_sympy_and_refuses_traced_weights():
    _by_sympy(lambda X: np.sum(np.cov(X) ** 2), X36[:2, :4])
    with pytest.raises(gradgen.UnsupportedOperation, match="traced aweights"):
        gradgen.grad(lambda X: np.sum(np.cov(X, aweights=X[0] ** 2)))(X36)


# --- np.gradient and np.ediff1d ---------------------------------------------------------------

GRADIENT_CASES = {
    "default": (lambda x: np.sum(np.gradient(x) * np.arange(7.0)), V7),
    "scalar_edge2": (lambda x: np.sum(np.gradient(x, 0.5, edge_order=2) ** 2), V7),
    "coordinates": (lambda x: np.sum(np.gradient(x, COORDS) ** 2), V7),
    "coordinates_edge2": (lambda x: np.sum(np.gradient(x, COORDS, edge_order=2) ** 2), V7),
    "axis": (lambda a: np.sum(np.gradient(a, axis=1) ** 2), X36),
    "every_axis": (lambda a: sum(np.sum(g**2) for g in np.gradient(a, 2.0, 0.5)), X36),
    "ediff1d": (lambda x: np.sum(np.ediff1d(x, to_begin=[0.0], to_end=x[:2]) ** 2), V7),
    "ediff1d_2d": (lambda a: np.sum(np.ediff1d(a) ** 2), X36),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradient_and_ediff1d(name):
    f, x = GRADIENT_CASES[name]
    assert_gradient(f, x)
    _same_value(f, x)


def test_np_gradient_reads_like_numpy_and_agrees_with_sympy():
    source = gradgen.emit(lambda x: np.sum(np.gradient(x) ** 2), V7)
    assert "slope[1:-1] = (x[2:] - x[:-2]) / 2.0" in source
    _by_sympy(lambda x: np.sum(np.gradient(x, COORDS, edge_order=2) ** 2), V7)
    with pytest.raises(gradgen.UnsupportedOperation, match="traced spacing"):
        gradgen.grad(lambda x: np.sum(np.gradient(x, x)))(V7)


# --- np.digitize ------------------------------------------------------------------------------


@pytest.mark.parametrize("bins", [np.array([0.0, 0.5, 1.0]), np.array([1.0, 0.5, 0.0])],
                         ids=["increasing", "decreasing"])
@pytest.mark.parametrize("right", [False, True])
def test_digitize_is_numpy_s_index(bins, right):
    x = np.array([-0.2, 0.3, 0.5, 0.7, 1.4])
    grad = gradgen.grad(lambda x: np.sum(x * np.digitize(x, bins, right=right)))(x)
    np.testing.assert_array_equal(grad, np.digitize(x, bins, right=right))


# --- np.fill_diagonal and np.diagflat ---------------------------------------------------------


def _weighted(b):
    return np.sum(b**2 * np.arange(b.size).reshape(b.shape))


@pytest.mark.parametrize(("shape", "fill", "wrap"), [
    ((3, 3), "zero", False), ((3, 3), "traced", False), ((7, 3), "traced", True),
    ((2, 5), "traced", False), ((7, 3), "zero", False)])
def test_fill_diagonal(shape, fill, wrap):
    def f(a):
        b = a.copy()
        np.fill_diagonal(b, 0.0 if fill == "zero" else a[0, :2] * 3.0, wrap=wrap)
        return _weighted(b)

    a = RNG.normal(size=shape)
    assert_gradient(f, a)
    _same_value(f, a)


def test_fill_diagonal_of_an_argument_leaves_the_caller_s_array_alone():
    a = A33.copy()

    def f(a):
        np.fill_diagonal(a, 1.0)
        return np.sum(a**2)

    grad = gradgen.grad(f)(a)
    np.testing.assert_array_equal(a, A33)
    np.testing.assert_array_equal(np.diag(grad), 0.0)


def test_diagflat_and_the_numpy_2_norms():
    for f in (lambda a: np.sum(np.diagflat(a[0], k=1) ** 2), lambda a: np.sum(np.diagflat(a)),
              lambda a: np.sum(np.linalg.vector_norm(a, axis=1)),
              lambda a: np.linalg.vector_norm(a),
              lambda a: np.linalg.vector_norm(a, ord=1, axis=(0, 1)),
              lambda a: np.linalg.matrix_norm(a), lambda a: np.linalg.matrix_norm(a, ord=1)):
        assert_gradient(f, A33)  # (the 2-norm sums squares where NumPy may use a dot: 1 ulp)
        assert gradgen.value_and_grad(f)(A33)[0] == pytest.approx(f(A33), rel=1e-15)


# --- np.isclose and np.allclose ---------------------------------------------------------------


def test_isclose_masks_and_allclose_guards_the_path():
    def f(x):
        if np.allclose(x, 0.0):
            return np.sum(x)
        return np.sum(x**2 * np.isclose(x, 0.5, atol=1e-3))

    df = gradgen.grad(f)
    np.testing.assert_array_equal(df(np.array([0.0, 1e-9, 0.5])), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(df(np.zeros(3)), [1.0, 1.0, 1.0])  # the other branch
    source = gradgen.emit(f, np.array([0.0, 1e-9, 0.5]))
    assert "np.allclose(x, 0.0)" in source and "np.isclose(x, 0.5, atol=0.001)" in source


# --- np.sum / np.mean with where= and initial= ------------------------------------------------

MASK = X36 > 0
WHERE_CASES = {
    "sum": lambda a: np.sum(a, where=MASK),
    "sum_axis_traced_mask": lambda a: np.sum(a**2, axis=1, where=a > 0.1).sum(),
    "mean": lambda a: np.mean(a, where=MASK),
    "mean_axis_keep": lambda a: np.sum(np.mean(a, axis=0, where=a < 1.0, keepdims=True)),
    "sum_initial": lambda a: np.sum(a, initial=2.0),
    "method": lambda a: a.sum(where=MASK) + a.mean(axis=1, where=MASK[0]).sum(),
}


@pytest.mark.parametrize("name", list(WHERE_CASES))
def test_sum_and_mean_with_where(name):
    f = WHERE_CASES[name]
    assert_gradient(f, X36)
    assert gradgen.value_and_grad(f)(X36)[0] == pytest.approx(f(X36), rel=1e-14)


# --- np.bincount and np.apply_along_axis ------------------------------------------------------


def test_bincount_weights_get_their_bin_s_cotangent():
    w = np.array([0.5, 1.0, 2.0, -1.0])
    bins = np.array([0, 1, 1, 3])
    grad = gradgen.grad(lambda w: np.sum(np.bincount(bins, weights=w) ** 2))(w)
    np.testing.assert_array_equal(grad, 2 * np.bincount(bins, weights=w)[bins])
    assert gradgen.grad(lambda w: np.sum(np.bincount(bins, weights=w) ** 2))(
        w.astype(np.float32)).dtype == np.float32


def test_bincount_of_traced_bins_guards_their_number():
    def f(w):
        k = np.digitize(w, [0.0, 1.5])
        return np.sum(np.bincount(k, weights=w, minlength=4) * np.arange(4.0)) + np.sum(
            w * np.bincount(k)[k])

    df = gradgen.grad(f)
    w = np.array([0.5, 1.0, 2.0, -1.0])
    k = np.digitize(w, [0.0, 1.5])
    np.testing.assert_array_equal(df(w), k + np.bincount(k)[k])
    w2 = w + 5.0  # every entry in the last bin: the same number of bins, another gradient
    k2 = np.digitize(w2, [0.0, 1.5])
    np.testing.assert_array_equal(df(w2), k2 + np.bincount(k2)[k2])
    assert "GuardFailure" in gradgen.emit(f, w)


APPLY_CASES = {
    "scalar": lambda a: np.sum(np.apply_along_axis(lambda r: r @ r, 1, a)),
    "same_length": lambda a: np.sum(np.apply_along_axis(lambda r: np.cumsum(r) ** 2, 0, a)
                                    * W33[:, :1]),
    "matrix_out": lambda a: np.sum(np.apply_along_axis(lambda r: np.outer(r, r[:2]), 1, a)
                                   * np.linspace(0, 1, 18).reshape(3, 3, 2)),
    "extra_args": lambda a: np.sum(np.apply_along_axis(lambda r, p: np.sum(r**p), 0, a, 3) ** 2),
    "numpy_function": lambda a: np.sum(np.apply_along_axis(np.max, -1, a) ** 2),
}


@pytest.mark.parametrize("name", list(APPLY_CASES))
def test_apply_along_axis(name):
    f = APPLY_CASES[name]
    assert_gradient(f, A33)
    assert gradgen.value_and_grad(f)(A33)[0] == pytest.approx(f(A33), rel=1e-15)


# --- np.nonzero, np.where(c), np.flatnonzero, np.argwhere -------------------------------------


def test_positions_of_a_traced_mask():
    x = np.array([0.5, -1.0, 2.0, -0.3, 1.0])
    df = gradgen.grad(lambda x: np.sum(x[np.where(x > 0)] ** 2) + np.sum(x[np.flatnonzero(x < 0)]))
    np.testing.assert_array_equal(df(x), [1.0, 1.0, 4.0, 1.0, 2.0])
    np.testing.assert_array_equal(df(-x), [1.0, 2.0, 1.0, 0.6, 1.0])  # another count: retraced
    a = np.array([[1.0, -2.0], [0.5, 3.0]])
    for f in (lambda a: np.sum(a[np.nonzero(a > 0)] ** 2),
              lambda a: np.sum(a[tuple(np.argwhere(a > 0).T)] ** 2),
              lambda a: np.sum(a[a.nonzero()] * a[np.nonzero(a)])):
        assert_gradient(f, a)
    assert "np.count_nonzero(" in gradgen.emit(lambda x: np.sum(x[np.where(x > 0)]), x)


# --- np.linalg.lstsq --------------------------------------------------------------------------

TALL = RNG.normal(size=(5, 3))
B5 = RNG.normal(size=5)
LSTSQ_CASES = {
    "solution": (lambda a: np.sum(np.linalg.lstsq(a, B5, rcond=None)[0] ** 2), TALL),
    "residuals_2d": (lambda a: np.sum(np.linalg.lstsq(a, np.stack([B5, B5**2], 1))[1]), TALL),
    "residuals_and_s": (lambda a: np.sum(np.linalg.lstsq(a, B5)[1]) + np.sum(
        np.linalg.lstsq(a, B5)[3]), TALL),
    "in_b": (lambda b: np.sum(np.linalg.lstsq(TALL, b, rcond=None)[0] ** 2), B5),
    "wide_min_norm": (lambda a: np.sum(np.linalg.lstsq(a.T, B5[:3], rcond=None)[0] ** 2), TALL),
}


@pytest.mark.parametrize("name", list(LSTSQ_CASES))
def test_lstsq_of_a_full_rank_matrix(name):
    f, x = LSTSQ_CASES[name]
    assert_gradient(f, x)
    assert gradgen.value_and_grad(f)(x)[0] == pytest.approx(f(x), rel=1e-12)


def test_lstsq_refuses_a_rank_deficient_matrix():
    with pytest.raises(gradgen.UnsupportedOperation, match="rank-deficient"):
        gradgen.grad(lambda a: np.sum(np.linalg.lstsq(a, B5)[0]))(np.ones((5, 3)))


# --- np.vectorize -----------------------------------------------------------------------------


@np.vectorize
def _huber(t):
    if abs(t) < 1.0:
        return 0.5 * t * t
    return abs(t) - 0.5


def vectorized(x):
    scaled = np.vectorize(lambda t, c: math.exp(-t * t) * c, excluded={1})
    return np.sum(scaled(x, 2.0)) + np.sum(_huber(x)) + np.sum(
        np.vectorize(lambda t: t**2 + 1.0)(x.reshape(2, 3)) * np.arange(6.0).reshape(2, 3))


def test_vectorize_runs_the_function_per_entry():
    x = np.array([-1.5, -0.3, 0.2, 0.7, 1.2, 2.0])
    assert_gradient(vectorized, x)
    df = gradgen.grad(vectorized)
    df(x)
    np.testing.assert_allclose(df(-x), _assert_gradient(vectorized, -x)[0])  # other branches
    with pytest.raises(gradgen.UnsupportedOperation, match="signature="):
        gradgen.grad(lambda x: np.sum(np.vectorize(np.sum, signature="(n)->()")(x)))(x)


# --- np.max/np.min with where= and initial=, ufunc.outer, np.block, np.put --------------------

X5 = np.array([0.3, 1.5, -0.2, 0.9, 2.0])
MORE_CASES = {
    "max_where_initial": (lambda x: np.max(x, where=x < 1.0, initial=-10.0), X5),
    "max_initial": (lambda x: np.max(x, initial=5.0) + np.max(x, initial=0.0), X5),
    "min_axis_where": (lambda x: np.sum(np.min(np.stack([x, x**2]), axis=0, initial=1.0,
                                               where=np.array([1, 0, 1, 1, 0], bool)) ** 2), X5),
    "outer": (lambda x: np.sum(np.add.outer(x, x) ** 2) + np.sum(np.multiply.outer(x, [1.0, 2.0]))
              + np.sum(np.maximum.outer(A33, x)), X5),
    "block": (lambda x: np.sum(np.block([[np.outer(x, x), np.eye(5)], [x[None, :], x[None, :] ** 2]])
                               * np.linspace(0, 1, 60).reshape(6, 10)), X5),
    "block_1d": (lambda x: np.sum(np.block([x[:2], x[3], 1.0]) ** 2), X5),
}


@pytest.mark.parametrize("name", list(MORE_CASES))
def test_more_numpy_spellings(name):
    f, x = MORE_CASES[name]
    assert_gradient(f, x)
    assert gradgen.value_and_grad(f)(x)[0] == f(x)


def test_put_writes_a_traced_array_in_place():
    def put(x):
        y = x.copy()
        np.put(y, [0, -1], x[1:3] * 3.0)
        z = np.zeros(6)
        np.put(z, [1, 4, 5], x[:2])  # v repeats, as in NumPy
        return np.sum(y**2 * np.arange(5.0)) + np.sum(z**2 * np.arange(6.0))

    assert_gradient(put, X5)
    with pytest.raises(gradgen.UnsupportedOperation, match="not traced"):
        gradgen.grad(lambda x: np.put(A33, [0], x[:1]) or np.sum(x))(X5)
    with pytest.raises(ValueError, match="specify 'initial'"):
        gradgen.grad(lambda x: np.max(x, where=x > 0))(X5)
