"""Each optimization pass alone keeps the graph valid and the emitted gradient identical;
together they reach a fixed point. Plus what each pass is for, on small graphs."""

from __future__ import annotations

import importlib
import math
import re

import numpy as np
import pytest

import gradgen
from gradgen.emit import FunctionSpec, emit_module
from gradgen.ir import Graph, Node, aval_of
from gradgen.ops import OPS
from gradgen.optimize import (
    IDEMPOTENT,
    batch_matvecs,
    cse,
    dce,
    drop_dead_writes,
    flatten_sums,
    fold,
    optimize,
    slice_updates,
    stack_outer_products,
)
from gradgen.peephole import NO_DUPLICATES, UNIQUE, node_key
from gradgen.pytree import LEAF, TreeDef
from gradgen.reverse import reverse
from gradgen.tracing import trace_function

from .conftest import run_emitted

# Passes that never change a float; stack_outer_products lets BLAS sum (tested on its own).
PASSES = [dce, cse, fold, flatten_sums, slice_updates, drop_dead_writes]


def _run(graph: Graph, args):
    """Emit ``graph`` as one function returning all its outputs, and call it on ``args``."""
    n = len(graph.outputs)
    params = [f"p{i}" for i in range(len(args))]
    tree = TreeDef("tuple", (), tuple(LEAF for _ in range(n)))
    spec = FunctionSpec("probe", params, graph, (tree, list(range(n))), "Probe.")
    return run_emitted(emit_module(["# probe"], [spec]))["probe"](*args)


