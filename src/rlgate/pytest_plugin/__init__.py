"""rlgate's pytest plugin: tier markers, gate options, and the tested-versions header.

Loaded by the root ``conftest.py`` (``pytest_plugins``) or ``-p rlgate.pytest_plugin``.
Every test gets its tier's marker from its path (``tests/<tier>/...``), so ``-m functional``
selects the functional tier without a conftest per tier. Options are ``--rlgate-<name>``
(the historic ``--<name>`` is an alias), defined once in :mod:`rlgate.core.options` and
shared with the CLI; they are validated at parse time. A missing input for a tier is
reported by the tier itself as a skip naming the missing option, never as a silent pass.
Tests marked ``benchmark`` (or using pytest-benchmark's ``benchmark`` fixture) carry the
JUnit property ``rlgate.informational = benchmark``: evidence in the release report, never
a gate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgate.core.junit import INFORMATIONAL_PROPERTY
from rlgate.core.options import PLUGIN_OPTIONS
from rlgate.core.versions import format_versions, tested_versions
from rlgate.pytest_plugin.outputs import guard_outputs

pytest_plugins = ("rlgate.pytest_plugin.fixtures",)

TIER_MARKERS: dict[str, str] = {
    "unit": "unit tests of the rlgate library itself (CPU, seconds)",
    "functional": "tier 1: templates x tool/reasoning parsers x NeMo Gym conversions x recipes "
    "with real vLLM parsers and tokenizers (CPU, seconds)",
    "convergence": "tier 2: health bounds on a NeMo RL run (--run-dir, --recipe)",
    "perf": "tier 3: step time / tokens per second against a baseline run (--run-dir, "
    "--baseline); without a run, the rollout path's CPU cost per turn against a stored baseline",
    "swe_gate": "tier 4: SWE-bench Verified before/after gate (--swe-before, --swe-after)",
}
#: Markers of tests that are evidence but not gates: their testcases carry the
#: ``rlgate.informational`` JUnit property, and the release report never counts them as
#: their tier's gate check (``docs/recommendation-rule.md``).
INFORMATIONAL_MARKERS: dict[str, str] = {
    "benchmark": "a benchmark: measures and reports numbers, gates nothing (informational in "
    "the release report; tests using pytest-benchmark's `benchmark` fixture get it too)",
}
RESOURCE_MARKERS: dict[str, str] = {
    "gpu": "needs a GPU",
    "multinode": "needs a multi-node cluster",
    "docker": "needs a Docker daemon",
    "slow": "takes minutes (builds virtualenvs, installs from PyPI); runs with RLGATE_SLOW=1",
}


#: Shapes the plugin gives to shared options: ``--recipe`` repeats (the functional matrix).
_PLUGIN_SHAPE: dict[str, dict[str, object]] = {"recipe": {"action": "append"}}


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register rlgate's options: ``--rlgate-<name>``, alias ``--<name>`` (one group).

    The definitions are :mod:`rlgate.core.options`, shared with the ``rlgate`` CLI; a
    path option must name an existing path (a usage error at parsing otherwise).
    """
    group = parser.getgroup("rlgate", "rlgate release gates")
    for option in PLUGIN_OPTIONS:
        shape = _PLUGIN_SHAPE.get(option.name, {})
        group.addoption(
            *option.pytest_flags, dest=option.dest, **option.kwargs(check_paths=True, **shape)
        )


def pytest_configure(config: pytest.Config) -> None:
    """Register markers with descriptions (``strict`` rejects unknown ones); guard the outputs.

    ``--rlgate-json`` and ``--junitxml`` are kept off every input the options name
    (:mod:`rlgate.pytest_plugin.outputs`): a conflict is a usage error before any test runs.
    """
    for name, text in {**TIER_MARKERS, **INFORMATIONAL_MARKERS, **RESOURCE_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    guard_outputs(config)


def tier_of(path: Path, rootdir: Path) -> str | None:
    """The tier of a test file: the first folder of its path under ``rootdir`` named as a tier.

    ``tests/unit/test_io.py`` is ``unit``, ``tests/functional/test_gym.py`` ``functional``
    (so is ``functional/test_gym.py`` under the demo's bundled copy); a file outside
    ``rootdir`` or in no tier folder has none.
    """
    try:
        parts = path.relative_to(rootdir).parts[:-1]
    except ValueError:
        return None
    return next((part for part in parts if part in TIER_MARKERS), None)


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark each test with its tier, from its path (before ``-m`` selects)."""
    tier = tier_of(item.path, item.config.rootpath)
    if tier is not None and item.get_closest_marker(tier) is None:
        item.add_marker(tier)


@pytest.hookimpl(trylast=True)  # after the conftests have added their markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag informational tests (``benchmark``) with ``rlgate.informational`` for JUnit."""
    for item in items:
        kind = next((m for m in INFORMATIONAL_MARKERS if item.get_closest_marker(m)), None)
        if kind is None and "benchmark" in getattr(item, "fixturenames", ()):
            kind = "benchmark"  # pytest-benchmark's fixture: a benchmark by construction
        if kind is not None and (INFORMATIONAL_PROPERTY, kind) not in item.user_properties:
            item.user_properties.append((INFORMATIONAL_PROPERTY, kind))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Print the versions this run tests against."""
    return [f"rlgate tested versions: {format_versions(tested_versions())}"]
