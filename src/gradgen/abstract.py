"""Abstract values while building: a backward op gets its shape and dtype, not its numbers.

Reverse mode writes the backward as ops on tracers. Computing each backward op on the real
arrays while building would do the gradient's work twice (once here, once in the emitted
code), so in a lazy trace (``Trace.lazy``, the one reverse mode records into) an op whose
inputs include an array, or a value not computed yet, is *abstract*: its row's ``abstract``
rule gives the result's shape, dtype and kind, and its value is ``Pending``. The number is
computed only if something asks for it (``Tracer.value``, ``concrete``), from its inputs,
so nothing is ever silently wrong: it is just not computed when nobody looks.

The convention for rows (``defop(..., abstract=...)``):

- ``abstract(op, *ins, **attrs)`` receives its row and the inputs *shaped*: the real value
  when it is known, else a stand-in (``stand_in``) with the right shape, dtype and kind (a
  Python number, a NumPy scalar, or a read-only zero-strided ndarray holding one element).
  It returns a shaped result (one per output for ``n_out > 1``) of which only the shape,
  dtype and kind are used: a stand-in made by ``make``, or an input itself. It never
  computes on the data. ``None`` means "cannot tell": the op is then computed for real.
- Family helpers: ``elementwise`` (the default of every ``elementwise=True`` row: NumPy's
  broadcast shape, dtype and kind from the op run on one-element exemplars), ``reduction``
  (``axis``/``keepdims`` attrs), ``scan`` (cumulative ops), ``view`` (the op itself on
  stand-ins: exact and free for ops that return views: reshape, transpose, a basic index),
  ``same_as_first`` (identities), ``fresh`` and ``array_like_first`` (copies, index writes).
  ``tests/test_abstract.py`` checks every rule against NumPy on the row's domain cases.
- A row without a rule is computed for real (its inputs are computed first): correct, only
  slower. Scalars are free, so a lazy trace still computes an op whose inputs are all known
  scalars at once; a derivative that does not exist at a scalar input (``1 / 0``,
  ``log(-1)``) is then reported while building, naming the user's line. For arrays NumPy
  gives inf or nan rather than raising: ``check_finite`` reports those, and an error the
  emitted code raises on its first run names the line too (``api._runtime_error``).

The forward trace computes its values (guards need them) but holds its arrays weakly
(``Trace.live``): an intermediate the user's code drops is freed, and its value is Pending
afterwards. Once the module is written, ``build.release_values`` lets the rest go as well.
"""

from __future__ import annotations

import warnings

import numpy as np

from .errors import GradgenError
from .ir import Aval, Node, Ref, aval_of


class Pending:
    """The value of a node that has not been computed (or was let go): per output, whether
    NumPy gives an ndarray (True) or a scalar (a NumPy scalar, or a Python number when the
    aval says so), and whether that ndarray is a view into memory another value owns (the
    emitter never writes into one). The node's avals hold the rest."""

    __slots__ = ("arrays", "views")

    def __init__(self, arrays: tuple[bool, ...], views: tuple[bool, ...] | None = None):
        self.arrays = arrays
        self.views = views or (False,) * len(arrays)

    @classmethod
    def of(cls, value, n_out: int = 1) -> Pending:
        """What a computed value (a tuple of them for several outputs) will be known by."""
        outs = value if n_out > 1 else (value,)
        return cls(tuple(isinstance(v, np.ndarray) for v in outs),
                   tuple(isinstance(v, np.ndarray) and v.base is not None for v in outs))

    def __repr__(self) -> str:
        return f"Pending({self.arrays})"


_ZEROS: dict[np.dtype, np.ndarray] = {}


def shaped_like(aval: Aval, array: bool):
    """A stand-in with ``aval``'s shape, dtype and kind that costs one element of memory."""
    if aval.py is not None:
        return aval.py(0)
    zero = _ZEROS.get(aval.dtype)
    if zero is None:
        zero = _ZEROS[aval.dtype] = np.zeros((), aval.dtype)
        zero.flags.writeable = False
    if not array:
        return zero[()]
    return np.broadcast_to(zero, aval.shape)


def stand_in(value, ref: Ref):
    """``value`` itself when it is known, else a stand-in shaped like ``ref``'s value."""
    if type(value) is not Pending:
        return value
    return shaped_like(ref.aval, value.arrays[ref.index])


