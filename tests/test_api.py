"""The public transforms: grad and value_and_grad as functions and decorators, return types,
keyword arguments, caching per signature, errors about arguments, and higher order."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import sympy as sp

import gradgen

from .conftest import run_emitted

grad = gradgen.grad


# --- grad as a function and as a decorator ---------------------------------------------------


def test_decorator_without_arguments():
    @gradgen.grad
    def df(x):
        return x * x

    assert df(3.0) == 6.0
    assert df.__name__ == "df"


def test_decorator_with_argnums():
    @gradgen.grad(argnums=(0, 1))
    def df(x, y):
        return x * y * y

    assert df(3.0, 2.0) == (4.0, 12.0)


def test_decorator_with_a_single_argnum():
    @gradgen.grad(argnums=1)
    def df(x, y):
        return x * y * y

    assert df(3.0, 2.0) == 12.0


def test_negative_argnums():
    assert grad(lambda x, y: x * y * y, argnums=-1)(3.0, 2.0) == 12.0


# --- what the gradient looks like ------------------------------------------------------------


def test_float_gives_float():
    g = grad(lambda x: x * x)(3.0)
    assert type(g) is float and g == 6.0


@pytest.mark.parametrize("value", [np.float64(3.0), np.float32(3.0)], ids=["f64", "f32"])
def test_numpy_float_scalar_gives_float(value):
    g = grad(lambda x: x * x)(value)
    assert type(g) is float and g == 6.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (1,), ()])
def test_array_gives_array_of_same_shape_and_dtype(shape, dtype):
    x = np.full(shape, 1.5, dtype=dtype)
    g = grad(lambda x: np.sum(x * x * x))(x)
    assert isinstance(g, np.ndarray)
    assert g.shape == shape and g.dtype == dtype
    np.testing.assert_allclose(g, np.full(shape, 3 * 1.5**2), rtol=1e-6)


def test_float32_arithmetic_stays_float32():
    x = np.array([1.1, 2.2, 3.3], dtype=np.float32)
    g = grad(lambda x: np.sum(x * x * 0.1))(x)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.float32(0.1) * (x + x))


def test_tuple_argnums_give_a_tuple():
    g = grad(lambda x, y, z: x * y + np.sum(z), argnums=(0, 2))(2.0, 3.0, np.ones(2))
    assert isinstance(g, tuple) and len(g) == 2
    assert g[0] == 3.0 and type(g[0]) is float
    np.testing.assert_array_equal(g[1], np.ones(2))
    (only,) = grad(lambda x, y: x * y, argnums=(1,))(2.0, 3.0)
    assert only == 2.0


def test_gradient_is_a_fresh_array_the_caller_owns():
    x = np.ones(3)
    g = grad(lambda x: np.sum(x))(x)
    g[0] = 7.0
    np.testing.assert_array_equal(grad(lambda x: np.sum(x))(x), np.ones(3))
    assert not np.shares_memory(g, x)
    g2 = grad(lambda x: np.sum(x * 1.0))(x)
    assert not np.shares_memory(g2, x)
    np.testing.assert_array_equal(x, np.ones(3))


def test_value_and_grad():
    value, g = gradgen.value_and_grad(lambda x: x * x + 1)(3.0)
    assert (value, g) == (10.0, 6.0)
    assert type(value) is float and type(g) is float
    value, (gx, gy) = gradgen.value_and_grad(lambda x, y: x * y, argnums=(0, 1))(3.0, 4.0)
    assert (value, gx, gy) == (12.0, 4.0, 3.0)
    value, g = gradgen.value_and_grad(lambda x: np.sum(x**2))(np.arange(3.0))
    assert value == 5.0
    np.testing.assert_array_equal(g, [0.0, 2.0, 4.0])


def test_value_and_grad_decorator():
    @gradgen.value_and_grad(argnums=1)
    def f(x, y):
        return x * y

    assert f(2.0, 5.0) == (10.0, 2.0)


def test_keyword_arguments():
    def f(x, y=2.0, *, z=3.0):
        return x * y * z

    assert grad(f)(1.5) == 6.0
    assert grad(f)(1.5, y=4.0) == 12.0
    assert grad(f)(1.5, 4.0) == 12.0
    assert grad(f, argnums=1)(y=4.0, x=1.5) == 4.5
    assert grad(f, argnums=(0, 1))(1.5, y=4.0) == (12.0, 4.5)
    assert gradgen.value_and_grad(f)(x=1.5) == (9.0, 6.0)


def loss_with_options(w, X, *, lam=0.1, square=True):
    r = X @ w
    return np.sum(r**2 if square else np.abs(r)) + lam * np.sum(w**2)


def test_keyword_only_arguments_are_constants_of_their_own_path():
    X, w = np.arange(6.0).reshape(3, 2), np.array([0.5, -1.0])
    df = grad(loss_with_options)
    np.testing.assert_allclose(df(w, X), 2 * X.T @ (X @ w) + 0.2 * w)
    np.testing.assert_allclose(df(w, X, lam=0.5), 2 * X.T @ (X @ w) + 1.0 * w)
    np.testing.assert_allclose(df(w, X, lam=0.5, square=False), X.T @ np.sign(X @ w) + w)
    assert "with lam=0.5, square=False" in df.source  # the docstring says which constants
    assert "lam=0.5" in df.source.splitlines()[1]  # and how to make it again
    np.testing.assert_allclose(df(w, X, lam=0.5), 2 * X.T @ (X @ w) + 1.0 * w)  # cached
    assert len(df._paths) == 3
    np.testing.assert_allclose(  # keyword-only defaults the call does not pass stay
        gradgen.hessian(loss_with_options)(w, X, lam=0.5), 2 * X.T @ X + np.eye(2))
    value, g = gradgen.value_and_grad(loss_with_options)(w, X, lam=2.0)
    assert value == loss_with_options(w, X, lam=2.0)
    np.testing.assert_allclose(g, 2 * X.T @ (X @ w) + 4.0 * w)

    class Model:
        def energy(self, w, *, k=2.0):
            return np.sum(w**2) * k

    np.testing.assert_allclose(grad(Model().energy)(w, k=3.0), 6.0 * w)


def test_keyword_only_arguments_must_be_hashable_constants():
    def f(x, *, z=3.0):
        return x * z

    assert grad(f)(1.5) == 3.0
    assert grad(f)(1.5, z=1.0) == 1.0
    with pytest.raises(gradgen.GradgenError, match=r"z=ndarray of f is not hashable"):
        grad(f)(1.5, z=np.ones(2))
    with pytest.raises(gradgen.GradgenError, match="cannot call"):
        grad(f)(1.5, w=1.0)
    with pytest.raises(gradgen.GradgenError, match=r"keyword-only argument z of f is a traced"):
        grad(lambda x: grad(f)(1.5, z=x))(2.0)



def test_keywords_a_function_does_not_declare_itself_are_refused():
    """Defaults can carry only the function's own keyword-only parameters: a wrapper's
    **kwargs or a **opts catch-all would drop the value (a silently wrong gradient)."""
    import functools

    def doubled(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return 2.0 * f(*args, **kwargs)

        return wrapper

    @doubled
    def scaled(x, *, k=1.0):
        return x * k

    def with_options(x, **opts):
        return x * opts.get("k", 1.0)

    for fn in (scaled, with_options):
        with pytest.raises(gradgen.GradgenError, match="keyword-only parameters of plain"):
            grad(fn)(1.5, k=3.0)

# --- arguments that cannot be differentiated -------------------------------------------------


@pytest.mark.parametrize("bad, kind", [
    (3, "int"), (True, "bool"), ("s", "str"), (None, "NoneType"),
    (np.arange(3), "int64"),
], ids=["int", "bool", "str", "None", "int array"])
def test_gradient_of_a_non_float_argument_names_it(bad, kind):
    def f(x, count):
        return x * 2

    with pytest.raises(gradgen.GradgenError) as info:
        grad(f, argnums=1)(1.0, bad)
    message = str(info.value)
    assert "'count'" in message and kind in message


def test_unknown_argnum():
    with pytest.raises(gradgen.GradgenError, match="argnums"):
        grad(lambda x: x, argnums=3)(1.0)
    with pytest.raises(gradgen.GradgenError, match="argnums"):
        grad(lambda x: x, argnums="x")


def test_non_differentiated_arguments_may_be_anything_hashable():
    def f(x, label, n):
        assert label == "ok"
        return x * n

    assert grad(f)(2.0, "ok", 3) == 3.0


# --- outputs that are not scalars ------------------------------------------------------------


def test_non_scalar_output():
    with pytest.raises(gradgen.NonScalarOutput) as info:
        grad(lambda x: x * 2)(np.ones(3))
    assert "(3,)" in str(info.value)
    with pytest.raises(gradgen.NonScalarOutput):
        grad(lambda x: (x, x))(1.0)
    assert issubclass(gradgen.NonScalarOutput, gradgen.GradgenError)


def test_size_one_outputs_are_scalars():
    g = grad(lambda x: x * 2)(np.ones(1))
    np.testing.assert_array_equal(g, [2.0])
    g = grad(lambda x: np.sum(x * x, keepdims=True))(np.ones((2, 2)))
    np.testing.assert_array_equal(g, np.full((2, 2), 2.0))


# --- things a traced value refuses -----------------------------------------------------------


def _float_of(x):
    return float(x) * 2


def _inplace_add(a, b):
    a += b
    return np.sum(a)


def _setitem(a):
    a[0] = 1.0
    return np.sum(a)


def test_float_of_a_traced_value():
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(_float_of)(1.0)
    assert str(info.value).startswith("test_api.py:")
    assert "float()" in str(info.value)


def test_inplace_add_on_a_traced_array_is_a_new_version():
    a = np.array([1.0, 2.0, 3.0])
    g = grad(_inplace_add, argnums=(0, 1))(a, np.ones(3))
    np.testing.assert_array_equal(g[0], np.ones(3))
    np.testing.assert_array_equal(g[1], np.ones(3))
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])  # the caller's array is untouched


def test_item_assignment_on_a_traced_array_overwrites_its_gradient():
    a = np.ones(3)
    np.testing.assert_array_equal(grad(_setitem)(a), [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(a, np.ones(3))


def test_augmented_assignment_on_a_scalar_rebinds():
    def f(x, y):
        x += y
        x *= y
        return x

    assert grad(f, argnums=(0, 1))(1.0, 2.0) == (2.0, 5.0)


# --- caching ---------------------------------------------------------------------------------


def test_cache_per_signature_retraces_on_a_new_shape():
    traces = []

    def f(x):
        traces.append(np.shape(x))
        return np.sum(x**3)

    df = grad(f)
    np.testing.assert_array_equal(df(np.ones(3)), np.full(3, 3.0))
    np.testing.assert_array_equal(df(np.full((2, 2), 2.0)), np.full((2, 2), 12.0))
    np.testing.assert_array_equal(df(np.full(3, 3.0)), np.full(3, 27.0))
    np.testing.assert_array_equal(df(np.full((2, 2), 1.0)), np.full((2, 2), 3.0))
    assert traces == [(3,), (2, 2)]
    g = df(np.full(3, 2.0, dtype=np.float32))  # another dtype: another signature
    assert g.dtype == np.float32 and len(traces) == 3
    assert df(2.0) == 12.0 and len(traces) == 4


def test_non_differentiated_arrays_with_new_values():
    traces = []

    def f(x, data, scale):
        traces.append(1)
        return np.sum((x * data) ** 2) * scale

    df = grad(f)
    x = np.array([1.0, 2.0])
    for data, scale in [(np.array([1.0, 2.0]), 1.0), (np.array([3.0, -1.0]), 2.0),
                        (np.array([0.5, 4.0]), 0.5)]:
        np.testing.assert_allclose(df(x, data, scale), 2 * x * data**2 * scale, rtol=1e-15)
    assert len(traces) == 1


def test_source_is_none_before_the_first_call():
    df = grad(lambda x: x * x)
    assert df.source is None
    df(1.0)
    assert "def anonymous_grad(x):" in df.source or "_grad(x):" in df.source


# --- higher order: grad of grad differentiates the backward graph ----------------------------

X = sp.Symbol("x")

SECOND = [
    ("cube", lambda x: x * x * x, X**3, 1.7),
    ("sin exp", lambda x: math.sin(x) * math.exp(x), sp.sin(X) * sp.exp(X), 0.4),
    ("x to the x", lambda x: x**x, X**X, 1.3),
    ("log", lambda x: math.log(1 + x * x), sp.log(1 + X**2), 0.8),
    ("tanh", lambda x: math.tanh(x), sp.tanh(X), 0.3),
    ("reciprocal", lambda x: 1 / (1 + x), 1 / (1 + X), 0.5),
    ("sqrt", lambda x: math.sqrt(x) * x, sp.sqrt(X) * X, 2.0),
    ("atan", lambda x: math.atan(x * 2), sp.atan(2 * X), 0.6),
    ("reused", lambda x: (x * x + 1) * (x * x - 1) / x, (X**2 + 1) * (X**2 - 1) / X, 1.1),
]


@pytest.mark.parametrize("f, expr, x", [c[1:] for c in SECOND], ids=[c[0] for c in SECOND])
def test_second_derivative(f, expr, x):
    expected = float(sp.diff(expr, X, 2).subs(X, x))
    got = grad(grad(f))(x)
    assert type(got) is float
    assert got == pytest.approx(expected, rel=1e-12)


def test_third_derivative():
    assert grad(grad(grad(lambda x: x**4)))(1.5) == pytest.approx(24 * 1.5, rel=1e-14)
    assert grad(grad(grad(math.sin)))(0.5) == pytest.approx(-math.cos(0.5), rel=1e-14)


def test_grad_of_value_and_grad():
    def slope(x):
        value, g = gradgen.value_and_grad(lambda t: t**3)(x)
        return g + value

    assert grad(slope)(2.0) == pytest.approx(6 * 2.0 + 3 * 2.0**2, rel=1e-14)


def test_derivative_through_a_closure_over_the_outer_variable():
    # d/dx of [d/dy (x * y * y)] at y = x, i.e. d/dx (2 x * x) = 4x
    assert grad(lambda x: grad(lambda y: x * y * y)(x))(3.0) == pytest.approx(12.0, rel=1e-14)
    # the outer variable only appears through the closure: d/dx (2 * y * x) at y = 1.5
    assert grad(lambda x: grad(lambda y: x * y * y)(1.5))(3.0) == pytest.approx(3.0, rel=1e-14)
    # mixed partial d2/dydx (x^2 y^2) = 4xy at x = 1.5
    assert grad(lambda y: grad(lambda x: x * x * y * y)(1.5))(2.0) == pytest.approx(
        4 * 1.5 * 2.0, rel=1e-14)


def test_vjp_under_an_outer_trace_through_a_closure():
    def outer(x):
        out, pullback = gradgen.vjp(lambda y: x * y * y, 1.5)
        return pullback(1.0)[0] + out  # 2 x y + x y^2 at y = 1.5: d/dx = 3 + 2.25

    assert grad(outer)(3.0) == pytest.approx(5.25, rel=1e-14)


def test_hessian_vector_product():
    v = np.array([0.5, -1.0, 2.0])
    x = np.array([0.1, 0.7, -0.4])

    def f(x):
        return np.sum(np.sin(x) * x)

    hvp = grad(lambda x: np.dot(grad(f)(x), v))(x)
    expected = (2 * np.cos(x) - x * np.sin(x)) * v
    np.testing.assert_allclose(hvp, expected, rtol=1e-14)


def test_second_derivative_with_a_branch():
    def f(x):
        if x > 0:
            return x**3
        return -(x**4)

    d2 = grad(grad(f))
    assert d2(2.0) == pytest.approx(12.0, rel=1e-14)
    assert d2(-1.0) == pytest.approx(-12.0, rel=1e-14)


# --- size: no recursion on graph depth -------------------------------------------------------


def test_hundred_thousand_op_loop_under_a_small_recursion_limit():
    n = 50_000  # two ops per step: 100,000 traced operations

    def f(x):
        y = x
        for _ in range(n):
            y = y * 1.000001 + 0.5
        return y

    expected_value, expected_grad = 2.0, 1.0
    for _ in range(n):
        expected_value = expected_value * 1.000001 + 0.5
        expected_grad = expected_grad * 1.000001
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        df = gradgen.value_and_grad(f)
        value, g = df(2.0)
        rolled = str(df.source)
        unrolled = gradgen.emit(f, 2.0, loops="unroll")  # the 100,000-op graph itself
    finally:
        sys.setrecursionlimit(saved)
    assert value == expected_value
    assert g == expected_grad
    assert g == pytest.approx(1.000001**n, rel=1e-9)
    assert rolled.count("\n") < 60  # the loop stays a loop (gradgen.loops)
    assert unrolled.count("\n") > n  # one statement per step
    assert run_emitted(unrolled)["f_value_and_grad"](2.0) == (expected_value, expected_grad)


def test_the_cached_call_follows_the_signature_from_call_to_call():
    """The hot path compares the last call's signature first: alternating shapes, dtypes and
    Python numbers each get their own code, and a trace open in another thread sends calls
    down the careful path without changing their results."""
    import threading

    from gradgen.tracer import OPEN_TRACES

    def f(x):
        return np.sum(x * x)

    g = gradgen.grad(f)
    a, b = np.arange(3.0), np.arange(4.0, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(g(a), 2 * a)
        got = g(b)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, 2 * b)
        assert g(1.5) == 3.0
    elsewhere = object()  # what another thread's open trace looks like from here
    OPEN_TRACES.add(elsewhere)
    try:
        np.testing.assert_array_equal(g(a), 2 * a)
        worker = threading.Thread(target=lambda: g(b))
        worker.start()
        worker.join()
    finally:
        OPEN_TRACES.discard(elsewhere)
    assert not OPEN_TRACES


def test_the_cached_call_keys_dicts_lists_and_tuples_by_structure():
    """Arguments nested in dicts, lists and tuples take the cheap signature too: a new shape,
    dtype, key, key order or container type inside them is a new signature (its own code),
    the same one is the cached code, and anything else in them takes the full key."""
    from gradgen.api import _plain_key

    traces = []

    def f(params, xs):
        traces.append(1)
        return np.sum(params["w"] * xs[0]) + params["b"] * xs[1]

    df = grad(f)
    w, x = np.arange(3.0), np.array([1.0, -2.0, 0.5])
    calls = [
        ({"w": w, "b": 2.0}, (x, 3.0)),
        ({"w": w[:2], "b": 2.0}, (x[:2], 3.0)),  # another shape inside the dict
        ({"w": w.astype(np.float32), "b": 2.0}, (x.astype(np.float32), 3.0)),
        ({"b": 2.0, "w": w}, (x, 3.0)),  # another key order
        ({"w": w, "b": 2.0}, [x, 3.0]),  # a list where a tuple was
        ({"w": w, "b": np.float64(2.0)}, (x, 3.0)),  # a NumPy scalar where a float was
    ]
    for params, xs in calls * 2:
        got = df(params, xs)
        assert list(got) == list(params)
        np.testing.assert_array_equal(got["w"], xs[0])
        assert got["w"].dtype == params["w"].dtype
        assert got["b"] == xs[1] and type(got["b"]) is float
    assert len(traces) == len(calls)
    keys = [_plain_key(args) for args in calls]
    assert None not in keys and len(set(keys)) == len(calls)
    assert _plain_key(({"w": w, "name": "a"},)) is None  # a static leaf: the full key
    assert _plain_key((np.ma.masked_array(w),)) is None  # a subclass: the full key
    assert _plain_key(((w,),)) != _plain_key(([w],)) != _plain_key((w,))


def test_a_cached_call_of_a_seen_signature_skips_the_full_path(monkeypatch):
    """Numbers, arrays and dicts of them seen before run their compiled code straight away:
    the careful path (argument binding, flattening, full keys) is never entered."""
    from gradgen import api

    def f(params, x, scale):
        return np.sum(params["w"] * x) * scale

    df = grad(f)
    params, x = {"w": np.arange(3.0)}, np.ones(3)
    df(params, x, 2.0)
    df(params, 2.0 * x, 3)  # another signature (an int scale): compiled on its own

    def refuse(*args, **kwargs):
        raise AssertionError("the full path ran")

    monkeypatch.setattr(api, "_bind_arguments", refuse)
    for scale in (2.0, 3, 0.5, 4):  # the two signatures in turn
        np.testing.assert_array_equal(df(params, x, scale)["w"], x * scale)
    with pytest.raises(AssertionError, match="the full path ran"):
        df(params, x, np.float32(2.0))  # a signature not seen yet


def test_a_cached_call_of_numbers_keys_them_by_their_exact_types(monkeypatch):
    """Numbers only: the signature is the tuple of their types, so a float where an int was
    (or a NumPy float where a Python float was) is another signature, never the cached code."""
    from gradgen import api

    def f(x, k):
        return x * x * k

    df = grad(f)
    assert df(1.5, 2) == 6.0 and df(1.5, 2.0) == 6.0 and df(True and 1.5, False) == 0.0
    monkeypatch.setattr(api, "_bind_arguments", lambda *a: pytest.fail("the full path ran"))
    for k in (2, 2.0, False, 3, True, 0.5):
        assert df(1.5, k) == 3.0 * k
    with pytest.raises(pytest.fail.Exception, match="the full path ran"):
        df(np.float64(1.5), 2)
