"""Shared test helpers: run emitted modules in-process or isolated under ``python -I``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


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
