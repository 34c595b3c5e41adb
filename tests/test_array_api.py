"""target="array-api": one emitted file, run on NumPy, Dask (chunked), JAX (under jax.jit)
and PyTorch arrays, gives the NumPy target's gradient to float64 round-off, returns arrays of
the caller's library, keeps Python floats and pytrees as they are, and never writes into the
caller's arrays. Guards read concrete values: under jax.jit they fail naming the guard."""

from __future__ import annotations

import numpy as np
import pytest

import gradgen
from tests.conftest import run_emitted
from tests.test_array_api_rows import assert_no_numpy

pytest.importorskip("array_api_compat")
pytest.importorskip("array_api_extra")

# --- user functions covering the rule table's families -----------------------------------


def mlp(params, X, y):
    h = np.tanh(X @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    err = out[:, 0] - y
    return np.mean(err * err) + 0.01 * np.sum(params["W1"] ** 2)


def reductions(x):
    m = np.max(x, axis=1, keepdims=True)
    z = np.exp(x - m)
    lse = np.log(np.sum(z, axis=1)) + m[:, 0]
    spread = np.std(x, axis=0, ddof=1)
    return np.sum(lse) + np.sum(spread) + np.prod(np.mean(x, axis=0)) + np.min(x)


def slicing(x):
    a = x[1:, :3]
    b = x[::2]
    c = x[:, [0, 2, 2]]  # a repeated column: its cotangents add up
    d = np.concatenate([x[0], x[-1] * 2.0])
    return np.sum(a * a) + np.sum(np.sin(b)) + np.sum(c**3) + np.sum(np.cumsum(d) ** 2)


def banded(x):
    d = x[1:] - x[:-1] ** 2
    return np.sum(100.0 * d**2 + (1.0 - x[:-1]) ** 2) + np.sum(np.tanh(x[2:] * x[:-2]))


def linear(A, B):
    C = A @ B.T
    G = np.transpose(np.reshape(C, (3, 2, 2)), (1, 0, 2))
    E = np.einsum("ij,kj->ik", A, B) + np.einsum("bi,bi->b", A, A)[:, None]  # tensordot; batch
    return (np.sum(np.sqrt(G * G + 1.0)) + np.trace(A.T @ A) + np.linalg.norm(B, axis=1).sum()
            + np.sum(np.tanh(E)))


def loop(x, W):
    h = x
    for _ in range(4):  # a Python loop
        h = np.tanh(h @ W + 0.1)
    return np.sum(h * h)


def rnn(x, W):
    T = x.shape[0]
    hs = np.zeros((T, W.shape[1]))  # a buffer filled row by row
    h = np.zeros(W.shape[1])
    for t in range(T):
        h = np.tanh(x[t] @ W + h * 0.5)
        hs[t] = h
    return np.sum(hs**2)


def guarded(x):
    if np.sum(x) > 0:
        return np.sum(x * x)
    return -np.sum(x)


def scaled(x, a):
    return np.sum(np.sin(x) * a) + a * a


def _data():
    rng = np.random.default_rng(7)
    params = {"W1": rng.normal(size=(3, 4)), "b1": rng.normal(size=4),
              "W2": rng.normal(size=(4, 1)), "b2": rng.normal(size=1)}
    return {
        "mlp": (mlp, (params, rng.normal(size=(5, 3)), rng.normal(size=5)), (0, 1)),
        "reductions": (reductions, (rng.normal(size=(4, 3)),), 0),
        "slicing": (slicing, (rng.normal(size=(4, 5)),), 0),
        "banded": (banded, (rng.normal(size=7),), 0),
        "linear": (linear, (rng.normal(size=(3, 4)), rng.normal(size=(4, 4))), (0, 1)),
        "loop": (loop, (rng.normal(size=(2, 3)), rng.normal(size=(3, 3)) * 0.5), (0, 1)),
        "rnn": (rnn, (rng.normal(size=(6, 3)), rng.normal(size=(3, 3)) * 0.5), (0, 1)),
        "guarded": (guarded, (np.abs(rng.normal(size=4)),), 0),
    }


CASES = _data()


def _modules(name):
    fn, args, argnums = CASES[name]
    reference = gradgen.value_and_grad(fn, argnums=argnums)(*args)
    source = gradgen.emit(fn, *args, argnums=argnums, target="array-api")
    return run_emitted(source), source, fn.__name__, args, reference


def _map(tree, leaf):
    if isinstance(tree, dict):
        return {k: _map(v, leaf) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_map(v, leaf) for v in tree)
    return leaf(tree)


def _assert_close(got, want, what, kind=None):
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), what
        for key in want:
            _assert_close(got[key], want[key], f"{what}[{key!r}]", kind)
        return
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_close(g, w, f"{what}[{i}]", kind)
        return
    if kind is not None:
        assert isinstance(got, kind), f"{what}: {type(got)} is not the caller's {kind}"
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-11,
                               atol=1e-12, err_msg=what)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_module_is_written_against_the_standard(name):
    _, source, fname, _, _ = _modules(name)
    assert_no_numpy(source)
    assert "from array_api_compat import array_namespace" in source
    assert f"def {fname}_grad(" in source and f"def {fname}_value_and_grad(" in source


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_arrays(name):
    module, _, fname, args, (value, grads) = _modules(name)
    before = _map(args, np.copy)
    got_value, got = module[f"{fname}_value_and_grad"](*args)
    _assert_close(got_value, value, "value")
    _assert_close(got, grads, name, np.ndarray | np.generic)
    _assert_close(args, before, "the caller's arrays are unchanged")


