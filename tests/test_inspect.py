"""Looking inside: the traced graph as PyTorch users know it (op names, next_functions with
output indices, leaves), the joint forward+backward graph, DOT drawings, and the adjoints
of named intermediate values (``grad(f, intermediates=...)``, PyTorch's retain_grad)."""

from __future__ import annotations

import inspect
import os
import re
import shutil

import numpy as np
import pytest

import gradgen
from gradgen.ir import Graph

HERE = os.path.basename(__file__)


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


# --- the graph of user-questions/question-3.txt: e = (a + b) * d ------------------------------


def abd(a, b, d):
    c = a + b
    e = c * d
    return e


@pytest.fixture
def graph() -> Graph:
    return gradgen.trace(abd, 2.0, 3.0, 4.0)


def test_nodes_expose_their_op_name(graph):
    assert [n.op.name for n in graph.nodes] == ["input", "input", "input", "add", "mul"]
    assert graph.find("e").op.name == "mul"
    assert graph.find("c").op.name == "add"


def test_next_functions_are_node_and_output_index_pairs(graph):
    e = graph.find("e")
    (first, first_index), (second, second_index) = e.next_functions
    assert first is graph.find("c") and first_index == 0
    assert second is graph.find("d") and second_index == 0
    assert [(n.name, i) for n, i in first.next_functions] == [("a", 0), ("b", 0)]


def test_inputs_are_leaves_and_nothing_else_is(graph):
    leaves = [n for n in graph.nodes if n.is_leaf]
    assert leaves == graph.inputs == graph.leaves
    assert [n.name for n in leaves] == ["a", "b", "d"]
    assert not graph.find("c").is_leaf and not graph.find("e").is_leaf
    assert all(n.next_functions == () for n in leaves)


def test_walking_next_functions_from_the_output_reaches_every_leaf(graph):
    seen, stack = set(), [graph.outputs[0].node]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(n for n, _ in node.next_functions)
    assert {n.name for n in seen if n.is_leaf} == {"a", "b", "d"}


def test_find_returns_the_last_binding_and_rejects_unknown_names(graph):
    def loop(x):
        y = x
        for _ in range(3):
            y = y * 2.0
        return y

    g = gradgen.trace(loop, 1.0)
    # the listing versions the loop's values y, y_1, y_2; find("y") is the last one bound
    assert "y_2:float = mul y_1 2.0" in str(g)
    assert g.find("y") is g.outputs[0].node and g.find("y").name == "y_2"
    assert g.find("y_2").next_functions[0][0] is g.find("y_1")
    # in the joint graph grad_y is the adjoint of that same last y
    joint = gradgen.trace(loop, 1.0, backward=True)
    assert joint.find("grad_y").name == "grad_y_2"
    assert joint.find("grad_y") is joint.find("grad_y_2")
    with pytest.raises(KeyError, match="'nope'"):
        graph.find("nope")


def test_nodes_carry_the_user_source_line(graph):
    assert str(graph.find("c").loc) == f"{HERE}:{line_of(abd, 'c = a + b')}"
    assert str(graph.find("e").loc) == f"{HERE}:{line_of(abd, 'e = c * d')}"


def test_listing_reads_like_a_jaxpr(graph):
    text = str(graph)
    assert text.splitlines()[0] == "{ lambda a:float, b:float, d:float ."
    assert f"  c:float = add a b   # {HERE}:{line_of(abd, 'c = a + b')}" in text
    assert text.splitlines()[-1] == "  in (e) }"


def test_graph_of_arrays_has_shapes_and_dtypes():
    def f(x):
        y = np.sin(x)
        return np.sum(y * y)

    g = gradgen.trace(f, np.ones(3, dtype=np.float32))
    assert str(g.find("y").aval) == "f32[3]"
    assert str(g.outputs[0].aval) == "f32[]"
    g.verify()


# --- the joint graph: trace(..., backward=True) ------------------------------------------------


def test_backward_graph_has_grad_nodes():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True)
    g.verify()
    names = {n.name for n in g.backward_nodes}
    assert {"grad_e", "grad_c", "grad_a"} <= names
    assert all(n.role == "bwd" for n in g.backward_nodes)
    assert all(n.role in ("fwd", "input") for n in g.forward_nodes)
    assert g.find("grad_a").role == "bwd"
    assert "(backward)" in str(g)


def test_backward_graph_outputs_are_value_then_gradients():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True, argnums=(0, 1, 2))
    assert len(g.outputs) == 4
    assert g.outputs[0].node.op.name == "mul"
    assert [r.node.name for r in g.outputs[1:]] == ["grad_a", "grad_b", "grad_d"]


