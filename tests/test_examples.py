"""The forum examples in examples/: each gives the gradient its docstring promises, through
gradgen.grad and through the emitted module run on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradgen

from .conftest import load_example, run_emitted


def test_square_plus():
    f = load_example("square_plus").f
    assert gradgen.grad(f)(2.0) == 4.0
    assert gradgen.grad(f)(-1.5) == -3.0


def test_reused_value():
    f = load_example("reused_value").f
    assert gradgen.grad(f)(2.0) == 12.0
    assert gradgen.value_and_grad(f)(2.0) == (13.0, 12.0)


def test_add_mul_all_arguments():
    f = load_example("add_mul").f
    grads = gradgen.grad(f, argnums=(0, 1, 2))(2.0, 3.0, 4.0)
    assert grads == (4.0, 4.0, 5.0)
    assert all(type(g) is float for g in grads)


@pytest.mark.parametrize("argnum, expected", [(0, 4.0), (1, 4.0), (2, 5.0)])
def test_add_mul_one_argument(argnum, expected):
    f = load_example("add_mul").f
    assert gradgen.grad(f, argnums=argnum)(2.0, 3.0, 4.0) == expected


@pytest.mark.parametrize("x", [0.0, 0.5, 2.0, -1.25])
def test_sine_gives_cos(x):
    f = load_example("sine").f
    assert gradgen.grad(f)(x) == math.cos(x)


def test_sine_module_prints_the_rule():
    f = load_example("sine").f
    source = gradgen.emit(f, 0.5)
    assert "math.cos(x)" in source
    assert run_emitted(source)["f_grad"](0.5) == math.cos(0.5)


def _doublings(x: np.ndarray) -> int:
    """How many times examples/doubling.py multiplies x by 2."""
    k, y = 1, x * 2
    while np.linalg.norm(y) < 1000:
        y = y * 2
        k += 1
    return k


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_doubling_gradient_is_a_power_of_two(seed):
    f = load_example("doubling").f
    rng = np.random.default_rng(seed)
    x = rng.normal(size=4) * 10.0 ** rng.uniform(-3, 1)
    df = gradgen.grad(f)
    k = _doublings(x)
    g = df(x)
    assert isinstance(g, np.ndarray) and g.shape == x.shape and g.dtype == x.dtype
    np.testing.assert_array_equal(g, np.full(4, 2.0**k))


def test_doubling_one_function_many_trip_counts():
    """One grad callable, inputs needing different numbers of doublings: each call retraces
    or reuses the right path."""
    f = load_example("doubling").f
    df = gradgen.grad(f)
    xs = [np.full(3, 10.0 ** e) for e in (-2, 1, -2, 0, 2, 1)]
    for x in xs:
        np.testing.assert_array_equal(df(x), np.full(3, 2.0 ** _doublings(x)))
