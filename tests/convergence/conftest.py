from pathlib import Path

import pytest

from rlgate.pytest_plugin import mark_tier


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "convergence")


# The tier's fixtures (plan, inputs, one evaluated check per test): rlgate.pytest_plugin.tier.
from rlgate.pytest_plugin.tier import check_result, gate_inputs, gate_plan  # noqa: E402, F401
