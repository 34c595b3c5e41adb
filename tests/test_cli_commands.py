"""The gradgen command line as a user runs it: ``python -m gradgen`` and the ``gradgen``
script as subprocesses, for every command and every user error.

Subprocesses are slow (each imports NumPy and gradgen), so the independent runs of this file
are started together once per module and the tests read their results."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import pty
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest

import gradgen

from .conftest import ROOT

MODEL = '''\
"""User code for the CLI tests."""
import math

import numpy as np


def loss(w, X, n):
    h = X @ w
    return np.sum(h * h) * n


def two(a, b):
    c = a * b
    return c * b + a


def sine(x):
    y = math.sin(x)
    return y


def branchy(x):
    if x > 0:
        return x * x
    else:
        return -x


def pair(x, y):
    return x * y, np.sin(x) + y


def named(x):
    y = x * x
    z = math.sin(y)
    return z + y


def uses_eig(a):
    values, vectors = np.linalg.eig(a)
    return np.sum(values)
'''

WRONG = '''\
import gradgen


class BadSquare(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_values
        return 3.0 * x * g  # wrong on purpose: d(x*x)/dx is 2x


def f(x):
    return BadSquare.apply(x) + x
'''

EIG_LINE = MODEL.splitlines().index("    values, vectors = np.linalg.eig(a)") + 1
BRANCH_LINE = MODEL.splitlines().index("    if x > 0:") + 1
SCRIPT = next((p for p in (os.path.join(os.path.dirname(sys.executable), "gradgen"),
                           shutil.which("gradgen")) if p and os.path.isfile(p)), "gradgen")


@dataclass
class Run:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {shlex.join(self.argv)}\nexit {self.returncode}\n"
                f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")


def gradgen_argv(*args: str, script: bool = False) -> list[str]:
    return [SCRIPT, *args] if script else [sys.executable, "-m", "gradgen", *args]


def run(argv, cwd, env=None) -> Run:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False,
                            timeout=120)
    return Run(list(argv), result.returncode, result.stdout, result.stderr)


def run_all(jobs: dict, cwd) -> dict[str, Run]:
    """Run {name: argv or (argv, cwd, env)} concurrently."""
    def one(job):
        argv, where, env = job if isinstance(job, tuple) else (job, cwd, None)
        return run(argv, where, env)

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(jobs, pool.map(one, jobs.values()), strict=True))
    return results


def _without_dot_path(tmp) -> str:
    """A PATH with no Graphviz ``dot`` on it (an empty directory)."""
    empty = tmp / "empty_bin"
    empty.mkdir(exist_ok=True)
    return str(empty)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A directory holding the user's files; every command runs there (relative paths)."""
    root = tmp_path_factory.mktemp("project")
    (root / "model.py").write_text(MODEL)
    (root / "wrong.py").write_text(WRONG)
    (root / "handwritten.py").write_text("x = 1  # mine\n")
    (root / "handwritten2.py").write_text("x = 2  # mine\n")
    (root / "a_directory").mkdir()
    return root


LOSS_SPECS = ("--arg", "w=f64[3]", "--arg", "X=f64[5,3]", "--arg", "n=float")


