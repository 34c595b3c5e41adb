"""The shape family as NumPy spells it: joining, splitting, repeating, flipping, padding,
sorting, taking and reordering arrays. Each spelling is called inside a user function and
checked against central differences and through the emitted module; the printed NumPy reads
as a person writes it; float32 stays float32; unsupported arguments are refused by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient, numeric_grad, run_emitted

RNG = np.random.default_rng(11)
X4 = np.array([0.3, -1.2, 2.5, 0.9])
M23 = RNG.normal(size=(2, 3))
M34 = RNG.normal(size=(3, 4))
T234 = RNG.normal(size=(2, 3, 4))


def weighted(out):
    """A scalar that sees every entry of ``out`` at its place (so a misplaced entry shows):
    sum(sin(out) * (1, 2, 3, ...)); lists and tuples of arrays add their pieces up."""
    if isinstance(out, list | tuple):
        total = 0.0
        for k, piece in enumerate(out):
            total = total + (k + 1) * weighted(piece)
        return total
    ramp = np.arange(1.0, np.size(out) + 1.0).reshape(np.shape(out))
    return np.sum(np.sin(out) * ramp)



def check(f, *args, argnums=0, rtol=1e-6):
    """gradgen's gradient equals central differences, and the emitted module computes the
    same value and gradient; returns the emitted source."""
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    grads, source = assert_gradient(f, *args, argnums=nums, rtol=rtol)
    for k, g in zip(nums, grads, strict=True):
        assert type(g) is type(args[k]) or isinstance(args[k], np.ndarray)
    return source


def loss_of(make):
    def f(x):
        return weighted(make(x))

    f.__name__ = "f"
    return f


# --- every spelling, end to end ----------------------------------------------------------------

C3 = np.array([[0.5], [-1.0]])  # a constant joined to traced values

SPELLINGS = {
    # reshapes
    "reshape": (lambda x: np.reshape(x, (3, -1)), M34),
    "reshape_method": (lambda x: x.reshape(-1, 2, 3), M34),
    "reshape_0d": (lambda x: np.reshape(x[:1], ()), X4),
    "squeeze": (lambda x: np.squeeze(x[:, :1]), M34),
    "squeeze_axis": (lambda x: np.squeeze(x[None, :, :, None], axis=(0, -1)), M23),
    "squeeze_method": (lambda x: x[:1].squeeze(), M34),
    "expand_dims": (lambda x: np.expand_dims(x, 1) * np.arange(3.0), X4),
    "expand_dims_tuple": (lambda x: np.expand_dims(x, (0, -1)), M23),
    "ravel": (lambda x: np.ravel(x.T), M23),
    "ravel_method": (lambda x: x.ravel()[::2], M34),
    # order="F": the first index fastest (a user porting MATLAB or Fortran code)
    "reshape_F": (lambda x: np.reshape(x, (2, 6), order="F"), M34),
    "reshape_F_3d": (lambda x: x.reshape((2, 3, 2), order="F")[1], M34),
    "reshape_F_from_1d": (lambda x: x.reshape(2, 2, order="F") @ np.array([1.0, 3.0]), X4),
    "ravel_F": (lambda x: np.ravel(T234, order="F")[:6] * np.ravel(x, order="F"), M23),
    "ravel_F_method": (lambda x: x.ravel("F")[1:], M34),
    "flatten_F": (lambda x: x.flatten(order="F")[::-1] * x.flatten(), M23),
    "atleast_1d": (lambda x: np.atleast_1d(np.sum(x)) * np.atleast_1d(x), X4),
    "atleast_2d": (lambda x: np.atleast_2d(x).T * np.atleast_2d(x), X4),
    "atleast_3d": (lambda x: np.atleast_3d(x) + np.atleast_3d(x[0]), M23),
    "atleast_multi": (lambda x: np.atleast_2d(x, x[0])[1] * np.atleast_2d(x, x[0])[0], X4),
    # transposes
    "transpose": (lambda x: np.transpose(x, (1, 2, 0)), T234),
    "transpose_negative": (lambda x: np.transpose(x, (-1, 0, 1)), T234),
    "T": (lambda x: x.T, M23),
    "swapaxes": (lambda x: np.swapaxes(x, 0, -1), T234),
    "swapaxes_method": (lambda x: x.swapaxes(1, 2), T234),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), T234),
    "moveaxis_many": (lambda x: np.moveaxis(x, (0, 1), (2, 0)), T234),
    "rollaxis": (lambda x: np.rollaxis(x, 2, 1), T234),
    # joining
    "concatenate": (lambda x: np.concatenate([x, x[:, :1] * 2, C3], axis=1), M23),
    "concatenate_axis0": (lambda x: np.concatenate((x, x ** 2)), M23),
    "concatenate_none": (lambda x: np.concatenate([x, x[:1]], axis=None), M23),
    "concatenate_py_list": (lambda x: np.concatenate([x, [1.0, 2.0]]), X4),
    "concatenate_rows": (lambda x: np.concatenate(x), T234),
    "concat": (lambda x: np.concat([x, -x], axis=-1), M23),
    "stack": (lambda x: np.stack([x, x ** 2], axis=1), X4),
    "hstack": (lambda x: np.hstack([x, 1.5, x[:2]]), X4),
    "hstack_2d": (lambda x: np.hstack((x, x[:, :1])), M23),
    "vstack": (lambda x: np.vstack([x, x * 2, np.ones(4)]), X4),
    "dstack": (lambda x: np.dstack([x, x ** 2]), M23),
    "column_stack": (lambda x: np.column_stack([x, x ** 2, 1.0 + np.arange(4.0)]), X4),
    "append": (lambda x: np.append(x, [[1.0, 2.0]]), M23),
    "append_axis": (lambda x: np.append(x, x[:1] * 3, axis=0), M23),
    # splitting
    "split": (lambda x: np.split(x, 2, axis=1), M34),
    "split_points": (lambda x: np.split(x, [1, -1]), X4),
    "array_split": (lambda x: np.array_split(x, 3, axis=1), M34),
    "hsplit": (lambda x: np.hsplit(x, [1, 3]), M34),
    "vsplit": (lambda x: np.vsplit(x, 3), M34),
    "dsplit": (lambda x: np.dsplit(x, 2), T234),
    # broadcasting
    "broadcast_to": (lambda x: np.broadcast_to(x, (3, 4)), X4),
    "broadcast_arrays": (lambda x: np.broadcast_arrays(x, x[:, None], 2.0), X4),
    # repeating
    "tile": (lambda x: np.tile(x, 2), X4),
    "tile_2d": (lambda x: np.tile(x, (2, 1, 2)), M23),
    "repeat": (lambda x: np.repeat(x, 3, axis=0), M23),
    "repeat_flat": (lambda x: np.repeat(x, 2), M23),
    "repeat_counts": (lambda x: np.repeat(x, [2, 0, 1], axis=1), M23),
    "repeat_method": (lambda x: x.repeat(2, axis=-1), M23),
    # flipping and rolling
    "flip": (lambda x: np.flip(x), M23),
    "flip_axis": (lambda x: np.flip(x, axis=(0, 2)), T234),
    "fliplr": (lambda x: np.fliplr(x), M23),
    "flipud": (lambda x: np.flipud(x), M23),
    "rot90": (lambda x: np.rot90(x), M23),
    "rot90_k2": (lambda x: np.rot90(x, 2), M23),
    "rot90_k3_axes": (lambda x: np.rot90(x, -1, axes=(2, 0)), T234),
    "roll": (lambda x: np.roll(x, 2), M23),
    "roll_axis": (lambda x: np.roll(x, -1, axis=1), M34),
    "roll_tuple": (lambda x: np.roll(x, (1, 2), axis=(0, 1)), M34),
    # padding
    "pad": (lambda x: np.pad(x, ((1, 1), (0, 2))), M23),
    "pad_int": (lambda x: np.pad(x, 2, constant_values=1.5), X4),
    "pad_pair": (lambda x: np.pad(x, (1, 2), constant_values=((0.5, 1.0), (-1.0, 2.0))), M23),
    "pad_per_axis": (lambda x: np.pad(x, ((1,), (2,)), constant_values=-0.5), M23),
    "pad_dict": (lambda x: np.pad(x, {-1: (1, 2), 0: 1}, mode="edge"), M23),
    "pad_edge": (lambda x: np.pad(x, ((2, 1), (1, 3)), mode="edge"), M23),
    "pad_reflect": (lambda x: np.pad(x, ((1, 1), (3, 2)), mode="reflect"), M34),
    "pad_reflect_long": (lambda x: np.pad(x, 6, mode="reflect"), X4),
    "pad_symmetric": (lambda x: np.pad(x, 2, mode="symmetric"), M23),
    "pad_wrap": (lambda x: np.pad(x, [[0, 2], [3, 1]], mode="wrap"), M23),
    "pad_traced_value": (lambda x: np.pad(x, 1, constant_values=x[0, 0]), M23),
    # differences
    "diff": (lambda x: np.diff(x), M34),
    "diff_n_axis": (lambda x: np.diff(x, n=2, axis=0), M34),
    "diff_prepend_append": (lambda x: np.diff(x, prepend=0.0, append=x[-1:] * 2), X4),
    # sorting, taking
    "sort": (lambda x: np.sort(x), M34),
    "sort_axis0": (lambda x: np.sort(x, axis=0), M34),
    "sort_none": (lambda x: np.sort(x, axis=None), M23),
    "sort_method": (lambda x: _sorted_copy(x), X4),
    "take": (lambda x: np.take(x, [3, 0, 3, 1]), X4),
    "take_axis": (lambda x: np.take(x, [[2, 0], [2, 2]], axis=1), M34),
    "take_scalar": (lambda x: np.take(x, 2, axis=0) * x[0], M34),
    "take_wrap": (lambda x: np.take(x, [5, -6, 1], mode="wrap"), X4),
    "take_clip": (lambda x: np.take(x, [7, -3, 1], mode="clip"), X4),
    "take_method": (lambda x: x.take([1, 1], axis=0), M23),
    "take_along_axis": (lambda x: np.take_along_axis(x, np.array([[0, 3, 3], [1, 0, 2],
                                                                   [2, 2, 2]]), axis=1), M34),
    "take_along_axis_none": (lambda x: np.take_along_axis(x, np.array([5, 0, 5]), axis=None),
                             M23),
    "take_along_argmax": (lambda x: np.take_along_axis(
        x, np.argmax(x, axis=0, keepdims=True), axis=0), M34),
    "take_along_argsort": (lambda x: np.take_along_axis(x, np.argsort(x, axis=0), axis=0), M34),
    # copies
    "copy": (lambda x: np.copy(x) * x, M23),
    "copy_method": (lambda x: x.copy() * x, M23),
    "array": (lambda x: np.array(x) * 2, M23),
    "asarray": (lambda x: np.asarray(x) * 2, M23),
}


def _sorted_copy(x):
    y = x.copy()
    y.sort()
    return y


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_spelling_end_to_end(name):
    make, x = SPELLINGS[name]
    check(loss_of(make), x)


@pytest.mark.parametrize("name", ["concatenate", "hstack", "pad_edge", "repeat_counts",
                                  "tile_2d", "roll_tuple", "sort", "take_along_axis", "diff",
                                  "split", "rot90", "pad_reflect", "take", "reshape_F_3d",
                                  "flatten_F"])
def test_spelling_float32(name):
    make, x = SPELLINGS[name]
    x32 = x.astype(np.float32)
    f = loss_of(make)
    g = gradgen.grad(f)(x32)
    assert g.dtype == np.float32 and g.shape == x.shape
    np.testing.assert_allclose(g, gradgen.grad(f)(x), rtol=1e-4, atol=1e-4)
    _, emitted = run_emitted(gradgen.emit(f, x32))["f_value_and_grad"](x32)
    assert emitted.dtype == np.float32


@pytest.mark.parametrize("name", ["concatenate", "repeat", "repeat_counts", "tile_2d",
                                  "pad_edge", "pad_reflect", "roll_tuple", "sort",
                                  "take_along_axis", "take", "diff_prepend_append", "rot90",
                                  "reshape_F_3d", "flatten_F"])
def test_second_order(name):
    """d/dx (grad f(x) . v) against central differences of the gradient."""
    make, x = SPELLINGS[name]
    f = loss_of(make)
    v = np.random.default_rng(3).normal(size=x.shape)
    hvp = gradgen.grad(lambda x: np.sum(gradgen.grad(f)(x) * v))(x)
    eps = 1e-5
    ref = (gradgen.grad(f)(x + eps * v) - gradgen.grad(f)(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(hvp, ref, rtol=1e-6, atol=1e-6)


# --- Python floats, mixed operands, dtypes -----------------------------------------------------


def test_python_float_joins_and_appends():
    def f(x, s):
        return weighted(np.hstack([x, s, 2.0])) + weighted(np.append(x, s)) + weighted(
            np.atleast_1d(s) * x)

    check(f, X4, 0.7, argnums=(0, 1))


def test_float32_joined_with_python_floats_keeps_numpys_dtype():
    x32 = X4.astype(np.float32)

    def f(x):
        y = np.concatenate([x, [1.0]])  # a float64 list: NumPy gives float64
        z = np.hstack([x, 1.0])  # atleast_1d(1.0) is float64 too
        return np.sum(y * y) + np.sum(z)

    assert np.concatenate([x32, [1.0]]).dtype == np.float64
    g = gradgen.grad(f)(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * x32 + 1, rtol=1e-6)
    module = run_emitted(gradgen.emit(f, x32))
    value, emitted = module["f_value_and_grad"](x32)
    assert emitted.dtype == np.float32
    np.testing.assert_allclose(value, f(x32), rtol=1e-12)


def test_float32_pieces_stay_float32():
    x32 = M34.astype(np.float32)

    def f(x):
        parts = np.split(np.pad(np.sort(x), 1, mode="edge"), 2, axis=1)
        return np.sum(np.tile(parts[0], 2) * np.repeat(parts[1], 2, axis=1))

    g = gradgen.grad(f)(x32)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numeric_grad(f, [M34], 0), rtol=1e-3, atol=1e-3)


def test_python_float_through_reshapes_tile_repeat_pad():
    def f(s):
        return weighted(np.tile(s, 3)) + weighted(np.repeat(s, 2)) + weighted(
            np.pad(np.atleast_1d(s), 2, mode="edge")) + weighted(np.expand_dims(s, 0))

    g = gradgen.grad(f)(0.4)
    assert type(g) is float
    assert g == pytest.approx(float(numeric_grad(f, [0.4], 0)), rel=1e-6)


def test_traced_python_float_inside_a_joined_list():
    def f(x, s):
        return weighted(np.concatenate([x, [s, 2.0]]))

    check(f, X4, 0.5, argnums=(0, 1))


def test_several_traced_inputs_joined():
    def f(x, y):
        return weighted(np.concatenate([y, x[None, :3], y[:1] * x[0]], axis=0))

    check(f, X4, M23, argnums=(0, 1))


def test_stack_with_hstack_vstack_of_two_traced_values():
    def f(a, b):
        return weighted(np.vstack([a, b])) + weighted(np.column_stack([a, b])) + weighted(
            np.dstack([a, b]))

    check(f, X4, X4[::-1] * 2, argnums=(0, 1))


# --- the printed NumPy ---------------------------------------------------------------------------


def test_printed_numpy_reads_as_written():
    def f(x, y):
        a = np.concatenate([x, y], axis=1)
        b = np.repeat(x, 3, axis=0)
        c = np.pad(x, ((1, 1), (0, 2)))
        d = np.tile(x, (2, 1))
        e = np.roll(y, 2)
        p = np.pad(x, 1, mode="edge")
        return np.sum(a) + np.sum(b * b) + np.sum(c ** 3) + np.sum(d * d) + np.sum(e * e) \
            + np.sum(p * p)

    source = gradgen.emit(f, M23, M23)
    for text in ("np.concatenate([x, y], axis=1)", "np.repeat(x, 3, axis=0)",
                 "np.pad(x, ((1, 1), (0, 2)))", "np.tile(x, (2, 1))", "np.roll(y, 2)",
                 'np.pad(x, 1, mode="edge")'):
        assert text in source, text


def test_printed_joins_splits_flips():
    def f(x):
        left, right = np.split(x, 2)
        return np.sum(np.flip(left) * right) + np.sum(np.concatenate([x, [1.0]]) ** 2) \
            + np.sum(np.squeeze(x[None]) ** 3)

    source = gradgen.emit(f, X4)
    assert "x[:2]" in source and "x[2:]" in source and "[::-1]" in source
    assert "np.concatenate([x, [1.0]])" in source


def test_sort_prints_as_np_sort_where_no_gradient_needs_its_order():
    def f(x, y):
        return np.sum(np.sort(y, axis=0) * x)

    source = gradgen.emit(f, M34, M34, argnums=0)
    assert "np.sort(y, axis=0)" in source
    source = gradgen.emit(f, M34, M34, argnums=1)
    assert "np.argsort(y, axis=0)" in source and "np.take_along_axis(" in source


# --- sort: gradient through the sorting permutation, never a baked-in one ------------------------


def test_sort_gradient_matches_finite_differences_on_distinct_values():
    x = np.array([[0.3, -1.7, 2.2, 0.9], [1.4, 0.1, -0.6, 3.1], [-2.0, 0.8, 0.5, -0.2]])
    assert len(np.unique(x)) == x.size

    def f(x):
        return np.sum(np.sort(x, axis=1) * np.arange(1.0, 5.0)) + np.sum(
            np.sort(x, axis=0)[0] ** 2)

    g = gradgen.grad(f)(x)
    np.testing.assert_allclose(g, numeric_grad(f, [x], 0), rtol=1e-7, atol=1e-8)


def test_emitted_sort_works_for_other_inputs_of_the_same_shape():
    def f(x):
        top = np.sort(x)[-2:]  # the two largest
        order = np.argsort(x)
        return np.sum(top * np.array([1.0, 3.0])) + np.sum(
            np.take_along_axis(x, order, axis=0) * np.arange(5.0))

    x = np.array([0.5, -1.0, 2.0, 0.1, 1.5])
    module = run_emitted(gradgen.emit(f, x))
    for other in (np.array([3.0, 2.0, 1.0, 0.0, -1.0]), np.array([-0.3, 4.0, 0.2, 1.1, 0.7]),
                  RNG.normal(size=5)):
        value, grad = module["f_value_and_grad"](other)
        np.testing.assert_allclose(value, f(other), rtol=1e-12)
        np.testing.assert_allclose(grad, numeric_grad(f, [other], 0), rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(grad, gradgen.grad(f)(other), rtol=1e-12)


def test_sort_ties_follow_argsort():
    """At a tie the cotangent of each sorted slot goes to the entry np.argsort put there."""
    x = np.array([1.0, 1.0, 0.0])

    def f(x):
        return np.sum(np.sort(x, kind="stable") * np.array([1.0, 2.0, 3.0]))

    g = gradgen.grad(f)(x)
    np.testing.assert_array_equal(g, [2.0, 3.0, 1.0])


def test_take_along_axis_with_a_traced_index_from_another_array():
    def f(x, y):
        return weighted(np.take_along_axis(x, np.argsort(y, axis=1), axis=1))

    check(f, M34, RNG.normal(size=(3, 4)), argnums=0)


def test_take_with_traced_indices_accumulates():
    def f(x, idx):
        return weighted(np.take(x, idx, axis=1))

    check(f, M34, np.array([0, 2, 0, 0]), argnums=0)
    assert gradgen.grad(lambda x: np.sum(np.take(x, [1, 1, 1])))(X4).tolist() == [0, 3, 0, 0]


# --- views: a split piece or a flip written into changes the base -----------------------------


def test_writes_through_split_pieces_and_flips_reach_the_base():
    def f(x):
        y = x.copy()
        left, right = np.split(y, 2)
        left[0] = right[1] * 3.0
        np.flip(y)[0] = 2.0 * y[1]
        return weighted(y)

    check(f, X4)


# --- NumPy's own errors, and refusals -------------------------------------------------------------


def test_numpy_errors_stay_numpys():
    with pytest.raises(ValueError, match="equal division"):
        gradgen.grad(lambda x: np.sum(np.split(x, 3)[0]))(X4)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        gradgen.grad(lambda x: np.sum(np.vsplit(x, 2)[0]))(X4)
    with pytest.raises(np.exceptions.AxisError):
        gradgen.grad(lambda x: np.sum(np.swapaxes(x, 0, 2)))(M23)
    with pytest.raises(ValueError):
        gradgen.grad(lambda x: np.sum(np.reshape(x, (5, -1))))(M23)
    with pytest.raises(ValueError):
        gradgen.grad(lambda x: np.sum(np.concatenate([x, x[0]])))(M23)


@pytest.mark.parametrize(("make", "name"), [
    (lambda x: np.reshape(x, 6, order="A"), "np.reshape"),
    (lambda x: np.ravel(x, order="K"), "np.ravel"),
    (lambda x: np.pad(x, 1, mode="maximum"), "np.pad"),
    (lambda x: np.pad(x, 1, mode="reflect", reflect_type="odd"), "np.pad"),
    (lambda x: np.pad(x, 1, constant_values=x[0]), "np.pad"),
    (lambda x: np.sort(x, order="a"), "np.sort"),
    (lambda x: np.concatenate([x, x], out=np.zeros((4, 3))), "np.concatenate"),
    (lambda x: np.concatenate([x, x], dtype=np.int64), "np.concatenate"),
    (lambda x: np.hstack([x, x], dtype=np.int32), "np.hstack"),
])
def test_unsupported_arguments_are_refused_by_name(make, name):
    with pytest.raises(gradgen.UnsupportedOperation, match=name.replace(".", r"\.")):
        gradgen.grad(lambda x: np.sum(make(x)))(M23)


def test_traced_repeats_and_pad_width_and_wrapped_indices_are_refused():
    counts = np.array([1, 2, 0])
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np\.repeat"):
        gradgen.grad(lambda x, r: np.sum(np.repeat(x, r, axis=1)))(M23, counts)
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np\.pad"):
        gradgen.grad(lambda x, w: np.sum(np.pad(x, w)))(M23, np.array([1, 1]))
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np\.take"):
        gradgen.grad(lambda x, i: np.sum(np.take(x, i, mode="wrap")))(X4, np.array([5, 1]))
    with pytest.raises(gradgen.UnsupportedOperation, match=r"np\.take"):
        gradgen.grad(lambda x, m: np.sum(np.take(x, m)))(X4, np.array([True, False]))


def test_row_stack_is_vstack():
    def f(x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return weighted(np.row_stack([x, x * 2]))

    check(f, X4)


def test_check_proves_or_samples_sort_pad_concatenate():
    def f(x):
        return np.sum(np.sort(np.concatenate([x, x[:1] * 2])) * np.arange(5.0)) + np.sum(
            np.pad(x, 1, mode="reflect") ** 2)

    report = gradgen.check(f, X4)
    assert report.results[0].method in ("proved", "sympy")
