"""Pytree arguments: gradients of dicts, lists and tuples come back in the same structure with
the same shapes and dtypes; other pytree arguments are plain data; emitted modules unpack the
leaves into readable names and rebuild the structure."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import gradgen
from gradgen.pytree import LEAF, TreeDef, access_text, flatten, leaf_name, leaf_paths, unflatten

from .conftest import run_emitted, run_isolated

# --- a two-layer network with a dict of parameters --------------------------------------------


def mlp(params, x, y):
    h = np.tanh(x @ params["W1"] + params["b1"])
    pred = h @ params["W2"] + params["b2"]
    return np.mean((pred - y) ** 2)


def _params(dtype=np.float64):
    rng = np.random.default_rng(0)
    return {"W1": rng.normal(size=(3, 4)).astype(dtype), "b1": np.zeros(4, dtype),
            "W2": rng.normal(size=(4, 1)).astype(dtype), "b2": np.zeros(1, dtype)}


def _data(dtype=np.float64):
    rng = np.random.default_rng(1)
    return rng.normal(size=(5, 3)).astype(dtype), rng.normal(size=(5, 1)).astype(dtype)


def _mlp_reference(params, x, y):
    """The gradient written out by hand."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    pred = h @ params["W2"] + params["b2"]
    g_pred = 2 * (pred - y) / pred.size
    g_h = g_pred @ params["W2"].T * (1 - h * h)
    return {"W1": x.T @ g_h, "b1": g_h.sum(0), "W2": h.T @ g_pred, "b2": g_pred.sum(0)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradient_of_a_dict_has_the_same_keys_shapes_and_dtypes(dtype):
    params = _params(dtype)
    x, y = _data(dtype)
    g = gradgen.grad(mlp)(params, x, y)
    assert isinstance(g, dict) and list(g) == ["W1", "b1", "W2", "b2"]
    want = _mlp_reference(params, x, y)
    for key, value in params.items():
        assert isinstance(g[key], np.ndarray)
        assert g[key].shape == value.shape and g[key].dtype == value.dtype
        assert np.allclose(g[key], want[key], rtol=1e-4 if dtype == np.float32 else 1e-10)


def test_gradient_of_a_dict_with_several_argnums():
    params = _params()
    x, y = _data()
    gp, gx = gradgen.grad(mlp, argnums=(0, 1))(params, x, y)
    assert list(gp) == list(params) and gx.shape == x.shape


def test_value_and_grad_of_a_dict():
    params = _params()
    x, y = _data()
    value, g = gradgen.value_and_grad(mlp)(params, x, y)
    assert value == pytest.approx(mlp(params, x, y))
    assert list(g) == list(params)


def test_dict_order_is_the_callers():
    params = _params()
    reordered = {k: params[k] for k in ("b2", "W2", "b1", "W1")}
    x, y = _data()
    g = gradgen.grad(mlp)(reordered, x, y)
    assert list(g) == ["b2", "W2", "b1", "W1"]
    assert np.allclose(g["W1"], gradgen.grad(mlp)(params, x, y)["W1"])


def test_lists_and_tuples_keep_their_types():
    def f(ws, bias):
        a, (b, c) = ws
        return np.sum(a * b) + c * bias[0]

    ws = [np.ones(2), (np.arange(2.0), 3.0)]
    gws, gbias = gradgen.grad(f, argnums=(0, 1))(ws, (2.0,))
    assert isinstance(gws, list) and isinstance(gws[1], tuple) and isinstance(gbias, tuple)
    assert np.array_equal(gws[0], [0.0, 1.0]) and np.array_equal(gws[1][0], [1.0, 1.0])
    assert type(gws[1][1]) is float and gws[1][1] == 2.0
    assert gbias == (3.0,) and type(gbias[0]) is float


def test_scalar_leaves_keep_their_kind():
    def f(p):
        return p["a"] * 2.0 + np.sum(p["b"]) + p["c"] * p["d"]

    p = {"a": np.float32(1.0), "b": np.zeros(2, np.float32), "c": np.array(1.0), "d": 3.0}
    g = gradgen.grad(f)(p)
    assert type(g["a"]) is float and g["a"] == 2.0  # a NumPy float scalar gives a float
    assert g["b"].dtype == np.float32 and np.array_equal(g["b"], [1.0, 1.0])
    assert isinstance(g["c"], np.ndarray) and g["c"].shape == () and g["c"] == 3.0
    assert type(g["d"]) is float and g["d"] == 1.0


def test_unused_leaves_get_zeros():
    g = gradgen.grad(lambda p: p["a"] * 2.0)({"a": 1.0, "b": np.ones((2, 2))})
    assert g["a"] == 2.0 and np.array_equal(g["b"], np.zeros((2, 2)))


def test_nested_dicts():
    def f(p):
        return np.sum(p["enc"]["W"] ** 2) + p["dec"]["W"] * p["enc"]["s"]

    p = {"enc": {"W": np.ones(3), "s": 2.0}, "dec": {"W": 5.0}}
    g = gradgen.grad(f)(p)
    assert np.array_equal(g["enc"]["W"], [2.0, 2.0, 2.0])
    assert g["enc"]["s"] == 5.0 and g["dec"]["W"] == 2.0


def test_empty_containers_give_empty_gradients():
    assert gradgen.grad(lambda p, x: x * 2, argnums=(0, 1))({}, 1.0) == ({}, 2.0)
    assert gradgen.grad(lambda p, x: x * 2, argnums=(0, 1))((), 1.0) == ((), 2.0)


# --- pytree arguments that are not differentiated ----------------------------------------------


def regression(params, batch):
    residual = batch["x"] @ params["w"] - batch["y"]
    return np.sum(residual**2) / batch["n"]


def test_non_differentiated_pytree_is_data():
    params = {"w": np.array([1.0, 2.0])}
    df = gradgen.grad(regression)
    for scale in (1.0, 2.0, -0.5):
        batch = {"x": scale * np.eye(2), "y": np.array([0.0, 1.0]), "n": 2}
        want = 2 * batch["x"].T @ (batch["x"] @ params["w"] - batch["y"]) / 2
        assert np.allclose(df(params, batch)["w"], want)


def test_non_differentiated_static_leaf_changes_are_seen():
    params = {"w": np.array([1.0, 2.0])}
    batch = {"x": np.eye(2), "y": np.array([0.0, 1.0]), "n": 2}
    df = gradgen.grad(regression)
    first = df(params, batch)["w"]
    second = df(params, dict(batch, n=4))["w"]
    assert np.allclose(second, first / 2)


def test_differentiating_a_pytree_with_an_int_leaf_names_the_leaf():
    params = {"w": np.array([1.0, 2.0])}
    batch = {"x": np.eye(2), "y": np.array([0.0, 1.0]), "n": 2}
    with pytest.raises(gradgen.GradgenError, match=r"batch\['n'\].*argument 1.*an int"):
        gradgen.grad(regression, argnums=1)(params, batch)


# --- emitted modules -----------------------------------------------------------------------------


def test_emitted_module_unpacks_leaves_by_name():
    params = _params()
    x, y = _data()
    source = gradgen.emit(mlp, params, x, y)
    for key in ("W1", "b1", "W2", "b2"):
        assert f'    {key} = params["{key}"]\n' in source
    assert 'return {"W1": grad_W1, "b1": grad_b1, "W2": grad_W2, "b2": grad_b2}' in source
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("mlp_grad", "mlp_value_and_grad"):
        assert [a.arg for a in functions[name].args.args] == ["params", "x", "y"]


def test_emitted_module_returns_the_same_structure():
    params = _params()
    x, y = _data()
    ns = run_emitted(gradgen.emit(mlp, params, x, y))
    g = ns["mlp_grad"](params, x, y)
    want = gradgen.grad(mlp)(params, x, y)
    assert list(g) == list(want)
    for key in want:
        assert g[key].shape == want[key].shape and np.allclose(g[key], want[key])
    value, g2 = ns["mlp_value_and_grad"](params, x, y)
    assert value == pytest.approx(mlp(params, x, y)) and list(g2) == list(want)


def test_emitted_module_with_pytrees_runs_under_python_isolated(tmp_path):
    params = _params()
    x, y = _data()
    source = gradgen.emit(mlp, params, x, y)
    call = (
        "{k: v.round(12).tolist() for k, v in generated.mlp_grad("
        f"{_literal(params)}, np.array({x.tolist()!r}), np.array({y.tolist()!r})).items()}}"
    )
    got = eval(run_isolated(source, call, tmp_path))
    want = gradgen.grad(mlp)(params, x, y)
    assert list(got) == list(want)
    for key in want:
        assert np.allclose(got[key], want[key], atol=1e-11)


def _literal(params: dict) -> str:
    return "{" + ", ".join(f"{k!r}: np.array({v.tolist()!r})" for k, v in params.items()) + "}"


def test_emitted_nested_list_and_tuple_arguments(tmp_path):
    def f(ws, bias, scale):
        a, (b, c) = ws
        return np.sum(a * b) + c * bias[0] * scale

    args = ([np.ones(2), (np.arange(2.0), 3.0)], (2.0,), 5)
    source = gradgen.emit(f, *args, argnums=(0, 1))
    assert "ws[1][0]" in source and "bias[0]" in source
    assert "return [" in source  # the list is rebuilt as a list
    call = ("generated.f_grad([np.ones(2), (np.arange(2.0), 3.0)], (2.0,), 5)")
    text = run_isolated(source, call, tmp_path)
    assert text.startswith("([array([0., 1.]), (array([1., 1.]), 10.0)], (15.0,))")


def test_emitted_keys_that_are_not_identifiers():
    def f(p):
        return np.sum(p["layer 1"] * p[2])

    p = {"layer 1": np.ones(2), 2: np.full(2, 3.0)}
    source = gradgen.emit(f, p)
    assert 'p["layer 1"]' in source and "p[2]" in source
    g = run_emitted(source)["f_grad"](p)
    assert set(g) == {"layer 1", 2}
    assert np.array_equal(g["layer 1"], [3.0, 3.0]) and np.array_equal(g[2], [1.0, 1.0])


def test_emitted_leaf_name_colliding_with_a_parameter():
    def f(W, params):
        return np.sum(W * params["W"])

    source = gradgen.emit(f, np.ones(2), {"W": np.full(2, 2.0)}, argnums=(0, 1))
    assert 'params_W = params["W"]' in source
    gW, gp = run_emitted(source)["f_grad"](np.ones(2), {"W": np.full(2, 2.0)})
    assert np.array_equal(gW, [2.0, 2.0]) and np.array_equal(gp["W"], [1.0, 1.0])


# --- the flatten/unflatten helpers themselves -----------------------------------------------------


def test_flatten_unflatten_round_trip():
    value = {"a": [1.0, (2.0, 3.0)], "b": {"c": 4.0}, "d": ()}
    leaves, tree = flatten(value)
    assert leaves == [1.0, 2.0, 3.0, 4.0]
    assert unflatten(tree, leaves) == value
    assert leaf_paths(tree) == [("a", 0), ("a", 1, 0), ("a", 1, 1), ("b", "c")]


def test_treedef_text():
    _, tree = flatten(({"a": 1.0, "b": [2.0, 3.0]}, (4.0,)))
    assert str(tree) == "({'a': *, 'b': [*, *]}, (*,))"
    assert str(LEAF) == "*"
    assert TreeDef("tuple", (), ()).num_leaves == 0


@pytest.mark.parametrize(("root", "path", "name", "access"), [
    ("params", ("W1",), "W1", 'params["W1"]'),
    ("xs", (0,), "xs_0", "xs[0]"),
    ("p", ("layer 1",), "p_layer_1", 'p["layer 1"]'),
    ("p", ("class",), "p_class", 'p["class"]'),
    ("t", (1, "w"), "w", 't[1]["w"]'),
])
def test_leaf_names_and_accessors(root, path, name, access):
    assert leaf_name(root, path) == name
    assert access_text(root, path) == access
