"""Indexing: reads (``x[i]``), functional writes (``a[i] = v`` as a new version of ``a``),
scatter-adds (their VJPs), and np.stack.

An index is a hashable template plus index arrays. Template items: an int, None, "...",
("slice", start, stop, step), or ("array", k) for the k-th index array. Index arrays (integer
arrays and lists, boolean masks, traced or constant) are *inputs* of the node, never baked
into attributes: a constant one prints as a literal (or a module constant), a traced one as
its variable, so the emitted module indexes with whatever the caller's data selects.
"""

from __future__ import annotations

import numpy as np

from .. import abstract
from ..errors import UnsupportedOperation
from ..ir import Node
from ..source import current_loc
from ..tracer import Tracer, _register_view, shaped
from .arrays import broadcast_to
from .core import cast
from .registry import BOUND, PREC_ATOM, Domain, Expr, defop, route

REALS = (-2.0, 2.0)


def normalize_index(index, ndim: int | None = None) -> tuple[tuple, list]:
    """A NumPy index as (template, index arrays); see the module docstring."""
    items = index if isinstance(index, tuple) else (index,)
    template, arrays = [], []
    for item in items:
        if item is None:
            template.append(None)
        elif item is Ellipsis:
            template.append("...")
        elif isinstance(item, slice):
            template.append(("slice", _int_or_none(item.start), _int_or_none(item.stop),
                             _int_or_none(item.step)))
        elif isinstance(item, bool | np.bool_):
            raise UnsupportedOperation(
                "indexing a traced array with a Python bool has no gradient rule in gradgen",
                current_loc(), "index with a boolean array of the same shape instead")
        elif isinstance(item, int | np.integer):
            template.append(int(item))
        elif isinstance(item, Tracer) and item.shape == () and item.dtype.kind in "iu":
            template.append(item.__index__())  # a traced int: a guard on its value
        else:
            array = _index_array(item)
            template.append(("array", len(arrays)))
            arrays.append(array)
    return tuple(template), arrays


def _index_array(item):
    if isinstance(item, Tracer):
        if item.dtype.kind not in "iub":
            raise UnsupportedOperation(
                f"indexing with a traced {item.dtype} array: indices must be integers or "
                "booleans", current_loc())
        return item
    array = np.asarray(item)
    if array.dtype.kind not in "iub" or (array.size == 0 and array.dtype.kind == "f"):
        if array.size == 0:
            return array.astype(np.intp)
        raise UnsupportedOperation(
            f"indexing with a {array.dtype} array: indices must be integers or booleans",
            current_loc())
    return array


def _int_or_none(value):
    # a traced int becomes concrete through __index__, which records a guard on its value
    return None if value is None else int(value)


def is_basic(index: tuple) -> bool:
    return not any(isinstance(item, tuple) and item[0] == "array" for item in index)


def real_index(index: tuple, arrays=()):
    parts = []
    for item in index:
        if isinstance(item, tuple):
            parts.append(arrays[item[1]] if item[0] == "array" else slice(*item[1:]))
        elif item == "...":
            parts.append(Ellipsis)
        else:
            parts.append(item)
    return tuple(parts)


def index_text(index: tuple, array_texts=()) -> str:
    parts = []
    for item in index:
        if item is None:
            parts.append("None")
        elif item == "...":
            parts.append("...")
        elif isinstance(item, tuple) and item[0] == "array":
            parts.append(array_texts[item[1]])
        elif isinstance(item, tuple):
            _, start, stop, step = item
            text = f"{'' if start is None else start}:{'' if stop is None else stop}"
            parts.append(text + (f":{step}" if step is not None else ""))
        else:
            parts.append(str(item))
    return ", ".join(parts) if parts else "()"


def _subscript(node, args, first: int) -> str:
    texts = []
    for ref, arg in zip(node.inputs[first:], args[first:], strict=True):
        value = ref.node.attrs.get("value") if ref.node.op.name == "const" else None
        small_list = (isinstance(value, np.ndarray) and value.ndim == 1 and value.size <= 8
                      and value.dtype.kind in "iu"
                      and not (value.size > 2 and (value == np.arange(value.size)).all()))
        texts.append(repr(value.tolist()) if small_list else arg.text)  # x[[0, 2]], as written
    return index_text(node.attrs["index"], texts)


def _value(x):  # for shape, dtype and kind questions only
    return shaped(x)


def _zeros_like(x):
    value = _value(x)
    return np.zeros(np.shape(value), np.result_type(value))


