"""Route ``math.sin``, ``from math import sin`` and helper functions to ops while tracing,
without touching the user's modules: we trace copies whose globals see traced versions."""

from __future__ import annotations

import builtins
import math
import random
import sys
import types

import numpy as np

from .errors import UnsupportedOperation, scipy_hint
from .ops.registry import BOUND, FOREIGN, OPS, Op
from .source import current_loc
from .tracer import _NO_ATTRS, Tracer, bind, from_nested, has_traced, plain_values

# Modules whose functions are never copied: we trace through their public entry points.
_OPAQUE_TOP = {"numpy", "scipy", "sympy", "gradgen", "builtins"} | set(
    sys.stdlib_module_names)


# math functions of sequences, spelled with operations that have rules
_MATH_SPELLINGS = {
    "fsum": "write sum(values) (the same sum, rounded as it goes)",
    "dist": "write math.sqrt(sum((a - b) ** 2 for a, b in zip(p, q)))",
    "sumprod": "write sum(a * b for a, b in zip(p, q))",
}


def _no_math_rule(name: str) -> UnsupportedOperation:
    return UnsupportedOperation(
        f"math.{name} has no gradient rule in gradgen", current_loc(),
        _MATH_SPELLINGS.get(name, "add a rule with gradgen.defvjp (see docs/ops.md) or wrap "
                            "the code in a gradgen.Function with a backward"))


def _of_sequences(name: str, fn, args, kwargs):
    """A math function of plain values, or of lists of them: ``math.prod([a, b])`` multiplies
    traced items as written; one that takes float() of each (``math.fsum``) is refused by
    its own name, not as the float() the user never wrote."""
    try:
        return fn(*args, **kwargs)
    except UnsupportedOperation:
        if any(type(a) in (list, tuple) and any(isinstance(v, Tracer) for v in a)
               for a in args):
            raise _no_math_rule(name) from None
        raise


def _traced_math_function(name: str, fn):
    def traced(*args, **kwargs):
        if len(args) == 1 and not kwargs:  # math.sin(x): one layer between the user and bind
            x = args[0]
            if not isinstance(x, Tracer):
                return fn(x) if type(x) not in (list, tuple) else _of_sequences(name, fn, args, {})
            op = BOUND.get(fn)
            if type(op) is Op:
                return bind(op, (x if type(x._value) is float else _as_math_sees(x),),
                            _NO_ATTRS)
        for a in args:  # (a plain loop: this runs per math call of the traced code)
            if isinstance(a, Tracer):
                break
        else:
            return _of_sequences(name, fn, args, kwargs)
        handler = BOUND.get(fn)  # looked up now: the rows register after this module loads
        if handler is None:
            raise _no_math_rule(name)
        return handler(*map(_as_math_sees, args), **kwargs)

    traced.__name__ = name
    traced.__qualname__ = f"math.{name}"
    traced.__wrapped__ = fn
    return traced


def _routed(fn, handler):
    """A Python function with a rule of its own: traced as one op, run as it is otherwise."""

    def traced(*args, **kwargs):
        if any(isinstance(a, Tracer) for a in args):
            return handler(*args, **kwargs)
        return fn(*args, **kwargs)

    traced.__name__ = getattr(fn, "__name__", "traced")
    traced.__wrapped__ = fn
    return traced


def _as_math_sees(x):
    """math functions compute on float(x): a traced NumPy float scalar becomes a Python float,
    so math.sin(np.float64) traces math.sin's value and type, as it runs untraced."""
    if isinstance(x, Tracer) and x.aval.py is None and x.aval.shape == () and x.aval.is_float:
        return OPS["cast"](x, dtype="float")
    return x


def _make_math_proxy() -> types.ModuleType:
    proxy = types.ModuleType("math", "math, as gradgen's tracer sees it")
    for name in dir(math):
        value = getattr(math, name)
        if callable(value) and not name.startswith("_"):
            value = _traced_math_function(name, value)
        setattr(proxy, name, value)
    return proxy


MATH_PROXY = _make_math_proxy()
_MATH_BY_FUNCTION = {getattr(math, n): getattr(MATH_PROXY, n)
                     for n in dir(math) if callable(getattr(math, n)) and not n.startswith("_")}


