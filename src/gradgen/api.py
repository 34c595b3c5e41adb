"""The transforms users call: grad, value_and_grad, trace, emit; caching per input
signature and guard path; retracing on a guard failure; inlining under an outer trace."""

from __future__ import annotations

import functools
import inspect
import linecache
import re
import types
from dataclasses import dataclass, replace

import numpy as np

from .abstract import concrete as value_of
from .build import Built, Request, build, build_jacobian, keeps_loops, without_gc
from .compile import load_module
from .dialects import check_target
from .errors import GradgenError
from .ir import Graph, Node
from .ops.core import _seed_value
from .pytree import flatten, unflatten
from .source import current_loc, parameter_names
from .tracer import OPEN_TRACES, Tracer, at_loc, bind, in_trace, tracer_value
from .tracing import function_loc, is_numeric, trace_function

MAX_PATHS = 32  # compiled guard paths kept per input signature


# --- arguments -----------------------------------------------------------------------------


def _normalize_argnums(argnums) -> tuple[tuple[int, ...], bool]:
    if isinstance(argnums, int | np.integer):
        return (int(argnums),), False
    if isinstance(argnums, tuple | list) and argnums and all(
            isinstance(a, int | np.integer) for a in argnums):
        return tuple(int(a) for a in argnums), True
    raise GradgenError(f"argnums must be an int or a non-empty tuple of ints, not {argnums!r}")


def _intermediate_names(intermediates) -> tuple[str, ...]:
    """``intermediates="y"`` is one name, as ``("y",)`` is."""
    if isinstance(intermediates, str):
        return (intermediates,)
    if isinstance(intermediates, tuple | list) and all(
            isinstance(name, str) for name in intermediates):
        return tuple(intermediates)
    raise GradgenError(f"intermediates must be a name or a tuple of names, like ('y',), not "
                       f"{intermediates!r}", current_loc())


def _bind_arguments(fn, args, kwargs) -> tuple[tuple, tuple]:
    """The positional arguments (defaults filled in) and the keyword-only ones, as sorted
    (name, value) pairs. The traced and emitted functions take their arguments by position;
    a keyword-only argument is a constant of the trace, as ``static_argnames`` are to
    ``jax.jit``: each value gets its own compiled path, so it must be hashable."""
    if not kwargs:
        return args, ()
    name = getattr(fn, "__name__", fn)
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise GradgenError(f"cannot call {name}: {e}") from None
    keywords = tuple(sorted(bound.kwargs.items()))
    for key, value in keywords:
        try:
            hash(value)
        except TypeError:
            raise GradgenError(
                f"keyword-only argument {key}={type(value).__name__} of {name} is not "
                "hashable: gradgen takes keyword-only arguments as constants of the trace (one "
                "compiled path per value)", function_loc(fn),
                "pass arrays and other values you differentiate or change often by position"
            ) from None
        if isinstance(value, Tracer):
            raise GradgenError(f"keyword-only argument {key} of {name} is a traced value",
                               function_loc(fn), "pass it by position")
    if keywords and not {k for k, _ in keywords} <= _keyword_only_names(fn):
        # a wrapper's **kwargs, or a callable object: its own defaults cannot carry them
        raise GradgenError(
            f"cannot pass {', '.join(k for k, _ in keywords)} to {name}: keyword-only "
            "arguments reach the keyword-only parameters of plain Python functions and "
            "methods only", function_loc(fn),
            "make the parameter positional, or bind it in a closure")
    bound.apply_defaults()
    return bound.args, keywords


def _keyword_only_names(fn) -> set[str]:
    """The keyword-only parameters of ``fn``'s own code (a method's function's)."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        return set()
    code = target.__code__
    return set(code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount])


def with_keywords(fn, keywords: tuple):
    """``fn`` with its keyword-only defaults set to ``keywords``: called by position, as the
    tracer calls it, it runs as ``fn(*args, **dict(keywords))`` (the same code, globals and
    closure; the copy's defaults are the only difference)."""
    if not keywords:
        return fn
    method = fn if isinstance(fn, types.MethodType) else None
    target = method.__func__ if method else fn  # (_bind_arguments checked it is a function)
    copy = types.FunctionType(target.__code__, target.__globals__, target.__name__,
                              target.__defaults__, target.__closure__)
    copy.__kwdefaults__ = {**(target.__kwdefaults__ or {}), **dict(keywords)}
    copy.__dict__.update(target.__dict__)
    copy.__qualname__ = target.__qualname__
    copy.__module__ = target.__module__
    return types.MethodType(copy, method.__self__) if method else copy


def _leaf_key(value):
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.shape, value.dtype.str)
    if is_numeric(value):
        return (type(value),)
    try:
        hash(value)
    except TypeError:
        raise GradgenError(
            f"a {type(value).__name__}, which is neither a number, a NumPy array, "
            "a dict/list/tuple of them, nor a hashable constant", None,
            "pass arrays as NumPy arrays; other arguments must be hashable") from None
    return ("static", type(value), value)


