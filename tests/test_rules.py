"""Every row of the op table, checked: each VJP against sympy's derivative of the op's symbolic
meaning and against central differences of its implementation, at order 1 and order 2, in
float64 and float32. The cases come from the table itself (each row's domain), so a new rule
is checked here without editing this file."""

from __future__ import annotations

import functools
import inspect
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
import sympy as sp

import gradgen
from gradgen.ops import OPS

# Rows that are not operations on values: nothing to differentiate, no symbolic meaning.
# function_output's VJP is the user's own backward (gradgen.Function; see test_function.py).
STRUCTURAL = {"input", "const", "guard", "seed", "function_output",
              "loop", "loop_bwd", "loop_out"}  # loop regions: tests/test_loops.py
# Rows reverse mode inserts; user code never calls them, but they are rules like any other.
INTERNAL = {"adjoint", "add_n", "copy", "cast"}

DIFFERENTIABLE = sorted(n for n, op in OPS.items() if op.vjp is not None and n not in STRUCTURAL)
NONDIFF = sorted(n for n, op in OPS.items() if op.nondiff and n not in STRUCTURAL)

MARGIN = 0.2  # how far samples stay from a domain's away_from points
FD_STEP = 1e-6

# Elementwise ops are tried on Python floats and on arrays broadcasting in every direction.
UNARY_LAYOUTS = ("py", (3,), (2, 3), ())
BINARY_LAYOUTS = (("py", "py"), ((3,), (3,)), ((2, 3), (3,)), ((3,), (2, 3)),
                  ((2, 1), (1, 3)), ((), (3,)), ((3,), "py"))
NONDIFF_LAYOUTS = {1: ("py", (4,)), 2: (("py", "py"), ((4,), (4,)), ((2, 4), (4,)))}


# --- cases ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Case:
    """One op at one input layout: each input a Python float ("py"), an array shape, or a
    NumPy array of ints or bools (an index or a mask: passed as it is, never differentiated)."""

    op: str
    layouts: tuple
    attrs: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        def text(layout):
            if isinstance(layout, np.ndarray):
                return f"{layout.dtype.kind}{'x'.join(map(str, layout.shape))}"
            if layout == "py":
                return "py"
            return "x".join(map(str, layout)) if layout else "0d"

        parts = [self.op, "_".join(text(lay) for lay in self.layouts)]
        parts += [f"{k}={v}".replace(" ", "") for k, v in self.attrs.items() if k != "uses"]
        return "-".join(parts)

    @property
    def has_array(self) -> bool:
        return any(not _fixed(lay) and lay != "py" for lay in self.layouts)

    @property
    def argnums(self) -> tuple[int, ...]:
        """The inputs that are differentiated: all but the fixed index and mask arrays."""
        return tuple(i for i, lay in enumerate(self.layouts) if not _fixed(lay))


def _fixed(layout) -> bool:
    return isinstance(layout, np.ndarray)


def _arity(op) -> int:
    return len(op.vjp) if op.vjp is not None else len(op.domain.bounds)


def _cases_of(name: str) -> list[Case]:
    op = OPS[name]
    if op.domain is None:
        return []
    if op.domain.cases:
        return [Case(name, tuple(shapes), dict(attrs)) for shapes, attrs in op.domain.cases]
    if not op.elementwise:
        return []
    if _arity(op) == 1:
        return [Case(name, (lay,)) for lay in UNARY_LAYOUTS]
    return [Case(name, lays) for lays in BINARY_LAYOUTS]


CASES = [case for name in DIFFERENTIABLE for case in _cases_of(name)]
BY_ID = {case.id: case for case in CASES}
ARRAY_CASES = [case for case in CASES if case.has_array]


def _params(cases):
    return [pytest.param(case.id, id=case.id) for case in cases]


# --- sampling ------------------------------------------------------------------------------


def _rng(case_id: str, salt: str = "") -> np.random.Generator:
    return np.random.default_rng(zlib.crc32((case_id + salt).encode()))


