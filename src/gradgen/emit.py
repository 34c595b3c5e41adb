"""Graph -> Python module text: one statement per named value, single-use temporaries
inlined, comments quoting the user's source, guards as explicit checks."""

from __future__ import annotations

import itertools
import re
import textwrap
from dataclasses import dataclass, field, replace

import numpy as np

from . import layout
from .abstract import made_as_view, shaped_value
from .dialects import CONCRETE_CLASS, CONCRETE_HELPER, SCOPES
from .ir import Graph, Node
from .loops.emit import RegionWriter
from .naming import Held, Namer, base_name, index_writes, unversioned
from .ops import OPS
from .ops.core import _nested, literal
from .ops.index import SCATTER_HELPER, index_text
from .ops.registry import PREC_ADD, Expr, new_expr, string_literal
from .optimize.pieces import concat_pieces
from .pytree import format_structure

INLINE_LIMIT = 10  # ops per inlined expression; past it a temporary gets a statement
INLINE_WIDTH = 70  # characters per inlined expression, likewise
LINE_LIMIT = 100
DEL_MIN_BYTES = 1 << 20  # arrays at least this large are deleted after their last reader
_NOTHING = Expr("")  # what a statement with no value (a[i] = v) prints
_IMPORT_RE = {"math": ("math.", re.compile(r"\bmath\.")), "numpy": ("np.", re.compile(r"\bnp\."))}


@dataclass
class FunctionSpec:
    """One emitted function: its graph (outputs in order), signature and return shape."""

    name: str
    params: list[str]
    graph: Graph
    returns: tuple  # (TreeDef, items): items are output indices, or "None"
    doc: str
    output_name: str = "out"
    convert: dict[int, str] = field(default_factory=dict)  # output index -> wrapper call
    annotate: bool = False  # comment each backward statement with the rules it applies
    check_finite: bool = False  # after each backward group, raise on inf/nan adjoints
    input_names: dict[int, str] = field(default_factory=dict)  # input index -> variable
    unpack: dict[int, str] = field(default_factory=dict)  # input index -> params["W1"]
    # A loop body (loops/emit.py): the enclosing function's names, its block depth, names
    # fixed in advance (a carry written back into its own variable) and outputs added into
    # an accumulator (grad_W += ...); no return statement.
    namer: Namer | None = None
    depth: int = 1
    preset: dict[Node, str] = field(default_factory=dict)
    accumulate: dict[Node, str] = field(default_factory=dict)
    body_only: bool = False
    owned: frozenset = frozenset()  # inputs whose arrays the loop owns: written in place
    # Arguments that are constants of the trace (a str, None): (``mode == 'sq'``, the test
    # that fails off it, ``mode != 'sq'``, the def line). Checked first, as guards: the
    # module ignores the argument, so another value would give the traced path's gradient.
    static_checks: tuple = ()


@dataclass
class EmittedFunction:
    lines: list[str]
    guards: list[str]
    imports: set[str]
    helpers: set[str] = field(default_factory=set)
    classes: set[str] = field(default_factory=set)
    code: str = ""
    results: list[str] = field(default_factory=list)  # the outputs' texts (loop bodies)


class ModuleConstants:
    """Constant arrays too large to inline, shared by the functions of one module."""

    def __init__(self):
        self.lines: list[str] = []
        self.by_key: dict[tuple, str] = {}

    def name_for(self, value: np.ndarray) -> str:
        return self._named(("array",), value, lambda: literal(value).text)

    def name_for_list(self, value: np.ndarray) -> str:
        """A module-level nested list (the array-API target makes it an array per call)."""
        return self._named(("list",), value, lambda: _nested(value))

    def _named(self, kind: tuple, value: np.ndarray, text) -> str:
        """One module-level name per distinct constant (of each kind), defined once."""
        key = (*kind, value.dtype.str, value.shape, value.tobytes())
        name = self.by_key.get(key)
        if name is None:
            name = f"ARRAY_{len(self.by_key)}"
            self.by_key[key] = name
            self.lines.append(layout.statement(f"{name} = {text()}", 0))
        return name


def _holds_it(rename: Node, names: dict[Node, str], returned: bool) -> bool:
    """Is the value an ``adjoint`` node renames already under its name, or under one of its
    versions? A rename is an alias, no copy: ``grad_h_2 = grad_h_3`` after ``grad_h_3[3] =
    0.0`` (h_2's adjoint is left in h_3's array, as the forward writes one ``h``) would only
    say the version again. A returned gradient keeps its own name (``return grad_x``)."""
    held_as = names.get(rename.inputs[0].node)
    return held_as == rename.name or (
        held_as is not None and rename.name is not None and not returned
        and unversioned(held_as) == unversioned(rename.name))


def _comment_for_group(loc, node: Node | None = None, name: str = "") -> str:
    text = loc.text()
    line = f"# {loc.short}  {text}" if text else f"# {loc.short}"
    note = _both_sides(node, name, text) if node is not None and text else ""
    if note:
        line += f"  ({note})"
    return line if len(line) <= LINE_LIMIT - 4 else line[: LINE_LIMIT - 7] + "..."


# x * x, t + t: the operators one name may stand on both sides of, as written (spaced or not)
_OPERATORS = tuple(f"{space}{op}{space}" for space in (" ", "")
                   for op in ("**", "//", "*", "+", "-", "/", "@", "%"))


def _both_sides(node: Node, name: str, text: str) -> str:
    """What a group's first statement owes to one value on both sides of an op: the
    adjoint of ``x`` in ``y = x * x`` is ``2 * (grad_y * x)``, the two equal contributions
    counted once (reverse's fused sum, or fold's ``t + t``). A reader who sees only the
    ``2`` asks where it came from; the comment says, when the source shows it: ``x * x``
    (x on both sides) or ``np.hypot(x, x)`` (x as both arguments). '' for anything else."""
    if node.op.name != "mul" or not name.startswith("grad_"):  # (2 * t: few statements)
        return ""
    factor, term = node.inputs[0].node, node.inputs[1].node
    if factor.op.name != "const" or term.op.name == "const" or term.role == "fwd":
        return ""
    value = factor.attrs["value"]
    if getattr(value, "shape", ()) != () or value != 2:
        return ""
    held = unversioned(name.removeprefix("grad_"))
    if not held.isidentifier() or held not in text:
        return ""
    for operator in _OPERATORS:  # (string searches: no pattern compiled per name)
        if _word_at(text, f"{held}{operator}{held}", before=".([") >= 0:
            return f"{held} on both sides"
    if f"({held}, {held})" in text or f"({held}, {held}," in text:
        return f"{held} as both arguments"
    return ""  # (the same value under two names, or inside a longer operand: not shown)


