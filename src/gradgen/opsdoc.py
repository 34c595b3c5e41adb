"""docs/ops.md, generated from the rule table: which callables each op binds and its rule."""

from __future__ import annotations

from .ops import BOUND, OPS
from .ops.registry import CALLED_AS, callable_name

_STRUCTURAL = {"input", "const", "guard", "seed", "function_output", "loop", "loop_bwd",
               "loop_out"}  # the graph's own plumbing, not rows a user reaches
# Python syntax and builtins that reach an op without a bound callable.
_SYNTAX = {"add": "`+`", "sub": "`-`", "mul": "`*`", "div": "`/`", "pow": "`**`", "neg": "unary `-`",
           "abs": "`abs()`", "matmul": "`@`", "mod": "`%`", "floordiv": "`//`", "round": "`round()`",
           "lt": "`<`", "le": "`<=`", "gt": "`>`", "ge": "`>=`", "eq": "`==`", "ne": "`!=`",
           "trunc": "`int()`"}
# Rows with no array-API form (target="array-api" refuses them by name when emitting), and
# rows it refuses for some of their cases only (a form the standard lacks for those
# arguments). tests/test_array_api_rows.py emits every row's cases to keep both sets true.
ARRAY_API_REFUSED = frozenset({
    "add_along_axis", "cbrt", "convolve", "cummax", "cummin", "diag", "exp2", "fmax", "fmin",
    "fmod", "heaviside", "isclose", "logaddexp2", "nan_to_num", "nanmax", "nanmean", "nanmin",
    "nansum",
})
ARRAY_API_PARTLY = frozenset({"diagonal", "pad", "trace", "index_add", "take_along_axis",
                              "getitem", "tril", "triu", "repeat", "einsum"})


def _array_api_form(name: str) -> str:
    if name in ARRAY_API_REFUSED:
        return "no"
    return "some cases" if name in ARRAY_API_PARTLY else "yes"

def _called_as() -> dict[str, set[str]]:
    """op name -> every spelling that reaches it: bound callables, adapters, array methods."""
    from .tracer import _METHOD_TWINS

    names: dict[str, set[str]] = {}
    for target, handler in BOUND.items():
        if handler in OPS.values():
            names.setdefault(handler.name, set()).add(callable_name(target))
    for op, spellings in CALLED_AS.items():
        names.setdefault(op, set()).update(spellings)
    by_function = {}
    for op, spellings in names.items():
        for spelling in spellings:
            by_function.setdefault(spelling, set()).add(op)
    for method, function in [*_METHOD_TWINS.items(), *_EXTRA_METHODS.items()]:
        for op in by_function.get(callable_name(function), ()):
            names[op].add(f"x.{method}" if method in _PROPERTIES else f"x.{method}()")
    return names


_PROPERTIES = {"T", "mT", "real", "imag"}
# Methods the tracer spells out itself (their arguments differ from the function's).
_EXTRA_METHODS = {"reshape": "np.reshape", "transpose": "np.transpose", "T": "np.transpose",
                  "flatten": "np.ravel", "astype": "np.astype", "copy": "np.copy"}


