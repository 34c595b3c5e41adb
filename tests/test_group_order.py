"""A backward group reads in the order its source line writes the operands: the renames
(``grad_a = grad_c``) of a named number read once are made as soon as their reader's rule
has run, in operand order, below what they name (DESIGN.md section 6). An array's rename
stays where reverse mode's walk makes it (its buffer may be written into after a read), and
never stands above a write into the array it aliases. (face-7's tests of a text-moving
emitter, now of reverse mode.)"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient


def _function(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    return source[start:].split("\n\n\n")[0]


def _statements(body: str) -> list[str]:
    return [line.strip() for line in body.splitlines()]


def _header(fn, statement: str) -> str:
    """The comment gradgen writes above the backward group of ``statement`` in ``fn``."""
    lines, first = inspect.getsourcelines(fn)
    at = next(k for k, line in enumerate(lines) if line.strip() == statement)
    return f"# test_group_order.py:{first + at}  {statement}"


# --- renames in operand order ---------------------------------------------------------------


def design(x):
    y = x * x
    a = y + 1
    b = y * 2
    c = a + b
    return c


def swapped(a, b):
    c = b + a
    return c * c


def add_mul(a, b, d):
    c = a + b
    e = c * d
    return e


def three(a, b, w):
    c = a + b - w
    return c * c


@pytest.mark.parametrize("fname", ["design_grad", "design_value_and_grad"])
def test_the_designs_renames_follow_the_operands(fname):
    lines = _statements(_function(gradgen.emit(design, 2.0), fname))
    at = lines.index("grad_a = grad_c")
    assert lines[at + 1] == "grad_b = grad_c"
    assert lines[at - 1].endswith("c = a + b")  # under its line's comment


def test_operand_order_is_the_lines_not_the_definitions():
    lines = _statements(_function(gradgen.emit(swapped, 1.5, 0.5, argnums=(0, 1)),
                                  "swapped_grad"))
    assert lines.index("grad_b = grad_c") + 1 == lines.index("grad_a = grad_c")
    assert_gradient(swapped, 1.5, 0.5, argnums=(0, 1))


def test_inputs_renamed_in_operand_order():
    lines = _statements(_function(gradgen.emit(add_mul, 2.0, 3.0, 4.0, argnums=(0, 1, 2)),
                                  "add_mul_grad"))
    assert lines.index("grad_a = grad_c") + 1 == lines.index("grad_b = grad_c")


def test_renames_follow_the_operands_computed_adjoints_stand_where_the_rule_made_them():
    """c = a + b - w: w's adjoint is computed by the subtraction's rule (-grad_c), the
    renames of a + b's operands follow, in operand order."""
    body = _function(gradgen.emit(three, 0.5, 1.5, 0.25, argnums=(0, 1, 2)), "three_grad")
    lines = _statements(body)
    names = [line.split(" = ")[0] for line in lines if line.startswith("grad_")]
    assert names.index("grad_w") < names.index("grad_a") < names.index("grad_b")
    assert_gradient(three, 0.5, 1.5, 0.25, argnums=(0, 1, 2))


# Arrays: a rename is an alias, so it must stay below every write into what it names.


def masked(a, b):
    c = a + b
    c[0] = 0.0
    d = c * c
    return d.sum() + (a * b).sum()


def stepped(a, b):
    h = a + b
    for k in range(3):
        h[k] = h[k] * a[k] + b[k]
    e = h + a
    return (e * e).sum()


def shifted(a, b, w):
    c = a + b
    d = c - w
    d[1:] += a[:-1]
    return (d * d).sum()


def rolled(a, b):
    h = a + b
    for k in range(40):
        h = np.tanh(h * a + b)
    c = h + b
    return (c * c).sum()


@pytest.mark.parametrize("fn", [masked, stepped, shifted, rolled])
def test_renames_of_written_arrays_keep_their_values(fn):
    rng = np.random.default_rng(3)
    n = fn.__code__.co_argcount
    args = tuple(rng.normal(size=4) * 0.5 for _ in range(n))
    _, source = assert_gradient(fn, *args, argnums=tuple(range(n)))
    for name in (f"{fn.__name__}_grad", f"{fn.__name__}_value_and_grad"):
        _no_rename_above_a_write(_function(source, name))


def _no_rename_above_a_write(body: str) -> None:
    """No ``t = s`` (a rename) comes before a later write into ``s`` that is not also
    after a rebinding of ``s`` or ``t``: the alias would read as the unwritten array."""
    lines = _statements(body)
    for i, line in enumerate(lines):
        m = re.fullmatch(r"(grad_\w+) = (grad_\w+)", line)
        if not m:
            continue
        target, source = m.groups()
        for later in lines[i + 1:]:
            if later.startswith((f"{source} = ", f"{target} = ")):
                break
            assert not later.startswith((f"{source}[", f"{source} +=")), (target, later)
            assert f"out={source})" not in later, (target, later)


def test_the_shifted_groups_rename_stands_in_its_group():
    source = gradgen.emit(shifted, *(np.arange(4.0),) * 3, argnums=(0, 1, 2))
    lines = _statements(_function(source, "shifted_grad"))
    at = lines.index(_header(shifted, "d = c - w"))
    assert lines[at + 1].startswith("grad_w = ") and lines[at + 2].startswith("grad_c = ")


@pytest.mark.parametrize("lines, moved", [
    # the rename goes right below what made its value, in its own group
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_w = -g", "grad_a = grad_c"],
     ["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_a = grad_c", "grad_w = -g"]),
    # never above a write into the array it names
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_c[0] = 0.0", "grad_w = -g",
      "grad_a = grad_c"],
     ["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_c[0] = 0.0", "grad_a = grad_c",
      "grad_w = -g"]),
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "np.add(grad_c, v, out=grad_c)",
      "grad_a = grad_c"], None),
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_c += v", "grad_a = grad_c"], None),
    # nor above a line that reads or binds its name, a del, a loop
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_b = grad_a + 1.0",
      "grad_a = grad_c"], None),
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "del big", "grad_a = grad_c"], None),
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "for t in range(3):", "    v = t",
      "grad_a = grad_c"], None),
    # nor out of its own group, nor above an operand the line writes first
    (["# f.py:2  c = g * 2.0", "grad_c = g * 2.0", "# f.py:3  c = a + b", "grad_w = -g",
      "grad_a = grad_c"],
     ["# f.py:2  c = g * 2.0", "grad_c = g * 2.0", "# f.py:3  c = a + b", "grad_a = grad_c",
      "grad_w = -g"]),
    (["# f.py:3  c = a + b", "grad_c = g * 2.0", "grad_a = grad_c", "grad_b = grad_c"], None),
])
def chain_of_lines(x, w):
    t9 = x * w
    t18 = math.sin(x) + 3.0
    t20 = math.exp(w)
    t25 = x - w
    t28 = t9 * (t18 + t20 * t25)
    return math.sin(t28)


def test_a_rename_made_after_other_groups_joins_its_own():
    body = _function(gradgen.emit(chain_of_lines, 0.3, 0.7, argnums=(0, 1)),
                     "chain_of_lines_grad")
    lines = _statements(body)
    header = _header(chain_of_lines, "t28 = t9 * (t18 + t20 * t25)")
    assert lines.count(header) == 1  # one group: the rename is not a second one
    at = lines.index(next(line for line in lines if line.startswith("grad_t18 = ")))
    assert lines[at - 1].startswith(f"{lines[at].split(' = ')[1]} = ")  # below its value
    assert_gradient(chain_of_lines, 0.3, 0.7, argnums=(0, 1))


