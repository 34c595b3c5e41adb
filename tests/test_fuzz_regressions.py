"""Failures found by tests/test_fuzz.py, each reduced to a small explicit program."""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

import gradgen

from .conftest import run_emitted


def _emitted_value_and_grad(fn, *args):
    source = gradgen.emit(fn, *args)
    return run_emitted(source)[f"{fn.__name__}_value_and_grad"](*args)


# --- a ufunc of a Python float is a NumPy float ---------------------------------------------


def sign_of_float(x):
    return np.sign(x)


def sign_times_float(x):
    return np.sign(x) * x + np.sin(x)


def test_np_sign_of_a_python_float_is_a_numpy_float():
    """np.sign(0.5) is np.float64(1.0); the sign row's Python rule gives the int 1, so the
    traced output was an int and grad refused it ("returned int, not a float")."""
    value, grad = gradgen.value_and_grad(sign_of_float)(0.5478)
    assert type(value) is np.float64 and value == 1.0
    assert type(grad) is float and grad == 0.0


def test_ufunc_of_a_python_float_traces_numpy_type_and_value():
    value, grad = gradgen.value_and_grad(sign_times_float)(0.5)
    assert type(value) is type(sign_times_float(0.5)) is np.float64
    assert value == sign_times_float(0.5)
    assert grad == pytest.approx(1 + math.cos(0.5), rel=1e-15)
    emitted_value, emitted_grad = _emitted_value_and_grad(sign_times_float, 0.5)
    assert type(emitted_value) is np.float64 and emitted_grad == grad


# --- np.round ---------------------------------------------------------------------------------


def round_then_scale(x):
    v2 = np.round(np.sin(x))
    return v2 * x


def round_array(x):
    return np.sum(np.round(x) * x)


def round_two_places(x):
    return np.round(x, 2)


def test_np_round_is_traced():
    """The round row prints np.round for arrays, but np.round had no binding: gradgen could not
    trace code it writes itself ("np.round has no gradient rule")."""
    value, grad = gradgen.value_and_grad(round_then_scale)(0.5478)
    assert type(value) is type(round_then_scale(0.5478)) and value == round_then_scale(0.5478)
    assert grad == 1.0  # round(sin(x)) = 1 near 0.5478, and it is locally constant
    x = np.array([0.5, 1.5, 2.2, -0.7])
    np.testing.assert_array_equal(gradgen.grad(round_array)(x), np.round(x))


def test_np_round_with_decimals_is_locally_constant():
    assert gradgen.grad(round_two_places)(1.2345) == 0.0
    assert gradgen.grad(lambda x: round_two_places(x) * x)(1.2345) == 1.23


# --- math functions of NumPy scalars return Python floats --------------------------------------


def cosh_of_numpy_scalar(x0):
    v1 = np.tan(x0)
    return math.cosh(v1)


def math_of_a_sum(x):
    s = np.sum(x)
    return math.sin(s) * math.floor(s) + math.pow(s, 2.0)


def test_math_function_of_a_numpy_scalar_is_a_python_float():
    """math.cosh(np.float64) is a Python float computed by math.cosh; gradgen traced np.cosh
    and returned an np.float64, so <f>_value_and_grad's value had another type than f's."""
    value, grad = gradgen.value_and_grad(cosh_of_numpy_scalar)(np.float64(-1.717))
    expected = cosh_of_numpy_scalar(np.float64(-1.717))
    assert type(value) is float and value == expected
    t = math.tan(-1.717)
    assert grad == pytest.approx(math.sinh(t) * (1 + t * t), rel=1e-13)
    emitted_value, emitted_grad = _emitted_value_and_grad(cosh_of_numpy_scalar, np.float64(-1.717))
    assert type(emitted_value) is float and emitted_value == expected
    assert emitted_grad == grad


def test_math_function_of_a_reduction():
    x = np.array([0.5, 0.7])
    value, grad = gradgen.value_and_grad(math_of_a_sum)(x)
    assert type(value) is float and value == math_of_a_sum(x)
    s = 1.2
    np.testing.assert_allclose(grad, np.full(2, math.cos(s) * 1 + 2 * s), rtol=1e-13)


