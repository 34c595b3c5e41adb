"""Tracer values: run user code on them and every operation is recorded as a graph node."""

from __future__ import annotations

import math
import sys
import threading
import weakref
from typing import Self

import numpy as np

from .abstract import Pending, abstract_value, concrete, stand_in
from .errors import (
    AmbiguousCondition,
    GradgenError,
    UnsupportedOperation,
    numpy_hint,
    scipy_hint,
)
from .ir import (
    _NEXT_SERIAL,
    _PY_AVALS,
    PY_NUMBER_AVALS,
    SERIALS,
    Graph,
    Node,
    Ref,
    _new_node,
    _new_ref,
    aval_of,
)
from .ops.registry import BOUND, FOREIGN, OPS, set_bind
from .peephole import (
    _IDENTITY,
    _NEVER,
    _SAME_VALUE,
    _kind,
    float_literal,
    negated_path,
)
from .source import USER_FILES, SourceLoc, current_loc, is_user_file, line_table


class _State(threading.local):
    """Per thread: where ops are recorded from (at_loc), the stack of traces, what _user_loc
    keeps. Class defaults, so a new thread reads None."""

    site = None
    stack = None
    where = None


_state = _State()


class _Site:
    """The location and rule ops are recorded under (at_loc), in one thread: a plain slotted
    object that each trace holds (``Trace.site``), so recording an op reads two fields, not a
    threading.local (whose attributes cost several times as much to read and write). It
    also holds the thread's ``_Where``, for bind to hand to ``_user_loc``."""

    __slots__ = ("loc", "origin", "where")

    def __init__(self):
        self.loc = None
        self.origin = None
        self.where = _where()


def _site() -> _Site:
    site = _state.site
    if site is None:
        site = _state.site = _Site()
    return site


class _Where:
    """What ``_user_loc`` reads for every recorded op, in one thread: the naming watcher, and
    the run of a line the last op came from: its user frame and that frame's line table
    (None for a short function), the instruction offsets [start, stop) that run that line,
    its SourceLoc, and the watcher's record of the run (``line``, ``lasti``, ``callee``;
    None without a watcher). A plain slotted object, one ``_state.where`` away: an attribute
    of a threading.local costs six times as much to read."""

    __slots__ = ("frame", "loc", "run", "start", "step", "stop", "table", "watch")

    def __init__(self):
        self.watch = self.step = None
        self.loc: SourceLoc | None = None
        self.forget()

    def forget(self) -> None:
        """No run is going on (a trace ended: do not keep its frame alive)."""
        self.frame = self.run = self.table = None
        self.start = self.stop = 0


_new_object = object.__new__
# The attrs of an op that has none (x * y): one dict for all of them, never written to (a
# node's attrs are read only), where a new {} per recorded op was an allocation and 64
# bytes kept per node.
_NO_ATTRS: dict = {}


def _where() -> _Where:
    where = _state.where
    if where is None:
        where = _state.where = _Where()
    return where


class at_loc:
    """Record nodes as coming from ``loc`` (reverse mode and replays know better than the
    call stack which user line an op belongs to) and, in reverse mode, from the VJP rule
    ``origin`` = (forward op, input index)."""

    __slots__ = ("loc", "origin", "saved")

    def __init__(self, loc, origin=None):
        self.loc = loc
        self.origin = origin

    def __enter__(self):
        site = _site()
        self.saved = site.loc, site.origin
        site.loc = self.loc
        site.origin = self.origin

    def __exit__(self, *exc):
        site = _site()
        site.loc, site.origin = self.saved


def swap_loc(loc, origin=None) -> tuple:
    """``at_loc`` as two calls: record under ``loc`` and ``origin`` from now on, and return
    what was before, to restore with ``swap_loc(*saved)``."""
    site = _state.site or _site()
    saved = site.loc, site.origin
    site.loc = loc
    site.origin = origin
    return saved


def set_watcher(watch, step=None) -> None:
    """``watch(frame, callee, line, lasti)`` is told the user frame each recorded value comes
    from when that frame starts running another line (or the same one again), and returns the
    frame's run of the line, an object with ``line``, ``lasti`` and ``callee`` that
    ``_user_loc`` keeps up to date meanwhile. ``step(frame, run, callee, line, lasti)`` is
    told instead when the frame is the one the last value came from (the common case: the
    next line of the same function), with ``run`` its record. None stops it."""
    where = _where()
    where.watch = watch
    where.step = step
    where.forget()


def _user_loc(where: _Where | None = None) -> SourceLoc | None:
    """The innermost user frame's location, as ``current_loc``; the watcher sees the frame.
    ``where`` is this thread's _Where when the caller has it at hand (bind: its trace's
    site), else it is looked up.
    (Runs once per recorded op: the frames between are looked up in a dict, not a call, and
    while the frame stays within the instructions of the last op's line, that line's
    SourceLoc is the answer without asking the line table or the watcher.)"""
    frame = sys._getframe(2)
    callee = None
    user_files = USER_FILES
    while True:
        code = frame.f_code
        mine = user_files.get(code.co_filename)
        if mine or mine is None and is_user_file(code.co_filename):
            break
        callee, frame = frame, frame.f_back
        if frame is None:
            return None
    if where is None:
        where = _state.where or _where()
    lasti = frame.f_lasti
    if frame is where.frame and where.start <= lasti < where.stop:
        run = where.run
        if run is None:
            return where.loc
        # later in the same run of the line (not the line again, as in a loop)
        if lasti > run.lasti or lasti == run.lasti and callee is run.callee:
            run.lasti = lasti
            run.callee = callee
            return where.loc
    return _new_run(where, frame, code, callee, lasti)