# --- reading: x[index] -----------------------------------------------------------------------


def _print_getitem(node, args):
    return Expr(f"{args[0].at(PREC_ATOM - 1)}[{_subscript(node, args, 1)}]", PREC_ATOM - 1)


def _xp_subscript(node, args, scope, first: int) -> str:
    """The index with small constant index arrays written as ``xp.asarray([0, 2])``: JAX
    refuses a list as an index, and the library's default integer is right for indexing."""
    texts = [_xp_index_array(ref, arg)
             for ref, arg in zip(node.inputs[first:], args[first:], strict=True)]
    return index_text(node.attrs["index"], texts)


def _xp_index_array(ref, arg) -> str:
    value = ref.node.attrs.get("value") if ref.node.op.name == "const" else None
    small = isinstance(value, np.ndarray) and value.ndim == 1 and value.size <= 8
    return f"xp.asarray({value.tolist()!r})" if small else arg.text


def _xp_getitem(node, args, scope):
    return Expr(f"{args[0].at(PREC_ATOM - 1)}[{_xp_subscript(node, args, scope, 1)}]",
                PREC_ATOM - 1)


def _getitem_vjp(g, ans, x, *arrays, index):
    if is_basic(index):
        return scatter(g, shape=np.shape(_value(x)), dtype=np.result_type(_value(x)).name,
                       index=index)
    # advanced indexing may read an element more than once: its cotangents add up
    return index_add(_zeros_like(x), g, *arrays, index=index)


def _getitem_impl(x, *arrays, index):
    return x[real_index(index, arrays)]


def _getitem_abstract(op, x, *arrays, index):
    """The read itself on stand-ins (a view, or a copy the size of the result), unless a
    boolean mask is not known: then the result's shape is not known either."""
    if any(a.dtype == np.bool_ and abstract.is_stand_in(a) for a in arrays):
        return None
    return _getitem_impl(x, *arrays, index=index)


_INDEX_CASES = (
    (((4,),), {"index": (1,)}),
    (((3, 4),), {"index": (("slice", 1, 3, None),)}),
    (((3, 4),), {"index": (("slice", None, None, None), 2)}),
    (((2, 3, 4),), {"index": ("...", ("slice", None, None, 2))}),
    (((3,),), {"index": (None, ("slice", 0, 2, None))}),
    (((4,), np.array([0, 2, 0, 3])), {"index": (("array", 0),)}),  # a repeated index adds
    (((3, 4), np.array([[True, False, True, False]] * 3)), {"index": (("array", 0),)}),
    (((3, 4), np.array([2, 0])), {"index": (("slice", None, None, None), ("array", 0))}),
)


def _no_rule(*_, **__):
    return None


class _FirstInputOnly(tuple):
    """The VJP of input 0; index arrays (inputs 1...) get none."""

    def __getitem__(self, i):
        return tuple.__getitem__(self, 0) if i == 0 else None


getitem = defop(
    "getitem", _getitem_impl, _print_getitem,
    vjp=_FirstInputOnly((_getitem_vjp,)),
    sympy=_getitem_impl,
    domain=Domain((REALS,), cases=_INDEX_CASES),
    rule_text=("the cotangent placed back at the index (added where it repeats), zeros elsewhere",),
    extra={"view": True},  # basic indexing: a view of x (advanced indexing copies)
    abstract=_getitem_abstract, xp=_xp_getitem)


# --- the VJP of a basic read: zeros with the cotangent placed --------------------------------


def _scatter_value(g, shape, dtype, index):
    out = np.zeros(shape, dtype)
    out[real_index(index)] = g
    return out


def _print_scatter(node, args):
    shape, dtype = node.attrs["shape"], node.attrs["dtype"]
    return Expr(f"_scatter({args[0].text}, {shape!r}, np.{dtype}, "
                f"np.index_exp[{index_text(node.attrs['index'])}])")


# The helper the emitter adds to a module that uses scatter: zeros with values placed.
SCATTER_HELPER = '''def _scatter(values, shape, dtype, index):
    """Zeros of the given shape with values placed at index: the VJP of x[index]."""
    out = np.zeros(shape, dtype)
    out[index] = values
    return out'''

