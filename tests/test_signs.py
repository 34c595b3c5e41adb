"""Signs in the emitted backward: reverse mode cancels pairs of negations as it records
(-(-g * s) is g * s, u - (-v) is u + v), so the text reads as a person writes it, and every
gradient keeps the bits it had with the signs left where the rules put them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gradgen
import gradgen.tracer
from gradgen.peephole import Shared
from gradgen.tracer import Trace

from .conftest import run_emitted

# --- user functions (defined here: the names come from this file's lines) -------------------


def cos_of_cos(x):
    return math.cos(math.cos(x))


def over_cos(x, y):
    return x * y + y / math.cos(x)


def minus_a_negation(x, y):
    return x * y - -(math.sin(x) * y)  # d/dx of the right: a sub of a negated product


def negated_twice(x):
    s = math.sin(x)
    return -(-s * x)


def cos_chain(x):
    return math.cos(math.cos(math.cos(x))) * x


def arrays(x, y):
    return np.sum(np.cos(np.cos(x)) * y + y / np.cos(x))


def arrays32(x):
    return np.sum(np.cos(np.cos(x)) / np.cos(x))


def cos_of_quotient(a, b):
    return math.cos(a / b)


SCALAR_CASES = [
    (cos_of_cos, (0.7,)),
    (over_cos, (0.7, 1.3)),
    (minus_a_negation, (0.4, -1.1)),
    (negated_twice, (0.9,)),
    (cos_chain, (0.3,)),
    (cos_of_quotient, (0.8, 1.7)),
]
ARRAY_CASES = [
    (arrays, (np.linspace(-1.0, 1.2, 5), np.linspace(0.5, 2.0, 5))),
    (arrays32, (np.linspace(-1.0, 1.2, 4, dtype=np.float32),)),
]


def _grad_function(fn, args, signs: bool):
    """The emitted gradient of ``fn``, built with sign cancelling on or (as before) off."""
    argnums = tuple(range(len(args)))
    if signs:
        source = gradgen.emit(fn, *args, argnums=argnums)
    else:
        saved = gradgen.tracer._signs_cancelled
        gradgen.tracer._signs_cancelled = lambda trace, op, refs: None
        try:
            source = gradgen.emit(fn, *args, argnums=argnums)
        finally:
            gradgen.tracer._signs_cancelled = saved
    return source, run_emitted(source)[f"{fn.__name__}_grad"]


def _bits(values) -> list[bytes]:
    return [np.asarray(v).tobytes() for v in values]


def _backward(source: str) -> str:
    """The backward's statements: the forward's end in the user's ``# file:line``, and the
    comments quoting the user's lines are left out."""
    lines = source[source.index("# seed"):].splitlines()[1:]
    return "\n".join(line for line in lines
                     if "#" not in line and not line.lstrip().startswith('"'))


# --- the text ---------------------------------------------------------------------------------


def test_a_double_negation_through_products_is_gone():
    source, _ = _grad_function(cos_of_cos, (0.7,), signs=True)
    assert "grad_x = grad_out * math.sin(cos_x) * math.sin(x)" in source
    assert "-(-" not in source


def test_a_negated_term_of_a_sum_is_added():
    source, _ = _grad_function(over_cos, (0.7, 1.3), signs=True)
    assert "grad_x = grad_out * y + grad_out * y_over_cos_x / cos_x * math.sin(x)" in source
    assert "- -" not in source


def _backward_trace():
    """A trace recording as reverse mode does: backward nodes, shared by what they compute."""
    trace = Trace()
    trace.shared = Shared([])
    trace.role = "bwd"
    return trace


def test_minus_a_negated_product_records_a_sum():
    with _backward_trace() as trace:
        u, g, s = (trace.new_input(v, n) for v, n in ((0.5, "u"), (1.5, "g"), (2.0, "s")))
        d = u - (-g * s)
    assert d.ref.node.op.name == "add"
    assert [r.node for r in d.ref.node.inputs[1].node.inputs] == [g.ref.node, s.ref.node]
    assert d.value == 0.5 + 1.5 * 2.0


