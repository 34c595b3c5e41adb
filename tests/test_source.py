"""Source analysis: names, statements and branch tests of the user's lines, from the standard
library's ast, one traced function at a time, cached per file and refreshed when it changes."""

from __future__ import annotations

import ast
import bisect
import functools
import importlib.util
import inspect
import itertools
import linecache
import math
import os
import sys
import textwrap

import pytest

import gradgen
from gradgen import linemap, source
from gradgen.source import LineInfo


def _write(tmp_path, text: str, name: str = "user_mod"):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(text))
    linecache.checkcache(str(path))
    return str(path)


def _load(path: str):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(text: str) -> dict[int, LineInfo]:
    lines = textwrap.dedent(text).splitlines(True)
    table: dict[int, LineInfo] = {}
    linemap.line_table_of(linemap.parse_file(lines), lines, table)
    return table


def test_assignment_targets():
    table = _table("""\
        a = x * 2
        b, c = x, y
        d, *rest = xs
        e = f = x
        g += 1
        h: float = 2.0
        obj.attr = 3
        k[0] = 4
    """)
    assert table[1] == LineInfo(("a",), "a = x * 2")
    assert table[2].targets == ("b", "c")
    assert table[3].targets == ("d", "rest")
    assert table[4] == LineInfo((), "e = f = x")  # no one name for the value
    assert table[5].targets == ("g",)
    assert table[6].targets == ("h",)
    assert table[7].targets == table[8].targets == ()


def test_statements_span_their_lines_and_collapse_whitespace():
    table = _table("""\
        y = (a +
             b)   # note
        z = 1; w = z + 1
        if c: v = 2
        s = "é" + t
    """)
    assert table[1] == table[2] == LineInfo(("y",), "y = (a + b)")
    assert table[3] == LineInfo(("w",), "w = z + 1")  # the last statement of a line says
    assert table[4] == LineInfo((), "c", "c")  # after `if c:` on its line: the if's test
    assert table[5].statement == 's = "é" + t'


def test_branch_tests_keep_their_parentheses():
    table = _table("""\
        if (x > 0):
            pass
        elif (
            y < 1
        ):
            pass
        while n > 0:
            n -= 1
    """)
    assert table[1] == LineInfo((), "(x > 0)", "(x > 0)")
    assert table[3].condition == table[4].condition == "( y < 1 )"
    assert table[7].condition == "n > 0"
    assert table[8].targets == ("n",)


def test_only_the_traced_function_is_parsed(tmp_path):
    path = _write(tmp_path, """\
        import math


        def f(x):
            y = math.sin(x)
            z = y * y
            return z


        def broken(:
    """)
    lines = linecache.getlines(path)
    node = linemap.parse_def(lines, 4)
    assert node is not None and node.name == "f" and node.end_lineno == 7
    code = compile("".join(lines[:7]), path, "exec").co_consts
    f_code = next(c for c in code if inspect.iscode(c))
    table = source.analyse_code(f_code)
    assert table[5].targets == ("y",) and table[6].targets == ("z",)
    # a line outside the parsed functions falls back to the whole file (unparsable here)
    assert source.line_info(path, 1) == LineInfo((), "import math")


PLAIN_DEFS = [
    """\
    def f(x, y=2.0):
        a = x * (y + 1)
        b, c = a, a*a
        b += c
        d = e = b
        g = h(a,
              k = 3)
        m = [t*t for t in (a, b)]
        n = a if a < b else b
        p = a <= b
        q = (lambda u: u)(a)
        if (a > 0):
            r = a
        else: r = b
        for i in range(2):
            r = r - i
        return r
    """,
    """\
    def f(x):
        a = x  # a comment anywhere: every line is parsed as written
        return a
    """,
    """\
    def outer(x):
        def inner(y):
            z =  y   *   y
            return z
        w = inner(x)
        w //= 2
        return w
    """,
    """\
    def blocks(x):
        if x > 0:
            a = x
            b = a * 2
        else:
            a = -x
            b = a
        g = h(a,
              k = 3
        )
        c = [a, (b,
                 {x}), x]
        for i in range(3):
            c = c * i
            c = c - 1
        while b > 10:
            b = b / 2

        e = max(a,
                b)
        if e:
            e = e + 1
            e = e * 2

    """,
]