def test_math_function_of_a_0d_array():
    def exp_of(x):
        return math.exp(x)

    value, grad = gradgen.value_and_grad(exp_of)(np.array(0.3))
    assert type(value) is float and value == math.exp(0.3)
    assert isinstance(grad, np.ndarray) and grad.shape == () and grad == pytest.approx(
        math.exp(0.3), rel=1e-15)


# --- the emitted module does not depend on who asked for it ------------------------------------


def broadcast_gradient(x):
    return math.sin(np.sum(x))


def _emit_here(x):
    return gradgen.emit(broadcast_gradient, x)


def test_emitted_module_names_no_caller_line():
    """The copy that makes a returned gradient the caller's own array was located at the line
    that called gradgen.emit, so the module text depended on the call site."""
    x = np.array([0.5, 0.2])
    first, second = gradgen.emit(broadcast_gradient, x), _emit_here(x)
    assert first == second
    body_line = inspect.getsourcelines(broadcast_gradient)[1] + 1
    quoted = set(re.findall(r"test_fuzz_regressions\.py:(\d+)", first))
    assert quoted == {str(body_line)}


# --- folding never hands back the caller's own arrays --------------------------------------------


def double_negation(x0):
    v1 = np.negative(x0)
    x0 = -v1
    return x0


def times_one(x):
    return x * 1.0


def test_folding_never_returns_an_argument():
    """-(-x0) folded to x0: <f>_value_and_grad returned the argument itself, a 0-d array where
    the program computes an np.float64."""
    x = np.array(1.3798)
    value, grad = gradgen.value_and_grad(double_negation)(x)
    assert value is not x and type(value) is type(double_negation(x)) is np.float64
    assert value == 1.3798 and grad == 1.0
    emitted_value, _ = _emitted_value_and_grad(double_negation, x)
    assert emitted_value is not x and type(emitted_value) is np.float64


@pytest.mark.parametrize("fn", [double_negation, times_one])
def test_vjp_outputs_and_gradients_are_new_arrays(fn):
    """Folding x * 1.0 and -(-cotangent) made the emitted <f>_vjp return the argument as the
    output and the caller's cotangent as the gradient: mutating one changed the other."""
    x, cotangent = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    module = run_emitted(gradgen.emit(fn, x, vjp=True))
    out, (grad,) = module[f"{fn.__name__}_vjp"](x, cotangent)
    assert not np.shares_memory(out, x) and not np.shares_memory(grad, cotangent)
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(grad, cotangent)
    out, pullback = gradgen.vjp(fn, x)
    (grad,) = pullback(cotangent)
    assert not np.shares_memory(out, x) and not np.shares_memory(grad, cotangent)


# --- two gradients are never one array --------------------------------------------------------


def sum_of_sines(x0, x1):
    v1 = np.add(x0, x1)
    return np.sum(np.sin(v1))


def twice_each(x, y):
    return np.sum(2 * x + 2 * y)


def sine_and_cosine_of_a_sum(x, y):
    return np.sum(np.sin(x + y) + np.cos(x + y))


@pytest.mark.parametrize("fn", [sum_of_sines, twice_each, sine_and_cosine_of_a_sum])
def test_gradients_of_a_shared_cotangent_are_separate_arrays(fn):
    """x + y gives x and y the same cotangent (directly, or once CSE merges two equal backward
    computations): grad returned one array twice, so updating one gradient in place changed
    the other."""
    x, y = np.array([[0.7818], [0.2024]]), np.array([[-1.7361], [-0.3977]])
    for gx, gy in (gradgen.grad(fn, argnums=(0, 1))(x, y),
                   run_emitted(gradgen.emit(fn, x, y, argnums=(0, 1)))[f"{fn.__name__}_grad"](
                       x, y)):
        assert not np.shares_memory(gx, gy)
        np.testing.assert_array_equal(gx, gy)


