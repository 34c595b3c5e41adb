"""The model examples a newcomer tries first (examples/logistic_regression.py, mlp.py, rnn.py,
gmm.py, rosenbrock.py, least_squares.py): gradgen.grad against central differences,
value_and_grad's value against the plain call, the emitted module run on its own under
``python -I`` with only NumPy importable, the command line in each docstring, and what the
emitted text looks like."""

from __future__ import annotations

import contextlib
import io
import pickle
import re
import shlex

import numpy as np
import pytest

import gradgen
from gradgen import cli

from .conftest import ROOT, load_example, run_emitted, run_isolated

# example -> (function name, argnums)
MODELS = {
    "logistic_regression": ("loss", (0, 1)),
    "mlp": ("loss", 0),
    "rnn": ("loss", (0, 1, 2)),
    "gmm": ("nll", (0, 1, 2)),
    "rosenbrock": ("rosenbrock", 0),
    "least_squares": ("val_loss", (0, 1)),
}


def _model(name):
    module = load_example(name)
    fn_name, argnums = MODELS[name]
    return module, getattr(module, fn_name), argnums, module.example_args()


# --- helpers ---------------------------------------------------------------------------------


def _as_tuple(grads, argnums):
    return grads if isinstance(argnums, tuple) else (grads,)


def _perturbed(value, path, delta):
    """A copy of an argument (float, array, or dict of arrays) with one element moved."""
    if isinstance(value, dict):
        key, rest = path[0], path[1:]
        return {**value, key: _perturbed(value[key], rest, delta)}
    if isinstance(value, np.ndarray):
        out = value.copy()
        out[path] += delta
        return out
    return value + delta


def _paths(value):
    if isinstance(value, dict):
        return [(key, *p) for key in value for p in _paths(value[key])]
    if isinstance(value, np.ndarray):
        return list(np.ndindex(value.shape))
    return [()]


def _pick(grad, path):
    while path and isinstance(grad, dict):
        grad, path = grad[path[0]], path[1:]
    return grad[path] if path else grad


def central_differences(fn, args, argnum, h=1e-6):
    """The finite-difference gradient of ``fn`` with respect to ``args[argnum]``, shaped like
    it (a dict of arrays for a dict argument), as ``{path: value}``."""
    out = {}
    for path in _paths(args[argnum]):
        up = list(args)
        down = list(args)
        up[argnum] = _perturbed(args[argnum], path, h)
        down[argnum] = _perturbed(args[argnum], path, -h)
        out[path] = (fn(*up) - fn(*down)) / (2 * h)
    return out


def assert_close_tree(a, b, rtol=1e-12, atol=1e-14):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            assert_close_tree(a[key], b[key], rtol, atol)
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            assert_close_tree(u, v, rtol, atol)
    else:
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


# --- every model: finite differences, value, the module on its own ---------------------------


@pytest.mark.parametrize("name", MODELS)
def test_gradient_matches_central_differences(name):
    _, fn, argnums, args = _model(name)
    grads = _as_tuple(gradgen.grad(fn, argnums=argnums)(*args), argnums)
    for argnum, grad in zip(argnums if isinstance(argnums, tuple) else (argnums,), grads,
                            strict=True):
        fd = central_differences(fn, args, argnum)
        for path, expected in fd.items():
            got = _pick(grad, path)
            assert np.isclose(got, expected, rtol=1e-6, atol=1e-7), (name, argnum, path)
        # the gradient has the argument's structure, shapes and dtypes
        if isinstance(args[argnum], dict):
            assert grad.keys() == args[argnum].keys()
            for key, value in args[argnum].items():
                assert grad[key].shape == value.shape and grad[key].dtype == value.dtype
        elif isinstance(args[argnum], np.ndarray):
            assert grad.shape == args[argnum].shape and grad.dtype == np.float64
        else:
            assert isinstance(grad, float)


@pytest.mark.parametrize("name", MODELS)
def test_value_and_grad(name):
    _, fn, argnums, args = _model(name)
    value, grads = gradgen.value_and_grad(fn, argnums=argnums)(*args)
    assert value == pytest.approx(fn(*args), rel=1e-13, abs=0)
    assert_close_tree(grads, gradgen.grad(fn, argnums=argnums)(*args))


@pytest.mark.parametrize("name", MODELS)
def test_emitted_module_runs_alone(name, tmp_path):
    _, fn, argnums, args = _model(name)
    expected = gradgen.grad(fn, argnums=argnums)(*args)
    source = gradgen.emit(fn, *args, argnums=argnums)
    (tmp_path / "args.pkl").write_bytes(pickle.dumps(args))
    out = tmp_path / "grad.pkl"
    load = f"__import__('pickle').load(open({str(tmp_path / 'args.pkl')!r}, 'rb'))"
    call = (f"__import__('pickle').dump(generated.{fn.__name__}_grad(*{load}), "
            f"open({str(out)!r}, 'wb'))")
    assert run_isolated(source, call, tmp_path) == "None"
    assert_close_tree(pickle.loads(out.read_bytes()), expected)