def _word_at(text: str, word: str, before: str = "") -> int:
    """Where ``word`` first stands as a whole name in ``text`` (not part of a longer name,
    nor an attribute: ``.x``; nor followed by a character of ``before``), or -1. String
    searches, no regex: a pattern per name would be compiled per call."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if not (at and (text[at - 1].isalnum() or text[at - 1] in "_.")) and not (
                end < len(text) and (text[end].isalnum() or text[end] in "_" + before)):
            return at
        at = text.find(word, at + 1)
    return -1


def _fused_note(target: str, uses: tuple[str, ...]) -> str:
    if len(uses) == 2:  # most sums gather two lines' parts: told apart without a dict
        distinct = uses if uses[0] != uses[1] else uses[:1]
    else:
        distinct = list(dict.fromkeys(uses))
    if len(distinct) == 1:
        where = f"{len(uses)} times by {distinct[0]}"
    else:
        where = ", ".join(distinct[:-1]) + f" and {distinct[-1]}"
        if len(distinct) > 4:
            where = f"{', '.join(distinct[:3])} and {len(distinct) - 3} more lines"
    return f"# {target} is used {'' if len(distinct) == 1 else 'by '}{where}: one fused sum"


class _Survey:
    """What the emitter needs to know of a graph before it writes a line, gathered in one
    pass over the nodes: which node reads each value last, the values read more than once
    (one read once and not returned is inlined) and those that more than one node reads
    (naming's ``Held.reader``), the ops, the rules' origins, the user's names, the distinct
    avals tuples, and the values an adjoint renames. On a large graph every pass costs a
    cache miss per node, and the seven passes in C (attrgetter, Counter) this one replaced
    cost more instructions per node than its few lines. It counts no reads (``Graph.uses``:
    two dict operations per read) and maps no serials (naming asks for a serial's node only
    of a value no longer in the graph): a third fewer instructions (1e3 ops)."""

    __slots__ = ("again", "avals", "last_reader", "ops", "origins", "renamed", "several",
                 "user_names")

    def __init__(self, graph: Graph):
        ops, origins, user_names = set(), set(), set()
        renamed, twice, several = set(), set(), set()
        avals, last_reader = {}, {}
        add_op, add_name, reader_of = ops.add, user_names.add, last_reader.get
        origin = shared = None  # the last node's: nodes in a row mostly share theirs
        for node in graph.nodes:
            op = node.op
            add_op(op)
            if node.origin is not origin:
                origin = node.origin
                origins.add(origin)
            add_name(node.name)
            if node.avals is not shared:  # (the nodes of scalar code share a few tuples)
                shared = node.avals
                avals[id(shared)] = shared
            for ref in node.inputs:
                operand = ref.node
                reader = reader_of(operand)
                if reader is not None:  # read again: by this node (x * x), or by another
                    if reader is node:
                        twice.add(operand)
                    else:
                        several.add(operand)
                last_reader[operand] = node
            if op.name == "adjoint":
                renamed.add(node.inputs[0].node)
        user_names.discard(None)
        self.ops, self.origins, self.user_names = ops, origins, user_names
        self.renamed, self.last_reader, self.several = renamed, last_reader, several
        self.again = several | twice if twice else several
        self.avals = list(itertools.chain.from_iterable(avals.values()))  # distinct, mostly


def emit_function(spec: FunctionSpec, constants: ModuleConstants,
                  target: str = "numpy") -> EmittedFunction:
    if target == "array-api":  # no in-place writes: a buffer's slice updates as one join
        spec = replace(spec, graph=concat_pieces(spec.graph))
    graph = spec.graph
    scope = SCOPES[target](spec, graph)
    survey = _Survey(graph)
    outputs = {r.node for r in graph.outputs}
    # What the function has, found once from its ops and the rules its backward came from:
    # most have no writes into arrays, slice updates, renames, loops or user Functions, and
    # skip the scan each of those needs.
    ops = survey.ops
    op_names = {op.name for op in ops}
    # The ops the loop below treats apart: per node, one set lookup says whether it is one of
    # them (nearly every node is not: an op printed as an expression).
    leaf_ops = {op for op in ops if op.name in ("input", "const", "loop_out")}
    write_ops = {op for op in ops if op.extra.get("statement")}
    special_ops = leaf_ops | write_ops | {
        op for op in ops if op.name in ("adjoint", "guard", "seed", "add_n")
        or op.extra.get("region")}
    has_writes = bool(write_ops)
    # A value whose only reader is an adjoint (a pure rename) is inlined however large it is.
    renamed = survey.renamed
    namer = spec.namer or Namer([spec.name, *spec.params, *spec.input_names.values()])
    depth = spec.depth
    regions = RegionWriter(graph, namer, spec, constants, emit_loop_body, ops)
    names: dict[Node, str] = {}
    body: list[str] = []
    for node in graph.inputs:
        index = node.attrs["index"]
        names[node] = spec.input_names.get(index) or spec.params[index]
        if index in spec.unpack and (node in survey.last_reader or node in outputs):  # a leaf
            # of a dict/list/tuple argument, read or returned
            body.append(layout.statement(f"{names[node]} = {spec.unpack[index]}", depth))
    exprs: dict[Node, Expr] = {}
    inlined: dict[Node, int] = {}  # an inlined value -> how many ops its expression has
    notes: dict[Node, tuple[str, ...]] = {}
    rules: dict[Node, tuple[str, ...]] = {}
    origins: dict[Node, tuple] = {}  # user Functions whose backward a statement comes from
    # What inlined operands carry into a statement is gathered per node; each kind only where
    # the function has it (most have no rule comments, no user Function, no fused note).
    annotate = spec.annotate
    banners = any(o and hasattr(o[0], "banner") for o in survey.origins)
    code_parts: list[str] = []
    guards: list[str] = []
    for written, test, loc in spec.static_checks:
        body.append(layout.statement(f"if {test}:", depth))
        body.extend(raise_lines("GuardFailure", f"{loc}: traced where `{written}` is True",
                                indent=4 * depth + 4))
        guards.append((f"{written} ({loc})", True))
    group_loc = None
    tail_loc, tail = None, ""  # a forward statement's comment: its line's, made once per line
    banner = None
    finite = _FiniteChecks(scope, depth)
    buffers = _Buffers(graph, spec.owned) if has_writes else None
    writes = index_writes(graph.nodes) if has_writes else {}
    last_reader, again = survey.last_reader, survey.again
    # what unnamed values hold, for their names
    held = Held(graph.nodes, names, survey.user_names, survey.last_reader, survey.several)
    held.taken = namer.taken
    liveness = _Liveness(graph, writes, has_writes, survey.avals)
    views = _SliceViews(graph, namer,
                        enabled=target == "numpy" and "index_add" in op_names)

    in_place = has_writes and buffers.active
    # Dead temporaries updated in place: where arrays are written (a buffer's slice updates
    # are where a value's last reader comes after its copy), never where the finite checks
    # read adjoints at a group's end, nor in a loop body run once per trip.
    temps = (_Temporaries(graph, outputs, graph.meta.get("values") or {}, survey)
             if target == "numpy" and not spec.check_finite and not spec.body_only
             else None)
    if temps is not None and not temps.readers:
        temps = None  # no backward array: scalar code, most of it
    aliases = bool(regions.aliased)
    check_finite = spec.check_finite
    width = LINE_LIMIT - 4 * depth  # columns a statement has at this depth
    preset, accumulate, output_name = spec.preset, spec.accumulate, spec.output_name
    print_expr = scope.expr
    rows_as_written = scope.rows_as_written  # NumPy: each row's printer, called directly
    applied = ()  # (per node only when rules are annotated)
    # a statement however short: a value read more than once, or returned
    forced = again | outputs
    # what a few statements do besides being written (each only when the function has it)
    extras = annotate or banners or check_finite
    emit_line = body.append
    for position, node in enumerate(graph.nodes):
        if in_place:
            buffers.see(node, position)
        row = node.op
        special = row in special_ops
        if special and row in leaf_ops:
            op = row.name
            if op == "input":
                exprs[node] = Expr(names[node])
            elif op == "const":
                exprs[node] = scope.literal(node.attrs["value"], constants)
            else:  # loop_out, one result of a loop: the variable the loop left it in
                exprs[node] = Expr(regions.result(node))
            continue
        if aliases:
            alias = regions.alias(node)
            if alias is not None:  # grad_W = grad_W: the loop's accumulator has the name
                names[node] = alias
                exprs[node] = Expr(alias)
                continue
        # The operands' texts, and what they carry into this expression: their inlined size,
        # and the lines a fused sum gathers from (rules and Functions below, when there are).
        # This node is an inlined operand's only reader: its expression is handed over
        # (popped), so the tables keep only what is still to be read, not one Expr per node.
        # (A plain loop: for one or two operands, map and list cost more than they save.)
        args = []
        size, note = 1, ()
        for ref in node.inputs:
            operand = ref.node
            if operand not in inlined:  # a name or a literal
                args.append(exprs[operand])
                continue
            args.append(exprs.pop(operand))
            size += inlined.pop(operand)
            if notes and operand in notes:
                note += notes.pop(operand)
        # a[i] = v is printed as an assignment; it and the seed are statements however short
        write = stated = seed = False
        if special:
            op = row.name
            if row in write_ops:
                write = stated = True
            elif op == "seed":
                seed = stated = True
            elif op == "add_n":
                if node.attrs.get("uses"):  # the lines whose parts a fused sum gathers
                    note = note + tuple(node.attrs["uses"])
            elif row.extra.get("region"):
                lines, loop_guards = regions.write(node, args, position)
                body.extend(lines)
                guards.extend(loop_guards)
                code_parts.extend(lines)
                exprs[node] = Expr("")  # read only by its loop_out nodes and its reverse
                continue
            elif op == "adjoint" and _holds_it(node, names, node in outputs):
                names[node] = names[node.inputs[0].node]  # a buffer already built under
                exprs[node] = args[0]  # the adjoint's name, or one of its versions
                continue
            elif op == "guard":
                written = _condition_as_written(node) or args[0].text
                cond = scope.truth(args[0], node, written)
                expect = node.attrs["expect"]
                test = f"not {cond.at(5)}" if expect else cond.text
                described = f"`{written}` is {expect}"
                message = f"{node.loc}: traced where {described}" if node.loc else (
                    f"traced where {described}")
                guards.append((f"{written} ({node.loc})" if node.loc else written, expect))
                body.append(layout.statement(f"if {test}:", depth))
                body.extend(raise_lines("GuardFailure", message, indent=4 * depth + 4))
                code_parts.append(test)
                continue
        expr = (_NOTHING if write else row.printer(node, args) if rows_as_written
                else print_expr(node, args))
        if annotate:
            applied = ()
            for ref in node.inputs:
                applied += rules.get(ref.node, ())
            applied += _rule_of(node)
        if banners:
            origin = ()
            for ref in node.inputs:
                origin += origins.get(ref.node, ())
            origins[node] = origin + (
                (node.origin[0],) if node.origin and hasattr(node.origin[0], "banner") else ())
        if not (node.name is not None or node in forced or node not in last_reader or stated
                or in_place and buffers.reads_buffer(node)
                or (size > INLINE_LIMIT or len(expr.text) > INLINE_WIDTH)
                and node not in renamed):  # inlined into its one reader
            update = temps.update(node, args, names, exprs, renamed) if temps is not None else None
            if update is not None:  # g *= a: the value is left in a dead temporary's array
                lines, expr = update
                size = 1
                if lines:
                    if node.loc is not None and node.loc != group_loc and node.role == "bwd":
                        body.append(_comment_for_group(node.loc))
                        group_loc = node.loc
                    body.extend(layout.statement(text, depth) for text in lines)
                    code_parts.append(lines[-1])
            exprs[node] = expr
            inlined[node] = size
            if note:
                notes[node] = note
            if applied:
                rules[node] = applied
            if liveness.readers:
                liveness.inline(node)
            continue
        prelude = ""
        if write:
            base = node.inputs[0].node
            if base.op.name == "const":  # a literal is a new array wherever it is written
                fresh = args[0].text not in constants.by_key.values()
            else:
                fresh = buffers.writable(node, position)
            if fresh and base in names:
                name = names[base]  # the old version is dead: write into its array
            else:
                name = namer.fresh(base_name(node, names, spec.output_name, writes, held))
                if base.aval.shape == ():  # a NumPy scalar has no items: a 0-d array
                    fresh = False
            prelude, statement = scope.write(node, args, name, fresh, args[0])
            prelude, statement = views.through_view(node, args, name, names, prelude,
                                                    statement)
        elif accumulate and node in accumulate:
            name = accumulate[node]
            statement = f"{name} += {expr.text}"
        else:
            name = preset and preset.get(node) or namer.fresh(
                node.name or base_name(node, names, output_name, writes, held))
            statement = f"{name} = {expr.text}"
        names[node] = name
        exprs[node] = new_expr(name)
        if extras:
            if check_finite and node.role == "bwd" and not seed:
                finite.step(node, name, body, code_parts)
            if banners:
                origin_op = next((o for o in origins.get(node, ()) if o is not banner), None)
                if origin_op is not None:
                    body.append(f"# {origin_op.banner}")  # a user Function's backward starts
                    banner = origin_op
        code_parts.append(f"{prelude}\n{statement}" if prelude else expr.text or statement)
        if annotate and applied:  # (a comment: not among the code parts imports are read from)
            statement += "  # " + "; ".join(dict.fromkeys(applied))
        loc = node.loc
        if node.role == "bwd":
            if seed:
                target = spec.output_name
                statement += f"  # seed: d{target}/d{target}"
            elif note:  # the fused sum names the lines it gathers from; no group header
                # the fused sum's own name says whose adjoint it is (grad_shifted), unless
                # the sum was inlined into this statement or the name is a fallback (tmp)
                own = node.name or (node.grad_of is not None and row.name == "add_n"
                                    and node not in held.fallbacks)
                # (the value's own name: grad_x_1, a second derivative, gathers x's uses)
                target = ((names.get(node.grad_of) if node.grad_of is not None else None)
                          or name.removeprefix("grad_")) if own else "this value"
                emit_line(_fused_note(target, note))
            elif loc is not None and loc is not group_loc and (  # (a line's ops share its
                    group_loc is None or loc.line != group_loc.line or loc != group_loc):
                # loc; another line's is told apart by its number before SourceLoc's
                # __eq__, a call in Python)
                emit_line(_comment_for_group(loc, node, name))
                group_loc = loc
        elif loc is not None:  # file:line, spelled once per source line (SourceLoc)
            if loc is not tail_loc:  # the statements of one line follow each other
                tail_loc, tail = loc, f"  # {loc.short}"
            statement += tail
        if expr.text == name and statement == f"{name} = {name}":
            continue  # a loop's adjoint that passes through a trip unchanged
        if prelude:  # a copy, a view bound
            body.extend(layout.lay_out(line, depth) for line in prelude.split("\n"))
        if len(statement) <= width and statement.isascii():
            emit_line(statement)  # it fits: nearly every statement
        else:  # wrapped as ruff format would; a long fused sum without parsing it
            body.append(expr.prec == PREC_ADD and statement == f"{name} = {expr.text}"
                        and layout.sum_assignment(name, expr.text, depth)
                        or layout.lay_out(statement, depth))
        if liveness.readers:
            dead = liveness.run(node, names)
            if dead and not check_finite:  # the checks read adjoints at the group's end
                body.append(layout.statement(f"del {', '.join(dead)}", depth))

    if body and body[-1].startswith("del "):
        body.pop()  # returning releases them anyway
    if spec.check_finite:
        finite.flush(body, code_parts)
    texts = [scope.converted(exprs[r.node].text, spec.convert.get(i), r.node)
             for i, r in enumerate(graph.outputs)]
    if spec.body_only:
        return EmittedFunction(body, guards, set(), set(), set(), results=texts)
    tree, items = spec.returns
    returned = format_structure(tree, [texts[i] if isinstance(i, int) else i for i in items])
    if tree.kind == "tuple" and len(tree.children) > 1:
        returned = returned[1:-1]  # return a, b
    body.append(layout.statement(f"return {returned}", 1))
    code_parts.append(returned)
    code = "\n".join(code_parts + constants.lines)
    body[:0] = scope.preamble(code)  # xp = array_namespace(...) where the target needs it
    if target != "numpy":  # guard messages quote the user's NumPy source; that is no import
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', code)
    imports = {mod for mod, (prefix, pattern) in _IMPORT_RE.items()
               if prefix in code and pattern.search(code)}  # (a regex scan only if it may)
    imports |= {op.extra["import"] for op in ops if op.extra.get("import")}
    helpers = {name for name in HELPERS if f"{name}(" in code}
    # (a loop's backward body checks its own adjoints: loops/emit.py)
    classes = {"NonFiniteGradient"} if finite.used or "NonFiniteGradient(" in code else set()
    return EmittedFunction(body, guards, imports, helpers, classes, code)


def emit_loop_body(spec: FunctionSpec, namer: Namer, constants: ModuleConstants, graph: Graph,
                   input_names: dict[int, str], preset: dict[Node, str],
                   accumulate: dict[Node, str], owned: frozenset = frozenset()
                   ) -> EmittedFunction:
    """A loop body inside ``spec``'s function, for loops/emit.py (which sits below this
    module): the function's names, one block deeper, outputs left in ``preset`` names or
    added into ``accumulate`` ones, no return statement; ``owned`` inputs are buffers the
    loop may write rows of in place."""
    body_spec = FunctionSpec(
        spec.name, [], graph, ((), []), "", spec.output_name, annotate=spec.annotate,
        input_names=input_names, namer=namer, depth=spec.depth + 1, preset=preset,
        accumulate=accumulate, body_only=True, owned=owned, check_finite=spec.check_finite)
    return emit_function(body_spec, constants)


class _Buffers:
    """Where ``a[i] = v`` may write into the array that holds the old version of ``a``: when
    that array is one the function made itself (not an argument, a constant or a view of
    one) and nothing reads the old version, or any array sharing its memory, afterwards.
    Otherwise the module copies first, so arguments and live values are never changed."""

    def __init__(self, graph: Graph, owned: frozenset = frozenset()):
        self.owned = owned
        self.last_use: dict[Node, int] = {}
        self.values = graph.meta.get("values") or {}
        self.root: dict[Node, Node] = {}  # the node whose array a value's memory belongs to
        self.group_last: dict[Node, int] = {}  # last read of any value sharing that memory
        self.readonly: set[Node] = set()
        self.shared: dict[Node, Node] = {}
        self.base_roots: set[Node] = set()
        # Without a write (scalar code, most array code) there is no buffer to follow: the
        # emitter then neither asks ``see`` nor ``reads_buffer`` anything per node.
        self.active = any(n.op.extra.get("statement") for n in graph.nodes)
        if not self.active:
            return
        end = len(graph.nodes)
        for position, node in enumerate(graph.nodes):
            for ref in node.inputs:
                self.last_use[ref.node] = position
        for ref in graph.outputs:
            self.last_use[ref.node] = end
        # Every array a statement may write into, found before anything is emitted: a reader
        # of one (or of a view or rename of one) must not be inlined into a statement that
        # runs after the write.
        shared: dict[Node, Node] = {}
        for node in graph.nodes:
            if node.op.name == "adjoint" or node.is_view or node.op.extra.get("statement"):
                first = node.inputs[0].node
                shared[node] = shared.get(first, first)
                if node.op.extra.get("statement"):
                    self.base_roots.add(shared[node])
        self.shared = shared

    def reads_buffer(self, node: Node) -> bool:
        """Does ``node`` read an array that a statement may write into? Then it is computed
        where it stands, not inlined into a later statement."""
        return any(self.shared.get(r.node, r.node) in self.base_roots for r in node.inputs)

    def see(self, node: Node, position: int) -> None:
        op = node.op
        if op.name == "adjoint" or (node.is_view and not isinstance(  # x[i, j] is a copy
                shaped_value(self.values, node.out), np.generic)):
            first = node.inputs[0].node
            root = self.root.get(first, first)
            if op.extra.get("view") == "readonly" or first in self.readonly:
                self.readonly.add(node)
        else:
            root = node
        self.root[node] = root
        last = self.last_use.get(node, position)
        self.group_last[root] = max(self.group_last.get(root, last), last)

    def writable(self, node: Node, position: int) -> bool:
        base = node.inputs[0].node
        root = self.root.get(base, base)
        if base in self.readonly or root.op.name in ("input", "seed") and root not in self.owned:
            return False
        if root.op.name == "const":  # a view of a literal: copy
            return False
        known = base if base in self.values else root
        if not isinstance(shaped_value(self.values, known.out), np.ndarray) \
                or base.aval.shape == ():
            return False  # a number (np.float64) cannot be written into
        if made_as_view(self.values, root.out) and root.op.name != "const" \
                and root not in self.owned:
            return False  # NumPy made it as a view of something else
        if self.group_last.get(root, position) > position:
            return False
        self.root[node] = root  # the new version lives in the same array
        self.group_last[root] = self.last_use.get(node, position)
        return True


# The ops whose result NumPy always hands back as a new array of its own.
_MADE = frozenset(("add", "sub", "mul", "div", "neg", "pow", "square", "sqrt", "exp", "log",
                   "sin", "cos", "tanh", "log1p", "expm1", "abs"))
# An in-place update of an op's array operand, by whether the value carried in that array is
# negated; None: not exactly the same value (-g + a and -(g - a) differ in the sign of a zero).
_UPDATES = {"mul": ("*=", "*="), "div": ("/=", "/="), "add": ("+=", None), "sub": ("-=", None)}


class _Temporaries:
    """An array the function made itself, read for the last time as an operand of an
    elementwise product, quotient, sum or difference inside a larger expression, is updated
    in place: ``grad_x_head -= g * 2.0 * x_head`` becomes ``g *= 2.0; g *= x_head;
    grad_x_head -= g`` once nothing else reads ``g``. NumPy's ``g *= a`` is
    ``np.multiply(g, a, out=g)``: the same ufunc on the same elements, each result rounded
    once, so no float changes; each operation saves a new array, which on a thousand floats
    costs about as much as the arithmetic. A negation on the way is carried as a sign
    (``-g * 2.0`` is ``-(g * 2.0)`` exactly, signed zeros included), as the printers do.

    Only a backward array (a forward value keeps the meaning of the user's name) that one of
    the function's own ufuncs made, or a rename of one (never an argument, a constant, a
    view, or a buffer a write goes into), of the result's shape and dtype (no broadcasting
    up, no cast), not returned, and whose every other reader is a statement already written:
    optimize/early_writes.py puts a copy of it into a buffer ahead of its last read. NumPy
    only: the array-API target has no in-place updates."""

    def __init__(self, graph: Graph, outputs, values, survey: _Survey):
        self.carried: dict[Node, tuple[Node, bool]] = {}  # value -> (its array, negated)
        self.announced: set[str] = set()  # the temporaries whose reuse a comment has said
        self.readers: dict[Node, list[Node]] = {}  # per temporary: every node reading it
        # the last reader of each value (of an inlined value, the only one): where it is read
        self.reader: dict[Node, Node] = survey.last_reader
        # The distinct avals first (the survey's): scalar code shares a few, none an array
        if not any(aval.py is None and aval.shape != () for aval in survey.avals):
            return
        for node in graph.nodes:
            if node.op.name not in _MADE or len(node.avals) != 1:
                continue
            aval = node.avals[0]
            if (node.role == "bwd" and aval.py is None and aval.shape != ()
                    and node not in outputs
                    and isinstance(shaped_value(values, node.out), np.ndarray)
                    and not made_as_view(values, node.out)):
                self.readers[node] = []
        if not self.readers:
            return
        disowned = set()  # read as an array that lives on: a view, a rename, a write's base
        renames = {}  # grad_d = <a product>: the rename owns the array its only reader made
        for node in graph.nodes:
            for slot, ref in enumerate(node.inputs):
                readers = self.readers.get(ref.node)
                if readers is None:
                    continue
                readers.append(node)
                if node.op.name == "adjoint" and node.aval == ref.node.aval \
                        and node not in outputs:
                    renames[node] = ref.node
                    self.readers[node] = []
                if node.op.name == "adjoint" or node.is_view or (
                        slot == 0 and node.op.extra.get("statement")):
                    disowned.add(ref.node)
        disowned.update(rename for rename, made in renames.items()
                        if self.readers[made] != [rename])
        for node in disowned:
            del self.readers[node]

    def update(self, node: Node, args, names: dict[Node, str], exprs, renamed):
        """For an inlined ``node``: (the lines of its in-place update, its expression), when
        its value is left in a dead temporary's array; None otherwise (and for a value only
        renamed after: ``grad_y = grad_x`` would hide what the update made). The first update
        of an array says so in a comment above it: its name then holds something new."""
        op = node.op.name
        if op != "neg" and op not in _UPDATES or node in renamed:
            return None
        for slot, ref in enumerate(node.inputs):
            held = self.carried.get(ref.node) or self._dead(ref.node, node, names, exprs)
            if held is not None:
                break
        else:
            return None
        temp, negated = held
        if temp.aval != node.aval:  # broadcast up, or another dtype: a new array after all
            return None
        name = names[temp]
        if op == "neg":
            self.carried[node] = (temp, not negated)
            return (), self._value(name, not negated)
        symbol = _UPDATES[op][negated]
        other = node.inputs[1 - slot].node
        if symbol is None or slot and op in ("sub", "div") or other is ref.node:
            return None  # b - g, b / g and g * g have no in-place form here
        self.carried[node] = (temp, negated)
        lines = [f"{name} {symbol} {args[1 - slot].text}"]
        if name not in self.announced:
            self.announced.add(name)
            lines.insert(0, f"# {name} is not read again: its array is reused")
        return lines, self._value(name, negated)

    def _dead(self, value: Node, reader: Node, names: dict[Node, str], exprs):
        readers = self.readers.get(value)
        if readers is None or value not in names or readers.count(reader) != 1:
            return None
        for other in readers:
            # read where its statement runs: its own, or that of the expression it is inlined
            # into; that statement must be written already
            while other is not reader and other not in names:
                if other not in exprs:
                    return None  # not written yet: it reads the array later
                other = self.reader.get(other)  # (an inlined value is read once)
        return value, False

    @staticmethod
    def _value(name: str, negated: bool) -> Expr:
        return OPS["neg"].printer(None, [Expr(name)]) if negated else Expr(name)


class _SliceViews:
    """A run of updates of one slice of a buffer, ``g[:-1] -= a`` then ``g[:-1] -= b``, is
    written through a view bound once: ``grad_head = g[:-1]; grad_head -= a; grad_head -= b``.
    Each ``g[:-1] -= a`` makes a view and assigns it back into ``g``, two subscripts that cost
    about as much as the subtraction on a small array; the same ufuncs run on the same
    elements in the same order, so no float changes. NumPy only: the array-API target has no
    in-place writes."""

    def __init__(self, graph: Graph, namer: Namer, enabled: bool):
        self.namer = namer
        self.continues: dict[Node, Node] = {}  # an update -> the update of the run before it
        self.view_of: dict[Node, str] = {}  # an update written through a view -> the view
        if not enabled:
            return
        uses = graph.uses()
        for node in graph.nodes:
            base = node.inputs[0].node if node.inputs else None
            if (_slice_update(node) and base is not None and _slice_update(base)
                    and base.attrs["index"] == node.attrs["index"] and uses[base] == 1):
                self.continues[node] = base
        self.starts = set(self.continues.values()) - self.continues.keys()
        self.slices = {(n.inputs[0].node, n.attrs["index"]): n for n in graph.nodes
                       if n.op.name == "getitem" and len(n.inputs) == 1}

    def through_view(self, node: Node, args, name: str, names, prelude: str,
                     statement: str) -> tuple[str, str]:
        """(prelude, statement) of ``node`` written through its run's view, or as given."""
        if not self.continues:
            return prelude, statement
        subscript = f"{name}[{index_text(node.attrs['index'])}]"
        if not statement.startswith(subscript + " "):
            return prelude, statement
        update = statement[len(subscript):]  # " -= a"
        before = self.continues.get(node)
        if before is not None and before in self.view_of and names.get(before) == name:
            view = self.view_of[node] = self.view_of[before]  # written in place: same array
            return prelude, view + update
        if node not in self.starts:
            return prelude, statement
        view = self.view_of[node] = self.namer.fresh(self._view_name(node, name, names))
        bound = f"{view} = {subscript}"
        return (f"{prelude}\n{bound}" if prelude else bound), view + update

    def _view_name(self, node: Node, name: str, names) -> str:
        """``grad_x_head`` for the slice ``x[:-1]`` that the forward calls ``x_head``."""
        base = name.removeprefix("grad_")
        for (sliced, index), getitem in self.slices.items():
            if index == node.attrs["index"] and names.get(sliced) == base and getitem in names:
                return f"grad_{names[getitem]}"
        return f"{name}_slice"


