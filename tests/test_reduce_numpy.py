"""The reductions as NumPy spells them: np.max/min/prod/var/std/cumsum/cumprod/average/ptp,
np.linalg.norm's orders, the nan forms and the index and count functions, called inside user
functions with every kind of axis, keepdims, Python floats and 0-d arrays. Each gradient is
compared with central differences and with the emitted module; the conventions at kinks
(tied maxima share the gradient, prod and cumprod at zeros, std at zero variance) are pinned."""

from __future__ import annotations

import numpy as np
import pytest

import gradgen
from gradgen.errors import UnsupportedOperation

from .conftest import assert_gradient, numeric_grad, run_emitted

RNG = np.random.default_rng(11)
M34 = RNG.normal(size=(3, 4))
T234 = RNG.normal(size=(2, 3, 4))
V5 = RNG.normal(size=5)
POS34 = RNG.uniform(0.5, 2.0, size=(3, 4))



def check(f, x, rtol=1e-6):
    """gradgen's gradient equals central differences, has x's type, shape and dtype, and the
    emitted module computes the same value and gradient."""
    grad, _ = assert_gradient(f, x, rtol=rtol)
    if isinstance(x, float):
        assert type(grad) is float
    else:
        assert isinstance(grad, np.ndarray) and grad.dtype == x.dtype
    return grad


def _weights(out):
    """Distinct weights shaped like ``out``, so each output entry's cotangent differs."""
    return np.linspace(0.5, 1.5, 24)[: np.size(out)].reshape(np.shape(out))


def _named(fn, name):
    fn.__name__ = name
    return fn


# --- every reduction, every way of giving its axes ---------------------------------------------

REDUCTIONS = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "amax": np.amax, "amin": np.amin, "nanmax": np.nanmax, "nanmin": np.nanmin,
    "nansum": np.nansum, "nanmean": np.nanmean, "var": np.var, "std": np.std, "ptp": np.ptp,
    "average": np.average,
}
AXES = [
    ("all", {}),
    ("axis0", {"axis": 0}),
    ("axis_neg", {"axis": -1}),
    ("axis_tuple_keep", {"axis": (0, 2), "keepdims": True}),
    ("axis_none_keep", {"axis": None, "keepdims": True}),
]


@pytest.mark.parametrize("axes", [pytest.param(kw, id=name) for name, kw in AXES])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_axes(name, axes):
    fn = REDUCTIONS[name]

    def f(x):
        out = fn(x, **axes)
        return np.sum(_weights(out) * out**2)

    check(_named(f, f"f_{name}"), T234)


@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("x", [2.5, np.array(2.5), np.array([2.5])], ids=["py", "0d", "1"])
def test_reduction_of_python_float_and_0d(name, x):
    fn = REDUCTIONS[name]

    def f(x):
        return fn(x) * 3.0 + fn(x) ** 2

    if name == "std":  # zero spread: a nan gradient (see test_std_at_zero_variance_is_nan)
        return
    grad = check(_named(f, f"f_{name}"), x)
    assert np.shape(grad) == np.shape(x)


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "var", "std", "nansum",
                                  "nanmean", "cumsum", "cumprod", "ptp"])
def test_float32_stays_float32(name):
    fn = getattr(np, name)
    x = M34.astype(np.float32)
    assert fn(x, axis=1).dtype == np.float32
    grad = gradgen.grad(lambda x: np.sum(fn(x, axis=1) ** 2))(x)
    assert grad.dtype == np.float32
    ref = gradgen.grad(lambda x: np.sum(fn(x, axis=1) ** 2))(x.astype(np.float64))
    np.testing.assert_allclose(grad, ref, rtol=1e-4, atol=1e-4)


def test_array_methods_reach_the_rows():
    def methods(x):
        return (x.max(axis=0).sum() + x.min() + x.prod(axis=1).sum() + x.var(ddof=1)
                + x.std(axis=-1).sum() + x.cumsum().sum() + x.cumprod(axis=0).sum()
                + x.mean(keepdims=True).sum())

    check(methods, M34)


