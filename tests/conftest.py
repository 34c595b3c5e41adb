"""Shared test helpers: run emitted modules in-process or isolated under ``python -I``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
# ruff on PATH, or beside this Python (a venv's bin/ when the venv is not activated: the
# style tests were skipped under `/path/to/venv/bin/python -m pytest`)
RUFF = shutil.which("ruff") or shutil.which("ruff", path=os.path.dirname(sys.executable))


def run_emitted(source: str) -> dict:
    """Exec an emitted module in a fresh namespace and return it."""
    namespace: dict = {"__name__": "emitted"}
    exec(compile(source, "<emitted>", "exec"), namespace)  # noqa: S102 - generated code
    return namespace


def run_isolated(source: str, call: str, tmp_path) -> str:
    """Run ``call`` against the module under ``python -I`` in an empty directory, where only
    the standard library and NumPy are importable; returns stdout."""
    module = tmp_path / "generated.py"
    module.write_text(source)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import generated
        import numpy as np
        assert not {{"gradgen", "sympy", "libcst"}} & set(sys.modules), "imported too much"
        print(repr({call}))
    """)
    result = subprocess.run([sys.executable, "-I", "-c", script], cwd=tmp_path,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def fresh(args) -> list:
    """Copies of the arrays among ``args``: a plain NumPy function may write into them."""
    return [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]


def numeric_grad(f, args, argnum: int = 0, eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``f(*args)`` in every element of ``args[argnum]`` (an array, a
    0-d array or a Python float), each call on fresh copies of the arguments."""
    x = np.asarray(args[argnum], dtype=np.float64)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        moved = []
        for h in (eps, -eps):
            y = x.copy()
            y[i] += h
            call = fresh(args)
            call[argnum] = y if isinstance(args[argnum], np.ndarray) else float(y)
            moved.append(float(f(*call)))
        out[i] = (moved[0] - moved[1]) / (2 * eps)
    return out


def assert_gradient(f, *args, argnums=0, rtol: float = 1e-6):
    """gradgen's gradient of ``f`` at ``args`` equals central differences, shaped like its
    argument, and the emitted module computes the same value and gradient. Returns (the
    gradient as ``grad`` returns it, the emitted source)."""
    import gradgen

    grads = gradgen.grad(f, argnums=argnums)(*args)
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    each = grads if isinstance(argnums, tuple) else (grads,)
    for k, g in zip(nums, each, strict=True):
        ref = numeric_grad(f, args, k)
        np.testing.assert_allclose(g, ref, rtol=rtol, atol=rtol * max(1.0, np.abs(ref).max()))
        assert np.shape(g) == np.shape(args[k])
    source = gradgen.emit(f, *args, argnums=argnums)
    value, emitted = run_emitted(source)[f"{f.__name__}_value_and_grad"](*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    emitted = emitted if isinstance(argnums, tuple) else (emitted,)
    for g, e in zip(each, emitted, strict=True):
        np.testing.assert_allclose(e, g, rtol=1e-12, atol=1e-14)
    return grads, source


def run_gradgen(*args: str, cwd: str = ROOT) -> subprocess.CompletedProcess:
    """``python -m gradgen *args`` in a subprocess that imports this checkout's src/; text
    output, the exit status left to the caller."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    return subprocess.run([sys.executable, "-m", "gradgen", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False)


def load_example(name: str):
    import importlib.util

    path = os.path.join(EXAMPLES, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def rng():
    return np.random.default_rng(0)
