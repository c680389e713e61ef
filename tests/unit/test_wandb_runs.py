"""W&B runs (rlgate.runs.formats.wandb): recognised and refused with what to do, never misread.

The run is written by real wandb (the [gym] extra's), offline, where NeMo RL's
``WandbLogger`` puts it (``wandb.init(dir=<log_dir>/wandb)``), in a child process so that
wandb's service and hooks stay out of the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.runs.metrics import SourceKind, load_run
from rlgate.testing.corpus import Fault, corpus_recipe, write_run

from .helpers.cli import one_error, run_cli

pytest.importorskip("wandb", reason="wandb comes with rlgate[gym]")

_WRITE = """
import sys, wandb
run = wandb.init(mode="offline", project="nemo-rl", name="grpo-test", dir=sys.argv[1])
for step in range(1, 6):
    run.log({"train/loss": 1.0 / step, "train/reward": 0.1 * step}, step=step)
run.finish()
"""


def _wandb_log_dir(log_dir: Path) -> Path:
    """NeMo RL's log dir of a W&B-only run; returns the run's ``run-<id>.wandb`` file."""
    wandb_dir = log_dir / "wandb"
    wandb_dir.mkdir(parents=True)
    env = {
        **os.environ,
        "WANDB_SILENT": "true",
        "WANDB_CONFIG_DIR": str(log_dir.parent / "wandb-config"),
        "WANDB_CACHE_DIR": str(log_dir.parent / "wandb-cache"),
    }
    subprocess.run([sys.executable, "-c", _WRITE, str(wandb_dir)], env=env, check=True)
    (file,) = wandb_dir.glob("wandb/offline-run-*/run-*.wandb")
    return file


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("wandb")
    recipe = root / "recipe.yaml"
    recipe.write_text(corpus_recipe(), encoding="utf-8")
    log_dir = root / "logs"
    return log_dir, _wandb_log_dir(log_dir), recipe


@pytest.mark.parametrize("what", ["log_dir", "run_file"])
def test_a_wandb_only_run_is_exit_2_saying_how_to_get_a_readable_form(
    wandb_run: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], what: str
) -> None:
    log_dir, run_file, recipe = wandb_run
    given = log_dir if what == "log_dir" else run_file
    code, _, err = run_cli(["check-run", str(given), "--recipe", str(recipe)], capsys)
    message = one_error(err)
    assert code == 2 and "a W&B run" in message and run_file.name in message
    assert "logger.tensorboard_enabled=True" in message and "metrics.json" in message


def test_a_log_dir_with_wandb_and_tensorboard_is_read_as_tensorboard(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    _wandb_log_dir(log_dir)
    write_run(log_dir, Fault.HEALTHY, seed=5)  # exp_001/tensorboard/ beside wandb/
    run = load_run(log_dir)
    assert run.kind is SourceKind.TENSORBOARD and "train/loss" in run.series
