"""Where user code lives: source locations of traced ops and the names the user assigned."""

from __future__ import annotations

import functools
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass

import numpy as np

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


@functools.lru_cache(maxsize=256)
def _line_table_for_text(text: str) -> dict[int, LineInfo]:
    from .linemap import line_table_of  # libcst loads only when names are first needed

    return line_table_of(text)


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