def _xp_scatter(node, args, scope):
    index, values, shape = node.attrs["index"], args[0].text, node.inputs[0].aval.shape
    if None in index and "..." not in index:  # x[:, None]: the new axis is not in x
        kept, dims = [], iter(shape)
        for item in index:
            if item is None:
                next(dims)
            elif not isinstance(item, int):
                kept.append(next(dims))
        shape = (*kept, *dims)
        values = f"xp.reshape({values}, {shape!r})"
        index = tuple(item for item in index if item is not None)
        if not index:
            return Expr(values)
    pads = _slice_padding(index, node.attrs["shape"])
    if pads is not None and shape == tuple(
            dim - before - after for dim, (before, after) in zip(node.attrs["shape"], pads,
                                                                  strict=True)):
        # zeros around a block: a pad, which every library (and XLA) does without a scatter
        width = repr(pads[0]) if len(pads) == 1 else repr(tuple(pads))
        return Expr(f"xpx.pad({values}, {width})")
    zeros = scope.allocate("zeros", node.attrs["shape"], node.attrs["dtype"])
    return Expr(f"xpx.at({zeros})[{index_text(index)}].set({values})")


def _slice_padding(index, shape):
    """For an index of unit-step slices only, the (before, after) zeros per axis around it."""
    if len(index) > len(shape) or not all(
            isinstance(item, tuple) and item[0] == "slice" and item[3] in (None, 1)
            for item in index):
        return None
    pads = []
    for axis, dim in enumerate(shape):
        if axis >= len(index):
            pads.append((0, 0))
            continue
        start, stop, _ = slice(index[axis][1], index[axis][2]).indices(dim)
        pads.append((start, dim - max(stop, start)))
    return pads


scatter = defop(
    "scatter", _scatter_value, _print_scatter,
    vjp=(lambda g, ans, v, shape, dtype, index: getitem(g, index=index),),
    sympy=lambda v, shape, dtype, index: _sympy_scatter(v, shape, index),
    domain=Domain((REALS,), cases=((((2,),), {"shape": (4,), "dtype": "float64",
                                              "index": (("slice", 1, 3, None),)}),
                                   (((),), {"shape": (3, 2), "dtype": "float64",
                                            "index": (1, 0)}))),
    rule_text=("the cotangent at the index",),
    abstract=lambda op, v, shape, dtype, index: abstract.make(shape, np.dtype(dtype), "array"),
    xp=_xp_scatter)


def _sympy_scatter(v, shape, index):
    out = np.zeros(shape, dtype=object)
    out[real_index(index)] = v
    return out


# --- writing: a[index] = v and a[index] += v as new versions of a ----------------------------


def _update_impl(x, v, *arrays, index):
    out = np.array(x, dtype=np.result_type(x), copy=True)
    out[real_index(index, arrays)] = v
    return out


def _add_at_impl(x, v, *arrays, index):
    out = np.array(x, dtype=np.result_type(x), copy=True)
    np.add.at(out, real_index(index, arrays), v)
    return out


def _written_once(index, arrays, x_shape) -> np.ndarray | None:
    """For ``a[index] = v`` with an index that hits an element twice, a 0/1 mask over the
    indexed shape: 1 where the written value survives (NumPy keeps the last write)."""
    if is_basic(index) or not all(isinstance(a, np.ndarray) for a in arrays):
        return None
    positions = np.arange(int(np.prod(x_shape))).reshape(x_shape)
    hit = positions[real_index(index, arrays)]
    if np.unique(hit).size == hit.size:
        return None
    last = np.zeros(hit.shape, bool)
    seen = set()
    for k in reversed(range(hit.size)):
        flat = int(hit.flat[k])
        if flat not in seen:
            seen.add(flat)
            last.flat[k] = True
    return last


def _update_vjp_x(g, ans, x, v, *arrays, index):
    return index_update(g, 0.0, *arrays, index=index)


def _update_vjp_v(g, ans, x, v, *arrays, index):
    if any(isinstance(a, Tracer) and a.dtype.kind in "iu" for a in arrays):
        raise UnsupportedOperation(
            "a[idx] = v with a traced integer index array has no gradient rule in gradgen "
            "(which written value survives a repeated index depends on the data)",
            current_loc(), "use np.where, or a constant index")
    part = getitem(g, *arrays, index=index)
    survives = _written_once(index, arrays, np.shape(_value(x)))
    return part if survives is None else part * survives


def _add_at_vjp_v(g, ans, x, v, *arrays, index):
    return getitem(g, *arrays, index=index)


class _ValueFirst(tuple):
    """Rules for (x, v, *index arrays): index arrays get none."""

    def __getitem__(self, i):
        return tuple.__getitem__(self, i) if i < 2 else None


