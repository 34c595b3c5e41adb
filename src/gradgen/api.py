"""The transforms users call: grad, value_and_grad, trace, emit; caching per input
signature and guard path; retracing on a guard failure; inlining under an outer trace."""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
from dataclasses import dataclass

import numpy as np

from . import __version__
from .compile import load_module
from .emit import FunctionSpec, emit_module
from .errors import GradgenError, NonScalarOutput
from .ir import Graph, Node
from .ops.core import _seed_value, literal
from .optimize import optimize
from .reverse import reverse
from .tracer import Tracer, at_loc, bind
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


def _bind_arguments(fn, args, kwargs) -> tuple:
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as e:
        raise GradgenError(f"cannot call {getattr(fn, '__name__', fn)}: {e}") from None
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype}"
    return f"{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__}"


def _check_argnums(fn, args, argnums) -> None:
    names = _param_names(fn, len(args))
    for i in argnums:
        if not -len(args) <= i < len(args):
            raise GradgenError(
                f"argnums includes {i} but {getattr(fn, '__name__', 'f')} was called with "
                f"{len(args)} argument{'s' if len(args) != 1 else ''}", function_loc(fn))
        value = args[i]
        kind = np.asarray(value).dtype.kind if is_numeric(value) else None
        if kind != "f":
            raise GradgenError(
                f"cannot differentiate with respect to argument {names[i]!r} (position {i}): "
                f"it is {_describe(value)}", function_loc(fn),
                "gradgen differentiates floats and float arrays; pass e.g. 2.0 instead of 2, "
                "or leave the argument out of argnums")


def _param_names(fn, n):
    from .tracing import parameter_names

    return parameter_names(fn, n)


def _signature_key(args) -> tuple:
    key = []
    for value in args:
        if isinstance(value, np.ndarray):
            key.append((np.ndarray, value.shape, value.dtype.str))
        elif is_numeric(value):
            key.append((type(value),))
        else:
            try:
                hash(value)
            except TypeError:
                raise GradgenError(
                    f"argument {_describe(value)} is neither a number, a NumPy array, nor a "
                    "hashable constant", None,
                    "pass arrays as NumPy arrays; other arguments must be hashable") from None
            key.append(("static", type(value), value))
    return tuple(key)


def signature_text(names, args) -> str:
    parts = []
    for name, value in zip(names, args, strict=True):
        if is_numeric(value):
            from .ir import aval_of

            parts.append(f"{name}: {aval_of(value)}")
        else:
            parts.append(f"{name}={value!r}")
    return "(" + ", ".join(parts) + ")"


# --- building a module ---------------------------------------------------------------------


@dataclass
class Built:
    """A traced, differentiated, optimized and emitted function for one guard path."""

    source: str
    forward: Graph
    vg_graph: Graph  # outputs: value, then one gradient per argnum
    fname: str


def _check_scalar_output(graph: Graph, fn) -> None:
    structure = graph.meta.get("result_structure")
    if structure is not None:
        raise NonScalarOutput(
            f"{graph.meta['fname']} returned a {structure[0].__name__} of {structure[1]} "
            "values; grad needs a single scalar", function_loc(fn),
            "return one number, or use gradgen.vjp for several outputs")
    out = graph.outputs[0]
    aval = out.aval
    if aval.size != 1:
        raise NonScalarOutput(
            f"{graph.meta['fname']} returned a value of shape {aval.shape}, not a scalar",
            out.node.loc or function_loc(fn),
            "grad needs a scalar output: reduce it (e.g. np.sum) or use gradgen.vjp")
    if not aval.is_float:
        raise NonScalarOutput(
            f"{graph.meta['fname']} returned {aval}, not a float: it has no gradient",
            out.node.loc or function_loc(fn))


def _display_path(fn) -> str:
    loc = function_loc(fn)
    if loc is None:
        return "<unknown>"
    path = loc.file
    if path.startswith("<"):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return os.path.basename(path) if rel.startswith("..") else rel