def _uniform(rng, bounds, shape, away_from=()) -> np.ndarray:
    """Uniform samples in ``bounds``, at least MARGIN from each ``away_from`` point, exactly
    representable in float32 (so the float64 and float32 runs see the same point)."""
    lo, hi = bounds
    out = np.empty(shape)
    for idx in np.ndindex(shape):
        while True:
            x = float(np.float32(rng.uniform(lo, hi)))
            if all(abs(x - p) >= MARGIN for p in away_from):
                break
        out[idx] = x
    return out


def _as_layout(values: np.ndarray, layout, dtype):
    return float(values) if layout == "py" else values.astype(dtype)


@functools.cache
def _sample(case_id: str, dtype_name: str = "float64"):
    """Inputs, the cotangent ``w`` of the op's output, and the direction ``v`` for order 2."""
    case = BY_ID[case_id]
    op = OPS[case.op]
    dtype = np.dtype(dtype_name)
    rng = _rng(case_id)
    bounds = op.domain.bounds
    xs, vs = [], []
    for i, layout in enumerate(case.layouts):
        if _fixed(layout):
            xs.append(layout)
            continue
        shape = () if layout == "py" else layout
        x = _uniform(rng, bounds[min(i, len(bounds) - 1)], shape, op.domain.away_from)
        xs.append(_as_layout(x, layout, dtype))
        vs.append(_as_layout(_uniform(rng, (-1.0, 1.0), shape), layout, dtype))
    out = op.impl(*[x if _fixed(lay) else _as_layout(np.asarray(x), lay, np.float64)
                    for x, lay in zip(xs, case.layouts, strict=True)], **case.attrs)
    w = _uniform(rng, (-1.0, 1.0), np.shape(out))
    w = float(w) if type(out) in (float, int) else w.astype(dtype)
    return tuple(xs), w, tuple(vs)


def _loss(case: Case, w):
    """sum(w * op(*xs)): the op traced inside a user-style function, with a random cotangent."""
    builder = OPS[case.op]
    attrs = case.attrs

    def f(*xs):
        # fixed index and mask arrays are constants of the program, as a literal index is
        xs = [lay if _fixed(lay) else x for x, lay in zip(xs, case.layouts, strict=True)]
        out = builder(*xs, **attrs)
        return np.sum(w * out) if isinstance(w, np.ndarray) else w * out

    return f


def _flat(grads) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(g, dtype=np.float64)) for g in grads])


def _scale(ref) -> float:
    return max(1.0, float(np.max(np.abs(ref)))) if np.size(ref) else 1.0


# --- gradgen's answers -----------------------------------------------------------------------


@functools.cache
def _gradgen_grad(case_id: str, dtype_name: str = "float64"):
    case = BY_ID[case_id]
    xs, w, _ = _sample(case_id, dtype_name)
    return gradgen.grad(_loss(case, w), argnums=case.argnums)(*xs)


def _dot(g, v):
    return np.sum(g * v) if isinstance(v, np.ndarray) else g * v


def _gradgen_hvp(case_id: str):
    """d/dx (grad f(x) . v): gradgen applied to a function that calls gradgen."""
    case = BY_ID[case_id]
    xs, w, vs = _sample(case_id)
    argnums = case.argnums
    inner = gradgen.grad(_loss(case, w), argnums=argnums)

    def grad_dot_v(*xs):
        total = 0.0
        for g, v in zip(inner(*xs), vs, strict=True):
            total = total + _dot(g, v)
        return total

    return gradgen.grad(grad_dot_v, argnums=argnums)(*xs)


# --- references ----------------------------------------------------------------------------


def _symbols(i: int, layout):
    if _fixed(layout):
        return layout
    if layout == "py":
        return sp.Symbol(f"x{i}", real=True)
    arr = np.empty(layout, dtype=object)
    for k, idx in enumerate(np.ndindex(layout)):
        arr[idx] = sp.Symbol(f"x{i}_{k}", real=True)
    return arr


