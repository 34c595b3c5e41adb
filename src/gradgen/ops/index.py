"""Indexing and stacking: basic NumPy indexing, its VJP (a scatter into zeros), np.stack."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOperation
from ..source import current_loc
from .registry import BOUND, PREC_ATOM, Domain, Expr, defop

REALS = (-2.0, 2.0)


def normalize_index(index, ndim: int) -> tuple:
    """A basic index as a hashable tuple: ints, ('slice', start, stop, step), None, '...'.
    Anything else (arrays, lists, booleans) is advanced indexing, which has no rule yet."""
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for item in items:
        if item is None:
            out.append(None)
        elif item is Ellipsis:
            out.append("...")
        elif isinstance(item, slice):
            out.append(("slice", _int_or_none(item.start), _int_or_none(item.stop),
                        _int_or_none(item.step)))
        elif isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_):
            out.append(int(item))
        else:
            what = type(item).__name__
            raise UnsupportedOperation(
                f"indexing a traced array with a {what} (advanced indexing) has no gradient "
                "rule in gradgen", current_loc(), "use integers and slices")
    return tuple(out)


def _int_or_none(value):
    # a traced int becomes concrete through __index__, which records a guard on its value
    return None if value is None else int(value)


def real_index(index: tuple):
    parts = []
    for item in index:
        if isinstance(item, tuple):
            parts.append(slice(item[1], item[2], item[3]))
        elif item == "...":
            parts.append(Ellipsis)
        else:
            parts.append(item)
    return tuple(parts)


def index_text(index: tuple) -> str:
    parts = []
    for item in index:
        if item is None:
            parts.append("None")
        elif item == "...":
            parts.append("...")
        elif isinstance(item, tuple):
            _, start, stop, step = item
            text = f"{'' if start is None else start}:{'' if stop is None else stop}"
            parts.append(text + (f":{step}" if step is not None else ""))
        else:
            parts.append(str(item))
    return ", ".join(parts) if parts else "()"


def _print_getitem(node, args):
    return Expr(f"{args[0].at(PREC_ATOM - 1)}[{index_text(node.attrs['index'])}]",
                PREC_ATOM - 1)


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

_INDEX_CASES = (
    (((4,),), {"index": (1,)}),
    (((3, 4),), {"index": (("slice", 1, 3, None),)}),
    (((3, 4),), {"index": (("slice", None, None, None), 2)}),
    (((2, 3, 4),), {"index": ("...", ("slice", None, None, 2))}),
    (((3,),), {"index": (None, ("slice", 0, 2, None))}),
)

getitem = defop(
    "getitem", lambda x, index: x[real_index(index)], _print_getitem,
    vjp=(lambda g, ans, x, index: scatter(g, shape=np.shape(_value(x)),
                                          dtype=np.result_type(_value(x)).name, index=index),),
    sympy=lambda x, index: x[real_index(index)],
    domain=Domain((REALS,), cases=_INDEX_CASES),
    rule_text=("the cotangent is placed back at the index, zeros elsewhere",),
    extra={"view": True})  # basic indexing: a view of x, never a new array

scatter = defop(
    "scatter", _scatter_value, _print_scatter,
    vjp=(lambda g, ans, v, shape, dtype, index: getitem(g, index=index),),
    sympy=lambda v, shape, dtype, index: _sympy_scatter(v, shape, index),
    domain=Domain((REALS,), cases=((((2,),), {"shape": (4,), "dtype": "float64",
                                              "index": (("slice", 1, 3, None),)}),
                                   (((),), {"shape": (3, 2), "dtype": "float64",
                                            "index": (1, 0)}))),
    rule_text=("the cotangent at the index",))


def _sympy_scatter(v, shape, index):
    out = np.zeros(shape, dtype=object)
    out[real_index(index)] = v
    return out


def _value(x):
    from ..tracer import tracer_value

    return tracer_value(x)


def _stack_vjp(i):
    def rule(g, ans, *xs, axis):
        index = (("slice", None, None, None),) * axis + (i,)
        return getitem(g, index=index)

    return rule


def _print_stack(node, args):
    axis = node.attrs["axis"]
    items = ", ".join(a.text for a in args)
    return Expr(f"np.stack([{items}]" + (f", axis={axis})" if axis else ")"))


def _stack_impl(*xs, axis=0):
    return np.stack(xs, axis=axis)


class _StackRules(tuple):
    """One VJP rule per stacked input, however many there are."""

    def __getitem__(self, i):
        return _stack_vjp(i)


stack = defop(
    "stack", _stack_impl, _print_stack, vjp=_StackRules((None,)),
    sympy=lambda *xs, axis=0: np.stack(xs, axis=axis),
    domain=Domain((REALS, REALS), cases=((((3,), (3,)), {"axis": 0}),
                                         (((2, 3), (2, 3)), {"axis": 1}))),
    rule_text=("input i gets the cotangent's slice i",))


def _np_stack(arrays, axis=0, out=None, **kw):
    if out is not None or kw:
        raise UnsupportedOperation("np.stack with out= or dtype= has no gradient rule in gradgen",
                                   current_loc())
    arrays = list(arrays)
    ndim = np.ndim(_value(arrays[0])) + 1
    return stack(*arrays, axis=int(axis) % ndim)


def _getitem(x, index):
    return getitem(x, index=normalize_index(index, np.ndim(_value(x))))


BOUND.update({"getitem": _getitem, np.stack: _np_stack})
