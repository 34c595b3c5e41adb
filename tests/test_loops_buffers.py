"""Loops that write rows of a buffer (``h[t] = ...``) stay loops, with the user's buffer.

Each program is checked like tests/test_loops.py: ``gradgen.grad`` against central
differences, the emitted module at other inputs of the same shapes against the unrolled one,
and the module's length against the trip count."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import gradgen
from tests.conftest import numeric_grad, run_emitted
from tests.test_loops import _call, _check_program, _has_loop, _same

T = 120  # more trips than any unroll threshold (tests/test_loops.py: MIN_TRIPS may change)


def rnn_into_buffer(W, U, b, xs, targets):
    """examples/rnn.py: the state written row by row into h, the row read back as prev."""
    n = W.shape[0]
    h = np.zeros((xs.shape[0], n))
    prev = np.zeros(n)
    for t in range(xs.shape[0]):
        h[t] = np.tanh(W @ prev + U @ xs[t] + b)
        prev = h[t]
    readout = h.sum(axis=1)
    return np.mean((readout - targets) ** 2) + 0.1 * np.sum(h[-1] ** 2)


def reads_previous_row(W, U, xs):
    h = np.zeros((xs.shape[0], W.shape[0]))
    for t in range(1, xs.shape[0]):
        h[t] = np.tanh(W @ h[t - 1] + U @ xs[t])
    return np.sum(h**2)


def reads_two_rows_back(w, xs):
    y = np.zeros(xs.shape[0])
    y[0], y[1] = xs[0], xs[1]
    for t in range(2, xs.shape[0]):
        y[t] = np.sin(w * y[t - 2]) + xs[t]
    return np.sum(y * y)


def output_buffer(w, xs):
    out = np.zeros(xs.shape)
    s = np.zeros(xs.shape[1])
    for t in range(xs.shape[0]):
        s = np.tanh(w * s + xs[t])
        out[t] = s * s
    return np.sum(out[::2]) - np.sum(out[1::2]) + out[-1, 0]


def _args(seed, n=4, d=2, length=T):
    rng = np.random.default_rng(seed)
    return [0.5 * rng.normal(size=(n, n)) / np.sqrt(n), rng.normal(size=(n, d)) / np.sqrt(d),
            0.1 * rng.normal(size=n), rng.normal(size=(length, d)), rng.normal(size=length)]


def _code(source: str) -> str:
    """The module without its comments (which quote the user's lines)."""
    return re.sub(r"#.*", "", source)


def _fd(fn, args, argnums):
    got = gradgen.grad(fn, argnums=argnums)(*args)
    for argnum, g in zip(argnums, got, strict=True):
        np.testing.assert_allclose(g, numeric_grad(fn, list(args), argnum), rtol=1e-5,
                                   atol=1e-8)


def test_rnn_writing_its_states_into_a_buffer_rolls():
    args = _args(0)
    _fd(rnn_into_buffer, args, (0, 1, 2, 3))
    source = _check_program(rnn_into_buffer, args, _args(1), argnums=(0, 1, 2, 3))
    # the user's buffer, written in place forward and its adjoint's row read backward
    assert "h[t] = " in source and "h = np.zeros((120, 4)" in source
    assert "for t in reversed(range(120)):" in source and "grad_h[t]" in source
    assert ".copy()" not in source  # no version of the buffer is copied per trip
    shorter = gradgen.emit(rnn_into_buffer, *_args(0, length=40), argnums=(0, 1, 2, 3))
    assert source.count("\n") == shorter.count("\n") < 140  # the body, not the trip count
    other = _args(2)  # the emitted module at other inputs, against central differences
    got = run_emitted(source)["rnn_into_buffer_grad"](*other)
    for argnum in (0, 3):
        np.testing.assert_allclose(got[argnum], numeric_grad(rnn_into_buffer, other, argnum),
                                   rtol=1e-5, atol=1e-8)


def test_reading_the_previous_row_back():
    W, U, _, xs, _ = _args(3)
    _fd(reads_previous_row, (W, U, xs[:30]), (0, 1, 2))
    source = _check_program(reads_previous_row, (W, U, xs), _args(4)[:2] + [_args(4)[3]],
                            argnums=(0, 1, 2))
    assert "for t in range(1, 120):" in source and "h[t] = " in source


def test_a_row_two_trips_back_is_read_from_the_carried_buffer():
    rng = np.random.default_rng(5)
    xs = rng.normal(size=T)
    _fd(reads_two_rows_back, (0.7, xs[:30]), (0, 1))
    source = _check_program(reads_two_rows_back, (0.7, xs), (-0.4, rng.normal(size=T)),
                            argnums=(0, 1))
    assert "y[t - 2]" in source and "y[t] = " in source
    assert "for t in reversed(range(2, 120)):" in source


def test_an_output_buffer_written_beside_a_carried_state():
    rng = np.random.default_rng(6)
    xs = rng.normal(size=(T, 3))
    _fd(output_buffer, (0.8, xs[:30]), (0, 1))
    source = _check_program(output_buffer, (0.8, xs), (0.3, rng.normal(size=(T, 3))),
                            argnums=(0, 1))
    assert "out[t] = " in source


def test_a_buffer_passed_in_is_never_written_into():
    def fill(w, h):
        for t in range(h.shape[0]):
            h[t] = np.sin(w * t + h[t])
        return np.sum(h)

    h = np.linspace(0, 1, T)
    kept = h.copy()
    source = gradgen.emit(fill, 0.5, h)
    namespace = run_emitted(source)
    got = namespace["fill_grad"](0.5, h)
    np.testing.assert_array_equal(h, kept)  # the module wrote into a copy
    assert got == pytest.approx(float(numeric_grad(fill, [0.5, kept], 0)), rel=1e-6)


def test_a_branch_on_some_rows_splits_into_runs_with_guards():
    def clipped(w, xs):
        h = np.zeros(xs.shape[0])
        s = 0.0
        for t in range(xs.shape[0]):
            if xs[t] > 0:
                s = np.tanh(w * s + xs[t])
            else:
                s = 0.5 * s
            h[t] = s
        return np.sum(h**2)

    xs = np.where(np.arange(T) < T // 2, 0.5, -0.5)
    _fd(clipped, (0.9, xs), (0,))
    source = _check_program(clipped, (0.9, xs), (0.4, xs * 2))
    assert len(re.findall(r"^    for t in range\(", source, re.MULTILINE)) == 4
    flipped = xs.copy()
    flipped[T - 10] = 0.5
    namespace = run_emitted(source)
    with pytest.raises(namespace["GuardFailure"], match=r"xs\[t\] > 0"):
        namespace["clipped_grad"](0.9, flipped)


def test_trace_listing_shows_the_moving_row():
    W, U, _, xs, _ = _args(7)
    text = str(gradgen.trace(reads_previous_row, W, U, xs))
    assert "index_update[index=(k + 1,)]" in text and text.count("index_update") == 1


def test_check_sees_through_a_buffer_loop():
    rng = np.random.default_rng(8)
    report = gradgen.check(reads_two_rows_back, 0.7, rng.normal(size=40), argnums=(0, 1))
    assert report.ok


def test_short_buffer_loops_stay_unrolled_and_long_ones_do_not():
    W, U, _, xs, _ = _args(9)
    assert not _has_loop(gradgen.emit(reads_previous_row, W, U, xs[:4]))
    assert _has_loop(gradgen.emit(reads_previous_row, W, U, xs))


# --- per-trip values gathered in a list and used after the loop ---------------------------------


def stacked_states(W, xs):
    h = np.zeros(W.shape[0])
    hs = []
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t])
        hs.append(h)
    return np.sum(np.stack(hs) ** 2) + np.sum(h)