# The exact types of plain numbers: a subclass (or anything else) takes the full key.
_NUMBERS = frozenset({float, int, bool, np.float64, np.float32})


def _plain_key(args) -> tuple | None:
    """The signature of arguments made of numbers, NumPy arrays and dicts/lists/tuples of
    them, cheaply: types, shapes, dtypes and dict keys, no TreeDef. None for anything else
    (tracers, static values, subclasses), which takes the full key."""
    # Every cached call pays for this: no function call per leaf, and the tuple grows as it
    # goes (no list to convert). An entry's first item tells its kind apart (an array's is its
    # shape, a container's its type, a number's entry is its type), so keys of different
    # structures never compare equal.
    key = ()
    for value in args:
        kind = type(value)
        if kind is np.ndarray:
            key += ((value.shape, value.dtype),)
        elif kind is float or kind in _NUMBERS:
            key += (kind,)
        elif kind is dict:  # recursion follows the nesting of the user's containers
            inner = _plain_key(value.values())
            if inner is None:
                return None
            key += ((kind, tuple(value), inner),)
        elif kind is list or kind is tuple:
            inner = _plain_key(value)
            if inner is None:
                return None
            key += ((kind, inner),)
        else:
            return None
    return key


def _signature_key(args, fn) -> tuple:
    """Types, shapes and dtypes of every leaf, and the structure of every argument: two calls
    with the same key can share compiled code (guards decide the rest)."""
    try:
        return _leaf_keys(args)
    except GradgenError as error:  # name the argument, and the function's line
        names = parameter_names(fn, len(args))
        for value, name in zip(args, names, strict=True):
            try:
                _leaf_keys((value,))
            except GradgenError:
                raise GradgenError(f"argument {name!r} is {error.bare_message}",
                                   function_loc(fn), error.hint) from None
        raise


def _leaf_keys(args) -> tuple:
    leaves, tree = flatten(tuple(args))
    return (tree, *(_leaf_key(v) for v in leaves))


def _has_tracer(args) -> bool:
    """Are traced values among the arguments (grad of grad)? One from a trace that has ended
    (kept in a list or a global by a traced function) is a GradgenError."""
    try:
        leaves, _ = flatten(tuple(args))
    except GradgenError:  # a structure gradgen refuses: _signature_key names its argument
        return False
    tracers = [v for v in leaves if isinstance(v, Tracer)]
    for value in tracers:
        if value._trace not in OPEN_TRACES:
            node = value.ref.node
            made = f"made at {node.loc}" if node.loc else f"the traced input {node.name!r}"
            raise GradgenError(
                "an argument is a traced value from a trace that has ended: a function gradgen "
                f"traced kept it (in a list, a global or an attribute) after returning ({made})",
                current_loc(),
                "keep values out of the traced function by returning them (gradgen.vjp gives "
                "the outputs), not by storing them")
    return bool(tracers)


def _concrete(args) -> tuple:
    leaves, tree = flatten(tuple(args))
    return unflatten(tree, [v.value if isinstance(v, Tracer) else v for v in leaves])


def _require_callable(fn) -> None:
    if not callable(fn):
        raise GradgenError(
            f"expected a function to differentiate, got {type(fn).__name__} {fn!r:.40}",
            current_loc(),
            "pass the function itself: gradgen.grad(f), not gradgen.grad(f(x))")


# --- the callables users get ---------------------------------------------------------------


@dataclass
class _Path:
    call: object
    guard_failure: type
    built: Built
    non_finite: type


