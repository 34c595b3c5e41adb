"""Adversarial programs for in-place NumPy: aliases, views of views, buffers written in loops,
writes through views, repeated/negative/stepped indices, masks, dtype casts, methods that write.

Each program is run four ways and compared: plain NumPy (on copies), gradgen.value_and_grad,
central finite differences, and the emitted module (``*_value_and_grad`` and ``*_grad``) on
the traced input and on a second input; the caller's arrays must never change. Known bugs are
``xfail(strict=True)`` with the reason, so they flip to failures once fixed."""

from __future__ import annotations

import numpy as np
import pytest

import gradgen

from .conftest import fresh, numeric_grad, run_emitted

# --- harness -----------------------------------------------------------------------------------




def close(a, b, rtol=1e-6):
    b = np.asarray(b)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, float(np.abs(b).max())))


def check(f, *args, other=None, argnums=0, rtol=1e-6):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    before = [np.copy(a) for a in args]

    def unchanged(inputs, saved):
        for a, b in zip(inputs, saved, strict=True):
            np.testing.assert_array_equal(a, b)

    value, grads = gradgen.value_and_grad(f, argnums=nums)(*args)
    unchanged(args, before)
    close(value, f(*fresh(args)), 1e-12)
    for k, g in zip(nums, grads, strict=True):
        assert np.shape(g) == np.shape(args[k])
        close(g, numeric_grad(f, args, k), rtol)
    module = run_emitted(gradgen.emit(f, *args, argnums=nums))
    for inputs in [args] + ([other] if other is not None else []):
        saved = [np.copy(a) for a in inputs]
        try:
            v, e = module[f"{f.__name__}_value_and_grad"](*inputs)
            only = module[f"{f.__name__}_grad"](*inputs)
        except Exception as error:  # noqa: BLE001 - a guard may fire on the other input
            assert type(error).__name__ == "GuardFailure", error
            continue
        unchanged(inputs, saved)
        close(v, f(*fresh(inputs)), 1e-12)
        e = e if isinstance(e, tuple) else (e,)
        only = only if isinstance(only, tuple) else (only,)
        for k, a, b in zip(nums, e, only, strict=True):
            ref = numeric_grad(f, inputs, k)
            close(a, ref, rtol)
            close(b, ref, rtol)
    return grads


def hessian_check(f, x):
    h = gradgen.hessian(f)(x)
    numeric = np.zeros(x.shape + x.shape)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += 1e-5
        down[i] -= 1e-5
        numeric[(...,) + i] = (gradgen.grad(f)(up) - gradgen.grad(f)(down)) / 2e-5
    np.testing.assert_allclose(h, numeric, rtol=1e-4, atol=1e-5)


X3 = np.array([0.7, -1.3, 2.1])
X3B = np.array([-0.4, 0.9, 1.6])
X6 = np.array([0.3, -0.4, 0.5, 0.6, -0.7, 0.8])
X6B = np.array([1.1, 0.2, -0.5, -0.6, 0.7, 0.1])
M23 = np.array([[0.4, -1.1, 0.8], [1.3, -0.2, 0.6]])
M23B = np.array([[-0.9, 0.5, 0.3], [0.2, 1.4, -0.7]])

# --- programs that work ------------------------------------------------------------------------


def alias_then_use(x):
    a = x * 1.0
    b = a
    b[0] = x[1] ** 2
    return np.sum(a * x)


def view_kept_across_writes(x):
    a = x * 2.0
    v = a[1:]
    a[2] = x[0] * 3.0
    s = np.sum(v * v)
    a[1] = 7.0
    return s + np.sum(v) + np.sum(a)


def view_of_view(x):
    a = x.reshape(2, 3) * 1.0
    v = a[1]
    w = v[::2]
    w[1] = x[0] * x[1]
    return np.sum(a**2)


def loop_reads_earlier_rows(x):
    h = np.zeros((4, 3))
    h[0] = x
    for t in range(1, 4):
        h[t] = h[:t].sum(axis=0) * 0.5 + np.cos(h[t - 1])
    return np.sum(h[-1] * h[1])


def overwrite_then_read(x):
    h = np.zeros(3)
    h[:] = x
    a = h.sum()
    h[:] = x**2
    return a * h.sum()


