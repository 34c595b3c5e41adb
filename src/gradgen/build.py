"""One request, end to end: trace -> reverse -> optimize -> emit, for a gradient or a vjp."""

from __future__ import annotations

import ast
import functools
import gc
import hashlib
import inspect
import math
import os
from dataclasses import dataclass
from itertools import compress, repeat

import numpy as np

from ._version import __version__
from .abstract import Pending, shaped_value
from .emit import FunctionSpec, Module, emit_module
from .errors import GradgenError, NonScalarOutput
from .ir import Graph, Node, Ref, aval_of
from .ops import OPS
from .ops.core import literal
from .ops.registry import string_literal
from .optimize import dce, forget_reads, optimize, own_outputs
from .pytree import LEAF, TreeDef, format_structure
from .reverse import reverse
from .source import function_source
from .tracing import (
    Leaf,
    flatten_arguments,
    function_loc,
    parameter_names,
    trace_function,
    unwrapped,
)


@dataclass(frozen=True)
class Request:
    """What to build: the gradient w.r.t. ``argnums`` (a tuple of them when ``as_tuple``),
    optionally with the adjoints of named intermediates; or, with ``vjp``, a pullback."""

    argnums: tuple[int, ...] = (0,)
    as_tuple: bool = False
    intermediates: tuple[str, ...] = ()
    vjp: bool = False
    check_finite: bool = False
    target: str = "numpy"  # the emitted module's dialect (dialects.py)
    loops: str = "keep"  # or "unroll": every iteration of every loop in straight-line code
    # keyword-only arguments, as (name, value) pairs: constants of the trace (api.py)
    keywords: tuple[tuple[str, object], ...] = ()


@dataclass
class Built:
    """A traced, differentiated, optimized and emitted function for one guard path."""

    module: Module  # the emitted module; each of its functions is written when first read
    forward: Graph
    joint: Graph  # optimized; outputs: values, then gradients (then intermediates' adjoints)
    fname: str
    request: Request
    wrt: list[int]  # leaf indices differentiated, in output order
    # How joint's outputs make the result: (TreeDef, items), items indexing joint.outputs.
    returns: tuple = ()
    # What the module was emitted from, so it can be emitted again annotated (explain).
    header: tuple[str, ...] = ()
    specs: tuple[FunctionSpec, ...] = ()

    @property
    def source(self) -> str:
        """The whole emitted module's text."""
        return self.module.text()

    def function_source(self, name: str) -> str:
        """The module cut down to the function ``name``: what a call compiles and runs."""
        return self.module.text_of(name)

    def annotated_source(self) -> str:
        """The module with each backward statement commented with its rules (``show``)."""
        if not self.specs or all(spec.annotate for spec in self.specs):
            return self.source
        from dataclasses import replace

        return emit_module(list(self.header), [replace(s, annotate=True) for s in self.specs],
                           self.request.target)


# --- arguments -----------------------------------------------------------------------------


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype}"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _leaf_label(leaf: Leaf, names) -> str:
    root = names[leaf.arg]
    return root + "".join(f"[{k!r}]" for k in leaf.path)


def check_differentiable(fn, args, argnums, names=None) -> tuple[list[Leaf], list[TreeDef]]:
    """Every leaf of every argument in argnums must be a float or a float array. Returns the
    arguments' leaves and structures (``flatten_arguments``), for the trace."""
    names = names or parameter_names(fn, len(args))
    for i in argnums:
        if not -len(args) <= i < len(args):
            raise GradgenError(
                f"argnums includes {i} but {getattr(fn, '__name__', 'f')} was called with "
                f"{len(args)} argument{'s' if len(args) != 1 else ''}", function_loc(fn))
    leaves, trees = flatten_arguments(args, names, function_loc(fn))
    wanted = {a % len(args) for a in argnums}
    for leaf in leaves:
        if leaf.arg not in wanted:
            continue
        kind = aval_of(leaf.value).dtype.kind if leaf.numeric else None
        if kind != "f":
            label = _leaf_label(leaf, names)
            raise GradgenError(
                f"cannot differentiate with respect to {label!r} (argument {leaf.arg}): it is "
                f"{_describe(leaf.value)}", function_loc(fn),
                "gradgen differentiates floats and float arrays; pass e.g. 2.0 instead of 2, "
                "or leave the argument out of argnums")
    return leaves, trees


