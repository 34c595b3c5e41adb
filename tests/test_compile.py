"""Loading emitted modules: compiled under a linecache-registered name, every line shown."""

from __future__ import annotations

import gc
import inspect
import linecache
import math
import traceback

import pytest

import gradgen
from gradgen.compile import load_module

MODULE = '''\
import math


def _helper(v):
    return v + 1


def f_value_and_grad(x):
    return math.sin(x), _helper(1 / 0)
'''


def test_the_text_is_registered_for_tracebacks_and_getsource():
    namespace = load_module(MODULE, "f")
    filename = namespace["__file__"]
    assert "".join(linecache.getlines(filename)) == MODULE
    assert inspect.getsource(namespace["_helper"]) == "def _helper(v):\n    return v + 1\n"
    with pytest.raises(ZeroDivisionError) as info:
        namespace["f_value_and_grad"](0.0)
    frame = traceback.extract_tb(info.tb)[-1]
    assert frame.lineno == 9 and frame.line == "return math.sin(x), _helper(1 / 0)"


def test_the_same_text_gets_the_same_name_and_another_text_another():
    first, again = load_module(MODULE, "f"), load_module(MODULE, "f")
    other = load_module(MODULE.replace("v + 1", "v + 2"), "f")
    assert first["__file__"] == again["__file__"] != other["__file__"]
    assert first["__file__"].startswith("<gradgen f ")


def test_the_text_leaves_linecache_with_the_last_module_of_it():
    # every guard path and signature of a long-lived @grad is a module: a process that makes
    # many must not keep every text it ever compiled
    first, again = load_module(MODULE, "f"), load_module(MODULE, "f")
    filename = first["__file__"]
    del first
    gc.collect()
    assert "".join(linecache.getlines(filename)) == MODULE  # `again` still runs this text
    del again
    gc.collect()
    assert filename not in linecache.cache


def test_a_dropped_gradient_takes_its_text_out_of_linecache():
    def f(x):
        return math.sin(x) * x

    before = set(linecache.cache)
    df = gradgen.grad(f)
    assert df(0.5) == pytest.approx(math.cos(0.5) * 0.5 + math.sin(0.5))
    names = {n for n in linecache.cache if n.startswith("<gradgen ")} - before
    assert names
    del df
    gc.collect()
    assert not set(names) & set(linecache.cache)