@pytest.fixture(scope="module")
def cli(project) -> dict[str, Run]:
    """Every independent command of this file, run once, concurrently."""
    g = gradgen_argv
    no_dot_env = dict(os.environ, PATH=_without_dot_path(project))
    jobs = {
        # emit
        "emit_two": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "--argnums", "0,1"),
        "emit_two_script": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "--argnums", "0,1",
                             script=True),
        "emit_spec_1": g("emit", "model.py:loss", *LOSS_SPECS),
        "emit_spec_2": g("emit", "model.py:loss", *LOSS_SPECS),
        "emit_vjp": g("emit", "model.py:pair", "--args", "(1.5, 2.0)", "--vjp"),
        "emit_intermediates": g("emit", "model.py:named", "--args", "(0.7,)",
                                "--intermediates", "y,z"),
        "emit_branchy": g("emit", "model.py:branchy", "--args", "(1.0,)"),
        # emit -o / --check, first round
        "check_missing": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o", "absent.py",
                           "--check"),
        "write_out": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o", "out.py"),
        "refuse_overwrite": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o",
                              "handwritten.py"),
        "force_overwrite": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o",
                             "handwritten2.py", "--force"),
        # show, check, graph
        "show": g("show", "model.py:sine", "--args", "(0.5,)"),
        "check_ok": g("check", "model.py:two", "--args", "(2.0, 3.0)", "--argnums", "0,1"),
        "check_mismatch": g("check", "wrong.py:f", "--args", "(1.5,)"),
        "graph_stdout": g("graph", "model.py:two", "--args", "(2.0, 3.0)"),
        "graph_dot_file": g("graph", "model.py:two", "--args", "(2.0, 3.0)", "-o", "g.dot"),
        "graph_svg_no_dot": (g("graph", "model.py:two", "--args", "(2.0, 3.0)", "-o", "g.svg"),
                             project, no_dot_env),
        "graph_text": g("graph", "model.py:two", "--args", "(2.0, 3.0)", "--text"),
        # user errors
        "no_file": g("emit", "nofile.py:f", "--args", "(1.0,)"),
        "no_function": g("emit", "model.py:nope", "--args", "(1.0,)"),
        "bad_args": g("emit", "model.py:two", "--args", "(2.0, "),
        "bad_arg_spec": g("emit", "model.py:loss", "--arg", "w=f64[3", "--arg", "X=f64[5,3]",
                          "--arg", "n=float"),
        "bad_argnums": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "--argnums", "a,b"),
        "trace_failure": g("emit", "model.py:uses_eig", "--args", "(np.eye(2) * 2.0,)"),
        "unwritable": g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o", "a_directory"),
        "usage": g("emit"),
        "debug": g("--debug", "emit", "model.py:uses_eig", "--args", "(np.eye(2) * 2.0,)"),
        # help
        "help": g("--help"),
        **{f"help_{c}": g(c, "--help") for c in ("emit", "show", "check", "graph")},
    }
    results = run_all(jobs, project)
    # Second round: --check on the file written above, fresh, hand-edited and stale.
    written = (project / "out.py").read_text()
    edited_dir, stale_dir = project / "edited", project / "stale"
    for directory in (edited_dir, stale_dir):
        directory.mkdir()
        (directory / "model.py").write_text(MODEL)
        (directory / "out.py").write_text(written)
    (edited_dir / "out.py").write_text(written.replace("return ", "return  0.0 + ", 1))
    (stale_dir / "model.py").write_text(MODEL.replace("return c * b + a", "return c * b - a"))
    check = g("emit", "model.py:two", "--args", "(2.0, 3.0)", "-o", "out.py", "--check")
    results.update(run_all({"check_fresh": check, "check_edited": (check, edited_dir, None),
                            "check_stale": (check, stale_dir, None)}, project))
    return results


def _module(source: str, name: str = "emitted") -> dict:
    namespace: dict = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102 - generated code
    return namespace