_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)  # (a union is made per use)


class Interceptor:
    """Per trace: the traced copies of user functions and their globals, memoized so that
    recursive helpers find their own copy."""

    def __init__(self):
        self.functions: dict[int, tuple[object, object]] = {}
        self.globals: dict[int, tuple[dict, dict]] = {}
        self.modules: dict[int, tuple[types.ModuleType, types.ModuleType]] = {}
        self.builtins: dict[int, tuple[dict, dict]] = {}  # by id of the original table

    def wrap(self, value):
        """What the traced code should see in place of ``value``."""
        if value is math:
            return MATH_PROXY
        if value is np:
            return NUMPY_PROXY
        if value is np.random or value is random:
            return _RANDOM_PROXIES[value.__name__]
        # (a plain function's attributes are in its __dict__: asked there, the common case
        # raises no AttributeError inside getattr)
        if (type(value) is not types.FunctionType or "__self__" in value.__dict__) and getattr(
                value, "__self__", None) in _GLOBAL_GENERATORS:  # from numpy.random import rand
            prefix = "random" if value.__self__ is random._inst else "np.random"
            return _refused_draw(f"{prefix}.{value.__name__}")
        if isinstance(value, _FUNCTIONS) and (
                value in _NUMPY_BY_FUNCTION):  # from numpy import zeros
            return _NUMPY_BY_FUNCTION[value]
        if isinstance(value, types.BuiltinFunctionType):
            return _MATH_BY_FUNCTION.get(value, value)
        if isinstance(value, np.vectorize):  # @np.vectorize over a function of the user's
            return _TracedVectorize.of(value, self.wrap(value.pyfunc))
        if isinstance(value, types.FunctionType) and value in BOUND:  # a gradgen.defvjp rule
            return _routed(value, BOUND[value])
        if isinstance(value, types.FunctionType) and (
                getattr(value, "__module__", None) or "").startswith("scipy."):
            return _scipy_function(value, f"scipy.special.{value.__name__}" if (
                value.__module__.startswith("scipy.special")) else value.__qualname__)
        if isinstance(value, types.ModuleType) and _is_scipy(value.__name__):
            return _ScipyProxy(value)
        if isinstance(value, types.FunctionType) and self._is_user_function(value):
            return self.function(value)
        if isinstance(value, types.ModuleType) and self._is_user_module(value):
            return self.module(value)
        return value

    @staticmethod
    def _is_user_function(fn) -> bool:
        module = (getattr(fn, "__module__", None) or "").split(".")[0]
        return module not in _OPAQUE_TOP

    @staticmethod
    def _is_user_module(module) -> bool:
        return module.__name__.split(".")[0] not in _OPAQUE_TOP

    def module(self, module: types.ModuleType) -> types.ModuleType:
        """A stand-in for a user module (``helpers.f(x)``): attributes wrapped on lookup."""
        hit = self.modules.get(id(module))
        if hit is None:
            hit = self.modules[id(module)] = (module, _ModuleProxy(module, self))
        return hit[1]

    def function(self, fn: types.FunctionType) -> types.FunctionType:
        key = id(fn)
        hit = self.functions.get(key)
        if hit is not None:
            return hit[1]
        new_globals = self._globals_for(fn.__globals__)
        # Empty cells first, filled after the copy is memoized, so a recursive closure
        # (a helper that calls itself through its enclosing scope) finds this copy.
        cells = None if fn.__closure__ is None else tuple(types.CellType() for _ in fn.__closure__)
        copy = types.FunctionType(fn.__code__, new_globals, fn.__name__, fn.__defaults__, cells)
        self.functions[key] = (fn, copy)
        for new, old in zip(cells or (), fn.__closure__ or ()):
            try:
                new.cell_contents = self.wrap(old.cell_contents)
            except ValueError:  # an empty cell: a name the enclosing scope assigns later
                pass
        copy.__kwdefaults__ = fn.__kwdefaults__
        copy.__dict__.update(fn.__dict__)
        copy.__qualname__ = fn.__qualname__
        copy.__module__ = fn.__module__
        return copy

    def builtins_for(self, original) -> dict:
        """The builtins the traced copies run with: the same, but ``import math`` inside a
        function hands it the traced ``math`` (and a user module its stand-in), as a
        module-level import does."""
        table = original if isinstance(original, dict) else original.__dict__
        hit = self.builtins.get(id(table))
        if hit is not None:
            return hit[1]
        real_import = table["__import__"]

        def traced_import(name, globals=None, locals=None, fromlist=(), level=0):
            return self.wrap(real_import(name, globals, locals, fromlist, level))

        patched = {**table, "__import__": traced_import}
        self.builtins[id(table)] = (table, patched)
        return patched

    def _globals_for(self, original: dict) -> dict:
        key = id(original)
        hit = self.globals.get(key)
        if hit is not None:
            return hit[1]
        patched = _PatchedGlobals(original, self)
        self.globals[key] = (original, patched)
        return patched


