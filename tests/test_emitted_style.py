"""The emitted modules' style: ruff-clean (default rules, line length 100) and exactly what
``ruff format`` writes, for a corpus of varied user functions; importing only math and numpy.

Long statements are wrapped by gradgen.layout the way ruff format would; a seeded batch of
random long statements checks that layout against ruff itself."""

from __future__ import annotations

import ast
import math
import random
import re
import subprocess

import numpy as np
import pytest

import gradgen
from gradgen import layout

from .conftest import RUFF

needs_ruff = pytest.mark.skipif(
    RUFF is None, reason="ruff is not installed (pip install ruff, or the 'test' extra); "
    "the emitted modules' style cannot be checked without it")


# --- the corpus: plain user-style functions -------------------------------------------------


def scalar_math(x, y):
    z = x * x * y + 3.0 * x - y / 2.0
    return z * z


def trig_exp_log(x):
    a = math.sin(x) * math.cos(x)
    b = math.exp(-x * x) + math.log(1.0 + x * x)
    return a * b + math.sqrt(x * x + 1.0) + math.tanh(x)


def long_expression(a, b, c, d):
    return ((a * b + b * c + c * d + d * a) * (a - b) * (c - d)
            + math.sin(a * b * c * d) * math.cos(a + b + c + d)
            + math.exp(a / (1.0 + b * b)) * math.log(2.0 + c * c + d * d) + (a + b + c + d) ** 3)


def broadcasting(x, w, b):
    h = x * w + b
    return np.sum(h * h) + np.mean(np.tanh(h))


def mlp(W1, b1, W2, x):
    h = np.tanh(x @ W1 + b1)
    out = h @ W2
    return np.mean(out**2)


def reductions(x):
    s = np.sum(x, axis=0)
    m = np.mean(x, axis=1, keepdims=True)
    return np.sum(s * s) + np.sum((x - m) ** 2)


def loop_with_guards(x, n):
    y = x
    for _ in range(n):
        if y > 1.0:
            y = y * 0.5
        else:
            y = y * y + 1.0
    return y


def while_loop(x):
    y = x
    while y < 10.0:
        y = y * 1.5 + 0.1
    return y


def branchy(x):
    if x > 0:
        return x * x
    else:
        return -x


def pytree_loss(params, x, y):
    h = np.tanh(x @ params["W"] + params["b"])
    pred = h @ params["v"]
    return np.mean((pred - y) ** 2) + 0.01 * np.sum(params["W"] ** 2)