def _new_run(where: _Where, frame, code, callee, lasti: int) -> SourceLoc:
    """``frame`` runs a line (another one, or the same one again): its SourceLoc. (Once per
    line of an unrolled function: the frame's table kept, and the watcher's common case
    written out.)"""
    same = frame is where.frame
    table = where.table if same else line_table(code)
    span = table.span(lasti) if table is not None else None
    if span is not None:
        line, where.start, where.stop = span
    else:
        line, where.start, where.stop = frame.f_lineno, lasti, lasti + 1
    run = where.run
    if same and run is not None:  # the watcher's record of this frame
        if line == run.line and (lasti > run.lasti or lasti == run.lasti
                                 and callee is run.callee):
            run.lasti, run.callee = lasti, callee  # the same run, another span of its line
        else:
            where.step(frame, run, callee, line, lasti)
    else:
        where.frame, where.table = frame, table
        watch = where.watch
        where.run = watch(frame, callee, line, lasti) if watch is not None else None
    last = where.loc  # the ops of one line share its SourceLoc (immutable)
    if last is not None and last.line == line and last.file is code.co_filename and (
            last.func is code.co_name):
        return last
    # SourceLoc(code.co_filename, line, code.co_name), its fields set here: calling a class
    # with a Python __init__ costs several times what the stores do
    loc = where.loc = _new_object(SourceLoc)
    loc.file, loc.line, loc.func = code.co_filename, line, code.co_name
    loc._short = loc._text = None
    return loc


# Every trace open in any thread. The cached call of a gradient (api.py) asks this set, one
# global read, instead of this thread's stack: while any thread traces it takes the careful
# path, which asks the stack. (set.add and set.discard are atomic: no lock.)
OPEN_TRACES: set[Trace] = set()


def _stack() -> list[Trace]:
    stack = _state.stack
    if stack is None:
        stack = _state.stack = []
    return stack


def _const_key(value):
    """What tells scalar constants apart: a float other than 0.0, -0.0 and nan is its own
    key (no other key equals a float: ints and bools are keyed by type and repr); the rest by
    type and repr, which keeps 0.0 and -0.0 apart and nan equal to itself."""
    if type(value) is float and value and not math.isnan(value):
        return value
    return (type(value), repr(value))


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
        # The value of every node, as traced; in a lazy trace (reverse mode) ops on arrays
        # are abstract: their value is Pending until asked for (see abstract.py).
        self.values: dict[Node, object] = {}
        self.lazy = False
        # In a forward trace (trace_function makes it a dict): the tracer of each array value,
        # held weakly, so an intermediate the user's code dropped is freed as it would be
        # without gradgen; ``settle`` keeps the values still alive when the trace ends.
        self.live: dict[Node, weakref.ref] | None = None
        self._consts: dict[tuple, Ref] = {}
        # Nodes that depend on no input (NumPy buffers made inside the function, and what is
        # computed from them alone): their values may be used as plain numbers.
        self.constant: set[Node] = set()
        # Reverse mode: the graph's nodes by what they compute (peephole.Shared), so the
        # backward never makes a node the graph already has; and the adjoint that only one
        # rule reads, while that rule runs (peephole.negated_path may rebuild it)
        self.shared = None
        self.sole_adjoint = None
        self.site = _site()  # (this thread's: a trace records in the thread that made it)

    def __enter__(self) -> Self:
        _stack().append(self)
        OPEN_TRACES.add(self)
        return self

    def __exit__(self, *exc) -> None:
        OPEN_TRACES.discard(_stack().pop())
        where = _state.where
        if where is not None:
            where.forget()

    # --- recording -------------------------------------------------------------------------

    def add(self, op, inputs, attrs, avals, name=None, role=None) -> Node:
        loc = self.site.loc or _user_loc()
        node = Node(op, inputs, attrs, avals, loc, name, role or self.role,
                    origin=self.site.origin)
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
        if type(value) is float and value and not math.isnan(value):  # not 0.0, -0.0, nan
            ref = self._consts.get(value)  # (a float's own key: the common case, no repr)
            if ref is not None:
                return ref
        try:
            aval = aval_of(value)
        except TypeError:
            raise UnsupportedOperation(
                f"a {type(value).__name__} value was combined with a traced value",
                current_loc(), "gradgen traces numbers and NumPy arrays of numbers") from None
        if aval.shape == ():  # scalars are shared; arrays are left to CSE
            key = _const_key(value)
            ref = self._consts.get(key)
            if ref is None:
                ref = self._consts[key] = self._const_node(value, aval)
            return ref
        return self._const_node(value, aval)

    def share_constants(self, nodes) -> None:
        """Scalar constants of ``nodes`` (a graph this trace extends) are the ones ``const``
        hands out: one node per number, as in the trace that made them."""
        for node in nodes:
            if node.op.name == "const" and node.aval.shape == ():
                value = node.attrs["value"]
                self._consts.setdefault(_const_key(value), node.out)

    def _const_node(self, value, aval) -> Ref:
        node = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
        self.nodes.append(node)
        self.values[node] = value
        return node.out

    def buffer(self, value) -> Tracer:
        """A NumPy array made inside the traced code (np.zeros, np.array, ...): a constant that
        becomes a traced value once a traced value is written into it (``h[t] = ...``)."""
        aval = aval_of(value)
        _user_loc()  # the line that made it may be the one naming it: h = np.zeros(n)
        node = Node(OPS["const"], (), {"value": value}, (aval,), None, None, "const")
        self.nodes.append(node)
        self.values[node] = value
        self.constant.add(node)
        return Tracer(self, node.out, value)

    def lift(self, outer: Tracer) -> Tracer:
        """A tracer of an enclosing trace, seen inside this one: an extra (captured) input."""
        if outer._trace.level >= self.level:
            return outer
        key = outer.ref.node.serial * 64 + outer.ref.index
        pair = self.captured.get(key)
        if pair is None:
            inner = self.new_input(outer.value, outer.ref.node.name, index=-1)
            inner.ref.node.attrs["captured"] = True
            pair = self.captured[key] = (outer, inner)
        return pair[1]

    def keep(self, tracer: Tracer) -> None:
        """Hold ``tracer``'s value for good, even once the user's code drops it."""
        if self.live is not None and self.live.pop(tracer.ref.node, None) is not None:
            self.values[tracer.ref.node] = tracer._value

    def settle(self) -> None:
        """Keep the values of the arrays whose tracers are still alive; the others stay
        Pending (computed again from the inputs if anything asks for them)."""
        for node, ref in (self.live or {}).items():
            tracer = ref()
            if tracer is not None and tracer.ref.node is node:
                self.values[node] = tracer._value
        self.live = None

    def graph(self, outputs: list[Ref]) -> Graph:
        return Graph(list(self.nodes), list(self.inputs), outputs)

    def tracer(self, ref: Ref) -> Tracer:
        """A tracer for an existing node of this trace (reverse mode continues a trace)."""
        value = self.values[ref.node]
        if ref.node.op.n_out > 1 and type(value) is not Pending:
            value = value[ref.index]
        return new_tracer(self, ref, value)


