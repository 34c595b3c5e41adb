"""The linear-algebra family as NumPy spells it: products (@, dot, vdot, inner, outer, kron,
cross, tensordot, einsum), diagonals and triangles, and np.linalg's solvers and
decompositions. Each spelling is called inside a user function and checked against central
differences and through the emitted module; float32 stays float32; the conventions the rows
document (one triangle read, zero derivative of a sign) hold; unsupported arguments are
refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient, numeric_grad, run_emitted

RNG = np.random.default_rng(7)
V2 = np.array([0.4, -1.1])
V3 = np.array([0.3, -1.2, 0.8])
V4 = np.array([0.5, -0.7, 1.3, 0.2])
M22 = RNG.normal(size=(2, 2))
M23 = RNG.normal(size=(2, 3))
M32 = RNG.normal(size=(3, 2))
M33 = RNG.normal(size=(3, 3))
M34 = RNG.normal(size=(3, 4))
T234 = RNG.normal(size=(2, 3, 4))
T243 = RNG.normal(size=(2, 4, 3))
T1232 = RNG.normal(size=(1, 2, 3, 2))
B3 = RNG.normal(size=(2, 3))  # rows of 3-vectors
# well-conditioned square matrices (a random matrix plus a multiple of the identity)
A3 = RNG.normal(size=(3, 3)) * 0.5 + 2.0 * np.eye(3)
A2 = RNG.normal(size=(2, 2)) * 0.5 + 2.0 * np.eye(2)
STACK = RNG.normal(size=(2, 3, 3)) * 0.5 + 2.0 * np.eye(3)
_B = RNG.normal(size=(3, 3))
SPD = _B @ _B.T + 3.0 * np.eye(3)
SPD_STACK = np.stack([SPD, SPD[::-1, ::-1] + np.diag([0.5, 0.0, 1.0])])
W3 = np.array([2.0, 0.5, -0.3])


def weighted(out):
    """A scalar that sees every entry of ``out`` at its place: sum(sin(out) * (1, 2, 3, ...));
    tuples and lists add their parts up (each weighted by its position)."""
    if isinstance(out, list | tuple):
        total = 0.0
        for k, piece in enumerate(out):
            total = total + (k + 1) * weighted(piece)
        return total
    dtype = getattr(out, "dtype", np.float64)  # a float32 result keeps float32
    ramp = np.arange(1.0, np.size(out) + 1.0, dtype=dtype).reshape(np.shape(out))
    return np.sum(np.sin(out) * ramp)



def check(f, *args, argnums=None, rtol=1e-6):
    """gradgen's gradient equals central differences, and the emitted module computes the
    same value and gradient; returns the emitted source."""
    nums = tuple(range(len(args))) if argnums is None else argnums
    nums = nums if isinstance(nums, tuple) else (nums,)
    _, source = assert_gradient(f, *args, argnums=nums, rtol=rtol)
    return source


def loss_of(make):
    def f(*xs):
        return weighted(make(*xs))

    f.__name__ = "f"
    return f


# --- every spelling, end to end ----------------------------------------------------------------

SPELLINGS = {
    # @ and np.matmul: vectors, matrices, stacks that broadcast
    "matmul_2d": (lambda a, b: a @ b, (M23, M34)),
    "matmul_vec_mat": (lambda a, b: a @ b, (V3, M34)),
    "matmul_mat_vec": (lambda a, b: a @ b, (M34, V4)),
    "matmul_vec_vec": (lambda a, b: a @ b, (V3, V3 * 2)),
    "matmul_batched": (lambda a, b: a @ b, (T234, T243)),
    "matmul_broadcast": (lambda a, b: a @ b, (T1232, M23)),
    "matmul_stack_vec": (lambda a, b: np.matmul(a, b), (T234, V4)),
    "matmul_vec_stack": (lambda a, b: np.matmul(a, b), (V3, T234)),
    # np.dot in all its cases
    "dot_scalar": (lambda a, b: np.dot(a, b), (np.array(1.5), M23)),
    "dot_vec": (lambda a, b: np.dot(a, b), (V3, V3[::-1].copy())),
    "dot_mat_vec": (lambda a, b: np.dot(a, b), (M23, V3)),
    "dot_mat": (lambda a, b: a.dot(b), (M23, M34)),
    "dot_nd_vec": (lambda a, b: np.dot(a, b), (T234, V4)),
    "dot_vec_nd": (lambda a, b: np.dot(a, b), (V3, RNG.normal(size=(2, 3, 2)))),
    "dot_nd_md": (lambda a, b: np.dot(a, b), (T234, RNG.normal(size=(2, 4, 2)))),
    "dot_mat_md": (lambda a, b: np.dot(a, b), (M23, RNG.normal(size=(2, 3, 2)))),
    # vdot, inner, outer, kron
    "vdot": (lambda a, b: np.vdot(a, b), (M23, B3)),
    "inner_vec": (lambda a, b: np.inner(a, b), (V3, W3)),
    "inner_mat": (lambda a, b: np.inner(a, b), (M23, M33)),
    "inner_nd": (lambda a, b: np.inner(a, b), (T234, M34)),
    "inner_scalar": (lambda a, b: np.inner(a, b), (np.array(0.7), V3)),
    "outer": (lambda a, b: np.outer(a, b), (V3, V4)),
    "outer_flattens": (lambda a, b: np.outer(a, b), (M22, V3)),
    "kron_mat": (lambda a, b: np.kron(a, b), (M22, M23)),
    "kron_vec_mat": (lambda a, b: np.kron(a, b), (V2, M22)),
    "kron_3d": (lambda a, b: np.kron(a, b), (RNG.normal(size=(2, 1, 2)), M22)),
    # cross
    "cross": (lambda a, b: np.cross(a, b), (V3, W3)),
    "cross_batched": (lambda a, b: np.cross(a, b), (B3, W3)),
    "cross_axes": (lambda a, b: np.cross(a, b, axisa=0, axisb=-1, axisc=0), (M32, B3)),
    "cross_axis": (lambda a, b: np.cross(a, b, axis=0), (M32, M32[::-1].copy())),
    # tensordot: an int, a pair of ints, a pair of sequences
    "tensordot_int": (lambda a, b: np.tensordot(a, b, axes=1), (M23, M34)),
    "tensordot_default": (lambda a, b: np.tensordot(a, b), (T234, RNG.normal(size=(3, 4, 2)))),
    "tensordot_zero": (lambda a, b: np.tensordot(a, b, axes=0), (V2, M23)),
    "tensordot_pair": (lambda a, b: np.tensordot(a, b, axes=(0, 1)), (M23, M32)),
    "tensordot_seqs": (lambda a, b: np.tensordot(a, b, axes=([2, 0], [0, 2])),
                       (T234, RNG.normal(size=(4, 3, 2)))),
    # einsum: explicit, implicit, ellipsis, repeated labels, sublists
    "einsum_matmul": (lambda a, b: np.einsum("ij,jk->ik", a, b), (M23, M34)),
    "einsum_implicit": (lambda a, b: np.einsum("ij,jk", a, b), (M23, M34)),
    "einsum_implicit_transpose": (lambda a: np.einsum("ji", a), (M23,)),
    "einsum_trace": (lambda a: np.einsum("ii", a), (M33,)),
    "einsum_diagonal": (lambda a: np.einsum("ii->i", a), (M33,)),
    "einsum_batched_diag": (lambda a: np.einsum("bii->bi", a), (STACK,)),
    "einsum_ellipsis": (lambda a, b: np.einsum("...ij,...jk->...ik", a, b), (T234, T243)),
    "einsum_ellipsis_broadcast": (lambda a, b: np.einsum("...ij,jk", a, b), (T234, M34.T)),
    "einsum_three": (lambda a, b, c: np.einsum("i,ij,j->", a, b, c), (V2, M23, V3)),
    "einsum_sum_only": (lambda a: np.einsum("ij->", a), (M23,)),
    "einsum_outer": (lambda a, b: np.einsum("i,j->ji", a, b), (V2, V3)),
    "einsum_broadcast_label": (lambda a, b: np.einsum("ij,ij->i", a, b), (M23, V2[:, None])),
    "einsum_same_operand": (lambda a: np.einsum("ij,ij->i", a, a), (M23,)),
    "einsum_sublists": (lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2]), (M23, M34)),
    "einsum_optimize": (lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c, optimize=True),
                        (M23, M34, RNG.normal(size=(4, 2)))),
    "vecdot": (lambda a, b: np.linalg.vecdot(a, b), (B3, W3)),
    # diagonals, traces, triangles
    "trace": (lambda a: np.trace(a), (M33,)),
    "trace_method": (lambda a: a.trace(offset=1), (M34,)),
    "trace_axes": (lambda a: np.trace(a, offset=-1, axis1=2, axis2=0), (T234,)),
    "linalg_trace": (lambda a: np.linalg.trace(a), (STACK,)),
    "diag_vector": (lambda v: np.diag(v), (V3,)),
    "diag_vector_k": (lambda v: np.diag(v, k=-2), (V3,)),
    "diag_matrix": (lambda a: np.diag(a, 1), (M34,)),
    "diagonal": (lambda a: np.diagonal(a), (M34,)),
    "diagonal_method": (lambda a: a.diagonal(offset=-1, axis1=1, axis2=2), (T243,)),
    "tril": (lambda a: np.tril(a), (M34,)),
    "tril_k": (lambda a: np.tril(a, k=-1), (T234,)),
    "triu": (lambda a: np.triu(a, 1), (M34,)),
    "triu_vector": (lambda v: np.triu(v), (V3,)),
    # np.linalg
    "inv": (lambda a: np.linalg.inv(a), (A3,)),
    "inv_stack": (lambda a: np.linalg.inv(a), (STACK,)),
    "solve_vector": (lambda a, b: np.linalg.solve(a, b), (A3, V3)),
    "solve_matrix": (lambda a, b: np.linalg.solve(a, b), (A3, M32)),
    "solve_batched": (lambda a, b: np.linalg.solve(a, b), (STACK, V3)),
    "solve_broadcast_b": (lambda a, b: np.linalg.solve(a, b), (A3, RNG.normal(size=(2, 3, 2)))),
    "det": (lambda a: np.linalg.det(a), (A3,)),
    "det_stack": (lambda a: np.linalg.det(a), (STACK,)),
    "slogdet": (lambda a: np.linalg.slogdet(a), (A3 - 3.0 * np.eye(3),)),
    "cholesky": (lambda a: np.linalg.cholesky(a), (SPD,)),
    "cholesky_stack": (lambda a: np.linalg.cholesky(a), (SPD_STACK,)),
    "cholesky_upper": (lambda a: np.linalg.cholesky(a, upper=True), (SPD,)),
    "eigh": (lambda a: np.linalg.eigh(a), (SPD,)),
    "eigh_upper": (lambda a: np.linalg.eigh(a, UPLO="U"), (M33,)),
    "eigh_stack": (lambda a: np.linalg.eigh(a), (SPD_STACK,)),
    "eigvalsh": (lambda a: np.linalg.eigvalsh(a), (M33,)),
    "pinv_tall": (lambda a: np.linalg.pinv(a), (M32,)),
    "pinv_wide": (lambda a: np.linalg.pinv(a), (M23,)),
    "pinv_square": (lambda a: np.linalg.pinv(a), (A3,)),
    "svd_square": (lambda a: np.linalg.svd(a), (A3,)),
    "svd_tall": (lambda a: np.linalg.svd(a, full_matrices=False), (M32,)),
    "svd_wide": (lambda a: np.linalg.svd(a, full_matrices=False), (M34,)),
    "svd_stack": (lambda a: np.linalg.svd(a, full_matrices=False), (T234,)),
    "svd_values": (lambda a: np.linalg.svd(a, compute_uv=False), (M34,)),
    "svdvals": (lambda a: np.linalg.svdvals(a), (M23,)),
    "matrix_power_3": (lambda a: np.linalg.matrix_power(a, 3), (M33,)),
    "matrix_power_5": (lambda a: np.linalg.matrix_power(a, 5), (M33 * 0.5,)),
    "matrix_power_neg": (lambda a: np.linalg.matrix_power(a, -2), (A3,)),
    "matrix_power_1": (lambda a: np.linalg.matrix_power(a, 1) * a, (M33,)),
    "multi_dot_3": (lambda a, b, c: np.linalg.multi_dot([a, b, c]), (M23, M34, V4)),
    "multi_dot_4": (lambda a, b, c, d: np.linalg.multi_dot([a, b, c, d]),
                    (V2, M23, M34, RNG.normal(size=(4, 2)))),
}
if hasattr(np, "matvec"):
    SPELLINGS["matvec"] = (lambda a, b: np.matvec(a, b), (STACK, V3))
    SPELLINGS["vecmat"] = (lambda a, b: np.vecmat(a, b), (V3, STACK))


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spelling_end_to_end(name):
    make, args = SPELLINGS[name]
    check(loss_of(make), *args, rtol=1e-5)


@pytest.mark.parametrize("name", ["matmul_broadcast", "dot_nd_md", "einsum_ellipsis", "kron_mat",
                                  "cross_batched", "tensordot_seqs", "trace_axes", "solve_batched",
                                  "det_stack", "slogdet", "cholesky", "eigh", "pinv_tall",
                                  "svd_tall", "inv_stack", "diag_vector", "triu"])
def test_spelling_float32(name):
    make, args = SPELLINGS[name]
    args32 = tuple(a.astype(np.float32) for a in args)
    f = loss_of(make)
    nums = tuple(range(len(args)))
    grads = gradgen.grad(f, argnums=nums)(*args32)
    for g, a in zip(grads, args, strict=True):
        assert g.dtype == np.float32 and g.shape == a.shape
    for g, g64 in zip(grads, gradgen.grad(f, argnums=nums)(*args), strict=True):
        np.testing.assert_allclose(g, g64, rtol=2e-3, atol=2e-3 * max(1.0, np.abs(g64).max()))
    value, emitted = run_emitted(gradgen.emit(f, *args32, argnums=nums))["f_value_and_grad"](
        *args32)
    assert np.result_type(value) == np.float32
    assert all(e.dtype == np.float32 for e in emitted)


@pytest.mark.parametrize("name", ["matmul_batched", "tensordot_seqs", "einsum_trace",
                                  "einsum_batched_diag", "kron_vec_mat", "cross", "trace_axes",
                                  "inv", "solve_matrix", "det", "slogdet", "cholesky", "eigh",
                                  "pinv_wide", "svd_tall", "matrix_power_neg"])
def test_second_order(name):
    """d/dx (grad f(x) . v) against central differences of the gradient."""
    make, args = SPELLINGS[name]
    f = loss_of(make)
    x, rest = args[0], args[1:]
    v = np.random.default_rng(3).normal(size=x.shape)

    def g(x):
        return gradgen.grad(f)(x, *rest)

    hvp = gradgen.grad(lambda x: np.sum(g(x) * v))(x)
    eps = 1e-5
    ref = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()))


# --- named tuples, conventions -------------------------------------------------------------------


def test_decompositions_unpack_and_have_numpys_attributes():
    def f(a):
        sign, logdet = np.linalg.slogdet(a)
        res = np.linalg.slogdet(a)
        w, v = np.linalg.eigh(a)
        eig = np.linalg.eigh(a)
        u, s, vh = np.linalg.svd(a)
        out = np.linalg.svd(a)
        return (sign * logdet + res.logabsdet * res.sign + np.sum(w * v[0])
                + np.sum(eig.eigenvalues) + np.sum(eig.eigenvectors[:, 1] ** 2)
                + np.sum(u[0] * s * vh[:, 0]) + np.sum(out.S) + out.U[0, 0] * out.Vh[0, 0])

    check(f, SPD)


def test_slogdet_sign_has_zero_derivative_and_is_numpys():
    a = A3[[1, 0, 2]]  # two rows swapped: det < 0
    assert np.linalg.slogdet(a).sign < 0

    def f(a):
        sign, logdet = np.linalg.slogdet(a)
        return sign * logdet

    g = gradgen.grad(f)(a)
    np.testing.assert_allclose(g, -np.linalg.inv(a).T, rtol=1e-12)
    np.testing.assert_allclose(gradgen.grad(lambda a: np.linalg.slogdet(a)[0])(a), 0.0)


def test_cholesky_and_eigh_read_one_triangle():
    """NumPy reads the lower triangle (the upper one with upper=True / UPLO='U'): the other
    triangle does not change the result, so its gradient is exactly zero."""
    skewed = SPD + np.triu(np.full((3, 3), 5.0), 1)  # garbage above the diagonal
    np.testing.assert_array_equal(np.linalg.cholesky(skewed), np.linalg.cholesky(SPD))
    for make, strict_zero in ((lambda a: np.linalg.cholesky(a), np.triu),
                              (lambda a: np.linalg.eigh(a), np.triu),
                              (lambda a: np.linalg.eigvalsh(a), np.triu),
                              (lambda a: np.linalg.cholesky(a.T, upper=True), np.triu),
                              (lambda a: np.linalg.eigh(a.T, UPLO="U"), np.triu)):
        f = loss_of(make)
        g = gradgen.grad(f)(skewed)
        np.testing.assert_array_equal(strict_zero(g, 1), 0.0)
        np.testing.assert_allclose(g, numeric_grad(f, (skewed,), 0), rtol=1e-5, atol=1e-6)


def test_eigh_gradient_matches_the_symmetric_rule():
    """For a symmetric input, the derivative along a symmetric direction is the usual
    tr(V diag(ḡ) V.T dA): the one-triangle gradient folds the other triangle onto it."""
    f = loss_of(lambda a: np.linalg.eigvalsh(a))
    g = gradgen.grad(f)(SPD)
    d = RNG.normal(size=(3, 3))
    d = d + d.T
    eps = 1e-6
    ref = (f(SPD + eps * d) - f(SPD - eps * d)) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * np.tril(d)), ref, rtol=1e-6)


def test_cholesky_of_a_composed_positive_definite_matrix():
    def f(b):
        a = b @ b.T + 3.0 * np.eye(3)
        factor = np.linalg.cholesky(a)
        return np.sum(np.log(np.diagonal(factor))) * 2.0  # log det a

    b = RNG.normal(size=(3, 3))
    check(f, b)
    g = gradgen.grad(f)(b)
    a = b @ b.T + 3.0 * np.eye(3)
    np.testing.assert_allclose(g, 2.0 * np.linalg.solve(a, b), rtol=1e-10)


def test_repeated_eigenvalues_give_a_non_finite_eigenvector_gradient():
    """Eigenvectors of a repeated eigenvalue are not unique: their derivative is infinite,
    and the gradient is not finite (as in JAX). The eigenvalues' own gradient is fine."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        g = gradgen.grad(lambda a: np.sum(np.linalg.eigh(a)[1][0]))(np.eye(3))
    assert not np.all(np.isfinite(g))
    g = gradgen.grad(lambda a: np.sum(np.linalg.eigvalsh(a) ** 2))(np.eye(3))
    np.testing.assert_allclose(g, 2.0 * np.eye(3))


