"""Loops stay loops: traced iterations of a Python loop rolled back into one region."""

from .detect import MIN_TRIPS, roll_loops
from .region import BackwardPlan, Region, pull_back_loop

__all__ = ["MIN_TRIPS", "BackwardPlan", "Region", "pull_back_loop", "roll_loops"]
