"""Run a user function on tracers and return its forward graph, with the user's names."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import traceback
import types
from dataclasses import dataclass

import numpy as np

from .errors import GradgenError, UnsupportedOperation
from .intercept import Interceptor
from .ir import SERIALS, Graph, Node, aval_of
from .pytree import LEAF, TreeDef, flatten, leaf_name, leaf_paths, unflatten
from .source import (
    SourceLoc,
    analyse_code,
    frame_line,
    is_user_file,
    loc_of_frame,
    parameter_names,
    refresh,
)
from .tracer import Trace, Tracer, set_watcher


class _FrameNames:
    """Per user frame: the line running now, and finished assignment lines not yet matched
    with the values they bound."""

    __slots__ = ("callee", "finished", "first", "info", "lasti", "line", "table", "targets")

    def __init__(self, frame, callee, table):
        self.table = table  # line -> LineInfo of the frame's file
        self.line = frame_line(frame)
        self.info = table.get(self.line)  # what the running line assigns, if known
        self.lasti = frame.f_lasti
        self.callee = callee  # the frame it was calling when last seen
        self.first = SERIALS.peek  # the first node the running line may have made
        self.finished: list[tuple[tuple[str, ...], int, int]] = []
        self.targets: set[str] = set()


class BindingObserver:
    """Learns which value each assignment bound, from the user's frames as values are made.

    Each time a traced value is about to be recorded, the user frames on the stack are
    compared with what they were running at the previous record: a frame that moved to
    another line, or ran the same line again (a loop: its instruction offset went back, or
    the same call instruction made a new call), has finished its previous line, which is
    remembered with the serial numbers of the nodes made while it ran. Lines that made no
    value are never looked at, and nothing runs between records: no ``sys.settrace``.

    The frame's locals are read (one snapshot, as Python 3.11 copies them all) only when a
    remembered target is about to be assigned again, or when the frame has returned; a
    tracer created during that line then gets the target as its name. So straight-line code
    costs one snapshot, and a loop one per iteration. Outer frames finish later and win, so
    ``y = helper(x)`` names the value ``y``. Without it names fall back gracefully and
    gradients are unaffected.
    """

    _active: BindingObserver | None = None

    def __init__(self):
        self.frames: dict[types.FrameType, _FrameNames] = {}
        self.stack: list[types.FrameType] = []  # the frames in self.frames, outermost first
        self.boundary = None  # the frame that started the trace: never walked past
        self.installed = False
        self.outer: BindingObserver | None = None

    def __enter__(self):
        # A trace inside a trace (grad of a function that calls grad) names its own values;
        # anything else already set here means "keep out" (benchmarks measure without us).
        outer = BindingObserver._active
        if outer is None or isinstance(outer, BindingObserver):
            self.outer = outer
            BindingObserver._active = self
            self.installed = True
            self.boundary = sys._getframe(1)
            set_watcher(self.see, self._next_line)
        return self

    def __exit__(self, exc_type, *exc):
        if self.installed:
            outer = self.outer
            set_watcher(outer.see if outer is not None else None,
                        outer._next_line if outer is not None else None)
            BindingObserver._active = self.outer
            try:
                if exc_type is None:
                    self._returned(0)
            finally:
                self.frames.clear()
                self.stack.clear()
                self.boundary = None

    def see(self, frame, callee, line: int, lasti: int) -> _FrameNames:
        """A value is about to be recorded from user ``frame`` (running ``line``, at
        instruction ``lasti``), inside its call ``callee``; returns the frame's record,
        which the tracer keeps up to date while the frame goes on with that line."""
        state = self.frames.get(frame)
        if state is not None and frame is self.stack[-1]:  # (once per line: _step, inline)
            if line == state.line and (lasti > state.lasti or lasti == state.lasti
                                       and callee is state.callee):
                state.lasti, state.callee = lasti, callee
            else:
                self._next_line(frame, state, callee, line, lasti)
            return state
        new = []  # user frames not seen before, innermost first, with the frame each calls
        known = frame
        while known is not None and known is not self.boundary and known not in self.frames:
            if is_user_file(known.f_code.co_filename):
                new.append((known, callee))
            callee, known = known, known.f_back
        anchored = known is not None and known is not self.boundary
        self._returned(self.stack.index(known) + 1 if anchored else 0)
        if anchored:
            self._step(known, self.frames[known], callee)
        for user, calls in reversed(new):
            self.frames[user] = _FrameNames(user, calls, analyse_code(user.f_code))
            self.stack.append(user)
        return self.frames[frame]

    def _step(self, frame, state: _FrameNames, callee, line: int | None = None) -> None:
        if line is None:
            line = frame_line(frame)
        lasti = frame.f_lasti
        if line == state.line and (lasti > state.lasti or lasti == state.lasti
                                   and callee is state.callee):
            state.lasti, state.callee = lasti, callee  # still the same run of the line
            return
        self._next_line(frame, state, callee, line, lasti)

    @staticmethod
    def _next_line(frame, state: _FrameNames, callee, line: int, lasti: int) -> None:
        """``frame`` has moved on to ``line`` (or runs it again). (The tracer calls it
        directly when the frame is the one the last value came from.)"""
        peek = SERIALS.peek
        # (_finish_line, inline: this runs once per line. A LineInfo's targets are read as
        # its item 0: reading a named field of a tuple calls a descriptor the interpreter
        # does not specialize, several times what the index costs.)
        done = state.info
        if done is not None and (targets := done[0]):
            state.finished.append((targets, state.first, peek))
            state.targets.update(targets)
        info = state.table.get(line)
        if info is not None and (targets := info[0]) and not state.targets.isdisjoint(targets):
            BindingObserver._resolve(frame, state)  # before this line binds a name again
        state.line, state.lasti, state.callee, state.info, state.first = (
            line, lasti, callee, info, peek)

    @staticmethod
    def _finish_line(state: _FrameNames, end: int) -> None:
        """The running line is done: remember what it assigned and the nodes it made."""
        info = state.info
        if info is not None and info.targets:
            state.finished.append((info.targets, state.first, end))
            state.targets.update(info.targets)

    def _returned(self, depth: int) -> None:
        """The frames above ``depth`` have returned: innermost first, what they bound."""
        while len(self.stack) > depth:
            frame = self.stack.pop()
            state = self.frames.pop(frame)
            self._finish_line(state, SERIALS.peek)
            self._resolve(frame, state)

    @staticmethod
    def _resolve(frame, state: _FrameNames) -> None:
        if not state.finished:
            return
        local_values = frame.f_locals
        for targets, first, end in state.finished:
            for name in targets:
                value = local_values.get(name)
                if not isinstance(value, Tracer):
                    continue
                node = value.ref.node
                if first <= node.serial < end and (
                        node.role == "fwd" or node.role == "const" and node.name is None):
                    node.name = name  # a constant too: h = np.zeros(...) names what h[t] = ... writes
                elif value.history:  # h = np.zeros(...), then h[t] = ...: versions of h
                    _name_versions(value, name, first, end)
        state.finished.clear()
        state.targets.clear()


def _name_versions(value: Tracer, name: str, first: int, end: int) -> None:
    versions = [*value.history, value.ref.node]
    for k, node in enumerate(versions):
        if first <= node.serial < end and node.role in ("fwd", "const"):
            for later in versions[k:]:
                if later.name is None and later.role == "fwd" or later is node:
                    later.name = name
            return


# ndarray subclasses whose meaning a plain array drops: the trace would differentiate the
# data under a mask, or matrix products where the user wrote elementwise ones
_DROPPED_MEANING = (np.ma.MaskedArray, np.matrix)


def _array_subclass_error(fn, leaf: Leaf) -> GradgenError:
    kind = "masked array" if isinstance(leaf.value, np.ma.MaskedArray) else "np.matrix"
    x = leaf.name
    spelled = (f"{x}.filled(0.0), and the mask as an array of its own (np.ma.getmaskarray({x}))"
               if kind == "masked array" else f"np.asarray({x}), with @ for matrix products")
    return GradgenError(
        f"argument {leaf.name!r} is a {kind}: gradgen traces plain NumPy arrays, and tracing "
        f"this one would drop what makes it a {kind}", function_loc(fn), f"pass {spelled}")


def _refuse_the_call(fn, args, error: TypeError) -> None:
    """Raise a GradgenError when ``fn`` cannot be called with ``args`` at all (a missing or
    an extra argument); return when the TypeError is another one."""
    if not callable(fn):
        raise GradgenError(f"{type(fn).__name__} object {fn!r} is not a function") from None
    try:
        signature = inspect.signature(fn)
        signature.bind(*args)
    except TypeError as mismatch:
        count = f"{len(args)} positional argument{'s' if len(args) != 1 else ''}"
        raise GradgenError(
            f"{getattr(fn, '__name__', 'the function')}{signature} cannot be called with {count}: {mismatch}",
            function_loc(fn), "pass every parameter the function needs, in order") from None
    except ValueError:  # no signature to ask (a builtin)
        return


_GRADGEN_DIR = os.path.dirname(os.path.abspath(__file__))


def _unseen_code_error(error: Exception) -> UnsupportedOperation | None:
    """A TypeError about a Tracer from code gradgen does not trace (the standard library's
    statistics.mean, a C function): refused as the operation it is, at the user's line that
    called it. None for any other error: the user's own, passed through."""
    if not isinstance(error, TypeError) or "Tracer" not in str(error):
        return None
    user, callee = None, None
    for frame, _ in traceback.walk_tb(error.__traceback__):
        if is_user_file(frame.f_code.co_filename):
            user, callee = frame, None
        elif user is not None and callee is None:
            callee = frame
    if user is None:
        return None
    if callee is not None and not callee.f_code.co_filename.startswith(_GRADGEN_DIR):
        module = callee.f_globals.get("__name__", "?")
        what = f"{module}.{callee.f_code.co_name} cannot take a traced value"
    else:
        what = "a traced value reached code gradgen cannot see"
    return UnsupportedOperation(
        f"{what} ({error})", loc_of_frame(user),
        "write it with NumPy or Python arithmetic on the value, or wrap the code in a "
        "gradgen.Function with a backward")