def render_ops_markdown() -> str:
    called_as = _called_as()
    numpy_names = sorted({n for spellings in called_as.values() for n in spellings
                          if n.startswith(("np.", "math."))})
    methods = sorted({n for spellings in called_as.values() for n in spellings
                      if n.startswith("x.")})
    lines = [
        "# Supported operations",
        "",
        "Generated from gradgen's rule table (`src/gradgen/ops/`) by `python -m gradgen.opsdoc`;",
        "a test keeps it current. Each row is one op: the Python/NumPy callables that reach it",
        "and the derivative rule its VJP applies. Python operators (`+ - * / ** @`, unary `-`,",
        "`abs`, comparisons) reach the arithmetic ops directly; indexing (`x[i]`, `x[[0, 2]]`,",
        "`x[mask]`) reaches `getitem`, and in-place writes (`a[i] = v`, `a[i] += v`, `a += b`,",
        "`np.add.at`, `out=`) reach `index_update`, `index_add` and the arithmetic rows, as new",
        "versions of the array.",
        "",
        (f"{len(numpy_names)} NumPy and `math` names and {len(methods)} array methods reach "
         f"{sum(1 for n in OPS if n not in _STRUCTURAL)} rows. Arrays the function makes itself"),
        ("(`np.zeros`, `np.empty`, `np.ones`, `np.full`, their `_like` forms, `np.array`, "
         "`np.asarray`,"),
        "`np.eye`, `np.arange`, `np.linspace`) are constants until a traced value is written",
        "into them; `np.array([a, b])` of traced values stacks them, and so does a list of",
        "traced values passed where NumPy reads an array (`np.sum([f(w) for w in ws])`).",
        "`np.add.reduce`, `np.multiply.reduce`, `np.maximum.reduce`, `np.minimum.reduce` and",
        "`np.add.accumulate`, `np.multiply.accumulate` are the `sum`, `prod`, `max`, `min`,",
        "`cumsum` and `cumprod` rows (with NumPy's default of axis 0);",
        "`np.maximum.accumulate` and `np.minimum.accumulate` are the `cummax` and `cummin` rows.",
        "Some functions are built from the rows as NumPy's own code computes them (values equal",
        "to the bit unless noted): `np.quantile` and `np.percentile` (methods linear, lower,",
        "higher, nearest, midpoint: the gradient reaches the one or two sorted entries each",
        "quantile reads), `np.interp` (at a knot the slope of the segment to its right, 0 at",
        "and beyond the end knots), `np.polyval` (Horner's rule), `np.piecewise` (each function",
        "sees only its own piece, so another piece's nan never reaches the gradient, unlike",
        "`np.where`), `np.cov` and `np.corrcoef` (constant weights), `np.gradient` and",
        "`np.ediff1d`, `np.bincount` (weights), `np.digitize`, `np.fill_diagonal`,",
        "`np.diagflat`, `np.nonzero`/`np.where(c)`/`np.argwhere` (the count is a guard, as for",
        "`x[mask]`), `np.sum`/`np.mean`/`np.max`/`np.min` with `where=` and `initial=`, the",
        "`.outer` of any ufunc with a row, `np.block`, `np.put`, `np.allclose` (a Python bool: a",
        "guard), `np.linalg.lstsq` of a full-rank matrix (pinv(a) @ b: equal up to rounding),",
        "and `np.apply_along_axis` and `np.vectorize`, which call your function per slice or",
        "entry.",
        "SciPy's `scipy.special.logsumexp`, `softmax`, `log_softmax` and `expit` are spelled",
        "with these rows too (the module imports NumPy only; logsumexp's shift passes no",
        "gradient, as in JAX); any other SciPy function on traced values is refused by name.",
        "",
        "A function without a row raises `gradgen.UnsupportedOperation` naming it and your line.",
        "Add a row with `gradgen.defvjp(fn, vjp_0, vjp_1, ..., sympy=..., rule_text=...)`: each",
        "`vjp_i(g, ans, *args)` returns the contribution of the cotangent `g` of `ans = fn(*args)`",
        "to `args[i]`, written with NumPy on the traced values it receives (so it is differentiated",
        "again, emitted and checked like the rows below); or wrap the code in a `gradgen.Function`.",
        "",
        "The last column says whether `target=\"array-api\"` writes the row: yes, no (the emit",
        "raises `gradgen.UnsupportedOperation` naming it and your line), or for some of its",
        "arguments only (the standard has no form for the others).",
        "",
        "| op | called as | derivative rule | array API |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(OPS):
        op = OPS[name]
        if name in _STRUCTURAL:
            continue
        names = {f"`{n}`" for n in called_as.get(name, ())}
        called = ", ".join(([_SYNTAX[name]] if name in _SYNTAX else []) + sorted(names))
        called = called or "internal (inserted by reverse mode)"
        if op.nondiff:
            rule = op.extra.get("doc", "locally constant: zero gradient")
        else:
            rule = "; ".join(f"`{t}`" for t in op.rule_text) or "identity"
        rule = rule.replace("|", chr(92) + "|")
        lines.append(f"| `{name}` | {called} | {rule} | {_array_api_form(name)} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_ops_markdown(), end="")
