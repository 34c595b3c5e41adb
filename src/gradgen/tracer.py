"""Tracer values: run user code on them and every operation is recorded as a graph node."""

from __future__ import annotations

import threading
from typing import Self

import numpy as np

from .errors import GradgenError, UnsupportedOperation
from .ir import Graph, Node, Ref, aval_of
from .ops.registry import BOUND, OPS
from .source import current_loc

_state = threading.local()


class at_loc:
    """Record nodes as coming from ``loc`` (reverse mode and replays know better than the
    call stack which user line an op belongs to) and, in reverse mode, from the VJP rule
    ``origin`` = (forward op, input index)."""

    def __init__(self, loc, origin=None):
        self.loc = loc
        self.origin = origin

    def __enter__(self):
        self.saved = getattr(_state, "loc", None), getattr(_state, "origin", None)
        _state.loc = self.loc
        _state.origin = self.origin

    def __exit__(self, *exc):
        _state.loc, _state.origin = self.saved


def _stack() -> list[Trace]:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


class Trace:
    """One recording in progress: the nodes so far, in the order they ran.

    Traces nest (``grad`` of ``grad``); a tracer of an enclosing trace that reaches an inner
    one is captured as an extra input of the inner graph, so no derivative is lost.
    """

    def __init__(self):
        stack = _stack()
        self.parent: Trace | None = stack[-1] if stack else None
        self.level = self.parent.level + 1 if self.parent else 0
        self.nodes: list[Node] = []
        self.inputs: list[Node] = []
        self.captured: dict[int, tuple[Tracer, Tracer]] = {}  # serial of outer node -> pair
        self.role = "fwd"
        self.values: dict[Node, object] = {}  # concrete value of every node, as traced
        self._consts: dict[tuple, Ref] = {}

    def __enter__(self) -> Self:
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()

    # --- recording -------------------------------------------------------------------------

    def add(self, op, inputs, attrs, avals, name=None, role=None) -> Node:
        loc = getattr(_state, "loc", None) or current_loc()
        node = Node(op, inputs, attrs, avals, loc, name, role or self.role,
                    origin=getattr(_state, "origin", None))
        self.nodes.append(node)
        return node

    def new_input(self, value, name: str | None, index: int | None = None) -> Tracer:
        """A graph input; ``index`` is its position among the function's arguments."""
        index = len(self.inputs) if index is None else index
        node = Node(OPS["input"], (), {"index": index}, (aval_of(value),), None, name, "input")
        self.nodes.append(node)
        self.inputs.append(node)
        self.values[node] = value
        return Tracer(self, node.out, value)

    def const(self, value) -> Ref:
        try:
            aval = aval_of(value)
        except TypeError:
            raise UnsupportedOperation(
                f"a {type(value).__name__} value was combined with a traced value",
                current_loc(), "gradgen traces numbers and NumPy arrays of numbers") from None
        if aval.shape == ():  # scalars are shared; arrays are left to CSE
            key = (type(value), repr(value))
            ref = self._consts.get(key)
            if ref is None:
                ref = self._consts[key] = self._const_node(value, aval)
            return ref
        return self._const_node(value, aval)

    def _const_node(self, value, aval) -> Ref:
        node = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
        self.nodes.append(node)
        self.values[node] = value
        return node.out

    def lift(self, outer: Tracer) -> Tracer:
        """A tracer of an enclosing trace, seen inside this one: an extra (captured) input."""
        if outer.trace.level >= self.level:
            return outer
        key = outer.ref.node.serial * 64 + outer.ref.index
        pair = self.captured.get(key)
        if pair is None:
            inner = self.new_input(outer.value, outer.ref.node.name, index=-1)
            inner.ref.node.attrs["captured"] = True
            pair = self.captured[key] = (outer, inner)
        return pair[1]

    def graph(self, outputs: list[Ref]) -> Graph:
        return Graph(list(self.nodes), list(self.inputs), outputs)

    def tracer(self, ref: Ref) -> Tracer:
        """A tracer for an existing node of this trace (reverse mode continues a trace)."""
        value = self.values[ref.node]
        return Tracer(self, ref, value[ref.index] if ref.node.op.n_out > 1 else value)