# --- the stable log-softmax and logsumexp: the max shift's gradient cancels -----------------


def log_softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))


def test_stable_log_softmax():
    targets = RNG.normal(size=(3, 4))

    def loss(x):
        return np.sum(targets * log_softmax(x))

    grad = check(loss, M34 * 30.0)  # large entries: only the shifted form stays finite
    softmax = np.exp(log_softmax(M34 * 30.0))
    expected = targets - softmax * np.sum(targets, axis=-1, keepdims=True)
    np.testing.assert_allclose(grad, expected, rtol=1e-9, atol=1e-12)
    grad32 = gradgen.grad(loss)(M34.astype(np.float32))
    assert grad32.dtype == np.float32


def test_logsumexp_with_a_tied_maximum():
    x = np.array([[1.0, 3.0, 3.0, -2.0], [0.5, 0.5, 0.5, 0.5]])

    def logsumexp(x):
        m = np.max(x, axis=1, keepdims=True)
        return np.sum(np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)) + m)

    grad = check(logsumexp, x)
    np.testing.assert_allclose(grad, np.exp(x) / np.sum(np.exp(x), axis=1, keepdims=True))
    hessian = gradgen.hessian(logsumexp)(x)
    p = np.exp(x[0]) / np.sum(np.exp(x[0]))
    np.testing.assert_allclose(hessian[0, :, 0, :], np.diag(p) - np.outer(p, p), atol=1e-12)


# --- ties: equal shares, as in JAX -------------------------------------------------------------


def test_max_ties_share_the_gradient_equally():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_array_equal(gradgen.grad(lambda x: np.max(x))(x), [0, 0.5, 0.5, 0])
    np.testing.assert_array_equal(gradgen.grad(lambda x: np.amin(-x))(x), [0, -0.5, -0.5, 0])
    m = np.array([[2.0, 2.0, 2.0], [1.0, 5.0, 0.0]])
    np.testing.assert_allclose(gradgen.grad(lambda m: np.sum(m.max(axis=1)))(m),
                               [[1 / 3, 1 / 3, 1 / 3], [0, 1, 0]])
    m = np.array([[2.0, 2.0, 2.0], [1.0, 5.0, 2.0]])
    np.testing.assert_array_equal(gradgen.grad(lambda m: np.sum(np.min(m, axis=0)))(m),
                                  [[0, 1, 0.5], [1, 0, 0.5]])
    np.testing.assert_array_equal(gradgen.grad(lambda x: np.nanmax(x))(x), [0, 0.5, 0.5, 0])
    # |x| ties at +-3 in the inf-norm: shares with the sign of each entry
    y = np.array([3.0, -3.0, 1.0])
    np.testing.assert_array_equal(
        gradgen.grad(lambda y: np.linalg.norm(y, ord=np.inf))(y), [0.5, -0.5, 0])
    # ptp of a constant: max and min are the same entries, the shares cancel
    np.testing.assert_array_equal(gradgen.grad(lambda x: np.ptp(x))(np.ones(3)), np.zeros(3))


def test_tie_convention_in_the_emitted_module():
    def f(x):
        return np.sum(np.max(x, axis=0))

    x = np.array([[1.0, 4.0], [1.0, 2.0]])
    module = run_emitted(gradgen.emit(f, x))
    np.testing.assert_array_equal(module["f_grad"](x), [[0.5, 1.0], [0.5, 0.0]])
    np.testing.assert_array_equal(module["f_grad"](np.array([[7.0, 4.0], [7.0, 4.0]])),
                                  [[0.5, 0.5], [0.5, 0.5]])


# --- prod at zeros: no division, right at second order -------------------------------------


