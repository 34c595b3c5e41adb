"""A new user's first real programs, each checked against central finite differences.

Softmax and its stable forms, normalisation layers, attention, small networks and losses,
recurrent cells, loops over buffers and slices, linear algebra, indexing and the Python
around them (floats, 0-d arrays, float32, keyword arguments, closures, guards, a second shape).
No other test writes these as a user would; each one found nothing wrong, or found a fix."""

from __future__ import annotations

import functools
import math
import subprocess

import numpy as np
import pytest

import gradgen
from tests.conftest import RUFF, assert_gradient, numeric_grad, run_emitted, run_gradgen

# --- the programs, as a user writes them ---------------------------------------------------


def softmax_ce(z):
    m = np.max(z)
    e = np.exp(z - m)
    p = e / e.sum()
    return -np.log(p[2])


def log_softmax(z):
    m = z.max(axis=-1, keepdims=True)
    s = z - m
    lse = np.log(np.sum(np.exp(s), axis=-1, keepdims=True))
    return np.sum((s - lse) * np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def layer_norm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + 1e-5) * g + b
    return np.sum(y * y)


def batch_norm(x):
    mu = np.mean(x, axis=0)
    var = np.var(x, axis=0)
    xh = (x - mu) / np.sqrt(var + 1e-5)
    return np.sum(np.sin(xh))


def attention(Q, K, V):
    d = Q.shape[-1]
    s = Q @ K.T / np.sqrt(d)
    s = s - s.max(axis=1, keepdims=True)
    a = np.exp(s)
    a = a / a.sum(axis=1, keepdims=True)
    return np.sum((a @ V) ** 2)


def logreg(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, -y * z))


def huber(r):
    a = np.abs(r)
    return np.sum(np.where(a < 1.0, 0.5 * r**2, a - 0.5))


def hinge(w, X, y):
    return np.mean(np.maximum(0.0, 1.0 - y * (X @ w))) + 0.1 * w.dot(w)


def sigmoid_sum(x):
    return np.sum(1 / (1 + np.exp(-x)))


def gru_cell(x, h, Wz, Wr, Wh):
    xh = np.concatenate([x, h])
    z = 1.0 / (1.0 + np.exp(-(Wz @ xh)))
    r = 1.0 / (1.0 + np.exp(-(Wr @ xh)))
    hc = np.tanh(Wh @ np.concatenate([x, r * h]))
    hn = (1 - z) * h + z * hc
    return np.sum(hn**2)


def lstm_cell(x, h, c, W):
    gates = W @ np.concatenate([x, h])
    i, f, o, g = np.split(gates, 4)
    i = 1 / (1 + np.exp(-i))
    f = 1 / (1 + np.exp(-f))
    o = 1 / (1 + np.exp(-o))
    c2 = f * c + i * np.tanh(g)
    h2 = o * np.tanh(c2)
    return h2.sum() + c2.sum()


def rnn_buffer(W, xs):
    T = xs.shape[0]
    n = W.shape[0]
    h = np.zeros((T + 1, n))
    for t in range(T):
        h[t + 1] = np.tanh(W @ h[t] + xs[t])
    return np.sum(h[-1] ** 2)


def conv1d(x, k):
    n = len(x) - len(k) + 1
    out = []
    for i in range(n):
        out.append(np.sum(x[i : i + len(k)] * k))
    return np.sum(np.array(out) ** 2)


def moving_average(x):
    c = np.cumsum(x)
    w = 3
    ma = (c[w:] - c[:-w]) / w
    return np.sum(ma**2)


def horner(x):
    coeffs = [1.0, -2.0, 0.5, 3.0]
    acc = 0.0
    i = 0
    while i < len(coeffs):
        acc = acc * x + coeffs[i]
        i += 1
    return acc


def gauss_nll(mu, log_sigma, x):
    sigma = np.exp(log_sigma)
    return np.sum(0.5 * ((x - mu) / sigma) ** 2 + log_sigma + 0.5 * np.log(2 * np.pi))


