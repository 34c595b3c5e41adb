"""NumPy as people write it: in-place updates, buffers, views, advanced indexing, array methods,
np.array of traced values and gradgen.defvjp, each checked against finite differences and
through the emitted module (whose forward must compute what the program computes)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import gradgen

from .conftest import fresh, numeric_grad, run_emitted, run_isolated


def check(f, *args, argnums=0, rtol=1e-6):
    """gradgen's gradient equals central differences, the emitted module gives the same value
    and gradient as the plain call, and the caller's arrays are left as they were."""
    before = [np.copy(a) for a in args]
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    grads = gradgen.grad(f, argnums=nums)(*args)
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)  # tracing never writes into the caller's arrays
    for k, g in zip(nums, grads, strict=True):
        ref = numeric_grad(f, args, k)
        np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * max(1.0, np.abs(ref).max()))
        assert np.shape(g) == np.shape(args[k])
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)
    module = run_emitted(gradgen.emit(f, *args, argnums=nums))
    value, emitted = module[f"{f.__name__}_value_and_grad"](*args)
    np.testing.assert_allclose(value, f(*fresh(args)), rtol=1e-12)
    for g, e in zip(grads, emitted if isinstance(emitted, tuple) else (emitted,), strict=True):
        np.testing.assert_allclose(e, g, rtol=1e-12, atol=1e-14)
    for a, b in zip(args, before, strict=True):
        np.testing.assert_array_equal(a, b)  # the module never writes into its arguments
    return grads


RNG = np.random.default_rng(7)
X3 = np.array([0.7, -1.3, 2.1])
M34 = RNG.normal(size=(3, 4))


# --- in-place updates as new versions -------------------------------------------------------


def rnn(W, U, xs):
    T, n = xs.shape[0], W.shape[0]
    h = np.zeros((T + 1, n))
    for t in range(T):
        h[t + 1] = np.tanh(W @ h[t] + U @ xs[t])
    return np.sum(h[-1] ** 2) + 0.1 * np.sum(h * h)


def test_buffer_filled_in_a_loop():
    W, U, xs = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(3, 2)), RNG.normal(size=(5, 2))
    check(rnn, W, U, xs, argnums=(0, 1))
    source = gradgen.emit(rnn, W, U, xs, argnums=(0, 1))
    forward = source.split("def rnn_value_and_grad")[1]
    assert "h = np.zeros((6, 3), dtype=np.float64)" in forward
    assert "h[1] = " in forward and "h[5] = " in forward
    assert "h.copy()" not in forward  # one buffer, written in place
    # nor in the backward (whose seed, a 1 multiplying arrays, is folded away)
    assert ".copy()" not in source.split("def rnn_value_and_grad")[0].split("def rnn_grad")[1]


def overwrite(x):
    y = x * 2.0
    y[1] = 5.0  # the old y[1] (2 * x[1]) must not reach the gradient
    y[0] += x[2] * x[0]
    return np.sum(y * y)


def test_overwritten_values_do_not_leak():
    g = check(overwrite, X3)[0]
    assert g[1] == 0.0


def augmented(a, b):
    a = a.copy()
    a += b
    a *= b
    a -= 1.0
    a /= 2.0
    a **= 2
    return np.sum(a)


def test_augmented_assignment_on_arrays():
    check(augmented, X3, np.array([0.5, 1.5, -0.5]), argnums=(0, 1))


def mutates_its_argument(a, b):
    a[0] = b[1] * 3.0
    a += b
    return np.sum(a * a)


def test_writing_into_an_argument_is_the_program_as_written():
    a, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, -0.5, 2.0])
    check(mutates_its_argument, a, b, argnums=(0, 1))
    assert gradgen.grad(mutates_its_argument)(a, b)[0] == 0.0


def ufunc_out(x):
    out = np.empty_like(x)
    np.multiply(x, x, out=out)
    np.add(out, x, out=out)
    np.sin(out, out=out)
    return np.sum(out)


