"""gradgen.Function: a user's forward and backward, both traced and inlined as ordinary ops.

The forward runs on the tracers as usual, so its ops are emitted inline. Each of its outputs
then passes through a ``function_output`` node: an identity whose VJP is not derived from the
forward's ops but is the user's ``backward``, called once per call with one cotangent per
output, in output order (zeros for an output that does not reach the loss). The index of each
output travels with its node: that is how the backward knows which gradient is which.
"""

from __future__ import annotations

import inspect
import itertools

import numpy as np

from .abstract import shaped_value
from .errors import GradgenError
from .ir import Graph, Node, Ref
from .ops.core import cast
from .ops.registry import defop
from .source import SourceLoc, current_loc, parameter_names
from .tracer import Tracer, at_loc, bind, shaped

_calls = itertools.count(1)


class Context:
    """What ``forward`` leaves for ``backward``: saved values and any attributes set on it."""

    def __init__(self):
        self._saved: tuple = ()

    def save_for_backward(self, *values) -> None:
        self._saved = values

    @property
    def saved_values(self) -> tuple:
        return self._saved

    saved_tensors = saved_values  # the PyTorch spelling


def _print_output(node, args):
    return args[0]


def _show_attrs(attrs) -> str:
    """How listings and drawings show a Function output: its class and output index, not the
    call's bookkeeping (whose reprs hold memory addresses)."""
    return f"{attrs['function'].__name__}, output {attrs['index']} of {attrs['n_out']}"


# Identity on the forward's output; reverse mode calls the Function's backward instead of
# differentiating the forward's ops. Inputs: (forward output, *call arguments, *saved values).
function_output = defop(
    "function_output", lambda out, *rest, **attrs: out, _print_output,
    vjp=(), sympy=lambda out, *rest, **attrs: out,
    extra={"structural": True, "show_attrs": _show_attrs})