def abstract_value(op, shaped_ins, attrs) -> tuple[list[Aval], Pending] | None:
    """``op``'s avals and Pending value from its abstract rule on shaped inputs, or None
    when it has no rule or the rule cannot tell."""
    if op.abstract is None:
        return None
    shaped = op.abstract(op, *shaped_ins, **attrs)
    if shaped is None:
        return None
    outs = shaped if op.n_out > 1 else (shaped,)
    avals = [aval_of(o) for o in outs]
    # a view when the rule handed back (a view of) a known array: never of a stand-in
    return avals, Pending(tuple(isinstance(o, np.ndarray) for o in outs),
                          tuple(isinstance(o, np.ndarray) and o.base is not None
                                and not is_stand_in(o) for o in outs))


def made_as_view(values: dict, ref: Ref) -> bool:
    """Is ``ref``'s value an ndarray NumPy made as a view of memory another value owns?"""
    value = values.get(ref.node)
    if type(value) is Pending:
        return value.views[ref.index]
    if ref.node.op.n_out > 1 and isinstance(value, tuple):
        value = value[ref.index]
    return isinstance(value, np.ndarray) and value.base is not None


def shaped_value(values: dict, ref: Ref):
    """What ``values`` knows about ``ref``'s value, as a value or a stand-in (no compute)."""
    value = values.get(ref.node, _MISSING)
    if value is _MISSING:
        return None
    if type(value) is Pending:
        return shaped_like(ref.aval, value.arrays[ref.index])
    return value[ref.index] if ref.node.op.n_out > 1 else value


_MISSING = object()


def concrete(values: dict, ref: Ref):
    """The value of ``ref``, computing it (and the pending values it reads, in creation order,
    without recursion) when it is pending or unknown. ``values`` is updated in place."""
    node = ref.node
    value = values.get(node, _MISSING)
    if value is _MISSING or type(value) is Pending:
        _compute(values, node)
        value = values[node]
    return value[ref.index] if node.op.n_out > 1 else value


def _compute(values: dict, target: Node) -> None:
    # inputs before their users, by an iterative depth-first walk: serials are not enough,
    # since a node made after the trace (a rolled loop) can feed nodes recorded before it
    todo: list[Node] = []
    seen: set[Node] = set()
    stack: list[tuple[Node, bool]] = [(target, False)]
    while stack:
        node, inputs_done = stack.pop()
        if inputs_done:
            todo.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        value = values.get(node, _MISSING)
        if value is _MISSING or type(value) is Pending:
            stack.append((node, True))
            stack.extend((r.node, False) for r in node.inputs if r.node not in seen)
    for node in todo:
        if node.op.name == "const":
            values[node] = node.attrs["value"]
            continue
        ins = [values[r.node][r.index] if r.node.op.n_out > 1 else values[r.node]
               for r in node.inputs]
        try:
            values[node] = node.op.impl(*ins, **node.attrs)
        except (ArithmeticError, ValueError) as e:
            if node.role != "bwd":
                raise
            raise not_finite(node, e) from e


def evaluate(nodes, env: dict, attrs_of=None) -> dict:
    """Run ``nodes`` (in order) on concrete values: ``env`` holds the inputs and any value
    already known, and receives every other node's value; guards are skipped. ``attrs_of(node)``
    gives the attributes to apply a node with (a loop body's trip, loops/region.py)."""
    for node in nodes:
        if node in env or node.op.name == "guard":
            continue
        if node.op.name == "const":
            env[node] = node.attrs["value"]
            continue
        ins = [env[r.node][r.index] if r.node.op.n_out > 1 else env[r.node]
               for r in node.inputs]
        with np.errstate(all="ignore"):
            env[node] = node.op.impl(*ins, **(node.attrs if attrs_of is None
                                              else attrs_of(node)))
    return env


def not_finite(node: Node, error: Exception) -> GradgenError:
    """The derivative of ``node`` cannot be evaluated at the traced input (1 / 0, log(-1))."""
    statement = node.loc.text() if node.loc is not None else ""
    where = f" of `{statement}`" if statement else f" of {node.op.name}"
    return GradgenError(
        f"computing the derivative{where} raised {type(error).__name__} ({error}); the "
        "derivative is not finite at this input", node.loc)


# --- family rules --------------------------------------------------------------------------