def _slice_update(node: Node) -> bool:
    """``a[i] += v`` where ``a[i]`` is a view: integers and slices, fewer integers than
    ``a`` has axes (``a[0]`` of a vector is a number, not a view)."""
    if node.op.name != "index_add" or len(node.inputs) != 2:
        return False
    index = node.attrs["index"]
    return all(type(item) is int or (type(item) is tuple and item[0] == "slice")
               for item in index) and sum(type(i) is int for i in index) < len(node.aval.shape)


class _Liveness:
    """Large arrays are released (``del``) right after the statement that reads them last,
    so the peak memory of the module follows what is live, as a careful person writes it.
    Views, arguments, buffers written in place and returned values are left alone.
    An inlined expression reads its operands where the statement that holds it runs."""

    def __init__(self, graph: Graph, writes, has_writes: bool, avals):
        self.readers: dict[Node, int] = {}  # reads still to run, per large named value
        self.pending: dict[Node, list[Node]] = {}  # inlined node -> the values it reads
        written = ({n.inputs[0].node for n in graph.nodes if n.op.extra.get("statement")}
                   if has_writes else set())
        returned = {r.node for r in graph.outputs}
        # The distinct avals first (the survey's: scalar code shares a few, none ever large)
        if not any(aval.py is None and aval.size * aval.dtype.itemsize >= DEL_MIN_BYTES
                   for aval in dict(zip(map(id, avals), avals)).values()):
            return
        for node in graph.nodes:
            aval = node.avals[0] if len(node.avals) == 1 else None
            if (aval is None or aval.py is not None or node.op.name in ("input", "const")
                    or node.is_view or node in written or node in returned or node in writes
                    or node.op.extra.get("statement")
                    or aval.size * aval.dtype.itemsize < DEL_MIN_BYTES):
                continue
            self.readers[node] = 0
        for node in graph.nodes if self.readers else ():
            for ref in node.inputs:
                if ref.node in self.readers:
                    self.readers[ref.node] += 1

    def _reads(self, node: Node) -> list[Node]:
        out: list[Node] = []
        for ref in node.inputs:
            inner = self.pending.pop(ref.node, None)
            out.extend(inner if inner is not None else [ref.node])
        return out

    def inline(self, node: Node) -> None:
        if self.readers:  # without a large value (scalar code) nothing is ever deleted
            self.pending[node] = self._reads(node)

    def run(self, node: Node, names: dict[Node, str]) -> list[str]:
        """The names to delete after ``node``'s statement."""
        if not self.readers:
            return []
        dead = []
        for value in self._reads(node):
            if value in self.readers:
                self.readers[value] -= 1
                if self.readers[value] == 0 and value in names:
                    dead.append(names[value])
        return list(dict.fromkeys(dead))