def buffer_partly_returned(x):
    h = np.zeros(3)
    h[1] = x[0] * x[2]
    y = h
    h += x
    return np.sum(y * h) + np.sum(h[:2])


def scalars_into_rows(x):
    h = np.zeros((2, 3))
    h[0] = 1.5
    h[1] = x
    h[:, 0] = np.float64(2.0)
    h[0, 1] = np.array(3.0)
    h[0, :] += x.sum()
    return np.sum(h * h * x)


def repeated_indices(x):
    h = np.zeros(4)
    h[[1, 1, 2]] = x
    h[[0, 0]] += x[:2]
    return np.sum(h * h)


def negative_indices(x):
    h = x * 1.0
    h[-1] = x[0] * 4.0
    h[-2:] *= 3.0
    return np.sum(h**3)


def stepped_slices(x):
    h = np.zeros(6)
    h[::2] = x[:3]
    h[1::2] = x[3:] ** 2
    h[::-1] *= np.arange(6)
    return np.sum(h * x)


def ellipsis_and_none(x):
    m = x.reshape(2, 3) * 1.0
    m[..., 1] = x[:2] * 5.0
    v = m[None, :, 0]
    m[:, None, 2] = 1.0
    a = x * 1.0
    a[None] = x[::-1]
    a[None, 1:] *= 2.0
    return np.sum(m**2) + np.sum(v) + np.sum(a * x)


def masks_selecting_nothing(x):
    h = x * 1.0
    h[x > 100.0] = 0.0
    h[np.zeros(6, bool)] = 5.0
    return np.sum(h**2) + np.sum(x[x > 100.0])


def traced_mask_writes(x):
    h = x * 1.0
    h[x < 0] = x[x < 0] ** 2
    return np.sum(h**2)


def overlapping_inplace(x):
    a = x * 1.0
    a[1:] += a[:-1]
    b = x * 1.0
    b[:-1] += b[1:]
    c = x * 1.0
    np.add(c[:-1], c[1:], out=c[1:])
    d = x * 1.0
    d[1:] = d[:-1]
    return np.sum(a**2) + np.sum(b**2) + np.sum(c**2) + np.sum(d * x)


def self_aliasing_iadd(x):
    a = x * 1.0
    a += a
    a *= a[0]
    return np.sum(a)


def writes_through_transpose_and_reshape(m):
    a = m * 1.0
    t = a.T
    t[0] = m[:, 1] * 2.0
    a[1] += 1.0
    return np.sum(t**2) + np.sum(a)


def view_functions(m):
    a = m * 1.0
    np.flip(a)[0, 0] = 0.0
    np.moveaxis(a, 0, 1)[0, 1] = 5.0
    np.swapaxes(a, 0, 1)[1] *= 2.0
    np.rot90(a)[0, 1] = m[1, 1]
    first, _ = np.split(a, 2)
    first *= 3.0
    np.squeeze(a[None])[1, 2] = m[0, 0] ** 2
    np.atleast_2d(a)[0, 0] += 1.0
    a[...][1, 0] = 0.5
    return np.sum(a**2 * m)


def copies_are_not_views(m):
    a = m * 1.0
    a[[0, 1]][0, 0] = 100.0  # advanced indexing copies
    a[a > -10][1] = 100.0
    np.concatenate([a])[0, 0] = 100.0
    return np.sum(a**2)


def rows_by_iteration(m):
    a = m * 1.0
    for row in a:
        row += 1.0
        row[0] = row[1] * 2.0
    return np.sum(a**2)


def sort_methods(m):
    a = m * 1.0
    a.sort()
    b = m * 1.0
    b.sort(axis=0)
    c = m * 1.0
    c[1].sort()
    return np.sum(a * m) + np.sum(b[0] * 2.0 + b[1]) + np.sum(c * m)


def ufunc_out_into_views(m):
    a = m * 1.0
    np.multiply(a[0], 2.0, out=a[1])
    np.exp(a[:, 0], out=a[:, 1])
    return np.sum(a**2)


def scatter_adds(x):
    acc = np.zeros((3, 2))
    np.add.at(acc, ([0, 2, 0], [1, 1, 1]), x)
    out = np.zeros(4)
    for i, j in [(0, 1), (1, 1), (2, 3)]:
        out[j] += x[i]
    return np.sum(acc**2) + np.sum(out**2)