@pytest.mark.parametrize("name", sorted(CASES))
def test_dask_arrays_chunked(name):
    da = pytest.importorskip("dask.array")
    module, _, fname, args, (value, grads) = _modules(name)
    lazy = _map(args, lambda a: da.from_array(a, chunks=2) if isinstance(a, np.ndarray) else a)
    got_value, got = module[f"{fname}_value_and_grad"](*lazy)
    assert isinstance(got_value, da.Array)  # still lazy: nothing was converted or computed
    computed = _map((got_value, got), lambda v: v.compute() if isinstance(v, da.Array) else v)
    _assert_close(computed[0], value, "value")
    _assert_close(computed[1], grads, name)


@pytest.fixture
def jax64():
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", previous)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"guarded"}))
def test_jax_arrays_under_jit(name, jax64):
    jnp = jax64.numpy
    module, _, fname, args, (value, grads) = _modules(name)
    device_args = _map(args, jnp.asarray)
    jitted = jax64.jit(module[f"{fname}_value_and_grad"])
    got_value, got = jitted(*device_args)
    _assert_close(got_value, value, "value")
    _assert_close(got, grads, name, jax64.Array)


def test_a_guard_under_jit_names_the_guard(jax64):
    module, _, fname, args, (_, grads) = _modules("guarded")
    x = jax64.numpy.asarray(args[0])
    _assert_close(module[f"{fname}_grad"](x), grads, "guarded, outside jit")
    with pytest.raises(module["GuardNeedsValue"], match=r"test_array_api.py:\d+: np.sum\(x\) > 0"):
        jax64.jit(module[f"{fname}_grad"])(x)
    with pytest.raises(module["GuardFailure"], match="np.sum"):
        module[f"{fname}_grad"](-x)  # off the traced path, outside jit: as in the NumPy target


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_tensors(name):
    torch = pytest.importorskip("torch")
    module, _, fname, args, (value, grads) = _modules(name)
    tensors = _map(args, torch.from_numpy)
    got_value, got = module[f"{fname}_value_and_grad"](*tensors)
    _assert_close(got_value.numpy(), value, "value")
    _assert_close(_map(got, lambda t: t.numpy()), grads, name)
    assert all(isinstance(t, torch.Tensor) for t in _leaves(got))


def _leaves(tree):
    if isinstance(tree, dict):
        return [v for x in tree.values() for v in _leaves(x)]
    if isinstance(tree, tuple | list):
        return [v for x in tree for v in _leaves(x)]
    return [tree]


def test_python_floats_stay_python_floats():
    da = pytest.importorskip("dask.array")
    x = np.linspace(-1.0, 1.0, 5)
    want = gradgen.grad(scaled, argnums=(0, 1))(x, 0.5)
    source = gradgen.emit(scaled, x, 0.5, argnums=(0, 1), target="array-api")
    module = run_emitted(source)
    for arg in (x, da.from_array(x, chunks=2)):
        gx, ga = module["scaled_grad"](arg, 0.5)
        assert type(ga) is float
        np.testing.assert_allclose(np.asarray(gx), want[0], rtol=1e-13)
        assert ga == pytest.approx(want[1], rel=1e-13)


def test_zero_d_arrays_stay_arrays_of_the_callers_library():
    torch = pytest.importorskip("torch")

    def f(x, s):
        return np.sum(np.exp(x * s))

    x, s = np.linspace(0.0, 1.0, 4), np.array(0.3)
    want = gradgen.grad(f, argnums=1)(x, s)
    module = run_emitted(gradgen.emit(f, x, s, argnums=1, target="array-api"))
    got = module["f_grad"](torch.from_numpy(x), torch.from_numpy(s))
    assert isinstance(got, torch.Tensor) and got.shape == () and got.dtype == torch.float64
    assert float(got) == pytest.approx(float(want), rel=1e-13)