@pytest.fixture(scope="module")
def model(project):
    spec = importlib.util.spec_from_file_location("cli_model", project / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ok(result: Run) -> None:
    assert result.returncode == 0, str(result)


def _user_error(result: Run) -> str:
    """Exit 2 and exactly one line on stderr, ``gradgen: error: ...``, no traceback."""
    assert result.returncode == 2, str(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, str(result)
    assert lines[0].startswith("gradgen: error: "), str(result)
    assert "Traceback" not in result.stderr
    return lines[0]


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}


# --- emit ----------------------------------------------------------------------------------------


def test_emit_defines_grad_and_value_and_grad(cli, model):
    result = cli["emit_two"]
    _ok(result)
    functions = _functions(result.stdout)
    assert {"two_grad", "two_value_and_grad"} <= set(functions)
    for name in ("two_grad", "two_value_and_grad"):
        assert [a.arg for a in functions[name].args.args] == ["a", "b"]
    namespace = _module(result.stdout)
    assert namespace["two_grad"](2.0, 3.0) == gradgen.grad(model.two, (0, 1))(2.0, 3.0)
    assert namespace["two_value_and_grad"](2.0, 3.0) == gradgen.value_and_grad(
        model.two, (0, 1))(2.0, 3.0)


def test_emit_docstrings_say_what_for_which_signature_and_guards(cli):
    docs = {n: ast.get_docstring(f) for n, f in _functions(cli["emit_two"].stdout).items()}
    assert docs["two_grad"].startswith("Return (dtwo/da, dtwo/db) for a: float, b: float.")
    assert docs["two_value_and_grad"].startswith(
        "Return (two(a, b), (dtwo/da, dtwo/db)) for a: float, b: float.")
    assert all("no guards" in d for d in docs.values())
    guarded = {n: ast.get_docstring(f) for n, f in _functions(cli["emit_branchy"].stdout).items()}
    for doc in guarded.values():
        assert "for x: float" in doc
        assert f"x > 0 (model.py:{BRANCH_LINE})" in doc
        assert "GuardFailure" in doc


def test_emit_header_names_source_function_signature_version_and_command(cli):
    result = cli["emit_two"]
    lines = result.stdout.splitlines()
    assert lines[0] == (f"# Code generated by gradgen {gradgen.__version__} from model.py:two "
                        "for (a: float, b: float). DO NOT EDIT.")
    assert lines[1] == '# Regenerate: gradgen emit model.py:two --args "(2.0, 3.0)" --argnums 0,1'
    assert shlex.split(lines[1].removeprefix("# Regenerate: ")) == [
        "gradgen", *result.argv[3:]]
    assert re.fullmatch(r"# Source sha256: [0-9a-f]{16,64}", lines[2])
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}", result.stdout), "a timestamp"


def test_emit_is_byte_stable_and_both_entry_points_agree(cli):
    _ok(cli["emit_two_script"])
    assert cli["emit_two_script"].stdout == cli["emit_two"].stdout
    assert cli["emit_spec_1"].stdout == cli["emit_spec_2"].stdout


def test_emit_with_shape_specs(cli):
    result = cli["emit_spec_1"]
    _ok(result)
    lines = result.stdout.splitlines()
    assert lines[0].endswith("from model.py:loss for (w: f64[3], X: f64[5,3], n: float). "
                             "DO NOT EDIT.")
    assert shlex.split(lines[1].removeprefix("# Regenerate: ")) == [
        "gradgen", "emit", "model.py:loss", *LOSS_SPECS]
    namespace = _module(result.stdout)
    w, X = np.linspace(-1, 1, 3), np.arange(15.0).reshape(5, 3) / 10
    np.testing.assert_allclose(namespace["loss_grad"](w, X, 0.5), 2 * 0.5 * (X @ w) @ X)
    doc = ast.get_docstring(_functions(result.stdout)["loss_grad"])
    assert "w: f64[3], X: f64[5,3], n: float" in doc


def test_emit_vjp(cli, model):
    result = cli["emit_vjp"]
    _ok(result)
    functions = _functions(result.stdout)
    assert [a.arg for a in functions["pair_vjp"].args.args] == ["x", "y", "cotangent"]
    outputs, grads = _module(result.stdout)["pair_vjp"](1.5, 2.0, (1.0, 0.5))
    want_out, pullback = gradgen.vjp(model.pair, 1.5, 2.0)
    assert outputs == want_out
    np.testing.assert_allclose(grads, pullback((1.0, 0.5)))


def test_emit_intermediates(cli, model):
    result = cli["emit_intermediates"]
    _ok(result)
    assert "--intermediates y,z" in result.stdout.splitlines()[1]
    grad, adjoints = _module(result.stdout)["named_grad"](0.7)
    want_grad, want_adjoints = gradgen.grad(model.named, intermediates=("y", "z"))(0.7)
    assert grad == pytest.approx(want_grad)
    assert adjoints == pytest.approx(want_adjoints)


