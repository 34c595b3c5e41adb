"""Shape ops: joining, splitting, repeating, flipping and reordering arrays, with their VJPs.

Rows here: concatenate, tile, repeat, roll, pad, take_along_axis and add_along_axis (its VJP:
``np.add.at`` along an axis). Everything else NumPy spells is an adapter onto rows that exist:
squeeze, expand_dims, ravel and atleast_*d are reshapes; swapaxes, moveaxis and rollaxis are
transposes; flip, fliplr, flipud, split and friends are basic reads (``x[::-1]``, ``x[2:4]``);
take is an indexed read; rot90 is a flip and a transpose; diff is ``x[1:] - x[:-1]``; sort is
``np.take_along_axis(x, np.argsort(x))``, so the emitted module sorts whatever data it gets.

Sort's convention at ties: the tied entries' cotangents go where ``np.argsort`` placed them
(any choice is a valid gradient of the sorted values; the emitted module makes the same one).
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import abstract
from ..tracer import Tracer, from_nested, has_traced
from .adapt import refuse
from .arith import ne, sub
from .arrays import _transpose, _value, broadcast_to, reshape, sum_, transpose
from .core import _nested, cast, copy
from .core import copy as copy_  # beside np.meshgrid's copy= flag
from .index import getitem, index_add, normalize_index, stack
from .registry import BOUND, Domain, Expr, defop, route, value_text

try:  # NumPy >= 2.0
    from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple
except ImportError:  # pragma: no cover - NumPy 1.26
    from numpy.core.numeric import normalize_axis_index, normalize_axis_tuple

REALS = (-2.0, 2.0)
_NO = np._NoValue  # NumPy's "argument not given"
_ALL = ("slice", None, None, None)  # ``:`` in an index template

__all__ = ["add_along_axis", "concatenate", "pad", "repeat", "roll", "stack", "take_along_axis",
           "tile"]


def _shape(x) -> tuple[int, ...]:
    return tuple(np.shape(_value(x)))


def _ndim(x) -> int:
    return np.ndim(_value(x))


def _dtype(x) -> np.dtype:
    return np.result_type(_value(x))


def _is_traced(x) -> bool:
    return isinstance(x, Tracer)


def _is_py(x) -> bool:
    """A Python number, traced or not: NumPy turns it into a 0-d array first."""
    aval = getattr(x, "aval", None)
    return type(x) in (float, int, bool) or (aval is not None and aval.py is not None)


def _operand(item):
    """An array argument as the op sees it: a traced value as it is, a list holding traced
    values stacked (as np.array would), anything else a NumPy array."""
    if _is_traced(item):
        return item
    if isinstance(item, list | tuple) and has_traced(item):
        return from_nested(item, None)
    return np.asarray(_plain(item))


def _plain(x):
    if isinstance(x, list | tuple):
        return type(x)(_plain(v) for v in x)
    return x.value if _is_traced(x) else x


def _to_shape(x, shape):
    """``x`` with shape ``shape`` (a view, as NumPy's reshape-like functions give)."""
    shape = tuple(int(d) for d in shape)
    if _shape(x) == shape and not _is_py(x):
        return x
    return reshape(x, shape=shape)


def _read(x, template):
    """``x[template]`` with the trailing ``:`` dropped; ``x`` itself when nothing is picked."""
    template = tuple(template)
    while template and template[-1] == _ALL:
        template = template[:-1]
    if not template:
        return x
    return getitem(x, index=template)


def _slice(start, stop, n):
    """A slice item with the bounds a person writes: ``2:``, ``:3``."""
    return ("slice", None if start == 0 else start, None if stop == n else stop, None)


def _refuse_extra(name, **given):
    extra = [k for k, v in given.items() if v is not None and v is not _NO and v is not False]
    if extra:
        refuse(f"{name} with {', '.join(f'{k}=' for k in extra)} has no gradient rule in "
               "gradgen")


def _float_dtype(name, dtype):
    if dtype is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        refuse(f"{name}(..., dtype={dtype}) has no gradient rule in gradgen",
               "only float dtypes keep a gradient")
    return dtype


# --- concatenate ------------------------------------------------------------------------------


def _concat_piece(i):
    def rule(g, ans, *xs, axis):
        start = sum(_shape(x)[axis] for x in xs[:i])
        stop = start + _shape(xs[i])[axis]
        total = _shape(ans)[axis]
        if start == 0 and stop == total:
            return g
        return _read(g, (_ALL,) * axis + (_slice(start, stop, total),))

    return rule


class _PieceRules(tuple):
    """One VJP rule per joined input, however many there are: its slice of the cotangent."""

    def __getitem__(self, i):
        return _concat_piece(i)


def _short_literal(ref, arg: Expr) -> str:
    """A small float64 or int64 constant as the list a person writes: ``[1.0]``."""
    value = ref.node.attrs.get("value") if ref.node.op.name == "const" else None
    if (isinstance(value, np.ndarray) and 1 <= value.ndim and 0 < value.size <= 8
            and value.dtype in (np.float64, np.int64)):
        return _nested(value)
    return arg.text


def _print_concatenate(node, args):
    items = ", ".join(_short_literal(r, a) for r, a in zip(node.inputs, args, strict=True))
    axis = node.attrs["axis"]
    return Expr(f"np.concatenate([{items}]" + (f", axis={axis})" if axis else ")"))


def _concatenate_abstract(op, *xs, axis=0):
    shapes = [np.shape(x) for x in xs]
    found = abstract.result_kind(op, xs, {"axis": axis})
    if found is None or axis is None:
        return None
    axis %= len(shapes[0])
    if any(len(s) != len(shapes[0]) or any(d != e for k, (d, e) in enumerate(
            zip(s, shapes[0], strict=True)) if k != axis) for s in shapes):
        return None  # NumPy refuses: let it say so
    shape = tuple(sum(s[axis] for s in shapes) if k == axis else d
                  for k, d in enumerate(shapes[0]))
    return abstract.make(shape, *found)


def _xp_concat(node, args, scope):
    axis = node.attrs["axis"]
    items = ", ".join(a.text for a in args)
    return Expr(f"xp.concat([{items}]" + (f", axis={axis})" if axis else ")"))


concatenate = defop(
    "concatenate", lambda *xs, axis=0: np.concatenate(xs, axis=axis), _print_concatenate,
    vjp=_PieceRules((None,)),
    sympy=lambda *xs, axis=0: np.concatenate(xs, axis=axis),
    domain=Domain((REALS,), cases=((((2,), (3,)), {"axis": 0}),
                                   (((2, 2), (2, 1), (2, 3)), {"axis": 1}),
                                   (((1, 3), (2, 3)), {"axis": 0}))),
    rule_text=("input i gets the cotangent's slice where it was placed along the axis",),
    abstract=_concatenate_abstract,
    xp=_xp_concat)


def _join(arrays, axis, name="np.concatenate"):
    """np.concatenate of normalized operands (axis=None: each flattened first)."""
    arrays = [_operand(a) for a in arrays]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [_to_shape(a, (int(np.prod(_shape(a), dtype=np.int64)),)) for a in arrays]
        axis = 0
    if _ndim(arrays[0]) == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis_index(int(axis), _ndim(arrays[0]))
    return concatenate(*arrays, axis=axis)


def _np_concatenate(arrays, axis=0, out=None, *, dtype=None, casting=_NO):
    _refuse_extra("np.concatenate", out=out)
    dtype = _float_dtype("np.concatenate", dtype)
    if _is_traced(arrays):  # np.concatenate(x) joins the rows of x
        shape = _shape(arrays)
        if len(shape) < 2:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        if axis is None:
            out = _to_shape(arrays, (int(np.prod(shape[1:], dtype=np.int64)) * shape[0],))
        else:
            axis = normalize_axis_index(int(axis), len(shape) - 1)
            out = _join(list(arrays), axis)
    else:
        out = _join(list(arrays), axis)
    if dtype is not None and _dtype(out) != dtype:
        out = cast(out, dtype=dtype.name)
    return out


def _atleast(x, n):
    x = _operand(x)
    shape = _shape(x)
    if len(shape) >= n and not _is_py(x):
        return x
    if n == 1:
        new = shape or (1,)
    elif n == 2:
        new = {0: (1, 1), 1: (1, *shape)}.get(len(shape), shape)
    else:
        new = {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}.get(len(shape), shape)
    return _to_shape(x, new)


def _atleast_nd(n):
    def handler(*arys):
        out = tuple(_atleast(a, n) for a in arys)
        return out[0] if len(out) == 1 else out

    handler.__name__ = f"atleast_{n}d"
    return handler


def _stacker(name, n, axis_of):
    def handler(tup, *, dtype=None, casting=_NO):
        dtype = _float_dtype(f"np.{name}", dtype)
        arrays = [_atleast(a, n) for a in tup]
        if not arrays:
            raise ValueError("need at least one array to concatenate")
        out = _join(arrays, axis_of(arrays))
        if dtype is not None and _dtype(out) != dtype:
            out = cast(out, dtype=dtype.name)
        return out

    handler.__name__ = name
    return handler


def _column_stack(tup):
    arrays = []
    for v in tup:
        v = _operand(v)
        if _ndim(v) < 2:
            v = _to_shape(v, (int(np.size(_value(v))), 1) if _ndim(v) == 1 else (1, 1))
        arrays.append(v)
    return _join(arrays, 1)


def _append(arr, values, axis=None):
    arr, values = _operand(arr), _operand(values)
    if axis is None:
        return _join([arr, values], None)
    return _join([arr, values], axis)


# --- split: each piece a basic read of the input ---------------------------------------------


def _pieces(x, div_points, axis):
    n = _shape(x)[axis]
    pieces = []
    for start, stop in itertools.pairwise(int(p) for p in div_points):
        pieces.append(getitem(x, index=(_ALL,) * axis + (_slice(start, stop, n),)))
    return pieces


def _array_split(ary, indices_or_sections, axis=0, *, equal=False):
    x = _operand(ary)
    shape = _shape(x)
    axis = normalize_axis_index(int(axis), len(shape))
    total = shape[axis]
    try:
        points = [0, *(int(i) for i in indices_or_sections), total]
    except TypeError:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.") from None
        if equal and total % sections:
            raise ValueError("array split does not result in an equal division") from None
        each, extras = divmod(total, sections)
        sizes = [0] + extras * [each + 1] + (sections - extras) * [each]
        points = np.cumsum(sizes).tolist()
    return _pieces(x, points, axis)


def _np_array_split(ary, indices_or_sections, axis=0):
    return _array_split(ary, indices_or_sections, axis)


def _np_split(ary, indices_or_sections, axis=0):
    return _array_split(ary, indices_or_sections, axis, equal=True)


def _directional_split(name, min_ndim, axis_of):
    def handler(ary, indices_or_sections):
        nd = _ndim(ary)
        if nd < min_ndim:
            raise ValueError(f"{name} only works on arrays of {min_ndim} or more dimensions")
        return _array_split(ary, indices_or_sections, axis_of(nd), equal=True)

    handler.__name__ = name
    return handler


# --- broadcasting ------------------------------------------------------------------------------


def _broadcast_arrays(*args, subok=False):
    args = [_operand(a) for a in args]
    shape = np.broadcast_shapes(*(_shape(a) for a in args))
    out = []
    for a in args:
        if _shape(a) == shape and not _is_py(a):
            out.append(a)
        else:
            out.append(broadcast_to(a, shape=shape))
    return tuple(out)


def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """np.meshgrid: each input flattened and laid along its own axis (the first two swapped
    for indexing="xy"), then broadcast to the full grid and copied, as NumPy does (its outputs
    are writable arrays of their own, never views of the inputs)."""
    if indexing not in ("xy", "ij"):
        refuse(f"np.meshgrid(indexing={indexing!r}): indexing must be 'xy' or 'ij'")
    n = len(xi)
    out = []
    for i, x in enumerate(xi):
        shape = [1] * n
        axis = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        shape[axis] = -1
        out.append(reshape(_operand(x), shape=tuple(shape)))
    if not sparse:
        out = list(_broadcast_arrays(*out))
    return tuple(copy_(x) for x in out) if copy else tuple(out)


# --- tile and repeat: their VJPs sum the copies (reshape, then sum) ---------------------------


def _tile_vjp(g, ans, x, reps):
    shape = _shape(x)
    n = max(len(shape), len(reps))
    s = (1,) * (n - len(shape)) + shape
    r = (1,) * (n - len(reps)) + tuple(reps)
    if any(k != 1 for k in r):  # the copies along each axis as an axis of their own
        split, axes = [], []
        for k, d in zip(r, s, strict=True):
            if k != 1:
                axes.append(len(split))
                split.append(k)
            split.append(d)
        g = sum_(reshape(g, shape=tuple(split)), axis=tuple(axes), keepdims=False)
    return _to_shape(g, shape)


def _print_tile(node, args):
    reps = node.attrs["reps"]
    return Expr(f"np.tile({args[0].text}, {reps[0] if len(reps) == 1 else reps!r})")


tile = defop(
    "tile", lambda x, reps: np.tile(x, reps), _print_tile,
    vjp=(_tile_vjp,), sympy=lambda x, reps: np.tile(x, reps),
    domain=Domain((REALS,), cases=((((3,),), {"reps": (2,)}),
                                   (((2, 2),), {"reps": (2, 1, 2)}),
                                   (((2, 3),), {"reps": (2,)}),
                                   (("py",), {"reps": (3,)}))),
    rule_text=("the cotangent summed over the copies",),
    xp=lambda node, args, scope: Expr(f"xp.tile({args[0].text}, {tuple(node.attrs['reps'])!r})"))


def _repeat_index(n, repeats):
    """Which input entry each output entry copies: np.repeat(arange(n), repeats)."""
    return np.repeat(np.arange(n), repeats)


def _add_back(g, idx, shape, axis, dtype):
    """The VJP of ``x.take(idx, axis)``: g added into zeros of ``shape`` at ``idx`` (each
    time an entry was read)."""
    zeros = np.zeros(shape, dtype)
    return index_add(zeros, g, idx, index=(_ALL,) * axis + (("array", 0),))


def _repeat_vjp(g, ans, x, repeats, axis):
    shape = _shape(x)
    if axis is None:  # np.repeat of the flattened input
        work, axis = (int(np.prod(shape, dtype=np.int64)),), 0
    else:
        work = shape
    n = work[axis]
    if isinstance(repeats, int):  # each entry's copies side by side: reshape, sum them
        g_shape = _shape(g)
        split = g_shape[:axis] + (n, repeats) + g_shape[axis + 1:]
        g = sum_(reshape(g, shape=split), axis=(axis + 1,), keepdims=False)
    else:
        g = _add_back(g, _repeat_index(n, repeats), work, axis, _dtype(g))
    return _to_shape(g, shape)


def _print_repeat(node, args):
    repeats = node.attrs["repeats"]
    text = str(repeats) if isinstance(repeats, int) else repr(list(repeats))
    axis = node.attrs["axis"]
    return Expr(f"np.repeat({args[0].text}, {text}" + (")" if axis is None else
                                                          f", axis={axis})"))


repeat = defop(
    "repeat", lambda x, repeats, axis: np.repeat(x, repeats, axis=axis), _print_repeat,
    vjp=(_repeat_vjp,), sympy=lambda x, repeats, axis: np.repeat(x, repeats, axis=axis),
    domain=Domain((REALS,), cases=((((3,),), {"repeats": 2, "axis": None}),
                                   (((2, 3),), {"repeats": 2, "axis": 1}),
                                   (((2, 3),), {"repeats": (1, 0, 2), "axis": 1}),
                                   (((2, 2),), {"repeats": (2, 1, 0, 1), "axis": None}),
                                   (("py",), {"repeats": 3, "axis": None}))),
    rule_text=("the cotangent summed over the copies of each entry",))


def _np_tile(A, reps):
    x = _operand(A)
    try:
        reps = tuple(int(r) for r in reps)
    except TypeError:
        reps = (int(reps),)
    if any(r < 0 for r in reps):
        raise ValueError("negative dimensions are not allowed")
    return tile(x, reps=reps)


def _np_repeat(a, repeats, axis=None):
    x = _operand(a)
    if _is_traced(repeats) and not repeats.is_constant:
        refuse("np.repeat with traced repeats has no gradient rule in gradgen",
               "the shape of the result would depend on the data")
    counts = np.asarray(_plain(repeats))
    if counts.dtype.kind not in "iub":
        raise TypeError(f"Cannot cast array data from {counts.dtype} to int64")
    if axis is not None:
        axis = normalize_axis_index(int(axis), _ndim(x))
    n = int(np.size(_value(x))) if axis is None else _shape(x)[axis]
    if counts.size == 1:
        counts = int(counts.reshape(()))
        if counts < 0:
            raise ValueError("repeats may not contain negative values.")
    else:
        if counts.ndim > 1 or counts.size != n:
            raise ValueError(f"operands could not be broadcast together with shape ({n},) "
                             f"({counts.size},)")
        if (counts < 0).any():
            raise ValueError("repeats may not contain negative values.")
        counts = tuple(int(c) for c in counts)
    return repeat(x, repeats=counts, axis=axis)


# --- roll ------------------------------------------------------------------------------------


def _neg_shift(shift):
    return -shift if isinstance(shift, int) else tuple(-s for s in shift)


def _print_roll(node, args):
    shift, axis = node.attrs["shift"], node.attrs["axis"]
    if axis is None:
        return Expr(f"np.roll({args[0].text}, {shift})")
    if len(axis) == 1:
        return Expr(f"np.roll({args[0].text}, {shift[0]}, axis={axis[0]})")
    return Expr(f"np.roll({args[0].text}, {shift!r}, axis={axis!r})")


def _roll_impl(x, shift, axis):
    return np.roll(x, shift, axis=axis)


roll = defop(
    "roll", _roll_impl, _print_roll,
    vjp=(lambda g, ans, x, shift, axis: roll(g, shift=_neg_shift(shift), axis=axis),),
    abstract=abstract.elementwise,
    sympy=_roll_impl,
    domain=Domain((REALS,), cases=((((5,),), {"shift": 2, "axis": None}),
                                   (((2, 3),), {"shift": (1, -1), "axis": (0, 1)}),
                                   (((2, 3),), {"shift": 4, "axis": None}),
                                   (((2, 3),), {"shift": (-2,), "axis": (1,)}))),
    rule_text=("the cotangent rolled back",))


def _np_roll(a, shift, axis=None):
    x = _operand(a)
    shift = np.asarray(_plain(shift), dtype=np.int64)
    if axis is None:  # np.roll of the flattened array, every shift added up
        return roll(x, shift=int(shift.sum()), axis=None)
    axes = normalize_axis_tuple(axis, _ndim(x), allow_duplicate=True)
    pairs = np.broadcast(shift, np.asarray(axes if isinstance(axis, tuple | list) else axes[0]))
    if pairs.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    by_axis: dict[int, int] = {}
    for s, ax in pairs:
        by_axis[int(ax)] = by_axis.get(int(ax), 0) + int(s)
    order = sorted(by_axis)
    return roll(x, shift=tuple(by_axis[a] for a in order), axis=tuple(order))


# --- pad ---------------------------------------------------------------------------------------

_GATHER_MODES = ("edge", "reflect", "symmetric", "wrap")


def _pad_impl(x, pad_width, mode, constant_values):
    if mode == "constant":
        return np.pad(x, pad_width, mode="constant", constant_values=constant_values)
    return np.pad(x, pad_width, mode=mode)


def _pad_vjp(g, ans, x, pad_width, mode, constant_values):
    shape = _shape(x)
    if mode == "constant":  # the interior
        out_shape = _shape(g)
        return _read(g, tuple(_slice(b, b + n, m) for (b, _), n, m
                              in zip(pad_width, shape, out_shape, strict=True)))
    # edge, reflect, symmetric, wrap: a read of x at np.pad(arange(n)) along each axis
    for axis in reversed(range(len(shape))):
        before, after = pad_width[axis]
        if before == 0 and after == 0:
            continue
        idx = np.pad(np.arange(shape[axis]), (before, after), mode=mode)
        zeros_shape = _shape(g)[:axis] + (shape[axis],) + _shape(g)[axis + 1:]
        g = _add_back(g, idx, zeros_shape, axis, _dtype(g))
    return g


def _pairs_text(pairs):
    """((1, 1), (1, 1)) as 1, ((1, 2), (1, 2)) as (1, 2), else the pairs."""
    if pairs and all(p == pairs[0] for p in pairs):
        b, a = pairs[0]
        return repr(b) if b == a else repr((b, a))
    return repr(tuple(pairs))


def _print_pad(node, args):
    attrs = node.attrs
    text = f"np.pad({args[0].text}, {_pairs_text(attrs['pad_width'])}"
    if attrs["mode"] != "constant":
        text += f', mode="{attrs["mode"]}"'
    elif any(v != 0 for pair in attrs["constant_values"] for v in pair):
        text += f", constant_values={_pairs_text(attrs['constant_values'])}"
    return Expr(text + ")")


def _xp_pad(node, args, scope):
    attrs = node.attrs
    values = {v for pair in attrs["constant_values"] or () for v in pair}
    if attrs["mode"] != "constant" or len(values) > 1:
        from ..dialects import refuse

        refuse(node, f"np.pad with mode={attrs['mode']!r} or different constant values per "
               "side (array_api_extra.pad has one constant)")
    fill = values.pop() if values else 0
    tail = f", constant_values={fill!r}" if fill else ""
    return Expr(f"xpx.pad({args[0].text}, {_pairs_text(attrs['pad_width'])}{tail})")


pad = defop(
    "pad", _pad_impl, _print_pad, vjp=(_pad_vjp,), sympy=_pad_impl,
    domain=Domain((REALS,), cases=(
        (((3,),), {"pad_width": ((1, 2),), "mode": "constant",
                   "constant_values": ((0.0, 0.0),)}),
        (((2, 3),), {"pad_width": ((1, 0), (0, 2)), "mode": "constant",
                     "constant_values": ((1.5, -1.0), (0.5, 0.0))}),
        (((2, 3),), {"pad_width": ((1, 1), (2, 0)), "mode": "edge", "constant_values": None}),
        (((4,),), {"pad_width": ((2, 3),), "mode": "reflect", "constant_values": None}),
        (((2, 2),), {"pad_width": ((0, 1), (1, 2)), "mode": "symmetric",
                     "constant_values": None}),
        (((3,),), {"pad_width": ((2, 4),), "mode": "wrap", "constant_values": None}))),
    rule_text=(("constant mode: the cotangent's interior; edge, reflect, symmetric, wrap: "
                "the cotangent added back to the entries each padded entry copies"),),
    xp=_xp_pad)


def _as_pairs(value, ndim, dtype):
    arr = np.asarray(value, dtype=dtype)
    return tuple(tuple(row) for row in np.broadcast_to(arr, (ndim, 2)).tolist())


def _np_pad(array, pad_width, mode="constant", **kwargs):
    x = _operand(array)
    nd = _ndim(x)
    if callable(mode) or mode not in ("constant", *_GATHER_MODES):
        refuse(f"np.pad with mode={getattr(mode, '__name__', mode)!r} has no gradient rule in "
               "gradgen", "modes with a rule: constant, edge, reflect, symmetric, wrap")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}}.get(mode, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {unknown}")
    if kwargs.get("reflect_type", "even") != "even":
        refuse("np.pad with reflect_type='odd' has no gradient rule in gradgen")
    if _is_traced(pad_width) and not pad_width.is_constant:
        refuse("np.pad with a traced pad_width has no gradient rule in gradgen",
               "the shape of the result would depend on the data")
    widths = _plain(pad_width)
    if isinstance(widths, dict):  # {axis: width or (before, after)}, NumPy >= 2.3
        seq = [(0, 0)] * nd
        for ax, width in widths.items():
            seq[ax] = (width, width) if isinstance(width, int) else tuple(width)
        widths = seq
    widths = np.asarray(widths)
    if widths.dtype.kind != "i":
        raise TypeError("`pad_width` must be of integral type.")
    pairs = tuple(tuple(int(v) for v in p) for p in _as_pairs(widths, nd, np.int64))
    if any(v < 0 for p in pairs for v in p):
        raise ValueError("index can't contain negative values")
    values = kwargs.get("constant_values", 0)
    if mode != "constant":
        return pad(x, pad_width=pairs, mode=mode, constant_values=None)
    if _has_live(values):
        if np.ndim(_value(values)) != 0 or isinstance(values, list | tuple):
            refuse("np.pad with traced constant_values other than one number has no gradient "
                   "rule in gradgen", "pad with zeros and add the padded region yourself")
        # x padded with zeros, plus c where the padding is: a constant mask times c
        mask = np.pad(np.zeros(_shape(x), _dtype(x)), pairs, constant_values=1)
        body = pad(x, pad_width=pairs, mode="constant", constant_values=((0.0, 0.0),) * nd)
        return body + mask * values
    return pad(x, pad_width=pairs, mode="constant",
               constant_values=_as_pairs(_plain(values), nd, np.float64))


def _has_live(x) -> bool:
    if isinstance(x, list | tuple):
        return any(_has_live(v) for v in x)
    return _is_traced(x) and not x.is_constant


# --- take_along_axis, its VJP add_along_axis, sort ---------------------------------------------


def _fancy(idx, axis, shape):
    """The index NumPy's take_along_axis builds: ``idx`` along ``axis``, aranges elsewhere."""
    nd = len(shape)
    return tuple(idx if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (nd - d - 1))
                 for d, n in enumerate(shape))


