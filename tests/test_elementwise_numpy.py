"""The elementwise family as NumPy and math spell it: every differentiable float ufunc (and
alias), np.where/np.select/np.clip/np.nan_to_num, the math functions, the boolean and rounding
functions (locally constant), called inside user functions on float64 and float32 arrays, 0-d
arrays and Python floats. Each gradient is compared with central differences and with the
emitted module; the conventions at kinks (abs, maximum ties, fmax/fmin with nan, heaviside,
sign, clip at its bounds, hypot at the origin, sinc at 0) and the pow-at-zero fix are pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradgen
from gradgen.errors import GradgenError, UnsupportedOperation

from .conftest import assert_gradient, numeric_grad, run_emitted

RNG = np.random.default_rng(7)
X = np.array([0.3, -1.2, 2.1, 0.7, -0.4])
POS = np.array([0.3, 1.2, 2.1, 0.7, 1.9])
UNIT = np.array([0.3, -0.6, 0.1, 0.7, -0.4])
BIG = np.array([1.3, 1.7, 2.1, 2.5, 1.9])  # arccosh
W = np.linspace(0.5, 1.5, 5)  # distinct cotangents
OTHER = X[::-1] + 0.05  # no ties with X



def check(f, x, rtol=1e-6):
    """gradgen's gradient equals central differences, keeps x's type, shape and dtype, and the
    emitted module computes the same value and gradient; float32 stays float32."""
    if f.__name__ == "<lambda>":
        f = _named(f, "f")
    grad, _ = assert_gradient(f, x, rtol=rtol)
    if isinstance(x, float):
        assert type(grad) is float
    else:
        assert isinstance(grad, np.ndarray) and grad.dtype == x.dtype
    if isinstance(x, np.ndarray) and x.ndim:
        ref = numeric_grad(f, (x,))
        x32 = x.astype(np.float32)
        g32 = gradgen.grad(f)(x32)
        assert g32.dtype == np.float32, f"{f.__name__}: float32 gave a {g32.dtype} gradient"
        np.testing.assert_allclose(g32, grad, rtol=2e-3, atol=2e-3 * max(1.0, np.abs(ref).max()))
    return grad


def _named(fn, name):
    fn.__name__ = name
    return fn


# --- every ufunc, as NumPy spells it --------------------------------------------------------

UNARY = {  # name: (function, sample)
    "negative": (np.negative, X), "positive": (np.positive, X),
    "reciprocal": (np.reciprocal, POS), "square": (np.square, X), "sqrt": (np.sqrt, POS),
    "cbrt": (np.cbrt, X), "exp": (np.exp, X), "exp2": (np.exp2, X), "expm1": (np.expm1, X),
    "log": (np.log, POS), "log2": (np.log2, POS), "log10": (np.log10, POS),
    "log1p": (np.log1p, POS), "sin": (np.sin, X), "cos": (np.cos, X), "tan": (np.tan, UNIT),
    "arcsin": (np.arcsin, UNIT), "arccos": (np.arccos, UNIT), "arctan": (np.arctan, X),
    "sinh": (np.sinh, X), "cosh": (np.cosh, X), "tanh": (np.tanh, X),
    "arcsinh": (np.arcsinh, X), "arccosh": (np.arccosh, BIG), "arctanh": (np.arctanh, UNIT),
    "sinc": (np.sinc, X), "deg2rad": (np.deg2rad, X), "rad2deg": (np.rad2deg, X),
    "degrees": (np.degrees, X), "radians": (np.radians, X), "absolute": (np.absolute, X),
    "abs": (np.abs, X), "fabs": (np.fabs, X), "real": (np.real, X),
    "conj": (np.conj, X), "conjugate": (np.conjugate, X),
    "nan_to_num": (np.nan_to_num, X),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_ufunc(name):
    fn, x = UNARY[name]
    check(_named(lambda x: np.sum(W * fn(x)), name), x)


@pytest.mark.parametrize("name", ["sqrt", "exp", "sinc", "cbrt", "arcsinh", "logaddexp"])
def test_unary_on_a_python_float_and_a_0d_array(name):
    fn = {"logaddexp": lambda x: np.logaddexp(x, 0.5)}.get(name, getattr(np, name))
    check(_named(lambda x: fn(x) * 1.0, name), 0.7)
    check(_named(lambda x: fn(x) * 1.0, name), np.array(0.7))


@pytest.mark.parametrize("name", ["sinc", "square", "cbrt", "exp2", "logaddexp", "heaviside",
                                  "fmax", "copysign", "isfinite", "signbit", "where"])
def test_numpy_only_functions_of_python_floats_return_numpy_scalars(name):
    """A ufunc of a Python float returns a NumPy float64 (or bool) scalar: so does the traced
    value and the emitted module."""
    calls = {"logaddexp": lambda x: np.logaddexp(x, 0.5), "heaviside": lambda x:
             np.heaviside(x, 0.5), "fmax": lambda x: np.fmax(x, 0.5),
             "copysign": lambda x: np.copysign(x, -1.0), "where": lambda x:
             np.where(x > 0, x, 0.0)}
    fn = calls.get(name, getattr(np, name, None))
    expected = fn(0.7)
    got = gradgen.value_and_grad(lambda x: (x * fn(x)) * 1.0)(0.7)[0]
    np.testing.assert_allclose(got, 0.7 * expected)
    assert type(fn(0.7)) is type(expected)  # the function itself, as NumPy: a NumPy scalar

    def f(x):
        return fn(x)

    traced = gradgen.trace(f, 0.7)
    out = traced.meta["values"][traced.outputs[0].node]
    assert type(out) is type(expected), f"np.{name}(float) traced as {type(out).__name__}"


BINARY = {  # name: (function, second argument)
    "add": (np.add, OTHER), "subtract": (np.subtract, OTHER),
    "multiply": (np.multiply, OTHER), "divide": (np.divide, POS),
    "true_divide": (np.true_divide, POS), "arctan2": (np.arctan2, POS),
    "hypot": (np.hypot, OTHER), "logaddexp": (np.logaddexp, OTHER),
    "logaddexp2": (np.logaddexp2, OTHER), "maximum": (np.maximum, OTHER),
    "minimum": (np.minimum, OTHER), "fmax": (np.fmax, OTHER), "fmin": (np.fmin, OTHER),
    "copysign": (np.copysign, OTHER), "heaviside": (np.heaviside, OTHER),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("side", ["left", "right", "both"])
def test_binary_ufunc(name, side):
    fn, other = BINARY[name]
    if side == "left":
        f = lambda x: np.sum(W * fn(x, other))
    elif side == "right":
        f = lambda x: np.sum(W * fn(other, x))
        if name in ("divide", "true_divide", "arctan2"):
            f = lambda x: np.sum(W * fn(other, x + 3.0))
    else:
        f = lambda x: np.sum(W * fn(x, x[::-1] * 0.5 + 0.25))
    check(_named(f, name), X)


def test_broadcasting_and_python_scalars():
    m = RNG.normal(size=(3, 4))
    check(lambda x: np.sum(np.logaddexp(x, x[:1]) * np.hypot(x, 0.5)), m)
    check(lambda x: np.sum(np.fmax(x, np.arange(4.0) - 1.5) + np.copysign(x, -1.0)), m)
    check(lambda x: np.arctan2(x, 2.0) + np.exp2(x) * np.cbrt(x), 0.7)


@pytest.mark.parametrize("power", [np.power, np.float_power])
def test_power_and_float_power(power):
    check(lambda x: np.sum(W * power(x, 3)), X)
    check(lambda x: np.sum(W * power(x, 2.5)), POS)
    check(lambda x: np.sum(W * power(2.0, x)), X)
    check(lambda x: np.sum(W * power(x, x[::-1])), POS)


def test_float_power_computes_in_float64_like_numpy():
    x = POS.astype(np.float32)

    def f(x):
        y = np.float_power(x, 2)
        assert y.dtype == np.float64  # as NumPy
        return np.sum(y)

    g = gradgen.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * x, rtol=1e-6)


# --- where, select, clip, nan_to_num --------------------------------------------------------


def test_where():
    check(lambda x: np.sum(W * np.where(x > 0, x ** 2, -3 * x)), X)
    check(lambda x: np.sum(np.where(x > 0.5, x, 0.5)), X)  # a Python float branch
    check(lambda x: np.sum(np.where([True, False, True, False, True], x, x * x)), X)
    check(lambda x: np.sum(np.where(x, x, 1.0)), X)  # a float condition: nonzero
    check(lambda x: np.where(x > 0, x * x, 0.0) * 1.0, 0.7)  # a 0-d array result
    m = RNG.normal(size=(2, 3))
    check(lambda x: np.sum(np.where(x[:, :1] > 0, x, x[0])), m)  # broadcasting everything


def test_where_on_python_floats_is_a_conditional_expression():
    from gradgen.ops.elementwise import where

    def f(x, y):
        return where(x > y, x * y, 2.0 * x)

    assert gradgen.grad(f, argnums=(0, 1))(3.0, 2.0) == (2.0, 3.0)
    assert gradgen.grad(f, argnums=(0, 1))(1.0, 2.0) == (2.0, 0.0)
    src = gradgen.emit(f, 3.0, 2.0)
    assert "if" in src and "np." not in src
    assert run_emitted(src)["f_value_and_grad"](1.0, 2.0) == (2.0, 2.0)


def test_where_keeps_float32():
    x = X.astype(np.float32)
    g = gradgen.grad(lambda x: np.sum(np.where(x > 0, x, 0.0) * np.select([x > 1], [x], 2.0)))(x)
    assert g.dtype == np.float32


def test_select():
    def f(x):
        return np.sum(W * np.select([x > 1, x > 0], [x ** 2, 3 * x], default=0.5 * x))

    check(f, X)
    check(lambda x: np.sum(np.select([x > 0], [x])), X)  # default 0
    assert np.allclose(gradgen.grad(lambda x: np.sum(np.select([x > 0, x > -1], [x, 2 * x])))(
        X), np.select([X > 0, X > -1], [1.0, 2.0]))


@pytest.mark.parametrize(("lo", "hi"), [(-0.5, 1.0), (None, 0.5), (-0.5, None),
                                        (np.array([-1.0, 0, 0, 0.5, -2]), 1.5)])
def test_clip_constant_bounds(lo, hi):
    check(lambda x: np.sum(W * np.clip(x, lo, hi)), X)
    check(lambda x: np.sum(W * x.clip(lo, hi)), X)


def test_clip_traced_bounds():
    def f(p):
        x, lo, hi = p[:5], p[5], p[6]
        return np.sum(W * np.clip(x, lo, hi))

    check(f, np.concatenate([X, [-0.5, 0.9]]))
    check(f, np.concatenate([X, [0.9, -0.5]]))  # lo > hi: NumPy gives hi everywhere
    check(lambda x: np.sum(np.clip(x[:3], x[3:] - 1.5, 2.0)), np.array([0.1, -1.2, 0.5, 2.0,
                                                                       3.0, 1.0]))
    check(lambda x: np.clip(x, 0.0, 1.0) * 2.0, 0.7)
    check(lambda x: np.clip(2.0 * x, min=0.0, max=1.0) * 2.0, 0.3)


def test_clip_at_its_bounds_passes_the_gradient_to_x():
    """The convention (JAX's): x gets the cotangent where lo <= x <= hi, bounds included; a
    bound gets it only where it is strictly the result."""

    def f(x, lo, hi):
        return np.sum(np.clip(x, lo, hi))

    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    gx, glo, ghi = gradgen.grad(f, argnums=(0, 1, 2))(x, 0.0, 1.0)
    np.testing.assert_array_equal(gx, [0, 1, 1, 1, 0])
    assert (glo, ghi) == (1.0, 1.0)
    gx, glo, ghi = gradgen.grad(f, argnums=(0, 1, 2))(x, 2.0, 1.0)  # lo > hi: hi wins
    np.testing.assert_array_equal(gx, 0)
    assert (glo, ghi) == (0.0, 5.0)


def test_nan_to_num():
    x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0])

    def f(x):
        return np.sum(W * np.nan_to_num(x, nan=1.5, posinf=10.0, neginf=-10.0))

    np.testing.assert_array_equal(gradgen.grad(f)(x), W * [1, 0, 0, 0, 1])
    module = run_emitted(gradgen.emit(f, x))
    value, g = module["f_value_and_grad"](x)
    assert value == f(x)
    np.testing.assert_array_equal(g, W * [1, 0, 0, 0, 1])
    check(lambda x: np.sum(W * np.nan_to_num(x * x)), X)
    assert type(np.nan_to_num(2.0)) is np.float64
    v, g = gradgen.value_and_grad(lambda x: np.nan_to_num(x) * 1.0)(2.0)
    assert (v, g) == (2.0, 1.0)


# --- math functions --------------------------------------------------------------------------

MATH = {
    "sin": (math.sin, 0.7), "cos": (math.cos, 0.7), "tan": (math.tan, 0.7),
    "asin": (math.asin, 0.3), "acos": (math.acos, 0.3), "atan": (math.atan, 0.7),
    "sinh": (math.sinh, 0.7), "cosh": (math.cosh, 0.7), "tanh": (math.tanh, 0.7),
    "asinh": (math.asinh, 0.7), "acosh": (math.acosh, 1.7), "atanh": (math.atanh, 0.3),
    "exp": (math.exp, 0.7), "exp2": (math.exp2, 0.7), "expm1": (math.expm1, 0.7),
    "log": (math.log, 0.7), "log2": (math.log2, 0.7), "log10": (math.log10, 0.7),
    "log1p": (math.log1p, 0.7), "sqrt": (math.sqrt, 0.7), "cbrt": (math.cbrt, -0.7),
    "fabs": (math.fabs, -0.7), "erf": (math.erf, 0.7), "erfc": (math.erfc, 0.7),
    "radians": (math.radians, 0.7), "degrees": (math.degrees, 0.7),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_function(name):
    fn, x = MATH[name]
    check(_named(lambda x: fn(x) * 1.0, name), x)


@pytest.mark.parametrize("f", [
    pytest.param(lambda x: math.atan2(x, 0.5), id="atan2"),
    pytest.param(lambda x: math.atan2(0.5, x), id="atan2_right"),
    pytest.param(lambda x: math.hypot(x, 0.5), id="hypot"),
    pytest.param(lambda x: math.copysign(x, -2.0), id="copysign"),
    pytest.param(lambda x: math.pow(x, 2.5), id="pow"),
    pytest.param(lambda x: math.fmod(x * 3.0, 1.3), id="fmod"),
    pytest.param(lambda x: math.fmod(3.0, x), id="fmod_right"),
    pytest.param(lambda x: math.log(x, 3.0), id="log_base"),
])
def test_math_binary(f):
    check(f, 0.7)


def test_math_function_of_a_numpy_scalar_is_a_python_float():
    def f(x):
        return math.erf(x[0]) + math.cbrt(x[1]) + math.exp2(x[2])

    check(f, X[:3])


# --- pow at zero (regression) ----------------------------------------------------------------


def _grad2(f):
    return gradgen.grad(gradgen.grad(f))


@pytest.mark.parametrize("f", [
    pytest.param(lambda x: x ** 0, id="x**0"),
    pytest.param(lambda x: x ** 0.0, id="x**0.0"),
    pytest.param(lambda x: np.power(x, 0.0), id="np.power"),
    pytest.param(lambda x: math.pow(x, 0), id="math.pow"),
])
def test_derivative_of_x_to_the_zero_at_zero_is_zero(f):
    assert gradgen.grad(f)(0.0) == 0.0
    assert _grad2(f)(0.0) == 0.0
    assert gradgen.grad(f)(2.0) == 0.0
    g = gradgen.grad(lambda x: np.sum(f(x)))(np.array([0.0, 1.0, -2.0]))
    np.testing.assert_array_equal(g, 0.0)


def _summed(fn):
    def f(x):
        return np.sum(fn(x))

    return f


@pytest.mark.parametrize(("n", "d1", "d2"), [(1, 1.0, 0.0), (2, 0.0, 2.0), (3, 0.0, 0.0)])
def test_small_integer_powers_at_zero(n, d1, d2):
    for f in (lambda x: x ** n, lambda x: np.power(x, float(n)), lambda x: math.pow(x, n)):
        assert gradgen.grad(f)(0.0) == d1
        assert _grad2(f)(0.0) == d2
        g = gradgen.grad(_summed(f))(np.zeros(2))
        np.testing.assert_array_equal(g, d1)


def test_traced_exponent_at_zero():
    def f(x, y):
        return x ** y

    gx, gy = gradgen.grad(f, argnums=(0, 1))(0.0, 0.0)
    assert (gx, gy) == (0.0, 0.0)
    gx, gy = gradgen.grad(f, argnums=(0, 1))(0.0, 2.0)
    assert (gx, gy) == (0.0, 0.0)
    gx, gy = gradgen.grad(f, argnums=(0, 1))(0.0, 1.0)
    assert (gx, gy) == (1.0, 0.0)
    # second order: no nan anywhere, and the mixed derivative at y = 0 off x = 0 is 1 / x
    h = gradgen.hessian(f, argnums=(0, 1))(0.0, 0.0)
    assert not np.isnan(np.asarray(h, dtype=float)).any()
    hxy = gradgen.grad(lambda x, y: gradgen.grad(f, argnums=0)(x, y), argnums=1)(2.0, 0.0)
    assert hxy == pytest.approx(0.5)
    # arrays, with an exponent array holding zeros
    x = np.array([0.0, 0.0, 2.0, 0.0])
    y = np.array([0.0, 1.0, 0.0, 2.0])
    gx, gy = gradgen.grad(lambda x, y: np.sum(x ** y), argnums=(0, 1))(x, y)
    np.testing.assert_array_equal(gx, [0.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 0.0, math.log(2.0), 0.0])
    g = gradgen.grad(lambda x: np.sum(x ** y))(x)  # a constant exponent array with zeros
    np.testing.assert_array_equal(g, [0.0, 1.0, 0.0, 0.0])
    hvp = gradgen.grad(lambda x: np.sum(gradgen.grad(lambda x: np.sum(x ** y))(x)))(x)
    np.testing.assert_array_equal(hvp, [0.0, 0.0, 0.0, 2.0])


def test_pow_at_zero_in_the_emitted_module():
    def f(x):
        return np.sum(x ** 0.0 + x ** 1 + x ** 2)

    x = np.array([0.0, 1.5])
    module = run_emitted(gradgen.emit(f, x))
    _, g = module["f_value_and_grad"](x)
    np.testing.assert_array_equal(g, [1.0, 4.0])


# --- float32 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY) + ["power", "clip", "where"])
def test_float32_in_float32_out(name):
    x = (BIG if name == "arccosh" else POS if name in (
        "reciprocal", "sqrt", "log", "log2", "log10", "log1p", "power") else UNIT).astype(np.float32)
    if name in UNARY:
        fn = UNARY[name][0]
    elif name in BINARY:
        fn = lambda x: BINARY[name][0](x, x[::-1] + 1.0)
    else:
        fn = {"power": lambda x: np.power(x, 3) + np.power(x, 0.0) + np.power(x, x * x),
              "clip": lambda x: np.clip(x, -0.5, 0.5) + np.clip(x, x[::-1], None),
              "where": lambda x: np.where(x > 0, x * x, np.exp(x))}[name]

    def f(x):
        y = fn(x)
        assert y.dtype == np.float32, f"{name} computed in {y.dtype}"
        return np.sum(y * np.float32(1.5))

    value, g = gradgen.value_and_grad(f)(x)
    assert np.result_type(value) == np.float32
    assert g.dtype == np.float32
    src = gradgen.emit(f, x)
    v2, g2 = run_emitted(src)["f_value_and_grad"](x)
    assert g2.dtype == np.float32 and np.result_type(v2) == np.float32


def test_second_order_of_float32_stays_float32():
    x = UNIT.astype(np.float32)
    for fn in (np.exp2, np.log1p, np.cbrt, np.arcsinh, np.sinc, lambda x: np.logaddexp(x, 1.0),
               lambda x: np.hypot(x, 1.0), lambda x: x ** 0.0):
        h = gradgen.grad(lambda x, fn=fn: np.sum(gradgen.grad(lambda x: np.sum(fn(x)))(x)))(x)
        assert h.dtype == np.float32


# --- kinks and domain edges: the documented conventions --------------------------------------


def _calling(fn):
    def f(x):
        return fn(x) * 1.0

    return f


def test_abs_fabs_sign_at_zero():
    for f in (abs, np.abs, np.absolute, np.fabs, math.fabs):
        assert gradgen.grad(_calling(f))(0.0) == 0.0
    assert gradgen.grad(lambda x: np.sign(x) * 1.0)(0.0) == 0.0
    g = gradgen.grad(lambda x: np.sum(np.abs(x) + np.sign(x)))(np.array([0.0, -1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, -1.0, 1.0])


def test_maximum_minimum_ties_go_to_the_first_argument():
    for fn in (np.maximum, np.minimum, np.fmax, np.fmin):
        gx, gy = gradgen.grad(lambda x, y, fn=fn: np.sum(fn(x, y)), argnums=(0, 1))(
            np.full(3, 1.5), np.full(3, 1.5))
        np.testing.assert_array_equal(gx, 1.0)
        np.testing.assert_array_equal(gy, 0.0)


def test_fmax_fmin_ignore_nan():
    x = np.array([np.nan, 1.0, 2.0, 3.0])
    y = np.array([1.0, np.nan, 3.0, 2.0])
    for fn, gx_want in ((np.fmax, [0, 1, 0, 1]), (np.fmin, [0, 1, 1, 0])):
        gx, gy = gradgen.grad(lambda x, y, fn=fn: np.nansum(fn(x, y)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(gx, gx_want)
        np.testing.assert_array_equal(gy, 1 - np.array(gx_want))


def test_heaviside_passes_nothing_to_x_and_h0_gets_it_at_zero():
    def f(x, h0):
        return np.sum(np.heaviside(x, h0))

    gx, gh = gradgen.grad(f, argnums=(0, 1))(np.array([-1.0, 0.0, 0.0, 2.0]), 0.5)
    np.testing.assert_array_equal(gx, 0.0)
    assert gh == 2.0


def test_hypot_at_the_origin_is_zero():
    gx, gy = gradgen.grad(lambda x, y: np.hypot(x, y) * 1.0, argnums=(0, 1))(0.0, 0.0)
    assert (gx, gy) == (0.0, 0.0)
    assert gradgen.grad(lambda x: math.hypot(x, 0.0))(0.0) == 0.0
    h = gradgen.hessian(lambda x: np.sum(np.hypot(x, 0.0)))(np.zeros(2))
    assert not np.isnan(h).any()


def test_sinc_at_zero():
    assert gradgen.grad(lambda x: np.sinc(x) * 1.0)(0.0) == 0.0
    assert _grad2(lambda x: np.sinc(x) * 1.0)(0.0) == pytest.approx(-math.pi ** 2 / 3)
    h = gradgen.grad(lambda x: np.sum(gradgen.grad(lambda x: np.sum(np.sinc(x)))(x)))(
        np.array([0.0, 0.5]))
    eps = 1e-4
    d2 = (np.sinc(0.5 + eps) - 2 * np.sinc(0.5) + np.sinc(0.5 - eps)) / eps ** 2
    np.testing.assert_allclose(h, [-math.pi ** 2 / 3, d2], rtol=1e-5)


def test_copysign_at_zero():
    assert gradgen.grad(lambda x: np.copysign(x, -1.0) * 1.0)(0.0) == 0.0
    assert gradgen.grad(lambda x: math.copysign(x, -1.0))(2.0) == -1.0
    assert gradgen.grad(lambda y: math.copysign(2.0, y))(-1.0) == 0.0


def test_logaddexp_is_stable_far_out():
    def f(x, y):
        return np.logaddexp(x, y) * 1.0

    gx, gy = gradgen.grad(f, argnums=(0, 1))(1000.0, 0.0)
    assert gx == 1.0 and gy == pytest.approx(0.0) and np.isfinite(gy)
    gx, gy = gradgen.grad(lambda x, y: np.logaddexp2(x, y) * 1.0, argnums=(0, 1))(-1000.0, 3.0)
    assert gx == pytest.approx(0.0) and gy == 1.0
    x = np.array([800.0, -800.0], dtype=np.float32)
    g = gradgen.grad(lambda x: np.sum(np.logaddexp(x, 0.0)))(x)
    np.testing.assert_allclose(g, [1.0, 0.0])
    assert g.dtype == np.float32


def test_logaddexp_passes_a_sigmoid_without_overflow_or_its_own_value():
    """d logaddexp(u, v)/dv = sigmoid(v - u), from exp(-|v - u|) only: no warning at
    +-1000, inf and -inf give 1 and 0, the gradient alone never computes the forward
    logaddexp (dearer than an exp), and the second derivative at u = v is 1/4 (an abs in the
    rule would give abs's kink there, 0)."""
    def softplus_sum(x):
        return np.sum(np.logaddexp(0.0, x))

    x = np.array([-np.inf, -1000.0, -30.0, -0.5, 0.0, 0.5, 30.0, 1000.0, np.inf])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # exp(-1000) is 0
        g = gradgen.grad(softplus_sum)(x)
    finite = x[1:-1]
    expected = [1.0 / (1.0 + math.exp(-v)) if v >= 0 else math.exp(v) / (1.0 + math.exp(v))
                for v in finite]
    np.testing.assert_allclose(g[1:-1], expected, rtol=4 * np.finfo(float).eps)
    assert g[0] == 0.0 and g[-1] == 1.0 and g[4] == 0.5
    module = gradgen.emit(softplus_sum, x)
    grad_only = module[module.index("def softplus_sum_grad("):module.index("def softplus_sum_v")]
    code = [line.split("#")[0] for line in grad_only.split('"""')[-1].splitlines()]
    assert not any("logaddexp" in line for line in code) and "np.logaddexp(" in module
    for u in (0.0, 1.7, -2.3):
        assert gradgen.hessian(lambda v, u=u: np.logaddexp(u, v) * 1.0)(u) == pytest.approx(0.25)
    h = gradgen.hessian(lambda x: np.sum(np.logaddexp(x[0], x[1])))(np.array([0.4, 0.4]))
    np.testing.assert_allclose(h, [[0.25, -0.25], [-0.25, 0.25]])


def test_locally_constant_functions_pass_no_gradient():
    fns = [np.floor, np.ceil, np.trunc, np.rint, np.round, np.around, np.fix, np.sign,
           lambda x: np.round(x, 2), lambda x: np.round(x, -1), np.isfinite, np.isnan,
           np.isinf, np.signbit, lambda x: np.logical_and(x > 0, x < 1),
           lambda x: np.logical_or(x > 1, x < -1), lambda x: np.logical_xor(x > 0, x > 1),
           lambda x: np.logical_not(x > 0), lambda x: np.less(x, 0.5),
           lambda x: np.greater_equal(x, 0.5)]
    x = np.array([0.26, -1.35, 2.5, 13.0])
    for fn in fns:
        g = gradgen.grad(lambda x, fn=fn: np.sum(x * fn(x)))(x)
        np.testing.assert_array_equal(g, np.asarray(fn(x), dtype=np.float64))
        v = gradgen.value_and_grad(lambda x, fn=fn: np.sum(x * fn(x)))(x)[0]
        assert v == np.sum(x * fn(x))


def test_round_with_decimals_matches_numpy_bit_for_bit():
    x = RNG.normal(size=50) * 100
    for d in (-2, -1, 1, 3):
        def f(x, d=d):
            return np.sum(np.round(x, d) * x)

        assert gradgen.value_and_grad(f)(x)[0] == f(x)
        np.testing.assert_array_equal(gradgen.grad(f)(x), np.round(x, d))
    x32 = x.astype(np.float32)
    assert gradgen.grad(lambda x: np.sum(np.round(x, 1) * x))(x32).dtype == np.float32
    assert type(gradgen.value_and_grad(lambda x: np.round(x, 1) * x)(2.567)[0]) is np.float64


def test_imag_and_real_of_real_input():
    def f(x):
        return np.sum(x.real * 2 + np.imag(x) + np.real(x) + x.imag + np.conj(x))

    check(f, X)
    assert gradgen.grad(lambda x: np.real(x) * 2.0 + np.imag(x))(0.7) == 2.0


def test_positive_and_conj_do_not_alias_their_input():
    def f(x):
        y = np.positive(x)
        z = np.conj(x)
        y[0] = 0.0
        z[1] = 0.0
        return np.sum(x * x) + np.sum(y) + np.sum(z)

    check(f, X)


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("f", "name"), [
    (lambda x: np.sum(np.clip(x, 0, 1, out=x)), "np.clip"),
    (lambda x: np.sum(np.nan_to_num(x, copy=False)), "np.nan_to_num"),
    (lambda x: np.sum(np.nan_to_num(x, nan=x[0])), "np.nan_to_num"),
    (lambda x: np.sum(np.exp(x, dtype=np.float32)), "np.exp"),
    (lambda x: np.sum(np.round(x, 1, out=np.empty_like(x))), "np.round"),
    (lambda x: np.sum(np.reciprocal(x.astype(int)) * x), "np.reciprocal"),
    (lambda x: np.sum(np.select(np.array([True]), [x])), "np.select"),
    (lambda x: math.gamma(x[0]), "math.gamma"),
])
def test_unsupported_arguments_are_refused_by_name(f, name):
    with pytest.raises(UnsupportedOperation, match=name.replace(".", r"\.")):
        gradgen.grad(f)(X.copy())


def test_user_errors_keep_numpys_messages():
    with pytest.raises(ValueError, match="either both or neither"):
        gradgen.grad(lambda x: np.sum(np.where(x > 0, x)))(X)
    with pytest.raises(ValueError, match="same length"):
        gradgen.grad(lambda x: np.sum(np.select([x > 0], [x, x])))(X)


def test_infinite_derivative_of_a_python_float_is_reported():
    with pytest.raises(GradgenError, match="derivative"):
        gradgen.grad(lambda x: x ** 0.5)(0.0)