def test_ufunc_out_argument():
    check(ufunc_out, X3)


def add_at(x):
    acc = np.zeros(4)
    np.add.at(acc, [0, 2, 0, 3], x)
    return np.sum(acc ** 2)


def test_add_at_accumulates_repeated_indices():
    check(add_at, np.array([0.5, 1.0, -2.0, 3.0]))


def repeated_set(x):
    h = np.zeros(3)
    h[[0, 0, 1]] = x  # NumPy keeps the last write to h[0]
    return np.sum(h * h)


def test_repeated_index_assignment_keeps_the_last_write():
    g = check(repeated_set, np.array([0.5, 1.0, -2.0]))[0]
    assert g[0] == 0.0


def put_along(x):
    h = np.zeros((2, 3))
    np.put_along_axis(h, np.array([[2], [0]]), x[:2].reshape(2, 1) * 3.0, axis=1)
    return np.sum(h * h) + np.sum(h * x[2])


def test_put_along_axis():
    check(put_along, X3)


def views(x):
    a = x.reshape(2, 3) * 1.0
    row = a[0]
    a[0, 1] = x[5] * 4.0  # row sees it: it is a view of a
    col = a.T[1]
    col *= 3.0  # writes through two views into a
    return np.sum(row * row) + np.sum(a ** 3)


def test_views_see_writes_and_write_back():
    check(views, np.array([0.3, -0.4, 0.5, 0.6, -0.7, 0.8]))


def rows_by_iteration(m):
    total = 0.0
    for row in m:
        total = total + np.sum(row * row)
    return total


def test_iterating_over_rows():
    check(rows_by_iteration, M34)


def buffer_kinds(x):
    a = np.zeros(3)
    b = np.ones_like(x)
    c = np.full((3,), 2.0)
    d = np.array([0.0, 0.0, 0.0])
    a[:] = x
    b[1] = x[0]
    c[2] = x[1] * x[2]
    d[0:2] = x[1:] ** 2
    return np.sum(a * b * c) + np.sum(d)


def test_buffers_of_every_kind():
    check(buffer_kinds, X3)


def test_float32_buffer_stays_float32():
    def f(x):
        h = np.zeros(3, dtype=np.float32)
        h[0] = x[1] * x[2]
        h[1:] += x[:2]
        return np.sum(h * h)

    x = X3.astype(np.float32)
    g = gradgen.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numeric_grad(f, (X3,), 0, eps=1e-3), rtol=1e-2)
    assert "float64" not in gradgen.emit(f, x)


def test_a_constant_buffer_is_a_plain_number_to_python():
    def f(x):
        scale = np.array([2.0, 3.0])
        n = int(scale[1])  # a constant: no guard, no error
        return float(scale[0]) * np.sum(x) * n + math.sqrt(scale[1]) * x[0]

    check(f, X3)


# --- indexing -------------------------------------------------------------------------------


def fancy(x):
    picked = x[[0, 2, 0]]  # repeated: its cotangents add up
    masked = x[x > 0]  # a traced mask: the count is a guard
    fixed = x[np.array([True, False, True])]
    return np.sum(picked ** 2) + np.sum(masked ** 3) + np.sum(fixed)


def test_integer_and_boolean_indexing():
    check(fancy, X3)


def test_a_traced_mask_guards_its_count():
    df = gradgen.grad(fancy)
    df(X3)
    other = np.array([0.7, 1.3, 2.1])  # three positives: another count, a retrace
    np.testing.assert_allclose(df(other), numeric_grad(fancy, (other,), 0), rtol=1e-6)
    source = gradgen.emit(fancy, X3)
    assert "GuardFailure" in source and "count_nonzero" in source


def mixed(m):
    rows = m[[0, 2], 1:3]
    cols = m[:, [3, 0]]
    return np.sum(rows * rows) + np.sum(cols ** 3) + m[1, -1]


