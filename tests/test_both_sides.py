"""A group whose adjoint doubles one value's contribution says why in its comment:
``# demo.py:2  y = x * x  (x on both sides)`` above ``grad_x = 2.0 * (grad_y * x)``, as
DESIGN.md section 6 shows; and only where the source line shows one name twice."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient


def _function(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    return source[start:].split("\n\n\n")[0]


def _statements(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines()]


# --- x on both sides ------------------------------------------------------------------------


def square(x):
    y = x * x
    return y


def doubled(x):
    y = x + x
    return y


def hyp(x):
    y = np.hypot(x, x)
    return y


def one_of_two(x, z):
    y = x * x + z * z
    return y


def aliased(x):
    b = x
    y = x * b
    return y


def scaled(x):
    y = 2.0 * x
    return y


def in_a_longer_operand(x):
    y = x * math.sin(x) * x
    return y


@pytest.mark.parametrize("fn, said", [
    (square, "y = x * x  (x on both sides)"),
    (doubled, "y = x + x  (x on both sides)"),
    (hyp, "y = np.hypot(x, x)  (x as both arguments)"),
    (one_of_two, "y = x * x + z * z  (x on both sides)"),
])
def test_a_doubled_adjoint_says_why(fn, said):
    source = gradgen.emit(fn, *(1.25,) * fn.__code__.co_argcount)
    for name in (f"{fn.__name__}_grad", f"{fn.__name__}_value_and_grad"):
        comments = [line for line in _statements(_function(source, name))
                    if line.startswith("# test_both_sides.py:")]
        assert comments[-1].endswith(f"  {said}"), comments
    assert_gradient(fn, *(1.25,) * fn.__code__.co_argcount)


@pytest.mark.parametrize("fn", [aliased, scaled, in_a_longer_operand])
def test_no_note_where_the_source_does_not_show_one_value_twice(fn):
    source = gradgen.emit(fn, 1.25)
    assert "both sides" not in source and "both arguments" not in source
    assert_gradient(fn, 1.25)