@pytest.mark.parametrize("text", PLAIN_DEFS)
def test_a_def_parsed_as_a_skeleton_gives_the_table_of_a_full_parse(text, monkeypatch):
    # One-line assignments are parsed as ``name = 0`` (linemap._skeleton): their targets,
    # statement texts and every other line must come out as a full parse gives them.
    lines = textwrap.dedent(text).splitlines(True)
    skeleton = linemap.parse_def(lines, 1)
    expected = _assert_read_as_a_full_parse(skeleton, lines, monkeypatch)
    if "#" not in text:
        assert skeleton.whole_lines  # the skeleton was used
    assert expected[3].statement in ("b, c = a, a*a", "z = y * y", "return a", "a = x")


def _assert_read_as_a_full_parse(node, lines: list[str], monkeypatch) -> dict[int, LineInfo]:
    """The def ``node`` read from ``lines`` gives the table, end line and block that the
    parser gives for every line of it (no skeleton: each statement as written); that table."""
    table: dict[int, LineInfo] = {}
    linemap.line_table_of([node], lines, table)
    monkeypatch.setattr(linemap, "_skeleton", lambda ls, first: (ls, {}))
    full = linemap.parse_def(lines, 1)
    expected: dict[int, LineInfo] = {}
    linemap.line_table_of([full], lines, expected)
    assert table == expected
    assert (node.end_lineno, linemap.block_end(lines, node)) == (
        full.end_lineno, linemap.block_end(lines, full))
    return expected


@pytest.mark.parametrize("text", PLAIN_DEFS)
@pytest.mark.parametrize("above", [0, 1, 2, 7])
@pytest.mark.parametrize("in_class", [False, True])
def test_a_skeleton_keeps_line_numbers_below_other_code(text, above, in_class):
    # The lines above the def (module code, a class header) are not parsed: the skeleton
    # holds their place, so the def's table says the file's own line numbers.
    body = textwrap.dedent(text)
    head = "".join(f"v{k} = {k}\n" for k in range(above))
    if in_class:
        head += "class K:\n"
        body = textwrap.indent(body, "    ")
    lines = (head + body).splitlines(True)
    first = head.count("\n") + 1
    skeleton = linemap.parse_def(lines, first)
    table: dict[int, LineInfo] = {}
    linemap.line_table_of([skeleton], lines, table)
    full = ast.parse("".join(lines)).body
    if in_class:
        full = full[-1].body
    expected: dict[int, LineInfo] = {}
    linemap.line_table_of(full[-1:], lines, expected)
    assert table == expected and min(table) > first
    assert (skeleton.lineno, skeleton.end_lineno) == (full[-1].lineno, full[-1].end_lineno)


def test_runs_of_assignments_across_blocks_keep_every_block():
    # A run that starts inside a block and goes on outside it is one placeholder; the
    # blocks it leaves still parse, and every line has its own targets.
    lines = textwrap.dedent("""\
        def f(x):
            for i in range(3):
                if x:
                    a = x
                    b = a
                c = b
            d = c
            if d:
                e = d
            return e
    """).splitlines(True)
    node = linemap.parse_def(lines, 1)
    table: dict[int, LineInfo] = {}
    linemap.line_table_of([node], lines, table)
    assert [table[k].targets for k in (4, 5, 6, 7, 9)] == [("a",), ("b",), ("c",), ("d",),
                                                           ("e",)]
    assert table[8].condition == "d" and table[10].statement == "return e"
    assert node.end_lineno == 10