def put_along_rows(m):
    h = m * 1.0
    np.put_along_axis(h, np.array([[0], [2]]), 0.0, axis=1)
    return np.sum(h**2)


def writes_into_arguments(x):
    v = x[1:]
    v += x[0]
    x[0] = 5.0
    x *= 2.0
    return np.sum(x**2)


def int_and_bool_buffers(x):
    idx = np.zeros(3, int)
    idx[1] = 2
    idx[2] = np.argmax(x)
    m = np.zeros(3, bool)
    m[0] = True
    m[2] = x[2] > 0
    h = np.zeros(3, dtype=int)
    h[0] = 2.7  # a constant truncates, as NumPy does
    return np.sum(x[idx] ** 2) + np.sum(x[m] ** 2) + np.sum(x * h)


def every_allocator(x):
    a = np.zeros_like(x)
    a[1:] = x[:-1]
    e = np.eye(3)
    e[0] = x
    e[:, 1] *= x
    r = np.arange(3.0)
    r[0] = x[1]
    s = np.linspace(0, 1, 3)
    s += x
    f = np.full((2, 3), 0.5)
    f[1, ::-1] = x
    u = np.empty((2, 3))
    u[0] = x
    u[1] = x**2
    w = np.asarray(x * 1.0)
    w[0] = 0.0
    return (np.sum(a * x) + np.sum(e @ x) + np.sum(r * x) + np.sum(s**2) + np.sum(f**2)
            + np.sum(u[:, 1:]) + np.sum(w * x))


def np_array_of_scalars_written(a, b):
    v = np.array([a, b, a * b])
    v[1] = a**3
    w = v
    w *= 2.0
    return np.sum(v * v)


def augmented_everything(x):
    a = x * 1.0
    a **= 3
    a /= x
    a -= x[0]
    return np.sum(a)


def chained_row_views(x):
    a = x.reshape(2, 3) * 1.0
    rows = [a[i] for i in range(2)]
    for r in rows:
        r *= r.sum()
    return np.sum(a) + rows[0][0]


def bool_and_mixed_2d(m):
    a = m * 1.0
    a[m > 0] = m[m > 0] ** 2
    a[:, [True, False, True]] *= 3.0
    a[[0, 1], 1:] = 0.0
    a[1, [0, 2]] += m[0, :2]
    return np.sum(a * m)


CASES = [
    (alias_then_use, (X3,), (X3B,)),
    (view_kept_across_writes, (X3,), (X3B,)),
    (view_of_view, (X6,), (X6B,)),
    (loop_reads_earlier_rows, (X3,), (X3B,)),
    (overwrite_then_read, (X3,), (X3B,)),
    (buffer_partly_returned, (X3,), (X3B,)),
    (scalars_into_rows, (X3,), (X3B,)),
    (repeated_indices, (X3,), (X3B,)),
    (negative_indices, (X3,), (X3B,)),
    (stepped_slices, (X6,), (X6B,)),
    (ellipsis_and_none, (X6,), (X6B,)),
    (masks_selecting_nothing, (X6,), (X6B,)),
    (traced_mask_writes, (X6,), (X6B,)),
    (overlapping_inplace, (X6,), (X6B,)),
    (self_aliasing_iadd, (X3,), (X3B,)),
    (writes_through_transpose_and_reshape, (M23,), (M23B,)),
    (view_functions, (M23,), (M23B,)),
    (copies_are_not_views, (M23,), (M23B,)),
    (rows_by_iteration, (M23,), (M23B,)),
    (sort_methods, (M23,), (M23B,)),
    (ufunc_out_into_views, (M23,), (M23B,)),
    (scatter_adds, (X3,), (X3B,)),
    (put_along_rows, (M23,), (M23B,)),
    (writes_into_arguments, (X3,), (X3B,)),
    (int_and_bool_buffers, (X3,), (X3B,)),
    (every_allocator, (X3,), (X3B,)),
    (augmented_everything, (X3,), (X3B,)),
    (chained_row_views, (X6,), (X6B,)),
    (bool_and_mixed_2d, (M23,), (M23B,)),
]


