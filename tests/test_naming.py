"""Names for the values the user did not name: made from what they hold (x_head, x_head_sq,
one_minus_x_head, grad_<that name> for its adjoint), short, never a user's name, a keyword or
a module the emitted code imports, and the old scheme (h_part, tmp) where no rule applies."""

from __future__ import annotations

import ast
import glob
import importlib.util
import os
import re

import numpy as np
import pytest

import gradgen
from gradgen.naming import MAX_HELD, RESERVED, Held, Namer, held_name, part_name

from .conftest import ROOT, run_emitted

# --- user functions (defined here: the names come from this file's lines) -------------------


def rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def takes_the_made_name(x):
    y = np.sum((1.0 - x[:-1]) ** 2)
    one_minus_x_head = x * 3.0  # the name the rule would give 1.0 - x[:-1]
    return y + np.sum(one_minus_x_head)


def softmax_nll(logits, k):
    return np.log(np.sum(np.exp(logits - np.max(logits)))) - (logits - np.max(logits))[k]


def long_operands(alpha_parameter_vector, beta_parameter_vector):
    return np.sum(np.exp(alpha_parameter_vector - beta_parameter_vector) ** 2)


def abs_of(x):
    return abs(x) * 2.0 + abs(x)


def assigned_names(source: str) -> list[str]:
    """Every name the module assigns, in order (functions' parameters left out)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def _args_of(fn):
    return {rosen: (np.linspace(-1.0, 1.5, 6),),
            takes_the_made_name: (np.linspace(0.0, 1.0, 5),),
            softmax_nll: (np.array([0.5, -1.0, 2.0]), 1),
            long_operands: (np.linspace(0.0, 1.0, 4), np.linspace(1.0, 2.0, 4)),
            abs_of: (-1.5,)}[fn]


# --- the rule, on traced graphs ---------------------------------------------------------


def _named_forward(fn):
    """The forward graph of fn and the names its arguments have in the emitted code."""
    graph = gradgen.trace(fn, *_args_of(fn))
    names = {node: fn.__code__.co_varnames[node.attrs["index"]] for node in graph.inputs}
    return graph, names


def test_slices_and_expressions_are_named_after_what_they_hold():
    graph, names = _named_forward(rosen)
    held = Held(graph.nodes, names)
    made = [held_name(n, held) for n in graph.nodes if n.op.name not in ("input", "const")]
    for expected in ("x_head", "x_tail", "x_head_sq", "x_tail_minus_x_head_sq",
                     "one_minus_x_head", "one_minus_x_head_sq"):
        assert expected in made, made
    assert all(len(m) <= MAX_HELD for m in made if m is not None)


def test_a_name_longer_than_the_cap_is_not_made(monkeypatch):
    graph, names = _named_forward(rosen)
    monkeypatch.setattr("gradgen.naming.MAX_HELD", 12)
    held = Held(graph.nodes, names)
    made = {held_name(n, held) for n in graph.nodes if n.op.name not in ("input", "const")}
    assert "x_head_sq" in made
    assert "x_tail_minus_x_head_sq" not in made and "one_minus_x_head" not in made


def test_a_made_name_is_never_one_the_user_binds():
    graph, names = _named_forward(takes_the_made_name)
    held = Held(graph.nodes, names)
    assert "one_minus_x_head" in held.user_names
    made = {held_name(n, held) for n in graph.nodes if n.name is None}
    assert "one_minus_x_head" not in made
    source = gradgen.emit(takes_the_made_name, *_args_of(takes_the_made_name))
    assigned = assigned_names(source)
    assert "one_minus_x_head" in assigned  # the user's own variable keeps its name
    assert "one_minus_x_head_1" not in assigned


@pytest.mark.parametrize("index, part", [
    ((0,), "0"), ((-1,), "last"), ((-2,), "m2"), ((("slice", 1, None, None),), "tail"),
    ((("slice", None, -1, None),), "head"), ((("array", (0, 2)),), "picked"),
    ((3, ("slice", None, None, None)), "3"), ((("slice", 1, 4, 2),), "part"),
])
def test_part_names(index, part):
    assert part_name(index) == part


def test_namer_versions_keywords_reserved_and_taken_names():
    namer = Namer(["x"])
    assert namer.fresh("x") == "x_1"
    assert namer.fresh("lambda") == "lambda_1"
    for module in ("np", "math", "numpy"):
        assert module in RESERVED
        assert namer.fresh(module) == f"{module}_1"
    assert namer.fresh("x") == "x_2"
    assert namer.fresh("2x") == "v_2x"


# --- in emitted modules -------------------------------------------------------------------


def test_the_adjoint_of_a_made_name_is_grad_of_that_name():
    source = gradgen.emit(rosen, *_args_of(rosen))
    assigned = assigned_names(source)
    assert "x_tail_minus_x_head_sq" in assigned and "one_minus_x_head" in assigned
    assert "grad_x_tail_minus_x_head_sq" in assigned
    assert not [n for n in assigned if re.fullmatch(r"(grad_)?tmp(_\d+)?", n)]
    fns = run_emitted(source)
    want = gradgen.grad(rosen)(*_args_of(rosen))
    np.testing.assert_allclose(fns["rosen_grad"](*_args_of(rosen)), want, rtol=1e-12)


def test_reductions_and_comparisons_have_names():
    source = gradgen.emit(softmax_nll, *_args_of(softmax_nll))
    assigned = assigned_names(source)
    assert "max_logits" in assigned
    assert "logits_eq_max_logits" in assigned  # the mask of the max's derivative, no grad_


def test_a_derivative_factor_that_is_no_adjoint_has_no_grad_prefix():
    source = gradgen.emit(abs_of, *_args_of(abs_of))
    assigned = assigned_names(source)
    assert "sign_x" in assigned and "grad_sign_x" not in assigned


def test_long_operands_fall_back_to_the_old_scheme():
    source = gradgen.emit(long_operands, *_args_of(long_operands))
    made = [n for n in assigned_names(source) if n != "out" and not n.startswith("grad_")]
    assert made and all(len(n) <= MAX_HELD for n in made), made
    assert "alpha_parameter_vector_minus_beta_parameter_vector" not in source


def test_names_are_byte_stable():
    first = gradgen.emit(rosen, *_args_of(rosen))
    assert gradgen.emit(rosen, *_args_of(rosen)) == first


# --- every example: no tmp where a rule applies ----------------------------------------------

EXAMPLE_CALLS = {  # example -> (function, arguments, argnums)
    "add_mul": ("f", lambda m: (2.0, 3.0, 4.0), (0, 1, 2)),
    "double_triple": ("f", lambda m: (2.0,), 0),
    "doubling": ("f", lambda m: (np.array([1.0, 2.0, 3.0]),), 0),
    "gmm": ("nll", lambda m: m.example_args(), (0, 1, 2)),
    "least_squares": ("val_loss", lambda m: m.example_args(), (0, 1)),
    "logistic_regression": ("loss", lambda m: m.example_args(), (0, 1)),
    "mlp": ("loss", lambda m: m.example_args(), 0),
    "mm": ("f", lambda m: (np.linspace(0.0, 1.0, 3), np.eye(3) + 0.1), (0, 1)),  # a vjp
    "reused_value": ("f", lambda m: (2.0,), 0),
    "rnn": ("loss", lambda m: m.example_args(), (0, 1, 2)),
    "rnn_loop": ("loss", lambda m: (np.full((3, 3), 0.1), np.full((3, 2), 0.2),
                                    np.linspace(-1, 1, 40).reshape(20, 2), np.zeros(3)), (0, 1)),
    "rosenbrock": ("rosenbrock", lambda m: m.example_args(), 0),
    "sine": ("f", lambda m: (0.5,), 0),
    "softplus": ("f", lambda m: (np.array([0.5, 30.0]),), 0),
    "square_plus": ("f", lambda m: (2.0,), 0),
}


def test_every_example_is_listed():
    found = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))}
    assert found - {"dask_logistic"} == set(EXAMPLE_CALLS)  # dask_logistic needs a cluster


@pytest.mark.parametrize("target", ["numpy", "array-api"])
@pytest.mark.parametrize("loops", ["keep", "unroll"])
@pytest.mark.parametrize("example", sorted(EXAMPLE_CALLS))
def test_examples_have_no_tmp_names(example, target, loops):
    if target == "array-api":
        pytest.importorskip("array_api_compat")
    fn_name, args, argnums = EXAMPLE_CALLS[example]
    spec = importlib.util.spec_from_file_location(
        example, os.path.join(ROOT, "examples", f"{example}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    source = gradgen.emit(getattr(module, fn_name), *args(module), argnums=argnums,
                          target=target, loops=loops, vjp=example == "mm")
    assigned = assigned_names(source)
    assert not [n for n in assigned if re.fullmatch(r"(grad_)?tmp(_\d+)*", n)], source
    made = [n for n in assigned if n not in RESERVED]
    assert all(len(n) <= MAX_HELD + len("grad_") + 4 for n in made), made  # + a version


# --- the hook for passes: Node.hint, and what a replacement inherits -----------------------


def test_a_pass_hint_names_the_value():
    graph, names = _named_forward(rosen)
    sub = next(n for n in graph.nodes if n.op.name == "sub" and n.inputs[0].node.op.name
               == "getitem")
    sub.hint = "residual"
    held = Held(graph.nodes, names)
    assert held_name(sub, held) == "residual"
    square = next(n for n in graph.nodes if n.op.name == "pow" and n.inputs[0].node is sub)
    assert held_name(square, held) == "residual_sq"  # names made from it follow


def test_a_replacement_takes_what_the_replaced_value_was_said_to_hold():
    from gradgen.optimize.rewrite import Rewriter

    graph, _ = _named_forward(rosen)
    first, second = [n for n in graph.nodes if n.op.name == "getitem"][:2]
    first.hint = "x_shifted"
    rw = Rewriter(graph)
    rw.replace(first, second.out)
    assert second.hint == "x_shifted"
    third = graph.nodes[-1]
    third.hint = "kept"
    rw.replace(first, third.out)
    assert third.hint == "kept"  # a value that has a name keeps it


def test_a_fused_sum_named_after_its_value_says_whose_uses_it_gathers():
    from .conftest import load_example

    mlp = load_example("mlp")
    source = gradgen.emit(mlp.loss, *mlp.example_args())
    assert "    # shifted is used 2 times by mlp.py:19: one fused sum\n    grad_shifted = " in source
    assert "this value is used" not in source


def reads_twice_and_returns(x):
    a = x + 1.0
    b = a * a  # one reader, reading a twice
    return np.sin(b), b  # b is returned and read by one op


def test_the_one_reader_of_a_value():
    """``Held.reader``: the node that reads a value, when no other node does (a node reading
    it twice is still one reader; the graph returning it is no reader), with the counts the
    emitter's survey found (the last reader, the values more than one node reads) or found
    on first use: the same answers either way."""
    from gradgen.emit import _Survey

    graph = gradgen.trace(reads_twice_and_returns, 0.7)
    graph = graph.with_nodes(graph.nodes, graph.outputs)
    expected = {}
    for node in graph.nodes:
        readers = {reader for reader in graph.nodes if any(r.node is node for r in reader.inputs)}
        expected[node] = readers.pop() if len(readers) == 1 else None
    assert any(e is not None and sum(r.node is n for r in e.inputs) == 2
               for n, e in expected.items())  # a * a is in the graph
    assert any(e is not None and any(r.node is n for r in graph.outputs)
               for n, e in expected.items())  # so is b, returned and read once
    survey = _Survey(graph)
    surveyed = Held(graph.nodes, {}, survey.user_names, survey.last_reader, survey.several)
    for held in (Held(graph.nodes, {}), surveyed):
        assert {node: held.reader(node) for node in graph.nodes} == expected


def test_a_value_the_graph_no_longer_has_is_found_by_its_serial():
    """``Held.current``: an adjoint notes the value it belongs to, which optimization may have
    rebuilt since under the same serial; naming asks for the graph's node then, and gets a
    node the graph has (named, or read by another) back as it is, without a serial map."""
    graph = gradgen.trace(reads_twice_and_returns, 0.7)
    a = next(n for n in graph.nodes if n.op.name == "add")
    rebuilt = a.with_inputs(a.inputs)  # what a pass leaves an old reference pointing at
    held = Held(graph.nodes, {})
    assert held.current(a) is a and held._current is None  # read by a * a: no map made
    assert held.current(rebuilt) is a
    outside = rebuilt.with_inputs(rebuilt.inputs)
    outside.serial = -1  # no node of the graph has its serial: itself
    assert held.current(outside) is outside


def median_of_three_sorted(x):
    return np.sum(np.sort(x)[1:] * np.sort(x)[:-1])


def test_a_sorted_array_is_named_after_what_it_sorts():
    source = gradgen.emit(median_of_three_sorted, np.array([0.3, -1.2, 0.8]))
    assert "x_sorted = " in source and "x_sorted_tail = x_sorted[1:]" in source


def rows_written_into_zeros(W, x):
    h = np.zeros((3, 2))
    s = np.zeros(2)
    for t in range(3):
        s = np.tanh(W @ s + x[t])
        h[t] = s
    return (h ** 2).sum()


def test_an_array_of_constants_written_row_by_row_keeps_the_users_name():
    # h = np.zeros(...) holds no traced value until h[t] = s writes one: the emitted buffer is
    # still h (it was tmp, and every name made from it tmp_...), and the gradient is right.
    W, x = np.full((2, 2), 0.3), np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    source = gradgen.emit(rows_written_into_zeros, W, x, argnums=(0, 1))
    assigned = assigned_names(source)
    assert "h" in assigned and not [n for n in assigned if "tmp" in n], source
    grad_W, grad_x = run_emitted(source)["rows_written_into_zeros_grad"](W, x)
    eps = 1e-6
    for arg, grad, k in ((W, grad_W, 0), (x, grad_x, 1)):
        for idx in np.ndindex(arg.shape):
            up, down = [W.copy(), x.copy()], [W.copy(), x.copy()]
            up[k][idx] += eps
            down[k][idx] -= eps
            numeric = (rows_written_into_zeros(*up) - rows_written_into_zeros(*down)) / (2 * eps)
            assert abs(grad[idx] - numeric) < 1e-7


def written_element_by_element(x, w):
    h = np.zeros(4)
    h[0] = x[0] * w
    h[1] = np.sin(h[0]) + x[1]
    h[2] = h[1] * h[0]
    h[3] = h[2] + x[3] * w
    return np.sum(h * h)


def test_the_adjoints_of_an_arrays_versions_are_not_renamed_version_to_version():
    # The forward writes one h; its backward zeroes the written items of one adjoint array.
    # It printed grad_h_2 = grad_h_3 after grad_h_3[3] = 0.0, and grad_h = grad_h_1_1: a
    # rename (an alias, no copy) that only said the version again.
    x, w = np.array([0.3, -0.7, 1.1, 0.4]), 0.8
    source = gradgen.emit(written_element_by_element, x, w, argnums=(0, 1))
    renames = re.findall(r"^\s*(grad_h\w*) = (grad_h\w*)$", source, re.MULTILINE)
    assert not renames, source
    grad_x, grad_w = run_emitted(source)["written_element_by_element_grad"](x, w)
    eps = 1e-6
    for idx in range(4):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric = (written_element_by_element(up, w) - written_element_by_element(down, w))
        assert abs(grad_x[idx] - numeric / (2 * eps)) < 1e-7
    numeric = (written_element_by_element(x, w + eps) - written_element_by_element(x, w - eps))
    assert abs(grad_w - numeric / (2 * eps)) < 1e-7
