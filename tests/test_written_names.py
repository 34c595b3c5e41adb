"""A value of a line that writes into an array (``h[k] = h[k - 1] + x[k] * w``,
``hs[t + 1] = np.tanh(W @ hs[t] + U @ x[t])``) is named after that array, as the value
written is (``h_part``, ``hs_row``), and its adjoint ``grad_h_part``; the adjoint of a
one-argument call's argument is ``grad_hs_row_arg``. Never ``tmp``, and never a name that
says it is the adjoint of another value of the function (a forward ``h_part``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient, load_example


def elementwise(x, w):
    h = np.zeros(4)
    h[0] = x[0] * w
    for k in range(1, 4):
        h[k] = h[k - 1] + x[k] * w
    return h.sum()


def rnn_rows(W, U, x):
    hs = np.zeros((x.shape[0] + 1, W.shape[0]))
    for t in range(x.shape[0]):
        hs[t + 1] = np.tanh(W @ hs[t] + U @ x[t])
    return hs.sum()


def _function(source: str, name: str) -> str:
    return source[source.index(f"def {name}("):].split("\n\n\n")[0]


def _names(body: str) -> set[str]:
    return set(re.findall(r"^ *(\w+) = ", body, re.MULTILINE))


def _no_tmp(source: str) -> None:
    assert not re.search(r"\btmp|_tmp\b|tmp_\d", source), source


RNG = np.random.default_rng(5)
ELEMENTWISE = (RNG.normal(size=4), 0.7)


def _rnn_args(steps):
    return (RNG.normal(size=(3, 3)) * 0.5, RNG.normal(size=(3, 2)), RNG.normal(size=(steps, 2)))


def test_the_adjoint_of_a_value_written_into_an_element_is_named_after_the_array():
    _, source = assert_gradient(elementwise, *ELEMENTWISE, argnums=(0, 1))
    _no_tmp(source)
    grad = _function(source, "elementwise_grad")
    assert "grad_h_part = grad_h_3[3]" in grad  # what h[3] = ... wrote: its adjoint
    assert {"grad_h_part_1", "grad_h_part_2", "grad_h_part_3"} <= _names(grad)


def test_a_forward_name_keeps_its_adjoint():
    """value_and_grad computes h_part (h[0]'s value) itself: grad_h_part is its adjoint
    only; the adjoint of what h[3] = ... wrote is named after h[k]."""
    source = gradgen.emit(elementwise, *ELEMENTWISE, argnums=(0, 1))
    both = _function(source, "elementwise_value_and_grad")
    assert "    h_part = x_0 * w  #" in both
    assert re.search(r"\n    grad_h_part = grad_h_3\[0\] \+ ", both), both
    assert "grad_h_k = grad_h_3[3]" in both
    _no_tmp(source)


@pytest.mark.parametrize("steps", [4, 60])  # unrolled, and a loop that stays a loop
def test_an_rnn_rows_adjoints_are_named_after_the_rows(steps):
    args = _rnn_args(steps)
    _, source = assert_gradient(rnn_rows, *args, argnums=(0, 1, 2), rtol=1e-5)
    _no_tmp(source)
    grad = _function(source, "rnn_rows_grad")
    assert "hs_row" in grad
    assert any(name.startswith("grad_hs_row") and name.endswith("_arg")
               for name in _names(grad)), grad
    if steps == 60:
        assert "for t in reversed(range(60)):" in grad  # (it stayed a loop)
        assert "grad_hs_row_arg = grad_hs_row * " in grad


EXAMPLES = [
    ("add_mul", "f", (2.0, 3.0, 4.0), (0, 1, 2)),
    ("double_triple", "f", (3.0,), 0),
    ("doubling", "f", (np.ones(3),), 0),
    ("gmm", "nll", (np.array([-1.0, 0.5, 2.0]), np.zeros(3), np.zeros(3),
                    np.random.default_rng(0).normal(size=10)), (0, 1, 2)),
    ("least_squares", "val_loss", (np.random.default_rng(0).normal(size=(8, 3)), 0.5,
                                   np.random.default_rng(1).normal(size=8),
                                   np.random.default_rng(2).normal(size=(4, 3)),
                                   np.random.default_rng(3).normal(size=4)), (0, 1)),
    ("logistic_regression", "loss", (np.zeros(3), 0.0,
                                     np.random.default_rng(0).normal(size=(8, 3)),
                                     np.sign(np.random.default_rng(1).normal(size=8))), (0, 1)),
    ("mlp", "loss", ({"W1": np.random.default_rng(0).normal(size=(4, 5)), "b1": np.zeros(5),
                      "W2": np.random.default_rng(1).normal(size=(5, 3)), "b2": np.zeros(3)},
                     np.random.default_rng(2).normal(size=(6, 4)),
                     np.array([0, 1, 2, 0, 1, 2])), 0),
    ("reused_value", "f", (2.0,), 0),
    ("rnn", "loss", (0.3 * np.random.default_rng(0).normal(size=(4, 4)),
                     0.3 * np.random.default_rng(1).normal(size=(4, 2)), np.zeros(4),
                     np.random.default_rng(2).normal(size=(5, 2)),
                     np.random.default_rng(3).normal(size=5)), (0, 1, 2)),
    ("rnn_loop", "loss", (np.full((3, 3), 0.1), np.full((3, 2), 0.2),
                          np.linspace(-1, 1, 200).reshape(100, 2), np.zeros(3)), (0, 1)),
    ("rosenbrock", "rosenbrock", (np.linspace(-1.5, 1.5, 6),), 0),
    ("sine", "f", (0.5,), 0),
    ("softplus", "f", (0.5,), 0),
    ("square_plus", "f", (2.0,), 0),
]


@pytest.mark.parametrize("module, name, args, argnums", EXAMPLES,
                         ids=[e[0] for e in EXAMPLES])
def test_no_example_has_a_tmp(module, name, args, argnums):
    fn = getattr(load_example(module), name)
    _no_tmp(gradgen.emit(fn, *args, argnums=argnums))