def _take_vjp(g, ans, x, idx, axis):
    if _is_permutation(idx, x, axis):  # from np.argsort along this axis: invert it
        return take_along_axis(g, BOUND[np.argsort](idx, axis=axis), axis=axis)
    return add_along_axis(np.zeros(_shape(x), _dtype(x)), g, idx, axis=axis)


def _is_permutation(idx, x, axis) -> bool:
    """Is ``idx`` np.argsort(..., axis=axis) of an array shaped like ``x``? Then every line
    along the axis is a permutation, whatever the data (a fact of the graph, not the data)."""
    if not _is_traced(idx) or idx.ref.node.op.name != "argsort":
        return False
    node = idx.ref.node
    sorted_axis = node.attrs.get("axis", -1)
    nd = len(_shape(x))
    if sorted_axis is None:
        return nd == 1 and _shape(idx) == _shape(x)
    return (_shape(idx) == _shape(x) and nd > 0
            and int(sorted_axis) % nd == axis and node.inputs[0].aval.shape == _shape(x))


def _print_take_along_axis(node, args):
    x_ref, idx_ref = node.inputs
    axis = node.attrs["axis"]
    nd = x_ref.aval.ndim
    order = idx_ref.node
    if (order.op.name == "argsort" and order.inputs[0] == x_ref
            and args[1].text.startswith("np.argsort(")):  # np.sort, as the user wrote it
        parts = [args[0].text] + ([] if axis == nd - 1 else [f"axis={axis}"])
        parts += [f"{k}={value_text(order.attrs[k])}" for k in ("kind", "stable")
                  if order.attrs.get(k) is not None]
        return Expr(f"np.sort({', '.join(parts)})")
    return Expr(f"np.take_along_axis({args[0].text}, {args[1].text}, axis={axis})")