def bind(op, args, attrs) -> object:
    """Apply ``op``: concretely when no argument is traced, else record a node as well."""
    impl, signed, lookup = _ROWS.get(op) or _row(op)
    # Python numbers only, traced in one trace? (scalar code, and every backward of it: one
    # or two traced operands are the common cases, tested without a loop.) Then: no
    # lifting, nothing pending, nothing to broadcast; computed at once (free for a number,
    # and a derivative that does not exist there is reported where it is made)
    if len(args) == 2 and type(a := args[0]) is Tracer and type(b := args[1]) is Tracer and (
            a._trace is b._trace and type(a._value) in _PY_AVALS
            and type(b._value) in _PY_AVALS):
        trace = a._trace
        out = impl(a._value, b._value, **attrs) if attrs else impl(a._value, b._value)
        refs = (a.ref, b.ref)
        constant = trace.constant and _made_of_constants(trace, refs)
    elif len(args) == 1 and type(a := args[0]) is Tracer and type(a._value) in _PY_AVALS:
        trace = a._trace
        out = impl(a._value, **attrs) if attrs else impl(a._value)
        refs = (a.ref,)
        constant = trace.constant and a.ref.node in trace.constant
    else:
        found = _number_operands(op, args)
        if found is None:
            return _bind_general(op, args, attrs)
        trace, values, refs, constant = found
        if trace is None:
            return op.impl(*args, **attrs)
        out = impl(*values, **attrs)
    avals = PY_NUMBER_AVALS.get(type(out))  # (one shared tuple per kind of number, as Node's)
    if avals is None or lookup is _SEVERAL:  # a NumPy value from numbers (np.sign(0.5)), or
        return _record(trace, op, refs, attrs, out, constant, args)  # several: as usual
    key = None
    shared = trace.shared
    if shared is not None:  # reverse mode: what the graph already has is not made again
        if signed:  # (_may_carry_sign's first test, inline; the same sign of zero: exact)
            last = refs[-1].node
            if last.role == "bwd" and last.op.name in _MAY_BE_NEGATED and _may_carry_sign(
                    op.name, refs):
                cancelled = _signs_cancelled(trace, op, refs)
                if cancelled is not None:
                    return cancelled
        if lookup is not _NEVER:  # (Shared.find, its common case inline)
            # an identity reads a constant (x * 1, x + 0.0), or is -(-x)
            if lookup is _IDENTITY:  # (of Python numbers: a constant 0 or 1, x * 1.0)
                first, last = refs[0].node, refs[-1].node
                ask = attrs or (last.op.name == "const" and last.attrs["value"] in _UNITS
                                or first.op.name == "const" and first.attrs["value"] in _UNITS)
            elif lookup is _NEGATION:
                ask = attrs or refs[0].node.op.name == "neg"
            else:
                ask = attrs or lookup is _SAME_VALUE_IDENTITY
            if ask:
                same, key = shared.find(op, refs, attrs, avals[0])
                if same is not None:
                    return new_tracer(trace, same, out)
            else:
                key = (op.name, refs)
                same = shared.known.get(key)
                if same is not None:
                    return new_tracer(trace, _new_ref(Ref, (same, 0)), out)
    # new_node(op, refs, attrs, avals, loc, None, trace.role, origin) written out
    site = trace.site
    loc = site.loc or _user_loc(site.where)  # (first: the watcher reads the next serial)
    SERIALS.peek += 1
    node = _new_node(Node)
    node.serial = next(_NEXT_SERIAL)
    node.op = op
    node.inputs = refs
    node.attrs = attrs or _NO_ATTRS  # (an op called as cos(x) hands a {} of its own)
    node.avals = avals
    node.loc = loc
    node.name = None
    node.role = trace.role
    node.origin = site.origin
    node.hint = node.grad_of = None
    trace.nodes.append(node)
    if key is not None:
        shared.known[key] = node
    if constant:
        trace.constant.add(node)
    trace.values[node] = out
    result = _new_tracer(Tracer)  # new_tracer(trace, node.out, out) written out
    result._trace, result.ref, result._value = trace, _new_ref(Ref, (node, 0)), out
    return result


# What bind needs of an op, worked out once per op rather than on every call: the function
# that computes it on Python numbers (a ``dual`` row's math function, without the test of
# its operands' types that bind has made), whether reverse mode may cancel a pair of signs
# in it, and how a backward node of it is looked up among the graph's (peephole.Shared):
# never, by its key, by its key unless it reads a constant (then as an identity too: x * 1)
# or, for a negation, unless it negates a negation (-(-x)), always through Shared.find; or,
# for an op of several outputs, as bind's general path records it.
_ROWS: dict = {}
_SEVERAL, _SAME_VALUE_IDENTITY, _NEGATION = "several", "same value", "negation"


def _row(op) -> tuple:
    kind = _kind(op)
    if op.n_out != 1:
        kind = _SEVERAL
    elif kind is _IDENTITY and op.name in _SAME_VALUE:
        kind = _SAME_VALUE_IDENTITY
    elif kind is _IDENTITY and op.name == "neg":
        kind = _NEGATION
    row = _ROWS[op] = (getattr(op.impl, "numbers", op.impl), op.name in _SIGNED, kind)
    return row