def _prod_hessian(x):
    n = len(x)
    return np.array([[np.prod(np.delete(x, [i, j])) if i != j else 0.0 for j in range(n)]
                     for i in range(n)])


@pytest.mark.parametrize("x", [[2.0, -1.5, 3.0, 0.5], [2.0, 0.0, 3.0, 4.0],
                               [2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 5.0]],
                         ids=["no_zero", "one_zero", "two_zeros", "three_zeros"])
def test_prod_at_zeros(x):
    x = np.array(x)

    def prod(x):
        return np.prod(x)

    expected = [np.prod(np.delete(x, i)) for i in range(len(x))]
    np.testing.assert_allclose(check(prod, x), expected, rtol=1e-14)
    np.testing.assert_allclose(gradgen.hessian(prod)(x), _prod_hessian(x), rtol=1e-14,
                               atol=1e-14)
    module = run_emitted(gradgen.emit(prod, np.array([1.0, 2.0, 3.0, 4.0])))
    np.testing.assert_allclose(module["prod_grad"](x), expected, rtol=1e-14)  # no guard


def test_prod_with_a_zero_in_one_row():
    x = np.array([[1.5, 0.0, 2.0], [1.0, -2.0, 0.5]])

    def rows(x):
        return np.sum(np.prod(x, axis=-1) * np.array([2.0, 3.0]))

    np.testing.assert_allclose(check(rows, x), [[0, 6.0, 0], [-3.0, 1.5, -6.0]])


# --- cumsum and cumprod ------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": -1}, {"axis": None}],
                         ids=["flat", "axis0", "axis_neg", "none"])
@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_cumulative(name, kw):
    fn = getattr(np, name)

    def f(x):
        out = fn(x, **kw)
        return np.sum(_weights(out) * out)

    check(_named(f, f"f_{name}"), M34)


def test_cumulative_of_python_float_and_0d():
    for x in (2.5, np.array(2.5)):
        check(_named(lambda x: np.sum(np.cumsum(x) * 2.0), "cumsum2"), x)
        check(_named(lambda x: np.sum(np.cumprod(x) * 2.0), "cumprod2"), x)


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, 4.0, 1.5], [2.0, 0.0, 3.0, 0.0, 1.5],
                               [0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0, 0.0]],
                         ids=["one_zero", "two_zeros", "zero_first", "zero_last"])
def test_cumprod_at_zeros(x):
    x = np.array(x)
    w = np.array([0.3, -1.2, 0.7, 1.1, 0.5])

    def cumprod(x):
        return np.sum(w * np.cumprod(x))

    check(cumprod, x)
    hessian = gradgen.hessian(cumprod)(x)
    reference = np.array([numeric_grad(lambda y, i=i: gradgen.grad(cumprod)(y)[i], (x,))
                          for i in range(len(x))])
    zeros = np.flatnonzero(x == 0)
    if len(zeros) >= 2:  # documented: the second zero's slope in the first is dropped
        k, m = zeros[:2]
        reference[m, k] = hessian[m, k] = 0.0
    np.testing.assert_allclose(hessian, reference, atol=1e-6)


# --- var and std ----------------------------------------------------------------------------


def test_std_with_ddof():
    def std(x):
        return np.sum(np.std(x, axis=1, ddof=1) * np.array([1.0, 2.0, 3.0]))

    grad = check(std, M34)
    centered = M34 - M34.mean(axis=1, keepdims=True)
    expected = (centered / (3 * M34.std(axis=1, ddof=1, keepdims=True))
                * np.array([[1.0], [2.0], [3.0]]))
    np.testing.assert_allclose(grad, expected, rtol=1e-12)
    check(_named(lambda x: np.var(x, ddof=1, keepdims=True).sum(), "var1"), M34)
    check(_named(lambda x: np.std(x, axis=(0, 2), ddof=2).sum(), "std2"), T234)
    hessian = gradgen.hessian(lambda x: np.std(x, ddof=1))(V5)
    reference = np.array([numeric_grad(
        lambda y, i=i: gradgen.grad(lambda x: np.std(x, ddof=1))(y)[i], (V5,)) for i in range(5)])
    np.testing.assert_allclose(hessian, reference, atol=1e-6)