@pytest.mark.parametrize(("f", "args", "other"), CASES, ids=[c[0].__name__ for c in CASES])
def test_program(f, args, other):
    check(f, *args, other=other)


def test_np_array_of_traced_scalars_written():
    check(np_array_of_scalars_written, 0.7, -1.2, argnums=(0, 1), other=(0.3, 2.0))


@pytest.mark.parametrize("f", [alias_then_use, negative_indices, loop_reads_earlier_rows,
                               view_of_view, overlapping_inplace])
def test_second_order(f):
    x = X6 if f in (view_of_view, overlapping_inplace) else X3
    hessian_check(f, x)


def float32_buffer(x):
    h = np.zeros_like(x)
    h[1:] = x[:-1] * np.float32(2.0)
    h += x
    h[0] *= 3.0
    return np.sum(h * h)


def test_float32_stays_float32_and_matches_numpy():
    x = X3.astype(np.float32)
    v, g = gradgen.value_and_grad(float32_buffer)(x)
    assert g.dtype == np.float32 and np.asarray(v).dtype == np.float32
    np.testing.assert_allclose(v, float32_buffer(x.copy()), rtol=1e-6)
    assert "float64" not in gradgen.emit(float32_buffer, x)


def float64_into_float32_buffer(x):
    h = np.zeros(3, dtype=np.float32)
    h[:] = x * 2.0  # cast to float32 on the way in, as NumPy does
    return np.sum(h.astype(np.float64) * x)


def test_float64_values_into_a_float32_buffer():
    v, g = gradgen.value_and_grad(float64_into_float32_buffer)(X3)
    assert v == float64_into_float32_buffer(X3.copy())
    np.testing.assert_allclose(g, 4 * X3, rtol=1e-6)


# --- other entry points through code with writes ------------------------------------------------


def returns_a_view(x):
    h = np.zeros(3)
    h[0] = x[0] * x[1]
    v = h[:2]
    h[1] = x[2] ** 2
    return v


def returns_view_and_base(x):
    a = x * 2.0
    r = a[1:]
    a[1] = 9.0
    return r, a


def test_vjp_and_jacobian_see_writes_through_views():
    out, pullback = gradgen.vjp(returns_a_view, X3)
    np.testing.assert_allclose(out, [X3[0] * X3[1], X3[2] ** 2])
    np.testing.assert_allclose(pullback(np.array([1.0, 2.0]))[0], [X3[1], X3[0], 4 * X3[2]])
    out, pullback = gradgen.vjp(returns_view_and_base, X3)
    np.testing.assert_allclose(out[0], [9.0, 2 * X3[2]])
    np.testing.assert_allclose(pullback((np.ones(2), np.ones(3)))[0], [2.0, 0.0, 4.0])
    module = run_emitted(gradgen.emit(returns_view_and_base, X3, vjp=True))
    values, grads = module["returns_view_and_base_vjp"](X3, (np.ones(2), np.ones(3)))
    np.testing.assert_allclose(values[0], [9.0, 2 * X3[2]])
    np.testing.assert_allclose(grads[0] if isinstance(grads, tuple) else grads, [2.0, 0.0, 4.0])
    jac = gradgen.jacobian(returns_a_view)(X3)
    np.testing.assert_allclose(jac, [[X3[1], X3[0], 0.0], [0.0, 0.0, 2 * X3[2]]])


def intermediate_overwritten(x):
    a = x * 2.0
    b = a * 1.0
    a[0] = 5.0
    return np.sum(a * a) + np.sum(b * x)


def test_intermediates_check_finite_and_check_through_writes():
    g, adj = gradgen.grad(intermediate_overwritten, intermediates=("a", "b"))(X3)
    close(g, numeric_grad(intermediate_overwritten, (X3,), 0))
    a = X3 * 2.0
    a[0] = 5.0
    np.testing.assert_allclose(adj["a"], 2 * a)  # the adjoint of the last version of a
    np.testing.assert_allclose(adj["b"], X3)
    g2 = gradgen.grad(loop_reads_earlier_rows, check_finite=True)(X3)
    close(g2, numeric_grad(loop_reads_earlier_rows, (X3,), 0))
    report = gradgen.check(intermediate_overwritten, X3)
    assert report.results[0].method in ("proved", "sympy")


