"""Builders of real-format inputs shared by the unit tests (imported as ``.helpers.<module>``)."""

from pathlib import Path

#: The source checkout the tests run in (``tests/unit/helpers/`` is three levels below it).
REPO_ROOT = Path(__file__).resolve().parents[3]
