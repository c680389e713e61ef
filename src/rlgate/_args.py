"""argparse ``type=`` helpers that refuse out-of-range numbers at parsing (exit 2).

Every numeric option has a documented range. ``float("nan")`` compares false with
everything, so a bare ``lo <= x <= hi`` test lets NaN through; these helpers refuse
NaN and infinities first, and bound integers on both sides so that a tiny argument
cannot ask for hours of work (``--n 100000000``) or crash a library (``--seed -1``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["float_in", "int_in"]


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """A ``type=`` parser for an integer in ``[lo, hi]``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo:,}..{hi:,}")
        return value

    parse.__name__ = "integer"  # argparse names the type in "invalid <name> value"
    return parse


def float_in(
    lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False
) -> Callable[[str], float]:
    """A ``type=`` parser for a finite number between ``lo`` and ``hi`` (open or closed ends)."""
    lo_text = f"({lo}" if open_lo else f"[{lo}"
    hi_text = f"{hi})" if open_hi else f"{hi}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        below = value <= lo if open_lo else value < lo
        above = value >= hi if open_hi else value > hi
        if below or above:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo_text}, {hi_text}")
        return value

    parse.__name__ = "number"
    return parse