def sqrt_written(x):
    h = np.zeros(3)
    h[0] = np.sqrt(x[0])
    return np.sum(h)


def test_check_finite_names_the_write():
    with pytest.raises(gradgen.GradgenError, match=r"test_inplace_adversarial\.py:\d+.*h\[0\]"):
        gradgen.grad(sqrt_written, check_finite=True)(np.array([0.0, 1.0, 2.0]))


def mask_filled(x):
    h = np.zeros(3)
    h[x > 0] = x[x > 0] ** 2
    return np.sum(h * x)


def test_decorator_cache_with_other_data_and_mask_counts():
    f = gradgen.grad(mask_filled)
    for x in (X3, X3B, np.abs(X3), -np.abs(X3), X3):
        close(f(x), numeric_grad(mask_filled, (x,), 0))
    g = gradgen.grad(intermediate_overwritten)
    close(g(X3B), numeric_grad(intermediate_overwritten, (X3B,), 0))
    close(g(X3), numeric_grad(intermediate_overwritten, (X3,), 0))


# --- errors that are already good ---------------------------------------------------------------

W = np.array([1.0, 2.0, 3.0])


def write_broadcast_view(x):
    b = np.broadcast_to(x, (2, 3))
    b[0, 0] = 1.0
    return np.sum(b)


def write_diagonal_view(x):
    d = np.outer(x, x).diagonal()
    d[0] = 1.0
    return np.sum(d)


def float_into_int_buffer(x):
    h = np.zeros(3, int)
    h[0] = x[0]
    return np.sum(h)


def iadd_into_global(x):
    w = W
    w += x
    return np.sum(w)


def item_into_scalar(x):
    s = x[0] * 1.0
    s[0] = 2.0
    return s


def ufunc_where(x):
    a = x * 1.0
    np.add(a, 1.0, out=a, where=x > 0)
    return np.sum(a)


def subtract_at(x):
    a = np.zeros(3)
    np.subtract.at(a, [0, 1], x[:2])
    return np.sum(a)


@pytest.mark.parametrize("f", [write_broadcast_view, write_diagonal_view, float_into_int_buffer,
                               iadd_into_global, item_into_scalar, ufunc_where, subtract_at])
def test_unsupported_writes_name_the_users_line(f):
    before = W.copy()
    with pytest.raises(gradgen.GradgenError, match=r"^test_inplace_adversarial\.py:\d+: "):
        gradgen.grad(f)(X3.copy())
    np.testing.assert_array_equal(W, before)


# --- known bugs ----------------------------------------------------------------------------------


def inlined_read_of_zeroed_adjoint(x):
    a = x * 2.0
    a[0] = 5.0
    c = a + x * 3.0
    return np.sum(c * c)


def test_fixed_inlined_read_after_inplace_write_into_adjoint_alias():
    close(gradgen.grad(inlined_read_of_zeroed_adjoint)(X3),
          numeric_grad(inlined_read_of_zeroed_adjoint, (X3,), 0))


def _zero_tail_head(a, x):
    v = a[1:]
    v[0] = 0.0
    return np.sum(v * x[1:])


def inlined_read_of_written_view(x):
    a = x * 2.0
    return np.sum(a * 3.0) + _zero_tail_head(a, x)


def test_fixed_emitted_forward_inlines_read_past_write_into_view():
    module = run_emitted(gradgen.emit(inlined_read_of_written_view, X3))
    value, _ = module["inlined_read_of_written_view_value_and_grad"](X3)
    close(value, inlined_read_of_written_view(X3.copy()), 1e-12)


def doubled_cube(x):
    h = x**2
    h[:] = h * 2.0
    return np.sum(h * x)


def grad_component(y):
    return gradgen.grad(doubled_cube)(y)[0]


def test_fixed_grad_of_grad_through_a_full_slice_write():
    close(gradgen.grad(grad_component)(np.array([0.3, -0.4])), [3.6, 0.0])


def fortran_order_iadd(m):
    a = m.T * 1.0  # F-contiguous, as in NumPy
    a += np.ones((3, 2))  # NumPy keeps a F-contiguous; the trace's a + b is C-contiguous
    r = a.reshape(-1)  # so NumPy copies here, while gradgen records a view
    r[0] = 0.0
    return np.sum(a * m.T)