def physics(p, v):
    dt = 0.1
    for _ in range(5):
        v = v - dt * 9.81 * np.sin(p)
        v = np.clip(v, -1.0, 1.0)
        p = p + dt * v
    return np.sum(p**2)


def methods(x):
    a = x.sum(axis=0, keepdims=True)
    b = x.mean()
    c = x.T.reshape(-1).dot(x.ravel())
    d = x.max(axis=1)
    e = x.clip(-0.5, 0.5)
    return a.sum() * b + c + d.sum() + e.sum() + x.std() + x.var(axis=0).sum() + x.prod()


def stack_split(x, y):
    s = np.stack([x, y], axis=1)
    a, b = np.split(s, 2, axis=0)
    c = np.vstack([a, b * 2]).sum(axis=0)
    return np.sum(c * np.hstack([x[:1], y[:1]]))


def linalg(A, b):
    xs = np.linalg.solve(A, b)
    Ai = np.linalg.inv(A)
    return np.linalg.norm(xs) + np.linalg.det(A) + np.trace(Ai) + np.linalg.norm(A, "fro")


def decompositions(A):
    S = A @ A.T + np.eye(3)
    _, logdet = np.linalg.slogdet(S)
    w, _ = np.linalg.eigh(S)
    return logdet + np.sum(w**2) + np.sum(np.linalg.svd(A, compute_uv=False))


def einsum_traces(A, B):
    C = np.einsum("ij,jk->ik", A, B)
    return np.einsum("ii->", C) + np.einsum("ij,ij->", A, A)


def fancy(x):
    idx = np.array([0, 2, 2, 4])
    m = x > 0
    return np.sum(x[idx] ** 2) + np.sum(x[m] * 3) + x[[1, 3]].prod()


def argmax_pick(x):
    i = np.argmax(x)
    rows = x.reshape(2, 3)
    best = np.take_along_axis(rows, np.argmax(rows, axis=1)[:, None], axis=1)
    return x[i] * 2 + best.sum()


def shape_ops(x):
    y = np.expand_dims(x, 0)
    z = np.broadcast_to(y, (3, 4))
    t = np.tile(x, 2) + np.repeat(x, 2)
    return np.sum(z * np.squeeze(y)) + np.sum(t**2) + np.sum(x[None, :] * x[:, None]) + x[..., 0]


def builtins_on_arrays(x):
    s = sum(x)
    m = max(x[0], x[1])
    a = abs(x[2])
    return s + m * a + pow(x[3], 3) + min(x)


def buffer_like(x):
    out = np.zeros_like(x)
    for i in range(len(x)):
        out[i] = x[i] * (i + 1)
    out[1:] += out[:-1]
    return np.sum(out**2)


def norms(X):
    return (np.sum(np.linalg.norm(X, axis=1)) + np.linalg.norm(X[0], ord=1)
            + np.linalg.norm(X, ord=np.inf))


def weighted_mean(x, w):
    return np.average(x, weights=w) + np.mean(x, where=x > 0)


def batched(A, B):
    return (np.sum(np.matmul(A, B) ** 2) + np.sum(np.swapaxes(A, 1, 2) ** 3)
            + np.sum(np.moveaxis(A, 0, -1)[..., 0]))


def tanh_f32(x):
    return np.sum(np.tanh(x) * x)


def zero_d(x):
    return np.sin(x) * np.exp(x)


def python_floats(x, y):
    return math.atan2(y, x) + math.hypot(x, y) + x**2.5


def ridge(w, X, *, lam=0.1):
    return np.sum((X @ w) ** 2) + lam * np.sum(w**2)


def make_closure():
    A = np.arange(9.0).reshape(3, 3) / 10

    def closed(x):
        return np.sum((A @ x) ** 2)

    return closed


closed_over_array = make_closure()


def guarded(x):
    if x.sum() > 0:
        return np.sum(x**2)
    return np.sum(np.abs(x))


def early_return(x):
    s = np.sum(x)
    if s < -100:
        return 0.0
    return s * s