def _symbolic(op, syms, attrs):
    """The op's meaning on symbols: elementwise rows map over broadcast object arrays."""
    if op.elementwise:
        if all(isinstance(s, sp.Basic) for s in syms):
            return op.sympy(*syms, **attrs)
        return np.frompyfunc(lambda *a: op.sympy(*a, **attrs), len(syms), 1)(*syms)
    return op.sympy(*syms, **attrs)


def _evaluate(expr, point, what: str) -> float:
    expr = sp.sympify(expr)
    if expr.has(sp.Derivative, sp.Subs):
        raise AssertionError(f"sympy cannot differentiate {what}: {expr} (a meaning must be "
                             "differentiable by sympy.diff, or gradgen.check cannot use it)")
    return float(expr.xreplace(point).evalf(30))


@functools.cache
def _sympy_reference(case_id: str):
    """The loss, its gradient and its Hessian-vector product, from the op's sympy meaning."""
    case = BY_ID[case_id]
    op = OPS[case.op]
    xs, w, vs = _sample(case_id)
    syms = [_symbols(i, lay) for i, lay in enumerate(case.layouts)]
    free = [syms[i] for i in case.argnums]
    flat_syms = [s for s in free for s in (np.ravel(s) if isinstance(s, np.ndarray) else [s])]
    flat_x = [float(x) for x in _flat([xs[i] for i in case.argnums])]
    point = {s: sp.Float(x, 30) for s, x in zip(flat_syms, flat_x, strict=True)}

    result = np.asarray(_symbolic(op, syms, case.attrs), dtype=object)
    loss = sp.Add(*[sp.Float(float(wk), 30) * rk
                    for wk, rk in zip(np.ravel(w), np.ravel(result), strict=True)])
    grads = [sp.diff(loss, s) for s in flat_syms]
    along_v = sp.Add(*[sp.Float(float(vk), 30) * gk for vk, gk in zip(_flat(vs), grads,
                                                                    strict=True)])
    hvp = [sp.diff(along_v, s) for s in flat_syms]
    return (_evaluate(loss, point, f"{op.name}'s loss"),
            np.array([_evaluate(g, point, f"{op.name}'s gradient") for g in grads]),
            np.array([_evaluate(h, point, f"{op.name}'s second derivative") for h in hvp]))


def _finite_differences(case_id: str, step: float) -> np.ndarray:
    """Central differences of sum(w * impl(*xs)) in every input element."""
    case = BY_ID[case_id]
    op = OPS[case.op]
    xs, w, _ = _sample(case_id)

    def loss(args):
        return float(np.sum(w * op.impl(*args, **case.attrs)))

    out = []
    for i in case.argnums:
        x = xs[i]
        for k in range(np.size(x)):
            values = []
            for h in (step, -step):
                args = list(xs)
                if isinstance(x, np.ndarray):
                    moved = x.copy()
                    moved.flat[k] += h
                    args[i] = moved
                else:
                    args[i] = x + h
                values.append(loss(args))
            out.append((values[0] - values[1]) / (2 * step))
    return np.array(out)


# --- the table itself ----------------------------------------------------------------------


def test_every_row_is_structural_nondifferentiable_or_has_a_rule():
    assert STRUCTURAL <= set(OPS)
    for name, op in OPS.items():
        assert not (op.nondiff and op.vjp is not None), f"{name}: nondiff with a vjp"
    skipped = set(OPS) - set(DIFFERENTIABLE)
    assert skipped == STRUCTURAL | set(NONDIFF), (
        "ops without a rule that are neither structural nor nondiff (their gradient would "
        f"silently be zero): {sorted(skipped - STRUCTURAL - set(NONDIFF))}")
    assert INTERNAL <= set(DIFFERENTIABLE)


def test_every_op_but_the_structural_ones_has_a_sympy_meaning():
    missing = [name for name, op in OPS.items() if name not in STRUCTURAL and op.sympy is None]
    assert not missing