class Square(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_values
        return 2.0 * x * g


def with_function(x):
    return np.sum(Square.apply(x) * 3.0)


def pair(x, y):
    return x * y, np.sin(x) + y


def named(x):
    y = x * x
    z = math.sin(y)
    return z + y


def softmax_pick(logits):
    shifted = logits - np.mean(logits)
    e = np.exp(shifted)
    p = e / np.sum(e)
    return -np.log(p[2])


def many_args(a, b, c, d, e, f, g, h):
    return a * b + c * d + e * f + g * h + a * c * e * g + b * d * f * h


def float32_sines(x, w):
    return np.sum(np.sin(x * w) ** 2)


def kinks(x):
    return np.sum(np.abs(x) + np.maximum(x, 0.0) + np.minimum(x, 0.5))


def long_names(learning_rate_parameter, regularization_strength, momentum_coefficient, xx):
    return learning_rate_parameter * regularization_strength * momentum_coefficient * xx


def wide_pytree(params, x):
    first = np.sum(params["layer_one_weights"] * x)
    second = np.sum(params["layer_two_weights"] ** 2)
    return first + second + params["scale_factor_value"] * np.sum(x)


def constant_weights(x):
    w = np.array([0.123456789, 1.23456789, 2.3456789, 3.456789, 4.56789, 5.6789, 6.789, 7.89])
    return np.sum(x * w)


def powers(x, y):
    return -x**2 + 1e20 * y + x**-1.5 + (x + y) ** 3 + math.sin(x) ** 2


def scalar_kinks(x):
    return math.fabs(x) * 2.0 + abs(x)


def stacked_slices(x, y):
    s = np.stack([x * y, x + y, x - y, x * x, y * y, x * y * x * y])
    return np.sum(s**2) + np.sum(x[1:-1] * y[::2][:1]) + x[0] * y[-1]


def list_argument(xs):
    return xs[0] * xs[1] + xs[2] ** 2


def log_of_sum(x):
    return np.sum(np.log(x + 1.0))


def string_attributes(x, A):
    # strings in the printed calls come out in double quotes, as ruff format writes them
    total = np.einsum("ij,j->", A, x) + np.linalg.norm(A, "fro")
    return total + np.sum(np.sort(x, kind="stable") * np.pad(x, 1, mode="reflect")[1:-1])


_rng = np.random.default_rng(0)


def _a(*shape, dtype=np.float64):
    return _rng.uniform(0.5, 1.5, size=shape).astype(dtype)


# (id, function, example arguments, gradgen.emit keywords)
CORPUS = [
    ("scalar_math", scalar_math, (1.5, 2.0), {"argnums": (0, 1)}),
    ("trig_exp_log", trig_exp_log, (0.7,), {}),
    ("long_expression", long_expression, (0.3, 0.4, 0.5, 0.6), {"argnums": (0, 1, 2, 3)}),
    ("broadcasting", broadcasting, (_a(4, 3), _a(3), _a(1, 3)), {"argnums": (0, 1, 2)}),
    ("mlp", mlp, (_a(3, 5), _a(5), _a(5, 2), _a(4, 3)), {"argnums": (0, 1, 2)}),
    ("reductions", reductions, (_a(3, 4),), {}),
    ("loop_with_guards", loop_with_guards, (3.0, 4), {}),
    ("while_loop", while_loop, (1.0,), {}),
    ("branchy", branchy, (1.0,), {}),
    ("pytree_loss", pytree_loss, ({"W": _a(3, 4), "b": _a(4), "v": _a(4)}, _a(5, 3), _a(5)), {}),
    ("function", with_function, (_a(3),), {}),
    ("vjp", pair, (_a(3), _a(3)), {"vjp": True}),
    ("intermediates", named, (0.8,), {"intermediates": ("y", "z")}),
    ("softmax_pick", softmax_pick, (_a(5),), {}),
    ("many_args", many_args, tuple(float(v) for v in _a(8)), {"argnums": tuple(range(8))}),
    ("float32", float32_sines, (_a(4, dtype=np.float32), _a(4, dtype=np.float32)),
     {"argnums": (0, 1)}),
    ("kinks", kinks, (_a(5) - 1.0,), {}),
    ("long_names", long_names, (1.0, 2.0, 3.0, 4.0), {"argnums": (0, 1, 2, 3)}),
    ("wide_pytree", wide_pytree, ({"layer_one_weights": _a(3), "layer_two_weights": _a(3),
                                   "scale_factor_value": 1.5}, _a(3)), {}),
    ("constant_weights", constant_weights, (_a(8),), {}),
    ("powers", powers, (1.2, 0.7), {"argnums": (0, 1)}),
    ("scalar_kinks", scalar_kinks, (-0.5,), {}),
    ("stacked_slices", stacked_slices, (_a(6), _a(6)), {"argnums": (0, 1)}),
    ("list_argument", list_argument, ([1.0, 2.0, 3.0],), {}),
    ("check_finite", log_of_sum, (_a(4),), {"check_finite": True}),
    ("string_attributes", string_attributes, (_a(3), _a(2, 3)), {"argnums": (0, 1)}),
]
IDS = [c[0] for c in CORPUS]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> dict:
    """Every corpus module written to one directory: {id: (path, source)}."""
    directory = tmp_path_factory.mktemp("emitted")
    out = {}
    for name, fn, args, kwargs in CORPUS:
        source = gradgen.emit(fn, *args, **kwargs)
        path = directory / f"{name}.py"
        path.write_text(source)
        out[name] = (path, source)
    return out


def _ruff(*args, cwd, target=".") -> subprocess.CompletedProcess:
    return subprocess.run([RUFF, *args, "--isolated", "--no-cache", "--line-length", "100", target],
                          cwd=cwd, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def ruff_results(emitted) -> dict:
    """One ``ruff check`` and one ``ruff format --check`` over the whole corpus, split per file."""
    directory = next(iter(emitted.values()))[0].parent
    check = _ruff("check", "--output-format", "concise", cwd=directory)
    fmt = _ruff("format", "--check", "--diff", cwd=directory)
    return {"check": check, "format": fmt}


def _problems_for(name: str, output: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(rf"\b{re.escape(name)}\.py\b", line)]


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) >= 15
    kinds = {k for _, _, _, kwargs in CORPUS for k in kwargs}
    assert {"argnums", "vjp", "intermediates"} <= kinds


@needs_ruff
@pytest.mark.parametrize("name", IDS)
def test_emitted_module_passes_ruff_check(name, emitted, ruff_results):
    result = ruff_results["check"]
    assert result.returncode in (0, 1), result.stderr
    assert not _problems_for(name, result.stdout), result.stdout


@needs_ruff
@pytest.mark.parametrize("name", IDS)
def test_emitted_module_is_ruff_formatted(name, emitted, ruff_results):
    result = ruff_results["format"]
    assert result.returncode in (0, 1), result.stderr
    diff = result.stdout + result.stderr
    assert f"{name}.py" not in diff, diff


@pytest.mark.parametrize("name", IDS)
def test_emitted_module_imports_only_math_and_numpy(name, emitted):
    tree = ast.parse(emitted[name][1])
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imported.add(alias.name)
                if alias.name == "numpy":
                    assert alias.asname == "np"
    assert imported <= {"math", "numpy"}


def test_long_statements_are_wrapped_not_left_long(emitted):
    """The corpus has statements far past 100 columns; in the modules only comments are."""
    for name, (_, source) in emitted.items():
        for line in source.splitlines():
            if len(line) > 100:
                assert line.lstrip().startswith("#"), (name, line)
    long_names = emitted["long_names"][1]
    assert "def long_names_value_and_grad(\n    learning_rate_parameter," in long_names
    wide = emitted["wide_pytree"][1]
    assert '    return {\n        "layer_one_weights": grad_layer_one_weights,\n' in wide


def test_printer_writes_what_ruff_keeps(emitted):
    powers_source = emitted["powers"][1]
    assert "-(x**2)" in powers_source and "1e20" in powers_source
    assert "1e+20" not in powers_source
    # the derivative of abs(x) is sign(x), named for what it holds (not grad_: no adjoint)
    assert "sign_x = (x > 0) - (x < 0)" in emitted["scalar_kinks"][1]
    assert "grad_sign_x" not in emitted["scalar_kinks"][1]


@pytest.mark.parametrize("name", ["powers", "scalar_kinks", "long_names", "wide_pytree",
                                  "constant_weights", "stacked_slices"])
def test_wrapped_modules_still_compute_the_gradient(name, emitted):
    _, fn, args, kwargs = next(c for c in CORPUS if c[0] == name)
    namespace: dict = {"__name__": "emitted"}
    exec(compile(emitted[name][1], f"{name}.py", "exec"), namespace)  # noqa: S102
    got = namespace[f"{fn.__name__}_grad"](*args)
    want = gradgen.grad(fn, kwargs.get("argnums", 0))(*args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        if isinstance(w, dict):
            assert g.keys() == w.keys()
            for key in w:
                np.testing.assert_allclose(g[key], w[key], rtol=1e-12)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-12)


# --- gradgen.layout against ruff itself, on random long statements ----------------------------


def _random_statements(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)

    def name():
        return rng.choice(["x", "grad", "tmp", "w", "params", "h"]) + (
            "_" + "v" * rng.randint(1, 30) if rng.random() < 0.6 else "")

    def expr(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.25:
            return name() if rng.random() < 0.8 else rng.choice(["2", "0.5", "1e-05", "100"])
        if r < 0.45:
            op = rng.choice(["+", "-", "*", "/", "@", "**"])
            return f"({expr(depth + 1)}) {op} ({expr(depth + 1)})"
        if r < 0.6:
            fn = rng.choice(["np.sum", "np.cos", "math.exp", "np.stack", "float", "np.zeros"])
            args = [expr(depth + 1) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.3:
                args.append("axis=" + rng.choice(["0", "(0, 1)"]))
            return f"{fn}({', '.join(args)})"
        if r < 0.68:
            return f"-({expr(depth + 1)})"
        if r < 0.75:
            return f"{name()}[{rng.choice(['0', '1:3', '::2', '1:-1', '0, 1'])}]"
        if r < 0.85:
            return "[" + ", ".join(expr(depth + 1) for _ in range(rng.randint(1, 5))) + "]"
        if r < 0.9:
            items = (f'"{name()}": {expr(depth + 1)}' for _ in range(rng.randint(1, 4)))
            return "{" + ", ".join(items) + "}"
        return f"({expr(depth + 1)}) {rng.choice(['>', '<'])} ({expr(depth + 1)})"

    out = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.55:
            text = f"{name()} = {expr()}"
        elif kind < 0.8:
            text = "return " + ", ".join(expr() for _ in range(rng.choice([1, 2, 2, 3])))
        else:
            text = f"if not ({expr()}) > 0:"
        if rng.random() < 0.7:  # minimal parentheses, as gradgen's printers write them
            text = ast.unparse(ast.parse(text + ("\n    pass" if text.endswith(":") else "")))
            text = text.split("\n")[0]
        out.append(text)
    return out


@needs_ruff
def test_layout_matches_ruff_format_on_random_statements(tmp_path):
    # Canonical one-line forms first: ruff itself at its widest line length.
    raw = tmp_path / "raw.py"
    statements = _random_statements(300, seed=20240611)
    raw.write_text("def f():\n" + "".join(
        f"    {s}\n" + ("        pass\n" if s.endswith(":") else "") for s in statements))
    subprocess.run([RUFF, "format", "--isolated", "--no-cache", "-q", "--line-length", "320",
                    str(raw)], check=True)
    text = raw.read_text()
    lines = text.splitlines()
    one_line = [lines[s.lineno - 1][4:] for s in ast.parse(text).body[0].body
                if (s.test if isinstance(s, ast.If) else s).end_lineno == s.lineno]
    rng = random.Random(7)
    out = ["def f():"]
    wrapped = 0
    for line in one_line:
        comment = f"# model.py:{rng.randint(1, 999)}" if rng.random() < 0.3 and not (
            line.startswith("if ")) else ""
        laid_out = layout.statement(line, 1, comment)
        wrapped += "\n" in laid_out
        block = "\n    pass" if line.endswith(":") else ""
        assert ast.dump(ast.parse(laid_out + block)) == ast.dump(ast.parse(line + block))
        out += ["    " + part for part in laid_out.split("\n")]
        if line.endswith(":"):
            out.append("        pass")
    assert wrapped > 50  # the batch really exercises the line breaking
    mine = tmp_path / "mine.py"
    mine.write_text("\n".join(out) + "\n")
    result = _ruff("format", "--check", "--diff", cwd=tmp_path, target="mine.py")
    assert result.returncode == 0, result.stdout[:5000]


def _random_chains(count: int, seed: int) -> list[str]:
    """Long assignments of arithmetic chains, as the backward of unrolled code prints them:
    names, numbers, calls, groups, subscripts and powers joined by + - * / @."""
    rng = random.Random(seed)

    def operand(depth):
        r = rng.random()
        name = rng.choice(["grad_t", "t", "sqrt_t", "exp_t", "x_head"]) + str(rng.randint(1, 99999))
        if depth > 1 or r < 0.45:
            return name if rng.random() < 0.85 else rng.choice(["2.0", "0.5", "3"])
        if r < 0.6:
            return f"{rng.choice(['math.cos', 'math.exp', 'np.sum'])}({operand(depth + 1)})"
        if r < 0.72:
            return f"({chain(depth + 1, rng.randint(2, 3))})"
        if r < 0.8:
            return f"{name}[{rng.choice(['1:', ':-1', '0'])}]"
        if r < 0.9:
            return f"{name}**2"
        return f"-{name}"

    def chain(depth, terms):  # (inside a group)
        text = operand(depth)
        for _ in range(terms - 1):
            text += f" {rng.choice(['+', '-', '*', '/', '*', '@'])} {operand(depth)}"
        return text

    out = []
    for _ in range(count):
        target = rng.choice(["grad_t", "t", "grad_x_head"]) + str(rng.randint(1, 99999))
        longest = 92 if rng.random() < 0.7 else 200  # most fit on a line in parentheses
        value = ""
        while not 94 - len(target) <= len(value) <= longest:
            value = operand(0)
            while len(value) < 94 - len(target):
                value += f" {rng.choice(['+', '-', '*', '/', '*', '@'])} {operand(0)}"
        out.append(ast.unparse(ast.parse(f"{target} = {value}")))  # minimal parentheses
    return out


def _one_line_forms(tmp_path, chains: list[str]) -> list[str]:
    """The chains as ruff writes them on one line (its canonical spacing and parentheses)."""
    raw = tmp_path / "raw.py"
    raw.write_text("def f():\n" + "".join(f"    {s}\n" for s in chains))
    subprocess.run([RUFF, "format", "--isolated", "--no-cache", "-q", "--line-length", "320",
                    str(raw)], check=True)
    text = raw.read_text()
    lines = text.splitlines()
    return [lines[s.lineno - 1][4:] for s in ast.parse(text).body[0].body
            if s.end_lineno == s.lineno]


def _assert_laid_out_as_ruff_does(tmp_path, statements: list[str]) -> None:
    out = ["def f():"] + ["    " + part for s in statements
                          for part in layout.statement(s, 1).split("\n")]
    mine = tmp_path / "mine.py"
    mine.write_text("\n".join(out) + "\n")
    result = _ruff("format", "--check", "--diff", cwd=tmp_path, target="mine.py")
    assert result.returncode == 0, result.stdout[:5000]


@needs_ruff
def test_arithmetic_chains_are_laid_out_as_ruff_formats_them(tmp_path):
    # layout.parenthesized_assignment puts such a value on a line of its own in parentheses
    # without parsing it; where it declines, statement() lays the value out in full.
    # Either way the text is ruff's. (Canonical one-line forms first, as above.)
    statements = _one_line_forms(tmp_path, _random_chains(600, 20261124))
    long = [s for s in statements if not layout.fits(s, 1)]
    fast = [s for s in long if layout.parenthesized_assignment(*s.split(" = ", 1), 1)]
    assert len(fast) > 100 and len(long) - len(fast) > 100  # both paths are exercised
    term_per_line = [s for s in fast
                     if layout.parenthesized_assignment(*s.split(" = ", 1), 1).count("\n") > 2]
    assert len(term_per_line) > 10  # and values too long for one line in parentheses
    _assert_laid_out_as_ruff_does(tmp_path, statements)


def _chains_ending_in_a_bracket(count: int, seed: int) -> list[str]:
    """Long assignments whose one + or - leaves a call or a group at the end (the backward
    of tanh: ``grad_a * c + grad_b * (1.0 - t * t)``), some with brackets before it too."""
    rng = random.Random(seed)

    def name():
        return rng.choice(["grad_t", "t", "sqrt_t", "tanh_t"]) + str(rng.randint(1, 99999))

    def factor():
        r = rng.random()
        if r < 0.6:
            return name()
        if r < 0.75:
            return rng.choice(["2.0", "0.5", "3"])
        if r < 0.9:
            return f"{rng.choice(['math.cos', 'math.sin', 'np.sum'])}({name()})"
        return f"({name()} - {name()})"

    def product(n):
        return " * ".join(factor() for _ in range(n))

    out = []
    for _ in range(count):
        target = rng.choice(["grad_t", "grad_x_head"]) + str(rng.randint(1, 99999))
        last = rng.choice([f"(1.0 - {name()} * {name()})", f"math.cos({name()})",
                           f"np.exp({product(rng.randint(1, 4))})",
                           f"({product(rng.randint(2, 6))} - {name()})"])
        value = f"{product(rng.randint(1, 5))} {rng.choice('+-')} {product(rng.randint(0, 3))}"
        value = f"{value} * {last}" if not value.endswith(" ") else f"{value}{last}"
        out.append(ast.unparse(ast.parse(f"{target} = {value}")))
    return out


@needs_ruff
def test_chains_ending_in_a_bracket_are_laid_out_as_ruff_formats_them(tmp_path):
    # parenthesized_assignment breaks the last bracket when the line up to it fits (ruff
    # omits the optional parentheses), and declines where ruff breaks an earlier bracket.
    statements = _one_line_forms(tmp_path, _chains_ending_in_a_bracket(800, 20261124))
    long = [s for s in statements if not layout.fits(s, 1)]
    fast = [layout.parenthesized_assignment(*s.split(" = ", 1), 1) for s in long]
    split_last = [s for s in fast if s and not s.endswith("(\n    ") and s.split("\n")[0][-1:]
                  == "(" and not s.split("\n")[0].endswith(" = (")]
    assert len(split_last) > 150 and fast.count(None) > 50, (len(split_last), fast.count(None))
    _assert_laid_out_as_ruff_does(tmp_path, statements)


def test_layout_keeps_short_lines_and_wraps_headers():
    assert layout.statement("y = x * x", 1, "# demo.py:2") == "y = x * x  # demo.py:2"
    params = [f"parameter_number_{i}" for i in range(4)]
    assert layout.header("f_value_and_grad", params) == (
        "def f_value_and_grad(\n    " + ", ".join(params) + "\n):")
    many = [f"a_rather_long_parameter_name_{i}" for i in range(6)]
    assert layout.header("f", many) == "def f(\n" + "".join(f"    {p},\n" for p in many) + "):"


def _spans_by_tokenize(source: bytes) -> set[tuple]:
    """The grouping parentheses as Python's tokenizer splits the line (the reference for the
    layout's own scan)."""
    import io
    import tokenize

    spans, opened, previous = set(), [], None
    line = source.decode()

    def byte_col(col):
        return len(line[:col].encode())

    for tok in tokenize.tokenize(io.BytesIO(source).readline):
        if tok.type == tokenize.OP and tok.string in "([{":
            call = previous is not None and (
                previous.type in (tokenize.NAME, tokenize.STRING)
                and previous.string not in ("return", "if", "not", "and", "or", "in", "is")
                or previous.string in (")", "]", "}"))
            opened.append(byte_col(tok.end[1]) if tok.string == "(" and not call else None)
        elif tok.type == tokenize.OP and tok.string in ")]}":
            start = opened.pop()
            if start is not None:
                end = byte_col(tok.start[1])
                while source[start:start + 1] == b" ":
                    start += 1
                while source[end - 1:end] == b" ":
                    end -= 1
                spans.add((1, start, 1, end))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            previous = tok
    return spans


@pytest.mark.parametrize("line", [
    "y = (a + b) * c",
    "y = f(a)(b) + (c)",
    'y = ("s(" + \'q)\\\'\' ) * (x)',
    'raise GuardFailure("x (1) is \\"odd\\"")',
    'y = "((" + (x) + ")" + (y)',
    "if not (x > 0) and (y):",
    "return (a, b), (c)",
    "z = 1e-05 * (a) + .5 * (b) + x[(1)] + {(2): 3}[(2)] + x.y(z)(w)",
    'u = "é(" + (x_α + β) * (γ)',
    "v = (  a  ) + ( (b) )",
])
def test_layout_finds_grouping_parentheses_as_the_tokenizer_does(line):
    assert layout._parenthesized_spans(line.encode()) == _spans_by_tokenize(line.encode())


def _signs(x):
    u = np.tanh(x) + x
    return np.sum(np.log1p(x * x) * u) + np.sum(np.cos(u)) + np.sum(2 * -(x * u))


def test_the_backward_carries_signs_into_subtractions_and_literals():
    """A negated product first in a backward sum trades places with the next term, and a
    literal times a negated product takes the sign: no negation of an array is left."""
    x = np.linspace(-1.0, 1.5, 5)
    source = gradgen.emit(_signs, x)
    grad = source[source.index("def _signs_grad("):].split("\n\n\n")[0]
    assert "np.log1p(x_sq) - grad_out * np.sin(u)" in grad, grad  # not -grad_out * ... + ...
    assert "-(" not in grad.replace("-(grad_out * 2)", ""), grad  # a scalar may stay negated
    np.testing.assert_allclose(gradgen.grad(_signs)(x), _numeric_grad(_signs, x), rtol=1e-6)


def _numeric_grad(f, x, h=1e-6):
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


def test_the_sign_moves_are_exact_in_ieee():
    """What the printer relies on, bit for bit, zeros, infinities and NaN included:
    -u * v + w == w - u * v, c * -v == -c * v, u * -v == -(u * v), u - -v == u + v."""
    special = np.array([0.0, -0.0, 1e-310, -3.5, 2.0, np.inf, -np.inf, np.nan, 1e308, 0.1])
    u, v, w = np.meshgrid(special, special, special)
    with np.errstate(all="ignore"):
        pairs = [(-u * v + w, w - u * v), (2.5 * -v, -2.5 * v), (u * -v, -(u * v)),
                 (u - -v, u + v)]
    for got, expected in pairs:
        np.testing.assert_array_equal(got, expected)  # NaN where NaN (its sign means nothing)
        number = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(expected[number]))


def _gauss(x):
    a = np.sin(x)
    return np.sum(np.exp(-(a * a)) / x)


def test_a_literal_takes_the_sign_of_a_negated_product():
    x = np.linspace(0.5, 1.5, 4)
    source = gradgen.emit(_gauss, x)
    grad = source[source.index("def _gauss_grad("):].split("\n\n\n")[0]
    assert "-2 * (" in grad and "2 * (-" not in grad, grad
    np.testing.assert_allclose(gradgen.grad(_gauss)(x), _numeric_grad(_gauss, x), rtol=1e-6)


def _random_sums(count: int, seed: int) -> list[tuple[str, str]]:
    """(target, value) pairs: sums as the backward's printers write them, with minimal
    parentheses, of 2 to 16 terms of varied kinds and lengths."""
    rng = random.Random(seed)

    def name():
        return rng.choice(["x", "grad_t", "t", "sin_t", "grad_h_row"]) + (
            f"{rng.randint(0, 99999)}" if rng.random() < 0.7 else "") + (
            "_" + "v" * rng.randint(1, 40) if rng.random() < 0.2 else "")

    def term(depth=0):
        r = rng.random()
        if depth > 2 or r < 0.3:
            return name() if rng.random() < 0.85 else rng.choice(["2.0", "0.25", "1e-05"])
        if r < 0.5:
            return f"{term(depth + 1)} {rng.choice(['*', '/'])} {name()}"
        if r < 0.6:
            return f"{name()}**{rng.choice(['2', '3', '0.5'])}"
        if r < 0.7:
            return f"-{name()} * {term(depth + 1)}"
        if r < 0.8:
            return f"{rng.choice(['math.sin', 'math.exp', 'np.sum'])}({value(depth + 1)})"
        if r < 0.9:
            return f"{name()} * ({value(depth + 1)})"
        return f"{name()}[{rng.choice(['0', '1:-1', 'i + 1'])}]"

    def value(depth=0):
        parts = [term(depth)]
        for _ in range(rng.randint(1, 15 if depth == 0 else 2)):
            parts.append(f"{rng.choice(['+', '-'])} {term(depth)}")
        return " ".join(parts)

    return [(name(), value()) for _ in range(count)]


def test_long_sums_are_laid_out_as_the_general_layout_does():
    """``layout.sum_assignment`` (the emitter's path for long fused sums, no parsing) gives
    exactly what ``layout.statement`` gives, whenever it answers; it declines otherwise."""
    answered = declined = 0
    for target, value in _random_sums(600, seed=20261124):
        for indent in (1, 2, 4):
            line = f"{target} = {value}"
            fast = layout.sum_assignment(target, value, indent)
            if fast is None:
                declined += 1
                continue
            answered += 1
            assert fast == layout.statement(line, indent), line
    assert answered > 300 and declined > 300, (answered, declined)  # both ways exercised
    assert layout.sum_assignment("y", "a + b", 1) is None  # fits: nothing to do
    assert layout.sum_assignment("y", "a" * 60 + " + " + "b" * 60, 1) is None  # one operator