def array_and_sum_of_losses(w, xs):
    ys, losses = [], []
    s = np.float64(0.0)
    for t in range(xs.shape[0]):
        s = np.sin(w * s + xs[t])
        ys.append(s)
        losses.append(s * s)
    return np.mean(np.array(ys) * xs) + sum(losses)


def test_np_stack_of_a_list_appended_per_trip_becomes_a_buffer():
    rng = np.random.default_rng(10)
    W, xs = 0.4 * rng.normal(size=(3, 3)), rng.normal(size=(T, 3))
    _fd(stacked_states, (W, xs[:30]), (0, 1))
    source = _check_program(stacked_states, (W, xs), (0.4 * rng.normal(size=(3, 3)),
                                                       rng.normal(size=(T, 3))), argnums=(0, 1))
    assert "hs = np.zeros((120, 3)" in source and "hs[t] = h" in source
    assert "np.stack" not in _code(source)
    assert source.count("\n") == gradgen.emit(stacked_states, W, xs[:40],
                                              argnums=(0, 1)).count("\n")


def test_np_array_and_sum_of_per_trip_lists_roll():
    rng = np.random.default_rng(11)
    xs = rng.normal(size=T)
    _fd(array_and_sum_of_losses, (0.6, xs[:30]), (0, 1))
    source = _check_program(array_and_sum_of_losses, (0.6, xs), (-0.3, rng.normal(size=T)),
                            argnums=(0, 1))
    # sum(losses) adds ((0 + l0) + l1) + ...: the same adds, in the same order, in the loop
    assert re.search(r"^        total = total \+ ", source, re.MULTILINE)
    assert "np.array(" not in _code(source) and "np.stack" not in _code(source)


