"""gradgen.check: every example and every corpus function is proved or confirmed; a wrong
custom backward and a broken rule are caught and named; check_finite names the line whose
derivative is not finite."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import gradgen
from gradgen.check import check
from gradgen.ops.registry import OPS, Domain, call, defop

from .conftest import load_example, run_emitted
from .test_emitted_style import CORPUS

# --- every example ---------------------------------------------------------------------------

EXAMPLES = [
    ("square_plus", (2.0,), 0),
    ("reused_value", (2.0,), 0),
    ("add_mul", (2.0, 3.0, 4.0), (0, 1, 2)),
    ("sine", (0.5,), 0),
    ("doubling", (np.array([0.3, -0.2, 0.5]),), 0),
    ("double_triple", (3.0,), 0),
    ("softplus", (np.array([0.5, -1.0, 2.0]),), 0),
]


@pytest.mark.parametrize(("name", "args", "argnums"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_every_example_is_proved_or_confirmed(name, args, argnums):
    report = check(load_example(name).f, *args, argnums=argnums)
    assert report.results
    for result in report.results:
        assert result.method in ("proved", "sympy", "finite differences")
        assert result.max_rel_error < 1e-6 or result.max_abs_error < 1e-9
        assert result.points >= 2


def test_the_forum_examples_are_proved_symbolically():
    for name, args, argnums in EXAMPLES[:4]:
        report = check(load_example(name).f, *args, argnums=argnums)
        assert {r.method for r in report.results} == {"proved"}, name


def test_mm_example_checked_through_a_scalar_of_its_output():
    f = load_example("mm").f

    def loss(x, M):
        return np.sum(f(x, M) * np.array([[1.0, 2.0]]))

    report = check(loss, np.array([[2.0, 1.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]),
                   argnums=(0, 1))
    assert [r.name for r in report.results] == ["x", "M"]


# --- every function of the tests' corpus -------------------------------------------------------


def _scalar_corpus():
    for name, fn, args, kwargs in CORPUS:
        if kwargs.get("vjp"):
            continue  # a vector output: its pullback is checked in test_vjp.py
        yield pytest.param(fn, args, kwargs.get("argnums", 0), id=name)


@pytest.mark.parametrize(("fn", "args", "argnums"), list(_scalar_corpus()))
def test_every_corpus_function_is_proved_or_confirmed(fn, args, argnums):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        report = check(fn, *args, argnums=argnums, points=3)
    for result in report.results:
        ok = result.max_rel_error < 1e-5 or result.max_abs_error < 1e-8
        assert ok, f"{result.name}: {result.method} {result.max_abs_error} {result.max_rel_error}"


# --- mismatches are caught and named -------------------------------------------------------------


class WrongCube(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_values
        return g * 2 * x**2  # should be 3 * x**2


def test_a_wrong_custom_backward_is_named_with_its_line():
    def f(x):
        return np.sum(WrongCube.apply(x) + np.sin(x))

    with pytest.raises(gradgen.GradientMismatch) as info:
        check(f, np.array([0.5, 1.5]))
    message = str(info.value)
    assert "WrongCube.backward" in message
    assert f"test_check.py:{WrongCube.backward.__code__.co_firstlineno + 1}" in message  # def
    assert isinstance(info.value, AssertionError)
    assert info.value.report.results[0].name == "x"


def test_a_deliberately_broken_rule_is_named():
    # a test-only row: the VJP of "cube" claims 2u**2 instead of 3u**2
    cube = OPS.get("test_only_cube") or defop(
        "test_only_cube", lambda x: x**3, call(None, "cube"),
        vjp=(lambda g, ans, x: g * 2 * x * x,), sympy=lambda x: x**3,
        domain=Domain(((0.5, 2.0),)), elementwise=True)
    try:
        def f(x):
            y = cube(x) + x
            return y * 2.0

        with pytest.raises(gradgen.GradientMismatch) as info:
            check(f, 1.3)
        message = str(info.value)
        assert "op test_only_cube" in message
        assert "test_check.py:" in message
    finally:
        OPS.pop("test_only_cube", None)


def test_a_correct_rule_at_the_same_place_is_not_blamed():
    def f(x):
        return math.sin(x) ** 3 + x

    assert {r.method for r in check(f, 1.3).results} == {"proved"}


def huber(r, delta):
    a = np.abs(r)
    return np.sum(np.where(a < delta, 0.5 * r**2, delta * (a - 0.5 * delta)))


def test_a_mask_near_its_edge_is_not_flipped_by_the_nearby_points():
    # |r[1]| sits 0.2% above delta: the nearby points move it by about 1%, so some of them
    # flip the mask; the reference keeps the traced mask, so those points would blame a right
    # gradient (it happened: "max rel error 0.0282"). They are skipped like off-path points.
    r = np.array([0.3, -1.002, 2.5, 0.998, -0.1])
    report = check(huber, r, 1.0, points=8)
    assert report.results[0].points > 1  # the base and the points that keep the mask
    assert report.ok


def test_a_wrong_gradient_near_a_mask_edge_is_still_caught():
    def f(r):
        return np.sum(np.where(np.abs(r) < 1.0, WrongCube.apply(r), r))

    with pytest.raises(gradgen.GradientMismatch):
        check(f, np.array([0.3, -1.002, 0.5]))


def test_a_two_argument_product_is_proved_for_both_arguments():
    report = check(lambda x, y: x * y + x / y, 2.0, 3.0, argnums=(0, 1))
    assert [r.method for r in report.results] == ["proved", "proved"]


def test_large_arrays_use_finite_differences_along_random_directions():
    def f(x):
        return np.sum(np.tanh(x) * x)

    report = check(f, np.linspace(0.1, 1.0, 100))
    assert report.results[0].method == "finite differences"
    assert report.results[0].max_rel_error < 1e-5
    assert "finite differences" in report.table()


# --- check_finite ----------------------------------------------------------------------------------


def test_sympy_work_past_its_budget_falls_back_to_finite_differences():
    # a softmax cross-entropy over 15 weights: sympy needs minutes for its 15 derivatives
    def xent(W, X, y):
        logits = X @ W
        logits = logits - np.max(logits, axis=1, keepdims=True)
        return -np.mean(logits[np.arange(len(y)), y] - np.log(np.sum(np.exp(logits), axis=1)))

    rng = np.random.default_rng(0)
    W, X, y = rng.normal(size=(5, 3)), rng.normal(size=(8, 5)), rng.integers(0, 3, 8)
    report = check(xent, W, X, y, symbolic_seconds=0.0)
    assert [r.method for r in report.results] == ["finite differences"]
    assert report.results[0].max_rel_error < 1e-5


def test_check_finite_names_the_softplus_line():
    f = load_example("softplus").f
    df = gradgen.grad(f, check_finite=True)
    assert np.allclose(df(np.array([1.0])), 1 / (1 + np.exp(-1.0)))
    for x in (np.array([100.0], dtype=np.float32), np.array([1000.0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(gradgen.GradgenError) as info:
                df(x)
        message = str(info.value)
        assert message.startswith("softplus.py:6:")
        assert "np.log(1 + np.exp(x))" in message
        assert "not finite" in message


def test_check_finite_is_free_when_off():
    f = load_example("softplus").f
    off = gradgen.emit(f, np.array([1.0]))
    on = gradgen.emit(f, np.array([1.0]), check_finite=True)
    assert "isfinite" not in off and "NonFiniteGradient" not in off
    assert "NonFiniteGradient" in on


def test_check_finite_module_raises_its_own_error():
    f = load_example("softplus").f
    module = run_emitted(gradgen.emit(f, np.array([1.0]), check_finite=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(module["NonFiniteGradient"]) as info:
            module["f_grad"](np.array([1000.0]))
    assert "softplus.py:6" in str(info.value)
    assert issubclass(module["NonFiniteGradient"], ArithmeticError)


def test_sympys_meaning_of_a_max_shares_a_three_way_tie_equally():
    from gradgen.ops._sym import extreme, sp

    a, b, c = sp.symbols("a b c", real=True)
    top = extreme("max", a, b, c)
    at_tie = {a: 2, b: 2, c: 2}
    assert [sp.diff(top, s).subs(at_tie) for s in (a, b, c)] == [sp.Rational(1, 3)] * 3
    assert sp.diff(extreme("min", a, b, c), c).subs({a: 1, b: 3, c: 1}) == sp.Rational(1, 2)
    share = sp.lambdify([a, b, c], [sp.diff(top, s) for s in (a, b, c)], modules="numpy")
    assert share(1.0, 5.0, 5.0) == [0.0, 0.5, 0.5]


def test_a_max_shifted_softmax_is_checked_symbolically():
    # sympy's Max made this check spend its whole budget and fall back to finite differences
    def xent(W, X, y):
        logits = X @ W
        logits = logits - logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return -logp[np.arange(len(y)), y].mean()

    rng = np.random.default_rng(0)
    W, X = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    report = check(xent, W, X, np.array([0, 2, 1]))
    assert report.results[0].method in ("sympy", "proved")


def test_the_budgets_alarm_waits_while_a_finalizer_or_gc_callback_runs():
    """An exception raised in a ``__del__``, a weakref finalizer or a gc callback is printed
    ("Exception ignored in ...") and lost: an alarm landing there raises nothing, and the
    next one (a tenth of a second later) ends the work in sympy's own code."""
    import gc
    import signal
    import sys
    import weakref

    from gradgen.check import _Budget, _Timeout

    budget = _Budget(1.0)
    budget.armed = True  # as inside ``with budget:``, without a real timer

    def alarm_here() -> str:
        try:
            budget._on_alarm(signal.SIGALRM, sys._getframe(1))
        except _Timeout:
            return "raised"
        return "waited"

    seen = []

    class Finalized:
        def __del__(self):
            seen.append(("__del__", alarm_here()))

    Finalized()
    weakref.finalize(Finalized.__new__(Finalized), lambda: seen.append(
        ("finalize", alarm_here())))
    gc.collect()

    def callback(phase, info):
        if phase == "start":
            seen.append(("gc callback", alarm_here()))

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)
    seen.append(("sympy's code", alarm_here()))
    assert seen[0] == ("__del__", "waited") and ("finalize", "waited") in seen
    assert ("gc callback", "waited") in seen and seen[-1] == ("sympy's code", "raised")


def test_the_sympy_budget_survives_code_that_swallows_exceptions():
    """sympy catches exceptions in many places: the budget's alarm must still end the work
    (once it was swallowed inside simplify and a check ran for more than half an hour)."""
    import time

    from gradgen.check import _Budget, _Timeout

    swallowed = []
    with pytest.raises(_Timeout), _Budget(0.05):
        for _ in range(300):  # 3 s at most, if no alarm got through
            try:
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001 - what most of sympy's handlers catch
                    swallowed.append("exception")
            except BaseException:
                if swallowed:  # the second alarm: let it through
                    raise
                swallowed.append("bare except")  # a bare except swallows the first
    assert swallowed == ["bare except"]
    time.sleep(0.3)  # the block is over: no alarm is left to fire here
