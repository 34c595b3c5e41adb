"""The backward is built on shapes: abstract rules agree with NumPy, a large chain's backward
is never computed while building, and a value asked for is computed on demand."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import gradgen
from gradgen.abstract import Pending, concrete, shaped_like
from gradgen.build import Request, build
from gradgen.ir import aval_of
from gradgen.ops import OPS
from tests.test_rules import BY_ID, CASES, _fixed, _sample

WITH_RULES = [case for case in CASES if OPS[case.op].abstract is not None]


def _kinds(value, n_out):
    outs = value if n_out > 1 else (value,)
    return [(aval_of(v), isinstance(v, np.ndarray)) for v in outs]


@pytest.mark.parametrize("dtype_name", ["float64", "float32"])
@pytest.mark.parametrize("case_id", [pytest.param(c.id, id=c.id) for c in WITH_RULES])
def test_abstract_rule_gives_numpys_shape_dtype_and_kind(case_id, dtype_name):
    """Every row's abstract rule, on stand-ins and on the real inputs, against the op run
    for real: the same shape, dtype, Python-or-NumPy type and ndarray-or-scalar kind."""
    case = BY_ID[case_id]
    op = OPS[case.op]
    xs, _, _ = _sample(case_id, dtype_name)
    want = _kinds(op.impl(*xs, **case.attrs), op.n_out)
    stand_ins = [x if _fixed(lay) else shaped_like(aval_of(x), isinstance(x, np.ndarray))
                 for x, lay in zip(xs, case.layouts, strict=True)]
    for ins in (stand_ins, list(xs)):
        got = op.abstract(op, *ins, **case.attrs)
        if got is None:  # "compute it": allowed, never wrong
            continue
        assert _kinds(got, op.n_out) == want


def test_the_rule_table_has_abstract_rules_for_the_backward_families():
    for name in ("add", "mul", "div", "neg", "exp", "tanh", "where", "add_n", "adjoint", "cast",
                 "sum", "mean", "max", "broadcast_to", "reshape", "transpose", "matmul",
                 "outer", "getitem", "scatter", "index_update", "index_add", "stack"):
        assert OPS[name].abstract is not None, name


def chain(x):
    a = np.sin(x)
    b = np.cos(a) * x
    c = np.exp(-b * b)
    d = np.tanh(c + a)
    e = np.log1p(d * d)
    f = np.sqrt(e + 1.0)
    g = f * np.sin(d) - c
    h = np.arctan(g) + np.exp(-x * x)
    return np.sum(h * h / (1.0 + f))


def test_backward_of_a_large_elementwise_chain_is_built_without_its_values():
    x = np.linspace(-1.0, 1.0, 1_000_000)
    tracemalloc.start()
    try:
        built = build(chain, (x,), Request())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    joint = built.joint
    values = joint.meta["values"]
    backward = [n for n in joint.nodes if n.role == "bwd" and n.aval.shape == x.shape]
    assert len(backward) > 20
    for node in backward:  # never computed: no array, only what it will be
        assert type(values.get(node, Pending((True,)))) is Pending, node
    # Building holds at most the forward's own arrays (the trace computes the forward once,
    # for its guards); computing the backward too would need about twice that.
    n_forward = sum(1 for n in built.forward.nodes if n.role == "fwd" and n.aval.size > 1)
    assert peak < (n_forward + 2) * x.nbytes
    # and once written, the module computes the same gradient the values would have given
    df = gradgen.grad(chain)
    small = np.linspace(-1.0, 1.0, 7)
    h = 1e-6
    numeric = [(chain(small + h * e) - chain(small - h * e)) / (2 * h) for e in np.eye(7)]
    np.testing.assert_allclose(df(small), numeric, rtol=1e-6, atol=1e-8)


def test_a_pending_value_is_computed_when_asked_for():
    def f(x):
        return np.sum(np.exp(x) * x)

    x = np.array([0.5, -1.0, 2.0])
    built = build(f, (x,), Request())
    joint = built.joint
    grad_ref = joint.outputs[1]
    assert type(joint.meta["values"][grad_ref.node]) is Pending
    np.testing.assert_allclose(concrete(joint.meta["values"], grad_ref), np.exp(x) * (x + 1))


class Clipped(gradgen.Function):
    """A custom rule whose backward branches on the cotangent's values: they are computed."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_values
        if np.all(g.value > 0):  # reads the incoming cotangent's numbers
            return 2 * x * g
        return 0 * x