def _gradgen_cause(error: BaseException) -> GradgenError | None:
    """The GradgenError that a NumPy error was raised while handling, if any."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, GradgenError):
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


def function_name(fn) -> str:
    """A name usable in emitted code: the function's own (a functools.partial's function's),
    or ``anonymous`` for a lambda."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", "") or ""
    return name if name.isidentifier() else "anonymous"


def unwrapped(fn):
    """``inspect.unwrap(fn)``; a plain function that wraps nothing is answered without it
    (its ``hasattr(f, "__wrapped__")`` raises and catches an AttributeError: asked three
    times per first call)."""
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
        return fn
    while isinstance(fn, functools.partial):  # the code, source and file of its function
        fn = fn.func
    return inspect.unwrap(fn)


def function_loc(fn) -> SourceLoc | None:
    code = getattr(unwrapped(fn), "__code__", None)
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno, code.co_name)


def is_numeric(value) -> bool:
    try:
        aval_of(value)
    except TypeError:
        return False
    return True


@dataclass
class Leaf:
    """One leaf of the (flattened) arguments: which argument, where inside it, its name."""

    arg: int
    path: tuple
    name: str
    value: object

    @property
    def numeric(self) -> bool:
        return is_numeric(self.value)


# Arguments that are one leaf of their own (no container): the common case, numbers and arrays
_BARE_LEAVES = frozenset({float, int, bool, np.float64, np.ndarray})


