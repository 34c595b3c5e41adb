"""Where user code lives: source locations of traced ops and the names the user assigned."""

from __future__ import annotations

import functools
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass

import libcst as cst
import numpy as np
from libcst.metadata import MetadataWrapper, PositionProvider

_GRADGEN_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames inside NumPy, the standard library and installed packages are never "the user's
# line", even when they call our ops (and the line watcher never follows them).
_LIBRARY_DIRS = tuple(sorted({
    os.path.abspath(p) + os.sep
    for p in (os.path.dirname(np.__file__), *(sysconfig.get_paths().get(k) for k in (
        "stdlib", "platstdlib", "purelib", "platlib")))
    if p
}))


@dataclass(frozen=True, slots=True)
class SourceLoc:
    """A user source position: the innermost frame outside gradgen and NumPy."""

    file: str
    line: int
    func: str

    @property
    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def __str__(self) -> str:
        return self.short

    def text(self) -> str:
        """The source statement at this line, stripped, or '' when there is no source."""
        return statement_text(self.file, self.line)


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """True for code the user wrote: neither gradgen itself nor the libraries it wraps."""
    if filename.startswith(("<__array_function__", "<frozen")):
        return False
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_GRADGEN_DIR + os.sep):
        return False
    return not path.startswith(_LIBRARY_DIRS)


def user_frame(start=None):
    """The innermost frame whose code is the user's (None when gradgen is called directly)."""
    frame = start if start is not None else sys._getframe(1)
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def loc_of_frame(frame) -> SourceLoc | None:
    if frame is None:
        return None
    return SourceLoc(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def current_loc() -> SourceLoc | None:
    return loc_of_frame(user_frame(sys._getframe(1)))


# --- what the source says at a line -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LineInfo:
    """What a source line holds: the targets it assigns, its statement, a branch test."""

    targets: tuple[str, ...] = ()
    statement: str = ""
    condition: str | None = None


class _LineCollector(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module):
        self.module = module
        self.lines: dict[int, LineInfo] = {}

    def _span(self, node):
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line, pos.end.line

    def _code(self, node) -> str:
        return " ".join(self.module.code_for_node(node).split())

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        first, last = self._span(node)
        for small in node.body:
            targets: tuple[str, ...] = ()
            if isinstance(small, cst.Assign):
                names = [t.target for t in small.targets]
                if len(names) == 1 and isinstance(names[0], cst.Name):
                    targets = (names[0].value,)
                elif len(names) == 1 and isinstance(names[0], cst.Tuple | cst.List):
                    elts = [e.value for e in names[0].elements]
                    if all(isinstance(e, cst.Name) for e in elts):
                        targets = tuple(e.value for e in elts)
            elif isinstance(small, cst.AugAssign | cst.AnnAssign) and isinstance(
                    small.target, cst.Name):
                targets = (small.target.value,)
            info = LineInfo(targets, self._code(small))
            for line in range(first, last + 1):
                self.lines[line] = info

    def _branch(self, node, test) -> None:
        first, _ = self._span(node)
        test_first, test_last = self._span(test)
        info = LineInfo((), self._code(test), self._code(test))
        for line in {first, *range(test_first, test_last + 1)}:
            self.lines[line] = info

    def visit_If(self, node: cst.If) -> None:
        self._branch(node, node.test)

    def visit_While(self, node: cst.While) -> None:
        self._branch(node, node.test)


@functools.lru_cache(maxsize=256)
def _line_table_for_text(text: str) -> dict[int, LineInfo]:
    try:
        module = cst.parse_module(text)
    except Exception:  # noqa: BLE001 - unparsable source only costs names, never correctness
        return {}
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    collector = _LineCollector(wrapper.module)
    wrapper.visit(collector)
    return collector.lines


_TABLES: dict[str, tuple[list[str], dict[int, LineInfo]]] = {}


def line_table(filename: str) -> dict[int, LineInfo]:
    """Line number -> LineInfo for a file (or notebook cell) known to linecache; {} if none."""
    lines = linecache.getlines(filename)
    hit = _TABLES.get(filename)
    if hit is not None and hit[0] is lines:  # linecache hands back the same list until reload
        return hit[1]
    table = _line_table_for_text("".join(lines)) if lines else {}
    _TABLES[filename] = (lines, table)
    return table


def line_info(filename: str, line: int) -> LineInfo:
    return line_table(filename).get(line) or LineInfo((), linecache.getline(filename, line).strip())


def statement_text(filename: str, line: int) -> str:
    return line_info(filename, line).statement
