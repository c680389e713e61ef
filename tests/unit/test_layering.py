"""The package's one-way layering, checked on the source (style guide convention 1).

Pure modules (records and logic) never start processes or talk to Docker, Ray or NeMo RL;
vLLM is reached only through ``rlgate.parsers``; nothing imports the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "rlgate"
PURE = [
    "recipes", "schema", "findings", "templates", "parsers", "gym", "serving", "contiguity",
    "compat", "metrics", "_tfrecord", "checks", "gate", "convergence", "perf", "rollouts",
    "checkplan", "stats", "swebench", "_swe_formats", "swe_compare", "swe_report",
    "_report_verdict", "_report_inputs", "_report_story", "plots", "budget", "manifest",
    "rollout_bench", "rollout_trajectory", "rollout_parsing", "rollout_gate", "rollout_report",
]  # fmt: skip
EFFECTS = {"subprocess", "docker", "ray", "nemo_rl"}


def _imports(module: str) -> set[str]:
    tree = ast.parse((PKG / f"{module}.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("module", PURE, ids=PURE)
def test_pure_module_has_no_effects(module):
    assert not _top(_imports(module)) & EFFECTS


def test_only_parsers_imports_vllm():
    users = sorted(p.stem for p in PKG.rglob("*.py") if "vllm" in _top(_imports_path(p)))
    assert users == ["parsers"], users


def test_nothing_imports_the_cli():
    users = sorted(p.stem for p in PKG.rglob("*.py") if "rlgate.cli" in _imports_path(p))
    assert users == [], users


def _imports_path(path: Path) -> set[str]:
    return _imports(str(path.relative_to(PKG).with_suffix("")))
