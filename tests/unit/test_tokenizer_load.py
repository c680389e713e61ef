"""A tokenizer folder transformers refuses is bad input (exit 2, one line), never exit 70."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode

from .helpers.demo_build import REPO_ROOT, tokenizer_root

RECIPE = (
    REPO_ROOT
    / "recipes/grpo-qwen3-30ba3b-thinking-2507-16n8g-megatron-tp4pp2cp4ep8-async1off-gym-swe.yaml"
)


def _folder(request: pytest.FixtureRequest, tmp_path: Path, config: object) -> Path:
    root = Path(tokenizer_root(request.config))
    folder = tmp_path / "model"
    shutil.copytree(root / "qwen3-30b-a3b-thinking-2507", folder)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def _check(folder: Path) -> int:
    return main(
        ["recipe", "check", str(RECIPE), "--no-cache", f"policy.model_name={folder}",
         f"policy.tokenizer.name={folder}"]
    )  # fmt: skip


def test_a_tokenizer_transformers_refuses_leaves_its_checks_not_run_naming_why(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # transformers raises a KeyError for a rope_type without its keys (was exit 70)
    folder = _folder(request, tmp_path, {"model_type": "qwen3_moe",
                                         "rope_scaling": {"rope_type": "llama3"}})  # fmt: skip
    code = _check(folder)
    captured = capsys.readouterr()
    assert code == ExitCode.INFRA, captured.err
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    (line,) = [ln for ln in captured.out.splitlines() if ln.startswith("NOT RUN")]
    assert f"tokenizer '{folder}' not available (KeyError: Missing required keys" in line
    assert "the folder exists but transformers refuses its files" in line


@pytest.mark.parametrize(
    "config",
    [{"model_type": "qwen3_moe", "rope_scaling": "x"}, [1, 2]],
    ids=["rope_scaling_not_a_mapping", "config_a_list"],
)
def test_a_model_config_that_is_no_config_is_exit_2_with_one_line(
    request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str], config
) -> None:
    folder = _folder(request, tmp_path, config)
    code = _check(folder)
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert "Traceback" not in err and "internal error" not in err
    (line,) = [ln for ln in err.splitlines() if ln.startswith("rlgate: error:")]
    assert f"{folder}/config.json: model config" in line
