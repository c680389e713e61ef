"""``rlgate run functional`` outside a checkout runs the functional tier shipped in the package.

It used to say "no tests selected" (pytest collected the current folder). The test runs the
real CLI in a fresh process from an empty temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from junitparser import JUnitXml

import rlgate
from rlgate.core.resources import FUNCTIONAL_TIER, RECIPES
from rlgate.recipe.load import recipe_files

from .helpers.demo_build import FUNCTIONAL_SUBSET, tokenizer_root


def test_run_functional_from_a_folder_without_a_checkout_runs_the_bundled_tier(request, tmp_path):
    junit = tmp_path / "functional.xml"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env["RLGATE_TOKENIZERS"] = str(Path(tokenizer_root(request.config)).resolve())
    env["PYTHONPATH"] = str(Path(rlgate.__file__).parents[1])
    before = set(FUNCTIONAL_TIER.resolve().rglob("*"))
    proc = subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "run", "functional", "-k", FUNCTIONAL_SUBSET,
         "--junitxml", str(junit)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no tests selected" not in proc.stderr
    assert "running the bundled tier" in proc.stderr
    cases = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    recipes = {p.stem for p in recipe_files(RECIPES)}
    assert len(cases) >= 3 and all(c.classname.startswith("functional.") for c in cases)
    assert all(c.is_passed for c in cases)
    assert {c.name.split("[")[1].rstrip("]") for c in cases} <= recipes
    assert not (tmp_path / ".pytest_cache").exists()  # -p no:cacheprovider
    assert set(FUNCTIONAL_TIER.resolve().rglob("*")) <= before  # no bytecode in the bundled tier
