"""docs/ops.md, generated from the rule table: which callables each op binds and its rule."""

from __future__ import annotations

from .ops import BOUND, OPS
from .ops.registry import CALLED_AS, callable_name

_STRUCTURAL = {"input", "const", "guard", "seed", "function_output"}
# Python syntax and builtins that reach an op without a bound callable.
_SYNTAX = {"add": "`+`", "sub": "`-`", "mul": "`*`", "div": "`/`", "pow": "`**`", "neg": "unary `-`",
           "abs": "`abs()`", "matmul": "`@`", "mod": "`%`", "floordiv": "`//`", "round": "`round()`",
           "lt": "`<`", "le": "`<=`", "gt": "`>`", "ge": "`>=`", "eq": "`==`", "ne": "`!=`",
           "trunc": "`int()`"}
def render_ops_markdown() -> str:
    lines = [
        "# Supported operations",
        "",
        "Generated from gradgen's rule table (`src/gradgen/ops/`) by `python -m gradgen.opsdoc`;",
        "a test keeps it current. Each row is one op: the Python/NumPy callables that reach it",
        "and the derivative rule its VJP applies. Python operators (`+ - * / ** @`, unary `-`,",
        "`abs`, comparisons) reach the arithmetic ops directly.",
        "",
        "| op | called as | derivative rule |",
        "| --- | --- | --- |",
    ]
    for name in sorted(OPS):
        op = OPS[name]
        if name in _STRUCTURAL:
            continue
        names = {f"`{callable_name(t)}`" for t, target in BOUND.items() if target is op}
        names.update(f"`{n}`" for n in CALLED_AS.get(name, ()))
        called = ", ".join(([_SYNTAX[name]] if name in _SYNTAX else []) + sorted(names))
        called = called or "internal (inserted by reverse mode)"
        if op.nondiff:
            rule = "locally constant: zero gradient"
        else:
            rule = "; ".join(f"`{t}`" for t in op.rule_text) or "identity"
        lines.append(f"| `{name}` | {called} | {rule.replace('|', chr(92) + '|')} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_ops_markdown(), end="")