def keeps_loops(request: Request) -> bool:
    """Roll loops unless asked not to, or unless the request needs what a loop region does not
    offer yet: the array-API target, or a backward that is itself differentiated (grad of
    grad inlines this graph). (An intermediate bound inside a loop: ``_hidden_in_loops``.)"""
    from .tracer import in_trace

    if request.loops not in ("keep", "unroll"):
        raise GradgenError(f"loops must be 'keep' or 'unroll', not {request.loops!r}")
    return request.loops == "keep" and request.target == "numpy" and not in_trace()


def _hidden_in_loops(forward: Graph, wanted) -> bool:
    """Is a requested intermediate bound inside a rolled loop, other than as a value the loop
    carries? Its last value is then one trip's, which the rolled graph does not hold (a
    carried one is the loop's result, a value of the graph like any other)."""
    if not wanted:
        return False
    hidden: set[str] = set()
    todo = [(n.attrs["region"].body, True) for n in forward.nodes if n.op.name == "loop"]
    while todo:
        body, outermost = todo.pop()
        carried = {r.node for r in body.outputs} if outermost else set()
        for node in body.nodes:
            if node.op.name == "loop":
                todo.append((node.attrs["region"].body, False))
            if node.name and node.op.name != "input" and node not in carried:
                hidden.add(node.name)
    return any(name in hidden for name in wanted)


