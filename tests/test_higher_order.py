"""Higher order: grad of grad, tuple argnums, jacobian and hessian (JAX's shapes, by reverse
mode over the backward graph), Hessian-vector products, and Hessians against sympy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

import gradgen

grad = gradgen.grad


def three(x, y, z):
    return x * y * z + math.sin(x) * z**2


# d/dx = yz + cos(x) z**2, d/dy = xz, d/dz = xy + 2 sin(x) z
def three_grad(x, y, z):
    return (y * z + math.cos(x) * z**2, x * z, x * y + 2 * math.sin(x) * z)


# --- grad of grad, argnums, value_and_grad ------------------------------------------------------


def test_grad_with_argnums_zero_and_two():
    gx, gz = grad(three, argnums=(0, 2))(1.0, 2.0, 3.0)
    want = three_grad(1.0, 2.0, 3.0)
    assert (gx, gz) == (pytest.approx(want[0]), pytest.approx(want[2]))
    assert type(gx) is float and type(gz) is float


def test_value_and_grad_with_tuple_argnums():
    value, grads = gradgen.value_and_grad(three, argnums=(0, 2))(1.0, 2.0, 3.0)
    assert value == pytest.approx(three(1.0, 2.0, 3.0))
    assert isinstance(grads, tuple) and len(grads) == 2
    assert grads[1] == pytest.approx(three_grad(1.0, 2.0, 3.0)[2])


def test_value_and_grad_with_a_one_element_tuple():
    value, grads = gradgen.value_and_grad(three, argnums=(1,))(1.0, 2.0, 3.0)
    assert value == pytest.approx(three(1.0, 2.0, 3.0))
    assert grads == (pytest.approx(3.0),)


def test_grad_of_grad_mixed_partial():
    # d/dz of d/dx = y + 2 cos(x) z
    d2 = grad(grad(three), argnums=2)(1.0, 2.0, 3.0)
    assert d2 == pytest.approx(2.0 + 6 * math.cos(1.0))


def test_third_derivative():
    d3 = grad(grad(grad(three)))(1.0, 2.0, 3.0)
    assert d3 == pytest.approx(-math.cos(1.0) * 9)


def test_grad_of_grad_with_tuple_argnums_inside_and_out():
    def inner_sum(x, y, z):
        gx, gz = grad(three, argnums=(0, 2))(x, y, z)
        return gx + gz

    # d/dy (yz + cos(x) z**2 + xy + 2 sin(x) z) = z + x
    assert grad(inner_sum, argnums=1)(1.0, 2.0, 3.0) == pytest.approx(4.0)
    dx, dy = grad(inner_sum, argnums=(0, 1))(1.0, 2.0, 3.0)
    assert dx == pytest.approx(-math.sin(1.0) * 9 + 2.0 + 2 * math.cos(1.0) * 3)
    assert dy == pytest.approx(4.0)


def test_grad_of_value_and_grad_value():
    def value_only(x):
        value, _ = gradgen.value_and_grad(lambda t: t**4)(x)
        return value

    assert grad(value_only)(2.0) == pytest.approx(32.0)


def reused_in_a_product(x):
    return x * math.sin(x) + x * x


def test_a_second_derivatives_fused_sum_names_the_value_whose_uses_it_gathers():
    # value_and_grad of a gradient returns grad_x (the first derivative, named first) and
    # grad_x_1: the comment above grad_x_1 is about x's uses, not a value called x_1
    second = gradgen.value_and_grad(grad(reused_in_a_product))
    value, dd = second(0.7)
    assert value == pytest.approx(math.sin(0.7) + 0.7 * math.cos(0.7) + 1.4)
    assert dd == pytest.approx(2 * math.cos(0.7) - 0.7 * math.sin(0.7) + 2)
    notes = [line.strip() for line in second.source.splitlines() if "one fused sum" in line]
    assert notes and all(note.startswith("# x is used ") for note in notes), notes


def test_grad_of_grad_of_an_array_function():
    def f(x):
        return np.sum(np.sin(x) * x)

    def g_norm(x):
        g = grad(f)(x)
        return np.sum(g * g)

    x = np.array([0.3, -0.8, 1.1])
    # g = cos(x) x + sin(x); d/dx sum(g**2) = 2 g (2 cos x - x sin x)
    g = np.cos(x) * x + np.sin(x)
    assert np.allclose(grad(g_norm)(x), 2 * g * (2 * np.cos(x) - x * np.sin(x)))


# --- jacobian: output shape then input shape ------------------------------------------------------

A = np.arange(6.0).reshape(2, 3) / 10
XV = np.array([0.1, -0.2, 0.3])


def layer(x, A):
    return np.tanh(A @ x)


def test_jacobian_of_a_vector_function():
    J = gradgen.jacobian(layer)(XV, A)
    assert J.shape == (2, 3)
    t = np.tanh(A @ XV)
    assert np.allclose(J, (1 - t**2)[:, None] * A)


def test_jacobian_with_respect_to_a_matrix():
    J = gradgen.jacobian(layer, argnums=1)(XV, A)
    assert J.shape == (2, 2, 3)
    t = np.tanh(A @ XV)
    want = np.zeros((2, 2, 3))
    for i in range(2):
        want[i, i, :] = (1 - t[i] ** 2) * XV
    assert np.allclose(J, want)


def test_jacobian_with_tuple_argnums():
    jx, jA = gradgen.jacobian(layer, argnums=(0, 1))(XV, A)
    assert jx.shape == (2, 3) and jA.shape == (2, 2, 3)
    assert np.allclose(jx, gradgen.jacobian(layer)(XV, A))
    assert np.allclose(jA, gradgen.jacobian(layer, argnums=1)(XV, A))


def test_jacobian_of_a_float_function_is_a_float():
    d = gradgen.jacobian(lambda x: x**2)(3.0)
    assert type(d) is float and d == 6.0


def test_jacobian_of_a_scalar_output_has_the_input_shape():
    J = gradgen.jacobian(lambda x: np.sum(x**2))(XV)
    assert J.shape == (3,) and np.allclose(J, 2 * XV)


def test_jacobian_of_a_matrix_output():
    J = gradgen.jacobian(lambda x: np.outer(x, x))(XV)
    assert J.shape == (3, 3, 3)
    eye = np.eye(3)
    want = eye[:, None, :] * XV[None, :, None] + XV[:, None, None] * eye[None, :, :]
    assert np.allclose(J, want)


def test_jacobian_of_several_outputs_follows_their_structure():
    def f(x):
        return x * 2, {"s": np.sum(x)}

    jy, js = gradgen.jacobian(f)(XV)
    assert np.array_equal(jy, 2 * np.eye(3))
    assert set(js) == {"s"} and np.array_equal(js["s"], np.ones(3))


def test_jacobian_matches_vjp_rows():
    J = gradgen.jacobian(layer)(XV, A)
    _, pullback = gradgen.vjp(layer, XV, A)
    for i in range(2):
        assert np.allclose(pullback(np.eye(2)[i])[0], J[i])


def test_jacobian_keeps_float32():
    J = gradgen.jacobian(layer)(XV.astype(np.float32), A.astype(np.float32))
    assert J.dtype == np.float32 and J.shape == (2, 3)


# --- hessian ---------------------------------------------------------------------------------------


def test_hessian_of_a_float_function_is_a_float():
    h = gradgen.hessian(lambda x: x**3)(2.0)
    assert type(h) is float and h == 12.0


@pytest.mark.parametrize("x", [2.0, np.float64(2.0), np.float32(2.0)],
                         ids=["float", "np.float64", "np.float32"])
def test_derivatives_of_float_scalars_are_floats_like_grad(x):
    for transform in (gradgen.grad, gradgen.jacobian, gradgen.hessian):
        result = transform(lambda t: t**3)(x)
        assert type(result) is float, transform.__name__
    assert gradgen.hessian(lambda t: t**3)(x) == 12.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_derivatives_of_zero_d_arrays_are_zero_d_arrays_like_grad(dtype):
    x = np.array(2.0, dtype)
    for transform in (gradgen.grad, gradgen.jacobian, gradgen.hessian):
        result = transform(lambda t: t**3)(x)
        assert isinstance(result, np.ndarray) and result.shape == (), transform.__name__
        assert result.dtype == dtype, transform.__name__


def test_hessian_with_tuple_argnums_is_nested():
    H = gradgen.hessian(three, argnums=(0, 2))(1.0, 2.0, 3.0)
    want = ((-math.sin(1.0) * 9, 2 + 6 * math.cos(1.0)),
            (2 + 6 * math.cos(1.0), 2 * math.sin(1.0)))
    assert len(H) == 2 and all(len(row) == 2 for row in H)
    assert np.allclose(np.array(H, dtype=float), want)


def test_hessian_of_a_matrix_argument_has_four_axes():
    H = gradgen.hessian(lambda X: np.sum(X**3))(np.ones((2, 2)))
    assert H.shape == (2, 2, 2, 2)
    assert np.allclose(H.reshape(4, 4), 6 * np.eye(4))


def test_hessian_is_symmetric():
    def f(x):
        return np.sum(np.sin(x) * x[0]) * np.sum(x**2)

    H = gradgen.hessian(f)(XV)
    assert np.allclose(H, H.T)


def test_hessian_module_source_is_one_flat_function():
    hf = gradgen.hessian(lambda x: np.sum(np.exp(x)))
    hf(XV)
    assert "def anonymous_hessian(x):" in hf.source
    assert np.allclose(hf(XV), np.diag(np.exp(XV)))


# --- Hessian-vector products: grad of a function calling grad -----------------------------------


def loss(w):
    return np.sum(np.sin(w) * w**2)


W = np.array([0.3, 0.7, -0.4])
V = np.array([1.0, -2.0, 0.5])


def test_hessian_vector_product():
    def gv(w, v):
        return np.sum(grad(loss)(w) * v)

    hvp = grad(gv)(W, V)
    assert np.allclose(hvp, gradgen.hessian(loss)(W) @ V)
    # diagonal Hessian: d2/dw2 (sin(w) w**2) = -sin w w**2 + 4 w cos w + 2 sin w
    diag = -np.sin(W) * W**2 + 4 * W * np.cos(W) + 2 * np.sin(W)
    assert np.allclose(hvp, diag * V)


def test_hessian_vector_product_closing_over_the_gradient_function():
    df = grad(loss)

    def gv(w):
        return np.sum(df(w) * V)

    assert np.allclose(grad(gv)(W), gradgen.hessian(loss)(W) @ V)


# --- at least 20 Hessians against sympy.hessian ----------------------------------------------------
# Each case: a function written with math/NumPy, the same formula with sympy functions, and
# the point. Scalar cases take floats (the Hessian is requested for every argument); array
# cases take one array (the Hessian has shape x.shape + x.shape).

B = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 3.0], [1.0, 0.5, -2.0]])


def _ssum(items):
    return sp.Add(*np.ravel(np.asarray(items, dtype=object)))


SCALAR_CASES = [
    ("poly", lambda x, y: x**3 * y - 2 * x * y**2,
     lambda x, y: x**3 * y - 2 * x * y**2, (1.3, -0.7)),
    ("sin_cos", lambda x, y: math.sin(x) * math.cos(y),
     lambda x, y: sp.sin(x) * sp.cos(y), (0.4, 1.1)),
    ("exp_product", lambda x, y: math.exp(x * y),
     lambda x, y: sp.exp(x * y), (0.5, -0.3)),
    ("log_times_square", lambda x, y: math.log(x) * y**2,
     lambda x, y: sp.log(x) * y**2, (2.5, 1.5)),
    ("quotient", lambda x, y: x / y + y / (1 + x * x),
     lambda x, y: x / y + y / (1 + x * x), (0.8, 1.7)),
    ("hypot_by_hand", lambda x, y: math.sqrt(x * x + y * y),
     lambda x, y: sp.sqrt(x * x + y * y), (3.0, 4.0)),
    ("tanh_scaled", lambda x, y: math.tanh(x) * y,
     lambda x, y: sp.tanh(x) * y, (0.3, 2.0)),
    ("power_tower", lambda x, y: x**y,
     lambda x, y: x**y, (1.7, 2.3)),
    ("atan_product", lambda x, y: math.atan(x * y),
     lambda x, y: sp.atan(x * y), (0.6, 0.9)),
    ("sigmoid", lambda x: 1 / (1 + math.exp(-x)),
     lambda x: 1 / (1 + sp.exp(-x)), (0.25,)),
    ("sin_of_product3", lambda x, y, z: math.sin(x * y * z),
     lambda x, y, z: sp.sin(x * y * z), (0.5, 1.2, -0.8)),
    ("mixed3", lambda x, y, z: x * y * z + x**2 * z - math.cosh(y),
     lambda x, y, z: x * y * z + x**2 * z - sp.cosh(y), (1.1, 0.2, -1.4)),
    ("quartic_difference", lambda x, y: (x - y) ** 4,
     lambda x, y: (x - y) ** 4, (2.0, 0.5)),
    ("log1p_exp", lambda x: math.log1p(math.exp(x)),
     lambda x: sp.log(1 + sp.exp(x)), (-0.6,)),
    ("atan2", lambda x, y: math.atan2(y, x) * x,
     lambda x, y: sp.atan2(y, x) * x, (1.5, 0.7)),
    ("rosenbrock", lambda x, y: (1 - x) ** 2 + 100 * (y - x * x) ** 2,
     lambda x, y: (1 - x) ** 2 + 100 * (y - x * x) ** 2, (-1.2, 1.0)),
]

ARRAY_CASES = [
    ("sum_cubes", lambda x: np.sum(x**3),
     lambda x: _ssum(x**3), XV),
    ("sin_times_square", lambda x: np.sum(np.sin(x) * x**2),
     lambda x: _ssum([sp.sin(t) * t**2 for t in x]), XV),
    ("square_of_sum", lambda x: np.sum(x) ** 2,
     lambda x: _ssum(x) ** 2, XV),
    ("dot_times_first", lambda x: np.dot(x, x) * x[0],
     lambda x: _ssum(x * x) * x[0], XV),
    ("logsumexp", lambda x: np.log(np.sum(np.exp(x))),
     lambda x: sp.log(_ssum([sp.exp(t) for t in x])), XV),
    ("quadratic_form", lambda x: x @ B @ x,
     lambda x: _ssum(x @ B @ x), XV),
    ("mean_tanh_squared", lambda x: np.mean(np.tanh(x)) ** 2,
     lambda x: (_ssum([sp.tanh(t) for t in x]) / 3) ** 2, XV),
    ("euclidean_norm", lambda x: np.sqrt(np.sum(x**2)),
     lambda x: sp.sqrt(_ssum(x**2)), XV),
    ("outer_weighted", lambda x: np.sum(np.outer(x, x) * B),
     lambda x: _ssum(np.outer(x, x) * B), XV),
    ("neighbours", lambda x: np.sum(x[:-1] * x[1:] ** 2),
     lambda x: _ssum(x[:-1] * x[1:] ** 2), XV),
    ("softplus", lambda x: np.sum(np.log1p(np.exp(x))),
     lambda x: _ssum([sp.log(1 + sp.exp(t)) for t in x]), XV),
    ("linalg_norm", lambda x: np.linalg.norm(x) ** 3,
     lambda x: sp.sqrt(_ssum(x**2)) ** 3, XV),
    ("matrix_square", lambda X: np.sum(np.sin(X @ X)),
     lambda X: _ssum([sp.sin(t) for t in np.ravel(X @ X)]),
     np.array([[0.2, -0.4], [0.7, 0.1]])),
    ("matrix_vector", lambda X: np.sum((X @ np.array([1.0, -2.0])) ** 3),
     lambda X: _ssum((X @ np.array([1.0, -2.0])) ** 3),
     np.array([[0.5, 0.3], [-0.2, 0.9]])),
]


def _symbols(name: str, n: int) -> list[sp.Symbol]:
    return list(sp.symbols(f"{name}0:{n}", real=True))


@pytest.mark.parametrize(("name", "fn", "sym_fn", "args"), SCALAR_CASES,
                         ids=[c[0] for c in SCALAR_CASES])
def test_scalar_hessian_matches_sympy(name, fn, sym_fn, args):
    syms = _symbols("s", len(args))
    expr = sym_fn(*syms)
    at = dict(zip(syms, args, strict=True))
    want = np.array(sp.hessian(expr, syms).subs(at).evalf(), dtype=float)
    if len(args) == 1:
        got = gradgen.hessian(fn)(*args)
        assert type(got) is float
        assert got == pytest.approx(want[0, 0], rel=1e-10, abs=1e-12)
        return
    got = gradgen.hessian(fn, argnums=tuple(range(len(args))))(*args)
    assert np.allclose(np.array(got, dtype=float), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("name", "fn", "sym_fn", "x"), ARRAY_CASES,
                         ids=[c[0] for c in ARRAY_CASES])
def test_array_hessian_matches_sympy(name, fn, sym_fn, x):
    syms = _symbols("a", x.size)
    expr = sym_fn(np.array(syms, dtype=object).reshape(x.shape))
    at = dict(zip(syms, np.ravel(x).tolist(), strict=True))
    want = np.array(sp.hessian(expr, syms).subs(at).evalf(), dtype=float)
    got = gradgen.hessian(fn)(x)
    assert got.shape == x.shape + x.shape and got.dtype == np.float64
    assert np.allclose(got.reshape(x.size, x.size), want, rtol=1e-10, atol=1e-12)


def test_there_are_at_least_twenty_sympy_hessians():
    assert len(SCALAR_CASES) + len(ARRAY_CASES) >= 20


@pytest.mark.parametrize(("name", "fn", "sym_fn", "args"), SCALAR_CASES[:6],
                         ids=[c[0] for c in SCALAR_CASES[:6]])
def test_grad_of_grad_agrees_with_hessian_diagonal(name, fn, sym_fn, args):
    H = gradgen.hessian(fn, argnums=tuple(range(len(args))))(*args)
    assert grad(grad(fn))(*args) == pytest.approx(H[0][0], rel=1e-12)