def test_std_at_zero_variance_is_nan():
    """Like JAX: sqrt's slope is infinite at 0 and the centered entries are all 0."""
    with np.errstate(invalid="ignore"):
        grad = gradgen.grad(lambda x: np.std(x))(np.full(3, 2.0))
    assert np.all(np.isnan(grad))
    assert np.all(gradgen.grad(lambda x: np.var(x))(np.full(3, 2.0)) == 0)


# --- np.linalg.norm ---------------------------------------------------------------------------

NORMS = [
    ("vector", V5, {}), ("vector_ord2", V5, {"ord": 2}), ("vector_ord1", V5, {"ord": 1}),
    ("vector_inf", V5, {"ord": np.inf}), ("vector_neginf", V5, {"ord": -np.inf}),
    ("vector_p3", V5, {"ord": 3}), ("vector_p_half", V5, {"ord": 0.5}),
    ("vector_ord0", V5, {"ord": 0}), ("all_entries", T234, {}),
    ("all_keepdims", T234, {"keepdims": True}), ("rows", M34, {"axis": 1}),
    ("rows_neg_keep_p3", M34, {"axis": -1, "ord": 3, "keepdims": True}),
    ("cols_inf", M34, {"axis": 0, "ord": np.inf}), ("fro", M34, {"ord": "fro"}),
    ("matrix", M34, {}), ("matrix_1", M34, {"ord": 1}), ("matrix_neg1", M34, {"ord": -1}),
    ("matrix_inf", M34, {"ord": np.inf}), ("matrix_neginf", M34, {"ord": -np.inf}),
    ("matrix_1_keep", M34, {"ord": 1, "keepdims": True}),
    ("batch_1", T234, {"axis": (2, 0), "ord": 1}),
    ("batch_inf_keep", T234, {"axis": (0, 2), "ord": np.inf, "keepdims": True}),
    ("batch_fro", T234, {"axis": (1, 2)}), ("python_float", -2.5, {}), ("zero_d", np.array(-2.5), {}),
]


@pytest.mark.parametrize(("x", "kw"), [pytest.param(x, kw, id=name) for name, x, kw in NORMS])
def test_norm(x, kw):
    def norm(x):
        n = np.linalg.norm(x, **kw)
        return np.sum(_weights(n) * n)

    check(norm, x)


def test_norm_float32_and_zero_vector():
    grad = gradgen.grad(lambda x: np.linalg.norm(x, axis=1).sum())(M34.astype(np.float32))
    assert grad.dtype == np.float32
    with np.errstate(invalid="ignore"):  # documented: u / norm(u) at u = 0 is nan, as in JAX
        assert np.all(np.isnan(gradgen.grad(lambda x: np.linalg.norm(x))(np.zeros(3))))


@pytest.mark.parametrize(("x", "kw"), [
    (M34, {"ord": 2}), (M34, {"ord": -2}), (M34, {"ord": "nuc"}),
    (M34.T, {"ord": "nuc", "keepdims": True}), (T234, {"ord": 2, "axis": (2, 0)})],
    ids=["two", "minus_two", "nuc", "nuc_keepdims", "batch_two"])
def test_matrix_norms_of_singular_values(x, kw):
    """Through np.linalg.svd(..., compute_uv=False), the linalg family's svdvals row."""
    from gradgen.ops import OPS

    if "svdvals" not in OPS:
        with pytest.raises(UnsupportedOperation, match="np.linalg.norm"):
            gradgen.grad(lambda x: np.linalg.norm(x, **kw))(x)
        return

    def norm(x):
        n = np.linalg.norm(x, **kw)
        return np.sum(_weights(n) * n)

    check(norm, x, rtol=1e-5)