def test_singular_det_stops_with_a_clear_error():
    with pytest.raises(gradgen.GradgenError, match="det"):
        gradgen.grad(lambda a: np.linalg.det(a))(np.array([[1.0, 2.0], [2.0, 4.0]]))


def test_check_proves_eigh_of_a_3x3_matrix():
    """gradgen.check replays eigh in sympy: beyond 2 x 2, as functions LAPACK evaluates and
    perturbation theory differentiates."""
    def f(a):
        w, v = np.linalg.eigh(a)
        w_upper, v_upper = np.linalg.eigh(a, UPLO="U")  # LAPACK signs differ from UPLO="L"
        return np.sum(w * v[0] ** 2) + np.sum(v_upper[0] * w_upper)

    report = gradgen.check(f, SPD + np.triu(M33, 1))
    assert report.results[0].method in ("sympy", "proved")


def test_matrix_power_zero_is_a_constant_identity():
    def f(a):
        return np.sum(np.linalg.matrix_power(a, 0) * a)

    np.testing.assert_allclose(gradgen.grad(f)(M33), np.eye(3))


def test_cross_of_2_vectors():
    def f(a, b):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return weighted(np.cross(a, b))

    check(f, M32, M32[::-1].copy())


# --- end to end: a least-squares fit, a Gaussian log-likelihood ---------------------------------


