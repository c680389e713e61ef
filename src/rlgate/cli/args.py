"""Argument rules and defaults shared by the CLI's modules (a leaf: no ``rlgate.cli`` import)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_LAST", "FLAKY_RATE", "MAX_LAST", "split_configs_and_overrides"]

# rlgate.history.triage.DEFAULT_LAST / FLAKY_RATE, kept here so building the parser imports
# nothing more (tests/unit/test_triage_cli.py checks the two agree); rlgate.cli.triage and
# rlgate.cli.history (history prune keeps what triage reads) both use them.
DEFAULT_LAST = 30
FLAKY_RATE = 0.1
MAX_LAST = 10_000


def split_configs_and_overrides(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Hydra's rule: an argument with ``=`` or starting with ``~``/``+`` is an override."""
    overrides = [a for a in args if "=" in a or a.startswith(("~", "+"))]
    configs = [a for a in args if a not in overrides]
    return configs, overrides