class _PatchedGlobals(dict):
    """A lazily filled copy of a module's globals: each name is wrapped on first lookup."""

    def __init__(self, original: dict, interceptor: Interceptor):
        super().__init__()
        self._original = original
        self._interceptor = interceptor
        self["__builtins__"] = interceptor.builtins_for(original.get("__builtins__", builtins))

    def __missing__(self, name):
        value = self._original[name]  # KeyError -> NameError / builtins lookup, as usual
        wrapped = self._interceptor.wrap(value)
        self[name] = wrapped
        return wrapped


class _ModuleProxy(types.ModuleType):
    """What traced code sees in place of a user module: the module's attributes, each
    wrapped on first lookup, so ``helpers.f(x)`` runs a traced copy of ``f``."""

    def __init__(self, original: types.ModuleType, interceptor: Interceptor):
        super().__init__(original.__name__, original.__doc__)
        self.__dict__["_gradgen_original"] = original
        self.__dict__["_gradgen_interceptor"] = interceptor

    def __getattr__(self, name):  # only called for names not cached in __dict__ yet
        value = getattr(self.__dict__["_gradgen_original"], name)
        wrapped = self.__dict__["_gradgen_interceptor"].wrap(value)
        self.__dict__[name] = wrapped
        return wrapped

    def __setattr__(self, name, value):  # the user's module state stays the user's
        setattr(self.__dict__["_gradgen_original"], name, value)
        self.__dict__.pop(name, None)


# --- NumPy as traced code sees it ------------------------------------------------------------


def _current_trace():
    from .tracer import _stack

    stack = _stack()
    return stack[-1] if stack else None


def _buffer(value):
    """A new array made by the traced code: a constant that turns traced when a traced value
    is written into it (``h = np.zeros((T, n)); h[t] = ...``)."""
    trace = _current_trace()
    if trace is None or not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
        return value
    return trace.buffer(value)


def _np_array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    if has_traced(obj):
        if ndmin or order not in ("K", "A", "C"):
            raise UnsupportedOperation("np.array(..., ndmin=/order=) of traced values has no "
                                       "gradient rule in gradgen", current_loc())
        out = from_nested(obj, dtype)
        return OPS["copy"](out) if copy and out is obj else out
    return _buffer(np.array(plain_values(obj), dtype=dtype, copy=copy, order=order, ndmin=ndmin))


def _np_asarray(obj, dtype=None, order=None, **kw):
    if has_traced(obj):
        return from_nested(obj, dtype)
    if isinstance(obj, Tracer) and (dtype is None or np.dtype(dtype) == obj.dtype):
        return obj  # the same array, as NumPy hands it back
    return _buffer(np.asarray(plain_values(obj), dtype=dtype, order=order, **kw))


def _allocator(fn):
    def traced(*args, **kwargs):
        return _buffer(fn(*plain_values(args), **{k: plain_values(v) for k, v in kwargs.items()}))

    traced.__name__ = fn.__name__
    traced.__wrapped__ = fn
    return traced