def test_emitted_module_raises_its_own_guard_failure(cli, model):
    source = cli["emit_branchy"].stdout
    namespace = _module(source)
    guard_failure = namespace["GuardFailure"]
    assert isinstance(guard_failure, type) and issubclass(guard_failure, Exception)
    assert "class GuardFailure(Exception):" in source  # defined by the module itself
    assert not issubclass(guard_failure, gradgen.GuardFailure)
    assert namespace["branchy_grad"](1.0) == 2.0
    with pytest.raises(guard_failure) as excinfo:
        namespace["branchy_grad"](-1.0)
    assert "x > 0" in str(excinfo.value)
    assert f"model.py:{BRANCH_LINE}" in str(excinfo.value)
    grad = gradgen.grad(model.branchy)
    assert grad(1.0) == 2.0 and grad(-1.0) == -1.0 and grad(3.0) == 6.0


# --- emit -o and --check ---------------------------------------------------------------------------


def test_check_on_a_missing_file_exits_1_and_says_so(cli, project):
    result = cli["check_missing"]
    assert result.returncode == 1, str(result)
    assert "absent.py does not exist" in result.stderr
    assert not (project / "absent.py").exists()


def test_emit_to_a_file_then_check_is_fresh(cli, project):
    _ok(cli["write_out"])
    assert cli["write_out"].stdout == ""
    assert (project / "out.py").read_text().startswith("# Code generated by gradgen ")
    fresh = cli["check_fresh"]
    assert fresh.returncode == 0, str(fresh)
    assert "up to date" in fresh.stderr


def test_check_on_a_hand_edited_file_exits_1(cli):
    result = cli["check_edited"]
    assert result.returncode == 1, str(result)
    assert "differs" in result.stderr and "regenerate it with: gradgen emit" in result.stderr


def test_check_after_the_source_changed_says_stale(cli):
    result = cli["check_stale"]
    assert result.returncode == 1, str(result)
    assert "stale" in result.stderr and "source" in result.stderr


def test_emit_refuses_to_overwrite_a_file_it_did_not_generate(cli, project):
    message = _user_error(cli["refuse_overwrite"])
    assert "handwritten.py" in message and "--force" in message
    assert (project / "handwritten.py").read_text() == "x = 1  # mine\n"
    _ok(cli["force_overwrite"])
    assert (project / "handwritten2.py").read_text().startswith("# Code generated by gradgen")


# --- show -------------------------------------------------------------------------------------------


def test_show_annotates_each_backward_statement_with_its_rule(cli):
    result = cli["show"]
    _ok(result)
    assert "# d sin(u)/du = cos(u)" in result.stdout
    assert "\x1b[" not in result.stdout  # stdout is a pipe: no colour


def _run_in_pty(argv, cwd, env) -> tuple[int, str]:
    primary, secondary = pty.openpty()
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=secondary, stderr=subprocess.PIPE)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=120)
    process.stderr.close()
    os.close(primary)
    return process.returncode, b"".join(chunks).decode()


def test_show_colours_a_terminal_unless_no_color(project):
    argv = gradgen_argv("show", "model.py:sine", "--args", "(0.5,)")
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        coloured = pool.submit(_run_in_pty, argv, project, env)
        plain = pool.submit(_run_in_pty, argv, project, dict(env, NO_COLOR="1"))
        (code, out), (plain_code, plain_out) = coloured.result(), plain.result()
    assert code == 0 and "\x1b[" in out
    assert "d sin(u)/du = cos(u)" in out
    assert plain_code == 0 and "\x1b[" not in plain_out
    assert "# d sin(u)/du = cos(u)" in plain_out


# --- check -------------------------------------------------------------------------------------------