def test_least_squares_fit_through_solve():
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(8), rng.normal(size=8), rng.normal(size=8)])
    y = x @ np.array([0.5, -1.0, 2.0]) + 0.1 * rng.normal(size=8)

    def residual(x, y):
        beta = np.linalg.solve(x.T @ x, x.T @ y)
        r = y - x @ beta
        return r @ r

    source = check(residual, x, y)
    assert "np.linalg.solve(" in source
    # the residual of the least-squares fit is orthogonal to the columns: d/dy = 2 r
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    g_y = gradgen.grad(residual, argnums=1)(x, y)
    np.testing.assert_allclose(g_y, 2.0 * (y - x @ beta), rtol=1e-8, atol=1e-10)
    g32 = gradgen.grad(residual, argnums=(0, 1))(x.astype(np.float32), y.astype(np.float32))
    assert all(g.dtype == np.float32 for g in g32)


def test_gaussian_log_likelihood_through_cholesky_and_slogdet():
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(5, 3))

    def nll(b, xs):
        cov = b @ b.T + np.eye(3)
        chol = np.linalg.cholesky(cov)
        z = np.linalg.solve(chol, xs.T)
        _, logdet = np.linalg.slogdet(cov)
        return 0.5 * np.sum(z * z) + 0.5 * xs.shape[0] * logdet

    check(nll, rng.normal(size=(3, 3)) * 0.5, xs)


