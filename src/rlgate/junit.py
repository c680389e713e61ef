"""One channel for gate facts into JUnit: ``record_property`` with ``rlgate.*`` keys.

Tests attach facts only through the ``gate_record`` fixture; run-level facts
(tested versions) become ``<testsuite>`` properties in ``pytest_sessionfinish``.
Values are formatted by :func:`format_value` so every file reads the same. A testcase
that is evidence but not a gate (a benchmark) carries ``rlgate.informational``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from rlgate.versions import tested_versions

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


@pytest.fixture
def gate_record(record_property: Callable[[str, object], None]) -> Callable[..., None]:
    """Record ``rlgate.<key>`` properties on the current testcase."""

    def record(**facts: Any) -> None:
        for key, value in facts.items():
            record_property(f"{PROPERTY_PREFIX}{key}", format_value(value))

    return record


@pytest.hookimpl(tryfirst=True)  # before junitxml writes the file in its own sessionfinish
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Add the tested versions as suite properties of ``--junitxml`` output."""
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, version in tested_versions().items():
        xml.add_global_property(f"{PROPERTY_PREFIX}version.{name}", version)