def source_hash(fn) -> str:
    """A short hash of the function's source text, so a generated file can tell it is stale."""
    try:
        text = inspect.getsource(inspect.unwrap(fn))
    except (OSError, TypeError):
        return "unavailable (no source)"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _regenerate_line(fn, args, argnums, command) -> str:
    if command:
        return f"# Regenerate: {command}"
    texts = []
    for value in args:
        if isinstance(value, np.ndarray) and value.size > 6:
            texts = None
            break
        texts.append(literal(value).text if is_numeric(value) else repr(value))
    fname = getattr(fn, "__name__", "f")
    if texts is not None:
        tup = "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"
        extra = "" if argnums == (0,) else f" --argnums {','.join(map(str, argnums))}"
        line = f'# Regenerate: gradgen emit {_display_path(fn)}:{fname} --args "{tup}"{extra}'
        if len(line) <= 100 and '"' not in tup:
            return line
    return f"# Regenerate: gradgen.emit({fname}, *args) with arguments of this signature"


def build(fn, args, argnums: tuple[int, ...], as_tuple: bool, command: str | None = None,
          annotate: bool = False) -> Built:
    """Trace, differentiate, optimize and emit ``fn`` at ``args``."""
    _check_argnums(fn, args, argnums)
    forward = trace_function(fn, args)
    _check_scalar_output(forward, fn)
    positions = {n.attrs["index"]: i for i, n in enumerate(forward.inputs)}
    argnums = tuple(a % len(args) for a in argnums)
    joint = reverse(forward, [positions[a] for a in argnums])
    fname = forward.meta["fname"]
    names = forward.meta["arg_names"]
    out_node = forward.outputs[0].node
    output_name = out_node.name or "out"

    values = joint.meta["values"]
    convert = {}
    for k, a in enumerate(argnums):
        g_value = values.get(joint.outputs[1 + k].node)
        if type(args[a]) is float and type(g_value) is not float:
            convert[k] = "float"
        elif isinstance(args[a], np.ndarray) and not isinstance(g_value, np.ndarray):
            convert[k] = "np.asarray"

    vg = optimize(joint.with_nodes(joint.nodes, joint.outputs))
    g_only = optimize(joint.with_nodes(joint.nodes, joint.outputs[1:]))
    d_of = [f"d{fname}/d{names[a]}" for a in argnums]
    grads_text = f"({', '.join(d_of)})" if as_tuple else d_of[0]
    sig = signature_text(names, args)
    sig_inner = sig[1:-1]
    call_text = f"{fname}({', '.join(names)})"
    grad_returns = tuple(range(len(argnums))) if as_tuple else 0
    vg_returns = (0, tuple(range(1, len(argnums) + 1))) if as_tuple else (0, 1)
    specs = [
        FunctionSpec(f"{fname}_grad", list(names), g_only, grad_returns,
                     f"Return {grads_text} for {sig_inner}.", output_name, dict(convert),
                     annotate),
        FunctionSpec(f"{fname}_value_and_grad", list(names), vg, vg_returns,
                     f"Return ({call_text}, {grads_text}) for {sig_inner}.", output_name,
                     {k + 1: v for k, v in convert.items()}, annotate),
    ]
    header = [
        (f"# Code generated by gradgen {__version__} from {_display_path(fn)}:{fname} for "
         f"{sig}. DO NOT EDIT."),
        _regenerate_line(fn, args, argnums, command),
        f"# Source sha256: {source_hash(fn)}",
    ]
    source = emit_module(header, specs)
    return Built(source, forward, vg, fname)


# --- the callables users get ---------------------------------------------------------------


@dataclass
class _Path:
    call: object
    guard_failure: type
    built: Built