class _FirstOnly(tuple):
    def __getitem__(self, i):
        return tuple.__getitem__(self, 0) if i == 0 else None


take_along_axis = defop(
    "take_along_axis", lambda x, idx, axis: np.take_along_axis(x, idx, axis=axis),
    _print_take_along_axis, vjp=_FirstOnly((_take_vjp,)),
    sympy=lambda x, idx, axis: np.take_along_axis(x, idx, axis=axis),
    domain=Domain((REALS,), cases=(
        (((4,), np.array([3, 0, 0, 2])), {"axis": 0}),
        (((3, 4), np.array([[0, 3], [1, 1], [2, 0]])), {"axis": 1}),
        (((3, 2), np.array([[2, 0]])), {"axis": 0}))),
    rule_text=(("the cotangent added back where each entry was taken from (a permutation "
                "from np.argsort: the cotangent read through the inverse permutation)"),))


def _add_along_axis_impl(base, v, idx, axis):
    out = np.array(base, dtype=np.result_type(base), copy=True)
    np.add.at(out, _fancy(idx, axis, out.shape), v)
    return out


def _print_add_along_axis(node, args, target):
    nd, axis = node.inputs[0].aval.ndim, node.attrs["axis"]
    shape = node.inputs[0].aval.shape
    parts = []
    for d in range(nd):
        if d == axis:
            parts.append(args[2].text)
        else:
            tail = nd - d - 1
            parts.append(f"np.arange({shape[d]})"
                         + (f"[:, {', '.join(['None'] * tail)}]" if tail else ""))
    index = parts[0] if nd == 1 else f"({', '.join(parts)})"
    return f"np.add.at({target}, {index}, {args[1].text})"