def test_a_long_unrolled_def_gives_the_parser_almost_nothing():
    # One-line assignments are read from their text: the parser sees the def, one string
    # that holds the place of all of them (not a blank line each: the tokenizer takes half a
    # microsecond per line), and the return.
    body = "".join(f"    t{i} = math.sin(t{i - 1}) * {i}.5 + (t{i - 1} - 1.0)\n"
                   for i in range(1, 400))
    lines = f"def f(t0):\n{body}    return t399\n".splitlines(True)
    node = linemap.parse_def(lines, 1)
    assert [type(stmt).__name__ for stmt in node.body] == ["Expr", "Return"]
    assert (node.body[0].lineno, node.body[0].end_lineno) == (2, 400)
    assert (node.end_lineno, len(node.whole_lines)) == (401, 399)
    table: dict[int, LineInfo] = {}
    linemap.line_table_of([node], lines, table)
    assert table[2] == LineInfo(("t1",), "t1 = math.sin(t0) * 1.5 + (t0 - 1.0)")
    assert table[400].targets == ("t399",) and table[401].statement == "return t399"


def test_lambda_and_module_code_use_the_whole_file(tmp_path):
    path = _write(tmp_path, """\
        import math
        g = lambda x: math.sin(x) * 2
        h = 3
    """)
    module = _load(path)
    table = source.analyse_code(module.g.__code__)
    assert table[3].targets == ("h",)


@pytest.mark.parametrize("text", [
    """\
    def plain(x):
        return x * 2
    """,
    """\
    @staticmethod
    @functools.cache
    def decorated(x):
        y = x + 1

        return y
        # a trailing comment of the body
    # a comment at the margin
        # indented again

    z = 1
    """,
    """\
    def header(
        x,
        y,
    ):
        '''Doc.'''
        return (
            x + y
        )
    """,
    """\
    class K:
        def method(self, x):
            if x:
                return 1
            return 2

        def other(self):
            pass
    """,
])
def test_function_source_is_what_inspect_gives(tmp_path, text):
    path = _write(tmp_path, "import functools\n" + textwrap.dedent(text), "sourced")
    module = _load(path)
    functions = [v for v in vars(module).values() if inspect.isfunction(v)]
    for cls in [v for v in vars(module).values() if inspect.isclass(v)]:
        functions += [v for v in vars(cls).values() if inspect.isfunction(v)]
    for fn in functions:
        assert source.function_source(fn.__code__) == inspect.getsource(fn)


def test_one_line_def_and_lambda_are_left_to_inspect(tmp_path):
    path = _write(tmp_path, "def f(x): return x\ng = lambda x: x\n", "oneliners")
    module = _load(path)
    assert source.function_source(module.f.__code__) is None
    assert source.function_source(module.g.__code__) is None


def test_names_follow_an_edited_file(tmp_path):
    path = _write(tmp_path, """\
        def f(x):
            first = x * x
            return first + 1
    """, "edited")
    g = gradgen.grad(_load(path).f)
    g(2.0)
    assert "first = x * x" in g.source
    os.utime(path, ns=(1, 1))  # a different mtime, as an editor's save gives
    with open(path, "w") as file:
        file.write("def f(x):\n    second = x * x\n    return second + 1\n")
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    g = gradgen.grad(_load(path).f)
    g(2.0)
    assert "second = x * x" in g.source and "first" not in g.source


# --- names from the binding observer (no sys.settrace) ----------------------------------


def _halving(x):
    h = x
    for _ in range(3):
        h = h * 0.5
    return h


def _step(h, w):
    a = h * w
    return math.tanh(a)


def _stepping(x):
    h = x
    for _ in range(2):
        h = _step(h, x)
    return h


def _emitted_forward(fn, *args) -> list[str]:
    g = gradgen.value_and_grad(fn)
    g(*args)
    body = g.source.split(f"def {fn.__name__}_value_and_grad")[1]
    return [line.strip().split("  #")[0] for line in body.splitlines()[2:]
            if "  # test_source.py" in line and not line.strip().startswith("#")]


def test_a_loop_of_one_op_lines_versions_each_value():
    # the same line runs again with no other line between: its offset goes back
    assert _emitted_forward(_halving, 2.0) == ["h = x * 0.5", "h_1 = h * 0.5", "h_2 = h_1 * 0.5"]