class _FiniteChecks:
    """check_finite: the adjoints of one backward group are checked when the group ends, and
    the first non-finite one names the user's line whose derivative produced it."""

    def __init__(self, scope, depth: int = 1):
        self.scope = scope
        self.depth = depth  # 2 and more in a loop's body
        self.loc = None
        self.names: list[tuple[str, Node]] = []
        self.used = False

    def step(self, node: Node, name: str, body: list[str], code_parts: list[str]) -> None:
        if self.names and node.loc != self.loc:
            self.flush(body, code_parts)
        self.loc = node.loc
        self.names.append((name, node))

    def flush(self, body: list[str], code_parts: list[str]) -> None:
        if not self.names:
            return
        tests = [self.scope.all_finite(n, node) for n, node in self.names]
        where = f"{self.loc}: " if self.loc is not None else ""
        text = self.loc.text() if self.loc is not None else ""
        what = f"the derivative of `{text}`" if text else "the derivative of this line"
        names = ", ".join(n for n, _ in self.names)
        message = f"{where}{what} is not finite at this input ({names})"
        test = " and ".join(tests)
        line = f"if not ({test}):" if len(tests) > 1 else f"if not {test}:"
        if len(line) + 4 * self.depth > LINE_LIMIT and len(tests) > 1:  # one per line, as ruff
            line = "if not (\n    " + "\n    and ".join(tests) + "\n):"
        body.append(line)
        body.extend(raise_lines("NonFiniteGradient", message, indent=4 * self.depth + 4))
        code_parts.append(test)
        self.names = []
        self.used = True