def bind(op, args, attrs) -> object:
    """Apply ``op``: concretely when no argument is traced, else record a node as well."""
    trace = None
    for a in args:
        if isinstance(a, Tracer) and (trace is None or a.trace.level > trace.level):
            trace = a.trace
    if trace is None:
        return op.impl(*args, **attrs)
    values, refs = [], []
    for a in args:
        if isinstance(a, Tracer):
            if a.trace is not trace:
                a = trace.lift(a)
            values.append(a.value)
            refs.append(a.ref)
        else:
            values.append(a)
            refs.append(trace.const(a))
    out = op.impl(*values, **attrs)
    outs = out if op.n_out > 1 else (out,)
    try:
        avals = [aval_of(o) for o in outs]
    except TypeError as e:
        raise UnsupportedOperation(f"{op.name} gave a value gradgen cannot trace ({e})",
                                   getattr(_state, "loc", None) or current_loc()) from None
    node = trace.add(op, refs, attrs, avals)
    trace.values[node] = out
    if op.n_out > 1:
        return tuple(Tracer(trace, Ref(node, i), o) for i, o in enumerate(outs))
    return Tracer(trace, node.out, out)


def _op(name):
    return OPS[name]


def _unsupported(what: str, hint: str | None = None) -> UnsupportedOperation:
    return UnsupportedOperation(
        what, current_loc(),
        hint or "add a rule with gradgen.ops.registry.defop or wrap the code in a "
        "gradgen.Function with a backward")