def test_a_helper_called_in_a_loop_names_inner_and_outer_values():
    assert _emitted_forward(_stepping, 0.3) == [
        "a = x * x", "h = math.tanh(a)", "a_1 = h * x", "h_1 = math.tanh(a_1)"]


def test_names_do_not_need_the_trace_hook():
    # under coverage or a debugger (sys.settrace taken) values are named all the same
    previous = sys.gettrace()
    sys.settrace(lambda *args: None)
    try:
        names = _emitted_forward(_stepping, 0.3)
    finally:
        sys.settrace(previous)
    assert names == ["a = x * x", "h = math.tanh(a)", "a_1 = h * x", "h_1 = math.tanh(a_1)"]


def test_frame_line_of_a_long_function_is_f_lineno():
    seen = []

    def probe():
        caller = sys._getframe(1)
        seen.append((caller.f_lineno, source.frame_line(caller)))

    body = "".join(f"    a{i} = {i} * 2\n" + ("    probe()\n" if i % 250 == 0 else "")
                   for i in range(2_000))
    namespace = {"probe": probe}
    exec(compile(f"def long():\n{body}", "<long>", "exec"), namespace)  # noqa: S102
    namespace["long"]()
    assert len(namespace["long"].__code__.co_code) > source._LONG_CODE
    assert len(seen) == 8 and all(a == b for a, b in seen)


def _code_objects(module) -> list:
    """Every code object of a module's functions and classes, nested ones too."""
    found, pending = [], [v.__code__ for v in vars(module).values() if hasattr(v, "__code__")]
    pending += [f.__code__ for c in vars(module).values() if isinstance(c, type)
                for f in vars(c).values() if hasattr(f, "__code__")]
    while pending:
        code = pending.pop()
        found.append(code)
        pending += [c for c in code.co_consts if hasattr(c, "co_lines")]
    return found


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="co_lnotab is read up to 3.11")
def test_the_spans_of_lnotab_are_those_of_co_lines():
    """Every instruction co_lines gives a line lies in a span of that line; one it gives none
    (cleanup code, where no op is recorded) lies in the span of the line before, or of the
    def line. Taken from
    code with long jumps of offset and line (more than a byte's step) both ways."""
    text = "def jumps(x):\n" + "".join(
        f"    a{i} = x * {i}\n" + "\n" * (300 if i % 7 == 0 else 0)
        + (f"    a{i} = (x\n" + "\n" * 200 + f"        + {i})\n" if i % 5 == 0 else "")
        + (f"    for k in range({i}):\n        x = x + k\n" if i % 11 == 0 else "")
        for i in range(80)) + "    b = " + " + ".join(["x"] * 200) + "\n    return b\n"
    namespace: dict = {}
    exec(compile(text, "<jumps>", "exec"), namespace)  # noqa: S102
    table = namespace["jumps"].__code__.co_lnotab
    assert 0 in table[0::2] and 0 in table[1::2]  # steps written as several pairs, both ways
    codes = [namespace["jumps"].__code__, *_code_objects(ast), *_code_objects(inspect)]
    for code in codes:
        starts, lines = source._spans_of_lnotab(code)
        assert starts[0] == 0 and starts == sorted(set(starts))
        assert all(a != b for a, b in itertools.pairwise(lines))  # merged
        previous = code.co_firstlineno  # (cells made before the first line: the def's)
        for start, end, line in code.co_lines():
            k = bisect.bisect_right(starts, start) - 1
            assert k == bisect.bisect_right(starts, end - 1) - 1  # within one span
            assert lines[k] == (line if line is not None else previous), (code, start)
            previous = lines[k]


def _doubled(v):
    twice = v * 2
    return twice


def _outer_names_win(x):
    y = _doubled(x)
    z = _doubled(y) + 1
    return z


def test_the_callers_name_wins_over_the_helpers():
    # the helper's frame is resolved when it has returned, before its caller's line
    assert _emitted_forward(_outer_names_win, 1.5) == [
        "y = x * 2", "twice = y * 2", "z = twice + 1"]


