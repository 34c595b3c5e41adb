"""Every row of the op table under target="array-api": its case from the table (the same
cases test_rules.py checks against sympy) is emitted as an array-API module, run on NumPy
arrays through array_api_compat, and compared with the NumPy target's gradient; or the row
is refused at emit time with an UnsupportedOperation that names the operation and the line.
A row that changes between the two is a change to the REFUSED sets, which docs/ops.md shows
(gradgen/opsdoc.py)."""

from __future__ import annotations

import inspect
import io
import re
import tokenize

import numpy as np
import pytest

import gradgen
from gradgen.ops import OPS
from gradgen.opsdoc import ARRAY_API_PARTLY, ARRAY_API_REFUSED
from tests.conftest import run_emitted
from tests.test_rules import (
    CASES,
    NONDIFF,
    NONDIFF_LAYOUTS,
    STRUCTURAL,
    Case,
    _as_layout,
    _loss,
    _rng,
    _sample,
    _uniform,
)

pytest.importorskip("array_api_compat")

# Rows with no array-API form in gradgen, each refused by name at emit time, and rows refused
# for some of their cases only: docs/ops.md's "array API" column says the same.
REFUSED = ARRAY_API_REFUSED
PARTLY_REFUSED = ARRAY_API_PARTLY


def _emit_xp(f, args, argnums):
    return gradgen.emit(f, *args, argnums=argnums, target="array-api")


def _run(source, fname, args):
    module = run_emitted(source)
    return module[f"{fname}_grad"](*args)


def _assert_same(got, want, what):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.shape(g) == np.shape(w), what
        if isinstance(w, float):
            assert isinstance(g, float), f"{what}: a Python float stays a Python float"
        np.testing.assert_allclose(np.asarray(g, dtype=np.float64),
                                   np.asarray(w, dtype=np.float64),
                                   rtol=1e-12, atol=1e-12, err_msg=what)


def _check_refusal(error, source_line_file="test_rules.py"):
    text = str(error)
    assert "target='array-api'" in text
    assert re.search(rf"{source_line_file}:\d+", text), f"no user line in: {text}"


def assert_no_numpy(source: str) -> None:
    """No NumPy in the code (comments and messages may quote the user's NumPy source)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    code = " ".join(t.string for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING))
    assert "numpy" not in code and not re.search(r"\bnp\s*\.", code), source


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_row_runs_on_the_array_api_or_is_refused_by_name(case):
    xs, w, _ = _sample(case.id)
    f = _loss(case, w)
    want = gradgen.grad(f, argnums=case.argnums)(*xs)
    try:
        source = _emit_xp(f, xs, case.argnums)
    except gradgen.UnsupportedOperation as error:
        if not case.has_array:  # Python floats only: NumPy calls give NumPy scalars there
            assert "target='numpy'" in str(error)
            return
        _check_refusal(error)
        assert case.op in REFUSED | PARTLY_REFUSED, f"{case.op} refused: {error}"
        return
    assert case.op not in REFUSED or not case.has_array, (
        f"{case.op} now has an array-API form: update REFUSED")
    assert_no_numpy(source)
    _assert_same(_run(source, "f", xs), want, case.id)


def _nondiff_params():
    for name in NONDIFF:
        arity = len([p for p in inspect.signature(OPS[name].sympy).parameters.values()
                     if p.default is p.empty])
        layouts = OPS[name].extra.get("nondiff_layouts", NONDIFF_LAYOUTS[arity])[1]
        layouts = layouts if arity > 1 else (layouts,)
        yield pytest.param(name, layouts, id=Case(name, layouts).id)


@pytest.mark.parametrize(("name", "layouts"), list(_nondiff_params()))
def test_nondiff_row_runs_on_the_array_api_or_is_refused_by_name(name, layouts):
    rng = _rng(name, "array-api")
    xs = [_as_layout(_uniform(rng, (-3.0, 3.0), lay, away_from=(0.0,)), lay, np.float64)
          for lay in layouts]

    def f(*args):
        return np.sum(args[0] * OPS[name](*args))

    argnums = tuple(range(len(xs)))
    want = gradgen.grad(f, argnums=argnums)(*xs)
    try:
        source = _emit_xp(f, xs, argnums)
    except gradgen.UnsupportedOperation as error:
        _check_refusal(error, "test_array_api_rows.py")
        assert name in REFUSED, f"{name} refused: {error}"
        return
    assert name not in REFUSED, f"{name} now has an array-API form: update REFUSED"
    _assert_same(_run(source, "f", xs), want, name)


def test_every_row_is_walked():
    """Each row is reached by one of the tests above, or is structural (no value to print)."""
    walked = {case.op for case in CASES} | set(NONDIFF)
    assert set(OPS) - walked <= STRUCTURAL
    assert REFUSED <= set(OPS) and PARTLY_REFUSED <= set(OPS)