def test_norm_arguments_numpy_rejects_raise_numpys_error():
    with pytest.raises(ValueError):
        gradgen.grad(lambda x: np.linalg.norm(x, ord="fro"))(V5)


# --- np.average ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [
    {}, {"axis": 0}, {"weights": POS34}, {"weights": POS34, "axis": -1},
    {"weights": POS34[0], "axis": 1}, {"weights": POS34[:, 0], "axis": 0, "keepdims": True},
    {"weights": POS34.T, "axis": (1, 0)}], ids=["mean", "axis", "weights", "weights_axis",
                                                 "vector_weights", "keepdims", "tuple_axis"])
def test_average_gradient_to_a_and_weights(kw):
    if "weights" in kw and np.shape(kw["weights"]) == (4, 3):
        kw = {**kw, "weights": POS34}

    def average(x):
        return np.sum(np.average(x, **kw) ** 2)

    check(average, M34)
    if "weights" not in kw:
        return

    def by_weights(w):
        return np.sum(np.average(M34, **{**kw, "weights": w}) ** 2)

    check(by_weights, kw["weights"])


def test_average_returned():
    w = POS34[0]

    def both(w):
        avg, total = np.average(M34, axis=1, weights=w, returned=True)
        return np.sum(avg * total)

    check(both, w)
    avg, total = gradgen.value_and_grad(
        lambda x: np.sum(np.average(x, axis=1, returned=True)[0]))(M34)[0], None
    np.testing.assert_allclose(avg, np.sum(np.mean(M34, axis=1)))
    _, total = np.average(M34, axis=1, returned=True)
    traced_total = []
    gradgen.grad(lambda x: traced_total.append(np.average(x, axis=1, returned=True)[1])
                 or np.sum(x))(M34)
    np.testing.assert_array_equal(traced_total[0], total)  # the count: a plain constant


# --- np.median: np.sort, then the mean of the middle entries ----------------------------------


@pytest.mark.parametrize(("x", "kw"), [
    (V5, {}), (V5[:4], {}), (M34, {}), (M34, {"axis": 1}), (M34, {"axis": -2, "keepdims": True}),
    (T234, {"axis": 2}), (M34, {"keepdims": True}), (2.5, {}), (np.array(2.5), {})],
    ids=["odd", "even", "all", "rows", "cols_keep", "last_axis", "all_keep", "py", "0d"])
def test_median(x, kw):
    def median(x):
        out = np.median(x, **kw)
        return np.sum(_weights(out) * out)

    check(median, x)


def test_median_of_a_slice_with_nan_is_nan():
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, np.inf]])
    with np.errstate(invalid="ignore"):
        value = gradgen.value_and_grad(lambda x: np.median(x, axis=1)[1])(x)[0]
        module = run_emitted(gradgen.emit(lambda x: np.median(x, axis=1).sum(), x))
        np.testing.assert_array_equal(
            module["anonymous_value_and_grad"](x)[0], np.sum(np.median(x, axis=1)))
    assert value == 2.0  # an inf is a number: the median of [1, 2, inf] is 2


# --- the nan forms --------------------------------------------------------------------------


def test_nan_entries_get_zero_gradient():
    x = np.array([[1.0, np.nan, 3.0, 2.0], [np.nan, np.nan, np.nan, np.nan]])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        grads = [gradgen.grad(lambda x, f=f: np.nansum(f(x, axis=1)))(x)
                 for f in (np.nansum, np.nanmean, np.nanmax, np.nanmin)]
    expected = [[1, 0, 1, 1], [1 / 3, 0, 1 / 3, 1 / 3], [0, 0, 1, 0], [1, 0, 0, 0]]
    for g, row in zip(grads, expected, strict=True):
        np.testing.assert_allclose(g[0], row)
        np.testing.assert_array_equal(g[1], 0)  # an all-nan row: zero, not nan