def test_mixed_basic_and_advanced_indexing():
    check(mixed, M34)


def argmax_index(x):
    i = np.argmax(x)
    return x[i] * 2.0 + np.sum(x[np.argsort(x)][:2])


def test_indexing_with_traced_integers():
    check(argmax_index, X3)


# --- array methods and np.array of traced values ----------------------------------------------


def methods(m):
    a = m.T.reshape(-1).copy()
    b = m.ravel()[:4] + m.flatten()[4:8]
    c = m.sum(axis=0) * m.mean(axis=1, keepdims=True)
    d = m.astype(np.float64).transpose(1, 0).dot(np.ones(3))
    return a.sum() + (b * b).sum() + c.sum() + d.sum() + m.swapaxes(0, 1)[1, 2]


def test_array_methods():
    check(methods, M34)


def astype_round_trip(x):
    y = x.astype(np.float32) * np.float32(2)
    return np.sum(y.astype(np.float64) ** 2)


def test_astype_between_float_types_differentiates():
    g = gradgen.grad(astype_round_trip)(X3)
    np.testing.assert_allclose(g, 8 * X3, rtol=1e-6)
    assert gradgen.grad(lambda x: np.sum(x.astype(int) * x))(X3).tolist() == [0.0, -1.0, 2.0]


def from_scalars(a, b):
    v = np.array([a, b * 2.0, 1.0])
    m = np.array([[a, b], [b, a * a]])
    w = np.asarray([a * b, 3.0])
    return np.sum(v * v) + np.sum(m @ m) + np.sum(w)


def test_np_array_of_traced_scalars():
    check(from_scalars, 0.7, -1.2, argnums=(0, 1))



def lists_as_arrays(w, a):
    rows = np.sum([np.sin(wi) * np.arange(3.0) for wi in w])  # a list where NumPy wants an array
    peaks = np.maximum([a, a * a, w[0]], 0.5)  # a ufunc with a list argument
    mean = np.mean((a, 2.0 * a)) + np.dot([a, 1.0], w[:2])
    return rows + np.sum(peaks**2) + mean + np.concatenate([w, [a]]).prod()


def test_lists_of_traced_values_where_numpy_reads_an_array():
    check(lists_as_arrays, np.array([0.3, -0.8, 1.1]), 0.9, argnums=(0, 1))


def ufunc_methods(m):
    total = np.sum(np.add.reduce(m) ** 2) + np.add.reduce(m, axis=None)
    total += np.sum(np.multiply.reduce(m, 1, keepdims=True) * m)
    total += np.sum(np.maximum.reduce(m) ** 3) + np.sum(np.minimum.reduce(m, axis=1))
    return total + np.sum(np.add.accumulate(m, axis=1) ** 2) + np.sum(np.multiply.accumulate(m))


def test_ufunc_reduce_and_accumulate_are_the_numpy_functions():
    check(ufunc_methods, np.array([[0.5, 1.2, -0.3], [0.8, -1.1, 0.4]]))


def running_extremes(m):
    best = np.maximum.accumulate(m, axis=1)  # a running best, as in a drawdown or a cummax
    low = np.minimum.accumulate(m)
    return np.sum(best * m) + np.sum(low**2) + np.sum(np.maximum.accumulate(m[0]) * 2.0)


def test_running_maximum_and_minimum():
    check(running_extremes, np.array([[0.5, 1.2, -0.3, 1.5], [0.8, -1.1, 0.4, -2.0]]))