class GradFunction:
    """What ``grad`` and ``value_and_grad`` return: compiled code per input signature and
    guard path, retraced when a call leaves every path seen so far."""

    def __init__(self, fn, argnums=0, with_value=False, intermediates=(), kind=None,
                 check_finite=False):
        _require_callable(fn)
        self.fn = fn
        self.argnums, self.as_tuple = _normalize_argnums(argnums)
        self.with_value = with_value
        # which emitted function this callable runs: grad, value_and_grad, jacobian, hessian
        self.kind = kind or ("value_and_grad" if with_value else "grad")
        self.request = Request(self.argnums, self.as_tuple, _intermediate_names(intermediates),
                               check_finite=check_finite)
        self._paths: dict[tuple, list[_Path]] = {}
        self._last: _Path | None = None
        # (signature, path, whether the signature is the arguments' types) of the last call
        self._hot: tuple = (None, None, False)
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        # The hot path: numbers, arrays and dicts/lists/tuples of them, a signature seen before,
        # its last good path. On a thousand floats or twenty scalar steps it is a twentieth of
        # the gradient's time, so it is lean: the key of flat arguments is _plain_key's loop
        # written out here (a call less), the last good call's signature is compared first (no
        # hashing), and a trace open in no thread is one set read (tracer.OPEN_TRACES), not
        # this thread's stack.
        if not kwargs and not OPEN_TRACES:
            hot_key, path, by_types = self._hot
            # A signature of numbers only is their types, read in C (scalar code: a third of
            # the loop's time); any other is the loop's key
            if not (by_types and tuple(map(type, args)) == hot_key):
                key = ()
                for value in args:
                    kind = type(value)
                    if kind is np.ndarray:
                        key += ((value.shape, value.dtype),)
                    elif kind is float or kind in _NUMBERS:
                        key += (kind,)
                    else:  # a container (or None: the full path)
                        key = _plain_key(args)
                        break
                if key != hot_key:  # another signature seen before: it becomes the hot one
                    paths = self._paths.get(key) if key is not None else None
                    path = paths[0] if paths else None
                    if path is not None:
                        self._make_hot(key, path)
            # (self._last is the hot path already: the call that made it hot ran it)
            if path is not None:
                try:
                    return path.call(*args)
                except Exception:  # noqa: BLE001, S110 - guards and errors: the full path below
                    pass
        args, keywords = _bind_arguments(self.fn, args, kwargs)
        key = _plain_key(args)  # None for tracers among the arguments, among other things
        if key is None and _has_tracer(args) or in_trace():  # f may close over outer tracers
            return self._inline(args, keywords)
        if key is None:
            key = _signature_key(args, self.fn)
        if keywords:
            key = (key, keywords)
        paths = self._paths.setdefault(key, [])
        for i, path in enumerate(paths):
            try:
                result = path.call(*args)
            except path.guard_failure:
                continue
            except path.non_finite as e:
                raise GradgenError(str(e)) from None
            except (ArithmeticError, ValueError) as e:
                raise _runtime_error(e) from e
            if i:
                paths.insert(0, paths.pop(i))
            self._make_hot(key, path)
            return result
        path = self._compile(args, keywords)
        paths.insert(0, path)
        del paths[MAX_PATHS:]
        self._make_hot(key, path)
        try:
            return path.call(*args)
        except path.non_finite as e:
            raise GradgenError(str(e)) from None
        except (ArithmeticError, ValueError) as e:
            raise _runtime_error(e) from e
        except path.guard_failure as e:
            raise GradgenError(
                f"the code just traced for {self.fn.__name__} fails its own guard ({e}); "
                "the function is not deterministic", function_loc(self.fn)) from None

    def _make_hot(self, key: tuple, path: _Path) -> None:
        """The path the next call with this signature tries first (and the one that ran)."""
        self._last = path
        self._hot = (key, path, all(type(entry) is type for entry in key))

    @property
    def source(self) -> str | None:
        """The emitted module of the path the last call ran (None before the first call); the
        call compiled its own function only, the whole module is written when first read."""
        return self._last.built.source if self._last is not None else None

    def _repr_html_(self) -> str | None:
        """Notebooks: the explain page of the path the last call ran, embedded (None, so the
        plain repr shows, before the first call)."""
        if self._last is None:
            return None
        from .explainer.page import iframe, page_for_built

        return iframe(page_for_built(self._last.built, self.fn))

    def _build(self, args, keywords: tuple = ()) -> Built:
        fn, request = self.fn, self.request
        if keywords:  # constants of this trace: fn runs with them as its keyword defaults
            fn, request = with_keywords(fn, keywords), replace(request, keywords=keywords)
        if self.kind == "hessian":
            gradient = GradFunction(fn, request.argnums if request.as_tuple
                                    else request.argnums[0])
            return build_jacobian(fn, args, request, gradient)
        if self.kind == "jacobian":
            return build_jacobian(fn, args, request)
        return build(fn, args, request)

    @without_gc
    def _compile(self, args, keywords: tuple = ()) -> _Path:
        built = self._build(args, keywords)
        namespace = load_function(built, f"{built.fname}_{self.kind}")
        guard = namespace.get("GuardFailure", _NeverRaised)
        non_finite = namespace.get("NonFiniteGradient", _NeverRaised)
        return _Path(namespace[f"{built.fname}_{self.kind}"], guard, built, non_finite)

    def _inline(self, args, keywords: tuple = ()):
        """Called on tracers (grad of grad): differentiate at the concrete values, then replay
        the joint graph on the tracers, so an outer trace records the backward as ops."""
        built = self._build(_concrete(args), keywords)
        result = inline_result(built, args)
        if self.kind in ("jacobian", "hessian"):
            return result
        value, grads = result
        return (value, grads) if self.with_value else grads