def _number_operands(op, args):
    """bind's operands when each is a Python number, traced (in one trace) or not:
    (trace, values, refs, constant), the untraced ones made constant nodes, and no trace
    when none is traced; None when some operand is anything else (bind's general path).
    (No lifting, nothing pending, nothing to broadcast: bind computes the op at once, free
    for a number, and a derivative that does not exist there is reported where it is made.)"""
    if len(args) == 2:  # (most: a traced number beside a literal, as in 1.0 - t * t)
        a, b = args
        if type(a) is Tracer and type(b) in _PY_AVALS and type(a._value) in _PY_AVALS:
            trace = a._trace
            return trace, (a._value, b), (a.ref, _const_ref(trace, op, b, args)), (
                trace.constant and a.ref.node in trace.constant)
        if type(b) is Tracer and type(a) in _PY_AVALS and type(b._value) in _PY_AVALS:
            trace = b._trace
            return trace, (a, b._value), (_const_ref(trace, op, a, args), b.ref), (
                trace.constant and b.ref.node in trace.constant)
    trace = None
    values, refs = [], []
    for a in args:
        if type(a) is Tracer:
            if trace is None:
                trace = a._trace
            elif a._trace is not trace:
                return None
            value = a._value
            if type(value) not in _PY_AVALS:
                return None
            values.append(value)
            refs.append(a.ref)
        elif type(a) in _PY_AVALS:
            values.append(a)
            refs.append(None)
        else:
            return None
    if trace is None:
        return None, values, refs, False
    constant = trace.constant and _made_of_constants(trace, [r for r in refs if r is not None])
    for i, ref in enumerate(refs):
        if ref is None:
            refs[i] = _const_ref(trace, op, args[i], args)
    return trace, values, tuple(refs), constant


def _made_of_constants(trace, refs) -> bool:
    """Does every one of ``refs`` depend on no input (``trace.constant``)?"""
    constant = trace.constant
    for ref in refs:
        if ref.node not in constant:
            return False
    return True


def _bind_general(op, args, attrs):
    """``bind`` for anything: tracers of nested traces (lifted), arrays (on shapes alone in
    a lazy trace), pending values, NumPy scalars."""
    trace = None
    for a in args:
        if isinstance(a, Tracer) and (trace is None or a._trace.level > trace.level):
            trace = a._trace
    if trace is None:
        return op.impl(*args, **attrs)
    values, refs = [], []
    constant = True
    scalars = True  # every input a scalar: a lazy trace computes the op at once
    for a in args:
        if isinstance(a, Tracer):
            if a._trace is not trace:
                a = trace.lift(a)
            ref = a.ref
            values.append(a._value)
            if constant and ref.node not in trace.constant:
                constant = False
        else:
            values.append(a)
            ref = _const_ref(trace, op, a, args)
        refs.append(ref)
        if scalars and ref.node.avals[ref.index].shape:
            scalars = False
    if (trace.shared is not None and op.name in _SIGNED
            and refs[-1].node.op.name in _MAY_BE_NEGATED):
        cancelled = _signs_cancelled(trace, op, refs)
        if cancelled is not None:
            return cancelled
    pending = Pending in map(type, values)
    if trace.lazy and not constant and (pending or not scalars):
        result = _bind_abstract(trace, op, values, refs, attrs, args, pending)
        if result is not None:
            return result
    if pending:  # computed for real: what it reads is computed first
        values = [concrete(trace.values, r) if type(v) is Pending else v
                  for v, r in zip(values, refs, strict=True)]
    out = op.impl(*values, **attrs)
    return _record(trace, op, tuple(refs), attrs, out, constant, args)


def _record(trace, op, refs, attrs, out, constant, args):
    """The node of ``op(*refs)`` whose value is ``out`` (or the one Shared finds equal)."""
    try:
        avals = [aval_of(o) for o in out] if op.n_out > 1 else (
            _PY_AVALS.get(type(out)) or aval_of(out),)  # a Python number's: no call
    except TypeError as e:
        raise UnsupportedOperation(f"{op.name} gave a value gradgen cannot trace ({e})",
                                   trace.site.loc or current_loc()) from None
    key = None
    if trace.shared is not None:
        same, key = trace.shared.find(op, refs, attrs, avals[0])
        if same is not None:
            return Tracer(trace, same, out)
    node = trace.add(op, refs, attrs, avals)
    if key is not None:
        trace.shared.known[key] = node
    if constant:
        trace.constant.add(node)
    if op.n_out > 1:
        trace.values[node] = out
        return tuple(Tracer(trace, Ref(node, i), o) for i, o in enumerate(out))
    result = Tracer(trace, node.out, out)
    if trace.live is not None and type(out) is np.ndarray and not constant:
        trace.values[node] = Pending.of(out)
        trace.live[node] = weakref.ref(result)
    else:
        trace.values[node] = out
    if op.extra.get("view") and isinstance(args[0], Tracer):
        _register_view(args[0], result, node)
    return result


def _const_ref(trace, op, value, args) -> Ref:
    """A constant operand's node. A backward rule's int beside a traced value (its 1 or 2)
    is recorded as the float the arithmetic makes of it (peephole.float_literal)."""
    if type(value) is int and trace.role == "bwd" and len(args) == 2:
        value = float_literal(op.name, value, args[value is args[0]])
    return trace.const(value)


# The numbers an arithmetic identity of Python numbers reads (peephole.identical_input: x * 1,
# x + 0, x - 0, x / 1, x ** 1); a constant operand of another value makes no identity
_UNITS = (0, 1)
_SIGNED = {"neg", "sub", "mul", "div"}  # where reverse mode cancels pairs of signs
_MAY_BE_NEGATED = {"neg", "mul", "div"}  # (peephole.negated_path)


def _may_carry_sign(name: str, refs) -> bool:
    """Could ``_signs_cancelled`` find a pair of signs in ``name(*refs)``? Only when each
    operand it looks at is a product, a quotient or a negation reverse mode made (where
    peephole.negated_path starts); most operands are not, and need no walk. (bind asks
    about the last operand first, inline.)"""
    last = refs[-1].node
    if last.role != "bwd" or last.op.name not in _MAY_BE_NEGATED:
        return False
    if name == "mul" or name == "div":
        first = refs[0].node
        return first.role == "bwd" and first.op.name in _MAY_BE_NEGATED
    return True