def flatten_arguments(args, names, loc=None) -> tuple[list[Leaf], list[TreeDef]]:
    """Every argument's leaves (a plain number or array is one leaf), with unique names.
    ``loc``, the function's, starts the message about an argument gradgen cannot take."""
    leaves: list[Leaf] = []
    trees: list[TreeDef] = []
    taken = set(names)
    for i, (value, name) in enumerate(zip(args, names, strict=True)):
        if type(value) in _BARE_LEAVES:  # what flatten says of it, without asking
            trees.append(LEAF)
            leaves.append(Leaf(i, (), name, value))
            continue
        try:
            values, tree = flatten(value)
        except GradgenError as error:
            raise GradgenError(f"argument {name!r} is {error.bare_message}", loc,
                               error.hint) from None
        trees.append(tree)
        for path, leaf in zip(leaf_paths(tree), values, strict=True):
            if tree is LEAF:
                leaf_id = name
            else:
                leaf_id = leaf_name(name, path)
                if leaf_id in taken:
                    leaf_id = leaf_name(name, tuple(str(p) for p in path))
                    leaf_id = f"{name}_{leaf_id}" if leaf_id in taken else leaf_id
                taken.add(leaf_id)
            leaves.append(Leaf(i, path, leaf_id, leaf))
    return leaves, trees


