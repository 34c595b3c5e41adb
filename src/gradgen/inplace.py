"""In-place NumPy updates as new versions: ``a[i] = v``, ``a += b``, ``np.add.at``, ``out=``.

The graph stays SSA. A write binds a new node (``index_update(a, v)``, ``add(a, b)``) and the
Python object the user holds (the Tracer) now stands for it, so reads after the write see the
new version and the adjoint of the old version is zero where the write overwrote it. NumPy
arrays share memory with their views (``row = a[0]``, ``a.T``): a write into an array shows
in its live views, and a write into a view shows in its base, exactly as NumPy computes.
"""

from __future__ import annotations

import numpy as np

from .errors import GradgenError, UnsupportedOperation
from .ops import OPS
from .ops.arrays import _inverse_perm
from .ops.index import index_add, normalize_index, read, real_index, write
from .ops.registry import BOUND, route
from .source import current_loc
from .tracer import Tracer, shaped, tracer_value


def _refuse(what: str, hint: str | None = None):
    raise UnsupportedOperation(what, current_loc(), hint)


def assign(target: Tracer, index, value) -> None:
    """``target[index] = value``."""
    if not isinstance(shaped(target), np.ndarray):
        _refuse("item assignment into a traced scalar")
    if target.dtype.kind != "f" and isinstance(value, Tracer) and value.dtype.kind == "f" \
            and not value.is_constant:
        _refuse(f"writing a traced float into a {target.dtype} array truncates it, and its "
                "gradient would silently be zero",
                "make the array a float array, e.g. np.zeros(n) rather than np.zeros(n, int)")
    if _is_own_view(value, target, index):
        return  # `a[i] += v` already wrote the view `a[i]` back into `a`
    template, arrays = normalize_index(index)
    if isinstance(value, Tracer) and not value.is_constant and any(
            isinstance(a, Tracer) and not a.is_constant and a.dtype.kind in "iu" for a in arrays):
        _refuse("a[idx] = v with a traced integer index array has no gradient rule in gradgen "
                "(which written value survives a repeated index depends on the data)",
                "use np.where, or a constant index")
    region = np.shape(shaped(target)[real_index(template, [tracer_value(a) for a in arrays])])
    shape = np.shape(shaped(value))
    try:
        np.broadcast_to(np.empty(shape, np.int8), region)
    except ValueError:
        raise GradgenError(f"could not broadcast the value of shape {shape} into the "
                           f"indexed part of shape {region}", current_loc()) from None
    overwrite(target, write(target, index, value), fitted=True)


def add_at(target, index, value) -> None:
    """``np.add.at(target, index, value)``: every repeated index adds."""
    if not isinstance(target, Tracer):
        _refuse("np.add.at into a NumPy array that is not traced, with a traced value",
                "create the array inside the function (np.zeros(...)), so gradgen sees it")
    template, arrays = normalize_index(index)
    overwrite(target, index_add(target, value, *arrays, index=template), fitted=True)


def write_out(out, result, name: str):
    """``np.<ufunc>(..., out=a)``: the result written into ``a``, which is returned."""
    targets = out if isinstance(out, tuple) else (out,)
    if len(targets) != 1 or not isinstance(targets[0], Tracer):
        _refuse(f"np.{name}(..., out=...) into an array gradgen does not trace",
                "drop out= and use the returned value, or create the array inside the function")
    overwrite(targets[0], result)
    return targets[0]


def overwrite(target: Tracer, new, fitted: bool = False) -> None:
    """``target`` now holds ``new`` (cast and broadcast as NumPy writes into an array); the
    arrays that share its memory follow."""
    if not fitted:
        new = _fit(new, target)
    _refuse_aliased_argument(target)
    if target.base is not None and _layout_dependent(*target.base):
        _refuse_layout_dependent(target.base[1])
    _rebind(target, new)
    if target.base is not None:
        base, view_node = target.base
        overwrite(base, _written_back(base, view_node, target), fitted=True)
    _refresh_views(target)


def _layout_dependent(base: Tracer, view_node) -> bool:
    """Is ``view_node`` a reshape that NumPy makes a view or a copy depending on the memory
    layout of the array (C or Fortran order, strides)? Adding or dropping axes of length 1
    is always a view."""
    if view_node.op.name != "reshape":
        return False
    return [d for d in base.shape if d != 1] != [d for d in view_node.avals[0].shape if d != 1]


def _refuse_layout_dependent(view_node) -> None:
    _refuse("writing into an array that shares memory with a reshape of it: NumPy makes that "
            "reshape a view or a copy depending on the array's memory layout, so the write "
            "may or may not show in the other",
            "reshape after the write, or write into a .copy()")


def _refuse_aliased_argument(target: Tracer) -> None:
    """f(x, x) writing into its first argument: NumPy's second one would see the write."""
    first = (target.history or [target.ref.node])[0]
    if first.op.name != "input":
        return
    values = target._trace.values
    mine = values.get(first)
    for other in target._trace.inputs:
        if other is not first and isinstance(mine, np.ndarray) and np.may_share_memory(
                mine, values.get(other)):
            _refuse(f"the function writes into its argument {first.name or ''} while another "
                    f"argument ({other.name or 'a leaf'}) shares its memory",
                    "pass a copy (f(x, x.copy())) or write into a copy inside the function")