def _signs_cancelled(trace, op, refs):
    """Reverse mode: ``op(*refs)`` with a pair of signs cancelled, or None when it has none:
    -(-g * s) is g * s, u - (-g * s) is u + g * s, (-a * b) * (-c) is a * b * c. Exact (see
    peephole.negated_path), and the rules stay as the maths reads (d cos = -g * sin)."""
    name = op.name  # (the caller saw that the last operand may carry a sign)
    if name == "neg":
        path = negated_path(refs[0], trace.sole_adjoint)
        if path is None or (len(path) == 1 and refs[0].aval.py is None):
            return None  # an array's -(-x) is x itself: fold's, once aliasing is known
        return _without_sign(trace, path)
    if name == "sub":
        path = negated_path(refs[1], trace.sole_adjoint)
        if path is None:
            return None
        return bind(OPS["add"], (trace.tracer(refs[0]), _without_sign(trace, path)), {})
    first = negated_path(refs[0], trace.sole_adjoint)  # mul, div: both operands negated
    second = negated_path(refs[1], trace.sole_adjoint) if first is not None else None
    if second is None:
        return None
    return bind(op, (_without_sign(trace, first), _without_sign(trace, second)), {})


def _without_sign(trace, path: list[Node]) -> Tracer:
    """The value of ``path``'s first node with its negation (the last node) left out."""
    value = trace.tracer(path[-1].inputs[0])
    for node in reversed(path[:-1]):
        value = bind(node.op, (value, trace.tracer(node.inputs[1])), {})
    return value


def _bind_abstract(trace, op, values, refs, attrs, args, pending):
    """The op on shapes alone (a lazy trace): a node whose value is Pending, or None when it
    is to be computed: all inputs known scalars (free, and a derivative that does not exist
    there is reported at once) or a row without an abstract rule."""
    if op.abstract is None:
        return None
    if not pending and all(r.aval.shape == () for r in refs):
        return None
    found = abstract_value(op, [stand_in(v, r) for v, r in zip(values, refs, strict=True)],
                           attrs)
    if found is None:
        return None
    avals, value = found
    node = trace.add(op, refs, attrs, avals)
    trace.values[node] = value
    if op.n_out > 1:
        return tuple(Tracer(trace, Ref(node, i), value) for i in range(op.n_out))
    result = Tracer(trace, node.out, value)
    if op.extra.get("view") and isinstance(args[0], Tracer) and node.is_view \
            and value.arrays[0]:  # cannot ask NumPy: a view unless it says it copies
        _register_view(args[0], result, node, force=True)
    return result


def _register_view(base: Tracer, view: Tracer, node: Node, force: bool = False) -> None:
    """NumPy shares memory between ``base`` and a view of it (``x[0]``, ``x.T``): a later
    write into either must show in the other, so the pair is remembered (weakly)."""
    if node.op.name == "reshape":  # a view or a copy by memory layout: inplace.py refuses
        force = True  # writes across it when it could be either
    if not force and (not isinstance(view.value, np.ndarray)
                      or not np.may_share_memory(view.value, base.value)):
        return
    view.base = (base, node)
    if base.views is None:
        base.views = []
    base.views.append(weakref.ref(view))


_new_tracer = object.__new__


def new_tracer(trace: Trace, ref: Ref, value) -> Tracer:
    """``Tracer(trace, ref, value)`` by a plain function (the recorders make one per op:
    calling a class with a Python ``__init__`` costs several times what its stores do)."""
    tracer = _new_tracer(Tracer)
    tracer._trace = trace
    tracer.ref = ref
    tracer._value = value
    return tracer

_op = OPS.__getitem__  # the row of an op by name: _op("ne")(self, 0)


def _unsupported(what: str, hint: str | None = None) -> UnsupportedOperation:
    return UnsupportedOperation(
        what, current_loc(),
        hint or "add a rule with gradgen.defvjp (see docs/ops.md) or wrap the code in a "
        "gradgen.Function with a backward")