def _like(fn):
    """np.zeros_like(x) of a traced x: a new constant array of x's shape and dtype."""

    def traced(a, *args, **kwargs):
        return _buffer(fn(np.asarray(a.value) if isinstance(a, Tracer) else plain_values(a),
                          *plain_values(args), **{k: plain_values(v) for k, v in kwargs.items()}))

    traced.__name__ = fn.__name__
    traced.__wrapped__ = fn
    return traced


def _np_empty(shape, dtype=float, order="C", **kw):
    # its contents are undefined: zeros make the trace, and the emitted module, repeatable
    return _buffer(np.zeros(plain_values(shape), dtype=dtype, order=order, **kw))


def _np_empty_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    return _like(np.zeros_like)(a, dtype=dtype, order=order, subok=subok, shape=shape, **kw)


NUMPY_OVERRIDES = {
    "array": _np_array, "asarray": _np_asarray, "asanyarray": _np_asarray,
    "ascontiguousarray": _np_asarray, "empty": _np_empty, "empty_like": _np_empty_like,
    **{name: _allocator(getattr(np, name))
       for name in ("zeros", "ones", "full", "eye", "identity", "arange", "linspace", "tri",
                    "fromfunction")},
    **{name: _like(getattr(np, name)) for name in ("zeros_like", "ones_like", "full_like")},
}
_NUMPY_BY_FUNCTION = {getattr(np, name): fn for name, fn in NUMPY_OVERRIDES.items()}


# NumPy functions whose list arguments are sequences of arrays, not one array: NumPy's own
# dispatch already sees the traced items in them.
_SEQUENCE_ARGUMENTS = frozenset((
    "concatenate", "stack", "vstack", "hstack", "dstack", "column_stack", "row_stack", "block",
    "meshgrid", "broadcast_arrays", "einsum", "einsum_path", "ix_", "result_type", "can_cast",
    "promote_types", "printoptions", "set_printoptions", "errstate", "seterr", "vectorize",
    "frompyfunc", "apply_along_axis", "apply_over_axes", "piecewise", "select"))


# np.sum and its kind: _ArrayFunctionDispatcher objects in NumPy 2, plain functions before
_NUMPY_FUNCTION = (type(np.sum), types.FunctionType, types.BuiltinFunctionType)


def _lists_as_arrays(args):
    """NumPy reads a list argument as ``np.asarray(list)``, which for a list that holds traced
    values (``np.sum([f(w) for w in ws])``) is the traced stack np.array would make."""
    converted = None
    for i, a in enumerate(args):
        if type(a) in (list, tuple) and has_traced(a):
            converted = converted or list(args)
            converted[i] = from_nested(a, None)
    return args if converted is None else converted


def _reading_lists(fn):
    def traced(*args, **kwargs):
        return fn(*_lists_as_arrays(args), **kwargs)

    traced.__name__ = getattr(fn, "__name__", "traced")
    traced.__qualname__ = f"np.{traced.__name__}"
    traced.__doc__ = fn.__doc__
    traced.__wrapped__ = fn
    return traced


class _UfuncReadingLists:
    """A ufunc as traced code sees it: called, it reads list arguments as arrays (above);
    everything else (``np.add.reduce``, ``.nin``, ``.identity``) is the ufunc's own."""

    __slots__ = ("ufunc",)

    def __init__(self, ufunc):
        self.ufunc = ufunc

    def __call__(self, *args, **kwargs):
        return self.ufunc(*_lists_as_arrays(args), **kwargs)

    def __getattr__(self, name):
        return getattr(self.ufunc, name)

    def __repr__(self):
        return repr(self.ufunc)


class _NumpyProxy(types.ModuleType):
    """``np`` as traced code sees it: NumPy itself, except that arrays the code makes
    (np.zeros, np.array, ...) can receive traced values, np.array([a, b]) of traced values is
    a traced stack, and so is a list of traced values passed where NumPy expects an array."""

    def __getattr__(self, name):
        value = NUMPY_OVERRIDES.get(name)
        if value is None:
            value = getattr(np, name)
            if isinstance(value, np.ufunc):
                value = _UfuncReadingLists(value)
            elif isinstance(value, _NUMPY_FUNCTION) and name not in _SEQUENCE_ARGUMENTS:
                value = _reading_lists(value)
        self.__dict__[name] = value
        return value


