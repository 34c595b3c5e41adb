"""Dead temporaries updated in place: ``g *= 2.0; g *= x_head`` where ``g`` is an array the
emitted function made itself and reads for the last time (emit.py's ``_Temporaries``), after
its copy into a buffer was scheduled ahead of that last read (optimize/early_writes.py).

Every program is emitted twice, with and without the in-place updates, and the gradients must
be equal to the last bit (the same ufuncs on the same elements), match finite differences, and
leave the caller's arrays unchanged. The cases name what must never be written into."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import gradgen
from gradgen.build import Request, build
from gradgen.ir import Aval, Node
from gradgen.ops import OPS
from gradgen.optimize import hoist_copying_writes

from .conftest import numeric_grad, run_emitted

emit_module = importlib.import_module("gradgen.emit")
optimize_module = importlib.import_module("gradgen.optimize")

# The benchmark's elementwise chain (20 ufuncs), read from its own file: the workload itself.
_MODELS = importlib.util.spec_from_file_location(
    "benchmark_models", Path(__file__).resolve().parents[1] / "benchmarks" / "models.py")
models = importlib.util.module_from_spec(_MODELS)
_MODELS.loader.exec_module(models)
chain = models.chain


def rosen(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def rows(A):
    d = A[1:, :] - A[:-1, :] ** 2
    return np.sum(d**2 * A[1:, :]) + np.sum(np.cos(A[:, 1:]))


def broadcast(x, M):
    d = x[1:] - x[:-1]
    return np.sum((d * M) ** 2) + np.sum(d**3)


def upcast(x, w):
    d = x[1:] - x[:-1] ** 2
    return np.sum(d**2 * w) + np.sum(x[:-1] ** 2)


def returned_slice(x):
    d = x[1:] - x[:-1] ** 2
    return np.sum(d**2) + np.sum(d[1:] * x[:-2])


def read_twice(x):
    d = x[1:] - x[:-1] ** 2
    e = 3.0 * d
    return np.sum(d * e) + np.sum(e**2 * x[1:]) + np.sum(np.sin(e) * x[:-1])


def returned_term(x):
    d = x[1:] - x[:-1] ** 2
    return np.sum(np.sin(d) * d)


RNG = np.random.default_rng(7)
CASES = {
    "rosen": (rosen, (RNG.uniform(-1.5, 1.5, 9),)),
    "rosen_f32": (rosen, (RNG.uniform(-1.5, 1.5, 9).astype(np.float32),)),
    "rows": (rows, (RNG.normal(size=(5, 3)),)),
    "broadcast": (broadcast, (RNG.normal(size=6), RNG.normal(size=(4, 5)))),
    "upcast": (upcast, (RNG.normal(size=6).astype(np.float32), RNG.normal(size=5))),
    "returned_slice": (returned_slice, (RNG.normal(size=7),)),
    "read_twice": (read_twice, (RNG.normal(size=7),)),
    "chain": (chain, (RNG.uniform(-1.0, 1.0, 8),)),
    "chain_f32": (chain, (RNG.uniform(-1.0, 1.0, 8).astype(np.float32),)),
    "returned_term": (returned_term, (RNG.normal(size=7),)),
}


def emitted(f, args, monkeypatch=None, **kwargs):
    """The module's (value, gradient) functions; with ``monkeypatch``, without updates."""
    if monkeypatch is not None:
        monkeypatch.setattr(emit_module._Temporaries, "update", lambda *a: None)
    source = gradgen.emit(f, *args, **kwargs)
    if monkeypatch is not None:
        monkeypatch.undo()
    return source, run_emitted(source)


def updates(source: str) -> list[str]:
    return re.findall(r"^\s+(\w+) [-+*/]= ", source, flags=re.MULTILINE)


@pytest.mark.parametrize("case", CASES)
def test_same_bits_as_without_updates_and_arguments_untouched(case, monkeypatch):
    f, args = CASES[case]
    source, module = emitted(f, args)
    _, plain = emitted(f, args, monkeypatch)
    saved = [a.copy() for a in args]
    for suffix in ("_grad", "_value_and_grad"):
        got = module[f.__name__ + suffix](*args)
        want = plain[f.__name__ + suffix](*args)
        if suffix == "_value_and_grad":
            assert got[0] == want[0]
            got, want = got[1], want[1]
        assert got.dtype == want.dtype == args[0].dtype
        np.testing.assert_array_equal(got, want)
        for a, b in zip(args, saved, strict=True):
            np.testing.assert_array_equal(a, b)  # never an argument or a view of one
    rtol = 2e-3 if args[0].dtype == np.float32 else 1e-6
    g = module[f.__name__ + "_grad"](*args)
    np.testing.assert_allclose(g, numeric_grad(f, [a.astype(np.float64) for a in args], 0),
                               rtol=rtol, atol=rtol)
    params = re.findall(r"def \w+\((.*?)\)", source)[0].split(", ")
    assert not set(updates(source)) & set(params), source