def _print_update(symbol):
    def print_statement(node, args, target):
        return f"{target}[{_subscript(node, args, 2)}] {symbol} {args[1].text}"

    return print_statement


def _print_add_at(node, args, target):
    if is_basic(node.attrs["index"]):  # a basic index never repeats an element
        if args[1].neg is not None:  # a += -v is a -= v, bit for bit
            return f"{target}[{_subscript(node, args, 2)}] -= {args[1].neg.text}"
        return _print_update("+=")(node, args, target)
    index = _subscript(node, args, 2)
    if len(node.attrs["index"]) != 1:
        index = f"np.index_exp[{index}]"
    return f"np.add.at({target}, {index}, {args[1].text})"


def _xp_update(method):
    """``a = xpx.at(a)[i].set(v)``: a new array, written in place only where the library
    allows it and the old version is the module's own dead buffer (``fresh``)."""

    def print_update(node, args, scope, old, fresh):
        index = node.attrs["index"]
        if method == "add" and not is_basic(index) and not _hits_once(node):
            if node.inputs[1].aval.shape != (shape := _indexed_shape(node)):
                # a number fold took out of its broadcast: the one-hot sums want the vector
                args = [args[0], Expr(f"xp.broadcast_to({args[1].text}, {shape!r})"),
                        *args[2:]]
            return f"{old.text} + {_xp_one_hot_sum(node, args, scope)}"
        block = _block_padding(node)
        if block is not None:  # a block of zeros around v: a pad, which XLA and Dask fuse
            if method == "add":
                return f"{old.text} + xpx.pad({args[1].text}, {block})"
            if _is_zeros(node.inputs[0].node):
                return f"xpx.pad({args[1].text}, {block})"
        copy = "" if fresh else ", copy=True"
        subscript = _xp_subscript(node, args, scope, 2)
        return f"xpx.at({old.text})[{subscript}].{method}({args[1].text}{copy})"

    print_update.pads_zeros = lambda node: (  # the zeros buffer need not be allocated first
        method == "set" and _block_padding(node) is not None and _is_zeros(node.inputs[0].node))
    return print_update


def _indexed_shape(node) -> tuple:
    """The shape of ``a[index]`` for the write ``node`` (what its value broadcasts to)."""
    arrays = [np.zeros(ref.aval.shape, ref.aval.dtype) for ref in node.inputs[2:]]
    return np.empty(node.aval.shape)[real_index(node.attrs["index"], arrays)].shape


def _block_padding(node) -> str | None:
    """``((before, after), ...)`` when ``a[index] = v`` writes a whole unit-step block."""
    shape = node.aval.shape
    pads = _slice_padding(node.attrs["index"], shape)
    if pads is None or len(node.inputs) != 2 or node.inputs[1].aval.shape != tuple(
            dim - before - after for dim, (before, after) in zip(shape, pads, strict=True)):
        return None
    return repr(pads[0]) if len(pads) == 1 else repr(tuple(pads))


def _is_zeros(node) -> bool:
    value = node.attrs.get("value") if node.op.name == "const" else None
    return isinstance(value, np.ndarray) and value.size > 0 and not value.any()


def _hits_once(node) -> bool:
    """Does a constant advanced index reach each element at most once? (array_api_extra's
    ``add`` adds once per element, like ``a[i] += v``, not like ``np.add.at``.)"""
    arrays = []
    for ref in node.inputs[2:]:
        if ref.node.op.name != "const":
            return False
        arrays.append(ref.node.attrs["value"])
    shape = node.aval.shape
    positions = np.arange(int(np.prod(shape))).reshape(shape)
    hit = positions[real_index(node.attrs["index"], arrays)]
    return np.unique(hit).size == hit.size