def _print_as_statement(node, args):
    raise AssertionError("add_along_axis is printed as a statement")


class _BaseAndValue(tuple):
    def __getitem__(self, i):
        return tuple.__getitem__(self, i) if i < 2 else None


# base + v added at idx along axis (np.add.at: repeated indices add up): take_along_axis's VJP.
add_along_axis = defop(
    "add_along_axis", _add_along_axis_impl, _print_as_statement,
    abstract=abstract.array_like_first,
    vjp=_BaseAndValue((lambda g, ans, base, v, idx, axis: g,
                       lambda g, ans, base, v, idx, axis: take_along_axis(g, idx, axis=axis))),
    sympy=_add_along_axis_impl,
    domain=Domain((REALS,), cases=(
        (((4,), (3,), np.array([0, 2, 0])), {"axis": 0}),
        (((2, 3), (2, 2), np.array([[0, 0], [2, 1]])), {"axis": 1}))),
    rule_text=("the cotangent", "the cotangent read where each value was added"),
    extra={"statement": _print_add_along_axis},
    xp="np.add.at along an axis (the gradient of np.take_along_axis and np.sort) has no "
       "array-API form in gradgen yet")


def _np_take_along_axis(arr, indices, axis=-1):
    x = _operand(arr)
    idx = indices if _is_traced(indices) else np.asarray(indices)
    if _dtype(idx).kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        if _ndim(idx) != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        x = _to_shape(x, (int(np.size(_value(x))),))
        axis = 0
    if _ndim(idx) != _ndim(x):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    return take_along_axis(x, idx, axis=normalize_axis_index(int(axis), _ndim(x)))