def _assert_identical(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert type(a) is type(b)
        np.testing.assert_array_equal(a, b)  # bit for bit: no pass may change a float
        assert np.asarray(a).dtype == np.asarray(b).dtype


# --- a small corpus --------------------------------------------------------------------------


def reused(x):
    y = x * x
    a = y + 1
    b = y * 2
    c = a + b
    return c


def duplicates(x, w):
    h = np.sin(x) * w
    u = np.sin(x) * w
    z = np.sum(h * h + u) * 1.0 + 0.0
    if z > 0:
        z = z * 2
    return z


def many_uses(x, y):
    t = x * y
    s = t + t * x + math.exp(t) - t / y
    return s * t + math.sin(x) * math.sin(x)


def broadcasting(a, b, c):
    d = a * b + c
    e = np.mean(d * d, axis=0, keepdims=True)
    return np.sum(e * b) + np.sum(d @ np.ones(3))


def single_precision(x, s):
    y = x * s + x * x
    return np.sum(y * 0.5)


def banded(x):
    d = x[1:] - x[:-1] ** 2
    return np.sum(100.0 * d**2 + (1.0 - x[:-1]) ** 2) + np.mean(x[2:] * x[:-2])


def few_steps(W, xs):
    h = np.zeros(3)
    for t in range(3):  # three outer products: fewer than MIN_STACKED_TERMS, added as written
        h = np.tanh(W @ h + xs[t])
    return np.sum(h * h)


def filled(W, xs):
    h = np.zeros((3, 3))
    prev = np.zeros(3)
    for t in range(3):
        h[t] = np.tanh(W @ prev + xs[t])
        prev = h[t]
    return np.sum(h.sum(axis=1) ** 2) + np.sum(h[1] * h[-1])


def negated(x, y):
    p = 2.0 * y  # -p below stays an array negation: p is read twice
    return np.mean(np.exp(-x)) + np.sum(np.exp(-(3.0 * x)) + np.exp(-p) * p)


def unused(x, y, z):
    _waste = np.exp(y) * 3  # never reaches the output
    return x * x


CORPUS = [
    (reused, (2.0,), [0]),
    (duplicates, (np.array([0.3, 0.5, 0.9]), np.array([[1.0, 2.0, -1.0], [0.5, 0.5, 0.5]])),
     [0, 1]),
    (many_uses, (0.7, 1.3), [0, 1]),
    (broadcasting, (np.arange(6.0).reshape(2, 3) / 5, np.array([1.0, -2.0, 0.5]),
                    np.array([[0.1], [0.2]])), [0, 1, 2]),
    (single_precision, (np.linspace(-1, 1, 4, dtype=np.float32), np.float32(1.5)), [0]),
    (unused, (1.5, 0.5, np.ones(2)), [0, 1, 2]),
    (banded, (np.linspace(-1.0, 1.5, 7),), [0]),
    (banded, (np.linspace(-1.0, 1.5, 7, dtype=np.float32),), [0]),
    (filled, (np.eye(3) * 0.5 + 0.1, np.arange(9.0).reshape(3, 3) / 10), [0, 1]),
    (few_steps, (np.eye(3) * 0.5 + 0.1, np.arange(9.0).reshape(3, 3) / 10), [0, 1]),
    (negated, (np.linspace(-1.0, 1.5, 5), np.linspace(0.5, 2.0, 5)), [0, 1]),
    (negated, (np.linspace(-1.0, 1.5, 5, dtype=np.float32), np.float32(0.5)), [0, 1]),
]
IDS = [c[0].__name__ for c in CORPUS]


def _joint(fn, args, wrt):
    return reverse(trace_function(fn, args), wrt)


def _unread_branch(x, y):
    u = math.sin(x) * y  # depends on both inputs; the output never reads it
    v = u * u + x
    return x * math.cos(y), v


def test_reverse_makes_nothing_for_an_active_value_the_output_does_not_read():
    """A value computed from the inputs that no path to the output reads (u, v above) gets
    no adjoint and no backward node reads it: reverse passes it by (it is active, never
    needed), and the gradient is the output's alone."""
    forward = trace_function(_unread_branch, (0.7, 1.3))
    joint = reverse(forward, [0, 1], outputs=(0,))
    u, v = forward.find("u"), forward.find("v")
    unread = {u, u.inputs[0].node, v, v.inputs[0].node}  # u, sin(x), v, u * u
    backward = joint.nodes[len(forward.nodes):]
    assert backward
    assert not any(r.node in unread for node in backward for r in node.inputs)
    assert not unread & set(joint.meta["adjoints"])
    values = joint.meta["values"]
    assert [values[r.node] for r in joint.outputs[1:]] == [math.cos(1.3), -0.7 * math.sin(1.3)]


@pytest.mark.parametrize("run_pass", PASSES, ids=lambda p: p.__name__)
@pytest.mark.parametrize("fn, args, wrt", CORPUS, ids=IDS)
def test_each_pass_alone_keeps_graph_valid_and_gradient_identical(fn, args, wrt, run_pass):
    joint = _joint(fn, args, wrt)
    joint.verify()
    expected = _run(joint, args)
    before = list(joint.nodes)
    for graph in (joint, joint.with_nodes(joint.nodes, joint.outputs[1:])):
        new, changed = run_pass(graph)
        assert isinstance(changed, bool)
        new.verify()
        assert len(new.inputs) == len(graph.inputs)
        want = expected if len(graph.outputs) == len(joint.outputs) else expected[1:]
        _assert_identical(_run(new, args), want)
        if not changed:
            assert new.nodes == graph.nodes
    assert joint.nodes == before  # the pass built a new graph; the old one is intact
    joint.verify()
    _assert_identical(_run(joint, args), expected)


@pytest.mark.parametrize("fn, args, wrt", CORPUS, ids=IDS)
def test_all_passes_reach_a_fixed_point(fn, args, wrt):
    joint = _joint(fn, args, wrt)
    expected = _run(joint, args)
    optimized = optimize(joint, verify=True)
    optimized.verify()
    _assert_identical(_run(optimized, args), expected)
    assert len(optimized.nodes) <= len(joint.nodes)
    for run_pass in PASSES:
        _, changed = run_pass(optimized)
        assert not changed, run_pass.__name__


@pytest.mark.parametrize("run_pass", IDEMPOTENT, ids=lambda p: p.__name__)
@pytest.mark.parametrize("fn, args, wrt", CORPUS, ids=IDS)
def test_idempotent_passes_leave_nothing_for_a_second_sweep(fn, args, wrt, run_pass):
    """optimize does not run these again right after they changed the graph."""
    graph = _joint(fn, args, wrt)
    for other in (fold, dce, cse):  # also after other passes left duplicates and dead code
        graph, _ = run_pass(other(graph)[0])
        again, changed = run_pass(graph)
        assert not changed and again.nodes == graph.nodes


def shared_backward(x, y):
    a = x * x  # two equal contributions: 2 * (grad_a * x)
    b = math.sin(a) + math.cos(a)  # the backward's cos(a) is the forward's
    c = b**2 + 2.0 * y  # d(b ** 2) = 2 * b ** 1 * ...: b ** 1 is b; 2.0 and 2 are constants
    return c * c - y


def test_the_scalar_backward_is_built_with_nothing_left_for_cse_and_fold():
    """reverse records the backward through peephole.Shared: no node the graph already has,
    no ``x ** 1``, no ``t + t``, no second constant 2. cse and fold, run afterwards, find
    nothing to change (so optimize ends after one round of scans)."""
    joint = _joint(shared_backward, (0.7, 1.3), [0, 1])
    for run_pass in (cse, fold):
        _, changed = run_pass(joint)
        assert not changed, run_pass.__name__
    ops = _ops(joint)
    assert ops.count("cos") == 1 and "pow" in ops and ops.count("pow") == 1
    assert "add_n" not in [n.op.name for n in joint.nodes if n.inputs and len(
        set(n.inputs)) < len(n.inputs)]
    expected = [shared_backward(0.7, 1.3)]
    _assert_identical(_run(joint, (0.7, 1.3))[:1], expected)


def square_inside_a_longer_sum(x):
    return x * math.sin(x) + x * x


def test_a_contribution_that_comes_twice_among_more_is_counted_once():
    """x * x inside a longer expression: x's fused sum has grad * x twice among its four
    terms; it is one term 2 * (...) where it first comes, never t + t; the gradient and the
    Hessian are the textbook ones (docs/autograd-explained.md's Hessian of x * sin(x) reads
    2.0 * math.cos(x) - x * math.sin(x) for the same reason)."""
    source = gradgen.emit(square_inside_a_longer_sum, 0.7)
    terms = re.split(r" [-+] ", re.search(r"grad_x = (.*)", source).group(1))
    assert len(terms) == 3 and len(set(terms)) == 3, source
    assert terms[-1].startswith("2.0 * "), source
    grad = gradgen.grad(square_inside_a_longer_sum)
    assert grad(0.7) == pytest.approx(math.sin(0.7) + 0.7 * math.cos(0.7) + 1.4, rel=1e-15)
    hessian = gradgen.hessian(square_inside_a_longer_sum)
    assert hessian(0.7) == pytest.approx(2 * math.cos(0.7) - 0.7 * math.sin(0.7) + 2, rel=1e-15)


def _cse_keys(graph: Graph) -> list:
    return [node_key(n.op.name, n.inputs, n.attrs) for n in graph.nodes
            if n.op.name not in UNIQUE]


def unrolled(x, y):
    for k in range(6):  # each step's backward reads the same few numbers
        x = math.cos(x) * y - math.sin(y) / (x + 2.0)
        y = math.tanh(y) + 0.5 * x * x
    return x * y


@pytest.mark.parametrize("fn, args, wrt", [(shared_backward, (0.7, 1.3), [0, 1]),
                                           (unrolled, (0.3, 0.8), [0, 1]), *CORPUS],
                         ids=["shared_backward", "unrolled", *IDS])
def test_reverse_marks_the_graphs_it_proves_free_of_duplicates(fn, args, wrt):
    """reverse marks a joint graph in which no two nodes have one cse key (every node made
    through Shared's table), and only such a graph: a forward duplicate (``duplicates``
    computes sin twice) leaves it unmarked. cse then skips its keys; on a copy of the graph
    with one node twice the mark no longer applies, and cse merges the two."""
    joint = _joint(fn, args, wrt)
    marked = joint.meta.get(NO_DUPLICATES) == joint.nodes
    keys = _cse_keys(joint)
    if marked:
        assert len(set(keys)) == len(keys)
    if fn in (shared_backward, unrolled):
        assert marked, fn.__name__
    if fn is duplicates:
        assert not marked
    if not marked:
        return
    assert not importlib.import_module("gradgen.optimize.scan").scan(joint).duplicates
    assert not cse(joint)[1]
    sin = next(n for n in joint.nodes if n.op.name in ("sin", "cos", "mul"))
    twin = Node(sin.op, sin.inputs, dict(sin.attrs), sin.avals, sin.loc, None, sin.role)
    at = joint.nodes.index(sin) + 1
    joint.meta["values"][twin] = joint.meta["values"][sin]
    doubled = joint.with_nodes([*joint.nodes[:at], twin, *joint.nodes[at:]], joint.outputs)
    assert doubled.meta.get(NO_DUPLICATES) is not None  # copied along, for other nodes
    merged, changed = cse(doubled)
    assert changed and twin not in merged.nodes


@pytest.mark.parametrize("fn, args, wrt", [(shared_backward, (0.7, 1.3), [0, 1]),
                                           (unrolled, (0.3, 0.8), [0, 1]), *CORPUS],
                         ids=["shared_backward", "unrolled", *IDS])
def test_the_mark_changes_no_emitted_text(fn, args, wrt, monkeypatch):
    """The module built with reverse's mark is the one built without it, byte for byte."""
    argnums = tuple(wrt)
    with_mark = gradgen.grad(fn, argnums=argnums)
    with_mark(*args)

    def unmarked(*a, **k):
        joint = reverse(*a, **k)
        joint.meta.pop(NO_DUPLICATES, None)
        return joint

    monkeypatch.setattr(importlib.import_module("gradgen.build"), "reverse", unmarked)
    without = gradgen.grad(fn, argnums=argnums)
    without(*args)
    assert with_mark.source == without.source


# --- what each pass is for -------------------------------------------------------------------


def _ops(graph: Graph) -> list[str]:
    return [n.op.name for n in graph.nodes]


def test_dce_drops_what_no_output_needs_but_keeps_guards_and_inputs():
    joint = _joint(unused, (1.5, 0.5, np.ones(2)), [0])
    assert "exp" in _ops(joint)
    grads_only = joint.with_nodes(joint.nodes, joint.outputs[1:])
    pruned, changed = dce(grads_only)
    assert changed and "exp" not in _ops(pruned)
    assert len(pruned.inputs) == 3 and all(n in pruned.nodes for n in pruned.inputs)

    joint = _joint(duplicates, CORPUS[1][1], [0])
    pruned, _ = dce(joint.with_nodes(joint.nodes, joint.outputs[1:]))
    assert _ops(pruned).count("guard") == _ops(joint).count("guard") == 1


def test_cse_merges_duplicates_but_not_guards():
    joint = _joint(duplicates, CORPUS[1][1], [0, 1])
    assert _ops(joint).count("sin") == 2
    merged, changed = cse(joint)
    assert changed and _ops(merged).count("sin") == 1
    assert _ops(merged).count("guard") == 1

    def twice_guarded(x):
        if x > 0:
            x = x * 2
        if x > 0:
            x = x * 3
        return x

    joint = _joint(twice_guarded, (1.0,), [0])
    merged, _ = cse(joint)
    assert _ops(merged).count("guard") == 2


def _const(value) -> Node:
    return Node(OPS["const"], (), {"value": value}, (aval_of(value),), role="const")


def _input(value, index=0, name="x") -> Node:
    return Node(OPS["input"], (), {"index": index}, (aval_of(value),), name=name, role="input")


def test_fold_evaluates_constant_subgraphs_and_drops_identities():
    x = _input(2.0)
    two, three, one, zero = _const(2.0), _const(3.0), _const(1.0), _const(0.0)
    six = Node(OPS["mul"], (two.out, three.out), {}, (aval_of(6.0),))
    a = Node(OPS["mul"], (x.out, one.out), {}, (aval_of(1.0),))
    b = Node(OPS["add"], (a.out, zero.out), {}, (aval_of(1.0),))
    c = Node(OPS["mul"], (b.out, six.out), {}, (aval_of(1.0),))
    graph = Graph([x, two, three, one, zero, six, a, b, c], [x], [c.out])
    folded, changed = fold(graph)
    assert changed
    folded, _ = dce(folded)
    folded.verify()
    (node,) = [n for n in folded.nodes if n.op.name not in ("input", "const")]
    assert node.op.name == "mul" and node.inputs[0].node is x
    assert node.inputs[1].node.attrs["value"] == 6.0
    assert _run(folded, (2.5,)) == _run(graph, (2.5,)) == (15.0,)


def test_fold_keeps_operations_that_change_type_or_shape():
    x = _input(np.ones(3))
    one = _const(1.0)
    m = Node(OPS["mul"], (one.out, x.out), {}, (aval_of(np.ones(3)),))
    n = Node(OPS["neg"], (m.out,), {}, (aval_of(np.ones(3)),))
    graph = Graph([x, one, m, n], [x], [n.out])
    folded, _ = fold(graph)
    assert folded.outputs[0].node.inputs[0].node is x  # 1.0 * array is the array
    # ... but an output stays a new array: the caller's x is not handed back
    # (test_fuzz_regressions.py::test_folding_never_returns_an_argument)
    graph = Graph([x, one, m], [x], [m.out])
    folded, _ = fold(graph)
    assert folded.outputs[0].node is not x
    i = _input(3)
    half = _const(1.0)
    p = Node(OPS["mul"], (i.out, half.out), {}, (aval_of(3.0),))  # int * 1.0 is a float
    graph = Graph([i, half, p], [i], [p.out])
    folded, _ = fold(graph)
    assert folded.outputs[0].node is not i
    assert type(_run(folded, (3,))[0]) is float


def _add_n(*nodes) -> Node:
    refs = tuple(n.out for n in nodes)
    return Node(OPS["add_n"], refs, {"uses": ()}, (aval_of(1.0),))


def test_flatten_sums_merges_nested_sums_in_order():
    a, b, c = _input(1.0, 0, "a"), _input(2.0, 1, "b"), _input(4.0, 2, "c")
    inner = _add_n(a, b)
    outer = _add_n(inner, c)
    graph = Graph([a, b, c, inner, outer], [a, b, c], [outer.out])
    flat, changed = flatten_sums(graph)
    flat.verify()
    assert changed
    flat, _ = dce(flat)
    (total,) = [n for n in flat.nodes if n.op.name == "add_n"]
    assert [r.node for r in total.inputs] == [a, b, c]  # the order of the additions is kept
    args = (0.1, 0.2, 0.3)
    assert _run(flat, args) == _run(graph, args) == ((0.1 + 0.2) + 0.3,)


def test_flatten_sums_leaves_a_shared_partial_sum_alone():
    a, b, c = _input(1.0, 0, "a"), _input(2.0, 1, "b"), _input(4.0, 2, "c")
    inner = _add_n(a, b)
    outer = _add_n(inner, c)
    graph = Graph([a, b, c, inner, outer], [a, b, c], [outer.out, inner.out])
    same, changed = flatten_sums(graph)
    assert not changed and same.nodes == graph.nodes


# --- what the emitted code looks like after them ---------------------------------------------


def _grad_source(fn, *args, argnums=0) -> str:
    # the passes at work on straight-line code: loops written out step by step
    source = gradgen.emit(fn, *args, argnums=argnums, loops="unroll")
    return source[source.index(f"def {fn.__name__}_grad("):].split("\n\n\n")[0]


def test_slice_adjoints_add_into_one_buffer():
    """x[1:] and x[:-1] twice: one zeros array and three slice updates, no scatter helper,
    and the subtracted terms print as -=; the two updates of x[:-1] go through one view,
    named after the forward's slice."""
    x = np.linspace(-1.0, 1.5, 7)
    text = _grad_source(banded, x)
    assert "_scatter" not in text and "np.broadcast_to" not in text
    assert text.count("grad_x = np.zeros((7,), dtype=np.float64)") == 1
    assert "grad_x[1:] = " in text
    assert text.count("grad_x_head = grad_x[:-1]\n") == 1
    assert text.count("grad_x_head -= ") == 2 and "grad_x[:-1] -=" not in text
    assert "+= -" not in text
    expected = gradgen.grad(banded)(x)
    np.testing.assert_allclose(expected, _numeric(banded, x), rtol=1e-6, atol=1e-8)


def rows(X):
    a = X[0] * X[1]
    return np.sum(a * X[0]) + np.sum(np.cos(X[0])) + np.sum(X[0] ** 3)


def test_updates_of_one_row_go_through_one_view_bit_for_bit():
    """Three updates of X[0] in a row: one view bound once, the same additions in the same
    order as ``g[0] += ...`` three times; X[1], written once, is indexed as before."""
    X = np.random.default_rng(1).normal(size=(3, 4))
    text = _grad_source(rows, X)
    assert text.count("grad_X_0 = grad_X[0]\n") == 1
    assert text.count("grad_X_0 += ") == 2 and text.count("grad_X_0 -= ") == 1
    assert "grad_X[1] = " in text
    x0, x1 = X[0], X[1]
    expected = np.zeros_like(X)
    expected[0] = x0 * x1
    expected[1] = x0 * x0
    expected[0] += x0 * x1
    expected[0] -= np.float64(1.0) * np.sin(x0)
    expected[0] += 3 * x0**2
    np.testing.assert_array_equal(gradgen.grad(rows)(X), expected)


def test_a_number_is_never_bound_as_a_view():
    """x[0] of a vector is a NumPy scalar, not a view: its updates stay subscripts."""
    def ends(x):
        return x[0] * x[1] + x[0] ** 2

    x = np.array([0.5, -1.5, 2.0])
    text = _grad_source(ends, x)
    assert "grad_x[0] += " in text and " = grad_x[0]" not in text
    np.testing.assert_allclose(gradgen.grad(ends)(x), [x[1] + 2 * x[0], x[0], 0.0])


def test_slice_updates_keep_the_order_of_the_additions():
    """The buffer adds element by element in the order of the fused sum: bit for bit."""
    x = np.random.default_rng(0).normal(size=9)
    joint = _joint(banded, (x,), [0])
    plain = optimize(joint)
    expected = _run(joint, (x,))
    graph, changed = slice_updates(joint)
    assert changed and "index_add" in _ops(graph) and "scatter" not in _ops(dce(graph)[0])
    _assert_identical(_run(graph, (x,)), expected)
    _assert_identical(_run(plain, (x,)), expected)


def test_a_broadcast_seed_is_never_multiplied():
    def f(x):
        return np.sum(x * x) + 0.5 * np.mean(np.sin(x))

    text = _grad_source(f, np.ones(4))
    assert "broadcast_to" not in text and "grad_out" not in text


def test_a_broadcast_seed_is_not_materialized_for_a_where():
    def huber(r):
        a = np.abs(r)
        return np.sum(np.where(a < 1.0, 0.5 * r**2, a - 0.5))

    r = np.array([0.3, -2.0, 0.9, 1.5])
    text = _grad_source(huber, r)
    assert "broadcast_to" not in text
    grad = gradgen.grad(huber)(r)
    np.testing.assert_array_equal(grad, np.where(np.abs(r) < 1.0, r, np.sign(r)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_fused_sum_adds_a_broadcast_number_without_materializing_it(dtype):
    """``grad_x = grad_out[1:5] + grad_sum_x``: NumPy broadcasts the sum's scalar term (the
    adjoint of np.sum(x)) against the full-shape one, as a person writes it; no
    ``np.broadcast_to``; the dtype stays the arrays'."""

    def scatter(x):
        out = np.zeros(6, dtype=x.dtype)
        out[1:5] += x
        out[0] = np.sum(x)
        return np.sum(out**2)

    def weak(x):
        return np.sum(x * x) + 0.5 * np.sum(x)

    x = np.array([0.5, -1.0, 2.0, 0.25], dtype=dtype)
    for f, expected in ((scatter, 2 * x + 2 * np.sum(x)), (weak, 2 * x + 0.5)):
        text = _grad_source(f, x)
        assert "broadcast_to" not in text, text
        grad = gradgen.grad(f)(x)
        assert grad.dtype == dtype and grad.shape == x.shape
        np.testing.assert_allclose(grad, expected.astype(dtype), rtol=1e-6)


def rnn(W, U, b, xs):
    h = np.zeros(W.shape[0])
    total = 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t] + b)
        total = total + np.sum(h * h)
    return total


def _array_negations(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes if n.op.name == "neg" and n.aval.shape]


def test_a_negated_product_negates_its_scalar_not_its_array():
    """-(s * E) is (-s) * E and -(3.0 * x) is -3.0 * x, bit for bit: no pass over the array
    for the sign (the backward of mean(exp(-x)) and of exp(-(3 * x)))."""
    def f(x):
        return np.mean(np.exp(-x)) + np.sum(np.exp(-(3.0 * x)))

    for x in (np.linspace(-1.0, 1.5, 5), np.linspace(-1.0, 1.5, 5, dtype=np.float32)):
        joint = _joint(f, (x,), [0])
        assert sum(1 for n in _array_negations(joint) if n.role == "bwd")
        graph = optimize(joint, verify=True)
        assert [n.inputs[0].node.name for n in _array_negations(graph)] == ["x"]  # -x itself
        _assert_identical(_run(graph, (x,)), _run(joint, (x,)))
    text = _grad_source(f, np.ones(3))
    assert "np.exp(-3.0 * x)" in text and "-(grad_out / 3.0) * np.exp(-x)" in text


def test_a_negation_stays_where_it_is_free_or_its_product_is_shared():
    """A negation a sum reads prints as a subtraction (free), and one of a product another
    value reads too would cost one product more: both stay as written."""
    def shared(x):
        p = 2.0 * x
        return np.sum(np.exp(-p) + p * p)

    def summed(x, y):
        return np.sum(y + -(2.0 * x))

    x = np.linspace(-1.0, 1.5, 5)
    for fn, args in ((shared, (x,)), (summed, (x, x[::-1].copy()))):
        graph = optimize(trace_function(fn, args), verify=True)
        assert len(_array_negations(graph)) == 1, fn.__name__


def test_a_number_written_through_an_index_array_is_not_broadcast_first():
    """The gradient of mean(x[idx]) adds one number at every index: np.add.at broadcasts it
    (a repeated index adds it again), the array-API one-hot sum gets it broadcast, and the
    second derivative still sums what the number received."""
    def f(x, idx):
        return np.mean(x[idx]) + np.sum(x * x)

    x, idx = np.array([0.5, -1.0, 2.0]), np.array([0, 2, 0])
    text = _grad_source(f, x, idx)
    assert "np.add.at(grad_x_part, idx, grad_out / 3.0)" in text and "broadcast" not in text
    np.testing.assert_allclose(gradgen.grad(f)(x, idx), np.array([2.0, 0.0, 1.0]) / 3 + 2 * x)
    np.testing.assert_array_equal(gradgen.hessian(f)(x, idx), 2 * np.eye(3))

    def loss(logp, y):
        return -np.mean(logp[np.arange(4), y])

    logp, y = np.linspace(-2.0, -0.1, 12).reshape(4, 3), np.array([2, 0, 1, 2])
    expected = np.zeros((4, 3))
    expected[np.arange(4), y] = -0.25
    for target in ("numpy", "array-api"):
        module = run_emitted(gradgen.emit(loss, logp, y, target=target))
        np.testing.assert_array_equal(module["loss_grad"](logp, y), expected)


def test_sums_of_outer_products_become_one_matmul_of_stacked_vectors():
    rng = np.random.default_rng(1)
    args = (0.4 * rng.normal(size=(4, 4)), rng.normal(size=(4, 3)), rng.normal(size=4),
            rng.normal(size=(20, 3)))  # 20 steps: past MAX_FUSED_TERMS, gathered back
    text = _grad_source(rnn, *args, argnums=(0, 1, 2))
    assert "np.outer" not in text
    assert text.count("np.array(") == 2  # the step adjoints once (shared), the states once
    assert "grad_U = " in text and " @ xs" in text  # the stacked rows of xs are xs
    assert "grad_b = np.sum(" in text  # the bias: the rows of the same stack
    assert "U_xs = xs @ U.T" in text and "U_xs[19]" in text  # one product for all steps
    got = gradgen.grad(rnn, argnums=(0, 1, 2))(*args)
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, _numeric(rnn, *args, argnum=i), rtol=1e-6, atol=1e-8)
    joint = _joint(rnn, args, [0, 1, 2])
    stacked, changed = stack_outer_products(joint)
    assert changed
    stacked.verify()
    for a, b in zip(_run(stacked, args), _run(joint, args), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)  # BLAS's order of addition


