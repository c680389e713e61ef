"""The architecture's import contracts (pyproject ``[tool.importlinter]``), checked and proven.

``lint-imports`` holds the contracts: layers with imports pointing down only, pure modules
that start no process and touch no Docker, Ray or NeMo RL, and vLLM reached only through
``rlgate.serving.parsers``. The tests run it on the source, and on a copy of the source with
one violation planted per contract, which it must report.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def test_the_source_keeps_every_contract():
    result = _lint(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("core/_planted.py", "import rlgate.cli", "Layers: every import points down"),
        ("recipe/_planted.py", "import rlgate.report.build", "Layers: every import points down"),
        ("checks/_planted.py", "import subprocess", "Pure modules start no process"),
        ("recipe/_planted.py", "import torch", "Pure modules start no process"),
        ("runs/_planted.py", "import ray", "Pure modules start no process"),
        ("report/_planted.py", "import vllm", "vLLM is reached only through"),
    ],
    ids=[
        "core_imports_cli",
        "recipe_imports_report",
        "check_spawns",
        "recipe_uses_torch",
        "reader_uses_ray",
        "vllm",
    ],
)
def test_a_planted_violation_breaks_its_contract(tmp_path, module, line, contract):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "rlgate", src / "rlgate", ignore=shutil.ignore_patterns("data"))
    (src / "rlgate" / module).write_text(f'"""Planted."""\n\n{line}\n')
    result = _lint(src)
    assert result.returncode != 0
    assert f"{contract}" in result.stdout and "BROKEN" in result.stdout, result.stdout
    assert module.replace("/", ".").removesuffix(".py") in result.stdout
