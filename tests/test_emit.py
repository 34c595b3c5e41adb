"""Emitted modules: the golden file, the shape of the code, byte stability, and that they
run alone under ``python -I`` with the gradients gradgen.grad gives."""

from __future__ import annotations

import ast
import inspect
import linecache
import math
import os
import re
import subprocess
import sys
import traceback

import numpy as np
import pytest

import gradgen

from .conftest import ROOT, RUFF, load_example, run_emitted, run_isolated

GOLDEN = os.path.join(ROOT, "tests", "golden")


# --- user functions (defined here, so their locations are test_emit.py:<line>) ------------


def two_args(a, b):
    c = a * b
    d = c * b
    return d + a


def branchy(x):
    if x > 0:
        y = x * x
    else:
        y = -x
    return y


BRANCH_LINE = inspect.getsourcelines(branchy)[1] + 1  # the `if x > 0:` line


def arrays(x, w, s):
    h = np.sum(x * w, axis=1)
    return np.sum(h * h) * s + np.mean(x)


def with_math(x, y):
    z = math.sin(x) * math.exp(y)
    return z + math.log(y) ** 2


def sqrt_of(x):
    y = math.sqrt(x)
    return y


def _module_for_golden() -> str:
    return gradgen.emit(load_example("reused_value").f, 2.0)


@pytest.fixture
def at_root(monkeypatch):
    """Emitted headers name the source relative to the working directory."""
    monkeypatch.chdir(ROOT)


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _assignments_to(fn: ast.FunctionDef, name: str) -> list[ast.Assign]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]


