"""The IR: verify() on every kind of graph, the jaxpr-like listing with the user's names and
lines, and DOT output with forward and backward side by side."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gradgen
from gradgen.ir import Graph, Node, Ref, aval_of
from gradgen.ops import OPS
from gradgen.optimize import optimize
from gradgen.reverse import reverse
from gradgen.tracing import trace_function

DEMO = '''def f(x):
    y = x * x
    a = y + 1
    b = y * 2
    c = a + b
    return c


def g(x, w):
    h = x @ w
    return (h * h).sum()


def branchy(x):
    if x > 0:
        return x * 3
    return -x
'''


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """demo.py, the design document's example, as a user module in its own file."""
    (tmp_path / "demo.py").write_text(DEMO)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("demo", None)
    module = importlib.import_module("demo")
    yield module
    sys.modules.pop("demo", None)


def _graphs(fn, args, argnums=0):
    """The forward, the joint (reverse mode, unoptimized) and the optimized graph."""
    forward = trace_function(fn, args)
    joint = reverse(forward, [argnums])
    return forward, joint, optimize(joint, verify=True)


# --- verify ----------------------------------------------------------------------------------


def test_verify_on_traced_joint_and_optimized_graphs(demo, rng):
    cases = [(demo.f, (2.0,)), (demo.g, (rng.normal(size=3), rng.normal(size=(3, 2)))),
             (demo.branchy, (1.5,)), (demo.branchy, (-1.5,))]
    for fn, args in cases:
        for graph in _graphs(fn, args):
            graph.verify()
        gradgen.trace(fn, *args).verify()
        gradgen.trace(fn, *args, backward=True).verify()


def test_verify_rejects_broken_graphs():
    x = Node(OPS["input"], (), {"index": 0}, (aval_of(1.0),), name="x", role="input")
    y = Node(OPS["mul"], (x.out, x.out), {}, (aval_of(1.0),), name="y")
    z = Node(OPS["neg"], (y.out,), {}, (aval_of(1.0),), name="z")
    Graph([x, y, z], [x], [z.out]).verify()
    with pytest.raises(AssertionError, match="before it is defined"):
        Graph([x, z, y], [x], [z.out]).verify()
    with pytest.raises(AssertionError, match="twice"):
        Graph([x, y, y, z], [x], [z.out]).verify()
    with pytest.raises(AssertionError, match="missing output"):
        Graph([x, y, Node(OPS["neg"], (Ref(y, 1),), {}, (aval_of(1.0),))], [x], []).verify()
    with pytest.raises(AssertionError, match="not in the graph"):
        Graph([x, y], [x], [z.out]).verify()
    with pytest.raises(AssertionError, match="bad input"):
        Graph([x, y, z], [y], [z.out]).verify()


def test_traced_graph_is_topologically_ordered_ssa(demo):
    forward, joint, optimized = _graphs(demo.f, (2.0,))
    for graph in (forward, joint, optimized):
        position = {node: i for i, node in enumerate(graph.nodes)}
        assert len(position) == len(graph.nodes)
        for node in graph.nodes:
            assert all(position[r.node] < position[node] for r in node.inputs)
    assert forward.nodes == joint.nodes[: len(forward.nodes)]  # reverse only appends
    assert {n.role for n in joint.nodes[len(forward.nodes):]} <= {"bwd", "const"}


# --- the listing -----------------------------------------------------------------------------


def test_listing_of_the_design_example(demo):
    assert str(gradgen.trace(demo.f, 2.0)) == (
        "{ lambda x:float .\n"
        "  y:float = mul x x   # demo.py:2\n"
        "  a:float = add y 1   # demo.py:3\n"
        "  b:float = mul y 2   # demo.py:4\n"
        "  c:float = add a b   # demo.py:5\n"
        "  in (c) }"
    )


def test_listing_shows_shapes_dtypes_and_attributes(demo):
    text = str(gradgen.trace(demo.g, np.ones(3), np.ones((3, 2), np.float32)))
    assert text.startswith("{ lambda x:f64[3], w:f32[3,2] .")
    assert re.search(r"^  h:f64\[2\] = matmul x w   # demo\.py:10$", text, re.MULTILINE)
    assert re.search(r"= sum\[axis=None, keepdims=False\] .*# demo\.py:11$", text, re.MULTILINE)