def _xp_one_hot_sum(node, args, scope) -> str:
    """``np.add.at(x, (:, ..., idx), v)`` where ``idx`` may repeat: ``v`` contracted with the
    one-hot matrix ``idx == arange(n)``, so every repeat adds (standard operations only)."""
    index = node.attrs["index"]
    if index == (("array", 0), ("array", 1)):
        return _xp_one_hot_rows(node, args, scope)
    axis = len(index) - 1
    full = ("slice", None, None, None)
    idx_ref = node.inputs[2] if len(node.inputs) == 3 else None
    x_shape, v_shape = node.aval.shape, _indexed_shape(node)  # (the value broadcast to it)
    if (idx_ref is None or index[-1] != ("array", 0) or any(i != full for i in index[:-1])
            or idx_ref.aval.ndim != 1 or idx_ref.aval.dtype.kind not in "iu"
            or v_shape != x_shape[:axis] + idx_ref.aval.shape + x_shape[axis + 1:]):
        refuse_repeats(node)
    m, n = idx_ref.aval.shape[0], x_shape[axis]
    idx = _xp_index_array(idx_ref, args[2])
    hits = f"xp.reshape({idx}, ({m}, 1)) == xp.arange({n}, {scope.device()})"
    one_hot = f"xp.astype({hits}, {scope.dtype(node.aval.dtype)})"
    if axis == 0:
        return f"xp.tensordot({one_hot}, {args[1].text}, axes=((0,), (0,)))"
    summed = f"xp.tensordot({args[1].text}, {one_hot}, axes=(({axis},), (0,)))"
    if axis == len(x_shape) - 1:
        return summed
    order = (*range(axis), len(x_shape) - 1, *range(axis, len(x_shape) - 1))
    return f"xp.permute_dims({summed}, {order!r})"


def _xp_one_hot_rows(node, args, scope) -> str:
    """``np.add.at(x, (arange(n), j), v)``, the gradient of ``logp[np.arange(n), y]``: one
    element per row, so row i gets ``v[i]`` at column ``j[i]`` (a one-hot mask)."""
    rows, cols = node.inputs[2], node.inputs[3]
    shape = node.aval.shape
    value = rows.node.attrs.get("value") if rows.node.op.name == "const" else None
    if (len(shape) != 2 or value is None or value.shape != (shape[0],)
            or not (value == np.arange(shape[0])).all() or cols.aval.shape != (shape[0],)
            or _indexed_shape(node) != (shape[0],)):
        refuse_repeats(node)
    n, m = shape
    columns = f"xp.reshape({_xp_index_array(cols, args[3])}, ({n}, 1))"
    hits = f"{columns} == xp.arange({m}, {scope.device()})"
    one_hot = f"xp.astype({hits}, {scope.dtype(node.aval.dtype)})"
    return f"{one_hot} * xp.reshape({args[1].text}, ({n}, 1))"


def refuse_repeats(node):
    from ..dialects import refuse

    refuse(node, "a scatter-add whose index may repeat an element (np.add.at, the gradient "
           "of x[idx] with a repeated or traced idx) has no array-API form in gradgen yet")


def _print_as_statement(node, args):
    raise AssertionError("index updates are printed as statements")


_UPDATE_CASES = (
    (((4,), ()), {"index": (1,)}),
    (((3, 4), (4,)), {"index": (("slice", 1, 3, None),)}),
    (((3, 4), (3,)), {"index": (("slice", None, None, None), 2)}),
    (((5,), (3,), np.array([0, 3, 0])), {"index": (("array", 0),)}),  # 0 written twice
    (((2, 3), (), np.array([[True, False, True], [False, True, False]])),
     {"index": (("array", 0),)}),
)

# a[index] = v, as a new array: the old a where the index does not reach, v where it does.
index_update = defop(
    "index_update", _update_impl, _print_as_statement,
    vjp=_ValueFirst((_update_vjp_x, _update_vjp_v)),
    sympy=_update_impl, domain=Domain((REALS,), cases=_UPDATE_CASES),
    rule_text=("the cotangent, zeroed where the write overwrote the old value",
               "the cotangent at the index (of the last write where an index repeats)"),
    extra={"statement": _print_update("="), "vjp_order": (1, 0), "deferred_vjp": (0,)},
    abstract=abstract.array_like_first,
    xp=_xp_update("set"))

# a[index] += v with every repeated index adding (np.add.at): the VJP of an advanced read.
index_add = defop(
    "index_add", _add_at_impl, _print_as_statement,
    vjp=_ValueFirst((lambda g, ans, x, v, *arrays, index: g, _add_at_vjp_v)),
    sympy=_add_at_impl, domain=Domain((REALS,), cases=_UPDATE_CASES),
    rule_text=("the cotangent", "the cotangent at the index (each time it is reached)"),
    extra={"statement": _print_add_at, "vjp_order": (1, 0)},
    abstract=abstract.array_like_first, xp=_xp_update("add"))


# --- np.stack --------------------------------------------------------------------------------


def _stack_vjp(i):
    def rule(g, ans, *xs, axis):
        index = (("slice", None, None, None),) * axis + (i,)
        return getitem(g, index=index)

    return rule