def test_the_numpy_target_is_unchanged_by_default():
    fn, args, argnums = CASES["mlp"]
    assert gradgen.emit(fn, *args, argnums=argnums) == gradgen.emit(
        fn, *args, argnums=argnums, target="numpy")
    assert "import numpy as np" in gradgen.emit(fn, *args, argnums=argnums)


def test_an_unknown_target_is_an_error():
    with pytest.raises(gradgen.GradgenError, match="unknown target 'cupy'"):
        gradgen.emit(mlp, *CASES["mlp"][1], target="cupy")


def test_an_operation_the_standard_lacks_is_refused_naming_the_line():
    def f(x):
        return np.sum(np.fmod(x, 1.5))

    with pytest.raises(gradgen.UnsupportedOperation,
                       match=r"test_array_api.py:\d+: np.fmod has no equivalent in the array "
                             r"API standard, so target='array-api' cannot write this line"):
        gradgen.emit(f, np.ones((2, 2)), target="array-api")


def test_cli_target_array_api(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "model.py"
    script.write_text("import numpy as np\n\n\ndef f(x):\n    return np.sum(np.tanh(x) ** 2)\n")
    result = subprocess.run(
        [sys.executable, "-m", "gradgen", "emit", f"{script}:f", "--args", "(np.ones(3),)",
         "--target", "array-api"], capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(__import__("pathlib").Path(gradgen.__file__).parents[1])})
    assert result.returncode == 0, result.stderr
    assert "--target array-api" in result.stdout  # the regenerate line keeps the target
    assert "xp = array_namespace(x)" in result.stdout
    module = run_emitted(result.stdout)
    np.testing.assert_allclose(module["f_grad"](np.ones(3)),
                               2 * np.tanh(1.0) * (1 - np.tanh(1.0) ** 2) * np.ones(3))


def test_the_dask_example_matches_the_numpy_gradient():
    pytest.importorskip("dask.array")
    from tests.conftest import load_example

    example = load_example("dask_logistic")
    value, grad = example.main(n=2_000, d=4, chunk_rows=300)  # seven chunks of rows
    w, X, y = example.data(2_000, 4)
    want_value, want_grad = gradgen.value_and_grad(example.loss)(w, X, y)
    assert value == pytest.approx(want_value, rel=1e-13)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-11, atol=1e-14)


def test_torch_scalars_in_calls():
    torch = pytest.importorskip("torch")
    from tests.conftest import load_example

    example = load_example("dask_logistic")
    w, X, y = example.data(50, 3)
    w = w + 0.3
    module = run_emitted(gradgen.emit(example.loss, w, X, y, target="array-api"))
    got = module["loss_grad"](*(torch.from_numpy(a) for a in (w, X, y)))
    np.testing.assert_allclose(got.numpy(), gradgen.grad(example.loss)(w, X, y), rtol=1e-12)


def test_the_modules_are_ruff_clean_and_formatted(tmp_path):
    """The array-API modules of this file's functions and of the style corpus: what ruff
    check and ruff format --check accept, like the NumPy target's."""
    from tests.test_emitted_style import CORPUS, RUFF, _ruff

    if RUFF is None:
        pytest.skip("ruff is not installed")
    written = 0
    for name, fn, args, kwargs in [*((n, *CASES[n][:2], {"argnums": CASES[n][2]}) for n in CASES),
                                   *CORPUS]:
        try:
            source = gradgen.emit(fn, *args, **kwargs, target="array-api")
        except gradgen.UnsupportedOperation:
            continue  # refused by name (tested above); nothing was written
        (tmp_path / f"{name}.py").write_text(source)
        written += 1
    assert written >= 15
    check = _ruff("check", "--output-format", "concise", cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    fmt = _ruff("format", "--check", "--diff", cwd=tmp_path)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_slice_updates_of_one_buffer_are_one_join_of_pieces():
    """x[1:], x[:-1] and x[2:], x[:-2]: no pad per update (what XLA fuses worst) but one
    xp.concat of pieces, each a sum of slices in the order of the updates, so the NumPy
    target's in-place gradient is matched bit for bit."""
    module, source, fname, args, (_, grads) = _modules("banded")
    body = source[source.index(f"def {fname}_grad("):].split("\n\n\n")[0]
    assert "xp.concat(" in body and "xpx.pad" not in body and "xpx.at" not in body, body
    np.testing.assert_array_equal(module[f"{fname}_grad"](*args), grads)