def test_listing_of_the_backward_marks_it_and_names_adjoints(demo):
    text = str(gradgen.trace(demo.f, 2.0, backward=True))
    lines = text.splitlines()
    assert "  y:float = mul x x   # demo.py:2" in lines
    backward = [line for line in lines if "(backward)" in line]
    assert backward and all(re.search(r"# demo\.py:\d \(backward\)$", b) for b in backward)
    assert any(line.startswith("  grad_y:float = ") for line in backward)
    assert any(line.startswith("  grad_x:float = ") for line in backward)
    assert lines[-1] == "  in (c, grad_x) }"


def test_listing_shows_guards(demo):
    text = str(gradgen.trace(demo.branchy, 2.0))
    assert re.search(r"^  guard \S+ == True   # demo\.py:15$", text, re.MULTILINE)
    text = str(gradgen.trace(demo.branchy, -2.0))
    assert re.search(r"^  guard \S+ == False   # demo\.py:15$", text, re.MULTILINE)


# --- DOT ------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(->)|([{}\[\];,=])|("(?:[^"\\]|\\.)*")|([A-Za-z_0-9.%]+))')


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        assert match, f"bad DOT near {text[pos:pos + 30]!r}"
        out.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
    return out


def _parse_dot(text: str) -> dict:
    """A checker for the DOT subset gradgen writes: statements, attributes, subgraphs."""
    toks = _tokens(text)
    info = {"clusters": {}, "nodes": set(), "edges": []}
    i = 0

    def expect(tok):
        nonlocal i
        assert toks[i] == tok, f"expected {tok!r}, got {toks[i]!r} at token {i}"
        i += 1

    def attrs() -> dict:
        nonlocal i
        expect("[")
        found = {}
        while toks[i] != "]":
            key = toks[i]
            i += 1
            expect("=")
            found[key] = toks[i]
            i += 1
            if toks[i] == ",":
                i += 1
        expect("]")
        return found

    def body(cluster):
        nonlocal i
        expect("{")
        while toks[i] != "}":
            head = toks[i]
            i += 1
            if head == "subgraph":
                name = toks[i]
                i += 1
                info["clusters"][name] = []
                body(name)
                continue
            if toks[i] == "=":
                i += 1
                value = toks[i]
                i += 1
                if head == "label" and cluster:
                    info["clusters"][cluster].insert(0, value)
            elif toks[i] == "->":
                i += 1
                target = toks[i]
                i += 1
                a = attrs() if toks[i] == "[" else {}
                info["edges"].append((head, target, a))
            elif toks[i] == "[":
                a = attrs()
                if head not in ("node", "edge", "graph"):
                    info["nodes"].add(head)
                    if cluster:
                        info["clusters"][cluster].append(head)
            expect(";")
        expect("}")

    expect("digraph")
    i += 1  # the graph's name
    body(None)
    assert i == len(toks), "text after the closing brace"
    return info


def test_to_dot_is_valid_dot_with_forward_and_backward_clusters(demo):
    graph = gradgen.trace(demo.f, 2.0, backward=True)
    text = graph.to_dot()
    info = _parse_dot(text)
    clusters = info["clusters"]
    assert set(clusters) == {"cluster_fwd", "cluster_bwd"}
    assert clusters["cluster_fwd"][0] == '"forward"'
    assert clusters["cluster_bwd"][0] == '"backward"'
    assert len(clusters["cluster_fwd"]) > 1 and len(clusters["cluster_bwd"]) > 1
    assert info["edges"]
    for source, target, attributes in info["edges"]:
        assert source in info["nodes"] and target in info["nodes"]
        assert re.fullmatch(r'"\d+"', attributes["label"])  # the output index
    assert "grad_y" in text and "y = mul" in text


def test_to_dot_of_a_forward_graph_has_no_backward_cluster(demo):
    info = _parse_dot(gradgen.trace(demo.f, 2.0).to_dot())
    assert set(info["clusters"]) == {"cluster_fwd"}


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_accepts_the_dot(demo):
    text = gradgen.trace(demo.g, np.ones(3), np.ones((3, 2)), backward=True).to_dot()
    result = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


# --- size: printing, DOT and verify never recurse on depth --------------------------------


def test_large_graph_listing_dot_and_verify_iterate():
    def chain(x):
        for _ in range(2000):
            x = np.sin(x) * 0.5 + x
        return x

    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        graph = gradgen.trace(chain, 0.1, backward=True, loops="unroll")  # every step a node
        graph.verify()
        text = str(graph)
        dot = graph.to_dot()
    finally:
        sys.setrecursionlimit(saved)
    assert text.count("\n") > 6000
    assert dot.count("->") > 6000