# --- indices and counts: no gradient, usable to index --------------------------------------


def test_argmax_argmin_argsort_index_traced_arrays():
    def picks(x):
        i = np.argmax(x[0])
        order = np.argsort(x[2])
        return x[1, i] * 2.0 + x[2][order] @ np.arange(4.0) + x[0, np.argmin(x[0])]

    grad = check(picks, M34)
    assert grad[1, np.argmax(M34[0])] == 2.0
    np.testing.assert_array_equal(grad[2, np.argsort(M34[2])], np.arange(4.0))


def test_argmax_along_an_axis_picks_rows():
    def row_max(x):
        return np.sum(x[np.arange(3), np.argmax(x, axis=-1)] ** 2)

    grad = check(row_max, M34)
    expected = np.zeros_like(M34)
    expected[np.arange(3), np.argmax(M34, axis=1)] = 2 * M34.max(axis=1)
    np.testing.assert_allclose(grad, expected)

    def kept(x):
        idx = np.argmin(x, axis=0, keepdims=True)
        assert idx.shape == (1, 4)
        return np.sum(x * idx)

    np.testing.assert_array_equal(check(kept, M34),
                                  np.broadcast_to(np.argmin(M34, axis=0), (3, 4)))


def test_counts_and_truth_values_have_no_gradient():
    def counted(x):
        mask = x > 0
        return (np.sum(x[mask]) * np.count_nonzero(mask) + np.any(x > 1) * np.sum(x)
                + np.all(x < 5, axis=0).sum() * np.sum(x))

    grad = check(counted, M34)
    count = np.count_nonzero(M34 > 0)
    expected = (M34 > 0) * count + (np.any(M34 > 1) + np.all(M34 < 5, axis=0).sum())
    np.testing.assert_allclose(grad, expected)


# --- what gradgen refuses, by name ------------------------------------------------------------

REFUSED = [
    ("np.max", lambda x: np.max(x, out=np.zeros(()))),
    ("np.nanmin", lambda x: np.nanmin(x, initial=9.0)),
    ("np.mean", lambda x: np.mean(x, dtype=np.int64)),
    ("np.prod", lambda x: np.prod(x, dtype=np.int64)),
    ("np.prod", lambda x: np.prod(x, initial=2.0)),
    ("np.cumsum", lambda x: np.cumsum(x, out=np.zeros(12))),
    ("np.var", lambda x: np.var(x, mean=np.mean(x, keepdims=True))),
    ("np.std", lambda x: np.std(x[:, :1], axis=1, ddof=1)),
    ("np.nanmax", lambda x: np.nanmax(x, out=np.zeros(()))),
    ("np.nanmean", lambda x: np.nanmean(x, where=x > 0)),
    ("np.median", lambda x: np.median(x, axis=(0, 1))),
    ("np.median", lambda x: np.median(x, out=np.zeros(()))),
    ("np.argsort", lambda x: np.argsort(x, order="f")),
    ("np.any", lambda x: np.any(x, where=x > 0) * np.sum(x)),
    ("np.ptp", lambda x: np.ptp(x, out=np.zeros(()))),
]


@pytest.mark.parametrize(("name", "f"), [pytest.param(n, f, id=f"{n}-{i}")
                                         for i, (n, f) in enumerate(REFUSED)])
def test_unsupported_arguments_are_refused(name, f):
    with pytest.raises(UnsupportedOperation) as info:
        gradgen.grad(f)(M34)
    assert name in str(info.value)


def test_float_dtype_is_honoured():
    x = M34.astype(np.float32)
    grad = gradgen.grad(lambda x: np.sum(x, dtype=np.float64) + np.var(x, dtype=np.float64))(x)
    assert grad.dtype == np.float32
    value = gradgen.value_and_grad(lambda x: np.mean(x, dtype=np.float64))(x)[0]
    assert value.dtype == np.float64
