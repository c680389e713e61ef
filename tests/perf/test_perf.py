"""Perf tier: one testcase per perf check of ``--recipe`` on ``--run-dir`` vs ``--baseline``.

Run: ``pytest -m perf --run-dir LOG_DIR --recipe RECIPE --baseline BASELINE_RUN
--junitxml out.xml``. Perf checks without ``--baseline`` are skipped with a reason naming
it; timing/throughput band checks need ``--band-run`` (or ``rlgate.band.runs``).
"""

import pytest

from rlgate.checks.plan import PlannedCheck
from rlgate.core.results import Outcome, Result, Tier
from rlgate.pytest_plugin.tier import parametrize_checks


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_checks(metafunc, Tier.PERF)


def test_perf_check(planned: PlannedCheck, check_result: Result) -> None:
    if check_result.outcome is Outcome.FAIL:
        pytest.fail(f"FAIL {check_result.name}: {check_result.message}", pytrace=False)