@without_gc
def load_function(built: Built, name: str) -> dict:
    """Write the emitted function ``name`` (only it: the module's others are written when
    someone reads ``built.source``) and compile it, as a module of its own."""
    return load_module(built.function_source(name), built.fname)


class _NeverRaised(Exception):
    pass


def inline_result(built: Built, args, extra_inputs=()):
    """Replay ``built``'s joint graph on ``args`` (tracers in an outer trace) and shape the
    outputs as the emitted function would return them."""
    leaves, _ = flatten(tuple(args))
    graph = built.joint
    by_input: dict[Node, object] = {}
    for node in graph.inputs:
        index = node.attrs["index"]
        if 0 <= index < len(leaves):
            by_input[node] = leaves[index]
        elif index >= len(leaves):
            by_input[node] = extra_inputs[index - len(leaves)]
    for inner, outer in built.forward.meta.get("captured", {}).items():
        by_input[inner] = outer
    outs = replay(graph, by_input)
    tree, items = built.returns
    return unflatten(tree, [outs[i] if isinstance(i, int) else None for i in items])


_LOC_COMMENT = re.compile(r"#\s+(\S+\.py:\d+|<[^>]+>:\d+)")


def _runtime_error(error: Exception) -> GradgenError:
    """An arithmetic error inside generated code, told in terms of the user's source line."""
    tb = error.__traceback__
    line_no, filename = None, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<gradgen "):
            line_no, filename = tb.tb_lineno, tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    # the text that ran: a call compiles its own function only (Built.function_source)
    lines = [line.rstrip("\n") for line in linecache.getlines(filename)] if filename else []
    if line_no is None or line_no > len(lines):
        return GradgenError(f"the generated gradient raised {type(error).__name__}: {error}")
    statement = lines[line_no - 1].strip()
    where = None
    for text in reversed(lines[:line_no]):
        match = _LOC_COMMENT.search(text)
        if match:
            where = match.group(1)
            break
    message = (f"computing the gradient raised {type(error).__name__} ({error}) in "
               f"`{statement.split('  #')[0]}`; the derivative is not finite at this input")
    return GradgenError(f"{where}: {message}" if where else message)


def replay(graph: Graph, by_input: dict[Node, object]) -> list:
    """Evaluate ``graph`` on values or tracers; on tracers every op is recorded again."""
    env: dict[Node, object] = {}
    for node in graph.nodes:
        op = node.op.name
        if op == "input":
            env[node] = by_input[node]
            continue
        if op == "const":
            env[node] = node.attrs["value"]
            continue
        if op == "seed":
            env[node] = _seed_value(node.aval)
            continue
        ins = [env[r.node] if r.node.op.n_out <= 1 else env[r.node][r.index]
               for r in node.inputs]
        with at_loc(node.loc):
            if op == "guard":
                if isinstance(ins[0], Tracer) and bool(ins[0]) != node.attrs["expect"]:
                    raise GradgenError("a replayed guard changed its outcome", node.loc)
                continue
            out = bind(node.op, ins, node.attrs)
        if isinstance(out, Tracer) and node.name and out.ref.node.name is None:
            out.ref.node.name = node.name
        env[node] = out
    return [env[r.node] for r in graph.outputs]


