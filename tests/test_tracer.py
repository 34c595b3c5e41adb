"""What the tracer sees: Python operators, builtins, math (however it is imported, in helpers
anywhere), NumPy through ufuncs and array functions, code without source, and control flow."""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from math import cos, exp, log, sin

import numpy as np
import pytest

import gradgen

from .conftest import run_emitted

grad = gradgen.grad


def _line_of(fn, text: str) -> int:
    """The line number of the first line of ``fn`` that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return first + offset
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _numeric_grad(f, args, i, eps=1e-6):
    """Central differences of a scalar f with respect to args[i] (float or float array)."""
    x = np.array(args[i], dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        up, down = list(args), list(args)
        up[i] = plus if x.shape else float(plus)
        down[i] = minus if x.shape else float(minus)
        g[idx] = (float(np.sum(f(*up))) - float(np.sum(f(*down)))) / (2 * eps)
    return g if x.shape else float(g)


def _assert_grads_match(f, args, argnums, rtol=1e-6, atol=1e-7):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    got = grad(f, argnums)(*args)
    got = got if isinstance(argnums, tuple) else (got,)
    for i, g in zip(nums, got, strict=True):
        a = args[i]
        if isinstance(a, np.ndarray):
            assert isinstance(g, np.ndarray) and g.shape == a.shape and g.dtype == a.dtype
        else:
            assert type(g) is float
        np.testing.assert_allclose(g, _numeric_grad(f, args, i), rtol=rtol, atol=atol)


# --- Python operators and builtins -----------------------------------------------------------

SCALAR_CASES = [
    # (id, f, args, argnums, exact gradient)
    ("add", lambda x, y: x + y + 1, (2.0, 3.0), (0, 1), (1.0, 1.0)),
    ("radd", lambda x: 1 + x, (2.0,), 0, 1.0),
    ("sub", lambda x, y: x - y, (2.0, 3.0), (0, 1), (1.0, -1.0)),
    ("rsub", lambda x: 1 - x, (2.0,), 0, -1.0),
    ("mul", lambda x, y: x * y * 3, (2.0, 5.0), (0, 1), (15.0, 6.0)),
    ("div", lambda x, y: x / y, (2.0, 4.0), (0, 1), (0.25, -2.0 / 16)),
    ("rdiv", lambda x: 1 / x, (2.0,), 0, -0.25),
    ("pow int", lambda x: x**3, (2.0,), 0, 12.0),
    ("pow int negative base", lambda x: x**3, (-2.0,), 0, 12.0),
    ("pow even negative base", lambda x: x**2, (-3.0,), 0, -6.0),
    ("pow negative int", lambda x: x**-2, (2.0,), 0, -0.25),
    ("pow float", lambda x: x**2.5, (4.0,), 0, 2.5 * 4.0**1.5),
    ("pow traced exponent", lambda x: 2.0**x, (1.5,), 0, 2.0**1.5 * math.log(2.0)),
    ("pow int base", lambda x: 3**x, (2.0,), 0, 9 * math.log(3)),
    ("pow both", lambda x, y: x**y, (2.0, 3.0), (0, 1), (12.0, 8 * math.log(2.0))),
    ("pow self", lambda x: x**x, (2.0,), 0, 4.0 * (math.log(2.0) + 1)),
    ("neg", lambda x: -x * 3, (2.0,), 0, -3.0),
    ("pos", lambda x: +x * 3, (2.0,), 0, 3.0),
    ("abs negative", lambda x: abs(x) * 2, (-2.0,), 0, -2.0),
    ("abs positive", lambda x: abs(x) * 2, (2.0,), 0, 2.0),
    ("abs times x", lambda x: abs(x) * x, (-2.0,), 0, 4.0),
    ("max", lambda x, y: max(x, y) * 2, (2.0, 3.0), (0, 1), (0.0, 2.0)),
    ("min", lambda x, y: min(x, y) * 2, (2.0, 3.0), (0, 1), (2.0, 0.0)),
    ("min max", lambda x, y: min(x, y) * max(x, y) ** 2, (2.0, 3.0), (0, 1), (9.0, 12.0)),
    ("max with constant", lambda x: max(x, 0.0), (2.0,), 0, 1.0),
    ("max three", lambda x, y: max(x, y, 10.0), (2.0, 3.0), (0, 1), (0.0, 0.0)),
    ("sum", lambda x, y: sum([x, y, x * y]), (2.0, 3.0), (0, 1), (4.0, 3.0)),
    ("sum start", lambda x: sum((x, x), 1.0), (2.0,), 0, 2.0),
    ("constant", lambda x: 5.0, (2.0,), 0, 0.0),
    ("constant arithmetic", lambda x: x * 0 + 2.5, (2.0,), 0, 0.0),
    ("reused", lambda x: x * x + x, (3.0,), 0, 7.0),
    ("chain", lambda x: ((x + 1) * (x - 1)) / (x * x + 1), (2.0,), 0, 4 * 2.0 / 25),
]


@pytest.mark.parametrize("f, args, argnums, expected", [c[1:] for c in SCALAR_CASES],
                         ids=[c[0] for c in SCALAR_CASES])
def test_scalar_operators(f, args, argnums, expected):
    got = grad(f, argnums)(*args)
    assert got == pytest.approx(expected, rel=1e-14, abs=1e-15)
    for g in got if isinstance(got, tuple) else (got,):
        assert type(g) is float


COMPARISONS = [
    ("lt", lambda x: x * 5 if x < 0 else x * 2),
    ("le", lambda x: x * 5 if x <= 0 else x * 2),
    ("gt", lambda x: x * 2 if x > 1 else x * 5),
    ("ge", lambda x: x * 2 if x >= 1 else x * 5),
    ("eq", lambda x: x * 2 if x == 2 else x * 5),
    ("ne", lambda x: x * 5 if x != 2 else x * 2),
    ("reflected", lambda x: x * 2 if 1 < x else x * 5),
    ("two traced", lambda x: x * 2 if x + 1 > -x else x * 5),
    ("chained", lambda x: x * 2 if 1 < x < 3 else x * 5),
    ("truthiness", lambda x: x * 2 if x + 7 else x * 5),
    ("and", lambda x: x * 2 if x > 0 and x < 3 else x * 5),
    ("not", lambda x: x * 5 if not x > 0 else x * 2),
]


@pytest.mark.parametrize("f", [c[1] for c in COMPARISONS], ids=[c[0] for c in COMPARISONS])
def test_comparisons_pick_the_taken_branch(f):
    df = grad(f)
    assert df(2.0) == 2.0
    assert df(-7.0) == 5.0  # the other side of the branch: retraced
    assert df(2.0) == 2.0


def test_unused_arguments_get_zero_of_their_type():
    def f(x, y, z, w):
        return x * 2

    args = (1.0, 3.0, np.ones((2, 3)), np.ones(4, np.float32))
    gx, gy, gz, gw = grad(f, argnums=(0, 1, 2, 3))(*args)
    assert gx == 2.0
    assert type(gy) is float and gy == 0.0
    assert isinstance(gz, np.ndarray) and gz.shape == (2, 3) and gz.dtype == np.float64
    assert not gz.any()
    assert isinstance(gw, np.ndarray) and gw.shape == (4,) and gw.dtype == np.float32
    assert not gw.any()
    assert grad(f, argnums=1)(*args) == 0.0


def test_int_argument_used_as_a_number():
    def f(x, n):
        return x * n + n * n

    df = grad(f)
    assert df(2.0, 3) == 3.0
    assert df(2.0, 7) == 7.0  # same signature, another int: still right


# --- math, however it is reached ---------------------------------------------------------------

MATH_CASES = [
    ("math.sin", lambda x: math.sin(x), 0.3, math.cos(0.3)),
    ("from math import sin", lambda x: sin(x), 0.3, math.cos(0.3)),
    ("imported cos exp log", lambda x: cos(x) * exp(x) + log(x), 0.7,
     (-math.sin(0.7) + math.cos(0.7)) * math.exp(0.7) + 1 / 0.7),
    ("log base 3", lambda x: math.log(x, 3), 2.0, 1 / (2.0 * math.log(3))),
    ("log traced base", lambda x: math.log(8.0, x), 2.0, -math.log(8) / (2 * math.log(2) ** 2)),
    ("fabs", lambda x: math.fabs(x) * 3, -2.0, -3.0),
    ("expm1", lambda x: math.expm1(x), 0.5, math.exp(0.5)),
    ("log1p", lambda x: math.log1p(x), 0.5, 1 / 1.5),
    ("log2", lambda x: math.log2(x), 0.5, 1 / (0.5 * math.log(2))),
    ("log10", lambda x: math.log10(x), 0.5, 1 / (0.5 * math.log(10))),
    ("sqrt", lambda x: math.sqrt(x), 4.0, 0.25),
    ("tanh", lambda x: math.tanh(x), 0.5, 1 - math.tanh(0.5) ** 2),
    ("atan", lambda x: math.atan(x), 2.0, 1 / 5),
]


@pytest.mark.parametrize("f, x, expected", [c[1:] for c in MATH_CASES],
                         ids=[c[0] for c in MATH_CASES])
def test_math_functions(f, x, expected):
    got = grad(f)(x)
    assert type(got) is float
    assert got == pytest.approx(expected, rel=1e-14)


def test_math_two_argument_functions():
    assert grad(math.hypot, (0, 1))(3.0, 4.0) == pytest.approx((0.6, 0.8), rel=1e-15)
    assert grad(lambda x, y: math.hypot(x, y), (0, 1))(3.0, 4.0) == pytest.approx((0.6, 0.8))
    assert grad(lambda y, x: math.atan2(y, x), (0, 1))(1.0, 2.0) == pytest.approx((0.4, -0.2))
    assert grad(lambda x, y: math.pow(x, y), (0, 1))(2.0, 3.0) == pytest.approx(
        (12.0, 8 * math.log(2.0)))
    assert type(grad(lambda x: math.pow(x, 2))(3.0)) is float


HELPERS = '''
import math
from math import sin as s


def helper(x):
    return s(x) * math.exp(x)


def power(x, n):
    if n == 0:
        return 1.0
    return x * power(x, n - 1)
'''


@pytest.fixture
def helpers(tmp_path, monkeypatch):
    """A user module in another file, imported the ordinary way."""
    name = f"gradgen_test_helpers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def _snapshot(namespace: dict) -> dict:
    return {k: v for k, v in namespace.items() if k != "__builtins__"}


def test_helper_in_another_module_via_attribute(helpers):
    expected = (math.cos(0.3) + math.sin(0.3)) * math.exp(0.3)

    def f(x):
        return helpers.helper(x) * 2

    before = _snapshot(vars(helpers))
    assert grad(f)(0.3) == pytest.approx(2 * expected, rel=1e-14)
    after = _snapshot(vars(helpers))
    assert before.keys() == after.keys()
    assert all(before[k] is after[k] for k in before)  # the user's module is untouched
    assert helpers.s is math.sin


def test_module_attributes_set_while_tracing_reach_the_module(helpers):
    helpers.calls = 0

    def f(x):
        helpers.calls = helpers.calls + 1
        return helpers.helper(x)

    df = grad(f)
    df(0.3)
    df(0.3)  # the second call runs the compiled code, not f
    assert helpers.calls == 1


def test_helper_in_another_module_imported_by_name(helpers):
    helper, power = helpers.helper, helpers.power

    def f(x):
        return helper(x) + power(x, 3)

    expected = (math.cos(0.3) + math.sin(0.3)) * math.exp(0.3) + 3 * 0.3**2
    assert grad(f)(0.3) == pytest.approx(expected, rel=1e-14)
    assert helpers.helper is helper and helpers.power is power


def test_recursive_helper():
    def power(x, n):
        if n == 0:
            return 1.0
        return math.sin(x) * power(x, n - 1)

    assert grad(lambda x: power(x, 3))(0.5) == pytest.approx(
        3 * math.sin(0.5) ** 2 * math.cos(0.5), rel=1e-14)


def test_closures_and_nested_helpers():
    def make(scale):
        def inner(x):
            return math.sin(x) * scale
        return inner

    scaled = make(3.0)
    assert grad(lambda x: scaled(x) * x)(0.5) == pytest.approx(
        3 * (math.cos(0.5) * 0.5 + math.sin(0.5)), rel=1e-14)

    def outer(x):
        k = 2.0

        def sq(t):
            return t * t * k

        return sq(x) + sq(math.sin(x))

    assert grad(outer)(0.5) == pytest.approx(
        4 * 0.5 + 4 * math.sin(0.5) * math.cos(0.5), rel=1e-14)


def test_closure_over_a_recursive_inner_function():
    def f(x):
        def fact(y, n):
            return y if n == 1 else y * fact(y, n - 1)
        return fact(math.exp(x), 3)

    assert grad(f)(0.2) == pytest.approx(3 * math.exp(0.6), rel=1e-14)


GLOBAL_SCALE = 4.0


def _uses_globals(x):
    return math.sin(x) * GLOBAL_SCALE + sin(x)


def test_tracing_mutates_neither_math_nor_the_users_globals():
    math_before = dict(vars(math))
    globals_before = _snapshot(globals())
    assert grad(_uses_globals)(0.1) == pytest.approx(5 * math.cos(0.1), rel=1e-14)
    assert dict(vars(math)) == math_before
    assert all(vars(math)[k] is v for k, v in math_before.items())
    after = _snapshot(globals())
    assert after.keys() == globals_before.keys()
    assert all(after[k] is v for k, v in globals_before.items())
    assert sin is math.sin and _uses_globals.__globals__ is globals()
    assert _uses_globals(0.1) == 5 * math.sin(0.1)  # still runs on plain floats


# --- NumPy -----------------------------------------------------------------------------------

BROADCAST_SHAPES = [
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((3,), (2, 3)),
    ((2, 1), (1, 3)),
    ((1, 3), (2, 1)),
    ((2, 3), ()),
    ((), (2, 3)),
    ((4, 1, 3), (2, 1)),
    ((2, 3), (1,)),
]


@pytest.mark.parametrize("sa, sb", BROADCAST_SHAPES, ids=str)
def test_elementwise_broadcasting(sa, sb, rng):
    a = rng.normal(size=sa) + 2.5
    b = rng.normal(size=sb) + 2.5

    def f(a, b):
        return np.sum(a * b + a / b - b**2 * a + (a - b) ** 3 + np.sin(a) * np.exp(b))

    _assert_grads_match(f, (a, b), (0, 1))


def test_python_scalars_with_arrays(rng):
    x = rng.normal(size=(2, 3))

    def f(x, s):
        return np.sum(s * x + x / s - 1.5 * x * s**2)

    _assert_grads_match(f, (x, 0.7), (0, 1))


def test_float32_arrays_stay_float32(rng):
    x = rng.normal(size=(3, 2)).astype(np.float32)
    w = rng.normal(size=(2,)).astype(np.float32)
    gx, gw = grad(lambda x, w: np.sum((x * w) ** 2), (0, 1))(x, w)
    assert gx.dtype == np.float32 and gw.dtype == np.float32
    np.testing.assert_allclose(gx, 2 * x * w * w, rtol=1e-5)
    np.testing.assert_allclose(gw, np.sum(2 * x * x * w, axis=0), rtol=1e-5)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_with_axis(axis, keepdims, rng):
    a = rng.normal(size=(2, 3))
    w = rng.normal(size=np.sum(a, axis=axis, keepdims=keepdims).shape)

    def f(a):
        s = np.sum(a * a, axis=axis, keepdims=keepdims)
        m = np.mean(a, axis=axis, keepdims=keepdims)
        return np.sum(s * w + m * m)

    _assert_grads_match(f, (a,), 0)


def test_sum_and_mean_methods(rng):
    a = rng.normal(size=(3, 4))
    _assert_grads_match(lambda a: (a * a).sum() + a.mean() * 3, (a,), 0)
    _assert_grads_match(lambda a: np.sum(a.sum(axis=0) ** 2) + a.mean(axis=1).sum(), (a,), 0)
    g = grad(lambda a: a.sum())(a)
    np.testing.assert_array_equal(g, np.ones_like(a))


def test_matmul_and_dot(rng):
    m = rng.normal(size=(2, 3))
    v = rng.normal(size=3)
    u = rng.normal(size=2)

    def f(m, v, u):
        return (np.sum(m @ v * u) + np.dot(v, v) + u @ (m @ v) + np.sum(np.dot(m, m.T))
                + np.sum(np.dot(m.T, m)) + np.dot(u, np.dot(m, v)))

    _assert_grads_match(f, (m, v, u), (0, 1, 2))
    g = grad(lambda v: np.dot(v, v))(v)
    np.testing.assert_allclose(g, 2 * v, rtol=1e-15)
    gm, gv = grad(lambda m, v: u @ m @ v, (0, 1))(m, v)
    np.testing.assert_allclose(gm, np.outer(u, v), rtol=1e-15)
    np.testing.assert_allclose(gv, u @ m, rtol=1e-15)


def test_shape_queries_are_static(rng):
    x = rng.normal(size=(2, 3))

    def f(x):
        n = np.size(x) + np.ndim(x) + np.shape(x)[1] + x.shape[0] + len(x) + x.ndim + x.size
        return np.sum(x) * n

    np.testing.assert_array_equal(grad(f)(x), np.full((2, 3), 6.0 + 2 + 3 + 2 + 2 + 2 + 6))


def test_norm_of_a_vector(rng):
    v = rng.normal(size=5)
    g = grad(lambda v: np.linalg.norm(v) * 2)(v)
    np.testing.assert_allclose(g, 2 * v / np.linalg.norm(v), rtol=1e-14)


def test_numpy_math_functions(rng):
    x = rng.uniform(0.2, 2.0, size=(2, 3))

    def f(x):
        return np.sum(np.sin(x) * np.exp(x) + np.sqrt(x) + np.tanh(x) + np.log(x)
                      + np.abs(x - 1) + np.maximum(x, 1.0) + np.cos(x) ** 2)

    _assert_grads_match(f, (x,), 0)


def _eig(x):
    return np.sum(np.linalg.eig(x)[0])


def _partition(x):
    return np.sum(np.partition(x, 1))


def _fft(x):
    return np.sum(np.fft.fft(x).real)


@pytest.mark.parametrize("fn, name, text", [
    (_eig, "np.linalg.eig", "np.linalg.eig("),
    (_partition, "np.partition", "np.partition("),
    (_fft, "np.fft.fft", "np.fft.fft("),
], ids=["eig", "partition", "fft"])
def test_unsupported_numpy_names_function_and_line(fn, name, text):
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(fn)(np.eye(2) + 0.5)
    message = str(info.value)
    assert message.startswith(f"test_tracer.py:{_line_of(fn, text)}: ")
    assert name in message
    assert "gradgen.defvjp" in message and "gradgen.Function" in message  # says what to do


# --- functions without a source file ---------------------------------------------------------

EXEC_SOURCE = '''
import math


def f(x, y):
    z = math.sin(x) * y
    if z > 0:
        return z * z
    return -z
'''


def test_function_from_exec_without_source_file():
    namespace: dict = {}
    exec(compile(EXEC_SOURCE, "<string>", "exec"), namespace)  # noqa: S102  (code without a file)
    df = grad(namespace["f"], (0, 1))
    s, c = math.sin(1.0), math.cos(1.0)
    assert df(1.0, 2.0) == pytest.approx((8 * s * c, 4 * s * s), rel=1e-14)
    assert df(1.0, -2.0) == pytest.approx((2 * c, -s), rel=1e-14)
    assert df.source is not None
    module = run_emitted(df.source)
    assert module["f_grad"](1.0, -2.0) == pytest.approx((2 * c, -s), rel=1e-14)


def test_lambda_from_eval_and_exec_made_function():
    cube = eval("lambda x: x * x * x")
    assert grad(cube)(2.0) == 12.0
    namespace: dict = {}
    exec("def g(x):\n    return x ** 3 + math.sin(x)\n", {"math": math}, namespace)  # noqa: S102
    assert grad(namespace["g"])(2.0) == pytest.approx(12.0 + math.cos(2.0), rel=1e-14)


# --- data-dependent control flow -------------------------------------------------------------


def test_if_elif_else_every_branch_both_sides():
    traces = []

    def f(x):
        traces.append(x)
        if x > 1:
            y = x * x
        elif x > -1:
            y = 3 * x
        else:
            y = -x * x * x
        return y

    df = grad(f)
    cases = [(2.0, 4.0), (0.5, 3.0), (-2.0, -12.0), (1.5, 3.0), (0.0, 3.0), (-3.0, -27.0)]
    for x, expected in cases * 2:
        assert df(x) == expected
    assert len(traces) == 3  # one trace per path; later calls reuse the cached code
    assert df(1.0) == 3.0 and df(-1.0) == -3.0  # exactly at the boundaries: the elif/else


def test_early_return():
    def f(x):
        if x > 1:
            return x * x
        y = x * 3
        if y < 0:
            return y * y
        return y

    df = grad(f)
    for x, expected in [(2.0, 4.0), (0.5, 3.0), (-1.0, -18.0), (2.0, 4.0), (-1.0, -18.0)]:
        assert df(x) == expected


def test_while_with_value_dependent_trip_count():
    traces = []

    def f(x):
        traces.append(x)
        while x < 10:
            x = x * 2
        return x

    df = grad(f)
    for x, expected in [(1.0, 16.0), (3.0, 4.0), (0.1, 128.0), (20.0, 1.0), (1.2, 16.0),
                        (4.0, 4.0), (1.0, 16.0)]:
        assert df(x) == expected
    assert len(traces) == 4  # 1.0 and 1.2 (four doublings) share a path, as do 3.0 and 4.0


def test_for_over_range_of_an_int_argument():
    def f(x, n):
        acc = x
        for i in range(n):
            acc = acc * x + i
        return acc

    df = grad(f)
    assert df(1.5, 3) == 4 * 1.5**3 + 1
    assert df(1.5, 0) == 1.0
    assert df(1.5, 5) == 6 * 1.5**5 + 3 * 1.5**2 + 4 * 1.5 + 3
    assert df(1.5, 3) == 4 * 1.5**3 + 1


def _doubling_loop(x):
    while x < 10:
        x = x * 2
    return x


def test_emitted_module_checks_the_traced_path():
    module = run_emitted(gradgen.emit(_doubling_loop, 3.0))
    df = module["_doubling_loop_grad"]
    assert df(3.0) == 4.0
    assert df(4.0) == 4.0
    for off_path in (1.0, 20.0, 7.0):
        with pytest.raises(module["GuardFailure"]) as info:
            df(off_path)
        message = str(info.value)
        assert message.startswith(f"test_tracer.py:{_line_of(_doubling_loop, 'while')}: ")
        assert "< 10" in message
    assert module["GuardFailure"] is not gradgen.GuardFailure


def test_guard_failure_quotes_the_condition_as_written():
    module = run_emitted(gradgen.emit(_doubling_loop, 3.0))
    with pytest.raises(module["GuardFailure"]) as info:
        module["_doubling_loop_grad"](1.0)
    assert "x < 10" in str(info.value)


def test_int_of_a_traced_loop_count():
    def f(x, n):
        total = 0.0
        for _ in range(int(n)):
            total = total + x
        return total

    df = grad(f)
    assert df(2.0, 3) == 3.0
    assert df(2.0, 5) == 5.0


def test_scalar_constants_are_one_node_per_number():
    """A float is its own key (no repr per use); 0.0 and -0.0, an int and a float, and every
    nan stay told apart the way the emitted literal tells them apart."""
    from gradgen.tracer import Trace

    with Trace() as trace:
        refs = {label: trace.const(value) for label, value in
                [("2.0", 2.0), ("2", 2), ("True", True), ("0.0", 0.0), ("-0.0", -0.0),
                 ("nan", float("nan")), ("inf", math.inf)]}
        assert trace.const(2.0) is refs["2.0"] and trace.const(4.0 / 2) == refs["2.0"]
        assert trace.const(-0.0) == refs["-0.0"] and trace.const(float("nan")) == refs["nan"]
        assert trace.const(math.inf) == refs["inf"]
    assert len({r.node for r in refs.values()}) == len(refs)
    assert [type(r.node.attrs["value"]) for r in refs.values()] == [
        float, int, bool, float, float, float, float]


def test_where_ops_are_recorded_from_is_per_thread():
    """A trace holds the site of the thread that made it (the location and rule at_loc sets):
    another thread's at_loc never moves it, and its own is seen at once."""
    import threading

    from gradgen.source import SourceLoc
    from gradgen.tracer import Trace, at_loc

    here, there = SourceLoc("here.py", 1, "f"), SourceLoc("there.py", 2, "g")
    trace = Trace()
    seen = []

    def elsewhere():
        with at_loc(there, ("rule", 0)):
            seen.append((trace.site.loc, Trace().site.loc))

    with at_loc(here):
        worker = threading.Thread(target=elsewhere)
        worker.start()
        worker.join()
        assert trace.site.loc is here
    assert seen == [(here, there)]
    assert trace.site.loc is None and trace.site.origin is None


def test_the_shared_attrs_of_ops_without_attrs_stay_empty():
    # x * y and math.sin(x) share one attrs dict (tracer._NO_ATTRS): a pass that wrote into a
    # node's attrs would write into every such node's.
    from gradgen import tracer

    def f(x, y):
        h = x
        for _ in range(4):
            h = math.sin(h) * y + h / 2.0
        return -h * h

    gradgen.grad(f, argnums=(0, 1))(0.3, 0.7)
    gradgen.hessian(f)(0.3, 0.7)
    assert tracer._NO_ATTRS == {}
