from pathlib import Path

import pytest

from rlgate.pytest_plugin import mark_tier


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_tier(items, Path(__file__).parent, "swe_gate")