def test_every_rule_is_exercised_here():
    covered = {case.op for case in CASES}
    assert covered == set(DIFFERENTIABLE), (
        "rules with no test case (give the row a domain, and domain.cases if it is not "
        f"elementwise): {sorted(set(DIFFERENTIABLE) - covered)}")
    assert len(BY_ID) == len(CASES), "two cases share an id"


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_rule_row_is_complete(name):
    op = OPS[name]
    assert op.sympy is not None
    assert op.domain is not None, f"{name} has a rule but no domain to test it on"
    if not (name in INTERNAL and op.rule_text == ()):  # docs/ops.md calls those "identity"
        assert len(op.rule_text) == len(op.vjp), f"{name} needs one rule_text per rule"
    assert all(isinstance(t, str) and t for t in op.rule_text)
    bounds = op.domain.bounds
    assert all(lo < hi for lo, hi in bounds)
    if not op.domain.cases:
        assert op.elementwise, f"{name} is not elementwise: its domain needs shape cases"
        assert len(bounds) == len(op.vjp), f"{name}: one domain bound per input"
    variadic = op.extra.get("variadic", False)
    for shapes, attrs in op.domain.cases:
        assert isinstance(attrs, dict)
        assert len(bounds) in (1, len(shapes)), f"{name}: one domain bound per input, or one"
        for i in range(len(shapes)):  # the rule reverse mode will pick for input i
            if _fixed(shapes[i]):
                continue
            assert callable(op.vjp[0] if variadic else op.vjp[i]), f"{name}: no rule for {i}"


# --- order 1 -------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id", _params(CASES))
def test_vjp_matches_sympy(case_id):
    case = BY_ID[case_id]
    xs, w, _ = _sample(case_id)
    value, ref, _ = _sympy_reference(case_id)
    op = OPS[case.op]
    impl_value = float(np.sum(w * op.impl(*xs, **case.attrs)))
    np.testing.assert_allclose(impl_value, value, rtol=1e-12, atol=1e-12,
                               err_msg=f"{case.op}: the sympy meaning disagrees with impl")
    grads = _gradgen_grad(case_id)
    assert len(grads) == len(case.argnums)
    for x, g in zip([xs[i] for i in case.argnums], grads, strict=True):
        if isinstance(x, float):
            assert type(g) is float, f"gradient of a float is {type(g).__name__}"
        else:
            assert isinstance(g, np.ndarray) and g.dtype == np.float64
            assert g.shape == x.shape
    np.testing.assert_allclose(_flat(grads), ref, rtol=1e-9, atol=1e-12 * _scale(ref))


@pytest.mark.parametrize("case_id", _params(CASES))
def test_vjp_matches_finite_differences(case_id):
    case = BY_ID[case_id]
    xs, _, _ = _sample(case_id)
    single = np.result_type(OPS[case.op].impl(*xs, **case.attrs)) == np.float32
    step, rtol = (1e-3, 1e-3) if single else (FD_STEP, 1e-5)  # an impl computing in float32
    ref = _finite_differences(case_id, step)
    np.testing.assert_allclose(_flat(_gradgen_grad(case_id)), ref, rtol=rtol,
                               atol=rtol * _scale(ref))


# --- order 2 -------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id", _params(CASES))
def test_second_order_matches_sympy(case_id):
    _, _, ref = _sympy_reference(case_id)
    hvp = _gradgen_hvp(case_id)
    np.testing.assert_allclose(_flat(hvp), ref, rtol=1e-9, atol=1e-12 * _scale(ref))


# --- float32 -------------------------------------------------------------------------------


@pytest.mark.parametrize("case_id", _params(ARRAY_CASES))
def test_float32_stays_float32(case_id):
    xs, _, _ = _sample(case_id, "float32")
    grads32 = _gradgen_grad(case_id, "float32")
    for x, g in zip([xs[i] for i in BY_ID[case_id].argnums], grads32, strict=True):
        if isinstance(x, float):
            assert type(g) is float
        else:
            assert np.result_type(g) == np.float32, f"a float32 input got a {g.dtype} gradient"
            assert np.shape(g) == x.shape
    ref = _flat(_gradgen_grad(case_id))
    np.testing.assert_allclose(_flat(grads32), ref, rtol=1e-4, atol=1e-4 * _scale(ref))