def _check_scalar_output(graph: Graph, fn) -> None:
    tree = graph.meta["out_tree"]
    if tree is not LEAF:
        raise NonScalarOutput(
            f"{graph.meta['fname']} returned a {tree.kind} of {tree.num_leaves} values; grad "
            "needs a single scalar", function_loc(fn),
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


# --- the module header -----------------------------------------------------------------------


def signature_text(names, args) -> str:
    parts = []
    for name, value in zip(names, args, strict=True):
        try:
            parts.append(f"{name}: {aval_of(value)}")
        except TypeError:
            parts.append(f"{name}={_short_repr(value)}")
    return "(" + ", ".join(parts) + ")"


def _short_repr(value) -> str:
    if isinstance(value, dict | list | tuple):
        from .pytree import flatten

        leaves, tree = flatten(value)
        texts = []
        for leaf in leaves:
            try:
                texts.append(str(aval_of(leaf)))
            except TypeError:
                texts.append(_constant_text(leaf))
        return format_structure(tree, texts).replace('"', "'")
    return _constant_text(value)


def _constant_text(value) -> str:
    """A constant of the trace as the header and docstrings show it, the same on every run:
    a function by its name (``np.tanh``, ``relu``), never its repr's memory address."""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if callable(value) and isinstance(name, str):
        for module, prefix in ((np, "np."), (math, "math.")):
            if getattr(module, name, None) is value:
                return prefix + name
        return name
    text = repr(value)
    return f"<{type(value).__name__} object>" if " at 0x" in text else text


def display_path(fn) -> str:
    loc = function_loc(fn)
    if loc is None:
        return "<unknown>"
    path = loc.file
    if path.startswith("<"):
        return path
    return _display_path(path, os.getcwd())


@functools.lru_cache(maxsize=256)
def _display_path(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd``, or its base name when it lies outside (os.path.relpath
    costs ~17 µs, a first call's fixed cost: asked once per file and working directory; a
    normalized absolute path, as a module's file is, is answered by comparing prefixes)."""
    if os.sep == "/" and path.startswith("/") and cwd.startswith("/") and not any(
            part in text for text in (path, cwd) for part in ("//", "/./", "/../")) and (
            not cwd.endswith(("/.", "/.."))):
        inside = cwd.rstrip("/") + "/"
        rel = path[len(inside):] if path.startswith(inside) else ".."
        return os.path.basename(path) if rel.startswith("..") else rel
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        rel = path
    return os.path.basename(path) if rel.startswith("..") else rel


def source_hash(fn) -> str:
    """A short hash of the function's source text, so a generated file can tell it is stale."""
    fn = unwrapped(fn)
    code = getattr(fn, "__code__", None)
    text = function_source(code) if code is not None else None
    if text is None:  # a lambda or a one-line def: inspect tokenizes the file to find it
        try:
            text = inspect.getsource(fn)
        except (OSError, TypeError):
            return "unavailable (no source)"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def keywords_text(request: Request) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in request.keywords)


# (tuples: a union written in a function is made each time it runs)
_FLOATS, _WRITTEN = (float, np.floating), (float, int, np.ndarray)


def _regenerate_line(path: str, fname, args, request: Request, command,
                     partial: bool = False) -> str:
    if command:
        return f"# Regenerate: {command}"
    if partial:  # the arguments it binds are constants of this trace; no command passes them
        return (f"# Regenerate: gradgen.emit(functools.partial({fname}, ...), *args) with "
                "arguments of this signature")
    if request.keywords:  # the CLI and gradgen.emit pass arguments by position only
        return (f"# Regenerate: gradgen.grad({fname})(*args, {keywords_text(request)}) with "
                "arguments of this signature")
    texts = []
    for value in args:
        if not isinstance(value, _WRITTEN) or (
                isinstance(value, np.ndarray) and value.size > 6):
            texts = None
            break
        texts.append(literal(value).text)
    if texts is not None and not path.startswith("<"):
        tup = "(" + ", ".join(texts) + ("," if len(texts) == 1 else "") + ")"
        extra = "" if request.argnums == (0,) else (
            f" --argnums {','.join(map(str, request.argnums))}")
        extra += " --vjp" if request.vjp else ""
        extra += f" --target {request.target}" if request.target != "numpy" else ""
        line = f'# Regenerate: gradgen emit {path}:{fname} --args "{tup}"{extra}'
        if len(line) <= 100:
            return line
    return f"# Regenerate: gradgen.emit({fname}, *args) with arguments of this signature"


# --- build ---------------------------------------------------------------------------------


def _add_cotangent_inputs(graph: Graph) -> list[Ref]:
    """Inputs for the cotangent of each output (vjp): named grad_<output>, valued 1."""
    refs = []
    values = graph.meta["values"]
    first_index = len(graph.meta["leaves"])
    for k, out in enumerate(graph.outputs):
        aval = out.aval
        base = out.node.name or ("out" if len(graph.outputs) == 1 else f"out_{k}")
        node = Node(OPS["input"], (), {"index": first_index + k}, (aval,), None,
                    f"grad_{base}", "input")
        values[node] = np.ones(aval.shape, aval.dtype)[()] if aval.py is None else aval.py(1)
        graph.nodes.insert(0, node)
        graph.inputs.append(node)
        refs.append(node.out)
    return refs


def without_gc(run):
    """Building allocates millions of small objects that all live until it ends: the cyclic
    collector would rescan them again and again (a quarter of the time at 10,000 ops).

    What the build keeps (the joint graph: ~13 tracked objects per op) is long-lived. Left
    young, the collection that ``gc.enable()`` sets off at the next allocation would walk every
    one of them (50 ms at 10,000 ops, half of the first run), then the middle generation's
    would walk them again. So when the build leaves more young objects than one young
    collection's threshold, they go straight to the oldest generation, as a collection would
    move them after the two walks: ``gc.freeze()`` then ``gc.unfreeze()`` moves every tracked
    object there without looking at any. That includes the caller's young objects, whose
    cycles (if any) wait for the next full collection instead of a young one; never done
    while the caller has frozen objects of its own (unfreeze would thaw them)."""

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return run(*args, **kwargs)
        finally:
            if was_enabled:
                if gc.get_count()[0] > gc.get_threshold()[0] and gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

    return wrapper


@without_gc
def build(fn, args, request: Request, command: str | None = None,
          annotate: bool = False) -> Built:
    """Trace ``fn`` at ``args``, differentiate, optimize and emit the module text."""
    names = parameter_names(fn, len(args))
    flat = None
    if request.vjp:
        argnums = tuple(range(len(args)))
    else:
        flat = check_differentiable(fn, args, request.argnums, names)
        argnums = tuple(a % len(args) for a in request.argnums)
    forward = trace_function(fn, args, names, loops=keeps_loops(request), flat=flat)
    if _hidden_in_loops(forward, request.intermediates):  # (that value is one trip's)
        forward = trace_function(fn, args, names, loops=False)
    leaves: list[Leaf] = forward.meta["leaves"]
    if not request.vjp:
        _check_scalar_output(forward, fn)
    positions = {n.attrs["index"]: i for i, n in enumerate(forward.inputs)}
    wrt = [k for k, leaf in enumerate(leaves) if leaf.arg in argnums and leaf.numeric
           and aval_of(leaf.value).dtype.kind == "f"]
    n_out = len(forward.outputs)
    if request.vjp:
        cotangents = _add_cotangent_inputs(forward)
        positions = {n.attrs["index"]: i for i, n in enumerate(forward.inputs)}
        joint = reverse(forward, [positions[k] for k in wrt], range(n_out), cotangents)
    else:
        joint = reverse(forward, [positions[k] for k in wrt])
    outputs = list(joint.outputs)
    names_wanted = _intermediate_refs(forward, joint, request.intermediates, fn)
    outputs += names_wanted
    full = own_outputs(optimize(joint.with_nodes(joint.nodes, outputs)),
                       range(n_out, len(outputs)))

    fname = forward.meta["fname"]
    names = forward.meta["arg_names"]
    trees: list[TreeDef] = forward.meta["arg_trees"]
    values = joint.meta["values"]
    input_names = {leaf_index: leaf.name for leaf_index, leaf in enumerate(leaves)}
    unpack = {leaf_index: _access(names[leaf.arg], leaf.path)
              for leaf_index, leaf in enumerate(leaves) if trees[leaf.arg] is not LEAF}
    grad_index = {k: n_out + j for j, k in enumerate(wrt)}
    convert = _conversions(leaves, wrt, joint, values, n_out)
    statics = _static_checks(leaves, names, trees, forward.meta["loc"])

    def grads_of(arg: int) -> tuple[TreeDef, list]:
        tree = trees[arg]
        items = []
        for k, leaf in enumerate(leaves):
            if leaf.arg == arg:
                items.append(grad_index.get(k, "None"))
        return tree, items

    sig = signature_text(names, args)
    sig_inner = sig[1:-1]
    if request.keywords:  # constants of this trace: another value is another path
        sig_inner += f" with {keywords_text(request)}"
    specs = []
    if request.vjp:
        out_tree = forward.meta["out_tree"]
        cot_names = {len(leaves) + k: n.name for k, n in enumerate(forward.inputs[-n_out:])}
        cot_unpack = {}
        if out_tree is not LEAF:
            from .pytree import leaf_paths

            for k, path in enumerate(leaf_paths(out_tree)):
                cot_unpack[len(leaves) + k] = _access("cotangent", path)
        else:
            cot_names[len(leaves)] = "cotangent"
        returns = TreeDef("tuple", (), (out_tree, TreeDef("tuple", (), tuple(
            trees[a] if any(leaf.arg == a and k in grad_index for k, leaf in enumerate(leaves))
            else LEAF for a in range(len(args))))))
        items = list(range(n_out))
        for a in range(len(args)):
            _, arg_items = grads_of(a)
            items += arg_items if any(i != "None" for i in arg_items) else ["None"]
        returns_full = (returns, items)
        specs.append(FunctionSpec(
            f"{fname}_vjp", [*names, "cotangent"], full, returns_full,
            f"Return ({fname}({', '.join(names)}), vjp) for {sig_inner}: the outputs and, "
            "for the cotangent of the outputs, one gradient per argument.",
            _output_name(forward), convert=convert, annotate=annotate,
            input_names={**input_names, **cot_names}, unpack={**unpack, **cot_unpack},
            check_finite=request.check_finite, static_checks=statics))
    else:
        d_of = [f"d{fname}/d{names[a]}" for a in argnums]
        grads_text = f"({', '.join(d_of)})" if request.as_tuple else d_of[0]
        grad_trees = [grads_of(a) for a in argnums]
        if request.as_tuple:
            grad_tree = TreeDef("tuple", (), tuple(t for t, _ in grad_trees))
            grad_items = [i for _, items in grad_trees for i in items]
        else:
            grad_tree, grad_items = grad_trees[0]
        if request.intermediates:
            extra = TreeDef("dict", request.intermediates, tuple(LEAF for _ in names_wanted))
            first = len(joint.outputs)
            grad_tree = TreeDef("tuple", (), (grad_tree, extra))
            grad_items = grad_items + list(range(first, first + len(names_wanted)))
            grads_text += f" and the adjoints of {', '.join(request.intermediates)}"
        # ``full`` is already optimized: dropping the value output only leaves dead code
        g_only, _ = dce(full.with_nodes(full.nodes, full.outputs[1:]))
        shifted = [i - 1 if isinstance(i, int) else i for i in grad_items]
        specs.append(FunctionSpec(
            f"{fname}_grad", list(names), g_only, (grad_tree, shifted),
            f"Return {grads_text} for {sig_inner}.", _output_name(forward),
            convert={k - 1: v for k, v in convert.items()}, annotate=annotate,
            input_names=input_names, unpack=unpack, check_finite=request.check_finite,
            static_checks=statics))
        call_text = f"{fname}({', '.join(names)})"
        returns_full = (TreeDef("tuple", (), (LEAF, grad_tree)), [0, *grad_items])
        specs.append(FunctionSpec(
            f"{fname}_value_and_grad", list(names), full, returns_full,
            f"Return ({call_text}, {grads_text}) for {sig_inner}.", _output_name(forward),
            convert=convert, annotate=annotate, input_names=input_names, unpack=unpack,
            check_finite=request.check_finite, static_checks=statics))
    path = display_path(fn)
    header = [
        f"# Code generated by gradgen {__version__} from {path}:{fname} for {sig}. DO NOT EDIT.",
        _regenerate_line(path, fname, args, request, command,
                         isinstance(fn, functools.partial)),
        f"# Source sha256: {source_hash(fn)}",
    ]
    module = Module(header, specs, request.target)  # nothing is written before it is read
    release_values(forward, full)
    forget_build_state(forward, *(spec.graph for spec in specs))
    return Built(module, forward, full, fname, request, wrt, returns_full, tuple(header),
                 tuple(specs))


def release_values(forward: Graph, joint: Graph) -> None:
    """Forget the traced arrays once the module is written: a compiled path would otherwise
    keep every forward intermediate alive (and the first run of the module would need the
    memory twice). Inputs, constants and the forward's outputs stay; anything else is
    Pending again, computed from the inputs if someone asks (check does, for its report)."""
    keep = {r.node for r in forward.outputs}
    for values in {id(g.meta["values"]): g.meta["values"] for g in (forward, joint)}.values():
        # only arrays and tuples of outputs are released: picked by a C loop, as scalar code
        # (every value a Python number) has none among a value per node
        held = list(compress(values.items(), map(isinstance, values.values(), repeat(
            (np.ndarray, tuple)))))
        for node, value in held:
            if node in keep or node.op.name in ("input", "const"):
                continue
            if isinstance(value, np.ndarray):
                values[node] = Pending.of(value)
            elif node.op.n_out > 1 and isinstance(value, tuple) and any(
                    isinstance(v, np.ndarray) for v in value):
                values[node] = Pending.of(value, node.op.n_out)
    _forget_backward_numbers(joint)


# The size from which the backward's numbers are forgotten (values of the joint graph): the
# pass costs ~2k instructions per op (0.7% of a first call), worth it where the dict is large.
FORGET_NUMBERS_FROM = 10_000


def _forget_backward_numbers(joint: Graph) -> None:
    """Drop the backward's floats from a large joint graph's values (the forward keeps its
    own): the emitted code computes them, the emitter asks a value only what kind of number
    or array it is, which a float's aval says, and ``concrete`` computes one again, exactly,
    from its inputs if someone asks (check does); a value with no inputs (the seed) and the
    gradients stay. On scalar code that is two entries per op of a dict the built function
    keeps, and their floats (~130 B per op). The dict is rebuilt in place (a dict never
    shrinks on delete): the graphs that share it keep sharing it."""
    values = joint.meta["values"]
    if len(values) < FORGET_NUMBERS_FROM:
        return
    kept = {node: value for node, value in values.items()
            if node.role != "bwd" or type(value) is not float or not node.inputs}
    kept.update((r.node, values[r.node]) for r in joint.outputs if r.node in values)
    if len(kept) < len(values):
        values.clear()
        values.update(kept)


def forget_build_state(*graphs: Graph) -> None:
    """Drop what only the build reads from the graphs a built function keeps: what the
    passes counted (no pass runs on them again) and reverse's map from each forward value to
    its adjoint (read by _intermediate_refs). Each is an entry per node for as long as the
    function lives, for the cyclic GC to walk."""
    for graph in graphs:
        forget_reads(graph)
        graph.meta.pop("adjoints", None)


def _output_name(forward: Graph) -> str:
    return forward.outputs[0].node.name or "out" if forward.outputs else "out"


def _static_checks(leaves, names, trees, loc) -> tuple:
    """The str and None arguments (or leaves of arguments) of a trace: constants of it, like
    keyword arguments, that the emitted module takes and never reads. Each gets a check that
    it still has its traced value (``if mode != 'sq': raise GuardFailure``): code that
    branched on it (``if mode == "sq":``, ``if mask is None:``) would otherwise give the
    traced branch's gradient for another value. (The decorator keys its cache on them.)
    A function (``act=np.tanh``) is checked by its name, ``act.__name__ == "tanh"``: what
    the module can say about it without importing it. Other constants (an enum, an object)
    have no literal to compare with."""
    checks = []
    for leaf in leaves:
        value = leaf.value
        name = getattr(value, "__name__", None) if callable(value) else None
        if value is None or type(value) is str or type(name) is str:
            where = (names[leaf.arg] if trees[leaf.arg] is LEAF
                     else _access(names[leaf.arg], leaf.path))
            if name is not None:
                text = string_literal(name)
                checks.append((f"{where}.__name__ == {text}",
                               f'getattr({where}, "__name__", None) != {text}', loc))
            elif value is None:
                checks.append((f"{where} is None", f"{where} is not None", loc))
            else:
                text = string_literal(value)  # ruff's quotes, where they say the same
                if not value.isprintable() or ast.literal_eval(text) != value:
                    text = repr(value)
                checks.append((f"{where} == {text}", f"{where} != {text}", loc))
    return tuple(checks)


def _access(root: str, path: tuple) -> str:
    from .pytree import access_text

    return access_text(root, path)


def _conversions(leaves, wrt, joint, values, n_out) -> dict[int, str]:
    """Wrap gradients so each has its argument's type: float for a Python float or a NumPy
    float scalar (API.md), an ndarray for a 0-d array."""
    convert = {}
    for j, k in enumerate(wrt):
        value = leaves[k].value
        g_value = shaped_value(values, joint.outputs[n_out + j])
        if isinstance(value, _FLOATS) and type(g_value) is not float:
            convert[n_out + j] = "float"
        elif isinstance(value, np.ndarray) and not isinstance(g_value, np.ndarray):
            convert[n_out + j] = "np.asarray"
    return convert


def _intermediate_refs(forward: Graph, joint: Graph, wanted, fn) -> list[Ref]:
    """The adjoint of the last value bound to each requested name (zeros if it has none)."""
    if not wanted:
        return []
    last_bound = forward.meta["last_bound"]
    adjoints = joint.meta.get("adjoints", {})
    refs = []
    for name in wanted:
        node = last_bound.get(name)
        if node is None:
            known = ", ".join(sorted(last_bound)) or "none"
            raise GradgenError(
                f"{forward.meta['fname']} has no intermediate value named {name!r} on the traced "
                f"path (named values: {known})", function_loc(fn))
        ref = adjoints.get(node)
        if ref is None:
            from .reverse import zeros_ref

            ref = zeros_ref(joint, node)
        refs.append(ref)
    return refs


# --- Jacobians and Hessians: one reverse pass per output element, in one graph ------------------


def _one_hot(aval, j: int):
    if aval.py is not None:
        return aval.py(1)
    basis = np.zeros(aval.size, aval.dtype)
    basis[j] = 1
    return basis.reshape(aval.shape)[()]


@without_gc
def build_jacobian(fn, args, request: Request, gradient=None,
                   command: str | None = None) -> Built:
    """``<f>_jacobian`` (or ``<f>_hessian``: the Jacobian of ``gradient``, api's grad of
    ``fn``, handed down since api sits above this module): JAX's shapes, output shape
    followed by input shape, built by reverse mode over the traced graph."""
    from .ops.arrays import reshape
    from .ops.index import stack
    from .tracer import Trace, at_loc
    from .tracing import function_name

    names = parameter_names(fn, len(args))
    check_differentiable(fn, args, request.argnums, names)
    argnums = tuple(a % len(args) for a in request.argnums)
    hessian = gradient is not None
    if hessian:
        def target(*a):
            return gradient(*a)

        forward = trace_function(target, args, names)
        forward.meta["fname"] = function_name(fn)
        forward.meta["loc"] = function_loc(fn)
    else:
        forward = trace_function(fn, args, names)
    leaves: list[Leaf] = forward.meta["leaves"]
    trees = forward.meta["arg_trees"]
    for a in argnums:
        if trees[a] is not LEAF:
            raise GradgenError(
                f"jacobian/hessian with respect to a dict/list/tuple argument ({names[a]!r}) "
                "is not supported yet", function_loc(fn), "pass a NumPy array")
    wrt = [k for k, leaf in enumerate(leaves) if leaf.arg in argnums]
    positions = {n.attrs["index"]: i for i, n in enumerate(forward.inputs)}
    joint = forward
    rows: dict[tuple[int, int], list[Ref]] = {}
    for o, out in enumerate(forward.outputs):
        if not out.aval.is_float:
            raise NonScalarOutput(f"output {o} of {forward.meta['fname']} is {out.aval}, not "
                                  "a float: it has no derivative", function_loc(fn))
        for j in range(out.aval.size):
            base = joint.with_nodes(joint.nodes, forward.outputs)
            joint = reverse(base, [positions[k] for k in wrt], (o,), [_one_hot(out.aval, j)])
            for n, k in enumerate(wrt):
                rows.setdefault((o, k), []).append(joint.outputs[1 + n])

    trace = Trace()
    trace.nodes, trace.inputs = list(joint.nodes), list(joint.inputs)
    trace.values = dict(joint.meta["values"])
    trace.lazy = True
    results = []
    with trace, at_loc(function_loc(fn)):
        for o, out in enumerate(forward.outputs):
            for k in wrt:
                parts = [trace.tracer(r) for r in rows[(o, k)]]
                in_shape = leaves[k].value.shape if isinstance(leaves[k].value,
                                                               np.ndarray) else ()
                if out.aval.shape == ():
                    results.append(parts[0].ref)
                    continue
                stacked = stack(*parts, axis=0)
                results.append(reshape(stacked, shape=out.aval.shape + tuple(in_shape)).ref)
    graph = Graph(trace.nodes, trace.inputs, results, dict(joint.meta, values=trace.values))
    full = own_outputs(optimize(graph), range(len(results)))

    fname = forward.meta["fname"]
    kind = "hessian" if hessian else "jacobian"
    per_output = [TreeDef("tuple", (), tuple(LEAF for _ in wrt)) if request.as_tuple else LEAF
                  for _ in forward.outputs]
    out_tree = forward.meta["out_tree"]
    tree = _replace_leaves(out_tree, per_output)
    items = list(range(len(results)))
    convert = {}
    for i, r in enumerate(results):  # the types grad gives (see _conversions)
        value, result = leaves[wrt[i % len(wrt)]].value, shaped_value(trace.values, r)
        if isinstance(value, _FLOATS) and r.aval.shape == () and type(
                result) is not float:
            convert[i] = "float"
        elif isinstance(value, np.ndarray) and not isinstance(result, np.ndarray):
            convert[i] = "np.asarray"
    sig = signature_text(names, args)
    what = "Hessian" if hessian else "Jacobian"
    spec = FunctionSpec(
        f"{fname}_{kind}", list(names), full, (tree, items),
        f"Return the {what} of {fname} with respect to "
        f"{', '.join(names[a] for a in argnums)} for {sig[1:-1]}.",
        _output_name(forward), convert=convert,
        input_names={k: leaf.name for k, leaf in enumerate(leaves)})
    header = [
        (f"# Code generated by gradgen {__version__} from {display_path(fn)}:{fname} for "
         f"{sig}. DO NOT EDIT."),
        f"# Regenerate: {command}" if command else
        f"# Regenerate: gradgen.{kind}({fname}) with arguments of this signature",
        f"# Source sha256: {source_hash(fn)}",
    ]
    module = Module(header, [spec])
    release_values(forward, full)
    forget_build_state(forward, full)
    return Built(module, forward, full, fname, request, wrt, (tree, items))


def _replace_leaves(tree: TreeDef, replacements: list[TreeDef]) -> TreeDef:
    it = iter(replacements)

    def walk(node: TreeDef) -> TreeDef:
        if node.kind == "leaf":
            return next(it)
        return TreeDef(node.kind, node.keys, tuple(walk(c) for c in node.children))

    return walk(tree)
