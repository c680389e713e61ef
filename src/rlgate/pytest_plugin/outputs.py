"""The plugin's outputs kept off its inputs: the CLI's output guard, before any test runs.

When the plugin is loaded, ``--rlgate-json FILE`` and pytest's own ``--junitxml FILE`` are
the outputs of one :class:`rlgate.core.io.OutputGuard`, and every option of the plugin adds
the inputs it names as :attr:`rlgate.core.options.Option.role` says (the CLI's rule, through
the same :meth:`~rlgate.core.io.OutputGuard.add_option`): a recipe with every file of its
``defaults:`` chain, the run, baseline, rollouts, sync twin and band runs (given, or found by
the recipe's ``rlgate.band.runs``), SWE results and dataset, each tokenizer folder. An output
that is, links to or lies inside an input, or that names a device, FIFO, socket or a file in
``/dev``/``/proc``, is a pytest usage error (exit 4; ``rlgate run`` exits 2) with one
message, at configure time. The tier JSON is then written through the same guard.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from rlgate.core.errors import RlgateError
from rlgate.core.io import OutputGuard, output_guard
from rlgate.core.options import PLUGIN_OPTIONS

__all__ = ["guard_outputs", "guarded_writes"]

_GUARD = pytest.StashKey[OutputGuard]()


def _values(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]


def _outputs(config: pytest.Config) -> list[tuple[str, str]]:
    """(flag, path) of what this session writes that the user named."""
    found = []
    json_out = config.getoption("rlgate_json", default=None)
    if json_out:
        found.append(("--rlgate-json", str(json_out)))
    xml = getattr(config.option, "xmlpath", None)
    if xml and not hasattr(config, "workerinput"):
        # the file pytest opens: LogXML normalises lexically (normpath(abspath()): lnk/.. is
        # dropped before the OS follows lnk), so the guard sees that string; kept relative
        # (the working directory is physical, so lexical and physical ".." agree there)
        path = os.path.normpath(os.path.expanduser(os.path.expandvars(xml)))
        found.append(("--junitxml", path))
    return found


def _recipe_band_runs(config: pytest.Config) -> list[str]:
    """The band runs the convergence/perf tiers would read from the recipe's glob."""
    if config.getoption("band_run", default=None) or not config.getoption("run_dir", default=None):
        return []
    recipes = config.getoption("recipe", default=None) or []
    if len(recipes) != 1:
        return []
    from rlgate.checks.plan import band_run_paths
    from rlgate.pytest_plugin.tier import cached_plan

    try:
        plan = cached_plan(str(recipes[0]), config.getoption("max_steps", default=None))
        return [str(p) for p in band_run_paths(plan)]
    except RlgateError:  # the tier reports a bad recipe or glob as its testcases' error
        return []


def guard_outputs(config: pytest.Config) -> None:
    """Declare the session's outputs and inputs; refuse a conflict as a usage error."""
    outputs = _outputs(config)
    if not outputs:
        return
    from rlgate.recipe.load import config_files

    guard = OutputGuard()
    try:
        for flag, path in outputs:
            guard.add_output(path, flag)
        for option in PLUGIN_OPTIONS:
            values = _values(config.getoption(option.dest, default=None))
            guard.add_option(option.role, option.pytest_flags[0], values, chain=config_files)
        for run in _recipe_band_runs(config):
            guard.add_input(run, "a band run the recipe's rlgate.band.runs finds", check=True)
    except RlgateError as exc:
        raise pytest.UsageError(f"rlgate: {exc}") from None
    config.stash[_GUARD] = guard


@contextlib.contextmanager
def guarded_writes(config: pytest.Config) -> Iterator[None]:
    """Make the session's guard the active one while inside (rlgate's writers consult it)."""
    guard = config.stash.get(_GUARD, None)
    if guard is None:
        yield
        return
    with output_guard(guard):
        yield
