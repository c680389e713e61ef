"""The JUnit property vocabulary every rlgate writer and reader shares.

Gate facts travel as ``rlgate.*`` testcase properties (pytest's ``record_property``
channel); values are formatted by :func:`format_value` so every file reads the same.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["INFORMATIONAL_PROPERTY", "PROPERTY_PREFIX", "format_value"]

PROPERTY_PREFIX = "rlgate."
#: Set (by the plugin) on a testcase that is evidence but not a gate, e.g. a benchmark: the
#: release report shows it and never counts it as its tier's gate check.
INFORMATIONAL_PROPERTY = f"{PROPERTY_PREFIX}informational"


def format_value(value: Any) -> str:
    """Format a property value with fixed precision (floats: 6 significant digits)."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return f"{value:.6g}"
    return str(value)