def grad(fn=None, argnums=0, *, intermediates=(), check_finite=False):
    """The gradient of a scalar function: ``gradgen.grad(f)(x)`` or ``@gradgen.grad``.
    With ``intermediates=("y",)`` it returns ``(gradient, {"y": adjoint of y})``; with
    ``check_finite=True`` an inf or nan adjoint raises a GradgenError naming the source line
    whose derivative produced it first."""
    if fn is None:
        return lambda f: GradFunction(f, argnums, intermediates=intermediates,
                                      check_finite=check_finite)
    return GradFunction(fn, argnums, intermediates=intermediates, check_finite=check_finite)


def value_and_grad(fn=None, argnums=0):
    """Like ``grad``, returning ``(value, gradient)``."""
    if fn is None:
        return lambda f: GradFunction(f, argnums, with_value=True)
    return GradFunction(fn, argnums, with_value=True)


def trace(fn, *args, backward=False, argnums=0, loops: str = "keep") -> Graph:
    """The traced graph of ``fn(*args)``; with ``backward=True`` the joint forward+backward
    (optimized) of the gradient with respect to ``argnums``. A uniform loop is listed once, as
    a ``loop`` node with its body; ``loops="unroll"`` lists every iteration."""
    nums, as_tuple = _normalize_argnums(argnums)
    request = Request(nums, as_tuple, loops=loops)
    if not backward:
        return trace_function(fn, args, loops=keeps_loops(request))
    return build(fn, args, request).joint


def explain(fn, *args, argnums=0, vjp: bool = False, intermediates=(), check_finite=False,
            command: str | None = None) -> str:
    """One self-contained HTML page (inline CSS and JS, nothing fetched, works from disk)
    showing ``fn``'s source, the emitted gradient module with the rule behind each backward
    statement, and the forward and backward graph as inline SVG, linked line by line."""
    from .explainer.page import page_for_built  # HTML and SVG load only when a page is asked for

    nums, as_tuple = _normalize_argnums(argnums)
    request = Request(nums, as_tuple, _intermediate_names(intermediates), vjp, check_finite)
    _refuse_unnamed_functions(fn, args)
    return page_for_built(build(fn, args, request, command, annotate=True), fn)


def emit(fn, *args, argnums=0, vjp: bool = False, intermediates=(), check_finite=False,
         command: str | None = None, annotate: bool = False, target: str = "numpy",
         loops: str = "keep") -> str:
    """The gradient module for ``fn`` at ``args``, as Python source text: ``<f>_grad`` and
    ``<f>_value_and_grad``, or with ``vjp=True`` ``<f>_vjp(*args, cotangent)``. With
    ``annotate``, each backward statement is commented with the derivative rules it applies.
    ``target="array-api"`` writes the module against the Python array API standard, so it
    runs on NumPy, PyTorch, CuPy, Dask and JAX arrays (API.md, "Targets"). A uniform loop is
    emitted as a forward and a reversed backward ``for`` loop; ``loops="unroll"`` writes
    every iteration out."""
    nums, as_tuple = _normalize_argnums(argnums)
    _has_tracer(args)  # (refuses one from a trace that has ended)
    request = Request(nums, as_tuple, _intermediate_names(intermediates), vjp, check_finite,
                      check_target(target), loops=loops)
    _refuse_unnamed_functions(fn, args)
    return build(fn, args, request, command, annotate).source


def _refuse_unnamed_functions(fn, args) -> None:
    """A written-out module checks a function argument by its name (``act.__name__ ==
    "relu"``): what it can say of it without importing it. A lambda or a function defined
    inside another has a name another one shares (``<lambda>``; every ``act`` a factory makes),
    so another would pass that check and get this one's gradient. (``grad`` keeps the
    function itself in its cache key: it retraces for another.)"""
    for name, value in zip(parameter_names(fn, len(args)), args, strict=True):
        if not isinstance(value, types.FunctionType):
            continue
        if value.__name__ == "<lambda>":
            what = "a lambda"
        elif "<locals>" in value.__qualname__:
            outer = value.__qualname__.split(".<locals>")[0]
            what = f"{value.__name__}, a function defined inside {outer}"
        else:
            continue
        raise GradgenError(
            f"argument {name} is {what}: the written module checks a function argument by "
            "its name, and another function of that name would pass the check and get this "
            "one's gradient", function_loc(fn),
            f"define it at module level, or bind it: functools.partial("
            f"{getattr(fn, '__name__', 'f')}, "
            f"{name}=...) is a function of the other arguments; gradgen.grad takes it as it is")