def test_backward_nodes_record_the_rule_that_made_them():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True, argnums=(0, 1, 2))
    origins = {n.origin for n in g.backward_nodes if n.origin is not None}
    assert {(op.name, i) for op, i in origins} >= {("mul", 0), ("mul", 1), ("add", 0)}


def test_backward_next_functions_reach_forward_values():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True)
    grad_a = g.find("grad_a")
    stack, reached = [grad_a], set()
    while stack:
        node = stack.pop()
        for parent, _ in node.next_functions:
            if parent not in reached:
                reached.add(parent)
                stack.append(parent)
    assert g.find("d") in reached  # de/da = d: the backward reads the forward's d
    assert g.find("grad_e") in reached


# --- DOT -----------------------------------------------------------------------------------------

EDGE = re.compile(r'^\s*n(\d+) -> n(\d+) \[label="(\d+)"\];$', re.MULTILINE)
NODE = re.compile(r'^\s*n(\d+) \[label="((?:[^"\\]|\\.)*)", shape=(\w+)\];$', re.MULTILINE)


def _clusters(dot: str) -> dict[str, str]:
    blocks = re.findall(r"subgraph cluster_(\w+) \{(.*?)\n  \}", dot, re.DOTALL)
    return dict(blocks)


def test_dot_has_forward_and_backward_clusters():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True)
    dot = g.to_dot()
    assert dot.startswith("digraph gradgen {") and dot.rstrip().endswith("}")
    clusters = _clusters(dot)
    assert set(clusters) == {"fwd", "bwd"}
    assert 'label="forward"' in clusters["fwd"] and 'label="backward"' in clusters["bwd"]
    fwd_ids = {int(m.group(1)) for m in NODE.finditer(clusters["fwd"])}
    bwd_ids = {int(m.group(1)) for m in NODE.finditer(clusters["bwd"])}
    assert {n.serial for n in g.backward_nodes} == bwd_ids
    assert {n.serial for n in g.forward_nodes} == fwd_ids


def test_forward_only_dot_has_no_backward_cluster(graph):
    assert set(_clusters(graph.to_dot())) == {"fwd"}


def test_dot_edges_are_labelled_by_output_index():
    g = gradgen.trace(abd, 2.0, 3.0, 4.0, backward=True, argnums=(0, 1, 2))
    dot = g.to_dot()
    edges = sorted((int(a), int(b), int(i)) for a, b, i in EDGE.findall(dot))
    want = sorted((ref.node.serial, node.serial, ref.index) for node in g.nodes
                  for ref in node.inputs if ref.node.op.name != "const")
    assert edges == want and edges


def test_dot_labels_use_single_escaped_line_breaks(graph):
    dot = graph.to_dot()
    labels = {int(m.group(1)): m.group(2) for m in NODE.finditer(dot)}
    assert labels[graph.find("c").serial] == r"c = add\nfloat"
    assert labels[graph.find("a").serial] == r"a = input\nfloat"
    assert "\\\\n" not in dot  # a doubled backslash would draw a literal "\n"