@pytest.mark.parametrize("name", MODELS)
def test_docstring_command_runs(name, monkeypatch):
    """The `gradgen emit ...` line in each example's docstring works as written (from the
    repository root)."""
    monkeypatch.chdir(ROOT)
    module = load_example(name)
    match = re.search(r"^\s*gradgen (emit .*)$", module.__doc__, re.MULTILINE)
    assert match, f"examples/{name}.py has no gradgen command in its docstring"
    argv = shlex.split(match.group(1))
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = cli.main(argv)
    assert status == 0, stderr.getvalue()
    fn_name = MODELS[name][0]
    assert f"def {fn_name}_grad(" in stdout.getvalue()
    assert f"Regenerate: gradgen {match.group(1)[:30]}" in stdout.getvalue()


# --- what the emitted code says ----------------------------------------------------------------


def _grad_function_text(source: str, fn_name: str) -> str:
    """The text of ``<fn>_grad`` alone (up to the next top-level def)."""
    start = source.index(f"def {fn_name}_grad(")
    end = source.find("\ndef ", start + 1)
    return source[start:] if end < 0 else source[start:end]


def test_rnn_forward_writes_rows_into_one_buffer():
    _, fn, argnums, args = _model("rnn")
    T, n = args[3].shape[0], args[0].shape[0]
    text = _grad_function_text(gradgen.emit(fn, *args, argnums=argnums), "loss")
    assert text.count(f"h = np.zeros(({T}, {n})") == 1
    rows = re.findall(r"^    h\[(\d+)\] = ", text, re.MULTILINE)
    assert rows == [str(t) for t in range(T)]
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    assert code.count("np.tanh(") == T  # the forward unrolled once, no recomputation
    assert "(1.0 - h_row" in text  # tanh' reuses the forward rows
    assert "return grad_W, grad_U, grad_b" in text


def test_mlp_module_reads_like_the_model():
    _, fn, argnums, args = _model("mlp")
    text = _grad_function_text(gradgen.emit(fn, *args, argnums=argnums), "loss")
    assert 'W1 = params["W1"]' in text
    assert "np.max(logits, axis=1, keepdims=True)" in text
    assert "np.tanh(X @ W1 + b1)" in text
    assert "(1.0 - h * h)" in text
    assert 'return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}' in text


def test_logistic_regression_module_keeps_logaddexp():
    _, fn, argnums, args = _model("logistic_regression")
    source = gradgen.emit(fn, *args, argnums=argnums)
    assert "np.logaddexp(" in source
    _, grad_b = run_emitted(source)["loss_grad"](*args)
    assert isinstance(grad_b, float)
    # large margins: the loss and its gradient stay finite where log(1 + exp(-m)) overflows
    w, _, X, y = args
    big = (w * 1e3, 500.0, X, y)
    g = gradgen.grad(fn, argnums=argnums)(*big)
    assert np.all(np.isfinite(g[0])) and np.isfinite(g[1])


def test_least_squares_module_solves_not_inverts():
    _, fn, argnums, args = _model("least_squares")
    text = _grad_function_text(gradgen.emit(fn, *args, argnums=argnums), "val_loss")
    assert "np.linalg.solve(" in text
    assert "np.linalg.inv(" not in text


def test_rosenbrock_module_and_minimum():
    _, fn, argnums, args = _model("rosenbrock")
    text = _grad_function_text(gradgen.emit(fn, *args, argnums=argnums), "rosenbrock")
    assert "x[1:]" in text and "x[:-1]" in text
    g = gradgen.grad(fn)
    np.testing.assert_array_equal(g(np.ones(7)), np.zeros(7))
    x = args[0]
    expected = np.zeros_like(x)  # the classic banded form
    expected[:-1] = -400 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2 * (1 - x[:-1])
    expected[1:] += 200 * (x[1:] - x[:-1] ** 2)
    np.testing.assert_allclose(g(x), expected, rtol=1e-13)


def test_gmm_gradient_ignores_the_shift():
    """The max shifts cancel: the gradient does not change when a shift is taken at a tie."""
    _, fn, argnums, args = _model("gmm")
    means, log_sigmas, _, x = args
    g = gradgen.grad(fn, argnums=argnums)
    tied = np.array([0.3, 0.3, -0.2])  # np.max(logits) is a tie
    fd = central_differences(fn, (means, log_sigmas, tied, x), 2)
    got = g(means, log_sigmas, tied, x)[2]
    np.testing.assert_allclose(got, [fd[(i,)] for i in range(3)], rtol=1e-6, atol=1e-7)
