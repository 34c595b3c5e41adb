"""Loops stay loops: uniform iterations are emitted as a forward and a reversed backward loop.

Each program is checked three ways: ``gradgen.grad`` against central differences (or a
closed form), the emitted module at other inputs of the same shapes against the unrolled
module, and the emitted module's length against the trip count (it follows the body)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gradgen
from gradgen.errors import GradgenError
from tests.conftest import numeric_grad, run_emitted

# --- the programs ------------------------------------------------------------------------------


def pendulum(theta0, omega0, dt, n):
    theta, omega = theta0, omega0
    for _ in range(n):
        omega = omega - dt * math.sin(theta)
        theta = theta + dt * omega
    return theta * theta + omega


def gru(Wz, Wh, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        x = xs[t]
        z = 1 / (1 + np.exp(-(Wz @ h + U @ x)))
        candidate = np.tanh(Wh @ h + U @ x)
        h = (1 - z) * h + z * candidate
    return np.sum(h**2)


def per_sample_loss(w, X, y):
    total = 0.0
    for i in range(X.shape[0]):
        err = X[i] @ w - y[i]
        total = total + err * err
    return total / X.shape[0]


def pair_energy(P):
    energy = 0.0
    for i in range(P.shape[0]):
        for j in range(P.shape[0]):
            d = P[i] - P[j]
            energy = energy + np.exp(-np.sum(d * d))
    return energy


def ema(xs, alpha):
    m = xs[0]
    for t in range(1, xs.shape[0]):
        m = alpha * xs[t] + (1 - alpha) * m
    return m * m


def clipped_walk(x, steps):
    for t in range(steps.shape[0]):
        if steps[t] > 0:
            x = x + steps[t] * np.sin(x)
        else:
            x = x * 0.99
    return x


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
    return x


def running_max_softplus(w, xs):
    s = 0.0
    for t in range(xs.shape[0]):
        s = s + np.log1p(np.exp(xs[t] @ w))
    return s


# --- helpers ------------------------------------------------------------------------------------


def _modules(fn, args, argnums=0):
    rolled = gradgen.emit(fn, *args, argnums=argnums)
    flat = gradgen.emit(fn, *args, argnums=argnums, loops="unroll")
    return rolled, flat


def _has_loop(source: str) -> bool:
    return re.search(r"^ +for \w+ in ", source, re.MULTILINE) is not None


def _call(source, fn, args):
    return run_emitted(source)[f"{fn.__name__}_value_and_grad"](*args)


def _same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
        return
    assert type(a) is type(b), (type(a), type(b))
    # the loop adds a weight's gradient trip by trip; unrolled code may add in another order
    tight = np.result_type(a) == np.float64
    np.testing.assert_allclose(a, b, rtol=1e-10 if tight else 1e-5, atol=1e-12 if tight else 1e-6)


def _check_program(fn, args, other_args, argnums=0):
    """The rolled module equals the unrolled one at the traced inputs and at others."""
    rolled, flat = _modules(fn, args, argnums)
    assert _has_loop(rolled) and not _has_loop(flat)
    for point in (args, other_args):
        _same(_call(rolled, fn, point), _call(flat, fn, point))
    return rolled


def _fd_check(fn, args, argnum):
    got = gradgen.grad(fn, argnums=argnum)(*args)
    want = numeric_grad(fn, list(args), argnum)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


# --- the vertical slice: carried scalars and arrays, xs[t], invariant weights ------------------


def test_pendulum_over_thousands_of_steps():
    args = (0.5, 0.1, 0.001, 3000)
    for argnum in (0, 1, 2):
        _fd_check(pendulum, args, argnum)
    rolled = gradgen.emit(pendulum, *args, argnums=(0, 1, 2))
    namespace = run_emitted(rolled)
    for point in ((0.3, -0.2, 0.002, 3000), args):
        got = namespace["pendulum_grad"](*point)
        for argnum in (0, 1, 2):
            want = numeric_grad(pendulum, list(point), argnum)
            assert got[argnum] == pytest.approx(float(want), rel=1e-5, abs=1e-8)
    shorter = gradgen.emit(pendulum, 0.5, 0.1, 0.001, 300, argnums=(0, 1, 2))
    assert rolled.count("\n") == shorter.count("\n") < 120  # the body, not the trip count
    assert "for t in reversed(range(3000)):" in rolled
    assert "math.sin(theta)" in rolled and "grad_omega" in rolled
    # grad_omega's new value is a fused sum computed straight into the carry, no rename after
    assert "grad_omega = grad_omega + " in rolled and "grad_omega = grad_omega_1" not in rolled
    _check_program(pendulum, (0.5, 0.1, 0.01, 100), (0.3, -0.2, 0.02, 100), argnums=(0, 1, 2))


def test_gated_recurrent_cell_over_xs():
    rng = np.random.default_rng(1)
    n, d, T = 4, 3, 300
    args = [rng.normal(size=(n, n)) * 0.3, rng.normal(size=(n, n)) * 0.3,
            rng.normal(size=(n, d)) * 0.3, rng.normal(size=(T, d)), rng.normal(size=n)]
    small = [a[:20] if k == 3 else a for k, a in enumerate(args)]
    for argnum in range(5):
        _fd_check(gru, small, argnum)
    rolled = gradgen.emit(gru, *args, argnums=(0, 1, 2, 3, 4))
    assert "for t in range(300):" in rolled and "xs[t]" in rolled
    # xs[t]'s gradient is a row per trip: the stacked rows times U, after the loop
    assert "grad_xs = grad_Wz_h_plus_U_x_rows @ U + grad_Wh_h_plus_U_x_rows @ U" in rolled
    # U's two shares per trip (z and the candidate) are two products after the loop, and
    # the states both W_z and W_h read are stacked once
    assert "grad_U = grad_Wz_h_plus_U_x_rows.T @ xs + grad_Wh_h_plus_U_x_rows.T @ xs" in rolled
    assert rolled.count("h_rows = np.array(h_saved[:-1])") == 2  # _grad and _value_and_grad
    other = [rng.normal(size=a.shape) for a in args]
    other[0] *= 0.3
    got = run_emitted(rolled)["gru_grad"](*other)
    for argnum in (0, 4):  # at inputs it was not traced at, against central differences
        np.testing.assert_allclose(got[argnum], numeric_grad(gru, other, argnum), rtol=1e-5,
                                   atol=1e-8)
    shorter = gradgen.emit(gru, *small, argnums=(0, 1, 2, 3, 4))
    assert rolled.count("\n") == shorter.count("\n")
    small_other = [a[:20] if k == 3 else a for k, a in enumerate(other)]
    _check_program(gru, small, small_other, argnums=(0, 1, 2, 3, 4))


def test_per_sample_loss_over_rows():
    rng = np.random.default_rng(2)
    X, y, w = rng.normal(size=(64, 5)), rng.normal(size=64), rng.normal(size=5)
    got = gradgen.grad(per_sample_loss)(w, X, y)
    np.testing.assert_allclose(got, 2 * X.T @ (X @ w - y) / 64, rtol=1e-10)
    rolled = _check_program(per_sample_loss, (w, X, y),
                            (rng.normal(size=5), rng.normal(size=(64, 5)), rng.normal(size=64)))
    # total = 0.0 starts a NumPy float: the loop starts from it converted
    assert "for i in reversed(range(64)):" in rolled
    # X[i] @ w for every row at once before the loop; grad_w as one product after it
    assert "X_w = X @ w" in rolled and "X_w[i]" in rolled
    assert "grad_errs[i] = grad_err" in rolled and "grad_w = grad_errs @ X" in rolled
    assert "total = np.float64(0.0)" in rolled


def test_double_loop_over_pairs_nests():
    rng = np.random.default_rng(3)
    P = rng.normal(size=(16, 2))
    _fd_check(pair_energy, (P,), 0)
    rolled = _check_program(pair_energy, (P,), (rng.normal(size=(16, 2)),))
    assert len(re.findall(r"^    for i in range\(16\):", rolled, re.MULTILINE)) == 2
    assert "    for j in range(16):" in rolled and "for j in reversed(range(16)):" in rolled


def test_exponential_moving_average_starts_at_one():
    rng = np.random.default_rng(4)
    xs = rng.normal(size=200)
    alpha = 0.1
    _fd_check(ema, (xs, alpha), 0)
    _fd_check(ema, (xs, alpha), 1)
    rolled = _check_program(ema, (xs, alpha), (rng.normal(size=200), 0.3), argnums=(0, 1))
    assert "for t in range(1, 200):" in rolled and "xs[t]" in rolled


def test_branch_on_some_iterations_splits_into_runs_with_guards():
    # two runs of at least 100 trips (the first trip of the first one converts x): two loops
    steps = np.where(np.arange(250) < 125, 0.01, -0.01)
    got = gradgen.grad(clipped_walk)(0.3, steps)
    want = numeric_grad(clipped_walk, [0.3, steps], 0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    rolled = _check_program(clipped_walk, (0.3, steps), (0.7, steps * 2))
    # two uniform runs (the branch taken, then the other), each a loop of its own
    loops = re.findall(r"^ +for t in range\(\d", rolled, re.MULTILINE)
    assert len(loops) == 4  # in _grad and in _value_and_grad
    assert "if steps[t] > 0:" in rolled and "if not steps[t] > 0:" in rolled
    flipped = steps.copy()
    flipped[180] = 0.01  # off the traced path: the guard in the loop body fires
    namespace = run_emitted(rolled)
    with pytest.raises(namespace["GuardFailure"], match=r"steps\[t\] > 0"):
        namespace["clipped_walk_grad"](0.3, flipped)
    df = gradgen.grad(clipped_walk)  # the decorator retraces on the other path
    np.testing.assert_allclose(df(0.3, flipped), numeric_grad(clipped_walk, [0.3, flipped], 0),
                               rtol=1e-6)


def test_while_loop_newton_iteration_has_a_guard_on_the_count():
    for a in (2.0, 10.0):
        np.testing.assert_allclose(gradgen.grad(newton_sqrt)(a), 0.5 / math.sqrt(a),
                                   rtol=1e-9)
    source = gradgen.emit(newton_sqrt, 2.0)
    namespace = run_emitted(source)
    assert namespace["newton_sqrt_grad"](2.0) == pytest.approx(0.5 / math.sqrt(2.0))
    with pytest.raises(namespace["GuardFailure"]):
        namespace["newton_sqrt_grad"](1e6)  # needs more Newton steps than traced


def test_long_while_loop_rolls_and_checks_its_condition_each_trip():
    def decay(x):
        while x > 1e-3:
            x = x * 0.95  # 135 trips: a short one would be unrolled
        return x

    source = gradgen.emit(decay, 1.0)
    assert re.search(r"for \w+ in range\(", source) and "if not x > 0.001:" in source
    namespace = run_emitted(source)
    assert namespace["decay_grad"](1.0) == pytest.approx(0.95 ** 135)
    with pytest.raises(namespace["GuardFailure"], match="x > 1e-3"):
        namespace["decay_grad"](100.0)


def test_short_loops_stay_unrolled():
    source = gradgen.emit(pendulum, 0.5, 0.1, 0.01, 5)
    assert not _has_loop(source)


def long_scalar_body(x, y, n):
    for _ in range(n):
        a = math.sin(x) * y + math.cos(y) * x
        b = math.exp(-a * a) + math.tanh(x * y)
        c = math.sqrt(1.0 + b * b) - math.log1p(a * a)
        x = x + 0.01 * (a * c - b)
    return x


def test_short_scalar_loops_unroll_while_small_and_everything_else_stays_a_loop():
    # under 100 trips of scalar code and at most 500 ops unrolled: straight-line code
    assert not _has_loop(gradgen.emit(pendulum, 0.5, 0.1, 0.01, 90, argnums=(0, 1)))
    # 100 trips always stay a loop
    assert _has_loop(gradgen.emit(pendulum, 0.5, 0.1, 0.01, 100, argnums=(0, 1)))
    # a short scalar loop whose unrolled code would pass 500 ops stays a loop
    args = (0.3, 0.7, 60)
    big = _check_program(long_scalar_body, args, (0.2, 0.5, 60), argnums=(0, 1))
    assert "for _ in reversed(range(60)):" in big or "for t in reversed(range(60)):" in big
    assert not _has_loop(gradgen.emit(long_scalar_body, 0.3, 0.7, 20, argnums=(0, 1)))
    _fd_check(long_scalar_body, args, 1)
    # arrays stay loops however short (their backward batches: see the next test)
    rng = np.random.default_rng(8)
    rnn_args = [rng.normal(size=(3, 3)) * 0.3, rng.normal(size=(3, 2)), rng.normal(size=3),
                rng.normal(size=(20, 2)), np.ones(3)]
    assert _has_loop(gradgen.emit(biased_rnn, *rnn_args))


def biased_rnn(W, U, b, xs, h0):
    h = h0
    for t in range(1, xs.shape[0]):
        h = np.tanh(W @ np.sin(h) + U @ xs[t] + b)
    return np.sum(h * h)


def test_weight_gradients_are_one_product_after_the_loop():
    rng = np.random.default_rng(9)
    args = [rng.normal(size=(3, 3)) * 0.3, rng.normal(size=(3, 2)), rng.normal(size=3),
            rng.normal(size=(30, 2)), np.ones(3)]
    other = [rng.normal(size=a.shape) * (0.3 if k == 0 else 1.0) for k, a in enumerate(args)]
    rolled = _check_program(biased_rnn, args, other, argnums=(0, 1, 2, 3, 4))
    for argnum in range(5):
        _fd_check(biased_rnn, args, argnum)
    # the forward reads U @ xs[t] from one product; the backward stores each trip's
    # pre-activation gradient and multiplies the stacks once after the loop
    assert "U_xs = xs[1:] @ U.T" in rolled and "U_xs[t - 1]" in rolled
    assert "grad_h_parts = np.empty((29, 3))" in rolled
    assert "grad_h_parts[t - 1] = grad_h_part" in rolled
    assert "grad_W = grad_h_parts.T @ np.array(sin_h_saved)" in rolled
    assert "grad_U = grad_h_parts.T @ xs[1:]" in rolled
    assert "grad_b = grad_h_parts.sum(axis=0)" in rolled
    assert "grad_xs = np.zeros_like(xs)" in rolled  # xs[0] is not read: its row stays 0
    assert "grad_xs[1:] = grad_h_parts @ U" in rolled
    assert "np.outer" not in rolled and "grad_W +=" not in rolled
    # tanh's and sin's derivatives read forward values only: one op each over all the trips'
    # states, before the backward loop, which reads their rows
    before, loop = rolled[:rolled.index("_value_and_grad")].split("for t in reversed(")
    assert "h_rows = np.array(h_saved)" in before and "h_rows_tail = h_rows[1:]" in before
    assert "one_minus_h_sq = 1.0 - h_rows_tail * h_rows_tail" in before
    assert "cos_h = np.cos(h_rows[:-1])" in before
    assert "grad_h_part = grad_h * one_minus_h_sq[t - 1]" in loop
    assert "grad_h = grad_h_part @ W * cos_h[t - 1]" in loop
    assert "np.cos" not in loop and "1.0 -" not in loop


def tanh_rnn(W, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h * h)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_per_trip_function_of_forward_values_runs_once_over_all_trips(dtype):
    rng = np.random.default_rng(12)
    args = [(rng.normal(size=(3, 3)) * 0.4).astype(dtype), rng.normal(size=(3, 2)).astype(dtype),
            rng.normal(size=(40, 2)).astype(dtype), rng.normal(size=3).astype(dtype)]
    other = [(rng.normal(size=a.shape) * (0.4 if k == 0 else 1.0)).astype(dtype)
             for k, a in enumerate(args)]
    old = _check_program(tanh_rnn, args, other, argnums=(0, 1, 2, 3))
    hoisted = "one_minus_h_sq = 1.0 - h_rows_tail * h_rows_tail\n"
    assert old.count(hoisted) == 2 and old.count("one_minus_h_sq[t]") == 2
    # the states are made an array once: the hoisted op and grad_W read it
    assert old.count("h_rows = np.array(h_saved)") == 2
    assert "grad_W = grad_h_parts.T @ h_rows[:-1]" in old
    got = run_emitted(old)["tanh_rnn_grad"](*other)
    assert all(g.dtype == dtype for g in got)
    if dtype == np.float64:
        for argnum in range(4):
            _fd_check(tanh_rnn, args, argnum)
    # the arguments are read, never written
    copies = [a.copy() for a in other]
    run_emitted(old)["tanh_rnn_value_and_grad"](*other)
    assert all(np.array_equal(a, b) for a, b in zip(other, copies, strict=True))


def test_a_number_per_trip_is_not_stacked():
    # the pendulum's derivatives read Python floats: a float costs less than a row of an array
    rolled = gradgen.emit(pendulum, 0.5, 0.1, 0.01, 200, argnums=(0, 1, 2))
    assert "np.array(" not in rolled and "_rows" not in rolled


def linear_recurrence(W, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = W @ h + xs[t]
    return np.sum(h * h)


def test_an_adjoint_added_after_the_trip_is_read_before_its_update():
    # grad_xs[t] (and the stored rows of grad_W) take grad_h as the trip found it; the
    # trip's new grad_h must not overwrite it first
    rng = np.random.default_rng(10)
    args = [rng.normal(size=(3, 3)) * 0.3, rng.normal(size=(30, 3)), np.ones(3)]
    other = [rng.normal(size=(3, 3)) * 0.3, rng.normal(size=(30, 3)), rng.normal(size=3)]
    for argnums in (1, (0, 1, 2)):
        rolled = _check_program(linear_recurrence, args, other, argnums=argnums)
        assert "grad_xs[t] += grad_h\n" in rolled
    assert "grad_hs[t] = grad_h\n" in rolled
    for argnum in range(3):
        _fd_check(linear_recurrence, args, argnum)


def test_unroll_option_and_cli_flag():
    rolled, flat = _modules(pendulum, (0.5, 0.1, 0.01, 100))
    assert flat.count("\n") > 10 * rolled.count("\n")
    with pytest.raises(GradgenError, match="loops must be"):
        gradgen.emit(pendulum, 0.5, 0.1, 0.01, 100, loops="roll")
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "gradgen", "emit", "examples/rnn_loop.py:loss", "--args",
               "(np.eye(3), np.ones((3, 2)), np.ones((20, 2)), np.zeros(3))"]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    for extra, looped in (([], True), (["--unroll"], False)):
        done = subprocess.run(command + extra, cwd=root, env=env, capture_output=True,
                              text=True, check=True)
        assert _has_loop(done.stdout) is looped
        assert ("--unroll" in done.stdout.splitlines()[1]) is not looped


def test_trace_lists_the_loop_once():
    rng = np.random.default_rng(5)
    graph = gradgen.trace(per_sample_loss, rng.normal(size=3), rng.normal(size=(40, 3)),
                          rng.normal(size=40))
    text = str(graph)
    assert re.search(r"loop\[\d+ trips from test_loops.py:\d+\]", text)
    body = text.split("loop[")[1]
    assert "{ lambda total:f64[]" in body and "getitem" not in body.split("in (")[0]
    graph.verify()
    flat = gradgen.trace(per_sample_loss, rng.normal(size=3), rng.normal(size=(40, 3)),
                         rng.normal(size=40), loops="unroll")
    assert "loop[" not in str(flat)


def test_check_sees_through_the_loop():
    report = gradgen.check(pendulum, 0.5, 0.1, 0.01, 20, argnums=(0, 1))
    assert report.ok


def test_intermediates_of_a_carry_keep_the_loop():
    # the adjoint of the last value bound to s: the loop's result, so the loop stays
    xs = np.linspace(-1, 1, 30)
    df = gradgen.grad(running_max_softplus, intermediates=("s",))
    g, extra = df(np.ones(1), xs[:, None])
    assert _has_loop(df.source)
    np.testing.assert_allclose(extra["s"], 1.0)
    assert g.shape == (1,)


def test_grad_of_grad_through_a_loop():
    def f(x):
        y = x
        for _ in range(20):
            y = np.sin(y)
        return y

    d2 = gradgen.grad(gradgen.grad(f))(0.4)
    h = 1e-5
    d1 = gradgen.grad(f)
    assert d2 == pytest.approx((d1(0.4 + h) - d1(0.4 - h)) / (2 * h), rel=1e-6)


def test_value_read_after_the_loop_from_an_early_iteration_stays_right():
    def f(x):
        hs = []
        h = x
        for _ in range(30):
            h = np.tanh(h * 1.1)
            hs.append(h)
        return hs[3] + hs[-1]

    got = gradgen.grad(f)(0.2)
    assert got == pytest.approx(numeric_grad(f, [0.2], 0), rel=1e-6)


def test_float32_stays_float32_in_the_loop():
    rng = np.random.default_rng(6)
    args = (rng.normal(size=(3, 3)).astype(np.float32) * 0.3,
            rng.normal(size=(3, 2)).astype(np.float32),
            rng.normal(size=(40, 2)).astype(np.float32), np.zeros(3, np.float32))

    def rnn(W, U, xs, h0):
        h = h0
        for t in range(xs.shape[0]):
            h = np.tanh(W @ h + U @ xs[t])
        return np.sum(h)

    g = gradgen.grad(rnn, argnums=(0, 2))(*args)
    assert g[0].dtype == np.float32 and g[1].dtype == np.float32
    rolled = _check_program(rnn, args, args, argnums=(0, 1, 2, 3))
    assert "np.empty((40, 3), dtype=np.float32)" in rolled


def test_guards_inside_an_unused_loop_still_run():
    def f(x, xs):
        y = x
        for t in range(xs.shape[0]):
            if xs[t] > 0:
                y = y * 1.01
        return x * x

    xs = np.ones(100)
    source = gradgen.emit(f, 1.5, xs)
    assert _has_loop(source)
    namespace = run_emitted(source)
    assert namespace["f_grad"](2.0, xs) == 4.0
    with pytest.raises(namespace["GuardFailure"]):
        namespace["f_grad"](2.0, -xs)


def test_nested_loops_without_source_lines_keep_their_variables_apart(monkeypatch):
    from gradgen.loops import detect

    monkeypatch.setattr(detect, "_loops_in", lambda filename: ())  # no loop variable names
    P = np.random.default_rng(7).normal(size=(16, 2))
    source = gradgen.emit(pair_energy, P)
    assert "for t_1 in range(16):" in source
    got = run_emitted(source)["pair_energy_grad"](P)
    np.testing.assert_allclose(got, numeric_grad(pair_energy, [P], 0), rtol=1e-6, atol=1e-8)


def test_a_rolled_loop_feeding_later_arithmetic_with_arrays_let_go():
    # the trace lets intermediate arrays go (abstract.py); the loss after the loop asks for
    # the final state's value, which is computed through the loop node made after the trace
    def last_state_loss(W, U, xs, target):
        h = np.zeros(W.shape[0])
        for t in range(xs.shape[0]):
            h = np.tanh(W @ h + U @ xs[t])
        return 0.5 * np.sum((h - target) ** 2)

    from .conftest import numeric_grad

    rng = np.random.default_rng(3)
    args = (rng.normal(size=(6, 6)) * 0.3, rng.normal(size=(6, 4)) * 0.3,
            rng.normal(size=(20, 4)), rng.normal(size=6))
    g_w, g_u = gradgen.grad(last_state_loss, argnums=(0, 1))(*args)
    np.testing.assert_allclose(g_w, numeric_grad(last_state_loss, args, 0), rtol=1e-6,
                               atol=1e-9)
    np.testing.assert_allclose(g_u, numeric_grad(last_state_loss, args, 1), rtol=1e-6,
                               atol=1e-9)
    assert "for t in reversed(range(20)):" in gradgen.emit(last_state_loss, *args)


def buffer_rows(x, W):
    hs = np.zeros((x.shape[0] + 1, W.shape[1]))
    for t in range(x.shape[0]):
        hs[t + 1] = np.tanh(x[t] @ W + np.sin(hs[t]) * 0.5)
    return np.sum(hs**2)


def test_hoisted_functions_of_a_buffers_rows_are_named_after_the_rows():
    # the rows a trip writes into a buffer have no name of the user's: the carry's (hs_t)
    rng = np.random.default_rng(13)
    args = [rng.normal(size=(40, 3)), rng.normal(size=(3, 3)) * 0.5]
    other = [rng.normal(size=(40, 3)), rng.normal(size=(3, 3)) * 0.5]
    rolled = _check_program(buffer_rows, args, other, argnums=(0, 1))
    assert "one_minus_hs_t_sq = 1.0 - hs_t_rows_tail * hs_t_rows_tail" in rolled
    assert "cos_hs_t = np.cos(hs_t_rows[:-1])" in rolled
    for argnum in (0, 1):
        _fd_check(buffer_rows, args, argnum)


def test_a_carry_read_only_after_each_trip_is_saved_from_the_first_trip_on():
    # The backward reads omega only as the trip made it (theta = theta + dt * omega): its list
    # starts empty and is read at [t], with no [t + 1] computed per trip; theta's, read as the
    # trip found it (math.cos(theta)), keeps the value before the first trip.
    args = (0.5, 0.1, 0.01, 200)
    source = gradgen.emit(pendulum, *args, argnums=(0, 1, 2))
    assert "omega_saved = []" in source and "omega_saved[t]" in source, source
    assert "[t + 1]" not in source and "theta_saved = [theta]" in source, source
    rolled = run_emitted(source)["pendulum_grad"](*args)
    flat = gradgen.emit(pendulum, *args, argnums=(0, 1, 2), loops="unroll")
    unrolled = run_emitted(flat)["pendulum_grad"](*args)
    np.testing.assert_allclose(rolled, unrolled, rtol=1e-12)
    for k in range(3):
        assert rolled[k] == pytest.approx(float(numeric_grad(pendulum, args, k)), rel=1e-6)
