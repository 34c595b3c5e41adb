"""The GradgenError tree: every error gradgen raises on purpose, each naming the user's line."""

from __future__ import annotations


class GradgenError(Exception):
    """Base of every error gradgen raises on purpose.

    The message starts with the user's ``file.py:line`` when one is known, then says what
    went wrong and what to do about it.
    """

    def __init__(self, message: str, loc=None, hint: str | None = None):
        self.loc = loc
        self.hint = hint
        self.bare_message = message
        text = f"{loc}: {message}" if loc is not None else message
        if hint:
            text = f"{text}; {hint}"
        super().__init__(text)


class UnsupportedOperation(GradgenError):
    """An operation on a traced value that gradgen has no rule for."""


class NonScalarOutput(GradgenError):
    """``grad`` of a function whose output is not a scalar."""


class GuardFailure(GradgenError):
    """A call left the control-flow path the code was traced on."""


class GradientMismatch(GradgenError, AssertionError):
    """A generated gradient disagrees with the symbolic or numerical reference."""