def raise_lines(cls: str, message: str, indent: int) -> list[str]:
    """``raise cls("message")`` inside an if block (relative indent 4), wrapped over lines the
    way ruff format leaves it when it does not fit in LINE_LIMIT columns at ``indent``."""
    one = f"    raise {cls}({string_literal(message)})"
    if indent - 4 + len(one) <= LINE_LIMIT:
        return [one]
    width = LINE_LIMIT - indent - 4 - 2
    chunks = textwrap.wrap(message, width, drop_whitespace=False, break_long_words=True,
                           break_on_hyphens=False)
    return [f"    raise {cls}(", *(f"        {string_literal(c)}" for c in chunks), "    )"]


def _rule_of(node: Node) -> tuple[str, ...]:
    """The derivative rule a backward node comes from, as the rule table states it."""
    if node.origin is None:
        return ()
    op, index = node.origin
    texts = op.rule_text
    return (texts[min(index, len(texts) - 1)],) if texts else ()


HELPERS = {"_scatter": SCATTER_HELPER}  # small functions a module defines when it uses them

NON_FINITE_CLASS = '''class NonFiniteGradient(ArithmeticError):
    """Raised when a backward step produces inf or nan; names the line it differentiates."""'''

GUARD_CLASS = '''class GuardFailure(Exception):
    """Raised when an input takes a different branch than the one this code was traced on."""'''