@pytest.mark.parametrize("fn", [sum_of_sines, twice_each, sine_and_cosine_of_a_sum])
def test_jacobians_of_a_shared_cotangent_are_separate_arrays(fn):
    x, y = np.array([1.0, 2.0]), np.array([0.5, 0.1])
    jx, jy = gradgen.jacobian(fn, argnums=(0, 1))(x, y)
    assert not np.shares_memory(jx, jy)
    np.testing.assert_array_equal(jx, jy)


# --- gradients are never read-only views ----------------------------------------------------------


def stacked(x0, x1):
    x1 = np.stack([x1, x0])
    return np.sum(x1)


def stacked_through_a_slice(x0, x1, x2):
    x1 = x1[:]
    v1 = np.stack((x0, x2, x1), axis=-3)
    return np.sum(v1) + np.mean(np.broadcast_to(x1, (2, 2, 1)))


def sines_of_a_stack(x, y):
    return np.sum(np.sin(np.stack([x, y])))


@pytest.mark.parametrize(("fn", "shape"), [(stacked, (3,)), (stacked_through_a_slice, (2, 1)),
                                           (sines_of_a_stack, (2,))])
def test_gradients_through_indexing_are_writable_and_separate(fn, shape):
    """np.stack's VJP indexes the cotangent, and indexing was not known to be a view: the
    gradients of x0 and x1 were g[1] and g[0] of a read-only np.broadcast_to of the seed, one
    float seen by both (an in-place update raised "assignment destination is read-only")."""
    rng = np.random.default_rng(0)
    args = [rng.uniform(-2, 2, shape) for _ in range(fn.__code__.co_argcount)]
    argnums = tuple(range(len(args)))
    module = run_emitted(gradgen.emit(fn, *args, argnums=argnums))
    for grads in (gradgen.grad(fn, argnums=argnums)(*args),
                  module[f"{fn.__name__}_grad"](*args)):
        for k, g in enumerate(grads):
            assert g.flags.writeable
            assert not any(np.shares_memory(g, h) for h in (*grads[k + 1:], *args))
        first = grads[0]
        first -= 1.0  # in place: the caller owns its gradients


# --- the fuzz oracle reads an index array as it is --------------------------------------------


def _index_array_cases():
    from gradgen.ops import OPS

    return [case for case in OPS["getitem"].domain.cases
            if any(isinstance(s, np.ndarray) for s in case[0])]


@pytest.mark.parametrize("case", _index_array_cases(), ids=lambda case: repr(case[1]["index"]))
def test_fuzz_references_read_index_arrays_as_they_are(case):
    """getitem's Domain cases read x[[0, 2, 0, 3]], x[mask], x[:, [2, 0]]; test_fuzz.py draws
    them (from_domain_case, 1 in 10 array ops) with the index array as a constant of the
    program. Its sympy references (the smoothness check and the forward-mode derivative) put
    symbols in the index array's place too, and x[symbols] is no index: "IndexError: arrays
    used as indices must be of integer (or boolean) type" (test_random_programs at
    PYTHONHASHSEED=0 and 11)."""
    from gradgen.ops import OPS
    from gradgen.ops.index import real_index
    from gradgen.ops.registry import Expr

    from .test_fuzz import POINTS, Builder, Term, _literal, _tangent

    (shape, index_array), attrs = case
    rng = np.random.default_rng(0)
    x = Term(Expr("x0"), {p: np.round(rng.uniform(-2, 2, size=shape), 4) for p in POINTS},
             name="x0")
    builder = Builder(None, rng)
    for p in POINTS:
        builder.env[p]["x0"] = x.at[p]
    read = builder.apply(OPS["getitem"], [x, _literal(index_array, POINTS)], dict(attrs), POINTS)
    n = math.prod(shape)
    seed = np.eye(n).reshape((*shape, n))
    for p in POINTS:
        # d x[index] / dx: the rows of the identity that the index reads, repeats included
        want = seed[real_index(attrs["index"], (index_array,))]
        np.testing.assert_array_equal(_tangent(read, p, {"x0": seed}, n), want)
        np.testing.assert_array_equal(read.at[p], x.at[p][real_index(attrs["index"],
                                                                      (index_array,))])