def test_running_maximum_ties_go_to_the_latest_entry():
    # torch.cummax's indices: an entry equal to the maximum so far takes over
    x = np.array([1.0, 3.0, 2.0, 3.0, 0.5])
    grad = gradgen.grad(lambda x: np.sum(np.maximum.accumulate(x) * np.arange(1.0, 6.0)))(x)
    np.testing.assert_array_equal(grad, [1.0, 2.0 + 3.0, 0.0, 4.0 + 5.0, 0.0])
    g32 = gradgen.grad(lambda x: np.sum(np.minimum.accumulate(x)))(-x.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_array_equal(g32, [1.0, 2.0, 0.0, 2.0, 0.0])


def test_other_ufunc_methods_are_refused_by_name():
    def f(x):
        return np.logaddexp.reduce(x) if np.add.nin == 2 else x  # an attribute read passes

    with pytest.raises(gradgen.UnsupportedOperation, match=r"np.logaddexp.reduce"):
        gradgen.grad(f)(X3)
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np.add.reduce with initial="):
        gradgen.grad(lambda x: np.add.reduce(x, initial=1.0))(X3)


def grids(x, y):
    X, Y = np.meshgrid(x, y)
    total = np.sum(X * Y**2 + np.sin(X))
    P, Q = np.meshgrid(x, y, indexing="ij")
    P[0, 0] = 3.0  # its own array: the write leaves x alone
    S, T = np.meshgrid(x, y, sparse=True)
    A, B, C = np.meshgrid(x, y, x[:2])
    return total + np.sum(P**2 * Q) + np.sum(S * T) + np.sum(A * B * C**2) + np.sum(x**3)


def test_meshgrid_in_every_layout():
    check(grids, np.array([0.5, 1.2, -0.3]), np.array([0.8, -1.1]), argnums=(0, 1))
    with pytest.raises(gradgen.UnsupportedOperation, match="indexing must be"):
        gradgen.grad(lambda x: np.sum(np.meshgrid(x, x, indexing="yx")[0]))(X3)

# --- regressions ---------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, (0,), -1])
def test_second_order_vjp_of_mean_takes_a_python_float(axis):
    """A vjp of a vjp of np.mean: the inner cotangent is a Python float, and the emitted module
    must work on it (it printed `(c / 3).reshape(1)` on a float)."""
    x = np.array([1.0, 2.0, 3.0])

    def f(x):
        return np.mean(x, axis=axis)

    def pulled_back(c):
        _, pullback = gradgen.vjp(f, x)
        return pullback(c)[0]

    source = gradgen.emit(pulled_back, 2.0, vjp=True)
    out, (grad_c,) = run_emitted(source)["pulled_back_vjp"](2.0, np.ones(3))
    np.testing.assert_allclose(out, np.full(3, 2.0 / 3))
    assert grad_c == pytest.approx(1.0)
    _, pullback = gradgen.vjp(pulled_back, 2.0)
    assert pullback(np.ones(3))[0] == pytest.approx(1.0)


def test_emitted_module_with_buffers_runs_isolated(tmp_path):
    W, U, xs = RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(3, 2)), RNG.normal(size=(4, 2))
    source = gradgen.emit(rnn, W, U, xs, argnums=(0, 1))
    call = (f"generated.rnn_grad(np.array({W.tolist()}), np.array({U.tolist()}), "
            f"np.array({xs.tolist()}))[0].tolist()")
    got = np.array(eval(run_isolated(source, call, tmp_path)))  # a repr of floats
    np.testing.assert_allclose(got, gradgen.grad(rnn, argnums=(0, 1))(W, U, xs)[0])


# --- gradgen.defvjp ----------------------------------------------------------------------------