def _np_sort(a, axis=-1, kind=None, order=None, *, stable=None):
    if order is not None:
        refuse("np.sort with order= has no gradient rule in gradgen")
    x = _operand(a)
    if axis is None:
        x = _to_shape(x, (int(np.size(_value(x))),))
        axis = 0
    axis = normalize_axis_index(int(axis), _ndim(x))
    perm = BOUND[np.argsort](x, axis=axis, kind=kind, stable=stable)
    return take_along_axis(x, perm, axis=axis)


def _np_take(a, indices, axis=None, out=None, mode="raise"):
    _refuse_extra("np.take", out=out)
    x = _operand(a)
    if axis is None:
        x = _to_shape(x, (int(np.size(_value(x))),))
        axis = 0
    axis = normalize_axis_index(int(axis), _ndim(x))
    n = _shape(x)[axis]
    if not _is_traced(indices) or indices.is_constant:
        indices = np.asarray(_plain(indices))
        if indices.dtype.kind == "b":
            indices = indices.astype(np.intp)
        if mode == "wrap":
            indices = np.mod(indices, n)
        elif mode == "clip":
            indices = np.clip(indices, 0, n - 1)
        if indices.ndim == 0:
            indices = int(indices)
    elif _dtype(indices).kind == "b":  # NumPy takes entries 0 and 1, not a mask
        refuse("np.take with traced boolean indices has no gradient rule in gradgen",
               "index with integers, or use x[mask] to select by a mask")
    elif mode != "raise":
        refuse(f"np.take(..., mode={mode!r}) with traced indices has no gradient rule in "
               "gradgen", "use mode='raise' (the default)")
    template, arrays = normalize_index((slice(None),) * axis + (indices,))
    return getitem(x, *arrays, index=template)


