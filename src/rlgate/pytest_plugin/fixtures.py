"""One channel for gate facts into JUnit: ``record_property`` with ``rlgate.*`` keys.

Tests attach facts only through the ``gate_record`` fixture; run-level facts
(tested versions) become ``<testsuite>`` properties in ``pytest_sessionfinish``.
Values are formatted by :func:`format_value` so every file reads the same. A testcase
that is evidence but not a gate (a benchmark) carries ``rlgate.informational``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlgate.core.junit import PROPERTY_PREFIX, format_value
from rlgate.core.versions import tested_versions


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