class Module:
    """One module's text, its functions emitted when first needed. A first call compiles only
    the function it runs (``text_of``): the other one (the value_and_grad beside a grad) costs
    as much to write as the first, and is written only when someone reads the whole module
    (``text``, ``df.source``). Functions share the module's constants in spec order, so the
    whole text is the same whichever was asked for first."""

    def __init__(self, header: list[str], specs: list[FunctionSpec], target: str = "numpy"):
        self.header, self.specs, self.target = list(header), list(specs), target
        self._constants = ModuleConstants()
        self._emitted: list[EmittedFunction] = []  # specs[:len(_emitted)], in order
        self._constants_after: list[int] = []  # constant lines defined once each is written
        self._text: str | None = None

    def _emit_through(self, last: int) -> None:
        while len(self._emitted) <= last:
            spec = self.specs[len(self._emitted)]
            emitted = emit_function(spec, self._constants, self.target)
            # Kept for as long as the function lives (``text`` may be read any time): as one
            # string, which _assemble indents as it does a list of lines, not a string object
            # per line (~200 B per op of scalar code, beside the compiler's peak).
            emitted.lines = ["\n".join(emitted.lines)] if emitted.lines else []
            self._emitted.append(emitted)
            self._constants_after.append(len(self._constants.lines))

    def text(self) -> str:
        """The whole module: every function of the spec list, in order."""
        if self._text is None:
            self._emit_through(len(self.specs) - 1)
            self._text = _assemble(self.header, self.specs, self._emitted,
                                   self._constants.lines, self.target)
        return self._text

    def text_of(self, name: str) -> str:
        """The module with only the function ``name`` (what a call compiles): the header, the
        imports, constants and classes that function uses, and the function. For the first
        function it is the whole module's text up to where the next function would start,
        unless a later function needs more imports, constants or classes."""
        index = next(i for i, spec in enumerate(self.specs) if spec.name == name)
        if len(self.specs) == 1:
            return self.text()
        spec = self.specs[index]
        if index == 0:
            self._emit_through(0)
            emitted = self._emitted[0]
            constants = self._constants.lines[:self._constants_after[0]]
        else:  # numbered on its own: the module's earlier functions are not written
            alone = ModuleConstants()
            emitted = emit_function(spec, alone, self.target)
            constants = alone.lines
        return _assemble(self.header, [spec], [emitted], constants, self.target)