# --- what the module says ------------------------------------------------------------------------


def test_printed_numpy_reads_as_written():
    def emitted(make, *args):
        if len(args) == 1:
            def f(a):
                return weighted(make(a))
        else:
            def f(a, b):
                return weighted(make(a, b))
        return gradgen.emit(f, *args, argnums=tuple(range(len(args))))

    src = emitted(lambda a, b: np.einsum("...ij,...jk->...ik", a, b), T234, T243)
    assert 'np.einsum("Aij,Ajk->Aik", a, b)' in src
    assert 'np.einsum("Aik,Ajk->Aij", ' in src  # its VJP is an einsum too
    assert "np.tensordot(a, b, axes=1)" in emitted(lambda a, b: np.tensordot(a, b, 1), M23, M34)
    assert "np.trace(a, offset=1)" in emitted(lambda a: np.trace(a, offset=1), M34)
    src = emitted(lambda a: np.linalg.eigh(a), SPD)
    assert "np.linalg.eigvalsh(a)" in src and "np.linalg.eigh(a)[1]" in src
    assert "np.eye(3)" in src  # 1 / (w[j] - w[i]) off the diagonal, without a literal matrix
    src = emitted(lambda a: np.linalg.svd(a, full_matrices=False), M32)
    assert "np.linalg.svd(a, full_matrices=False)[0]" in src
    assert "np.linalg.solve(a, b)" in emitted(lambda a, b: np.linalg.solve(a, b), A3, V3)
    src = emitted(lambda a: np.linalg.cholesky(a), SPD)
    assert "np.linalg.cholesky(a)" in src and "np.tril(" in src
    src = emitted(lambda a: np.trace(a), M33)  # the VJP: ones on the diagonal, by a slice
    assert "np.index_exp[::4]" in src