def test_a_stack_of_values_from_no_loop_stays_a_stack():
    def spread(x):
        return np.sum(np.stack([np.sin(x * k) + np.cos(x) ** k for k in range(10)]) ** 2)

    source = gradgen.emit(spread, np.linspace(0, 1, 3))
    assert "np.stack(" in source and not _has_loop(source)


# --- a Python number that changes every trip (dt * t, gamma ** t, a schedule) -------------------


def decayed_steps(x, n):
    for t in range(n):
        x = x - 0.01 * 0.99**t * np.sin(x)
    return x


def driven_oscillator(w, xs, dt):
    q, p = np.zeros(xs.shape[1]), np.zeros(xs.shape[1])
    for t in range(xs.shape[0]):
        p = p - dt * (w * q - np.cos(dt * t) * xs[t])
        q = q + dt * p
    return np.sum(q**2) + np.sum(p)


SCHEDULE = [0.1 / (1 + k) ** 0.5 for k in range(T)]


def scheduled_descent(w, X, y):
    for t in range(len(SCHEDULE)):
        w = w - SCHEDULE[t] * (X.T @ (X @ w - y))
    return np.sum(w**2)


def test_a_decaying_step_size_becomes_a_per_trip_input():
    _fd(decayed_steps, (0.3, T), (0,))
    rolled, flat = (gradgen.emit(decayed_steps, 0.3, T, loops=mode)
                    for mode in ("keep", "unroll"))
    assert _has_loop(rolled) and not _has_loop(flat)
    fns = [run_emitted(s)["decayed_steps_value_and_grad"] for s in (rolled, flat)]
    for x in (0.3, -1.2, 2.5):  # the same numbers as the unrolled module's
        assert fns[0](x, T) == fns[1](x, T)
    assert len(re.findall(r"^    for t in", rolled, re.MULTILINE)) == 4
    # the numbers are 0.01 * 0.99 ** t for the user's t, bit for bit: written so, no table
    assert "= 0.01 * 0.99**t" in rolled and "for t in range(1, 120):" in rolled
    assert "ARRAY_" not in rolled and rolled.count("\n") < 90
    namespace = run_emitted(rolled)
    with pytest.raises(namespace["GuardFailure"], match="n == 120"):
        namespace["decayed_steps_grad"](0.3, T + 1)


def test_dt_times_the_counter_and_a_python_list_schedule():
    rng = np.random.default_rng(12)
    xs = rng.normal(size=(T, 2))
    _fd(driven_oscillator, (0.7, xs[:20], 0.05), (0, 1, 2))
    _check_program(driven_oscillator, (0.7, xs, 0.05), (1.3, rng.normal(size=(T, 2)), 0.05),
                   argnums=(0, 1))
    X, y = rng.normal(size=(6, 3)) / 3, rng.normal(size=6)
    w = rng.normal(size=3)
    _fd(scheduled_descent, (w, X, y), (0, 1, 2))
    source = _check_program(scheduled_descent, (w, X, y), (rng.normal(size=3), X * 0.5, y),
                            argnums=(0, 1, 2))
    assert "ARRAY_0[t]" in source  # a schedule no formula gives: the traced numbers


def test_a_per_trip_number_next_to_float32_stays_unrolled_and_float32():
    def decay32(x):
        for t in range(T):
            x = x - 0.01 * 0.99**t * np.sin(x)
        return np.sum(x)

    x = np.linspace(0, 1, 3, dtype=np.float32)
    rolled, flat = gradgen.emit(decay32, x), gradgen.emit(decay32, x, loops="unroll")
    got = run_emitted(rolled)["decay32_value_and_grad"](x)
    want = run_emitted(flat)["decay32_value_and_grad"](x)
    assert got[1].dtype == np.float32 and np.array_equal(got[1], want[1])
    assert type(got[0]) is type(want[0]) and got[0] == want[0]


