"""Shape ops: joining, splitting, repeating, flipping and reordering arrays, with their VJPs."""

from __future__ import annotations