def test_dot_names_a_function_output_and_its_index():
    class Pair(gradgen.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    def f(a):
        b, c = Pair.apply(a)
        return b * c

    dot = gradgen.trace(f, 1.0).to_dot()
    assert r"b = function_output\nPair, output 0 of 2\nfloat" in dot
    assert r"c = function_output\nPair, output 1 of 2\nfloat" in dot


def test_render_dot_writes_the_dot_text(graph, tmp_path):
    path = tmp_path / "graph.dot"
    assert graph.render(str(path)) == str(path)
    assert path.read_text() == graph.to_dot()


@pytest.mark.skipif(shutil.which("dot") is not None, reason="Graphviz's dot is installed")
@pytest.mark.parametrize("suffix", ["svg", "png", "pdf"])
def test_render_image_without_graphviz_names_the_package(graph, tmp_path, suffix):
    path = tmp_path / f"graph.{suffix}"
    with pytest.raises(gradgen.GradgenError, match="graphviz") as info:
        graph.render(str(path))
    assert "dot" in str(info.value) and str(path) in str(info.value)
    assert not path.exists()


def test_render_unknown_suffix(graph, tmp_path):
    with pytest.raises(gradgen.GradgenError, match=r"\.dot, \.svg"):
        graph.render(str(tmp_path / "graph.txt"))


# --- intermediates: the adjoints of named values --------------------------------------------


def y_then_z(x):
    y = x * x
    z = y + 3
    return z


def test_forum_example_adjoint_of_y():
    g, adjoints = gradgen.grad(y_then_z, intermediates=("y",))(2.0)
    assert g == 4.0
    assert adjoints == {"y": 1.0} and type(adjoints["y"]) is float


def test_several_intermediates_in_the_order_asked():
    g, adjoints = gradgen.grad(y_then_z, intermediates=("z", "y"))(2.0)
    assert g == 4.0 and list(adjoints) == ["z", "y"]
    assert adjoints == {"z": 1.0, "y": 1.0}


def test_a_single_name_as_a_string():
    assert gradgen.grad(y_then_z, intermediates="y")(2.0) == (4.0, {"y": 1.0})


def test_reused_intermediate_sums_both_uses():
    def f(x):
        y = x * x
        a = y + 1
        b = y * 2
        return a + b

    g, adjoints = gradgen.grad(f, intermediates=("y", "a", "b"))(2.0)
    assert g == 12.0 and adjoints == {"y": 3.0, "a": 1.0, "b": 1.0}


def test_unknown_intermediate_is_named():
    with pytest.raises(gradgen.GradgenError, match=r"'w'.*named values: y, z") as info:
        gradgen.grad(y_then_z, intermediates=("w",))(2.0)
    assert str(info.value).startswith(f"{HERE}:")


def test_intermediate_inside_a_loop_is_the_last_value_bound():
    def f(x):
        h = x
        for _ in range(3):
            h = h * 2.0
        return h * h

    # the last h is 8x; out = h**2, so d out / d h = 2 h = 16 at x = 1
    g, adjoints = gradgen.grad(f, intermediates=("h",))(1.0)
    assert g == 128.0 and adjoints == {"h": 16.0}


def test_intermediate_adjoints_have_the_value_shape_and_dtype():
    def f(x):
        y = np.sin(x)
        t = np.sum(y * y)
        return t

    x = np.array([0.1, 0.2], dtype=np.float32)
    g, adjoints = gradgen.grad(f, intermediates=("y", "t"))(x)
    assert g.dtype == np.float32
    assert adjoints["y"].shape == (2,) and adjoints["y"].dtype == np.float32
    assert np.allclose(adjoints["y"], 2 * np.sin(x))
    assert np.shape(adjoints["t"]) == () and adjoints["t"] == 1.0


def test_intermediate_the_output_ignores_has_zero_adjoint():
    def f(x):
        y = x * 2
        w = x * 3  # noqa: F841 - named but ignored by the output
        return np.sum(y)

    g, adjoints = gradgen.grad(f, intermediates=("w",))(np.ones(2))
    assert np.array_equal(g, [2.0, 2.0])
    assert np.array_equal(adjoints["w"], np.zeros(2))


def test_intermediates_in_the_emitted_module():
    source = gradgen.emit(y_then_z, 2.0, intermediates=("y",))
    assert 'return grad_x, {"y": grad_y}' in source
    assert 'return z, (grad_x, {"y": grad_y})' in source
    assert "the adjoints of y" in source


def test_value_with_intermediates_under_tuple_argnums():
    def f(x, k):
        y = x * k
        return y * y

    (gx, gk), adjoints = gradgen.grad(f, argnums=(0, 1), intermediates=("y",))(2.0, 3.0)
    assert (gx, gk) == (36.0, 24.0) and adjoints == {"y": 12.0}


def test_intermediates_under_an_outer_grad():
    def f(x):
        y = x * x
        return y * x

    def uses_both(x):
        g, adjoints = gradgen.grad(f, intermediates=("y",))(x)
        return g + adjoints["y"]  # 3x**2 + x

    assert uses_both(2.0) == 14.0
    assert gradgen.grad(uses_both)(2.0) == pytest.approx(13.0)


def test_pytree_leaves_are_named_graph_inputs():
    def f(params, x):
        h = np.tanh(x @ params["W1"])
        return np.sum(h * params["b"])

    g = gradgen.trace(f, {"W1": np.ones((2, 2)), "b": np.ones(2)}, np.ones((3, 2)))
    assert [n.name for n in g.inputs] == ["W1", "b", "x"]
    assert g.find("W1").is_leaf and g.find("h").next_functions[0][0].op.name == "matmul"
    assert str(g).startswith("{ lambda W1:f64[2,2], b:f64[2], x:f64[3,2] .")
    joint = gradgen.trace(f, {"W1": np.ones((2, 2)), "b": np.ones(2)}, np.ones((3, 2)),
                          backward=True)
    assert [r.node.name for r in joint.outputs[1:]] == ["grad_W1", "grad_b"]