class Tracer:
    """A value seen by the user's code while tracing: the concrete value plus its node."""

    # What only arrays written in place have lives in the instance __dict__, made on the first
    # write (most tracers never get one): the class holds the defaults. A tracer is made per
    # recorded op, so its constructor sets three fields, not six.
    __slots__ = ("__dict__", "__weakref__", "_trace", "_value", "ref")
    __array_priority__ = 1000
    base: tuple[Tracer, Node] | None = None  # (array it is a view of, view node)
    views: list[weakref.ref] | None = None  # live views of this array
    history: list[Node] | None = None  # older versions, overwritten in place

    def __init__(self, trace: Trace, ref: Ref, value):  # (bind sets the same three itself)
        self._trace = trace
        self.ref = ref
        self._value = value  # or Pending: computed when first asked for

    @property
    def value(self):
        """The concrete value (computed now if it was pending: see abstract.py)."""
        value = self._value
        if type(value) is Pending:
            value = self._value = concrete(self._trace.values, self.ref)
        return value

    @value.setter
    def value(self, value):
        self._value = value

    @property
    def is_constant(self) -> bool:
        """Does this value depend on no input? Then it may be used as a plain number."""
        return self.ref.node in self._trace.constant

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

    def __format__(self, spec):
        # f"{loss:.4f}" in a print or a log line: the value of this trace, as print(loss)
        # shows it. A string carries no gradient, so nothing is hidden from one.
        return format(self.value, spec) if spec else str(self)

    # copy.copy / copy.deepcopy (of a dict of params, say) copy the traced value: an op, so
    # a write into the copy leaves the original alone, as with arrays
    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce_ex__(self, protocol):
        raise _unsupported(
            "pickling a traced value would freeze this trace's number into the result",
            "pickle the arguments or the result outside the traced function")

    # --- arithmetic (bind called directly: one call fewer per operator on a tracer) ----------
    def __add__(self, o):
        return bind(OPS["add"], (self, o), _NO_ATTRS)

    def __radd__(self, o):
        return bind(OPS["add"], (o, self), _NO_ATTRS)

    def __sub__(self, o):
        return bind(OPS["sub"], (self, o), _NO_ATTRS)

    def __rsub__(self, o):
        return bind(OPS["sub"], (o, self), _NO_ATTRS)

    def __mul__(self, o):
        return bind(OPS["mul"], (self, o), _NO_ATTRS)

    def __rmul__(self, o):
        return bind(OPS["mul"], (o, self), _NO_ATTRS)

    def __truediv__(self, o):
        return bind(OPS["div"], (self, o), _NO_ATTRS)

    def __rtruediv__(self, o):
        return bind(OPS["div"], (o, self), _NO_ATTRS)

    def __pow__(self, o, mod=None):
        if mod is not None:
            raise _unsupported("pow() with a modulus on a traced value")
        return bind(OPS["pow"], (self, o), _NO_ATTRS)

    def __rpow__(self, o):
        return bind(OPS["pow"], (o, self), _NO_ATTRS)

    def __matmul__(self, o):
        return bind(OPS["matmul"], (self, o), _NO_ATTRS)

    def __rmatmul__(self, o):
        return bind(OPS["matmul"], (o, self), _NO_ATTRS)

    def __neg__(self):
        return bind(OPS["neg"], (self,), _NO_ATTRS)

    def __pos__(self):
        return self

    def __abs__(self):
        return bind(OPS["abs"], (self,), _NO_ATTRS)

    def __floordiv__(self, o):
        return bind(OPS["floordiv"], (self, o), _NO_ATTRS)

    def __rfloordiv__(self, o):
        return bind(OPS["floordiv"], (o, self), _NO_ATTRS)

    def __mod__(self, o):
        return bind(OPS["mod"], (self, o), _NO_ATTRS)

    def __rmod__(self, o):
        return bind(OPS["mod"], (o, self), _NO_ATTRS)

    def __divmod__(self, o):  # divmod(x, 1.0): Python's and NumPy's (x // o, x % o)
        return self // o, self % o

    def __rdivmod__(self, o):
        return o // self, o % self

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise _unsupported("round() with digits of a traced value")
        return bind(OPS["round"], (self,), _NO_ATTRS)

    def __floor__(self):
        return bind(OPS["floor"], (self,), _NO_ATTRS)

    def __ceil__(self):
        return bind(OPS["ceil"], (self,), _NO_ATTRS)

    def __trunc__(self):
        return bind(OPS["trunc"], (self,), _NO_ATTRS)

    # --- comparisons: traced booleans, turned into guards by bool() --------------------------
    def __lt__(self, o):
        return bind(OPS["lt"], (self, o), _NO_ATTRS)

    def __le__(self, o):
        return bind(OPS["le"], (self, o), _NO_ATTRS)

    def __gt__(self, o):
        return bind(OPS["gt"], (self, o), _NO_ATTRS)

    def __ge__(self, o):
        return bind(OPS["ge"], (self, o), _NO_ATTRS)

    def __eq__(self, o):
        return bind(OPS["eq"], (self, o), _NO_ATTRS)

    def __ne__(self, o):
        return bind(OPS["ne"], (self, o), _NO_ATTRS)

    __hash__ = object.__hash__

    def __bool__(self):
        if self.is_constant:
            return bool(self.value)
        if self.aval.size != 1:
            raise AmbiguousCondition(
                f"the truth value of a traced array of shape {self.shape} is ambiguous (`if`, "
                "`while`, `and`, `or` and `not` need one True or False)", current_loc(),
                "for a choice per element write np.where(condition, a, b); for one decision, "
                "np.any(condition) or np.all(condition)")
        cond = self
        if self.dtype.kind != "b":  # truthiness of a number: the guard is `x != 0`
            cond = _op("ne")(self, 0)
        outcome = bool(cond.value)
        trace = cond._trace
        trace.add(OPS["guard"], (cond.ref,), {"expect": outcome}, ())
        return outcome

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise TypeError(f"a traced {self.dtype} value cannot be used as an index")
        value = int(self.value)
        if self.is_constant:
            return value
        if not (self == value):  # records the guard `n == value`; always true here
            raise AssertionError("unreachable")
        return value

    def __int__(self):
        if self.is_constant:
            return int(self.value)
        if self.dtype.kind in "iub":
            return self.__index__()
        if self.aval.py is None:  # a NumPy float: int() itself, as the user wrote it
            return _op("cast")(self, dtype="int").__index__()
        return _op("trunc")(self).__index__()

    def __float__(self):
        if self.is_constant:
            return float(self.value)
        raise _unsupported(
            "float() of a traced value would hide it from the gradient",
            "use the value itself (it already behaves like a number), or wrap the code in a "
            "gradgen.Function with a backward")

    def __complex__(self):
        raise _unsupported("complex() of a traced value")

    def item(self, *args):
        if self.is_constant:
            return np.asarray(self.value).item(*args)
        raise _unsupported(".item() of a traced value would hide it from the gradient",
                           "use the array itself, e.g. x.sum() or x.reshape(())")

    def tolist(self):
        if self.is_constant:
            return np.asarray(self.value).tolist()
        raise _unsupported(".tolist() of a traced value would hide it from the gradient")

    def __array__(self, dtype=None, copy=None):
        if self.is_constant:
            return np.asarray(self.value, dtype=dtype)
        if self.aval.dtype.kind in "iub":  # most often table[i]: NumPy's own indexing
            raise _unsupported(
                "a traced index or mask used on a plain NumPy array (table[i] where i comes "
                "from traced values) would be read as fixed numbers",
                "make the array one of the traced code, table = np.asarray(table) inside the "
                "function, so that table[i] is traced too; or use np.take_along_axis")
        raise _unsupported(
            "converting a traced value to a plain NumPy array (np.asarray, np.array, "
            "np.float64(x) or a NumPy function without a gradient rule) would hide it from "
            "the gradient", "for np.float64(x) write x.astype(np.float64); otherwise add a "
            "rule with gradgen.defvjp (see docs/ops.md) or wrap the code in a gradgen.Function "
            "with a backward")

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a scalar")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, index):
        return BOUND["getitem"](self, index)

    def __setitem__(self, index, value):
        BOUND["setitem"](self, index, value)

    # x += y on a number rebinds the name (x = x + y); on an array it writes into the array,
    # which every view and alias of it sees: a new version (see inplace.py).
    def _inplace(self, op_name, o):
        result = _op(op_name)(self, o)
        if not isinstance(shaped(self), np.ndarray):
            return result
        BOUND["overwrite"](self, result)
        return self

    def __iadd__(self, o):
        return self._inplace("add", o)

    def __isub__(self, o):
        return self._inplace("sub", o)

    def __imul__(self, o):
        return self._inplace("mul", o)

    def __itruediv__(self, o):
        return self._inplace("div", o)

    def __ipow__(self, o):
        return self._inplace("pow", o)

    def __imatmul__(self, o):
        return self._inplace("matmul", o)

    # --- NumPy -------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.pop("out", None)
        if method == "at" and ufunc is np.add:  # np.add.at(a, idx, v): a scatter-add in place
            return BOUND["add.at"](*inputs)
        if method in ("reduce", "accumulate") and (ufunc in _UFUNC_METHODS[method]
                                                   or (ufunc, method) in BOUND):
            return _ufunc_method(ufunc, method, inputs, kwargs)
        if method == "outer" and len(inputs) == 2 and not kwargs and BOUND.get(ufunc):
            # np.add.outer(x, y): x with one new axis per axis of y, then broadcast
            x, y = (from_nested(v, None) if isinstance(v, list | tuple) else v for v in inputs)
            extra = (1,) * np.ndim(shaped(y))
            x = BOUND[np.reshape](x, np.shape(shaped(x)) + extra) if extra else x
            return self.__array_ufunc__(ufunc, "__call__", x, y)
        if method != "__call__":
            raise _unsupported(f"np.{ufunc.__name__}.{method} on a traced value")
        handler = BOUND.get(ufunc)
        if handler is None or kwargs:
            if _all_constant(inputs) and not kwargs:
                return ufunc(*(tracer_value(a) for a in inputs))
            spelled = FOREIGN.get(f"scipy.special.{ufunc.__name__}")
            if handler is None and spelled is not None and not kwargs:
                return spelled(*inputs)  # scipy.special.expit: its NumPy form's rows
            if handler is None and getattr(ufunc, "__module__", None) != "numpy":  # SciPy's
                special = sys.modules.get("scipy.special")
                name = (f"scipy.special.{ufunc.__name__}" if getattr(
                    special, ufunc.__name__, None) is ufunc else f"the ufunc {ufunc.__name__}")
                raise UnsupportedOperation(f"{name} has no gradient rule in gradgen",
                                           current_loc(), scipy_hint(ufunc.__name__))
            extra = f" with {', '.join(kwargs)}=" if kwargs and handler else ""
            raise _unsupported(f"np.{ufunc.__name__}{extra} has no gradient rule in gradgen")
        result = handler(*_numpy_scalars(inputs))
        if out is None:
            return result
        # np.add(a, b, out=a): the result written into a
        return BOUND["out="](out, result, ufunc.__name__)

    def __array_function__(self, func, types, args, kwargs):
        if func in _STATIC_QUERIES:  # shape questions: known at trace time, no node needed
            return func(*(shaped(a) for a in args), **kwargs)
        handler = BOUND.get(func)
        if handler is None:
            if _all_constant(args) and _all_constant(kwargs.values()):
                return func(*_values(args), **{k: _values([v])[0] for k, v in kwargs.items()})
            name = numpy_name(func)
            raise _unsupported(f"{name} has no gradient rule in gradgen", numpy_hint(name))
        return handler(*args, **kwargs)

    # --- NumPy-style methods: the function of the same name (see _METHOD_TWINS) ------------
    @property
    def T(self):
        return BOUND[np.transpose](self)

    @property
    def mT(self):
        return np.swapaxes(self, -1, -2)

    @property
    def real(self):
        return np.real(self)

    @property
    def imag(self):
        return np.imag(self)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple | list) else shape
        return np.reshape(self, tuple(shape), order=order)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], tuple | list | None) else axes
        return np.transpose(self, tuple(axes) if axes else None)

    def flatten(self, order="C"):
        if order not in ("C", "F"):
            raise _unsupported(f".flatten(order={order!r}) of a traced value")
        return _op("copy")(np.reshape(self, (self.size,), order=order))  # never a view

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        dtype = np.dtype(dtype)
        if dtype.kind not in "biuf":
            raise _unsupported(f".astype({dtype}) of a traced value")
        if dtype == self.dtype and not copy:
            return self
        return _op("cast")(self, dtype=dtype.name)

    def copy(self, order="C"):
        return _op("copy")(self)

    def conjugate(self):
        return self

    def conj(self):
        return self

    def fill(self, value):
        BOUND["overwrite"](self, value)

    # & | ^ ~ on boolean masks: the logical rows (on integers, NumPy's bitwise ufuncs)
    def _bits(self, logical, bitwise, o, first=True):
        both_bool = self.dtype.kind == "b" and np.result_type(shaped(o)).kind == "b"
        fn = logical if both_bool else bitwise
        return fn(self, o) if first else fn(o, self)

    def __and__(self, o):
        return self._bits(np.logical_and, np.bitwise_and, o)

    def __rand__(self, o):
        return self._bits(np.logical_and, np.bitwise_and, o, first=False)

    def __or__(self, o):
        return self._bits(np.logical_or, np.bitwise_or, o)

    def __ror__(self, o):
        return self._bits(np.logical_or, np.bitwise_or, o, first=False)

    def __xor__(self, o):
        return self._bits(np.logical_xor, np.bitwise_xor, o)

    def __rxor__(self, o):
        return self._bits(np.logical_xor, np.bitwise_xor, o, first=False)

    def __invert__(self):
        return np.logical_not(self) if self.dtype.kind == "b" else np.invert(self)

    def __iand__(self, o):
        return self._inplace_ufunc(np.logical_and if self.dtype.kind == "b" else np.bitwise_and,
                                   o)

    def __ior__(self, o):
        return self._inplace_ufunc(np.logical_or if self.dtype.kind == "b" else np.bitwise_or, o)

    def __ixor__(self, o):
        return self._inplace_ufunc(np.logical_xor if self.dtype.kind == "b" else np.bitwise_xor,
                                   o)

    def _inplace_ufunc(self, ufunc, o):
        result = ufunc(self, o)
        if not isinstance(shaped(self), np.ndarray):
            return result
        BOUND["overwrite"](self, result)
        return self

    @property
    def nbytes(self):
        return self.aval.size * self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def sort(self, axis=-1, kind=None, order=None):
        BOUND["overwrite"](self, np.sort(self, axis=axis))


