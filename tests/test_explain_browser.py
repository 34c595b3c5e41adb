"""The explain page in a real browser: headless Chromium clicks, types and takes screenshots.

Run alone with ``python -m pytest -q tests/test_explain_browser.py``; it skips, saying why,
where Chromium is missing (``apt-get install chromium``, or GRADGEN_INSTALL_CHROMIUM=1 to let
the test install it). Screenshots go to GRADGEN_SCREENSHOTS (a directory) when it is set, to
pytest's temporary directory otherwise.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from .chromium import Browser, find_chromium
from .conftest import ROOT, run_gradgen

LIGHT_HL, DARK_HL, DARK_BG = "#fff1a8", "#3a2e00", "#0d1117"


@pytest.fixture(scope="module")
def chromium():
    path, why = find_chromium()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="module")
def page_url(tmp_path_factory):
    """The newcomer's command, as the issue's 'done' says: explain reused_value.py's f."""
    out = tmp_path_factory.mktemp("explain") / "page.html"
    result = run_gradgen("explain", "examples/reused_value.py:f", "--args", "(2.0,)", "-o",
                         str(out))
    assert result.returncode == 0, result.stderr
    return out.as_uri()


@pytest.fixture
def shots(tmp_path):
    where = os.environ.get("GRADGEN_SCREENSHOTS")
    if where:
        os.makedirs(where, exist_ok=True)
        return where
    return str(tmp_path)


HIGHLIGHTED = """Array.prototype.map.call(document.querySelectorAll(".hl"), function (e) {
  return (e.getAttribute("aria-label") || e.textContent).replace(/\\s+/g, " ").trim(); })"""


def test_clicking_y_lights_the_fused_sum_and_the_y_node(chromium, page_url, shots):
    with Browser(chromium, page_url) as page:
        page.resize(1280, 900)
        page.colour_scheme("light")
        page.click('[data-key="0:5"]')
        lit = page.evaluate(HIGHLIGHTED)
        assert page.evaluate('document.body.getAttribute("data-selected")') == "0:5"
        pressed = "document.querySelectorAll('[aria-pressed=\"true\"]:not(#fit)').length"
        assert page.evaluate(pressed) == 1
        assert "fused sum: grad_y = grad_a + grad_b * 2.0 # d(u * v)/du = v" in lit, lit
        assert any(t.startswith("y = mul, float, forward") for t in lit), lit
        assert any(t.startswith("forward statement: y = x * x") for t in lit), lit
        assert not any("c = a + b" in t for t in lit), lit
        status = page.evaluate('document.getElementById("status").textContent')
        assert status.startswith("line 5 (y = x * x): 1 forward and 4 backward statements")
        # the statement is visible and painted in the highlight colour
        visible = page.evaluate(
            "(function () { var e = document.querySelector('#panel-0 .item.fused');"
            "var r = e.getBoundingClientRect(); return r.width > 0 && r.bottom <= innerHeight &&"
            " getComputedStyle(e).backgroundColor; })()")
        assert visible == "rgb(255, 241, 168)"
        png = page.screenshot(os.path.join(shots, "explain-1280-light.png"))
        seen = page.pixels(png, {"hl": LIGHT_HL})
    assert (seen["width"], seen["height"]) == (1280, 900)
    assert seen["content"] > 0.15 and seen["colours"] > 200, seen
    assert seen["hits"]["hl"] > 5000, seen  # the lit source line, statements and legend


def test_selecting_a_statement_or_a_node_shows_its_line(chromium, page_url):
    with Browser(chromium, page_url) as page:
        page.resize(1280, 900)
        page.click("#panel-0 .item.fused")
        assert page.evaluate('document.querySelector(\'[data-key="0:5"]\').className') == (
            "ln linked hl")
        page.click('g.node[aria-label^="c = add"]')
        assert page.evaluate('document.body.getAttribute("data-selected")') == "0:8"
        assert "hl" in page.evaluate('document.querySelector(\'[data-key="0:8"]\').className')