NUMPY_PROXY = _NumpyProxy("numpy", np.__doc__)


# --- np.vectorize ---------------------------------------------------------------------------


class _TracedVectorize:
    """``np.vectorize(pyfunc)`` as traced code sees it. Called with traced values, ``pyfunc``
    runs once per entry of the broadcast arguments, as NumPy's own loop runs it (so a branch
    inside it is a guard per entry), and the results are stacked into the array NumPy would
    return; with plain values it is NumPy's vectorize. One call per entry makes a long trace
    for a large array: an array expression of the same arithmetic traces in one op."""

    def __init__(self, pyfunc=np._NoValue, otypes=None, doc=None, excluded=None, cache=False,
                 signature=None):
        self.plain = np.vectorize(pyfunc, otypes=otypes, doc=doc, excluded=excluded,
                                  cache=cache, signature=signature)
        self.pyfunc, self.otypes, self.signature = pyfunc, otypes, signature
        self.excluded = set(excluded or ())

    @classmethod
    def of(cls, vectorized: np.vectorize, pyfunc) -> _TracedVectorize:
        return cls(pyfunc, otypes=vectorized.otypes or None, excluded=vectorized.excluded,
                   signature=vectorized.signature)

    def __call__(self, *args, **kwargs):
        if self.pyfunc is np._NoValue:  # @np.vectorize(otypes=...) as a decorator
            return _TracedVectorize(args[0], otypes=self.otypes, excluded=self.excluded,
                                    signature=self.signature)
        if not has_traced(list(args) + list(kwargs.values())):
            return self.plain(*args, **kwargs)
        if self.signature is not None:
            raise UnsupportedOperation("np.vectorize(..., signature=...) of traced values has "
                                       "no rule in gradgen", current_loc(),
                                       "write the function on whole arrays")
        looped = [i for i in range(len(args)) if i not in self.excluded]
        named = [k for k in kwargs if k not in self.excluded]
        values = {**{i: args[i] for i in looped}, **{k: kwargs[k] for k in named}}
        values = {k: from_nested(v, None) if isinstance(v, list | tuple) else v
                  for k, v in values.items()}
        shape = np.broadcast_shapes(*(np.shape(v.value if isinstance(v, Tracer) else v)
                                      for v in values.values()))
        spread = {k: np.broadcast_to(v, shape) for k, v in values.items()}
        results = []
        for index in np.ndindex(shape):
            call_args = [spread[i][index] if i in spread else a for i, a in enumerate(args)]
            call_kwargs = {k: spread[k][index] if k in spread else v for k, v in kwargs.items()}
            results.append(self.pyfunc(*call_args, **call_kwargs))
        out = np.reshape(from_nested(results, None), shape)
        if self.otypes:
            out = out.astype(np.dtype(self.otypes[0]))
        return out


# --- SciPy ----------------------------------------------------------------------------------
#
# SciPy's functions are not NumPy's: gradgen has no rows for them (an emitted module imports
# NumPy and math only). Called on traced values they are refused by name, with the NumPy
# spelling of the common ones, instead of failing deep inside SciPy's code.

def scipy_refusal(qualname: str) -> UnsupportedOperation:
    """The error for a SciPy function called on traced values."""
    return UnsupportedOperation(f"{qualname} (SciPy) has no gradient rule in gradgen",
                                current_loc(), scipy_hint(qualname.rsplit(".", 1)[-1]))


def _is_scipy(module_name: str) -> bool:
    return module_name == "scipy" or module_name.startswith("scipy.")


def _scipy_function(fn, qualname: str):
    """A SciPy function as traced code sees it: spelled with rows where gradgen has its NumPy
    form (ops/scipy_special.py), refused by name otherwise."""
    spelled = FOREIGN.get(qualname)

    def traced(*args, **kwargs):
        if has_traced(list(args) + list(kwargs.values())):
            if spelled is not None:
                return spelled(*args, **kwargs)
            raise scipy_refusal(qualname)
        return fn(*args, **kwargs)

    traced.__name__ = getattr(fn, "__name__", "scipy_function")
    traced.__wrapped__ = fn
    return traced


