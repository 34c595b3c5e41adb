"""gradgen explain: the page's structure and links, the SVG layout, the CLI and the reprs.

The page in a real browser is tests/test_explain_browser.py.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest

import gradgen
from gradgen import explain
from gradgen.explainer.highlight import highlight_lines
from gradgen.explainer.svg import layout

from .conftest import EXAMPLES, ROOT, run_gradgen

sys.path.insert(0, EXAMPLES)
import itertools

import double_triple
import reused_value

VOID = {"meta", "br", "input", "img", "link", "path", "rect", "hr"}


class Element:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children: list[Element] = []
        self.text: list[str] = []

    def all_text(self) -> str:
        parts = list(self.text)
        stack = list(self.children)
        while stack:  # document order is not needed, only the words
            el = stack.pop()
            parts += el.text
            stack += el.children
        return "".join(parts)

    def content(self) -> str:
        """The text in document order."""
        out = []
        stack = [(self, 0)]
        while stack:
            el, i = stack.pop()
            if i == 0:
                out.append(el.text[0] if el.text else "")
            if i < len(el.children):
                stack.append((el, i + 1))
                stack.append((el.children[i], 0))
        return "".join(out)


class Tree(HTMLParser):
    """A strict little DOM: every non-void element must be closed by its own tag."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {}, None)
        self.at = self.root
        self.elements: list[Element] = []
        self.feed(text)
        self.close()
        assert self.at is self.root, f"<{self.at.tag}> is never closed"

    def handle_starttag(self, tag, attrs):
        el = Element(tag, attrs, self.at)
        self.at.children.append(el)
        self.elements.append(el)
        if tag not in VOID:
            self.at = el

    def handle_startendtag(self, tag, attrs):
        el = Element(tag, attrs, self.at)
        self.at.children.append(el)
        self.elements.append(el)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.at.tag == tag, f"</{tag}> closes <{self.at.tag}>"
        self.at = self.at.parent

    def handle_data(self, data):
        # text goes to the element it is in, kept in order with its children: a text run is
        # stored on the element as a child-less pseudo element
        el = Element("#text", {}, self.at)
        el.text.append(data)
        self.at.children.append(el)

    def find(self, **attrs) -> list[Element]:
        return [e for e in self.elements if all(
            (e.attrs.get(k.replace("_", "-")) == v if v is not True else
             k.replace("_", "-") in e.attrs) for k, v in attrs.items())]


def text_of(el: Element) -> str:
    return " ".join(el.content().split())


@pytest.fixture(scope="module")
def page() -> str:
    return explain(reused_value.f, 2.0)


@pytest.fixture(scope="module")
def tree(page) -> Tree:
    return Tree(page)


def keys(el: Element, attr: str) -> list[str]:
    return el.attrs.get(attr, "").split()


def test_page_parses_with_three_panes(tree):
    ids = {e.attrs.get("id") for e in tree.elements}
    assert {"pane-source", "pane-code", "pane-graph", "status", "theme"} <= ids
    assert [e.tag for e in tree.elements if e.tag in ("style", "script")] == ["style", "script"]
    assert len([e for e in tree.elements if e.tag == "svg"]) == 1
    (html_el,) = [e for e in tree.elements if e.tag == "html"]
    assert html_el.attrs["lang"] == "en"


def test_page_fetches_nothing(page, tree):
    for el in tree.elements:
        assert "src" not in el.attrs, f"<{el.tag} src=...> loads something"
        assert el.tag not in ("link", "img", "iframe", "object", "embed")
        href = el.attrs.get("href")
        assert href is None or href.startswith("#"), href
    assert "@import" not in page and "@font-face" not in page
    assert re.findall(r"url\(([^)]*)\)", page) == ["#explain-arrow"] * len(
        re.findall(r"url\(", page))
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"]
    assert "fetch(" not in page and "XMLHttpRequest" not in page


def test_every_link_points_at_a_shown_source_line(tree):
    lines = {e.attrs["data-key"] for e in tree.find(data_key=True)}
    assert {"0:4", "0:5", "0:6", "0:7", "0:8", "0:9"} <= lines
    linked = tree.find(data_lines=True) + tree.find(data_also=True)
    assert len(linked) > 20
    for el in linked:
        for key in keys(el, "data-lines") + keys(el, "data-also"):
            assert key in lines, f"{text_of(el)!r} links to {key}, which the page does not show"