def test_the_keyboard_reaches_everything(chromium, page_url):
    with Browser(chromium, page_url) as page:
        page.resize(1280, 900)
        page.evaluate('document.querySelector(\'[data-key="0:4"]\').focus()')
        assert page.evaluate('document.body.getAttribute("data-selected")') == "0:4"
        page.key("ArrowDown", "ArrowDown", 40)
        assert page.evaluate("document.activeElement.getAttribute('data-key')") == "0:5"
        assert page.evaluate('document.body.getAttribute("data-selected")') == "0:5"
        # tabs: the second emitted function, with the forward statements
        page.click("#tab-1")
        assert page.evaluate("document.getElementById('panel-1').hidden") is False
        assert page.evaluate("document.getElementById('panel-0').hidden") is True
        # Tab moves between one stop per list and the buttons, never into a dead end
        stops = page.evaluate("""Array.prototype.filter.call(
            document.querySelectorAll('[tabindex="0"], button'),
            function (e) { return !e.closest('[hidden]'); }).length""")
        assert stops >= 5


def test_phone_width_and_dark_scheme(chromium, page_url, shots):
    with Browser(chromium, page_url + "#select=0:5") as page:
        page.resize(390, 844, mobile=True)
        page.colour_scheme("dark")
        page.wait_for('document.body.getAttribute("data-selected") === "0:5"')
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        columns = page.evaluate(
            "getComputedStyle(document.querySelector('.panes')).gridTemplateColumns")
        assert len(columns.split()) == 1, columns
        png = page.screenshot(os.path.join(shots, "explain-390-dark.png"))
        seen = page.pixels(png, {"bg": DARK_BG, "hl": DARK_HL})
        page.evaluate("document.getElementById('theme').click()")  # auto -> light
        assert page.evaluate("document.documentElement.getAttribute('data-theme')") == "light"
    assert (seen["width"], seen["height"]) == (390, 844)
    assert seen["hits"]["bg"] > 0.3 * 390 * 844, seen  # dark, not a white page
    assert seen["hits"]["hl"] > 500 and seen["colours"] > 100, seen


def test_the_notebook_view_works_inside_its_iframe(chromium, tmp_path, shots):
    """What a notebook shows after ``df(2.0)``: the page in a sandboxed iframe, its script
    running there. A click where line 5 is paints the highlight inside the frame."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import reused_value
    finally:
        sys.path.pop(0)
    import gradgen

    df = gradgen.grad(reused_value.f)
    df(2.0)
    host = tmp_path / "notebook.html"
    host.write_text('<!DOCTYPE html><html><body style="margin: 0; background: #fff">'
                    f'<div style="width: 1000px">{df._repr_html_()}</div></body></html>')
    standalone = tmp_path / "page.html"
    standalone.write_text(gradgen.explain(reused_value.f, 2.0))
    with Browser(chromium, standalone.as_uri()) as page:  # where line 5 is, frame-relative
        page.resize(998, 638)
        page.colour_scheme("light")
        x, y = page.evaluate("(function () { var r = document.querySelector("
                             "'[data-key=\"0:5\"]').getBoundingClientRect();"
                             "return [r.left + 40, r.top + r.height / 2]; })()")
    with Browser(chromium, host.as_uri()) as page:
        page.resize(1000, 700)
        page.colour_scheme("light")
        for _ in range(100):  # the frame paints after its parent's load event
            before = page.pixels(page.screenshot(os.path.join(shots, "notebook-before.png")),
                                 {"hl": LIGHT_HL})
            if before["content"] > 0.1:
                break
            time.sleep(0.1)
        for kind in ("mousePressed", "mouseReleased"):  # 1 px: the iframe's border
            page.call("Input.dispatchMouseEvent", type=kind, x=x + 1, y=y + 1, button="left",
                      clickCount=1)
        for _ in range(100):
            after = page.pixels(page.screenshot(os.path.join(shots, "notebook-after.png")),
                                {"hl": LIGHT_HL})
            if after["hits"]["hl"] > before["hits"]["hl"] + 3000:
                break
            time.sleep(0.1)
    assert before["content"] > 0.1, before  # the frame shows the page, not a blank box
    assert after["hits"]["hl"] > before["hits"]["hl"] + 3000, (before, after)