class GradFunction:
    """What ``grad`` and ``value_and_grad`` return: compiled code per input signature and
    guard path, retraced when a call leaves every path seen so far."""

    def __init__(self, fn, argnums=0, with_value=False):
        self.fn = fn
        self.argnums, self.as_tuple = _normalize_argnums(argnums)
        self.with_value = with_value
        self._paths: dict[tuple, list[_Path]] = {}
        self.source: str | None = None
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        args = _bind_arguments(self.fn, args, kwargs)
        if any(isinstance(a, Tracer) for a in args):
            return self._inline(args)
        key = _signature_key(args)
        paths = self._paths.setdefault(key, [])
        for i, path in enumerate(paths):
            try:
                result = path.call(*args)
            except path.guard_failure:
                continue
            except (ArithmeticError, ValueError) as e:
                raise _runtime_error(e, path.built) from e
            if i:
                paths.insert(0, paths.pop(i))
            self.source = path.built.source
            return result
        path = self._compile(args)
        paths.insert(0, path)
        del paths[MAX_PATHS:]
        self.source = path.built.source
        try:
            return path.call(*args)
        except (ArithmeticError, ValueError) as e:
            raise _runtime_error(e, path.built) from e
        except path.guard_failure as e:
            raise GradgenError(
                f"the code just traced for {self.fn.__name__} fails its own guard ({e}); "
                "the function is not deterministic", function_loc(self.fn)) from None

    def _compile(self, args) -> _Path:
        built = build(self.fn, args, self.argnums, self.as_tuple)
        namespace = load_module(built.source, built.fname)
        suffix = "_value_and_grad" if self.with_value else "_grad"
        guard = namespace.get("GuardFailure", _NeverRaised)
        return _Path(namespace[built.fname + suffix], guard, built)

    def _inline(self, args):
        """Called on tracers (grad of grad): differentiate at the concrete values, then replay
        the joint graph on the tracers, so an outer trace records the backward as ops."""
        concrete = tuple(a.value if isinstance(a, Tracer) else a for a in args)
        built = build(self.fn, concrete, self.argnums, self.as_tuple)
        graph = built.vg_graph
        by_input: dict[Node, object] = {}
        for node in graph.inputs:
            index = node.attrs["index"]
            by_input[node] = args[index] if index >= 0 else None
        for inner, outer in built.forward.meta.get("captured", {}).items():
            by_input[inner] = outer
        outs = replay(graph, by_input)
        grads = tuple(outs[1:]) if self.as_tuple else outs[1]
        return (outs[0], grads) if self.with_value else grads


class _NeverRaised(Exception):
    pass


_LOC_COMMENT = re.compile(r"#\s+(\S+\.py:\d+|<[^>]+>:\d+)")


def _runtime_error(error: Exception, built: Built) -> GradgenError:
    """An arithmetic error inside generated code, told in terms of the user's source line."""
    tb = error.__traceback__
    line_no = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith("<gradgen "):
            line_no = tb.tb_lineno
        tb = tb.tb_next
    lines = built.source.splitlines()
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


def grad(fn=None, argnums=0):
    """The gradient of a scalar function: ``gradgen.grad(f)(x)`` or ``@gradgen.grad``."""
    if fn is None:
        return lambda f: GradFunction(f, argnums)
    return GradFunction(fn, argnums)


def value_and_grad(fn=None, argnums=0):
    """Like ``grad``, returning ``(value, gradient)``."""
    if fn is None:
        return lambda f: GradFunction(f, argnums, with_value=True)
    return GradFunction(fn, argnums, with_value=True)


def trace(fn, *args, backward=False, argnums=0) -> Graph:
    """The traced graph of ``fn(*args)``; with ``backward=True`` the joint forward+backward."""
    graph = trace_function(fn, args)
    if not backward:
        return graph
    nums, _ = _normalize_argnums(argnums)
    _check_argnums(fn, args, nums)
    _check_scalar_output(graph, fn)
    positions = {n.attrs["index"]: i for i, n in enumerate(graph.inputs)}
    return optimize(reverse(graph, [positions[a % len(args)] for a in nums]))


def emit(fn, *args, argnums=0, command: str | None = None, annotate: bool = False) -> str:
    """The gradient module for ``fn`` at ``args``, as Python source text. With ``annotate``,
    each backward statement is commented with the derivative rules it applies."""
    nums, as_tuple = _normalize_argnums(argnums)
    return build(fn, args, nums, as_tuple, command, annotate).source