def test_defvjp_adds_a_rule_for_a_function_of_the_users(tmp_path, monkeypatch):
    (tmp_path / "userfns.py").write_text(
        "import numpy as np\n\n\ndef softplus(x):\n    return np.log1p(np.exp(x))\n")
    (tmp_path / "model.py").write_text(
        "import numpy as np\n\nfrom userfns import softplus\n\n\n"
        "def loss(w):\n    return np.sum(softplus(w * 2.0))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import model
    import sympy
    import userfns

    try:
        with pytest.raises(gradgen.UnsupportedOperation, match="gradgen.defvjp"):
            gradgen.grad(lambda w: np.sum(np.frexp(w)[0]))(X3)
        op = gradgen.defvjp(userfns.softplus, lambda g, ans, x: g / (1 + np.exp(-x)),
                            sympy=lambda x: sympy.log(1 + sympy.exp(x)), elementwise=True,
                            rule_text=("d softplus(u)/du = 1 / (1 + exp(-u))",))
        g = gradgen.grad(model.loss)(X3)
        np.testing.assert_allclose(g, 2 / (1 + np.exp(-2 * X3)), rtol=1e-12)
        source = gradgen.emit(model.loss, X3)
        assert "import userfns" in source and "userfns.softplus(" in source
        assert gradgen.check(model.loss, X3).results[0].method in ("proved", "sympy")
        h = gradgen.hessian(model.loss)(X3)
        s = 1 / (1 + np.exp(-2 * X3))
        np.testing.assert_allclose(np.diag(h), 4 * s * (1 - s), rtol=1e-10)
    finally:
        from gradgen.ops.registry import BOUND, OPS

        BOUND.pop(userfns.softplus, None)
        OPS.pop(op.name, None) if "op" in locals() else None
        for name in ("model", "userfns"):
            sys.modules.pop(name, None)


def test_check_replays_writes_and_fancy_indexing_in_sympy():
    W, U, xs = RNG.normal(size=(2, 2)) * 0.5, RNG.normal(size=(2, 2)), RNG.normal(size=(2, 2))
    report = gradgen.check(rnn, W, U, xs, argnums=(0, 1))
    assert {r.method for r in report.results} <= {"proved", "sympy"}
    report = gradgen.check(add_at, np.array([0.5, 1.0, -2.0, 3.0]))
    assert report.results[0].method in ("proved", "sympy")


NUMPY2_NAMES = {
    "permute_dims": lambda m: np.sum(np.permute_dims(m, (1, 0)) * np.arange(12.0).reshape(4, 3)),
    "matrix_transpose": lambda m: np.sum(np.matrix_transpose(m) ** 2 * M34.T),
    "linalg_matrix_transpose": lambda m: np.sum(np.linalg.matrix_transpose(m)[0] ** 3),
    "unstack": lambda m: sum(np.sum(r**2) * (i + 1) for i, r in enumerate(np.unstack(m))),
    "cumulative_sum": lambda m: np.sum(np.cumulative_sum(m, axis=1) ** 2),
    "cumulative_prod": lambda m: np.sum(np.cumulative_prod(m, axis=0)),
    "trapezoid": lambda m: np.trapezoid(m**2, axis=1).sum() + np.trapezoid(m[0] ** 3, dx=0.5),
    "trapezoid_x": lambda m: np.sum(np.trapezoid(m**2, x=np.array([0.0, 1.0, 3.0, 4.0]))),
}


@pytest.mark.parametrize("name", sorted(NUMPY2_NAMES))
def test_numpy_2_spellings(name):
    f = NUMPY2_NAMES[name]
    g = gradgen.grad(f)(M34)
    np.testing.assert_allclose(g, numeric_grad(f, (M34,), 0), rtol=1e-6, atol=1e-6)


def test_np_astype_differentiates_between_float_types():
    g = gradgen.grad(lambda m: np.sum(np.astype(m, np.float32).astype(np.float64) ** 2))(M34)
    np.testing.assert_allclose(g, 2 * M34, rtol=1e-6)


@pytest.mark.parametrize("f", [
    lambda x: np.sum(x * (x > 0)),
    lambda x: np.sum(x * np.isfinite(x)),
    lambda x: (x[0] > 0) * x[0],
], ids=["mask", "isfinite", "python_bool"])
def test_check_multiplies_by_masks(f):
    report = gradgen.check(f, np.array([0.5, -1.0, 2.0]))
    assert report.results[0].method in ("proved", "sympy")