def covariance(X):
    C = np.cov(X)
    return np.sum(C**2) + np.trace(np.corrcoef(X))


def polynomial_fit(c):
    t = np.linspace(0, 1, 6)
    return np.sum((np.vander(t, 3) @ c - np.cos(t)) ** 2) + np.sum(np.polyval(c, t))


def log_det_cholesky(A):
    L = np.linalg.cholesky(A @ A.T + np.eye(3))
    return np.sum(np.log(np.diag(L)))


def exp_series(A):
    E = np.eye(2)
    term = np.eye(2)
    for k in range(1, 8):
        term = term @ A / k
        E = E + term
    return np.sum(E)


def clipped_step(g):
    scale = min(1.0, 1.0 / np.linalg.norm(g))  # a guard on the norm
    return np.sum((g * scale) ** 2)


def mlp(params, X, y):
    h = np.tanh(X @ params["W1"] + params["b1"])
    logits = h @ params["W2"] + params["b2"]
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(y)), y])


# --- the arguments ---------------------------------------------------------------------------


def _programs():
    rng = np.random.default_rng(7)

    def r(*shape):
        return rng.standard_normal(shape)

    labels = np.sign(r(8))
    return [
        (softmax_ce, (r(5),), 0),
        (log_softmax, (r(2, 3),), 0),
        (logsumexp, (r(6),), 0),
        (layer_norm, (r(3, 4), r(4), r(4)), (0, 1, 2)),
        (batch_norm, (r(5, 3),), 0),
        (attention, (r(4, 3), r(5, 3), r(5, 2)), (0, 1, 2)),
        (logreg, (r(3), r(8, 3), labels), 0),
        (huber, (r(7) * 2,), 0),
        (hinge, (r(3), r(8, 3), labels), 0),
        (sigmoid_sum, (r(4),), 0),
        (gru_cell, (r(2), r(3), r(3, 5), r(3, 5), r(3, 5)), (0, 1, 2, 3, 4)),
        (lstm_cell, (r(2), r(3), r(3), r(12, 5)), (0, 1, 2, 3)),
        (rnn_buffer, (r(3, 3) * 0.5, r(6, 3)), (0, 1)),
        (conv1d, (r(8), r(3)), (0, 1)),
        (moving_average, (r(8),), 0),
        (horner, (0.7,), 0),
        (gauss_nll, (r(4), r(4) * 0.3, r(4)), (0, 1, 2)),
        (physics, (r(3), r(3) * 0.5), (0, 1)),
        (methods, (r(3, 4),), 0),
        (stack_split, (r(4), r(4)), (0, 1)),
        (linalg, (r(3, 3) + 3 * np.eye(3), r(3)), (0, 1)),
        (decompositions, (r(3, 3),), 0),
        (einsum_traces, (r(3, 3), r(3, 3)), (0, 1)),
        (fancy, (r(6),), 0),
        (argmax_pick, (r(6),), 0),
        (shape_ops, (r(4),), 0),
        (builtins_on_arrays, (r(4),), 0),
        (buffer_like, (r(4),), 0),
        (norms, (r(3, 4),), 0),
        (weighted_mean, (np.array([0.5, -1.0, 2.0, 0.3, -0.2]), np.abs(r(5)) + 0.5), (0, 1)),
        (batched, (r(2, 3, 4), r(2, 4, 3)), (0, 1)),
        (zero_d, (np.array(0.3),), 0),
        (python_floats, (1.3, 0.4), (0, 1)),
        (closed_over_array, (r(3),), 0),
        (guarded, (r(4),), 0),
        (covariance, (r(3, 6),), 0),
        (polynomial_fit, (r(3),), 0),
        (log_det_cholesky, (r(3, 3),), 0),
        (exp_series, (r(2, 2) * 0.5,), 0),
        (clipped_step, (r(3) * 3,), 0),
        (early_return, (r(4),), 0),
    ]


PROGRAMS = _programs()
IDS = [f.__name__ for f, _, _ in PROGRAMS]