def _selected(tree, key):
    """What selecting source line ``key`` lights up strongly: statements and graph nodes."""
    statements = [text_of(e) for e in tree.find(data_lines=True)
                  if key in keys(e, "data-lines") and "item" in e.attrs.get("class", "")]
    nodes = [e.attrs["aria-label"] for e in tree.find(data_lines=True)
             if key in keys(e, "data-lines") and e.tag == "g"]
    return statements, nodes


def test_selecting_y_line_links_the_fused_sum_and_the_y_node(tree):
    statements, nodes = _selected(tree, "0:5")
    assert any("y = x * x" in s and "reused_value.py:5" in s for s in statements)
    assert any(s.startswith("13 grad_y = grad_a + grad_b * 2.0") for s in statements), statements
    assert any(s.startswith("15 grad_x = 2.0 * (grad_y * x)") for s in statements)
    assert any(n.startswith("y = mul, float, forward, from reused_value.py:5") for n in nodes)
    assert any(n.startswith("grad_y = sum") for n in nodes), nodes
    # the fused sum relates to the two uses it combines
    (fused,) = [e for e in tree.find(data_lines=True) if "fused" in e.attrs.get("class", "")
                and "f_grad(" not in text_of(e)][:1]
    assert keys(fused, "data-also") == ["0:6", "0:7"]


def test_a_backward_statement_links_its_group_and_the_line_of_its_value(tree):
    (grad_a,) = [e for e in tree.find(data_lines=True)
                 if text_of(e).startswith("10 grad_a = grad_c")]
    assert keys(grad_a, "data-lines") == ["0:8"]  # the derivative of c = a + b
    assert keys(grad_a, "data-also") == ["0:6"]  # the adjoint of a, computed on line 6
    assert "d(u + v)/du = 1" in text_of(grad_a)  # the rule, as gradgen show prints it
    (rule,) = [e for e in grad_a.children[0].children if "rule" in e.attrs.get("class", "")]
    assert text_of(rule) == "# d(u + v)/du = 1"


def test_both_emitted_functions_are_tabs(tree):
    tabs = tree.find(role="tab")
    assert [text_of(t) for t in tabs] == ["f_grad", "f_value_and_grad"]
    panels = tree.find(role="tabpanel")
    assert ["hidden" in p.attrs for p in panels] == [False, True]
    assert all(t.attrs["aria-controls"] in {p.attrs["id"] for p in panels} for t in tabs)


def test_controls_are_focusable_and_labelled(tree):
    selectable = [e for e in tree.elements if "tabindex" in e.attrs]
    assert len(selectable) > 30
    for el in selectable:
        assert el.attrs.get("aria-label") or text_of(el), el.tag
    for group in tree.find(data_roving=True):
        assert group.attrs.get("role") == "group" and group.attrs.get("aria-label")
    pressed = [e for e in selectable if e.attrs.get("role") == "button" and e.tag != "button"]
    assert len(pressed) > 30 and all(e.attrs.get("aria-pressed") == "false" for e in pressed)
    for button in [e for e in tree.elements if e.tag == "button"]:
        assert text_of(button)


def _luminance(hex_colour: str) -> float:
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_colours_meet_wcag_aa_contrast(scheme):
    from gradgen.explainer.assets import CSS

    block = CSS.split(":root {")[1] if scheme == "light" else CSS.split(
        ':root[data-theme="dark"] {')[1]
    colours = dict(re.findall(r"--([\w-]+): (#[0-9a-f]{6})", block.split("}")[0]))
    for fg in ("fg", "muted", "kw", "str", "num", "bi", "com", "rule", "loc"):
        for bg in ("bg", "pane", "hl", "hl2"):
            ratio = _contrast(colours[fg], colours[bg])
            assert ratio >= 4.5, f"{scheme}: {fg} on {bg} has contrast {ratio:.2f}"
    for fill in ("fwd-fill", "bwd-fill"):
        assert _contrast(colours["fg"], colours[fill]) >= 4.5


def test_the_page_is_byte_stable():
    assert explain(reused_value.f, 2.0) == explain(reused_value.f, 2.0)