def write_through_reshaped_copy(m):
    a = m * 1.0
    r = a.reshape(-1)
    r[0] = 0.0
    return np.sum(a * m)


@pytest.mark.parametrize("fn", [fortran_order_iadd, write_through_reshaped_copy])
def test_writes_across_a_reshape_that_may_copy_are_refused(fn):
    """Whether NumPy's reshape is a view or a copy depends on the memory layout (C or
    Fortran order), which a traced path cannot fix for every later call: refused, by line."""
    with pytest.raises(gradgen.UnsupportedOperation, match="reshape") as info:
        gradgen.grad(fn)(np.asfortranarray(M23))
    assert str(info.value).startswith("test_inplace_adversarial.py:")


def zero_d_alias(x):
    h = np.zeros(())
    g = h
    h += x[0]
    h += x[1]  # h's value became a NumPy scalar: this += rebinds h instead of writing
    return g * 1.0


def test_fixed_zero_d_buffer_alias_misses_second_write():
    close(gradgen.value_and_grad(zero_d_alias)(X3)[0], zero_d_alias(X3.copy()), 1e-12)


def aliased_arguments(a, b):
    a[0] = 5.0
    return np.sum(b * b)


def test_fixed_aliased_arguments():
    x = np.array([1.0, 2.0, 3.0])
    try:
        value, _ = gradgen.value_and_grad(aliased_arguments, argnums=(0, 1))(x, x)
    except gradgen.GradgenError:
        return
    y = x.copy()
    assert value == aliased_arguments(y, y)


def fill_traced(x):
    a = x * 1.0
    a.fill(2.0)
    b = x * 1.0
    b.fill(x[0])
    return np.sum(a * x) + np.sum(b * x)


def test_fixed_fill_on_a_traced_array():
    check(fill_traced, X3)


def zero_d_buffer(x):
    h = np.zeros(())
    h[()] = x[0]
    h += x[1]
    h[...] = h * 2.0
    return h * x[2]


def test_fixed_zero_d_buffer_written_after_iadd():
    check(zero_d_buffer, X3)


def traced_index_write(x):
    h = np.zeros(3)
    h[np.argsort(x)] = x
    return np.sum(h * W)


def test_fixed_traced_index_write_error_names_the_write():
    with pytest.raises(gradgen.GradgenError) as info:
        gradgen.grad(traced_index_write)(X3)
    line = traced_index_write.__code__.co_firstlineno + 2
    assert str(info.value).startswith(f"test_inplace_adversarial.py:{line}:")


def mask_combined(x):
    return np.sum(x[(x > 0) & (x < 1)]) + np.sum(x[~(x > 0)])


def test_fixed_combining_traced_masks():
    check(mask_combined, X3, other=(X3B,))


def _attr_program(attr):
    def f(x):
        a = x * 1.0
        if attr == "flat":
            a.flat[0] = 0.0
        elif attr == "view":
            a.view()[0] = 0.0
        elif attr == "put":
            a.put([0], 5.0)
        elif attr == "resize":
            a.resize(4)
        elif attr == "partition":
            a.partition(1)
        else:
            return np.sum(a) * getattr(a, attr)
        return np.sum(a * x)

    return f


@pytest.mark.parametrize("attr", ["flat", "view", "put", "resize", "partition"])
def test_fixed_missing_ndarray_attributes(attr):
    with pytest.raises(gradgen.GradgenError):
        gradgen.grad(_attr_program(attr))(X3.copy())


def write_into_global(x):
    W[0] = x[0]
    return np.sum(W)


def test_fixed_write_into_a_module_array_is_a_bare_value_error():
    with pytest.raises(gradgen.GradgenError, match=r"^test_inplace_adversarial\.py:\d+: "):
        gradgen.grad(write_into_global)(X3.copy())


def wrong_shape_write(x):
    h = np.zeros(3)
    h[:2] = x
    return np.sum(h)


def test_fixed_wrong_shape_write_has_no_user_line():
    with pytest.raises((gradgen.GradgenError, ValueError),
                       match=r"test_inplace_adversarial\.py:\d+"):
        gradgen.grad(wrong_shape_write)(X3.copy())