def test_rosenbrock_reuses_its_dead_temporary():
    source, _ = emitted(rosen, CASES["rosen"][1])
    grad = source.split("def rosen_value_and_grad")[0]
    assert "    grad_x[1:] = grad_x_tail_minus_x_head_sq\n" \
           "    # grad_x_tail_minus_x_head_sq is not read again: its array is reused\n" \
           "    grad_x_tail_minus_x_head_sq *= 2.0\n" \
           "    grad_x_tail_minus_x_head_sq *= x_head\n" in grad, grad
    assert "grad_x_head -= grad_x_tail_minus_x_head_sq\n" in grad


def test_a_renamed_product_is_reused():
    source, _ = emitted(rows, CASES["rows"][1])
    assert "grad_d *= 2.0" in source and "grad_A[:-1, :] -= grad_d\n" in source, source


def test_without_writes_a_term_of_a_fused_sum_is_reused():
    # no buffer here: grad_c's only reader is a term of grad_u's fused sum, grad_c * sin(u)
    source, _ = emitted(chain, CASES["chain"][1])
    grad = source.split("def chain_value_and_grad")[0]
    assert "    # grad_c is not read again: its array is reused\n" \
           "    grad_c *= np.sin(u)\n" in grad, grad
    assert "grad_u = grad_v * log1p_w - grad_c\n" in grad, grad


def test_a_broadcast_up_is_a_new_array():
    f, args = CASES["broadcast"]  # d * M has M's shape, not d's
    source, _ = emitted(f, args)
    assert not updates(source.replace("grad_x[", "")), source


def test_a_temporary_with_a_view_read_later_is_left_alone():
    source, _ = emitted(returned_slice, CASES["returned_slice"][1])
    for name in updates(source):
        assert not re.search(rf"\b{name}\[", source.split(f"{name} ")[-1]), source


def test_no_updates_for_the_array_api_nor_under_check_finite():
    f, args = CASES["rosen"]
    assert not updates(gradgen.emit(f, *args, target="array-api"))
    assert not [n for n in updates(gradgen.emit(f, *args, check_finite=True))
                if not n.startswith("grad_x")]


def test_the_copy_is_moved_ahead_of_the_other_reader_only():
    built = build(rosen, CASES["rosen"][1], Request())
    graph = built.specs[0].graph  # rosen_grad's, the copy already moved
    nodes = list(graph.nodes)
    write = next(n for n in nodes if n.op.name == "index_update")
    value = write.inputs[1].node
    readers = [n for n in nodes if any(r.node is value for r in n.inputs)]
    assert readers[0] is write  # the copy first: the other reader may take the array over
    again, changed = hoist_copying_writes(graph)
    assert not changed and again is graph
    # put the copy back after the value's other reader (graph order as reverse wrote it)
    nodes.remove(write)
    nodes.insert(nodes.index(readers[-1]) + 1, write)
    moved, changed = hoist_copying_writes(graph.with_nodes(nodes, graph.outputs))
    moved.verify()
    assert changed and moved.nodes.index(write) < moved.nodes.index(readers[-1])
    # ... but never ahead of a read of the array it writes into
    zeros = write.inputs[0].node
    blocked = [n for n in nodes if n is not write]
    blocked.insert(blocked.index(readers[-1]) + 1, write)
    reader = Node(OPS["sum"], (zeros.out,), {"axis": None, "keepdims": False},
                  (Aval((), zeros.aval.dtype),), write.loc, None, "bwd")
    blocked.insert(blocked.index(readers[-1]), reader)
    kept, changed = hoist_copying_writes(graph.with_nodes(blocked, graph.outputs))
    assert kept.nodes.index(write) > kept.nodes.index(readers[-1])


@pytest.mark.parametrize("case", ["rosen", "rows", "read_twice"])
def test_a_copy_left_after_the_last_read_keeps_the_temporary(case, monkeypatch):
    # Without the scheduling pass the copy reads the temporary after the product does: the
    # product must then make a new array, or the copy would take the updated values.
    f, args = CASES[case]
    _, with_updates = emitted(f, args)
    table = tuple(row for row in optimize_module.PASS_TABLE if row[0] is not hoist_copying_writes)
    monkeypatch.setattr(optimize_module, "PASS_TABLE", table)
    monkeypatch.setattr(optimize_module, "PASSES", tuple(run for run, _ in table))
    source, unscheduled = emitted(f, args)
    assert case != "rosen" or "grad_x_tail_minus_x_head_sq *=" not in source, source
    name = f.__name__ + "_grad"
    np.testing.assert_array_equal(unscheduled[name](*args), with_updates[name](*args))