def test_matvecs_with_the_rows_of_one_array_become_one_product():
    rng = np.random.default_rng(2)
    args = (0.4 * rng.normal(size=(4, 4)), rng.normal(size=(4, 3)), rng.normal(size=4),
            rng.normal(size=(6, 3)))
    joint = _joint(rnn, args, [0, 1])
    batched, changed = batch_matvecs(joint)
    assert changed
    batched.verify()
    assert _ops(batched).count("matmul") == _ops(joint).count("matmul") - 6 + 1
    for a, b in zip(_run(batched, args), _run(joint, args), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    short = (args[0], args[1], args[2], args[3][:3])  # three steps: left as written
    assert not batch_matvecs(_joint(rnn, short, [0]))[1]


def test_few_outer_products_stay_as_written():
    args = (np.eye(3) * 0.5 + 0.1, np.arange(9.0).reshape(3, 3) / 10)
    _, changed = stack_outer_products(optimize(_joint(few_steps, args, [0])))
    assert not changed


def _numeric(fn, *args, argnum=0, eps=1e-6):
    args = [np.array(a, dtype=np.float64) for a in args]
    x = args[argnum]
    out = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        hi = fn(*args[:argnum], up, *args[argnum + 1:])
        lo = fn(*args[:argnum], down, *args[argnum + 1:])
        out[i] = (hi - lo) / (2 * eps)
    return out


def chain(x):
    y = np.sin(x) * 1.5 + 0.5
    y = np.exp(-y * y) + np.tanh(y)
    y = np.log1p(y * y) * np.cos(x)
    return np.sum(y * x)


def test_large_arrays_are_released_after_their_last_reader():
    x = np.linspace(-1.0, 1.0, 200_000)  # 1.6 MB per value: past DEL_MIN_BYTES
    text = _grad_source(chain, x)
    dels = [line.strip() for line in text.splitlines() if line.strip().startswith("del ")]
    assert dels and not text.rstrip().splitlines()[-2].strip().startswith("del ")
    deleted = [name for line in dels for name in line[4:].split(", ")]
    assert len(deleted) == len(set(deleted))  # each once, after its last reader
    lines = text.splitlines()
    for name in deleted:  # never read again
        at = next(i for i, line in enumerate(lines)
                  if line.strip().startswith("del ") and name in line[8:].split(", "))
        assert not re.search(rf"\b{name}\b", "\n".join(lines[at + 1:]))
    np.testing.assert_allclose(gradgen.grad(chain)(x[:7]), _numeric(chain, x[:7]), rtol=1e-6)
    small = _grad_source(chain, x[:7])
    assert "del " not in small  # small arrays: nothing to gain, nothing printed
    got = gradgen.grad(chain)(x)
    np.testing.assert_allclose(got[:7], gradgen.grad(chain)(x[:7]), rtol=0, atol=0)


def views(a, b):
    c = (a.T @ b).T  # reverse mode transposes the transpose back
    return np.sum(np.tanh(c.reshape(2, 6).reshape(3, 4)) * a.reshape(3, 4))


def test_transposes_of_transposes_and_reshapes_of_reshapes_fold():
    args = (np.arange(12.0).reshape(4, 3) / 10, np.ones((4, 4)) / 3)
    joint = _joint(views, args, [0, 1])
    folded = optimize(joint, verify=True)
    _assert_identical(_run(folded, args), _run(joint, args))
    for node in folded.nodes:
        if node.op.name in ("transpose", "reshape"):
            assert node.inputs[0].node.op.name != node.op.name
    code = [line.split("#")[0] for line in _grad_source(views, *args).splitlines()]
    assert not any(".T.T" in line or ").reshape(2, 6).reshape(" in line for line in code)


def test_writes_nobody_reads_are_dropped():
    """The backward of h[t] = ... zeroes row t of grad_h, which no earlier step reads."""
    args = (np.eye(3) * 0.5 + 0.1, np.arange(9.0).reshape(3, 3) / 10)
    joint = optimize(_joint(filled, args, [0, 1]))
    zeroing = [n for n in joint.nodes if n.op.name == "index_update"
               and n.inputs[1].node.op.name == "const" and n.role == "bwd"]
    assert not zeroing
    text = _grad_source(filled, *args, argnums=(0, 1))
    assert "] = 0.0" not in text


def test_a_write_whose_row_is_returned_stays():
    def overwrite(a, x):
        a = a.copy()
        a[0] = x * 2
        return np.sum(a * a)

    args = (np.arange(6.0).reshape(2, 3), np.array([0.5, -1.5, 2.0]))
    grad_a, grad_x = gradgen.grad(overwrite, argnums=(0, 1))(*args)
    np.testing.assert_array_equal(grad_a[0], 0.0)  # the overwritten row gets no gradient
    np.testing.assert_allclose(grad_a[1], 2 * args[0][1])
    np.testing.assert_allclose(grad_x, 8 * args[1])


# --- the scans that find nothing to do -------------------------------------------------------


def identities_everywhere(x, y):
    a = x * 1.0 + 0.0  # identities
    b = -y
    b = -b  # -(-y)
    e = math.sin(b) * a + math.sin(b)  # sin(b) twice: a duplicate for cse
    c = a * b + 2.0 * 3.0  # constants only
    d = (c + c) / 1.0  # t + t
    return d * e - 0.5 * a


@pytest.mark.parametrize("fn, args", [(identities_everywhere, (1.5, 2.0)),
                                      *((c[0], c[1]) for c in CORPUS)],
                         ids=["identities_everywhere", *IDS])
def test_the_scan_finds_every_node_fold_and_cse_would_change(fn, args, monkeypatch):
    """fold visits only the nodes the scan picks, cse sweeps only when the scan saw a
    duplicate, flatten_sums only the nested sums it listed: the same graphs as visiting every
    node and always sweeping, on the forward (identities and duplicates as written) and on
    the joint graph."""
    scan_module = importlib.import_module("gradgen.optimize.scan")
    forward = trace_function(fn, args)
    graphs = [forward, reverse(forward, range(len(forward.inputs)))]
    passes = (fold, cse, flatten_sums)
    scanned = [(run_pass, run_pass(g)) for g in graphs for run_pass in passes]
    # a duplicate, every node to look at for fold and for flatten_sums
    everything = scan_module.Scan([], set(), True, None, None)
    for module in ("gradgen.optimize.fold", "gradgen.optimize.cse",
                   "gradgen.optimize.accumulate"):
        monkeypatch.setattr(importlib.import_module(module), "scan", lambda graph: everything)
    for graph, (run_pass, (got, changed)) in zip([g for g in graphs for _ in passes], scanned,
                                                 strict=True):
        every, every_changed = run_pass(graph)
        assert changed == every_changed, run_pass.__name__
        assert [(n.op.name, n.attrs.get("value")) for n in got.nodes] == [
            (n.op.name, n.attrs.get("value")) for n in every.nodes]
        assert [n.serial for n in got.nodes if n in graph.nodes] == [
            n.serial for n in every.nodes if n in graph.nodes]
    if fn is identities_everywhere:
        assert scanned[0][1][1]  # as written, the forward has something to fold


def test_dce_follows_inputs_that_lose_their_last_reader():
    """A dead chain goes whole (a dead node reading one value twice too); a value that a
    dead node and a live one read stays; guards stay."""
    def chain(x, y):
        dead = np.exp(x)
        dead = np.sin(dead * dead)
        shared = x * y
        _ = np.cos(shared) + dead
        return shared + y

    graph = trace_function(chain, (0.3, 0.4))
    assert {"exp", "sin", "cos"} <= set(_ops(graph))
    pruned, changed = dce(graph)
    assert changed and _ops(pruned) == ["input", "input", "mul", "add"]
    again, changed = dce(pruned)
    assert not changed and again is pruned


# --- what a built function keeps ----------------------------------------------------------


def test_a_built_function_keeps_no_pass_counts_and_shares_scalar_avals():
    """The graphs a compiled path keeps (for source, explain, check, grad of grad) hold
    neither dce's counts nor the scan (a list of every node and a count per node, for as long
    as the function lives), and the nodes of scalar code share one avals tuple: what the
    cyclic GC walks after a build is the graph itself. (Nor reverse's map from forward values
    to adjoints: only the build reads it.)"""
    df = gradgen.grad(identities_everywhere, argnums=(0, 1))
    df(1.5, 2.0)
    built = df._last.built
    graphs = [built.forward, built.joint, *(spec.graph for spec in built.specs)]
    assert df(1.5, 2.0) == gradgen.grad(identities_everywhere, argnums=(0, 1))(1.5, 2.0)
    for graph in graphs:
        assert not {"dce.reads", "optimize.scan", "adjoints", NO_DUPLICATES} & set(graph.meta)
    scalar = [n for g in graphs for n in g.nodes if len(n.avals) == 1 and n.aval.py is float]
    assert len(scalar) > 20
    assert len({id(n.avals) for n in scalar}) == 1
    assert built.source.count("def ") == 2  # the other function is still written on demand


def _element_writes(x, w):
    h = np.zeros(4, dtype=x.dtype)
    h[0] = x[0] * w
    h[1] = np.sin(h[0]) + x[1]
    h[2] = h[1] * h[0]
    h[3] = h[2] + x[3] * w
    return np.sum(h * h)


def _same_row_twice(x, w):
    h = x * 1.5
    a = h[0] * w
    b = np.sin(h[0])
    h[1] = a + b
    return np.sum(h**2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reads_of_distinct_rows_are_added_into_the_adjoint_they_join(dtype):
    """``grad_h[0] += v``, not ``g = np.zeros(4); g[0] = v; g + grad_h``: the rows a value's
    reads picked are added into the one whole-array adjoint they join (nothing else reads it,
    and each item gets one addition, so every float is the sum's). Two reads of one row keep
    the buffer of zeros, where the order of the additions is the sum's own."""
    x, w = np.array([0.3, -0.7, 1.1, 0.4], dtype=dtype), dtype(0.8)
    source = _grad_source(_element_writes, x, w, argnums=(0, 1))
    assert "+= " in source and source.count("np.zeros") == 2, source  # h and grad_x
    for f in (_element_writes, _same_row_twice):
        grad_x, grad_w = gradgen.grad(f, argnums=(0, 1))(x, w)
        assert grad_x.dtype == dtype
        x64, w64, eps = x.astype(np.float64), float(w), 1e-6
        for i in range(4):
            up, down = x64.copy(), x64.copy()
            up[i] += eps
            down[i] -= eps
            numeric = (f(up, w64) - f(down, w64)) / (2 * eps)
            assert abs(grad_x[i] - numeric) < (1e-7 if dtype == np.float64 else 1e-4)
        numeric = (f(x64, w64 + eps) - f(x64, w64 - eps)) / (2 * eps)
        assert abs(grad_w - numeric) < (1e-7 if dtype == np.float64 else 1e-4)
