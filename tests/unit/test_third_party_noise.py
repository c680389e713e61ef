"""Third-party noise at vLLM's import stays out of rlgate's stderr; real messages stay in.

torch's ``No CUDA runtime is found, using CUDA_HOME=...`` was printed by every command that
imports vLLM (``recipe check`` here, on a machine without a GPU). A fresh process is needed:
torch logs it once, when ``torch.utils.cpp_extension`` is first imported.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rlgate
from rlgate.core.noise import NOISE, quiet_third_party

from .helpers import REPO_ROOT

PROGRESS = re.compile(r"\[\d\d:\d\d:\d\d\] recipe check: \d+ of \d+: .*")
RECIPE = sorted((REPO_ROOT / "recipes").glob("*.yaml"))[0]


def test_recipe_check_stderr_holds_only_rlgates_own_lines(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(Path(rlgate.__file__).parents[1])}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    root = os.environ.get("RLGATE_TOKENIZERS")
    if not root:
        pytest.skip("needs RLGATE_TOKENIZERS (the recipe's tokenizer, offline)")
    env["RLGATE_TOKENIZERS"] = str(Path(root).resolve())  # the README's is relative; cwd moves
    missing = tmp_path / "gone.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "recipe", "check", str(RECIPE), str(missing), "-q",
         "--no-cache"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr  # the missing config; the recipe was checked
    assert f"{RECIPE.stem}: compatible" in proc.stdout
    assert "No CUDA runtime" not in proc.stderr + proc.stdout
    own = [ln for ln in proc.stderr.splitlines() if not PROGRESS.fullmatch(ln)]  # rlgate's steps
    assert own == [f"rlgate: error: config file not found: {missing}"]


def test_only_the_noise_is_dropped_and_never_an_error(caplog):
    quiet_third_party()
    quiet_third_party()  # idempotent: one filter per logger
    name, prefix = NOISE[0]
    logger = logging.getLogger(name)
    assert len(logger.filters) == len({f.prefix for f in logger.filters}) >= 1
    with caplog.at_level(logging.DEBUG, logger=name):
        logger.warning(prefix + ", using CUDA_HOME='%s'", "/usr/local")
        logger.warning("Something else is wrong")
        logger.error(prefix + " and this is an error")
    assert [r.getMessage() for r in caplog.records] == [
        "Something else is wrong",
        prefix + " and this is an error",
    ]
