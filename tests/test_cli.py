"""The command line, run as a subprocess: ``gradgen emit`` and ``python -m gradgen``."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from .conftest import ROOT, run_gradgen, run_isolated

EMIT = ["emit", "examples/reused_value.py:f", "--args", "(2.0,)"]
GOLDEN = os.path.join(ROOT, "tests", "golden", "reused_value.py")


def _gradgen(*args, cwd=ROOT):
    exe = shutil.which("gradgen")
    if exe is None:
        pytest.skip("the gradgen console script is not installed")
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)


def _module(*args, cwd=ROOT):
    return run_gradgen(*args, cwd=cwd)


def _golden() -> str:
    with open(GOLDEN) as fh:
        return fh.read()


def test_gradgen_emit_prints_the_golden_module():
    result = _gradgen(*EMIT)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == _golden()


def test_python_dash_m_is_the_same_program():
    result = _module(*EMIT)
    assert result.returncode == 0, result.stderr
    assert result.stdout == _golden()
    help_text = _module("--help")
    assert help_text.returncode == 0 and "emit" in help_text.stdout


def test_emit_to_a_file_that_runs_alone(tmp_path):
    out = tmp_path / "reused_value_grad.py"
    result = _module(*EMIT, "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    source = out.read_text()
    assert "def f_grad(x):" in source
    assert run_isolated(source, "generated.f_grad(2.0)", tmp_path) == "12.0"


def test_a_user_error_is_one_line_and_exit_status_2(tmp_path):
    result = _module("emit", "no_such_file.py:f", "--args", "(2.0,)")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no_such_file.py" in result.stderr and "Traceback" not in result.stderr

    result = _module("emit", "examples/reused_value.py:f", "--args", "(2,)")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "reused_value.py:" in line and "int" in line