@pytest.mark.parametrize(("f", "args", "argnums"), PROGRAMS, ids=IDS)
def test_the_gradient_matches_finite_differences(f, args, argnums):
    # and the emitted module gives the same value and gradient (assert_gradient)
    assert_gradient(f, *args, argnums=argnums, rtol=1e-6)


@pytest.mark.skipif(RUFF is None, reason="ruff is not installed")
def test_the_emitted_modules_pass_a_default_ruff_check(tmp_path):
    # ruff's default rules, which grow with its versions (B002 flags `-(-x)`)
    for f, args, argnums in PROGRAMS:
        (tmp_path / f"{f.__name__}.py").write_text(gradgen.emit(f, *args, argnums=argnums))
    result = subprocess.run([RUFF, "check", "--isolated", "--no-cache", "--line-length", "100",
                             "--output-format", "concise", "."], cwd=tmp_path,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("f", [sigmoid_sum, gru_cell, lstm_cell])
def test_a_sigmoid_written_out_has_no_double_negation(f):
    args = next(args for g, args, _ in PROGRAMS if g is f)
    source = gradgen.emit(f, *args, argnums=tuple(range(len(args))))
    assert "-(-" not in source


def test_a_params_dict_gets_a_dict_of_gradients():
    rng = np.random.default_rng(3)
    params = {"W1": rng.standard_normal((4, 5)) * 0.5, "b1": rng.standard_normal(5) * 0.1,
              "W2": rng.standard_normal((5, 3)) * 0.5, "b2": rng.standard_normal(3) * 0.1}
    X, y = rng.standard_normal((6, 4)), np.array([0, 2, 1, 1, 0, 2])
    grads = gradgen.grad(mlp)(params, X, y)
    assert list(grads) == list(params)
    for key, value in params.items():

        def by_key(v, key=key):
            return mlp({**params, key: v}, X, y)

        np.testing.assert_allclose(grads[key], numeric_grad(by_key, [value]), rtol=1e-6,
                                   atol=1e-8)


def test_float32_in_float32_out():
    x = np.array([0.3, -1.2, 2.0], dtype=np.float32)
    g = gradgen.grad(tanh_f32)(x)
    assert g.dtype == np.float32
    expected = np.tanh(x.astype(np.float64)) + x / np.cosh(x.astype(np.float64)) ** 2
    np.testing.assert_allclose(g, expected, rtol=1e-5)


def test_keyword_arguments_are_constants_of_the_trace():
    rng = np.random.default_rng(4)
    w, X = rng.standard_normal(3), rng.standard_normal((5, 3))
    dridge = gradgen.grad(ridge)
    for lam in (0.1, 2.0):
        np.testing.assert_allclose(dridge(w, X, lam=lam), 2 * X.T @ (X @ w) + 2 * lam * w,
                                   rtol=1e-12)


def test_both_sides_of_a_guard_and_a_second_shape():
    dguarded = gradgen.grad(guarded)
    up, down = np.array([1.0, -0.5, 2.0]), np.array([-1.0, 0.5, -2.0])
    np.testing.assert_array_equal(dguarded(up), 2 * up)
    np.testing.assert_array_equal(dguarded(down), np.sign(down))
    longer = np.linspace(-1.0, 3.0, 7)
    np.testing.assert_array_equal(dguarded(longer), 2 * longer)


def sigmoid_named(x):
    u = 1 + np.exp(-x)
    return np.sum(1 / u)


@pytest.mark.parametrize("x", [np.array([0.3, -1.2, 2.0]), 0.7], ids=["array", "float"])
def test_an_adjoint_asked_for_keeps_its_sign_where_the_signs_cancel(x):
    # grad_u = -1 / u**2 is a value of its own here: the signs around it do not cancel
    g, adjoints = gradgen.grad(sigmoid_named, intermediates=("u",))(x)
    u = 1 + np.exp(-np.asarray(x))
    np.testing.assert_allclose(adjoints["u"], -1 / u**2, rtol=1e-12)
    np.testing.assert_allclose(g, np.exp(-np.asarray(x)) / u**2, rtol=1e-12)


def test_the_cancelled_signs_give_the_same_bits():
    x = np.linspace(-30.0, 30.0, 101)
    e = np.exp(-x)
    u = 1 + e
    np.testing.assert_array_equal(gradgen.grad(sigmoid_sum)(x), -(-1.0 * (1 / u) / u * e))
    s = 1 / (1 + math.exp(-0.25))  # and the second derivative, through the same rewrite
    np.testing.assert_allclose(gradgen.grad(gradgen.grad(sigmoid_sum))(0.25),
                               s * (1 - s) * (1 - 2 * s), rtol=1e-12)


def index_from_a_float(x):
    i = int(x[0] * 3)  # a NumPy float: np.trunc keeps its dtype
    return x[i] ** 2 + np.sum(x) * int(x[1])


def test_int_of_a_numpy_float_is_locally_constant():
    # was a TypeError ("a traced float64 value cannot be used as an index") from inside int()
    dindex = gradgen.grad(index_from_a_float)
    np.testing.assert_array_equal(dindex(np.array([0.5, 1.0, 2.0])), [1.0, 3.0, 1.0])
    np.testing.assert_array_equal(dindex(np.array([0.1, 2.5, 2.0])), [2.2, 2.0, 2.0])
    np.testing.assert_array_equal(dindex(np.array([0.9, -1.5, 2.0])), [-1.0, -1.0, 3.0])
    # the guard reads as the user wrote it (was `np.int64(np.trunc(x[0] * 3)) == 1`)
    source = gradgen.emit(index_from_a_float, np.array([0.5, 1.0, 2.0]))
    assert "if not int(x[0] * 3) == 1:" in source and "np.trunc" not in source
    module = run_emitted(source)
    with pytest.raises(Exception, match=r"int\(x\[0\] \* 3\) == 1"):
        module["index_from_a_float_grad"](np.array([0.1, 1.0, 2.0]))


# --- arguments that are constants of the trace ---------------------------------------------


def by_mode(x, mode):
    if mode == "squares":
        return np.sum(x**2)
    return np.sum(x)


def by_mask(x, mask):
    if mask is None:
        return np.sum(x**2)
    return np.sum(x[mask] ** 3)


def by_activation(x, act):
    return np.sum(act(x) * x)


def relu(t):
    return np.maximum(t, 0.0)


@pytest.mark.parametrize(("f", "traced", "other"), [(by_mode, "squares", "plain"),
                                                    (by_mask, None, np.array([0, 1])),
                                                    (by_activation, relu, np.tanh)],
                         ids=["str", "None", "function"])
def test_a_module_checks_the_constants_it_was_traced_with(f, traced, other, tmp_path):
    # The module takes `mode` and never reads it: called with another value it gave the
    # traced branch's gradient (2 * x for "plain"), where gradgen.grad retraces.
    x = np.array([1.0, -2.0, 3.0])
    source = gradgen.emit(f, x, traced)
    module = run_emitted(source)
    on_path = gradgen.grad(f)(x, traced)
    np.testing.assert_array_equal(module[f"{f.__name__}_grad"](x, traced), on_path)
    with pytest.raises(Exception, match=r"traced where `(mode == \"squares\"|mask is None|"
                                        r"act.__name__ == \"relu\")`"):
        module[f"{f.__name__}_grad"](x, other)
    assert not np.allclose(gradgen.grad(f)(x, other), on_path)  # (what it returned)
    assert "Valid on the traced path" in source
    if RUFF is not None:
        (tmp_path / "m.py").write_text(source)
        for command in (["check"], ["format", "--check"]):
            result = subprocess.run([RUFF, *command, "--isolated", "--no-cache",
                                     "--line-length", "100", "m.py"], cwd=tmp_path,
                                    capture_output=True, text=True, check=False)
            assert result.returncode == 0, result.stdout + result.stderr


def test_a_function_argument_is_named_by_its_name_not_its_address():
    # the header and docstrings showed `act=<function relu at 0x7f...>`: new bytes every run
    source = gradgen.emit(by_activation, np.array([1.0, 2.0]), relu)
    assert "act=relu" in source and " at 0x" not in source
    assert "act=np.tanh" in gradgen.emit(by_activation, np.array([1.0, 2.0]), np.tanh)


def _make_power(k):
    def power(t):
        return t**k

    return power


@pytest.mark.parametrize("act", [lambda t: t * t, _make_power(2)], ids=["lambda", "local"])
def test_a_function_argument_its_name_cannot_tell_apart_is_refused_by_emit(act):
    # the module checks act by its name; every lambda is "<lambda>", every function the factory
    # makes is "power": another would pass the check and get this one's gradient (3 * x ** 2
    # where t ** 3 gives 4 * x ** 3, silently)
    x = np.array([1.0, 2.0])
    for make in (gradgen.emit, gradgen.explain):
        with pytest.raises(gradgen.GradgenError, match=r"test_user_programs\.py:\d+: argument "
                           r"act is (a lambda|power, a function defined inside _make_power): "):
            make(by_activation, x, act)
    other = _make_power(3)  # gradgen.grad keeps the function in its cache key: it retraces
    df = gradgen.grad(by_activation)
    np.testing.assert_allclose(df(x, act), 3 * x**2, rtol=1e-15)
    np.testing.assert_allclose(df(x, other), 4 * x**3, rtol=1e-15)


def scaled_sine(x, scale):
    return np.sum(np.sin(x) * scale)


def test_a_partial_is_named_and_located_by_its_function():
    # was "from <unknown>:anonymous", "Source sha256: unavailable (no source)"
    tripled = functools.partial(scaled_sine, scale=3.0)
    x = np.array([0.1, 0.5, -0.3])
    np.testing.assert_allclose(gradgen.grad(tripled)(x), 3 * np.cos(x), rtol=1e-15)
    source = gradgen.emit(tripled, x)
    header = source.splitlines()[:3]
    assert header[0].startswith("# Code generated by gradgen") and ":scaled_sine for" in header[0]
    assert "<unknown>" not in header[0] and "functools.partial(scaled_sine" in header[1]
    assert "unavailable" not in header[2]
    module = run_emitted(source)
    np.testing.assert_allclose(module["scaled_sine_grad"](x), 3 * np.cos(x), rtol=1e-15)


def test_a_negated_sum_is_written_as_a_subtraction():
    # np.sum(-g, axis=0) + grad_out was a pass over g to negate it, then the sum
    rng = np.random.default_rng(8)
    source = gradgen.emit(logsumexp, rng.standard_normal(6))
    assert "grad_m = grad_out - np.sum(" in source and "np.sum(-" not in source
    source = gradgen.emit(layer_norm, rng.standard_normal((3, 4)), rng.standard_normal(4),
                          rng.standard_normal(4), argnums=(0, 1, 2))
    assert "np.sum(-" not in source and "-np.sum(" in source
    # the premise: pairwise summation of negated terms is the negated sum, bit for bit
    for shape, axis in (((1000,), 0), ((7, 129), 1), ((3, 5, 64), (0, 2))):
        g = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
        np.testing.assert_array_equal(np.sum(-g, axis=axis), -np.sum(g, axis=axis))
        g32 = g.astype(np.float32)
        np.testing.assert_array_equal(np.sum(-g32, axis=axis), -np.sum(g32, axis=axis))


DECORATED = '''import numpy as np

import gradgen


@gradgen.grad
def f(x):
    return np.sum(np.sin(x) ** 2)


@gradgen.value_and_grad(argnums=(0, 1))
def g(w, b, x):
    return np.sum(np.tanh(w * x + b))
'''


def test_the_cli_emits_the_gradient_of_a_decorated_function(tmp_path):
    # `gradgen emit model.py:f` of an @gradgen.grad function traced the decorator's callable
    # ("f returned a value of shape (3,), not a scalar"); now its function, with its argnums
    (tmp_path / "model.py").write_text(DECORATED)
    result = run_gradgen("emit", "model.py:f", "--args", "(np.ones(3),)", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    x = np.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(run_emitted(result.stdout)["f_grad"](x), np.sin(2 * x),
                               rtol=1e-14)
    result = run_gradgen("emit", "model.py:g", "--args", "(np.ones(3), 0.5, np.ones(3))",
                         cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert '--args "(np.ones(3), 0.5, np.ones(3))" --argnums 0,1' in result.stdout
    w, b = np.array([0.1, 0.2, 0.3]), 0.5
    dw, db = run_emitted(result.stdout)["g_grad"](w, b, x)
    t = np.tanh(w * x + b)
    np.testing.assert_allclose(dw, (1 - t**2) * x, rtol=1e-13)
    np.testing.assert_allclose(db, np.sum(1 - t**2), rtol=1e-13)


@pytest.mark.parametrize("name", ["logsumexp", "softmax_ce", "layer_norm", "lstm_cell",
                                  "physics", "sigmoid_sum"])
def test_second_order_matches_differences_of_the_gradient(name):
    f, args, argnums = next(p for p in PROGRAMS if p[0].__name__ == name)
    first = argnums[0] if isinstance(argnums, tuple) else argnums
    x, v = args[first], np.random.default_rng(5).standard_normal(np.shape(args[first]))

    def at(y):
        return [*args[:first], y, *args[first + 1:]]

    df = gradgen.grad(f, argnums=first)
    hvp = gradgen.grad(lambda y: np.sum(df(*at(y)) * v))(x)
    eps = 1e-5
    ref = (df(*at(x + eps * v)) - df(*at(x - eps * v))) / (2 * eps)
    np.testing.assert_allclose(hvp, ref, rtol=1e-5, atol=1e-6)


def test_the_cli_says_its_version():
    result = run_gradgen("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"gradgen {gradgen.__version__}"


def qr_least_squares(A, b):
    Q, R = np.linalg.qr(A)
    return np.sum(np.linalg.solve(R, Q.T @ b) ** 2)


def spectrum(x):
    return np.sum(np.abs(np.fft.rfft(x)) ** 2)


@pytest.mark.parametrize(("f", "name", "hint"), [
    (qr_least_squares, "np.linalg.qr", "np.linalg.lstsq"),
    (spectrum, "np.fft.rfft", "np.cos and np.sin"),
])
def test_a_numpy_function_without_a_rule_is_named_with_what_has_one(f, name, hint):
    A = np.array([[2.0, 0.5], [0.1, 1.5], [0.3, -0.2]])
    args = (A, np.array([1.0, 2.0, 0.5])) if f is qr_least_squares else (A[:, 0],)
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        gradgen.grad(f)(*args)
    message = str(info.value)
    assert message.startswith("test_user_programs.py:") and f"{name} has no gradient rule" in message
    assert hint in message and "gradgen.defvjp" in message


def total(x):
    return np.sum(x)


def average(x):
    return np.mean(x)


@pytest.mark.parametrize(("f", "line"), [
    (total, "grad_x = np.broadcast_to(grad_out, (3,)).copy()"),
    (average, "grad_x = np.broadcast_to(grad_out / 3.0, (3,)).copy()")])
def test_a_returned_broadcast_is_copied_under_its_own_name(f, line):
    # was grad_x = np.broadcast_to(...); grad_x_copy = grad_x.copy(); return grad_x_copy
    x = np.array([1.0, -2.0, 3.0])
    source = gradgen.emit(f, x)
    assert f"    {line}\n    return grad_x\n" in source and "_copy" not in source
    g = run_emitted(source)[f"{f.__name__}_grad"](x)
    g[0] = 5.0  # the caller's own array: writable, and the next call's is another
    np.testing.assert_array_equal(run_emitted(source)[f"{f.__name__}_grad"](x),
                                  np.full(3, 1.0 if f is total else 1 / 3))