# --- refused ---------------------------------------------------------------------------------------

REFUSED = {
    "np.dot": lambda a: np.dot(a, a, out=np.empty((3, 3))),
    "np.einsum": lambda a: np.einsum("ij,jk", a, a, dtype=np.float32),
    "np.linalg.svd": lambda a: np.linalg.svd(a[:2]),
    "np.linalg.pinv": lambda a: np.linalg.pinv(a, rcond=0.1),
    "np.trace": lambda a: np.trace(a, dtype=np.int64),
    "np.cross": lambda a: np.cross(a[0, :2], a[1]),
    "np.linalg.multi_dot": lambda a: np.linalg.multi_dot([a, a], out=np.empty((3, 3))),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_arguments_are_refused_by_name(name):
    make = REFUSED[name]
    with pytest.raises(gradgen.UnsupportedOperation, match=name.replace(".", r"\.")):
        gradgen.grad(lambda a: np.sum(make(a)))(M33)


def test_svd_hermitian_is_refused():
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np\.linalg\.svd"):
        gradgen.grad(lambda a: np.sum(np.linalg.svd(a, hermitian=True)[1]))(SPD)


def test_numpy_errors_stay_numpy_errors():
    with pytest.raises(ValueError, match="subscripts"):
        gradgen.grad(lambda a: np.sum(np.einsum("ijk", a)))(M33)
    with pytest.raises(np.linalg.LinAlgError):
        gradgen.grad(lambda a: np.sum(np.linalg.inv(a)))(M23)
    with pytest.raises(np.linalg.LinAlgError):
        gradgen.grad(lambda a: np.sum(np.linalg.matrix_power(a, 2)))(M23)