def _names_by_inspect(fn, n: int, skip: int = 0) -> list[str]:
    params = list(inspect.signature(fn).parameters.values())[skip:]
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                   params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            names.append(f"{params[-1].name}_{i - len(params) + 1}")
        else:
            names.append(f"arg{i}")
    return names


def _shapes_of_parameters():
    def plain(a, b, c=1):
        pass

    def positional_only(a, /, b, *xs):
        pass

    def star_then_keyword(a, *xs, k):
        pass

    def keywords(a, *, k, **kw):
        return k, kw

    def everything(a, b, *args, c, d=2, **kw):
        local = a
        return local

    class Model:
        def method(self, x, y):
            pass

        def __call__(self, p, q):
            pass

    @functools.wraps(plain)
    def wrapper(*args, **kwargs):
        pass

    return [plain, positional_only, star_then_keyword, keywords, everything, Model().method,
            Model(), wrapper, functools.partial(plain, 1), lambda x, y: x]


@pytest.mark.parametrize("fn", _shapes_of_parameters())
def test_parameter_names_read_from_code_are_the_signatures(fn):
    for n in range(5):
        for skip in (0, 1):
            assert source.parameter_names(fn, n, skip) == _names_by_inspect(fn, n, skip)


def test_the_header_path_follows_the_working_directory(tmp_path, monkeypatch):
    """The generated module names the function's file relative to the working directory,
    or by its base name outside it; the answer is cached per (file, directory), so moving to
    another directory gives that directory's answer."""
    from gradgen.build import display_path

    sub = tmp_path / "pkg"
    sub.mkdir()
    path = sub / "model.py"
    path.write_text("def f(x):\n    y = x * x\n    return y\n")
    spec = importlib.util.spec_from_file_location("model_for_display_path", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    assert display_path(module.f) == os.path.join("pkg", "model.py")
    monkeypatch.chdir(sub)
    assert display_path(module.f) == "model.py"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert display_path(module.f) == "model.py"  # outside: the base name
    monkeypatch.chdir(tmp_path)
    assert display_path(module.f) == os.path.join("pkg", "model.py")
    assert source.SourceLoc(str(path), 2, "f").short == "model.py:2"


@pytest.mark.parametrize("path, cwd", [
    ("/a/b/c.py", "/a"), ("/a/b/c.py", "/a/b"), ("/a/b/c.py", "/x"), ("/a/b/c.py", "/"),
    ("/ab/c.py", "/a"), ("/a/b/c.py", "/a/"), ("/a/..b/c.py", "/a"), ("/a/./c.py", "/a"),
    ("/a/b/../c.py", "/a"), ("/a/b/c.py", "/a/b/.."), ("rel.py", "/a"), ("/a//b/c.py", "/a"),
])
def test_the_header_path_without_relpath_is_what_relpath_says(path, cwd):
    # A normalized absolute path is answered by comparing prefixes (os.path.relpath is a
    # first call's fixed cost); anything else asks relpath. Both say the same.
    from gradgen.build import _display_path

    rel = os.path.relpath(path, cwd)
    expected = os.path.basename(path) if rel.startswith("..") else rel
    assert _display_path.__wrapped__(path, cwd) == expected


@pytest.mark.parametrize("line", [
    "x = a + b", "  x=a", "x += 1", "x //= 2", "x **= 2", "x >>= 1", "x <<= 1", "x @= w",
    "x, y = y, x", "x ,y=y", "x == y", "x <= y", "x = y == z", "x = f(k=1)", "x: float = 1",
    "x = lambda: 1", "x = ", "x =  y", "x = = y", "x =\ty", "print(x)", "return x", "a = b = c",
    "if x:", "x = y[1:2]", "_x1 = 3", "1x = 2", "x.y = 1", "x[0] = 1",
])
def test_the_assignment_regex_reads_lines_as_the_backtracking_one_did(line):
    # _TARGETS uses possessive repeats (fewer instructions per line) and starts at a newline
    # (the regex engine skips to the next one); the targets it finds are the ones the
    # earlier pattern with backtracking repeats and ``^`` found, line by line.
    import re

    backtracking = re.compile(
        r"^[ \t]*(?:([A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*"
        r"(?:[-+*/%@&|^]|//|\*\*|>>|<<)?=(?!=)[ \t]*[^=:\s][^=:\n]*$)?", re.MULTILINE)
    text = f"{line}\n    {line}\n"
    assert linemap._assignment_targets(text) == backtracking.findall(text)


def test_the_assignment_regex_reads_any_text_as_the_one_anchored_at_line_starts():
    # Starting each match at the newline before its line (the engine skips to the next one)
    # finds, line by line, what ``^`` found trying every character.
    import random
    import re

    anchored = re.compile(
        r"^[ \t]*(?:([A-Za-z_]\w*+(?:[ \t]*+,[ \t]*+[A-Za-z_]\w*+)*+)[ \t]*+"
        r"(?:=|[-+*/%@&|^]=|//=|\*\*=|>>=|<<=)[ \t]*+[^=:\s][^=:\n]*+$)?", re.MULTILINE)
    pieces = ["x", "y1", "_", " ", "\t", "=", "+", ":", ",", "\n", "(", ")", "==", "\r",
              "\x0c", "é", "*", "//", "1", "<<", "@"]
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        assert linemap._assignment_targets(text) == anchored.findall(text), repr(text)


@pytest.mark.parametrize("text, straight", [
    ("def f(x, y):\n    a = x * y\n    b = a + 1\n    return b\n", True),
    ("def f(x: float, k=2) -> float:\n    a = x * k\n\n    pass\n    return a * (a + 1)\n", True),
    ("def f(x):\n    a = x\n    return (a +\n            1)\n", False),  # goes on below
    ("def f(x):\n    a = x\n    return  a   *\t2  \n", True),  # spaced as it comes
    ("def f(x):\n    a = x\n    pass\n    return\n", True),
    ("def f(x):\n    a = x\n\n    b = a\n    return b\n", True),  # a pass in place of each
    ("def f(x):\n    a = x\n    if a:\n        a = a + 1\n    return a\n", False),
    ("def f(x):\n    a = x\n    print(a)\n    return a\n", False),
    ("@staticmethod\ndef f(x):\n    a = x\n    return a\n", False),
    ("def f(\n    x,\n):\n    a = x\n    return a\n", False),
])
def test_a_straight_def_is_read_without_the_parser(text, straight, monkeypatch):
    # Header, one-line assignments, returns: the parser is not asked, and the table, the end
    # line and the block are what a full parse gives.
    lines = text.splitlines(True)
    calls = []
    parse = ast.parse
    monkeypatch.setattr(linemap.ast, "parse", lambda *a, **k: calls.append(1) or parse(*a, **k))
    node = linemap.parse_def(lines, 1)
    assert (not calls) is straight
    _assert_read_as_a_full_parse(node, lines, monkeypatch)


@pytest.mark.parametrize("data", [
    b"def f(x):\n    return x\n",
    b"def f(x):\r\n    y = x\r\n\r\n    return y",  # CRLF, no newline at the end
    b"a = 1\rb = 2\r",  # old Mac line ends
    b"s = '\x0c\xe2\x80\xa8'\nt = 1\n",  # form feed and a line separator: not line ends
    b"\xef\xbb\xbfx = 1\n",  # BOM: linecache reads it
    b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",  # a coding cookie: linecache reads it
    b"x = '\xe9'\n",  # not UTF-8: no lines, as linecache
    b"",
])
def test_file_lines_read_as_linecache_reads_them(tmp_path, data):
    path = tmp_path / "module.py"
    path.write_bytes(data)
    name = str(path)
    linecache.cache.pop(name, None)
    ours = source._getlines(name), linecache.cache.pop(name, None)
    assert ours == (linecache.getlines(name), linecache.cache.get(name))
