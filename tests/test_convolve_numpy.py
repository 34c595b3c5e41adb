"""np.convolve and np.correlate: every mode, both argument orders (NumPy swaps the shorter
one in), lists and 0-d arguments; values equal to NumPy's to the bit, gradients against
central differences, the emitted module and sympy (the row itself is in tests/test_rules.py
at order 1 and 2, float64 and float32)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient

RNG = np.random.default_rng(8)
SIZES = [(7, 3), (3, 7), (5, 5), (6, 1), (1, 4)]


@pytest.mark.parametrize(("sizes", "mode", "fn"), list(itertools.product(
    SIZES, ["full", "valid", "same"], [np.convolve, np.correlate])))
def test_convolve_and_correlate(sizes, mode, fn):
    a, v = RNG.normal(size=sizes[0]), RNG.normal(size=sizes[1])

    def f(a, v):
        out = fn(a, v, mode=mode)
        return np.sum(out * np.linspace(0.5, 1.5, out.size))

    assert_gradient(f, a, v, argnums=(0, 1))
    assert gradgen.value_and_grad(f, argnums=(0, 1))(a, v)[0] == f(a, v)  # to the bit


def test_a_learned_filter_agrees_with_sympy_and_has_a_hessian():
    signal = np.sin(np.arange(8.0))

    def loss(w):
        return np.sum((np.convolve(signal, w, mode="valid") - 0.5) ** 2)

    w = np.array([0.2, -0.4, 0.7])
    report = gradgen.check(loss, w)
    assert all(r.method in ("proved", "sympy") for r in report.results), report.table()
    windows = np.lib.stride_tricks.sliding_window_view(signal, 3)[:, ::-1]
    np.testing.assert_allclose(gradgen.hessian(loss)(w), 2 * windows.T @ windows, atol=1e-12)
    source = gradgen.emit(loss, w)
    assert 'np.convolve(signal, w, mode="valid")' in source or "np.convolve(" in source


def test_lists_scalars_and_default_modes():
    def f(x):
        return np.sum(np.convolve([x, 1.0, 2.0], [0.5, x])) + np.sum(np.convolve(x, [1.0, 2.0]))

    assert_gradient(f, 0.7)

    def g(a):
        return np.sum(np.correlate(a, np.array([1.0, -1.0])) ** 2)  # mode valid by default

    assert_gradient(g, RNG.normal(size=5))


def test_refusals_and_numpy_errors():
    with pytest.raises(ValueError, match="1-D"):
        gradgen.grad(lambda a: np.sum(np.convolve(a, np.ones(2))))(np.ones((2, 2)))
    with pytest.raises(ValueError, match="too small depth"):  # NumPy's np.correlate of a 0-d
        gradgen.grad(lambda x: np.sum(np.correlate(x, [1.0, 2.0])))(0.5)
    with pytest.raises(ValueError, match="mode must be"):
        gradgen.grad(lambda a: np.sum(np.convolve(a, np.ones(2), mode="wide")))(np.ones(3))
    with pytest.raises(gradgen.UnsupportedOperation, match="no array-API form"):
        gradgen.emit(lambda a: np.sum(np.convolve(a, np.ones(2))), np.ones(3), target="array-api")