def test_a_users_backward_may_read_values_of_the_backward():
    def f(x):
        return np.sum(np.exp(Clipped.apply(x)))

    x = np.array([0.3, -0.2])
    np.testing.assert_allclose(gradgen.grad(f)(x), np.exp(x * x) * 2 * x)


def test_a_scalar_derivative_that_does_not_exist_is_reported_while_building():
    def f(x):
        y = math.sqrt(x)
        return y

    with pytest.raises(gradgen.GradgenError, match="ZeroDivisionError"):
        gradgen.emit(f, 0.0)


def test_a_build_forgets_the_backward_numbers_and_computes_them_again_when_asked(
        monkeypatch):
    """release_values (build.py): a large joint graph's values keep no float of the backward
    but the seed and the gradients (the emitted code computes the rest); concrete computes a
    forgotten one again, equal to what the lazy trace had."""
    import gradgen.build

    monkeypatch.setattr(gradgen.build, "FORGET_NUMBERS_FROM", 0)  # this graph is small

    def f(x, y):
        a = math.sin(x) * y
        b = math.exp(a) + x * y
        return a * b

    built = build(f, (0.7, 1.3), Request(argnums=(0, 1), as_tuple=True))
    values = built.joint.meta["values"]
    gradients = {r.node for r in built.joint.outputs[1:]}
    backward = [n for n in built.joint.nodes if n.role == "bwd"]
    assert len(backward) > 4
    for node in backward:
        assert (node in values) == (node in gradients or not node.inputs), node
    forgotten = [n for n in backward if n not in values]
    recomputed = {n: concrete(values, n.out) for n in forgotten}
    again = build(f, (0.7, 1.3), Request(argnums=(0, 1), as_tuple=True))
    assert all(type(v) is float for v in recomputed.values())
    assert [concrete(values, r) for r in built.joint.outputs] == pytest.approx(
        [concrete(again.joint.meta["values"], r) for r in again.joint.outputs])
    grad = gradgen.grad(f, argnums=(0, 1))(0.7, 1.3)
    assert [concrete(values, r) for r in built.joint.outputs[1:]] == pytest.approx(list(grad))
    forgotten_value = recomputed[forgotten[-1]]
    assert values[forgotten[-1]] == forgotten_value  # kept once computed, as a Pending is


def test_a_build_releases_the_forward_arrays_and_keeps_numbers_inputs_and_outputs():
    """release_values (build.py): a built function keeps no traced intermediate array (each
    is Pending again); the inputs, the constants, the output and every number (a Python
    float, a NumPy scalar) stay as they were."""
    def f(x, s):
        logdet = np.linalg.slogdet(x * x + 2.0 * np.eye(2))[1]
        y = np.exp(x) * s
        return np.sum(y) + logdet * s

    x = np.array([[1.0, 0.5], [0.25, 1.5]])
    built = build(f, (x, 0.5), Request(argnums=(0, 1), as_tuple=True))
    values = built.forward.meta["values"]
    kept = {r.node for r in built.forward.outputs}
    by_op = {}
    for node, value in values.items():
        by_op.setdefault(node.op.name, []).append(value)
        if node.op.name in ("input", "const") or node in kept:
            assert type(value) is not Pending, node
        elif node.aval.shape:
            assert type(value) is Pending, node
        else:
            assert type(value) is not Pending, node
    assert len([v for vs in by_op.values() for v in vs if type(v) is Pending]) >= 4
    assert any(type(v) is float for v in by_op["input"])  # s, a Python number, as it was
    assert type(by_op["input"][0]) is np.ndarray
    assert concrete(values, built.forward.outputs[0]) == pytest.approx(f(x, 0.5))