def test_two_negated_factors_record_their_product():
    with _backward_trace() as trace:
        g, s, h = (trace.new_input(v, n) for v, n in ((1.5, "g"), (2.0, "s"), (0.25, "h")))
        p = (-g * s / h) * (-h)
        negated = -(g / s)
        q = -negated
    assert p.ref.node.op.name == "mul" and "neg" not in {n.op.name for n in _reads(p)}
    assert q.ref.node.op.name == "div" and q.value == 1.5 / 2.0
    assert p.value == (1.5 * 2.0 / 0.25) * 0.25


def test_the_forward_keeps_the_users_signs():
    with Trace() as trace:
        x = trace.new_input(0.5, "x")
        y = -(-x * x)
    assert y.ref.node.op.name == "neg"


def _reads(t):
    """The nodes ``t`` is computed from (its whole backward expression)."""
    seen, todo = set(), [t.ref.node]
    while todo:
        node = todo.pop()
        if node not in seen and node.role == "bwd":
            seen.add(node)
            todo.extend(r.node for r in node.inputs)
    return seen


def test_the_sign_of_a_lone_rule_stays_where_the_maths_puts_it():
    """d cos(u) = -g * sin(u): one negation, printed on the cotangent as before."""
    source, _ = _grad_function(math.cos, (0.7,), signs=True)
    assert "-grad_out * math.sin(x)" in source


@pytest.mark.parametrize("fn, args", SCALAR_CASES + ARRAY_CASES,
                         ids=[c[0].__name__ for c in SCALAR_CASES + ARRAY_CASES])
def test_no_double_sign_is_left(fn, args):
    source, _ = _grad_function(fn, args, signs=True)
    backward = _backward(source)
    assert "- -" not in backward and "-(-" not in backward and "+ -" not in backward


# --- the values: the same bits as with the signs where the rules put them -------------------


@pytest.mark.parametrize("fn, args", SCALAR_CASES, ids=[c[0].__name__ for c in SCALAR_CASES])
@pytest.mark.parametrize("point", [0, 1, 2])
def test_scalar_gradients_keep_their_bits(fn, args, point):
    _, new = _grad_function(fn, args, signs=True)
    _, old = _grad_function(fn, args, signs=False)
    at = tuple(a * (1.0 + 0.37 * point) - 0.21 * point for a in args)
    assert _bits(new(*at)) == _bits(old(*at))
    assert all(not math.isnan(g) for g in new(*at))


@pytest.mark.parametrize("fn, args", ARRAY_CASES, ids=[c[0].__name__ for c in ARRAY_CASES])
def test_array_gradients_keep_their_bits(fn, args, rng):
    new_source, new = _grad_function(fn, args, signs=True)
    old_source, old = _grad_function(fn, args, signs=False)
    assert new_source != old_source  # there was a pair of signs to cancel
    for _ in range(3):
        at = tuple((a + rng.normal(size=a.shape)).astype(a.dtype) for a in args)
        got, want = new(*at), old(*at)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert _bits(got) == _bits(want)


def test_signed_zeros_and_infinities_keep_their_bits():
    """-(a * b) and (-a) * b agree on zeros and infinities too (only a NaN's sign may not)."""
    _, new = _grad_function(over_cos, (0.7, 1.3), signs=True)
    _, old = _grad_function(over_cos, (0.7, 1.3), signs=False)
    for at in [(0.0, 0.0), (-0.0, 1.0), (0.0, -0.0), (math.pi / 2, 1.0), (1e300, 1e300)]:
        assert _bits(new(*at)) == _bits(old(*at))


def test_gradients_agree_with_sympy():
    for fn, args in SCALAR_CASES:
        gradgen.check(fn, *args, argnums=tuple(range(len(args))))


def test_an_integer_negation_is_left_alone():
    """-(-a) * s with an integer ``a`` is not cancelled: -a of the most negative int is a."""
    with _backward_trace() as trace:
        a, s = trace.new_input(np.int64(3), "a"), trace.new_input(1.5, "s")
        d = -(-a * s)
    assert d.ref.node.op.name == "neg" and d.value == 4.5


def test_an_adjoint_two_rules_read_is_not_computed_twice():
    """d cos(a / b): the adjoint of a / b is read by both of div's rules; cancelling the sign
    for one of them would rebuild it beside the one the other reads."""
    source, _ = _grad_function(cos_of_quotient, (0.8, 1.7), signs=True)
    backward = _backward(source[source.index("def cos_of_quotient_value_and_grad"):])
    assert backward.count("math.sin(") == 1
