"""gradgen.vjp: outputs and a pullback taking a cotangent per output (PyTorch's
``y.backward(v)``); pytree outputs; the emitted ``<f>_vjp``; vjp under grad."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest

import gradgen

from .conftest import load_example, run_emitted, run_isolated

# --- user-questions/question-4.txt: y = x @ M with three cotangents ---------------------------

M = np.array([[1.0, 2.0], [3.0, 4.0]])
X = np.array([[2.0, 1.0]])


def matmul(x, M):
    y = x @ M
    return y


@pytest.mark.parametrize(("cotangent", "want"), [
    ([[1.0, 0.0]], [[1.0, 3.0]]),
    ([[0.0, 1.0]], [[2.0, 4.0]]),
    ([[1.0, 1.0]], [[3.0, 7.0]]),
])
def test_question_4_cotangents(cotangent, want):
    y, pullback = gradgen.vjp(matmul, X, M)
    assert np.array_equal(y, [[5.0, 8.0]])
    gx, gM = pullback(np.array(cotangent))
    assert np.array_equal(gx, want)
    assert np.array_equal(gM, X.T @ np.array(cotangent))


def test_one_pullback_many_cotangents_is_linear():
    _, pullback = gradgen.vjp(matmul, X, M)
    first = pullback(np.array([[1.0, 0.0]]))[0]
    second = pullback(np.array([[0.0, 1.0]]))[0]
    both = pullback(np.array([[1.0, 1.0]]))[0]
    assert np.array_equal(both, first + second)


def test_pullback_does_not_mutate_or_alias_its_inputs():
    x, m = X.copy(), M.copy()
    _, pullback = gradgen.vjp(matmul, x, m)
    c = np.array([[1.0, 1.0]])
    gx, gM = pullback(c)
    gx += 100.0
    gM += 100.0
    assert np.array_equal(x, X) and np.array_equal(m, M)
    assert np.array_equal(c, [[1.0, 1.0]])
    assert np.array_equal(pullback(c)[0], [[3.0, 7.0]])


def test_integer_cotangent_is_cast_to_the_output_dtype():
    _, pullback = gradgen.vjp(matmul, X, M)
    gx, _ = pullback(np.array([[1, 1]]))
    assert gx.dtype == np.float64 and np.array_equal(gx, [[3.0, 7.0]])


# --- the value-dependent doubling loop of question-4 -------------------------------------------


def doubling(x):
    y = x * 2
    while np.linalg.norm(y) < 1000:
        y = y * 2
    return y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_doubling_loop_pullback_is_cotangent_times_a_power_of_two(seed):
    x = np.random.default_rng(seed).normal(size=3)
    y, pullback = gradgen.vjp(doubling, x)
    k = round(math.log2(np.linalg.norm(y) / np.linalg.norm(x)))
    assert np.allclose(y, x * 2.0**k) and np.linalg.norm(y) >= 1000 > np.linalg.norm(y) / 2
    v = np.array([0.1, 1.0, 0.0001])
    (g,) = pullback(v)
    assert np.array_equal(g, v * 2.0**k)


def test_doubling_example_module_through_vjp():
    f = load_example("doubling").f  # returns np.sum(y): a scalar output
    x = np.array([0.3, -0.2, 0.5])
    value, pullback = gradgen.vjp(f, x)
    (g,) = pullback(1.0)
    assert np.array_equal(g, gradgen.grad(f)(x))
    assert np.array_equal(pullback(0.5)[0], g / 2)
    assert value == pytest.approx(f(x))


def test_doubling_emitted_vjp_checks_its_guards(tmp_path):
    x = np.array([0.3, -0.2, 0.5])
    source = gradgen.emit(doubling, x, vjp=True)
    ns = run_emitted(source)
    y, (g,) = ns["doubling_vjp"](x, np.array([0.1, 1.0, 0.0001]))
    assert np.array_equal(y, x * 2.0**11)
    assert np.array_equal(g, np.array([0.1, 1.0, 0.0001]) * 2.0**11)
    with pytest.raises(ns["GuardFailure"], match=r"np\.linalg\.norm\(y\) < 1000"):
        ns["doubling_vjp"](x * 1000, np.ones(3))
    out = run_isolated(
        source, "generated.doubling_vjp(np.array([0.3, -0.2, 0.5]), "
        "np.array([0.1, 1.0, 0.0001]))[1][0].tolist()", tmp_path)
    assert np.array_equal(eval(out), np.array([0.1, 1.0, 0.0001]) * 2.0**11)


# --- scalar outputs and Python floats -----------------------------------------------------------


def test_python_float_cotangent_of_a_float_output():
    y, pullback = gradgen.vjp(lambda x: x**3, 2.0)
    assert y == 8.0
    (g,) = pullback(1.0)
    assert type(g) is float and g == 12.0
    assert pullback(0.5) == (6.0,)


@pytest.mark.parametrize("cotangent", [2.0, np.float64(2.0), np.array(2.0), 2],
                         ids=["float", "np.float64", "0-d", "int"])
def test_scalar_cotangent_spellings(cotangent):
    _, pullback = gradgen.vjp(lambda x: x**3, 2.0)
    (g,) = pullback(cotangent)
    assert type(g) is float and g == 24.0


def test_python_float_cotangent_of_a_zero_d_output():
    y, pullback = gradgen.vjp(lambda x: np.sum(x**2), np.array([1.0, 2.0]))
    assert y == 5.0
    (g,) = pullback(1.0)
    assert np.array_equal(g, [2.0, 4.0])
    assert np.array_equal(pullback(3.0)[0], [6.0, 12.0])


def test_float32_stays_float32():
    y, pullback = gradgen.vjp(lambda x: x * 2, np.ones(2, dtype=np.float32))
    assert y.dtype == np.float32
    (g,) = pullback(np.ones(2))  # a float64 cotangent is cast to the output's dtype
    assert g.dtype == np.float32
    y, pullback = gradgen.vjp(lambda x: np.sum(x**2), np.ones(2, dtype=np.float32))
    assert pullback(1.0)[0].dtype == np.float32


def test_one_gradient_per_positional_argument_none_for_non_floats():
    y, pullback = gradgen.vjp(lambda x, n: x * n, 3.0, 2)
    assert y == 6.0
    assert pullback(1.0) == (2.0, None)


def test_outputs_equal_the_plain_call():
    def f(x, w):
        return np.tanh(x @ w)

    x, w = np.linspace(-1, 1, 6).reshape(2, 3), np.linspace(0, 1, 3)
    y, _ = gradgen.vjp(f, x, w)
    assert np.allclose(y, f(x, w))


# --- pytree outputs and cotangents ---------------------------------------------------------------


def tree_out(p, xs):
    return {"a": p["w"] * xs[0], "b": [np.sin(p["w"]), xs[1] * 2.0]}, (xs[0] * xs[1],)


P = {"w": np.array([1.0, 2.0])}
XS = (3.0, 4.0)
COT = ({"a": np.array([1.0, -1.0]), "b": [np.array([0.5, 2.0]), 1.0]}, (1.0,))


def _tree_grads(cot):
    w, (x0, x1) = P["w"], XS
    gw = cot[0]["a"] * x0 + cot[0]["b"][0] * np.cos(w)
    gx0 = np.sum(cot[0]["a"] * w) + cot[1][0] * x1
    gx1 = cot[0]["b"][1] * 2.0 + cot[1][0] * x0
    return gw, gx0, gx1


def test_pytree_outputs():
    out, _ = gradgen.vjp(tree_out, P, XS)
    assert isinstance(out, tuple) and len(out) == 2
    assert set(out[0]) == {"a", "b"} and isinstance(out[0]["b"], list)
    assert np.array_equal(out[0]["a"], [3.0, 6.0])
    assert out[0]["b"][1] == 8.0 and out[1] == (12.0,)


def test_pytree_cotangents():
    _, pullback = gradgen.vjp(tree_out, P, XS)
    gp, gxs = pullback(COT)
    gw, gx0, gx1 = _tree_grads(COT)
    assert set(gp) == {"w"} and np.allclose(gp["w"], gw)
    assert isinstance(gxs, tuple) and gxs == (pytest.approx(gx0), pytest.approx(gx1))
    assert type(gxs[0]) is float


@pytest.mark.parametrize("bad", [
    ({"a": np.ones(2), "b": [np.ones(2), 1.0]}, 1.0),  # a bare leaf for the 1-tuple
    ({"a": np.ones(2), "b": (np.ones(2), 1.0)}, (1.0,)),  # tuple for the list
    ({"a": np.ones(2)}, (1.0,)),  # a key missing
    [{"a": np.ones(2), "b": [np.ones(2), 1.0]}, (1.0,)],  # list for the outer tuple
], ids=["leaf-for-tuple", "tuple-for-list", "missing-key", "list-for-tuple"])
def test_wrong_cotangent_structure(bad):
    _, pullback = gradgen.vjp(tree_out, P, XS)
    with pytest.raises(gradgen.GradgenError, match="cotangent has structure") as info:
        pullback(bad)
    assert "tree_out returned ({'a': *, 'b': [*, *]}, (*,))" in str(info.value)
    assert str(info.value).startswith("test_vjp.py:")


def test_wrong_cotangent_shape():
    _, pullback = gradgen.vjp(tree_out, P, XS)
    bad = ({"a": np.ones(3), "b": [np.ones(2), 1.0]}, (1.0,))
    with pytest.raises(gradgen.GradgenError, match=r"shape \(3,\), but output 0 has shape \(2,\)"):
        pullback(bad)


def test_wrong_cotangent_shape_of_a_single_output():
    _, pullback = gradgen.vjp(matmul, X, M)
    with pytest.raises(gradgen.GradgenError, match=r"shape \(2,\).*shape \(1, 2\)"):
        pullback(np.ones(2))
    with pytest.raises(gradgen.GradgenError, match="structure"):
        pullback([np.ones(2)])


def test_vjp_of_a_function_returning_a_list():
    def f(x):
        return [x * 2, x * x]

    out, pullback = gradgen.vjp(f, 3.0)
    assert out == [6.0, 9.0]
    assert pullback([1.0, 1.0]) == (8.0,)
    with pytest.raises(gradgen.GradgenError):
        pullback((1.0, 1.0))


# --- the emitted <f>_vjp ----------------------------------------------------------------------------


def test_emitted_vjp_signature_and_results():
    source = gradgen.emit(matmul, X, M, vjp=True)
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert list(functions) == ["matmul_vjp"]
    assert [a.arg for a in functions["matmul_vjp"].args.args] == ["x", "M", "cotangent"]
    y, (gx, gM) = run_emitted(source)["matmul_vjp"](X, M, np.array([[1.0, 1.0]]))
    assert np.array_equal(y, [[5.0, 8.0]])
    assert np.array_equal(gx, [[3.0, 7.0]]) and np.array_equal(gM, [[2.0, 2.0], [1.0, 1.0]])


def test_emitted_vjp_runs_under_python_isolated(tmp_path):
    source = gradgen.emit(matmul, X, M, vjp=True)
    call = ("[g.tolist() for g in generated.matmul_vjp(np.array([[2.0, 1.0]]), "
            "np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.0, 1.0]]))[1]]")
    gx, gM = eval(run_isolated(source, call, tmp_path))
    assert gx == [[2.0, 4.0]] and gM == [[0.0, 2.0], [0.0, 1.0]]


def test_emitted_pytree_vjp_matches_the_pullback(tmp_path):
    source = gradgen.emit(tree_out, P, XS, vjp=True)
    assert 'cotangent[0]["a"]' in source and 'cotangent[1][0]' in source
    out, (gp, gxs) = run_emitted(source)["tree_out_vjp"](P, XS, COT)
    want_out, pullback = gradgen.vjp(tree_out, P, XS)
    assert out[1] == want_out[1] and np.array_equal(out[0]["a"], want_out[0]["a"])
    want_p, want_xs = pullback(COT)
    assert np.array_equal(gp["w"], want_p["w"]) and gxs == pytest.approx(want_xs)
    call = ("generated.tree_out_vjp({'w': np.array([1.0, 2.0])}, (3.0, 4.0), "
            "({'a': np.array([1.0, -1.0]), 'b': [np.array([0.5, 2.0]), 1.0]}, (1.0,)))[1][1]")
    assert eval(run_isolated(source, call, tmp_path)) == pytest.approx(want_xs)


def test_pullback_source_is_the_emitted_module():
    _, pullback = gradgen.vjp(matmul, X, M)
    assert "def matmul_vjp(x, M, cotangent):" in pullback.source
    assert pullback.source == gradgen.emit(matmul, X, M, vjp=True)


# --- vjp under grad ----------------------------------------------------------------------------------


def cube(x):
    return x**3


def slope_by_vjp(x):
    _, pullback = gradgen.vjp(cube, x)
    return pullback(1.0)[0]


def test_grad_of_a_pullback():
    assert slope_by_vjp(2.0) == 12.0
    assert gradgen.grad(slope_by_vjp)(2.0) == pytest.approx(12.0)  # d/dx 3x**2 = 6x


def test_grad_of_a_pullback_with_respect_to_the_cotangent():
    def f(x, c):
        _, pullback = gradgen.vjp(lambda v: v * v, x)
        return pullback(c)[0]

    # pullback(c) = 2 x c
    assert gradgen.grad(f, argnums=1)(3.0, 2.0) == pytest.approx(6.0)
    assert gradgen.grad(f, argnums=(0, 1))(3.0, 2.0) == (pytest.approx(4.0), pytest.approx(6.0))


def test_grad_of_an_array_pullback_matches_finite_differences():
    def f(x):
        out, pullback = gradgen.vjp(lambda v: np.sin(v) * v, x)
        (g,) = pullback(np.ones(3))
        return np.sum(g * out)

    def reference(x):
        return np.sum((np.cos(x) * x + np.sin(x)) * np.sin(x) * x)

    x = np.array([0.1, 0.2, 0.3])
    eps = 1e-6
    numeric = [(reference(x + eps * e) - reference(x - eps * e)) / (2 * eps) for e in np.eye(3)]
    assert np.allclose(gradgen.grad(f)(x), numeric, rtol=1e-6)