class _Pullback:
    """``vjp``'s second result: cotangent -> one gradient per positional argument."""

    def __init__(self, fn, args, built: Built, call, guard_failure):
        self.fn, self.args, self.built = fn, args, built
        self._call, self._guard_failure = call, guard_failure
        self.source = built.source

    def __call__(self, cotangent):
        out_tree = self.built.forward.meta["out_tree"]
        leaves, tree = flatten(cotangent)
        if tree != out_tree:
            raise GradgenError(
                f"the cotangent has structure {tree} but {self.built.fname} returned "
                f"{out_tree}", function_loc(self.fn),
                "pass one cotangent per output, shaped like that output")
        for k, (leaf, out) in enumerate(zip(leaves, self.built.forward.outputs, strict=True)):
            value = tracer_value(leaf)  # a cotangent may be traced (grad of vjp)
            kind = np.asarray(value).dtype.kind
            if kind not in "biuf":  # a complex one would lose its imaginary part silently
                raise GradgenError(
                    f"cotangent {k} is {_kind_of(value, kind)}, not a real number or array",
                    function_loc(self.fn),
                    "pass float cotangents, shaped like the outputs")
            shape = np.shape(value)
            if shape != out.aval.shape:
                raise GradgenError(
                    f"cotangent {k} has shape {shape}, but output {k} has shape "
                    f"{out.aval.shape}", function_loc(self.fn))
        if self._call is None or any(isinstance(v, Tracer) for v in leaves):
            _, grads = inline_result(self.built, self.args, leaves)
            return grads
        cotangent = unflatten(tree, [_like(v, out) for v, out in zip(
            leaves, self.built.forward.outputs, strict=True)])
        try:
            _, grads = self._call(*self.args, cotangent)
        except (ArithmeticError, ValueError) as e:
            raise _runtime_error(e) from e
        return grads


def _kind_of(value, kind: str) -> str:
    if kind == "c":
        return "complex"
    return "None" if value is None else f"a {type(value).__name__}"


def _like(value, out_ref):
    """A cotangent with its output's dtype (a Python float is fine for a scalar output)."""
    aval = out_ref.aval
    if aval.py is not None:
        return float(value) if aval.is_float else value
    return np.asarray(value, dtype=aval.dtype)


def vjp(fn, *args):
    """``(outputs, pullback)``: ``pullback(cotangent)`` returns one gradient per positional
    argument (None for an argument that is not a float or float array). Outputs and cotangents
    may be dicts, lists and tuples."""
    _require_callable(fn)
    _has_tracer(args)  # (refuses one from a trace that has ended)
    concrete = _concrete(args)
    built = build(fn, concrete, Request(vjp=True))
    values = built.forward.meta["values"]
    out_tree = built.forward.meta["out_tree"]
    if _has_tracer(args) or in_trace():  # under an outer trace fn may close over tracers
        leaves, _ = flatten(tuple(args))
        by_input = {n: leaves[n.attrs["index"]] for n in built.forward.inputs
                    if 0 <= n.attrs["index"] < len(leaves)}
        by_input.update(built.forward.meta.get("captured", {}))
        outs = replay(_forward_only(built.forward), by_input)
        return unflatten(out_tree, outs), _Pullback(fn, args, built, None, ())
    namespace = load_function(built, f"{built.fname}_vjp")
    outputs = unflatten(out_tree, [value_of(values, r) for r in built.forward.outputs])
    call = namespace[f"{built.fname}_vjp"]
    return outputs, _Pullback(fn, args, built, call, namespace.get("GuardFailure", ()))


def _forward_only(graph: Graph) -> Graph:
    """The forward graph without the cotangent inputs vjp added to it (their indices follow
    the argument leaves'; captured inputs, index -1, stay)."""
    n_leaves = len(graph.meta["leaves"])
    return graph.with_nodes([n for n in graph.nodes if n.role != "input" or
                             n.attrs["index"] < n_leaves], graph.outputs,
                            [n for n in graph.inputs if n.attrs["index"] < n_leaves])


def jacobian(fn, argnums=0):
    """The Jacobian of ``fn`` (JAX's convention: output shape, then input shape), by reverse
    mode: one backward pass per output element, emitted as one flat function."""
    return GradFunction(fn, argnums, kind="jacobian")


def hessian(fn, argnums=0):
    """The Hessian of a scalar ``fn``: the Jacobian of its gradient, by reverse mode over the
    backward graph (never finite differences). A float for a float argument."""
    return GradFunction(fn, argnums, kind="hessian")