def emit_module(header: list[str], specs: list[FunctionSpec], target: str = "numpy") -> str:
    return Module(header, specs, target).text()


def _assemble(header: list[str], specs: list[FunctionSpec], emitted: list[EmittedFunction],
              constant_lines: list[str], target: str) -> str:
    """The module text around emitted functions: header, imports of what they use, module
    constants, the classes and helpers they raise or call, then the functions."""
    imports = set().union(*(e.imports for e in emitted))
    helpers = sorted(set().union(*(e.helpers for e in emitted)))
    code = "\n".join(e.code for e in emitted)
    if target == "numpy" and (constant_lines or helpers):
        imports.add("numpy")
    has_guards = any(e.guards for e in emitted)
    out: list[str] = list(header)
    import_lines = []
    if "math" in imports:
        import_lines.append("import math")
    if "numpy" in imports:
        if target != "numpy":
            raise AssertionError(f"a NumPy call leaked into the {target} module:\n{code}")
        if import_lines:
            import_lines.append("")
        import_lines.append("import numpy as np")
    if target == "array-api":
        import_lines += _array_api_imports(code, bool(import_lines))
    others = sorted(imports - {"math", "numpy"})  # modules of rules added with defvjp
    if others:
        import_lines += ["", *(f"import {name}" for name in others)]
    if import_lines:
        out += ["", *import_lines]
    if constant_lines:
        out += ["", *constant_lines]
    if has_guards:
        out += ["", "", GUARD_CLASS]
    concrete = "_concrete(" in code
    if concrete:
        out += ["", "", CONCRETE_CLASS]
    if any(e.classes for e in emitted):
        out += ["", "", NON_FINITE_CLASS]
    for name in helpers:
        out += ["", "", HELPERS[name]]
    if concrete:
        out += ["", "", CONCRETE_HELPER]
    for spec, fn in zip(specs, emitted, strict=True):
        out += ["", "", layout.header(spec.name, spec.params)]
        doc = _docstring(spec.doc, fn.guards, concrete)
        out += [f"    {line}" if line else "" for line in doc]
        if fn.lines:  # every line of the body one level in, statements over lines included
            out.append("    " + "\n".join(fn.lines).replace("\n", "\n    "))
    return "\n".join(out) + "\n"