# --- intermediates= and check_finite on rolled loops --------------------------------------------


def softplus_total(w, xs):
    s = 0.0
    for t in range(xs.shape[0]):
        z = np.exp(xs[t] @ w)
        s = s + np.log1p(z)
    return s * s


def sqrt_total(w, xs):
    s = 0.0
    for t in range(xs.shape[0]):
        s = s + np.sqrt(xs[t] * w)
    return s


def test_intermediates_of_a_loop_carry_and_of_a_value_inside_the_loop():
    """The contract is the same rolled or not: the adjoint of the last value bound to the name.
    For a carry that is the loop's result (the loop stays); for a value bound only inside the
    loop it is the last trip's, which the rolled loop does not keep (the loop unrolls)."""
    rng = np.random.default_rng(13)
    w, xs = rng.normal(size=2) * 0.3, rng.normal(size=(T, 2))
    for name, rolled in (("s", True), ("z", False)):
        df = gradgen.grad(softplus_total, intermediates=(name,))
        flat = gradgen.emit(softplus_total, w, xs, intermediates=(name,), loops="unroll")
        got = df(w, xs)
        want = run_emitted(flat)["softplus_total_grad"](w, xs)
        assert _has_loop(df.source) is rolled
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
        np.testing.assert_allclose(got[1][name], want[1][name], rtol=1e-12)
    s = np.sum(np.log1p(np.exp(xs @ w)))
    assert gradgen.grad(softplus_total, intermediates=("s",))(w, xs)[1]["s"] == pytest.approx(
        2 * s)