def _names(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def _imports(source: str) -> set[str]:
    mods = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mods.add((node.module or "").split(".")[0])
    return mods


# --- the golden module -----------------------------------------------------------------------


def test_reused_value_golden(at_root):
    source = _module_for_golden()
    path = os.path.join(GOLDEN, "reused_value.py")
    if os.environ.get("GRADGEN_UPDATE_GOLDEN") == "1":
        os.makedirs(GOLDEN, exist_ok=True)
        with open(path, "w", newline="") as fh:
            fh.write(source)
    with open(path, newline="") as fh:
        expected = fh.read()
    assert source == expected, (
        "emitted module differs from tests/golden/reused_value.py; if the change is intended, "
        "rerun with GRADGEN_UPDATE_GOLDEN=1 and review the diff")


def test_golden_is_what_the_decorator_compiles(at_root):
    df = gradgen.grad(load_example("reused_value").f)
    assert df(2.0) == 12.0
    with open(os.path.join(GOLDEN, "reused_value.py")) as fh:
        assert df.source == fh.read()


def test_reused_value_adjoint_is_one_fused_statement(at_root):
    source = _module_for_golden()
    fns = _functions(source)
    assert set(fns) == {"f_grad", "f_value_and_grad"}
    for fn in fns.values():
        grad_y = _assignments_to(fn, "grad_y")
        assert len(grad_y) == 1, ast.unparse(fn)
        rhs = {n.id for n in ast.walk(grad_y[0].value) if isinstance(n, ast.Name)}
        assert {"grad_a", "grad_b"} <= rhs  # both contributions, y + 1 and y * 2, in one sum
        assert isinstance(grad_y[0].value, ast.BinOp) and isinstance(grad_y[0].value.op, ast.Add)
        assert not any(isinstance(n, ast.AugAssign) for n in ast.walk(fn))
        for node in ast.walk(fn):  # no `grad = 0` accumulator initialised
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                assert node.value.value not in (0, 0.0), ast.unparse(node)
    assert "+=" not in source
    assert not re.search(r"=\s*0(\.0)?\s*$", source, re.MULTILINE)
    assert "np.zeros" not in source
    assert _assignments_to(fns["f_value_and_grad"], "y")
    names = _names(source)
    assert {"x", "y", "grad_y", "grad_x"} <= names


def test_names_come_from_the_user_not_from_ops(at_root):
    names = _names(_module_for_golden())
    assert not {n for n in names if re.fullmatch(r"(mul|add|add_n|tmp)(_\d+)?", n)}


def test_unrequested_argument_gets_nothing():
    source = gradgen.emit(two_args, 2.0, 3.0, argnums=0)
    assert "grad_b" not in source
    assert not any(n.startswith("grad_b") for n in _names(source))
    ns = run_emitted(source)
    assert ns["two_args_grad"](2.0, 3.0) == 3.0 * 3.0 + 1.0
    both = gradgen.emit(two_args, 2.0, 3.0, argnums=(0, 1))
    assert "grad_b" in _names(both)
    assert run_emitted(both)["two_args_grad"](2.0, 3.0) == (10.0, 2 * 2.0 * 3.0)


# --- byte stability, imports, generated-code markers -----------------------------------------

CASES = [
    (two_args, (2.0, 3.0), (0, 1)),
    (branchy, (1.5,), 0),
    (arrays, (np.arange(6.0).reshape(2, 3) / 7, np.linspace(-1, 1, 3), 0.5), (0, 1, 2)),
    (with_math, (0.3, 1.7), (0, 1)),
]


@pytest.mark.parametrize("fn, args, argnums", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_emitting_twice_gives_identical_bytes(fn, args, argnums):
    first = gradgen.emit(fn, *args, argnums=argnums)
    gradgen.grad(fn, argnums)(*args)  # unrelated work in between must not matter
    assert gradgen.emit(fn, *args, argnums=argnums) == first


@pytest.mark.parametrize("fn, args, argnums", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_the_emitters_one_pass_over_a_graph_agrees_with_the_graph(fn, args, argnums):
    """emit surveys a graph in one pass (how often and by whom each value is read, the ops,
    the renamed values) instead of asking it in several: it must find what the graph says."""
    from gradgen.emit import _Survey

    graph = gradgen.trace(fn, *args, backward=True)
    survey = _Survey(graph)
    uses = graph.uses()
    assert survey.again == {node for node in graph.nodes
                            if uses[node] - sum(r.node is node for r in graph.outputs) > 1}
    for node in graph.nodes:
        readers = [n for n in graph.nodes if any(ref.node is node for ref in n.inputs)]
        assert survey.last_reader.get(node) is (readers[-1] if readers else None)
    assert survey.ops == {n.op for n in graph.nodes}
    assert survey.renamed == {n.inputs[0].node for n in graph.nodes if n.op.name == "adjoint"}
    assert survey.user_names == {n.name for n in graph.nodes if n.name is not None}


@pytest.mark.parametrize("uses, where", [
    (("a.py:3", "a.py:3"), "used 2 times by a.py:3"),
    (("a.py:3", "a.py:5"), "used by a.py:3 and a.py:5"),
    (("a.py:3", "a.py:3", "a.py:3"), "used 3 times by a.py:3"),
    (("a.py:3", "a.py:5", "a.py:3"), "used by a.py:3 and a.py:5"),
    (("a.py:1", "a.py:2", "a.py:3", "a.py:4", "a.py:5"),
     "used by a.py:1, a.py:2, a.py:3 and 2 more lines"),
])
def test_a_fused_sums_note_names_the_lines_it_gathers_from(uses, where):
    """Two parts (most sums) are told without counting; the words are those of any count."""
    from gradgen.emit import _fused_note

    assert _fused_note("t", uses) == f"# t is {where}: one fused sum"


def test_identical_bytes_across_processes(tmp_path):
    """No hash-seed or address dependence: two interpreters with different PYTHONHASHSEED."""
    script = (
        f"import sys; sys.path.insert(0, {ROOT!r}); from tests.test_emit import CASES; "
        "import gradgen; print('\\n#####\\n'.join(gradgen.emit(f, *a, argnums=n) "
        "for f, a, n in CASES))"
    )
    outs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        outs.append(result.stdout)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("fn, args, argnums", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_module_imports_only_math_and_numpy(fn, args, argnums):
    source = gradgen.emit(fn, *args, argnums=argnums)
    assert _imports(source) <= {"math", "numpy"}
    code = [line for line in source.splitlines() if not line.lstrip().startswith("#")]
    assert not any("gradgen" in line for line in code)
    assert source.startswith("# Code generated by gradgen ")
    assert "DO NOT EDIT." in source.splitlines()[0]


def test_imports_only_what_is_used():
    assert _imports(gradgen.emit(two_args, 2.0, 3.0)) == set()
    assert _imports(gradgen.emit(with_math, 0.3, 1.7)) == {"math"}
    assert _imports(gradgen.emit(arrays, np.ones((2, 3)), np.ones(3), 0.5)) == {"numpy"}


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_emitted_modules_are_ruff_clean(tmp_path):
    for i, (fn, args, argnums) in enumerate(CASES):
        (tmp_path / f"m{i}.py").write_text(gradgen.emit(fn, *args, argnums=argnums))
    for cmd in ([RUFF, "check", "--isolated", "--line-length", "100", "."],
                [RUFF, "format", "--isolated", "--line-length", "100", "--check", "."]):
        result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


# --- running alone under python -I -------------------------------------------------------------


def _literal(value) -> str:
    if isinstance(value, np.ndarray):
        return f"np.array({value.tolist()!r}, dtype=np.{value.dtype.name})"
    return repr(value)


def _described(expr: str) -> str:
    """An expression that prints type, dtype and values of a gradient (or tuple of them)."""
    return (f"[(type(r).__name__, str(np.asarray(r).dtype), np.asarray(r).tolist()) "
            f"for r in (lambda v: v if isinstance(v, tuple) else (v,))({expr})]")


def _describe_local(value) -> list:
    values = value if isinstance(value, tuple) else (value,)
    return [(type(r).__name__, str(np.asarray(r).dtype), np.asarray(r).tolist())
            for r in values]


ISOLATED = [
    (two_args, (2.0, 3.0), 0),
    (two_args, (2.0, 3.0), (0, 1)),
    (branchy, (-1.5,), 0),
    (arrays, (np.arange(6.0).reshape(2, 3) / 7, np.linspace(-1, 1, 3), 0.5), (0, 1, 2)),
    (arrays, (np.arange(6.0, dtype=np.float32).reshape(2, 3), np.ones(3, np.float32), 2.0),
     (0, 1)),
    (with_math, (0.3, 1.7), (0, 1)),
]


@pytest.mark.parametrize("fn, args, argnums", ISOLATED,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(ISOLATED)])
def test_runs_under_python_isolated_like_grad(fn, args, argnums, tmp_path):
    source = gradgen.emit(fn, *args, argnums=argnums)
    call_args = ", ".join(_literal(a) for a in args)
    name = fn.__name__
    out = run_isolated(source, f"({_described(f'generated.{name}_grad({call_args})')}, "
                       f"{_described(f'generated.{name}_value_and_grad({call_args})[1]')}, "
                       f"float(generated.{name}_value_and_grad({call_args})[0]))", tmp_path)
    got_grad, got_vg, got_value = eval(out)
    expected = gradgen.grad(fn, argnums)(*args)
    value, vg = gradgen.value_and_grad(fn, argnums)(*args)
    assert got_grad == _describe_local(expected)
    assert got_vg == _describe_local(vg)
    assert got_value == float(value) == float(fn(*args))


def test_isolated_module_raises_its_own_guard_failure(tmp_path):
    source = gradgen.emit(branchy, 1.5)
    assert "class GuardFailure(Exception)" in source
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import generated\n"
        "print(generated.branchy_grad(2.0))\n"
        "try:\n"
        "    generated.branchy_grad(-2.0)\n"
        "except generated.GuardFailure as e:\n"
        "    print(type(e).__module__, e)\n"
    )
    (tmp_path / "generated.py").write_text(source)
    result = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.strip().splitlines()
    assert first == "4.0"
    assert second.startswith("generated ")
    assert f"test_emit.py:{BRANCH_LINE}" in second and "x > 0" in second


# --- guards in the emitted code --------------------------------------------------------------


def test_off_path_call_raises_guard_failure_naming_condition_and_line():
    ns = run_emitted(gradgen.emit(branchy, 1.5))
    assert ns["branchy_grad"](3.0) == 6.0
    with pytest.raises(ns["GuardFailure"]) as info:
        ns["branchy_grad"](-1.0)
    message = str(info.value)
    assert "x > 0" in message
    assert f"test_emit.py:{BRANCH_LINE}" in message
    assert ns["GuardFailure"] is not gradgen.GuardFailure  # defined by the module itself
    with pytest.raises(ns["GuardFailure"]):
        ns["branchy_value_and_grad"](-1.0)


def test_docstrings_state_signature_and_guards():
    fns = _functions(gradgen.emit(branchy, 1.5))
    doc = ast.get_docstring(fns["branchy_grad"])
    assert "x: float" in doc and "x > 0" in doc and "GuardFailure" in doc
    doc = ast.get_docstring(_functions(gradgen.emit(two_args, 1.0, 2.0))["two_args_grad"])
    assert "a: float, b: float" in doc and "no guards" in doc


# --- compiled code is inspectable ------------------------------------------------------------


def _compiled(df):
    (paths,) = df._paths.values()
    return paths[0].call


def test_source_attribute_and_getsource():
    df = gradgen.grad(two_args)
    assert df.source is None
    assert df(2.0, 3.0) == 10.0
    assert df.source == gradgen.emit(two_args, 2.0, 3.0)
    fn = _compiled(df)
    text = inspect.getsource(fn)
    assert text.startswith("def two_args_grad(a, b):")
    assert text in df.source


def value_reads_math(x, y):
    return x * 2.0 + math.sin(y)  # the gradient in x needs no math


def test_a_call_compiles_only_the_function_it_runs():
    df = gradgen.value_and_grad(two_args)
    assert df(2.0, 3.0) == (20.0, 10.0)
    compiled = linecache.getlines(_compiled(df).__code__.co_filename)
    assert "def two_args_value_and_grad(a, b):\n" in compiled
    assert not any(line.startswith("def two_args_grad(") for line in compiled)
    assert df.source == gradgen.emit(two_args, 2.0, 3.0)  # the whole module, when read


def test_the_module_a_call_compiles_imports_what_its_function_uses():
    df = gradgen.grad(value_reads_math)
    assert df(1.0, 0.5) == 2.0
    compiled = "".join(linecache.getlines(_compiled(df).__code__.co_filename))
    assert "import math" not in compiled and "import math" in df.source
    assert df.source == gradgen.emit(value_reads_math, 1.0, 0.5)
    assert inspect.getsource(_compiled(df)) in df.source


def test_a_module_is_the_same_whichever_function_is_written_first():
    from gradgen.build import Request, build

    whole = gradgen.emit(arrays, np.ones((2, 3)), np.full(3, 0.5), 2.0)
    for first in ("arrays_value_and_grad", "arrays_grad"):
        built = build(arrays, (np.ones((2, 3)), np.full(3, 0.5), 2.0), Request())
        alone = built.function_source(first)
        assert f"def {first}(" in alone and alone.count("\ndef ") == 1
        assert built.source == whole
    assert whole.startswith(built.function_source("arrays_grad").rstrip("\n"))


def test_traceback_shows_generated_code():
    df = gradgen.grad(sqrt_of)
    assert df(4.0) == 0.25
    with pytest.raises(gradgen.GradgenError) as info:
        df(0.0)  # same path, but the derivative 1 / (2 * sqrt(x)) divides by zero
    assert str(info.value).startswith("test_emit.py:")
    cause = info.value.__cause__
    assert isinstance(cause, ZeroDivisionError)
    text = "".join(traceback.format_exception(cause))
    assert "in sqrt_of_grad" in text
    assert "grad_x = grad_y / (2.0 * y)" in text  # the generated line itself, via linecache


# --- the backward's int literals -------------------------------------------------------------


def tanh_and_square(x, v):
    y = math.tanh(x) * 2
    return y + np.sum(v**2)


@pytest.mark.parametrize("v", [np.arange(3.0), np.arange(3.0, dtype=np.float32)])
def test_the_backward_writes_its_int_literals_as_floats(monkeypatch, v):
    """tanh's ``1 - t * t`` and the ``2`` of ``v ** 2`` are ``1.0`` and ``2.0`` in the module
    (CPython specializes float-float arithmetic only; NumPy resolves a Python int against the
    array's dtype per call), with every result bit for bit what the ints give. The user's own
    ``* 2`` stays as written."""
    from gradgen import tracer

    source = gradgen.emit(tanh_and_square, 0.3, v, argnums=(0, 1))
    assert "y = tanh_x * 2  #" in source
    assert "grad_y * 2.0 * (1.0 - tanh_x * tanh_x)" in source and "2.0 * v" in source
    monkeypatch.setattr(tracer, "float_literal", lambda op_name, value, other: value)
    as_ints = gradgen.emit(tanh_and_square, 0.3, v, argnums=(0, 1))
    assert "(1 - tanh_x * tanh_x)" in as_ints
    for args in [(0.3, v), (-1.7, v * 3 + 0.25)]:
        (value, (gx, gv)), (value_i, (gx_i, gv_i)) = (
            run_emitted(text)["tanh_and_square_value_and_grad"](*args)
            for text in (source, as_ints))
        assert (value, gx) == (value_i, gx_i) and type(gx) is float
        assert gv.dtype == gv_i.dtype == v.dtype
        np.testing.assert_array_equal(gv, gv_i)


@pytest.mark.parametrize("op_name, value, other, expected", [
    ("mul", 2, 1.5, 2.0),
    ("sub", 1, np.float64(0.5), 1.0),
    ("div", 2, np.ones(3, np.float32), 2.0),  # a float32 array stays float32 beside 2.0
    ("add", -(2**53), np.ones(3), -(2.0**53)),
    ("mul", 2, np.float32(0.5), 2),  # np.float32(3) * 2.0 was float64 before NEP 50
    ("mul", 2, np.arange(3), 2),  # int arithmetic stays int
    ("mul", 2**53 + 1, 1.5, 2**53 + 1),  # not a double exactly
    ("pow", 2, 1.5, 2),  # x ** 2 stays as people write it
])
def test_which_int_literals_become_floats(op_name, value, other, expected):
    from gradgen.ir import aval_of
    from gradgen.peephole import float_literal

    class Traced:
        aval = aval_of(other)

    got = float_literal(op_name, value, Traced())
    assert got == expected and type(got) is type(expected)