def _exemplar(x):
    """One element of ``x`` with its dtype and kind, and its number of dimensions."""
    if isinstance(x, np.ndarray):
        return np.ones((1,) * x.ndim, x.dtype)
    if isinstance(x, np.generic):
        return x.dtype.type(1)
    if isinstance(x, bool):
        return True
    if isinstance(x, int | float):
        return type(x)(1)
    return x


# A memo of result_kind per (op, input dtypes and kinds, attrs): a pure function of its key,
# like functools.cache, so it is no state that changes an answer.
_KINDS: dict[tuple, tuple | None] = {}


def result_kind(op, ins, attrs):
    """(dtype, kind) of ``op`` on one-element exemplars of ``ins``; kind is 'array', 'numpy'
    or the Python type. None when the op refuses them or Python's answer depends on values."""
    key = None
    try:
        key = (op.name, tuple((type(x), getattr(x, "dtype", None), np.ndim(x)) for x in ins),
               tuple(sorted(attrs.items())))
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _KINDS:
        return _KINDS[key]
    result = None
    if op.name == "pow" and all(type(x) in (float, int, bool) for x in ins):
        return None  # (-2.0) ** 0.5 is complex in Python: only the values tell
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # var(ddof=1) of one element, mean of none...
            out = op.impl(*(_exemplar(x) for x in ins), **attrs)
        if isinstance(out, np.ndarray):
            result = (out.dtype, "array")
        elif isinstance(out, np.generic):
            result = (out.dtype, "numpy")
        elif type(out) is float:  # Python ints can turn float on values (2 ** -1)
            result = (np.dtype(np.float64), float)
    except Exception:  # noqa: BLE001 - computed for real instead, where errors are reported
        result = None
    if key is not None:
        _KINDS[key] = result
    return result


def make(shape, dtype, kind):
    """A stand-in of ``shape`` and ``dtype``; kind 'array', 'numpy' or a Python type."""
    if kind is float:
        return 0.0
    return shaped_like(Aval(tuple(shape), dtype), kind == "array")


def elementwise(op, *ins, **attrs):
    """NumPy's broadcast shape; dtype and kind from the op on one-element exemplars."""
    found = result_kind(op, ins, attrs)
    if found is None:
        return None
    dtype, kind = found
    shape = np.broadcast_shapes(*(np.shape(x) for x in ins))
    if kind == "numpy" and shape != ():
        return None  # NumPy would have given an array: never guess
    return make(shape, dtype, kind)


def reduction(op, x, *rest, axis=None, keepdims=False, **attrs):
    """A reduction over ``axis`` (normalized ints, or None for all) of its first input."""
    found = result_kind(op, (x, *rest), dict(attrs, axis=axis, keepdims=keepdims))
    if found is None:
        return None
    dtype, kind = found
    shape = np.shape(x)
    axes = range(len(shape)) if axis is None else axis
    if keepdims:
        out = tuple(1 if i in axes else d for i, d in enumerate(shape))
    else:
        out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return make(out, dtype, kind)


def scan(op, x, *rest, axis=0, **attrs):
    """A cumulative op along ``axis`` (None: over the flattened input)."""
    found = result_kind(op, (x, *rest), dict(attrs, axis=axis))
    if found is None:
        return None
    shape = (int(np.prod(np.shape(x), dtype=np.int64)),) if axis is None else np.shape(x)
    return make(shape, *found)


def same_as_first(op, x, *rest, **attrs):
    """An identity on its first input (adjoint, copy, index updates of an array)."""
    return x


def array_like_first(op, x, *rest, **attrs):
    """A new array shaped like the first input (functional index writes)."""
    return make(np.shape(x), np.result_type(x), "array")


def is_stand_in(x) -> bool:
    """Is ``x`` a stand-in for an array whose values are not known (or a view of one)?"""
    return isinstance(x, np.ndarray) and x.base is not None and x.base is _ZEROS.get(x.dtype)


def fresh(op, x, *rest, **attrs):
    """A new array (or number) shaped like the first input: copies."""
    if isinstance(x, np.ndarray):
        return make(np.shape(x), x.dtype, "array")
    return x


def view(op, x, *rest, **attrs):
    """The op itself on stand-ins: exact and free for ops that return views of their input."""
    return op.impl(x, *rest, **attrs)
