"""Run the bundled demo once per test process (rlgate.demo), with and without the functional tier.

The demo with the functional tier runs a small ``-k`` subset of the real functional tier
(the full tier takes ~45 s; ``rlgate report --demo`` runs all of it). The tokenizer root is
``--tokenizers`` / ``RLGATE_TOKENIZERS``, else ``../shared/tokenizers`` next to the checkout;
without one the test fails (an error, not a skip, as for every tokenizer fixture).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rlgate.demo.build import DemoResult, run_demo

from . import REPO_ROOT

# Cheap but real: every recipe's rlgate.functional block, validated by the functional tier.
FUNCTIONAL_SUBSET = "test_recipe_gate_block_is_valid"  # a -k expression


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="rlgate-demo-"))
    atexit.register(shutil.rmtree, root, True)
    return root


def tokenizer_root(config: pytest.Config) -> str:
    for candidate in (
        config.getoption("tokenizers"),
        os.environ.get("RLGATE_TOKENIZERS"),
        str(REPO_ROOT.parent / "shared/tokenizers"),
    ):
        if candidate and Path(candidate).is_dir():
            return candidate
    pytest.fail(
        "the demo's functional tier needs a tokenizer root: pass --tokenizers DIR or set "
        "RLGATE_TOKENIZERS",
        pytrace=False,
    )


@functools.cache
def demo_without_functional() -> DemoResult:
    """The demo with no tokenizer root: the functional tier cannot run."""
    return run_demo(_root() / "no-functional", tokenizers=None)


@functools.cache
def demo_with_functional(tokenizers: str) -> DemoResult:
    """The demo with the functional tier run for real (a -k subset)."""
    return run_demo(
        _root() / "with-functional", tokenizers=tokenizers, functional_select=FUNCTIONAL_SUBSET
    )
