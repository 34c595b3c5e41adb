"""Loading emitted modules: only the function asked for is compiled, every line is shown."""

from __future__ import annotations

import linecache
import traceback

import pytest

from gradgen.compile import load_module

MODULE = '''\
import math


def _helper(v):
    return v + 1


def f_grad(
    x,
):
    """Doc."""
    return _helper(math.cos(x))


def f_value_and_grad(x):
    return math.sin(x), 1 / 0
'''


def test_only_the_requested_function_is_compiled():
    namespace = load_module(MODULE, "f", "f_grad")
    assert namespace["f_grad"](0.0) == 2.0 and "f_value_and_grad" not in namespace
    filename = namespace["__file__"]
    assert "".join(linecache.getlines(filename)) == MODULE


def test_line_numbers_are_the_whole_modules():
    namespace = load_module(MODULE, "f", "f_value_and_grad")
    assert "f_grad" not in namespace and "_helper" in namespace
    with pytest.raises(ZeroDivisionError) as info:
        namespace["f_value_and_grad"](0.0)
    frame = traceback.extract_tb(info.tb)[-1]
    assert frame.lineno == 16 and frame.line == "return math.sin(x), 1 / 0"


def test_without_only_everything_is_compiled():
    namespace = load_module(MODULE, "f")
    assert {"f_grad", "f_value_and_grad", "_helper"} <= set(namespace)
