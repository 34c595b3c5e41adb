"""The build turns the cyclic collector off while it runs and hands what it keeps to the oldest
generation (build.without_gc): the caller's collector settings and frozen objects stay theirs."""

import gc
import math

import pytest

import gradgen
from gradgen.ir import Node


def long_function(x, y):
    for _ in range(60):  # unrolled: a few hundred nodes, more than a young collection's 700
        x = math.sin(x) * y + math.cos(y)
    return x


def young_nodes() -> int:
    return sum(type(o) is Node for g in (0, 1) for o in gc.get_objects(generation=g))


@pytest.fixture
def collector():
    was_enabled = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    gc.unfreeze()
    if not was_enabled:
        gc.disable()


def test_the_kept_graph_goes_to_the_oldest_generation(collector):
    df = gradgen.grad(long_function, argnums=(0, 1))
    gx, gy = df(0.3, 0.7)
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    assert young_nodes() == 0  # a young collection would have walked each of them
    assert sum(type(o) is Node for o in gc.get_objects(generation=2)) > 700
    # the same numbers as a build whose objects stayed young
    gc.disable()
    again = gradgen.grad(long_function, argnums=(0, 1))(0.3, 0.7)
    gc.enable()
    assert (gx, gy) == again


def test_the_callers_frozen_objects_stay_frozen(collector):
    mine = [object() for _ in range(10)]
    gc.freeze()
    df = gradgen.grad(long_function, argnums=(0, 1))
    df(0.3, 0.7)
    assert gc.get_freeze_count() > 0
    assert not any(o is mine for o in gc.get_objects())  # (frozen ones are in no generation)
    assert young_nodes() > 0  # the build's were left young: freeze then unfreeze would thaw
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(collector):
    gc.disable()
    gradgen.grad(long_function, argnums=(0, 1))(0.3, 0.7)
    assert not gc.isenabled()
    gc.enable()
