"""One channel for gate facts into JUnit: ``record_property`` with ``rlgate.*`` keys.

Tests attach facts only through the ``gate_record`` fixture: ``gate_record(result)``
records a :class:`~rlgate.core.results.Result` as its ``rlgate.*`` properties (the
vocabulary of :mod:`rlgate.core.junit`, which reads them back), ``gate_record(**facts)``
free facts (``recipe``, a template hash), formatted by ``format_value``. Run-level facts
(tested versions) become ``<testsuite>`` properties through pytest's
``record_testsuite_property``. A testcase that is evidence but not a gate (a benchmark)
carries ``rlgate.informational``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlgate.core.junit import PROPERTIES, PROPERTY_PREFIX, format_value, result_properties, xml_text
from rlgate.core.results import Result
from rlgate.core.versions import tested_versions

_RESERVED = {key.removeprefix(PROPERTY_PREFIX) for key in PROPERTIES.values()}


@pytest.fixture
def gate_record(record_property: Callable[[str, object], None]) -> Callable[..., None]:
    """Record a Result (``gate_record(result)``) and/or ``rlgate.<key>`` facts."""

    def record(result: Result | None = None, /, **facts: Any) -> None:
        reserved = sorted(_RESERVED & set(facts))
        if reserved:
            raise ValueError(
                f"gate_record: {', '.join(reserved)} are Result fields; record a Result instead"
            )
        if result is not None:
            for key, value in result_properties(result):
                record_property(key, value)
        for key, value in facts.items():
            record_property(f"{PROPERTY_PREFIX}{key}", xml_text(format_value(value)))

    return record


@pytest.fixture(scope="session", autouse=True)
def _rlgate_tested_versions(record_testsuite_property: Callable[[str, object], None]) -> None:
    """Add the tested versions as suite properties of ``--junitxml`` output."""
    for name, version in tested_versions().items():
        record_testsuite_property(f"{PROPERTY_PREFIX}version.{name}", version)


@pytest.hookimpl
def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--rlgate-json FILE``: the convergence/perf tiers write their checks' JSON."""
    if session.config.getoption("rlgate_json", default=None):
        from rlgate.pytest_plugin.outputs import guarded_writes
        from rlgate.pytest_plugin.tier import write_tier_json

        with guarded_writes(session.config):
            write_tier_json(session)