class _ScipyProxy(types.ModuleType):
    """A SciPy module as traced code sees it: its functions refuse traced values by name."""

    def __init__(self, module: types.ModuleType):
        super().__init__(module.__name__, module.__doc__)
        self.__dict__["_gradgen_original"] = module

    def __getattr__(self, name):
        module = self.__dict__["_gradgen_original"]
        value = getattr(module, name)
        if isinstance(value, types.FunctionType) and value in BOUND:  # a gradgen.defvjp rule
            value = _routed(value, BOUND[value])
        elif isinstance(value, types.ModuleType) and _is_scipy(value.__name__):
            value = _ScipyProxy(value)  # scipy.special, reached from scipy
        elif callable(value) and not isinstance(value, type | np.ufunc | types.ModuleType):
            value = _scipy_function(value, f"{module.__name__}.{name}")
        self.__dict__[name] = value
        return value


# --- random numbers -------------------------------------------------------------------------
# A draw made while tracing is a constant of the trace: the emitted module (and the cached
# gradient of @grad) would reuse this trace's numbers on every later call, while the user's
# function draws new ones. That is a silently wrong gradient, so a draw from a global or
# unseeded generator is refused by name; a generator seeded inside the function makes the
# same numbers on every call, and its draws are constants for real.

_GLOBAL_GENERATORS = (np.random.mtrand._rand, random._inst)
# constructors that are deterministic when given a seed (first argument or seed=)
_SEEDED = {"default_rng", "RandomState", "Random", "SeedSequence", "Generator", "MT19937",
           "PCG64", "PCG64DXSM", "Philox", "SFC64"}
_NOT_DRAWS = {"seed", "get_state", "set_state", "getstate", "setstate", "get_bit_generator",
              "set_bit_generator"}


def _refused_draw(qualname: str):
    def traced(*args, **kwargs):
        raise UnsupportedOperation(
            f"{qualname}() inside a traced function: its numbers would be frozen into the "
            "gradient, and every later call would reuse this trace's draw", current_loc(),
            "draw the numbers outside the function and pass them in as an argument, or draw "
            "them from a generator seeded inside it (rng = np.random.default_rng(0))")

    traced.__name__ = qualname.rsplit(".", 1)[-1]
    return traced


def _needs_seed(qualname: str, fn):
    def traced(*args, **kwargs):
        seed = args[0] if args else kwargs.get("seed", kwargs.get("x"))
        if seed is None:
            raise UnsupportedOperation(
                f"{qualname}() without a seed inside a traced function: its numbers would be "
                "frozen into the gradient, and every later call would reuse this trace's draw",
                current_loc(), "give it a seed, or draw the numbers outside the function and "
                "pass them in as an argument")
        return fn(*args, **kwargs)

    traced.__name__ = fn.__name__
    traced.__wrapped__ = fn
    return traced


class _RandomProxy(types.ModuleType):
    """``np.random`` or ``random`` as traced code sees it: seeded constructors work, draws
    from the global generator are refused (see above); everything else is the module's."""

    def __init__(self, module: types.ModuleType, prefix: str):
        super().__init__(module.__name__, module.__doc__)
        self.__dict__["_gradgen_original"] = module
        self.__dict__["_gradgen_prefix"] = prefix

    def __getattr__(self, name):
        value = getattr(self.__dict__["_gradgen_original"], name)
        qualname = f"{self.__dict__['_gradgen_prefix']}.{name}"
        if name in _SEEDED:
            value = _needs_seed(qualname, value)
        elif (callable(value) and not isinstance(value, type) and not name.startswith("_")
              and name not in _NOT_DRAWS):
            value = _refused_draw(qualname)
        self.__dict__[name] = value
        return value


_RANDOM_PROXIES = {"numpy.random": _RandomProxy(np.random, "np.random"),
                   "random": _RandomProxy(random, "random")}
NUMPY_OVERRIDES["random"] = _RANDOM_PROXIES["numpy.random"]
NUMPY_OVERRIDES["vectorize"] = _TracedVectorize