def _method_twin(name: str, func):
    def method(self, *args, **kwargs):
        return func(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"Tracer.{name}"
    method.__doc__ = f"x.{name}(...) is {numpy_name(func)}(x, ...)."
    return method


# ndarray methods whose NumPy function twin takes the array first with the same arguments.
_METHOD_TWINS = {
    name: getattr(np, name) for name in (
        "sum", "mean", "prod", "max", "min", "var", "std", "cumsum", "cumprod", "dot", "ravel",
        "squeeze", "repeat", "clip", "round", "take", "swapaxes", "trace", "diagonal",
        "argmax", "argmin", "argsort", "nonzero", "any", "all", "ptp", "searchsorted",
        "compress", "choose")
    if hasattr(np, name)
}


def numpy_name(func) -> str:
    """How user code spells a NumPy function: np.sum, np.linalg.solve."""
    module = (getattr(func, "__module__", None) or "numpy").replace("numpy", "np")
    if module.startswith(("np.core", "np._core", "np.lib")) or module == "np":
        return f"np.{func.__name__}"
    return f"{module}.{func.__name__}"


# np.add.reduce(x) is np.sum(x, axis=0); np.maximum.accumulate has a row (ops/running.py)
_UFUNC_METHODS = {
    "reduce": {np.add: np.sum, np.multiply: np.prod, np.maximum: np.max, np.minimum: np.min},
    "accumulate": {np.add: np.cumsum, np.multiply: np.cumprod},
}


def _ufunc_method(ufunc, method, inputs, kwargs):
    """``np.add.reduce(x, axis)`` and its kind as the NumPy function that computes the same
    numbers; the ufunc methods default to axis 0 where the functions default to all axes."""
    allowed = ("axis", "keepdims") if method == "reduce" else ("axis",)
    extra = [k for k in kwargs if k not in allowed and kwargs[k] is not None]
    if len(inputs) != 1 or extra:
        words = f" with {', '.join(extra)}=" if extra else ""
        raise _unsupported(f"np.{ufunc.__name__}.{method}{words} has no gradient rule in gradgen")
    axis = kwargs.get("axis", 0)
    # the rows' own handlers (np.maximum.accumulate: ops/running.py), else a NumPy twin
    function = BOUND.get((ufunc, method)) or _UFUNC_METHODS[method][ufunc]
    if method == "accumulate" and axis is None:
        raise _unsupported(f"np.{ufunc.__name__}.accumulate with axis=None")
    return function(inputs[0], axis=axis, **({"keepdims": True} if kwargs.get("keepdims")
                                             else {}))


def has_traced(obj) -> bool:
    if isinstance(obj, Tracer):
        return not obj.is_constant
    if isinstance(obj, list | tuple):
        return any(has_traced(v) for v in obj)
    return False


def from_nested(obj, dtype):
    """``np.array([a, b])`` of traced values (nested lists of them too): one np.stack per level."""
    if isinstance(obj, list | tuple):
        items = [from_nested(v, None) for v in obj]
        out = BOUND[np.stack](items) if has_traced(items) else np.array(plain_values(items))
    else:
        out = obj
    if dtype is not None:
        out = out.astype(dtype) if isinstance(out, Tracer) else np.asarray(out, dtype)
    return out


def plain_values(x):
    """The concrete value of a constant (a buffer, or what was computed from buffers alone),
    lists of them included; anything else as it is."""
    if isinstance(x, Tracer) and x.is_constant:
        return x.value
    if isinstance(x, list | tuple):
        return type(x)(plain_values(v) for v in x)
    return x


def _values(items) -> list:
    return [tracer_value(a) if not isinstance(a, list | tuple) else type(a)(_values(a))
            for a in items]


def _all_constant(items) -> bool:
    """No traced input in ``items`` (nested lists included) but constant buffers."""
    for a in items:
        if isinstance(a, Tracer) and not a.is_constant:
            return False
        if isinstance(a, list | tuple) and not _all_constant(a):
            return False
    return True


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


def shaped(x):
    """For shape, dtype and kind questions: ``x``'s value when it is known, else a stand-in
    with its shape, dtype and kind (never computing a pending value); ``x`` if not traced."""
    return stand_in(x._value, x.ref) if isinstance(x, Tracer) else x


def check_traceable(value, what: str) -> None:
    try:
        aval_of(value)
    except TypeError as e:
        raise GradgenError(f"{what} is not a number or a NumPy array of numbers ({e})") from None


def in_trace() -> bool:
    return bool(_stack())


def is_tracer(x) -> bool:
    return isinstance(x, Tracer)


for _name, _func in _METHOD_TWINS.items():
    setattr(Tracer, _name, _method_twin(_name, _func))


class _NoGradient:
    """``x.name`` for an ndarray attribute the Tracer lacks: a clear error, where NumPy would
    compute something gradgen cannot trace. (A descriptor per name, not ``__getattr__``: a
    class with ``__getattr__`` has every attribute read take CPython's slow path, and reverse
    mode reads a tracer's fields a few times per recorded op.)"""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __get__(self, tracer, owner=None):
        if tracer is None:
            return self
        raise _unsupported(f"x.{self.name} of a traced array has no gradient rule in gradgen")


for _name in dir(np.ndarray):
    if not _name.startswith("__") and not hasattr(Tracer, _name):
        setattr(Tracer, _name, _NoGradient(_name))


set_bind(bind)
