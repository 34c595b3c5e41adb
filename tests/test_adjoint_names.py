"""A named value's adjoint is the node its rule made, named grad_<name>; an ``adjoint`` rename
is left only for true aliases (grad_a = grad_c), and no pass drops such a name."""

from __future__ import annotations

import math

import numpy as np

import gradgen
from gradgen.ir import Graph, Node, aval_of
from gradgen.ops import OPS
from gradgen.optimize import cse, dce, flatten_sums, fold, optimize
from gradgen.peephole import identical_input, names_adjoint
from gradgen.reverse import reverse
from gradgen.tracing import trace_function

from .test_optimize import reused as design_example  # DESIGN.md section 6's example


def chain(x, w):
    h = math.sin(x) * w
    u = math.exp(h) / x
    v = u * u - h
    return math.tanh(v) + u


def _joint(fn, args, wrt=(0,)):
    return reverse(trace_function(fn, args), list(wrt))


def _by_name(graph: Graph) -> dict[str, Node]:
    return {n.name: n for n in graph.nodes if n.name}


def test_a_named_values_adjoint_is_the_node_its_rule_made():
    joint = _joint(design_example, (2.0,))
    named = _by_name(joint)
    assert named["grad_y"].op.name == "add_n"  # the fused sum, named itself
    assert named["grad_x"].op.name == "mul"  # 2 * (grad_y * x): the rule's own product
    # only the true aliases are renames: d(a + b)/da = 1 hands grad_c on unchanged
    renames = [n for n in joint.nodes if n.op.name == "adjoint"]
    assert sorted(n.name for n in renames) == ["grad_a", "grad_b"]
    assert all(n.inputs[0].node is named["grad_c"] for n in renames)
    assert joint.meta["adjoints"][named["y"]].node is named["grad_y"]


def test_the_emitted_statements_are_those_the_renames_made():
    source = gradgen.emit(design_example, 2.0)
    body = source[source.index("def reused_grad("):].split("\n\n\n")[0]
    # in operand order, below what they name, as DESIGN section 6 shows them (each is made
    # as soon as c's rule has run: a and b are read once)
    assert "    grad_a = grad_c\n    grad_b = grad_c\n" in body
    assert "    grad_y = grad_a + grad_b * 2.0\n" in body
    assert "    grad_x = 2.0 * (grad_y * x)\n" in body


def test_scalar_code_keeps_few_renames_and_exact_gradients():
    joint = _joint(chain, (0.7, 1.3), (0, 1))
    renames = [n for n in joint.nodes if n.op.name == "adjoint"]
    named = [n for n in joint.nodes if names_adjoint(n)]
    assert len(named) >= 5 and len(renames) <= 1
    df = gradgen.grad(chain, argnums=(0, 1))
    gx, gw = df(0.7, 1.3)
    eps = 1e-6
    assert math.isclose(gx, (chain(0.7 + eps, 1.3) - chain(0.7 - eps, 1.3)) / (2 * eps),
                        rel_tol=1e-6)
    assert math.isclose(gw, (chain(0.7, 1.3 + eps) - chain(0.7, 1.3 - eps)) / (2 * eps),
                        rel_tol=1e-6)


def _input(value, index=0, name="x") -> Node:
    return Node(OPS["input"], (), {"index": index}, (aval_of(value),), name=name, role="input")


def _const(value) -> Node:
    return Node(OPS["const"], (), {"value": value}, (aval_of(value),), role="const")


def _bwd(op, inputs, like, name=None) -> Node:
    """A backward node; named, the whole adjoint of a value of that name (as reverse makes)."""
    node = Node(OPS[op], tuple(r.out for r in inputs), {}, (aval_of(like),), name=name,
                role="bwd")
    if name is not None:
        node.grad_of = _input(like, 9, name.removeprefix("grad_"))
    return node


def test_a_pass_that_replaces_a_named_adjoint_keeps_its_name():
    """x * 1 folds to x, and 2 * 3 to 6: what replaces grad_y is renamed grad_y."""
    x = 1.5
    inp, one = _input(x), _const(1.0)
    g = _bwd("mul", (inp, one), x, "grad_y")
    two, three = _const(2.0), _const(3.0)
    k = _bwd("mul", (two, three), 6.0, "grad_k")
    graph = Graph([inp, one, g, two, three, k], [inp], [g.out, k.out])
    folded, changed = fold(graph)
    folded, _ = dce(folded)
    folded.verify()
    assert changed
    first, second = (r.node for r in folded.outputs)
    assert (first.op.name, first.name, first.inputs[0].node) == ("adjoint", "grad_y", inp)
    assert (second.op.name, second.name) == ("adjoint", "grad_k")
    assert second.inputs[0].node.attrs["value"] == 6.0
    assert not [n for n in folded.nodes if n.name == "x" and n.op.name != "input"]


def test_cse_keeps_both_names_of_one_value():
    x = _input(1.0)
    a = _bwd("sin", (x,), 1.0, "grad_a")
    b = _bwd("sin", (x,), 1.0, "grad_b")
    merged, changed = cse(Graph([x, a, b], [x], [a.out, b.out]))
    merged.verify()
    assert changed
    first, second = (r.node for r in merged.outputs)
    assert first is a and (second.op.name, second.name, second.inputs[0].node) == (
        "adjoint", "grad_b", a)


def test_no_rewrite_looks_through_a_named_adjoint():
    x = _input(1.0)
    inner = _bwd("neg", (x,), 1.0, "grad_y")
    outer = Node(OPS["neg"], (inner.out,), {}, (aval_of(1.0),), role="bwd")
    assert identical_input("neg", outer.inputs, {}, outer.aval) is None
    inner.name = inner.grad_of = None  # an unnamed negation is looked through: -(-x) is x
    assert identical_input("neg", outer.inputs, {}, outer.aval) == x.out
    # a sum whose first term is another value's whole adjoint stays two statements
    a, b = _input(1.0, 0, "a"), _input(2.0, 1, "b")
    first = _bwd("add_n", (a, b), 1.0, "grad_u")
    total = _bwd("add_n", (first, a), 1.0)
    same, changed = flatten_sums(Graph([a, b, first, total], [a, b], [total.out]))
    assert not changed and same.nodes[2] is first


def test_optimized_graphs_keep_every_adjoint_name():
    for fn, args, wrt in ((design_example, (2.0,), (0,)), (chain, (0.7, 1.3), (0, 1))):
        joint = _joint(fn, args, wrt)
        names = {n.name for n in joint.nodes if names_adjoint(n) or n.op.name == "adjoint"}
        optimized = optimize(joint, verify=True)
        assert names <= {n.name for n in optimized.nodes}


def rows_read_many_times(x):
    total = 0.0
    for i in range(20):
        total = total + x[i] * 2.0
    return total


def test_a_long_fused_sum_of_rows_is_still_one_buffer():
    """Past MAX_FUSED_TERMS a sum continues in a partial sum (grad_x_partial): a step of one
    adjoint, not an adjoint of its own, so the slice updates still gather all twenty rows."""
    source = gradgen.emit(rows_read_many_times, np.linspace(0.0, 1.0, 20), loops="unroll")
    assert "_scatter(" not in source
    assert "grad_x_partial[19] += " in source or "grad_x[19] += " in source
