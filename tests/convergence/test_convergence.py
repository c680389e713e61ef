"""Convergence tier: one testcase per convergence check of ``--recipe`` on ``--run-dir``.

Run: ``pytest -m convergence --run-dir LOG_DIR --recipe RECIPE [--rollouts R.jsonl]
[--max-steps N] --junitxml out.xml``. Without a run every test is skipped with a reason
naming the missing option. See rlgate.pytest_plugin.tier for how outcomes map to pytest.
"""

import pytest

from rlgate.checks.plan import PlannedCheck
from rlgate.core.results import Outcome, Result, Tier
from rlgate.pytest_plugin.tier import parametrize_checks


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_checks(metafunc, Tier.CONVERGENCE)


def test_convergence_check(planned: PlannedCheck, check_result: Result) -> None:
    if check_result.outcome is Outcome.FAIL:
        pytest.fail(f"FAIL {check_result.name}: {check_result.message}", pytrace=False)