class Function:
    """Subclass with ``@staticmethod forward(ctx, *args)`` and
    ``@staticmethod backward(ctx, *grad_outputs)``; call ``MyFunction.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args):  # pragma: no cover - subclasses define it
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grad_outputs):  # pragma: no cover - subclasses define it
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        ctx = Context()
        outputs = cls.forward(ctx, *args)
        if not any(isinstance(a, Tracer) for a in args):
            return outputs  # nothing is traced: a plain call
        if cls.backward is Function.backward:  # refused now, at the call, not in reverse mode
            raise GradgenError(
                f"{cls.__name__} defines no backward, so gradgen has no gradient for it",
                current_loc(), "add @staticmethod def backward(ctx, *grad_outputs) returning "
                "one gradient per argument of forward")
        # several outputs come as a tuple or a list: each must pass through the user's rule
        single = not isinstance(outputs, tuple | list)
        outs = (outputs,) if single else outputs
        call = next(_calls)
        saved = tuple(ctx.saved_values)
        extras = {k: v for k, v in vars(ctx).items() if k != "_saved"}
        results = []
        for i, out in enumerate(outs):
            if not isinstance(out, Tracer):
                results.append(out)
                continue
            attrs = {"function": cls, "index": i, "n_out": len(outs), "n_args": len(args),
                     "call": call, "ctx_extras": _Frozen(extras)}
            results.append(bind(function_output, (out, *args, *saved), attrs))
        if single:
            return results[0]
        return tuple(results) if isinstance(outputs, tuple) else results


class _Frozen:
    """Non-tensor attributes the user set on ctx, carried (unhashed) to the backward."""

    def __init__(self, values: dict):
        self.values = values

    def __hash__(self):
        return id(self)


def backward_loc(cls) -> SourceLoc | None:
    try:
        lines, first = inspect.getsourcelines(cls.backward)
        filename = inspect.getsourcefile(cls.backward) or "<unknown>"
    except (OSError, TypeError):
        return None
    # skip decorators (@staticmethod): point at the `def backward` line itself
    offset = next((i for i, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
    return SourceLoc(filename, first + offset, f"{cls.__name__}.backward")


def function_groups(graph: Graph) -> dict[tuple, list[Node]]:
    """The function_output nodes of each Function call, keyed by (call, call arguments)."""
    groups: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        if node.op is function_output:
            groups.setdefault((node.attrs["call"], node.inputs[1:]), []).append(node)
    return groups


class _Banner:
    """Origin of the backward's ops, for the emitter's comment naming the Function and the
    output each incoming gradient belongs to."""

    def __init__(self, text: str):
        self.banner = text
        self.rule_text = (text,)
        self.name = "function"


def pull_back_function(trace, siblings: list[Node], gs, needed, contributions) -> None:
    """Call the user's backward once for one Function call; record its gradients."""
    first = siblings[0]
    cls = first.attrs["function"]
    n_out, n_args = first.attrs["n_out"], first.attrs["n_args"]
    by_index = {s.attrs["index"]: (s, g) for s, g in zip(siblings, gs, strict=True)}
    grads_in = []
    for i in range(n_out):
        node, g = by_index.get(i, (None, None))
        if g is None:  # an output that does not reach the loss: zeros of its shape
            aval = node.aval if node is not None else None
            g = _zeros_like(shaped_value(trace.values, node.out)) if aval is not None else 0.0
        grads_in.append(g)
    arg_refs = first.inputs[1:1 + n_args]
    saved_refs = first.inputs[1 + n_args:]
    ctx = Context()
    vars(ctx).update(first.attrs["ctx_extras"].values)
    ctx._saved = tuple(_value_for(trace, r) for r in saved_refs)
    params = parameter_names(cls.backward, n_out, skip=1)
    described = ", ".join(_describe_gradient(params[s.attrs["index"]], s) for s in siblings)
    banner = _Banner(f"{cls.__name__}.backward: {described}")
    with at_loc(None, (banner, 0)):
        result = cls.backward(ctx, *grads_in)
    grads = result if isinstance(result, tuple | list) else (result,)
    where = backward_loc(cls)
    if len(grads) != n_args:
        raise GradgenError(
            f"{cls.__name__}.backward returned {len(grads)} gradient"
            f"{'s' if len(grads) != 1 else ''} for {n_args} input{'s' if n_args != 1 else ''}",
            where, "return one gradient per argument of forward (None where none is needed)")
    for k, (ref, g) in enumerate(zip(arg_refs, grads, strict=True)):
        if g is None or ref.node not in needed:
            continue
        if not isinstance(g, Tracer) and np.asarray(g).dtype.kind not in "biuf":
            raise GradgenError(
                f"{cls.__name__}.backward returned a {type(g).__name__} as the gradient for "
                f"input {k}", where, "return a number or an array shaped like that input "
                "(None where none is needed)")
        shape = np.shape(shaped(g))
        if shape != ref.aval.shape:
            raise GradgenError(
                f"{cls.__name__}.backward returned a gradient of shape {shape} for input {k}, "
                f"whose shape is {ref.aval.shape}", where)
        dtype = ref.aval.dtype
        if ref.aval.is_float and np.result_type(shaped(g)) != dtype:
            # like PyTorch: a gradient takes its input's dtype (float32 stays float32)
            if isinstance(g, Tracer):
                with at_loc(g.ref.node.loc or where, (banner, 0)):
                    g = cast(g, dtype=dtype.name)
            else:
                g = np.asarray(g, dtype)[()] if ref.aval.py is None else float(g)
        if not isinstance(g, Tracer):
            g = Tracer(trace, trace.const(g), g)
        contributions.setdefault(ref, []).append((first.serial, g, first, 1 + k))


def _describe_gradient(param: str, output: Node) -> str:
    """Which output a backward parameter is the gradient of: ``grad1 = d/db (output 0)``."""
    index = output.attrs["index"]
    if output.name:
        return f"{param} = d/d{output.name} (output {index})"
    return f"{param} = the gradient of output {index}"


def _value_for(trace, ref: Ref):
    if ref.node.op.name == "const":
        return ref.node.attrs["value"]
    return trace.tracer(ref)


def _zeros_like(value):
    if isinstance(value, np.ndarray | np.generic):
        return np.zeros_like(value)
    return 0.0