def _array_api_imports(code: str, after_math: bool) -> list[str]:
    """array_api_compat's namespace lookup (and device), array_api_extra where it is used."""
    lines = []
    if re.search(r"\bxpx\.", code):
        lines.append("import array_api_extra as xpx")
    names = [n for n, used in (("array_namespace", re.search(r"\bxp\.", code)),
                               ("device", re.search(r"\bdevice\(", code))) if used]
    if names:
        lines.append(f"from array_api_compat import {', '.join(names)}")
    return ["", *lines] if lines and after_math else lines


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, LINE_LIMIT - 8, break_long_words=False, break_on_hyphens=False)


def _condition_as_written(node: Node) -> str | None:
    """The branch test on the guard's source line, when it is this one comparison (not a
    compound test, whose parts are separate guards)."""
    if node.loc is None:
        return None
    from .source import line_info

    text = line_info(node.loc.file, node.loc.line).condition
    if not text or re.search(r"\b(and|or|not)\b", text):
        return None
    return text


def _guard_summary(guards: list[tuple[str, bool]]) -> list[str]:
    """One line per condition: a loop test is `... is True 9 times, then False`."""
    runs: list[list] = []
    for text, expect in guards:
        if runs and runs[-1][0] == text:
            runs[-1][1].append(expect)
        else:
            runs.append([text, [expect]])
    lines = []
    for text, outcomes in runs:
        parts: list[str] = []
        for value, group in itertools.groupby(outcomes):
            n = len(list(group))
            parts.append(f"{value}" + (f" {n} times" if n > 1 else ""))
        lines.append(f"{text} is {', then '.join(parts)}")
    return lines


def _docstring(doc: str, guards: list[tuple[str, bool]], concrete: bool = False) -> list[str]:
    if not guards:
        text = f"{doc} The traced path has no guards."
        if len(text) + 10 <= LINE_LIMIT:
            return [f'"""{text}"""']
        return [*_wrapped('"""' + doc), "", "The traced path has no guards.", '"""']
    lines = [*_wrapped('"""' + doc), "", "Valid on the traced path, where:"]
    summary = _guard_summary(guards)
    shown = summary[:8]
    lines += [f"    {g}" for g in shown]
    if len(summary) > len(shown):
        lines.append(f"    ... and {len(summary) - len(shown)} more conditions")
    lines.append("Elsewhere it raises GuardFailure.")
    if concrete:  # array-API target: the checks read values, which jax.jit does not have
        lines += _wrapped("The guards read concrete values: under jax.jit they raise "
                          "GuardNeedsValue (call it outside jit, or make those inputs static).")
    lines.append('"""')
    return lines