def test_check_finite_checks_every_trip_of_the_backward_loop():
    xs = np.linspace(0.5, 2.0, T)
    df = gradgen.grad(sqrt_total, check_finite=True)
    assert df(1.5, xs) == pytest.approx(np.sum(np.sqrt(xs)) / (2 * np.sqrt(1.5)))
    assert _has_loop(df.source) and "NonFiniteGradient(" in df.source
    source = gradgen.emit(sqrt_total, 1.5, xs, check_finite=True)
    namespace = run_emitted(source)
    hit = xs.copy()
    hit[T // 2] = 0.0  # d sqrt(x * w)/dw is infinite there: trip T // 2 reports its line
    with np.errstate(all="ignore"), pytest.raises(namespace["NonFiniteGradient"],
                                                  match=r"np\.sqrt\(xs\[t\] \* w\)"):
        namespace["sqrt_total_grad"](1.5, hit)
    assert namespace["sqrt_total_grad"](1.5, xs) == pytest.approx(df(1.5, xs))


def test_a_grid_written_by_nested_loops_rolls_its_inner_loops():
    def grid(x, y):
        A = np.zeros((x.shape[0], y.shape[0]))
        for i in range(x.shape[0]):
            for j in range(y.shape[0]):
                A[i, j] = np.sin(x[i] * y[j])
        return np.sum(A**2)

    rng = np.random.default_rng(14)
    x, y = rng.normal(size=3), rng.normal(size=T)
    _fd(grid, (x, y[:30]), (0, 1))
    source = _check_program(grid, (x, y), (rng.normal(size=3), rng.normal(size=T)),
                            argnums=(0, 1))
    # one loop per row i (the rows' loops differ in i, so the outer loop stays unrolled)
    assert "A[0, j] = np.sin(" in source and "for j in reversed(range(120)):" in source


def test_a_time_that_grows_with_the_counter_is_written_with_it():
    def forced(x, n):
        for t in range(n):
            x = x + 0.01 * np.cos(x + 0.05 * t)
        return x * x

    rolled, flat = (gradgen.emit(forced, np.float64(0.2), T, loops=mode)
                    for mode in ("keep", "unroll"))
    assert "0.05 * t" in _code(rolled) and "ARRAY_" not in rolled
    fns = [run_emitted(s)["forced_value_and_grad"] for s in (rolled, flat)]
    for x in (0.2, -0.7):
        assert fns[0](np.float64(x), T) == fns[1](np.float64(x), T)
    assert fns[0](np.float64(0.2), T)[1] == pytest.approx(
        float(numeric_grad(forced, [np.float64(0.2), T], 0)), rel=1e-6)


def test_a_formula_of_the_counter_in_pure_python_arithmetic():
    def damped(theta, omega, n):
        for t in range(n):
            omega = omega - 0.01 * math.sin(theta) * 0.999**t
            theta = theta + 0.01 * omega
        return theta

    rolled, flat = (gradgen.emit(damped, 0.5, 0.1, T, argnums=(0, 1), loops=mode)
                    for mode in ("keep", "unroll"))
    assert _has_loop(rolled) and "0.999**t" in rolled
    fns = [run_emitted(s)["damped_value_and_grad"] for s in (rolled, flat)]
    for point in ((0.5, 0.1), (-1.0, 0.4)):  # the same floats, and Python floats
        got, want = fns[0](*point, T), fns[1](*point, T)
        assert got == want and type(got[0]) is float
    _fd(damped, (0.5, 0.1, T), (0, 1))


def test_a_saved_row_survives_writes_into_the_buffer_after_the_loop():
    def two_back(W, xs):
        h = np.zeros((xs.shape[0], W.shape[0]))
        h[0], h[1] = xs[0], xs[1]
        for t in range(2, xs.shape[0]):
            h[t] = np.tanh(W @ h[t - 2]) + xs[t]
        h[0] = 3.0  # into the buffer whose rows the backward reads
        h[2] = 1.0
        return np.sum(h**2)

    rng = np.random.default_rng(15)
    W, xs = rng.normal(size=(3, 3)) * 0.3, rng.normal(size=(T, 3))
    _fd(two_back, (W, xs[:30]), (0, 1))
    source = _check_program(two_back, (W, xs), (rng.normal(size=(3, 3)) * 0.3,
                                                rng.normal(size=(T, 3))), argnums=(0, 1))
    forward = source.split("(backward)")[0]
    assert "h[t] = " in forward and "h.copy()" not in forward  # written in place
    assert "row = h_part.copy()" in forward  # the row the backward reads, kept as it was


# --- a loop over a Python list of arrays ------------------------------------------------------


def over_a_list(W, xs):
    h = np.zeros(W.shape[0])
    out = []
    for x in xs:
        h = np.tanh(W @ h + x)
        out.append(h)
    return np.sum(np.stack(out) ** 2)


def test_a_loop_over_a_list_of_arrays_rolls_over_their_stack():
    """``for x in xs`` over a Python list: each trip reads its own argument. The arguments
    are stacked before the loop and each trip reads its row, as ``xs[t]`` of an array
    would be; the gradients of the arguments are the rows of the stack's."""
    rng = np.random.default_rng(12)
    W = 0.4 * rng.normal(size=(3, 3))
    xs = list(rng.normal(size=(40, 3)))
    got = gradgen.grad(over_a_list, argnums=(0, 1))(W, xs[:20])
    np.testing.assert_allclose(got[0], numeric_grad(lambda w: over_a_list(w, xs[:20]), [W]),
                               rtol=1e-5, atol=1e-8)
    for k in (0, 7, 19):  # the gradient of a list is a list, row by row
        np.testing.assert_allclose(got[1][k], numeric_grad(
            lambda x, k=k: over_a_list(W, [*xs[:k], x, *xs[k + 1:20]]), [xs[k]], 0),
            rtol=1e-5, atol=1e-8)
    other = (0.4 * rng.normal(size=(3, 3)), list(rng.normal(size=(40, 3))))
    source = gradgen.emit(over_a_list, W, xs, argnums=(0, 1))
    unrolled = gradgen.emit(over_a_list, W, xs, argnums=(0, 1), loops="unroll")
    assert _has_loop(source) and not _has_loop(unrolled)
    for point in ((W, xs), other):  # the rolled module against the unrolled one
        rolled_value, (rolled_w, rolled_xs) = _call(source, over_a_list, point)
        value, (g_w, g_xs) = _call(unrolled, over_a_list, point)
        assert type(rolled_xs) is list and len(rolled_xs) == 40
        _same((rolled_value, rolled_w, *rolled_xs), (value, g_w, *g_xs))
    assert "for t in range(40):" in source  # (x is the user's name for each row)
    # the body once; per argument its unpacking, its row of the stack and its gradient
    shorter = gradgen.emit(over_a_list, W, xs[:20], argnums=(0, 1))
    per_argument = (source.count("\n") - shorter.count("\n")) / 20
    assert _has_loop(shorter) and per_argument <= 10  # (two functions, and the signature)
    longer = list(rng.normal(size=(41, 3)))  # another length is another signature
    np.testing.assert_allclose(gradgen.grad(over_a_list, argnums=(0, 1))(W, longer)[0],
                               numeric_grad(lambda w: over_a_list(w, longer), [W]),
                               rtol=1e-5, atol=1e-8)