class Tracer:
    """A value seen by the user's code while tracing: the concrete value plus its node."""

    __slots__ = ("ref", "trace", "value")
    __array_priority__ = 1000

    def __init__(self, trace: Trace, ref: Ref, value):
        self.trace = trace
        self.ref = ref
        self.value = value

    # --- what is known statically -----------------------------------------------------------
    @property
    def aval(self):
        return self.ref.aval

    @property
    def shape(self):
        return self.aval.shape

    @property
    def ndim(self):
        return self.aval.ndim

    @property
    def size(self):
        return self.aval.size

    @property
    def dtype(self):
        return self.aval.dtype

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a scalar")
        return self.shape[0]

    def __repr__(self):
        return f"Traced({self.value!r})"

    # --- arithmetic ----------------------------------------------------------------------
    def __add__(self, o):
        return _op("add")(self, o)

    def __radd__(self, o):
        return _op("add")(o, self)

    def __sub__(self, o):
        return _op("sub")(self, o)

    def __rsub__(self, o):
        return _op("sub")(o, self)

    def __mul__(self, o):
        return _op("mul")(self, o)

    def __rmul__(self, o):
        return _op("mul")(o, self)

    def __truediv__(self, o):
        return _op("div")(self, o)

    def __rtruediv__(self, o):
        return _op("div")(o, self)

    def __pow__(self, o, mod=None):
        if mod is not None:
            raise _unsupported("pow() with a modulus on a traced value")
        return _op("pow")(self, o)

    def __rpow__(self, o):
        return _op("pow")(o, self)

    def __matmul__(self, o):
        return _op("matmul")(self, o)

    def __rmatmul__(self, o):
        return _op("matmul")(o, self)

    def __neg__(self):
        return _op("neg")(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _op("abs")(self)

    def __floordiv__(self, o):
        return _op("floordiv")(self, o)

    def __rfloordiv__(self, o):
        return _op("floordiv")(o, self)

    def __mod__(self, o):
        return _op("mod")(self, o)

    def __rmod__(self, o):
        return _op("mod")(o, self)

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise _unsupported("round() with digits of a traced value")
        return _op("round")(self)

    def __floor__(self):
        return _op("floor")(self)

    def __ceil__(self):
        return _op("ceil")(self)

    def __trunc__(self):
        return _op("trunc")(self)

    # --- comparisons: traced booleans, turned into guards by bool() --------------------------
    def __lt__(self, o):
        return _op("lt")(self, o)

    def __le__(self, o):
        return _op("le")(self, o)

    def __gt__(self, o):
        return _op("gt")(self, o)

    def __ge__(self, o):
        return _op("ge")(self, o)

    def __eq__(self, o):
        return _op("eq")(self, o)

    def __ne__(self, o):
        return _op("ne")(self, o)

    __hash__ = object.__hash__

    def __bool__(self):
        cond = self
        if self.dtype.kind != "b":  # truthiness of a number: the guard is `x != 0`
            cond = _op("ne")(self, 0)
        outcome = bool(cond.value)
        trace = cond.trace
        trace.add(OPS["guard"], (cond.ref,), {"expect": outcome}, ())
        return outcome

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise TypeError(f"a traced {self.dtype} value cannot be used as an index")
        value = int(self.value)
        if not (self == value):  # records the guard `n == value`; always true here
            raise AssertionError("unreachable")
        return value

    def __int__(self):
        if self.dtype.kind in "iub":
            return self.__index__()
        truncated = _op("trunc")(self)
        return truncated.__index__()

    def __float__(self):
        raise _unsupported(
            "float() of a traced value would hide it from the gradient",
            "use the value itself (it already behaves like a number), or wrap the code in a "
            "gradgen.Function with a backward")

    def __complex__(self):
        raise _unsupported("complex() of a traced value")

    def item(self):
        raise _unsupported(".item() of a traced value would hide it from the gradient",
                           "use the array itself, e.g. x.sum() or x.reshape(())")

    def tolist(self):
        raise _unsupported(".tolist() of a traced value would hide it from the gradient")

    def __array__(self, dtype=None, copy=None):
        raise _unsupported(
            "converting a traced value to a plain NumPy array (np.asarray, np.array or a "
            "NumPy function without a gradient rule) would hide it from the gradient")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a scalar")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, index):
        handler = BOUND.get("getitem")
        if handler is None:
            raise _unsupported("indexing a traced array")
        return handler(self, index)

    def __setitem__(self, index, value):
        raise _unsupported(
            "in-place assignment into a traced array (a[i] = v)",
            "build a new array instead, e.g. with np.where or np.concatenate")

    def _inplace(self, o):
        raise _unsupported(
            "in-place arithmetic on a traced array (a += b)",
            "write a = a + b: gradgen keeps every value so it can differentiate it")

    # x += y on a Python scalar rebinds (x = x + y) and is fine; on arrays it would mutate.
    def __iadd__(self, o):
        return self._inplace(o) if self.shape else self + o

    def __isub__(self, o):
        return self._inplace(o) if self.shape else self - o

    def __imul__(self, o):
        return self._inplace(o) if self.shape else self * o

    def __itruediv__(self, o):
        return self._inplace(o) if self.shape else self / o

    # --- NumPy -------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            raise _unsupported(f"np.{ufunc.__name__}.{method} on a traced value")
        if kwargs.get("out") is not None:
            raise _unsupported(f"np.{ufunc.__name__}(..., out=...) writes in place",
                               "drop out= and use the returned value")
        kwargs.pop("out", None)
        handler = BOUND.get(ufunc)
        if handler is None or kwargs:
            extra = f" with {', '.join(kwargs)}=" if kwargs and handler else ""
            raise _unsupported(f"np.{ufunc.__name__}{extra} has no gradient rule in gradgen")
        return handler(*_numpy_scalars(inputs))

    def __array_function__(self, func, types, args, kwargs):
        if func in _STATIC_QUERIES:  # shape questions: known at trace time, no node needed
            return func(*(tracer_value(a) for a in args), **kwargs)
        handler = BOUND.get(func)
        if handler is None:
            name = f"{func.__module__.replace('numpy', 'np')}.{func.__name__}"
            if name.startswith(("np.core", "np._core")):
                name = f"np.{func.__name__}"
            raise _unsupported(f"{name} has no gradient rule in gradgen")
        return handler(*args, **kwargs)

    # --- NumPy-style methods -------------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False):
        return BOUND[np.sum](self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return BOUND[np.mean](self, axis=axis, dtype=dtype, keepdims=keepdims)

    def dot(self, other):
        return BOUND[np.dot](self, other)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return BOUND[np.reshape](self, tuple(shape))

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], tuple | list) else axes
        return BOUND[np.transpose](self, tuple(axes) if axes else None)

    @property
    def T(self):
        return BOUND[np.transpose](self)

    def astype(self, dtype):
        raise _unsupported(".astype() of a traced value")

    def copy(self):
        return self

    def conjugate(self):
        return self

    def conj(self):
        return self


def _numpy_scalars(inputs) -> tuple:
    """A ufunc of Python numbers computes in NumPy and returns a NumPy scalar (np.sign(0.5) is
    np.float64(1.0), where the math-style rule of a Python float gives the int 1): traced
    Python numbers become NumPy scalars first, so the op traces what NumPy computes."""
    if not all(type(x) in (float, int, bool) or (isinstance(x, Tracer) and x.aval.py)
               for x in inputs):
        return inputs
    return tuple(OPS["cast"](x, dtype=x.aval.dtype.name) if isinstance(x, Tracer) else x
                 for x in inputs)


# NumPy functions that only look at a value's shape: answered from the traced value.
_STATIC_QUERIES = frozenset({np.shape, np.ndim, np.size})


def tracer_value(x):
    return x.value if isinstance(x, Tracer) else x


def check_traceable(value, what: str) -> None:
    try:
        aval_of(value)
    except TypeError as e:
        raise GradgenError(f"{what} is not a number or a NumPy array of numbers ({e})") from None


def in_trace() -> bool:
    return bool(_stack())


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)