def test_check_prints_a_table_per_argument_and_exits_0(cli):
    result = cli["check_ok"]
    _ok(result)
    rows = [line.split() for line in result.stdout.splitlines()]
    assert any(row[:2] == ["argument", "method"] for row in rows if row)
    assert {row[0] for row in rows if row} >= {"a", "b"}


def test_check_exits_1_on_a_wrong_backward(cli):
    result = cli["check_mismatch"]
    assert result.returncode == 1, str(result)
    assert any(line.split()[:1] == ["x"] for line in result.stdout.splitlines() if line.strip())
    assert "BadSquare" in result.stderr
    assert "Traceback" not in result.stderr


# --- graph -------------------------------------------------------------------------------------------


def test_graph_prints_dot(cli):
    result = cli["graph_stdout"]
    _ok(result)
    assert result.stdout.startswith("digraph ")
    assert result.stdout.rstrip().endswith("}")


def test_graph_writes_dot_to_a_file(cli, project):
    _ok(cli["graph_dot_file"])
    assert (project / "g.dot").read_text() == cli["graph_stdout"].stdout


def test_graph_svg_without_graphviz_writes_nothing_and_exits_2(cli, project):
    message = _user_error(cli["graph_svg_no_dot"])
    assert "graphviz" in message.lower() and "dot" in message
    assert not (project / "g.svg").exists()


def test_graph_text_prints_the_readable_listing(cli):
    result = cli["graph_text"]
    _ok(result)
    assert "mul a b" in result.stdout
    assert "model.py:" in result.stdout
    assert not result.stdout.startswith("digraph")


# --- user errors ------------------------------------------------------------------------------------


def test_file_not_found(cli):
    assert "nofile.py" in _user_error(cli["no_file"])


def test_function_not_found(cli):
    message = _user_error(cli["no_function"])
    assert "model.py" in message and "nope" in message


def test_bad_args_expression(cli):
    assert "--args" in _user_error(cli["bad_args"])


def test_bad_arg_spec(cli):
    assert "w=f64[3" in _user_error(cli["bad_arg_spec"])


def test_argnums_not_integers(cli):
    message = _user_error(cli["bad_argnums"])
    assert "--argnums" in message and "a,b" in message


def test_trace_failure_names_the_users_line(cli):
    message = _user_error(cli["trace_failure"])
    assert f"model.py:{EIG_LINE}" in message
    assert "np.linalg.eig" in message


def test_unwritable_output_path(cli, project):
    message = _user_error(cli["unwritable"])
    assert "a_directory" in message
    assert (project / "a_directory").is_dir()


def test_usage_mistakes_are_one_line_too(cli):
    assert "target" in _user_error(cli["usage"])


def test_debug_shows_the_traceback(cli):
    result = cli["debug"]
    assert result.returncode == 2, str(result)
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("gradgen: error: ")


# --- help -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None, "emit", "show", "check", "graph"])
def test_help_shows_a_real_example(cli, command):
    result = cli["help" if command is None else f"help_{command}"]
    _ok(result)
    examples = [line.strip() for line in result.stdout.split("examples:", 1)[1].splitlines()
                if line.strip().startswith("gradgen ")]
    if command is not None:
        examples = [e for e in examples if e.startswith(f"gradgen {command} ")]
    assert examples, result.stdout
    # At least one example runs as written from the repository root: its file exists there.
    targets = [shlex.split(e)[2].rpartition(":")[0] for e in examples]
    assert any(os.path.isfile(os.path.join(ROOT, t)) for t in targets), targets


def test_the_source_hash_is_of_the_function_itself(cli, model):
    """The stale check works because the header's hash covers the function's own source."""
    import hashlib

    value = cli["emit_two"].stdout.splitlines()[2].removeprefix("# Source sha256: ")
    text = inspect.getsource(model.two)
    assert textwrap.dedent(text).startswith("def two(a, b):")
    assert hashlib.sha256(text.encode()).hexdigest().startswith(value)