def test_svg_is_drawn_without_graphviz(tmp_path):
    """No `dot` on PATH: the page still has its drawing (laid out in Python)."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import shutil, reused_value;"
              "from gradgen import explain; assert shutil.which('dot') is None;"
              "page = explain(reused_value.f, 2.0); assert '<svg' in page and '<rect' in page;"
              "print(page.count('<g class=\"node'))")
    env = dict(os.environ, PATH=str(tmp_path), PYTHONPATH=os.path.join(ROOT, "src"))
    result = subprocess.run([sys.executable, "-c", script, EXAMPLES], env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 10


def test_function_banner_and_lines_outside_the_function():
    tree = Tree(explain(double_triple.f, 3.0))
    shown = {e.attrs["data-key"] for e in tree.find(data_key=True)}
    assert "0:14" in shown and "0:18" in shown  # the backward method and the function
    banner = [e for e in tree.elements if "item" in e.attrs.get("class", "")
              and "DoubleTriple.backward: grad1" in text_of(e) and "grad_a" not in text_of(e)]
    assert banner and all(keys(b, "data-lines") == ["0:14"] for b in banner)


def test_guards_link_to_their_condition(tmp_path):
    path = tmp_path / "guarded.py"
    path.write_text("import numpy as np\n\n\ndef f(x):\n    if x.sum() > 0:\n"
                    "        y = np.tanh(x)\n    else:\n        y = x\n    return np.sum(y * y)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import guarded
    finally:
        sys.path.remove(str(tmp_path))
    tree = Tree(explain(guarded.f, np.ones(3)))
    guards = [e for e in tree.elements if "guard" in e.attrs.get("class", "").split()
              and e.tag == "div"]
    assert guards and all(keys(g, "data-lines") == ["0:5"] for g in guards)
    assert "GuardFailure" in text_of(guards[0])
    nodes = [e for e in tree.find(data_lines="0:5") if e.tag == "g"]
    assert any("guard" in e.attrs["class"] for e in nodes)


def test_highlighter_keeps_the_text():
    source = gradgen.emit(reused_value.f, 2.0, annotate=True) + 's = """a\nb"""  # c\n'
    rows = highlight_lines(source)
    assert [html.unescape(re.sub(r"<[^>]+>", "", r)) for r in rows] == source.splitlines()
    assert '<span class="kw">def</span>' in rows[5]
    assert '<span class="com rule"># d(u + v)/dv = 1</span>' in "".join(rows)


def test_layout_rows_follow_edges_and_boxes_do_not_overlap():
    graph = gradgen.trace(reused_value.f, 2.0, backward=True)
    boxes, edges = layout(graph)
    for src, dst, _, _ in edges:
        assert src.row < dst.row or src.kind == "seed", (src.label, dst.label)
    by_row: dict = {}
    for box in boxes:
        by_row.setdefault((box.row, box.side), []).append(box)
    for row in by_row.values():
        row.sort(key=lambda b: b.x)
        for a, b in itertools.pairwise(row):
            assert a.x + a.width <= b.x, (a.label, b.label)
    fwd_right = max(b.x + b.width for b in boxes if b.side == "fwd")
    assert all(b.x > fwd_right for b in boxes if b.side == "bwd")


def test_a_deep_graph_is_drawn_without_recursion():
    """The page for a 400-step chain renders under a recursion limit of 120 frames above the
    test's own: nothing in it recurses on the graph's depth."""
    import inspect

    from gradgen.build import Request, build
    from gradgen.explainer.page import page_for_built

    def chain(x):
        for _ in range(400):
            x = np.sin(x)
        return x

    built = build(chain, (0.3,), Request(loops="unroll"), annotate=True)  # 400 nodes deep
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 120)
    try:
        page = page_for_built(built, chain)
    finally:
        sys.setrecursionlimit(limit)
    assert page.count('<g class="node') > 800


def test_cli_writes_the_page(tmp_path):
    out = tmp_path / "page.html"
    result = run_gradgen("explain", "examples/reused_value.py:f", "--args", "(2.0,)", "-o",
                         str(out))
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "grad_y = grad_a + grad_b" in html.unescape(
        re.sub(r"<[^>]+>", "", text))
    assert "gradgen emit examples/reused_value.py:f --args &quot;(2.0,)&quot;" in text


def test_cli_prints_the_page_and_reports_errors():
    result = run_gradgen("explain", "examples/add_mul.py:f", "--args", "(2.0, 3.0, 4.0)",
                         "--argnums", "0,1,2")
    assert result.returncode == 0 and result.stdout.startswith("<!DOCTYPE html>")
    assert "the gradient with respect to a, b, d" in result.stdout
    bad = run_gradgen("explain", "nope.py:f", "--args", "(1.0,)")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "gradgen: error: nope.py: no such file"


def test_grad_repr_html_embeds_the_page_after_a_call():
    df = gradgen.grad(reused_value.f)
    assert df._repr_html_() is None  # nothing compiled yet: the plain repr shows
    assert df(2.0) == 12.0  # f = 3 x**2 + 1
    frame = df._repr_html_()
    assert frame.startswith("<iframe") and 'sandbox="allow-scripts"' in frame
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', frame)[1])
    assert inner == explain(reused_value.f, 2.0)
    vg = gradgen.value_and_grad(reused_value.f)
    vg(2.0)
    assert "f_value_and_grad" in html.unescape(vg._repr_html_())
    hess = gradgen.hessian(reused_value.f)
    assert hess(2.0) == 6.0
    assert "the Hessian with respect to x" in html.unescape(hess._repr_html_())


def test_graph_repr_html_is_svg_and_listing():
    graph = gradgen.trace(reused_value.f, 2.0, backward=True)
    text = graph._repr_html_()
    tree = Tree(text)
    assert [e.tag for e in tree.elements].count("svg") == 1
    (pre,) = [e for e in tree.elements if e.tag == "pre"]
    assert text_of(pre).startswith("{ lambda x:float .")
    scope = tree.elements[0].attrs["id"]
    assert all(rule.startswith((f"#{scope}", "@media"))
               for rule in re.findall(r"^(\S.*?) \{", tree.elements[1].content(), re.MULTILINE))
    forward = gradgen.trace(reused_value.f, 2.0)
    assert "bwd" not in forward._repr_html_().split("<pre>")[0].split("<svg")[1]


def test_importing_gradgen_does_not_load_the_page_code():
    script = ("import sys, gradgen; print(any(m.startswith('gradgen.explainer') for m in "
              "sys.modules)); gradgen.grad(lambda x: x * x)(1.0);"
              "print(any(m.startswith('gradgen.explainer') for m in sys.modules));"
              "import gradgen.explainer.svg; print(callable(gradgen.explain))")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, check=False)
    assert result.stdout.split() == ["False", "False", "True"], result.stderr


def test_a_vjp_page_links_its_backward_without_a_seed():
    import mm

    tree = Tree(explain(mm.f, np.array([[2.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]),
                        vjp=True))
    statements, _nodes = _selected(tree, "0:5")
    assert any(s.startswith("14 grad_x = cotangent @ M.T") for s in statements), statements
    assert any(s.startswith("15 grad_M = x.T @ cotangent") for s in statements)
    (cotangent,) = [e for e in tree.elements if e.tag == "g"
                    and e.attrs["aria-label"].startswith("grad_y, f64[1,2]")]
    assert "bwd" in cotangent.attrs["class"].split()  # it starts the backward column


def test_leaves_of_a_dict_argument_link_to_the_def_line():
    def loss(params, x):
        h = np.tanh(x @ params["W"])
        return np.sum(h * params["b"])

    tree = Tree(explain(loss, {"W": np.ones((3, 2)), "b": np.ones(2)}, np.ones((4, 3))))
    def_key = next(e.attrs["data-key"] for e in tree.find(data_key=True)
                   if "def loss(params, x):" in e.attrs.get("aria-label", ""))
    unpacked = [text_of(e) for e in tree.find(data_lines=def_key) if e.tag == "div"]
    assert any('W = params["W"]' in t for t in unpacked), unpacked
    assert any("grad_W" in t or "def loss_grad" in t for t in unpacked)


def test_a_function_without_source_still_gets_a_page():
    namespace: dict = {}
    exec("def f(x):\n    y = x * x\n    return y + 1\n", namespace)  # noqa: S102
    tree = Tree(explain(namespace["f"], 2.0))
    assert not tree.find(data_key=True)
    assert "The source of f is not available" in text_of(tree.root)
    assert [text_of(t) for t in tree.find(role="tab")] == ["f_grad", "f_value_and_grad"]
