"""User mistakes and unsupported code: one GradgenError subclass each, whose message starts
with the user's file:line, names the operation and says what to do."""

from __future__ import annotations

import inspect
import math
import random

import numpy as np
import pytest
from numpy.random import randn

import gradgen

grad = gradgen.grad


def _where(fn, text: str) -> str:
    """``test_errors.py:<line>`` of the first line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return f"test_errors.py:{first + offset}"
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def test_error_tree():
    for cls in (gradgen.UnsupportedOperation, gradgen.NonScalarOutput, gradgen.GuardFailure,
                gradgen.GradientMismatch):
        assert issubclass(cls, gradgen.GradgenError)
    assert issubclass(gradgen.GradientMismatch, AssertionError)
    assert issubclass(gradgen.GradgenError, Exception)


# --- operations without a rule ---------------------------------------------------------------


def gamma_of(x):
    y = math.gamma(x)
    return y


def lgamma_of(x):
    return math.lgamma(x) * 2


def eig_of(x):
    values = np.linalg.eig(x)[0]
    return np.sum(values)


def reduce_of(x):
    return np.logaddexp.reduce(x)


def ufunc_with_where(x):
    return np.sum(np.add(x, x, where=True))


def float_of(x):
    return float(x) * 2


def item_of(x):
    return x.item() * 2


def tolist_of(x):
    return sum(x.tolist())


def complex_of(x):
    return complex(x).real


def global_draw(x):
    return np.sum(x * np.random.normal(size=x.shape))


def dropout_mask(x):
    keep = np.random.rand(*x.shape) > 0.5
    return np.sum(x * keep)


def stdlib_draw(x):
    return np.sum(x) * random.gauss(0.0, 1.0)


def imported_draw(x):
    return np.sum(x * randn(*x.shape))


def unseeded_generator(x):
    rng = np.random.default_rng()
    return np.sum(x * rng.normal(size=x.shape))


UNSUPPORTED = [
    (gamma_of, 2.0, "math.gamma(", "math.gamma"),
    (lgamma_of, 0.5, "math.lgamma(", "math.lgamma"),
    (eig_of, np.eye(2) + 0.5, "np.linalg.eig(", "np.linalg.eig"),
    (reduce_of, np.ones(2), "np.logaddexp.reduce(", "np.logaddexp.reduce"),
    (ufunc_with_where, np.ones(2), "where=", "where="),
    (float_of, 1.0, "float(", "float()"),
    (item_of, np.ones(1), ".item()", ".item()"),
    (tolist_of, np.ones(2), ".tolist()", ".tolist()"),
    (complex_of, 1.0, "complex(", "complex()"),
    # a draw would be frozen into the gradient: later calls would reuse this trace's numbers
    (global_draw, np.ones(3), "np.random.normal(", "np.random.normal()"),
    (dropout_mask, np.ones(3), "np.random.rand(", "np.random.rand()"),
    (stdlib_draw, np.ones(3), "random.gauss(", "random.gauss()"),
    (imported_draw, np.ones(3), "randn(", "np.random.randn()"),
    (unseeded_generator, np.ones(3), "default_rng()", "np.random.default_rng() without a seed"),
]


@pytest.mark.parametrize("fn, arg, line_text, named", UNSUPPORTED,
                         ids=[c[0].__name__ for c in UNSUPPORTED])
def test_unsupported_operation_names_it_and_the_line(fn, arg, line_text, named):
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(fn)(arg)
    error = info.value
    message = str(error)
    assert message.startswith(_where(fn, line_text) + ": ")
    assert named in message
    assert error.hint  # says what to do
    assert str(error.loc) == _where(fn, line_text)


def test_unsupported_math_in_a_helper_names_the_helper_line():
    def helper(t):
        return math.gamma(t) + t

    def f(x):
        return helper(x * 2)

    with pytest.raises(gradgen.UnsupportedOperation, match=_where(helper, "math.gamma")):
        grad(f)(1.5)


def test_gradgen_emit_raises_the_same_errors():
    with pytest.raises(gradgen.UnsupportedOperation, match=_where(eig_of, "np.linalg.eig(")):
        gradgen.emit(eig_of, np.eye(2) + 0.5)


# --- in-place mutation -----------------------------------------------------------------------


_GLOBAL_BUFFER = np.zeros(3)


def write_into_a_read_only_view(x):
    b = np.broadcast_to(x, (2, 3))
    b[0, 0] = 1.0
    return np.sum(b)


def traced_float_into_an_int_buffer(x):
    h = np.zeros(3, dtype=int)
    h[0] = x[0] * 2
    return np.sum(h * x)


def add_at_into_a_global_array(x):
    np.add.at(_GLOBAL_BUFFER, [0, 1], x[:2])
    return np.sum(x)


@pytest.mark.parametrize("fn, line_text, named", [
    (write_into_a_read_only_view, "b[0, 0] = 1.0", "read-only view"),
    (traced_float_into_an_int_buffer, "h[0] = x[0] * 2", "truncates"),
    (add_at_into_a_global_array, "np.add.at(_GLOBAL_BUFFER, [0, 1], x[:2])", "np.add.at"),
], ids=["read_only_view", "int_buffer", "untraced_add_at"])
def test_in_place_writes_that_cannot_be_differentiated_are_refused(fn, line_text, named):
    a = np.ones(3)
    with pytest.raises(gradgen.GradgenError) as info:
        grad(fn)(a)
    assert str(info.value).startswith(_where(fn, line_text) + ": ")
    assert named in str(info.value)
    np.testing.assert_array_equal(a, np.ones(3))
    np.testing.assert_array_equal(_GLOBAL_BUFFER, np.zeros(3))


# --- values that are locally constant ----------------------------------------------------------


def test_a_generator_seeded_inside_draws_the_same_constants_every_call():
    def noisy(x):
        rng = np.random.default_rng(7)
        return np.sum(x * rng.normal(size=x.shape))

    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(grad(noisy)(x), np.random.default_rng(7).normal(size=3))


def test_floor_int_and_round_are_locally_constant():
    assert grad(lambda x: math.floor(x) * x)(2.5) == 2.0
    assert grad(lambda x: math.floor(x) * x)(3.5) == 3.0  # another value: retraced
    assert grad(lambda x: int(x) * x)(2.5) == 2.0
    assert grad(lambda x: round(x) * x)(2.4) == 2.0
    assert grad(lambda x: math.floor(x) * 1.0)(2.5) == 0.0


# --- outputs and arguments ---------------------------------------------------------------------


def returns_a_string(x):
    return "done"


def test_returning_something_that_is_not_a_number():
    with pytest.raises(gradgen.GradgenError) as info:
        grad(returns_a_string)(1.0)
    message = str(info.value)
    assert message.startswith(_where(returns_a_string, "def returns_a_string"))
    assert "str" in message


def vector_out(x):
    return x * 2


def test_non_scalar_output_names_the_shape_and_the_line():
    with pytest.raises(gradgen.NonScalarOutput) as info:
        grad(vector_out)(np.ones(3))
    assert str(info.value).startswith(_where(vector_out, "return x * 2"))
    assert "(3,)" in str(info.value) and "np.sum" in str(info.value)


def test_int_output_has_no_gradient():
    with pytest.raises(gradgen.NonScalarOutput, match="int"):
        grad(lambda x: 3)(1.0)


def test_unhashable_static_argument():
    with pytest.raises(gradgen.GradgenError, match="bytearray"):
        grad(lambda x, s: x)(1.0, bytearray(b"a"))


def test_argument_errors_name_the_parameter():
    def f(x, steps):
        return x * steps

    with pytest.raises(gradgen.GradgenError, match="'steps'") as info:
        grad(f, argnums=1)(1.0, 3)
    assert "2.0 instead of 2" in str(info.value)  # and says what to do


# --- derivatives that do not exist at the input ------------------------------------------------


def sqrt_of(x):
    y = math.sqrt(x)
    return y


def negative_base(x):
    return (-2.0) ** x


def test_non_finite_derivative_at_trace_time_names_the_line():
    with pytest.raises(gradgen.GradgenError) as info:
        grad(sqrt_of)(0.0)
    message = str(info.value)
    assert message.startswith(_where(sqrt_of, "math.sqrt") + ": ")
    assert "ZeroDivisionError" in message and "not finite" in message
    with pytest.raises(gradgen.GradgenError, match=_where(negative_base, "** x")):
        grad(negative_base)(2.0)


def test_non_finite_derivative_on_a_compiled_path_names_the_line():
    df = grad(sqrt_of)
    assert df(4.0) == 0.25
    with pytest.raises(gradgen.GradgenError) as info:
        df(0.0)
    assert str(info.value).startswith(_where(sqrt_of, "math.sqrt") + ": ")
    assert "not finite" in str(info.value)


def test_the_users_own_exceptions_pass_through():
    def f(x):
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        grad(f)(1.0)


TABLE = np.arange(5.0)


def test_a_traced_index_into_a_plain_array_says_how_to_trace_it():
    def picked(x):
        return np.sum(TABLE[np.argsort(x)[:2]] * x[:2])

    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(picked)(np.array([3.0, 1.0, 2.0]))
    assert "traced index or mask used on a plain NumPy array" in str(info.value)
    assert "table = np.asarray(table)" in str(info.value)
    assert "test_errors.py:" in str(info.value)

    def traced_table(x):
        table = np.asarray(TABLE)  # what the message says to write
        return np.sum(table[np.argsort(x)[:2]] * x[:2])

    np.testing.assert_array_equal(grad(traced_table)(np.array([3.0, 1.0, 2.0])), [1.0, 2.0, 0.0])


def test_np_float64_of_a_traced_value_points_at_astype():
    with pytest.raises(gradgen.UnsupportedOperation, match=r"x\.astype\(np\.float64\)"):
        grad(lambda x: np.float64(np.sum(x)) * 2.0)(np.ones(3))