# --- ops without a rule --------------------------------------------------------------------


def _nondiff_cases():
    for name in NONDIFF:
        arity = len([p for p in inspect.signature(OPS[name].sympy).parameters.values()
                     if p.default is p.empty])
        for layouts in OPS[name].extra.get("nondiff_layouts", NONDIFF_LAYOUTS[arity]):
            layouts = layouts if arity > 1 else (layouts,)
            yield pytest.param(name, layouts, id=Case(name, layouts).id)


@pytest.mark.parametrize(("name", "layouts"), list(_nondiff_cases()))
def test_nondiff_op_passes_no_gradient(name, layouts):
    """grad of sum(x * op(x, y)) is op(x, y) in x and 0 in y: nothing flows through op."""
    op = OPS[name]
    rng = _rng(name, repr(layouts))
    xs = []
    for i, layout in enumerate(layouts):
        shape = () if layout == "py" else layout
        x = _uniform(rng, (-3.0, 3.0), shape, away_from=(0.0,))
        if i == 1 and shape:  # ties, so that eq/ne/le/ge see both outcomes
            x[::2] = np.reshape(xs[0], (-1, shape[0]))[0, ::2]
        if i in op.extra.get("sorted_inputs", ()):  # searchsorted's table
            x = np.sort(x, axis=None).reshape(np.shape(x))
        xs.append(_as_layout(x, layout, np.float64))
    value = op.impl(*xs)  # the first input always has the broadcast shape

    def f(*args):
        out = args[0] * OPS[name](*args)
        return out if layouts[0] == "py" else np.sum(out)

    grads = gradgen.grad(f, argnums=tuple(range(len(xs))))(*xs)
    assert type(grads[0]) is type(xs[0])
    np.testing.assert_array_equal(grads[0], np.asarray(value, dtype=np.float64))
    for x, g in zip(xs[1:], grads[1:], strict=True):
        assert type(g) is type(x) and np.shape(g) == np.shape(x)
        assert not np.any(g), f"{name} passed a gradient to its second input"

    syms = [_symbols(i, lay) for i, lay in enumerate(layouts)]
    meaning = np.ravel(np.asarray(_symbolic(op, syms, {}), dtype=object))
    flat_syms = [s for s in syms for s in (np.ravel(s) if isinstance(s, np.ndarray) else [s])]
    point = {s: sp.Float(float(x), 30) for s, x in zip(flat_syms, _flat(xs), strict=True)}
    expected = [float(bool(m.xreplace(point)) if isinstance(m, sp.logic.boolalg.Boolean)
                      else m.xreplace(point)) for m in meaning]
    np.testing.assert_array_equal(np.ravel(value).astype(np.float64), expected,
                                  err_msg=f"{name}: its sympy meaning disagrees with impl")


# --- kinks: the conventions the rows document ----------------------------------------------


@pytest.mark.parametrize(("name", "point", "expected"), [
    pytest.param("abs", (0.0,), (0.0,), id="abs"),  # sign(0) = 0
    pytest.param("fabs", (0.0,), (0.0,), id="fabs"),
    pytest.param("maximum", (1.5, 1.5), (1.0, 0.0), id="maximum"),  # a tie: like max(a, b)
    pytest.param("minimum", (1.5, 1.5), (1.0, 0.0), id="minimum"),
])
def test_kink_convention(name, point, expected):
    builder = OPS[name]

    def f(*xs):
        return builder(*xs)

    grads = gradgen.grad(f, argnums=tuple(range(len(point))))(*point)
    assert tuple(float(g) for g in grads) == expected
    arrays = tuple(np.full(3, p) for p in point)
    grads = gradgen.grad(lambda *xs: np.sum(builder(*xs)), argnums=tuple(range(len(point))))(
        *arrays)
    for g, e in zip(grads, expected, strict=True):
        np.testing.assert_array_equal(g, np.full(3, e))