# --- flips, rot90, diff ----------------------------------------------------------------------


def _flip(m, axis=None):
    x = _operand(m)
    nd = _ndim(x)
    axes = tuple(range(nd)) if axis is None else normalize_axis_tuple(axis, nd)
    if nd == 0:
        return cast(x, dtype=_dtype(x).name) if _is_py(x) else getitem(x, index=())
    if not axes:
        return x
    return _read(x, tuple(("slice", None, None, -1) if d in axes else _ALL for d in range(nd)))


def _fliplr(m):
    if _ndim(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return _flip(m, 1)


def _flipud(m):
    if _ndim(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return _flip(m, 0)


def _rot90(m, k=1, axes=(0, 1)):
    x = _operand(m)
    axes = tuple(axes)
    nd = _ndim(x)
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == nd:
        raise ValueError("Axes must be different.")
    if not all(-nd <= a < nd for a in axes):
        raise ValueError(f"Axes={axes} out of range for array of ndim={nd}.")
    k = int(k) % 4
    if k == 0:
        return getitem(x, index=(_ALL,))
    if k == 2:
        return _flip(x, axes)
    perm = list(range(nd))
    a0, a1 = axes[0] % nd, axes[1] % nd
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(_flip(x, a1), axes=tuple(perm))
    return _flip(transpose(x, axes=tuple(perm)), a1)


def _diff(a, n=1, axis=-1, prepend=_NO, append=_NO):
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    x = _operand(a)
    nd = _ndim(x)
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(int(axis), nd)
    combined = []
    for extra, at_end in ((prepend, False), (append, True)):
        if extra is _NO:
            continue
        extra = _operand(extra)
        if _ndim(extra) == 0:
            edge = list(_shape(x))
            edge[axis] = 1
            extra = broadcast_to(extra, shape=tuple(edge))
        combined.append((at_end, extra))
    if combined:
        parts = [e for end, e in combined if not end] + [x] + [e for end, e in combined if end]
        x = _join(parts, axis)
    later = (_ALL,) * axis + (("slice", 1, None, None),)
    earlier = (_ALL,) * axis + (("slice", None, -1, None),)
    op = ne if _dtype(x) == np.bool_ else sub
    for _ in range(int(n)):
        x = op(getitem(x, index=later), getitem(x, index=earlier))
    return x


# --- reshapes and transposes ------------------------------------------------------------------


def _squeeze(a, axis=None):
    x = _operand(a)
    dummy = np.broadcast_to(np.empty((), bool), _shape(x))
    return _to_shape(x, np.squeeze(dummy, axis=axis).shape)


def _expand_dims(a, axis):
    x = _operand(a)
    axis = axis if isinstance(axis, tuple | list) else (axis,)
    out_ndim = len(axis) + _ndim(x)
    axis = normalize_axis_tuple(axis, out_ndim)
    dims = iter(_shape(x))
    return _to_shape(x, [1 if d in axis else next(dims) for d in range(out_ndim)])


def _ravel(a, order="C"):
    if order not in ("C", "F"):
        refuse(f"np.ravel(..., order={order!r}) has no gradient rule in gradgen",
               "the order of a traced array's memory is not known; use order='C' or 'F'")
    x = _operand(a)
    if order == "F" and _ndim(x) > 1:  # the first index fastest: C order of the transpose
        x = _permuted(x, list(reversed(range(_ndim(x)))))
    return _to_shape(x, (int(np.size(_value(x))),))


def _swapaxes(a, axis1, axis2):
    x = _operand(a)
    nd = _ndim(x)
    a1, a2 = normalize_axis_index(int(axis1), nd), normalize_axis_index(int(axis2), nd)
    perm = list(range(nd))
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return _permuted(x, perm)


def _permuted(x, perm):
    perm = tuple(perm)
    if _is_py(x):
        return _to_shape(x, ())
    return transpose(x, axes=perm)


def _moveaxis(a, source, destination):
    x = _operand(a)
    nd = _ndim(x)
    source = normalize_axis_tuple(source, nd, "source")
    destination = normalize_axis_tuple(destination, nd, "destination")
    if len(source) != len(destination):
        raise ValueError("`source` and `destination` arguments must have the same number "
                         "of elements")
    order = [n for n in range(nd) if n not in source]
    for dest, src in sorted(zip(destination, source, strict=True)):
        order.insert(dest, src)
    return _permuted(x, order)


def _rollaxis(a, axis, start=0):
    x = _operand(a)
    n = _ndim(x)
    axis = normalize_axis_index(int(axis), n)
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    if axis < start:
        start -= 1
    if axis == start:
        return x
    axes = list(range(n))
    axes.remove(axis)
    axes.insert(start, axis)
    return _permuted(x, axes)


def _np_copy(a, order="K", subok=False):
    x = _operand(a)
    if _is_py(x):
        return reshape(x, shape=())
    return copy(x)


# --- how NumPy reaches these rows -------------------------------------------------------------

route(np.concatenate, _np_concatenate, "concatenate")
if hasattr(np, "concat"):
    route(np.concat, _np_concatenate, "concatenate", called="np.concat")
route(np.hstack, _stacker("hstack", 1, lambda xs: 0 if _ndim(xs[0]) == 1 else 1),
      "concatenate", "reshape")
route(np.vstack, _stacker("vstack", 2, lambda xs: 0), "concatenate", "reshape")
if hasattr(np, "row_stack"):
    route(np.row_stack, _stacker("row_stack", 2, lambda xs: 0), "concatenate", "reshape",
          called="np.row_stack")
route(np.dstack, _stacker("dstack", 3, lambda xs: 2), "concatenate", "reshape")
route(np.column_stack, _column_stack, "concatenate", "reshape")
route(np.append, _append, "concatenate", "reshape")
route(np.split, _np_split, "getitem")
route(np.array_split, _np_array_split, "getitem")
route(np.hsplit, _directional_split("hsplit", 1, lambda nd: 1 if nd > 1 else 0), "getitem")
route(np.vsplit, _directional_split("vsplit", 2, lambda nd: 0), "getitem")
route(np.dsplit, _directional_split("dsplit", 3, lambda nd: 2), "getitem")
route(np.broadcast_arrays, _broadcast_arrays, "broadcast_to")
route(np.meshgrid, _meshgrid, "reshape", "broadcast_to", "copy")
route(np.tile, _np_tile, "tile")
route(np.repeat, _np_repeat, "repeat")
route(np.roll, _np_roll, "roll")
route(np.pad, _np_pad, "pad")
route(np.take_along_axis, _np_take_along_axis, "take_along_axis")
route(np.sort, _np_sort, "argsort", "take_along_axis")
route(np.take, _np_take, "getitem")
route(np.flip, _flip, "getitem")
route(np.fliplr, _fliplr, "getitem")
route(np.flipud, _flipud, "getitem")
route(np.rot90, _rot90, "getitem", "transpose")
route(np.diff, _diff, "getitem", "sub")
route(np.squeeze, _squeeze, "reshape")
route(np.expand_dims, _expand_dims, "reshape")
route(np.ravel, _ravel, "reshape")
for _n in (1, 2, 3):
    route(getattr(np, f"atleast_{_n}d"), _atleast_nd(_n), "reshape")
route(np.swapaxes, _swapaxes, "transpose")
route(np.moveaxis, _moveaxis, "transpose")
route(np.rollaxis, _rollaxis, "transpose")
route(np.copy, _np_copy, "copy")


# --- NumPy 2 names and the array API's spellings ---------------------------------------------


def _permute_dims(a, axes=None):
    return _transpose(a, axes)


def _matrix_transpose(x):
    n = np.ndim(_value(x))
    if n < 2:
        raise ValueError("matrix_transpose needs an array of at least 2 dimensions")
    return transpose(x, axes=tuple(range(n - 2)) + (n - 1, n - 2))


def _unstack(x, axis=0):
    n = np.ndim(_value(x))
    axis = int(axis) % n
    full = ("slice", None, None, None)
    return tuple(getitem(x, index=(full,) * axis + (i,)) for i in range(_value(x).shape[axis]))


def _np_astype(x, dtype, copy=True, device=None):
    return x.astype(dtype, copy=copy) if hasattr(x, "astype") else np.astype(x, dtype)


route(np.permute_dims, _permute_dims, "transpose")
route(np.matrix_transpose, _matrix_transpose, "transpose")
route(np.linalg.matrix_transpose, _matrix_transpose, "transpose",
      called="np.linalg.matrix_transpose")
route(np.unstack, _unstack, "getitem")
route(np.astype, _np_astype, "cast")