def _print_stack(node, args):
    axis = node.attrs["axis"]
    items = ", ".join(a.text for a in args)
    if not axis:  # the same array as np.stack([...]), two to three times faster for many rows
        return Expr(f"np.array([{items}])")
    return Expr(f"np.stack([{items}], axis={axis})")


def _stack_impl(*xs, axis=0):
    return np.stack(xs, axis=axis)


class _StackRules(tuple):
    """One VJP rule per stacked input, however many there are."""

    def __getitem__(self, i):
        return _stack_vjp(i)


def _stack_abstract(op, *xs, axis):
    shape = np.shape(xs[0])
    found = abstract.result_kind(op, xs, {"axis": axis})
    if found is None or any(np.shape(x) != shape for x in xs):
        return None
    axis = axis % (len(shape) + 1)
    return abstract.make(shape[:axis] + (len(xs),) + shape[axis:], *found)


stack = defop(
    "stack", _stack_impl, _print_stack, vjp=_StackRules((None,)),
    sympy=lambda *xs, axis=0: np.stack(xs, axis=axis),
    domain=Domain((REALS, REALS), cases=((((3,), (3,)), {"axis": 0}),
                                         (((2, 3), (2, 3)), {"axis": 1}))),
    rule_text=("input i gets the cotangent's slice i",),
    abstract=_stack_abstract,
    xp=lambda node, args, scope: Expr(
        f"xp.stack([{', '.join(a.text for a in args)}]"
        + (f", axis={node.attrs['axis']})" if node.attrs["axis"] else ")")))


def _np_stack(arrays, axis=0, out=None, **kw):
    if out is not None or kw:
        raise UnsupportedOperation("np.stack with out= or dtype= has no gradient rule in gradgen",
                                   current_loc())
    arrays = list(arrays)
    ndim = np.ndim(_value(arrays[0])) + 1
    return stack(*arrays, axis=int(axis) % ndim)


# --- how user code reaches these rows --------------------------------------------------------


def read(x, index):
    """``x[index]``. A traced boolean mask selects a data-dependent number of elements, so
    the traced count becomes a guard (the shapes downstream were traced for that count)."""
    template, arrays = normalize_index(index)
    for array in arrays:
        if isinstance(array, Tracer) and array.dtype.kind == "b" and not array.is_constant:
            count = _count_true(array)
            if not (count == int(np.count_nonzero(array.value))):  # records the guard
                raise AssertionError("unreachable")
    if not arrays and isinstance(x, Tracer):
        written = _read_through(x, template)
        if written is not None:
            return written
    return getitem(x, *arrays, index=template)


def _read_through(x, template):
    """``x[t]`` right after ``x[t] = v`` is ``v`` itself (``h[t - 1]`` in a loop that fills
    ``h``): the gradient then flows straight from the reader to ``v``, and the old version of
    ``h`` is read only by the next write, so the module can fill one buffer in place."""
    node = x.ref.node
    if node.op.name != "index_update" or len(node.inputs) != 2 or node.attrs["index"] != template:
        return None
    expected = shaped(x)[real_index(template)]
    v = x._trace.tracer(node.inputs[1])  # its value may be pending: only shapes are asked
    if np.shape(shaped(v)) != np.shape(expected):
        v = broadcast_to(v, shape=tuple(np.shape(expected)))
    if np.result_type(shaped(v)) != np.result_type(expected) or v.aval.py is not None:
        v = cast(v, dtype=np.result_type(expected).name)
    if not isinstance(shaped(v), np.ndarray):
        return v  # a number: nothing can write into it later
    view = Tracer(x._trace, v.ref, v._value)
    # a view of x as far as later writes go (NumPy's x[t] shares x's memory)
    _register_view(x, view, Node(getitem, (x.ref,), {"index": template}, (v.aval,)), force=True)
    return view


def write(x, index, v, accumulate: bool = False):
    """``x[index] = v`` (or ``np.add.at(x, index, v)``) as a new version of ``x``."""
    template, arrays = normalize_index(index)
    op = index_add if accumulate else index_update
    if isinstance(v, Tracer):
        v._trace.keep(v)  # x[t] read back right after the write is v (_read_through)
    return op(x, v, *arrays, index=template)


def _count_true(mask):
    return BOUND[np.count_nonzero](mask)  # the reduce family's row, looked up when needed


route("getitem", read, "getitem", called="x[i]")
route(np.stack, _np_stack, "stack")