def _fit(new, target: Tracer):
    shape, dtype = target.shape, target.dtype
    new_shape = tuple(np.shape(shaped(new)))
    if new_shape != shape:
        if np.broadcast_shapes(new_shape, shape) != shape:
            raise ValueError(f"non-broadcastable output operand with shape {shape} doesn't "
                             f"match the broadcast shape {np.broadcast_shapes(new_shape, shape)}")
        new = OPS["broadcast_to"](new, shape=shape) if isinstance(new, Tracer) else \
            np.broadcast_to(new, shape)
    if np.result_type(shaped(new)) != dtype:
        new = OPS["cast"](new, dtype=dtype.name)
    if not isinstance(new, Tracer):
        new = target._trace.buffer(np.array(new, dtype=dtype))
    if isinstance(shaped(target), np.ndarray) and not isinstance(shaped(new), np.ndarray):
        new = write(target, (), new)  # a 0-d array stays an array (h += x, h = 0-d buffer)
    return new


def _rebind(target: Tracer, new: Tracer) -> None:
    node = new.ref.node
    if node.name is None and target.ref.node.name is not None and node.op.name != "const":
        node.name = target.ref.node.name  # h[t] = ... makes a new version of h
    if target.history is None:
        target.history = []
    target.history.append(target.ref.node)  # the naming observer names every version
    target.ref, target.value = new.ref, new._value  # pending stays pending


def _written_back(base: Tracer, view_node, view: Tracer):
    """The new version of ``base`` after its view ``view`` (made by ``view_node``) changed."""
    op = view_node.op.name
    if op == "getitem" and len(view_node.inputs) == 1:
        return OPS["index_update"](base, view, index=view_node.attrs["index"])
    if op == "reshape":
        return OPS["reshape"](view, shape=base.shape)
    if op == "transpose":
        return OPS["transpose"](view, axes=_inverse_perm(view_node.attrs.get("axes")))
    what = "a read-only view" if view_node.op.extra.get("view") == "readonly" else \
        f"a view made by {op}"
    _refuse(f"writing into {what} of a traced array",
            "write into a copy (.copy()) or into the array itself")


def _refresh_views(target: Tracer) -> None:
    """Every live view of ``target`` reads its new version (``row = a[0]; a[0] = 5``)."""
    if not target.views:
        return
    current, target.views = target.views, []
    live = []
    for ref in current:
        view = ref()
        if view is None or view.base is None or view.base[0] is not target:
            continue
        live.append(ref)
        view_node = view.base[1]
        if _layout_dependent(target, view_node):
            _refuse_layout_dependent(view_node)
        if view_node.op.name == "getitem":
            fresh = read(target, real_index(view_node.attrs["index"]))
        else:
            fresh = view_node.op(target, **view_node.attrs)
        view.ref, view.value = fresh.ref, fresh._value
        _refresh_views(view)
    target.views = live  # the temporaries made above were registered too; they are gone


def _is_own_view(value, target: Tracer, index) -> bool:
    """``a[i] += v``: Python reads ``a[i]``, adds in place (writing the view back into
    ``a``), then assigns it to ``a[i]`` again, which changes nothing."""
    if not isinstance(value, Tracer) or value.base is None or value.base[0] is not target:
        return False
    view_node = value.base[1]
    if view_node.op.name != "getitem" or len(view_node.inputs) != 1:
        return False
    template, arrays = normalize_index(index)
    return not arrays and template == view_node.attrs["index"]


def put_along_axis(arr, indices, values, axis):
    """``np.put_along_axis(arr, indices, values, axis)``: ``arr[index] = values`` with the
    index NumPy builds from ``indices`` (one along ``axis``, aranges along the others)."""
    if not isinstance(arr, Tracer):
        _refuse("np.put_along_axis into a NumPy array that is not traced, with a traced value",
                "create the array inside the function (np.zeros(...)), so gradgen sees it")
    shape = arr.shape
    if axis is None:
        _refuse("np.put_along_axis with axis=None has no gradient rule in gradgen",
                "reshape the array to 1-D first")
    axis = int(axis) % len(shape)
    if np.ndim(tracer_value(indices)) != len(shape):
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    index = []
    for d, n in enumerate(shape):
        if d == axis:
            index.append(indices)
        else:
            fan = [1] * len(shape)
            fan[d] = n
            index.append(np.arange(n).reshape(fan))
    assign(arr, tuple(index), values)


route(np.put_along_axis, put_along_axis, "index_update")
# The tracer's writing methods (x[i] = v, x += y, x.fill, x.sort, np.add.at, out=) reach
# these through the table: the tracer sits below this module, which builds on the ops.
BOUND["setitem"] = assign
BOUND["overwrite"] = overwrite
BOUND["add.at"] = add_at
BOUND["out="] = write_out