def trace_function(fn, args, arg_names=None, loops: bool = False, flat=None) -> Graph:
    """Trace ``fn(*args)``. Numeric arguments, and the numeric leaves of dict/list/tuple
    arguments, become graph inputs named after the parameters (``params["W1"]`` -> ``W1``);
    anything else is passed through as a static value. With ``loops``, the iterations of
    each uniform Python loop come back as one loop region (gradgen.loops). ``flat`` is
    ``flatten_arguments(args, names)`` when the caller has it already."""
    names = arg_names or parameter_names(fn, len(args))
    code = getattr(unwrapped(fn), "__code__", None)
    if code is not None:
        refresh(code.co_filename)  # an edited file is read again, and its names with it
    leaves, trees = flat or flatten_arguments(args, names, function_loc(fn))
    with Trace() as trace:
        trace.live = {}  # arrays the user's code drops are freed (see Trace.settle)
        traced = []
        for k, leaf in enumerate(leaves):
            value = leaf.value
            if leaf.numeric:
                if type(value) is not np.ndarray and isinstance(value, _DROPPED_MEANING):
                    raise _array_subclass_error(fn, leaf)
                if isinstance(value, np.ndarray) and not value.flags.writeable:
                    value = value.copy()
                traced.append(trace.new_input(value, leaf.name, index=k))
            else:
                traced.append(value)
        traced_args, start = [], 0
        for tree in trees:
            traced_args.append(unflatten(tree, traced[start:start + tree.num_leaves]))
            start += tree.num_leaves
        call = Interceptor().wrap(fn)  # also maps a math builtin: grad(math.sin)
        with BindingObserver():
            try:
                result = call(*traced_args)
            except GradgenError:
                raise
            except Exception as error:
                if isinstance(error, TypeError) and error.__traceback__.tb_next is None:
                    _refuse_the_call(fn, args, error)  # f(*args) itself, not a line inside f
                cause = _gradgen_cause(error) or _unseen_code_error(error)
                if cause is None:
                    raise
                raise cause from error  # NumPy wrapped ours (W[0] = traced, W a global)
        try:
            out_leaves, out_tree = flatten(result)
        except GradgenError as error:
            raise GradgenError(f"{function_name(fn)} returned {error.bare_message}",
                               function_loc(fn), error.hint) from None
        outputs = [_output_ref(trace, r, fn) for r in out_leaves]
        for leaf in out_leaves:
            if isinstance(leaf, Tracer) and leaf._trace is trace:
                trace.keep(leaf)
        trace.settle()
    graph = trace.graph(outputs)
    if loops:
        from .loops import roll_loops

        graph = roll_loops(graph, trace.values)
    last_bound = _version_names(graph, [leaf.name for leaf in leaves] + list(names))
    graph.meta.update(
        fname=function_name(fn), arg_names=names, loc=function_loc(fn), leaves=leaves,
        arg_trees=trees, out_tree=out_tree, values=trace.values, last_bound=last_bound,
        captured={inner.ref.node: outer for outer, inner in trace.captured.values()})
    return graph


def _version_names(graph: Graph, params) -> dict[str, Node]:
    """Give every named forward value a unique name in program order: a loop's ``h`` becomes
    ``h``, ``h_1``, ``h_2`` ... so its adjoints can be ``grad_h``, ``grad_h_1`` ...
    Returns the last node bound to each of the user's names."""
    taken = set(params)
    versions: dict[str, int] = {}
    nodes = graph.nodes
    # the named forward values; straight-line code names each once, and then nothing is
    # renamed. (A comprehension: the interpreter reads a slot of a Node in a few
    # instructions, where attrgetter mapped over the nodes looked each field up by name, a
    # quarter of the cost four times over.)
    named = [node for node in nodes if node.name and node.role == "fwd"]
    bases = [node.name for node in named]
    if len(set(bases)) == len(bases) and taken.isdisjoint(bases):
        last_bound = dict(zip(bases, named))
        named = []
    else:
        last_bound = {}
    for node in named:
        base = node.name
        name = base
        n = versions.get(base, 0)
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        versions[base] = n
        taken.add(name)
        node.name = name
        last_bound[base] = node
    for ref in graph.outputs[:1]:
        if ref.node.role == "fwd" and ref.node.name is None and "out" not in taken:
            ref.node.name = "out"
    return last_bound


def _output_ref(trace: Trace, value, fn):
    if isinstance(value, Tracer):
        if value._trace is not trace:
            value = trace.lift(value)
        return value.ref
    if not is_numeric(value):
        raise GradgenError(
            f"{function_name(fn)} returned a {type(value).__name__}, not a number or an "
            "array", function_loc(fn))
    ref = trace.const(value)
    trace.values[ref.node] = value
    return ref
