"""Shared inputs of the launch/watch tests: recipes, site configs, a git checkout, the stand-in.

Nothing here imitates a result: the NeMo RL checkout is a real git repository (with the Gym
submodule path as a nested repository) so ``git rev-parse`` runs for real, and the driver is
``rlgate.testing.standin``, which writes TensorBoard events with NeMo RL's tag names.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlgate.launch.manifest import Backend, load_manifest
from rlgate.launch.plan import GYM_SUBMODULE, launch, plan_launch
from rlgate.launch.site import SiteConfig

from . import REPO_ROOT as ROOT

RECIPES = ROOT / "recipes"
TARGET = RECIPES / "grpo-qwen3.5-35ba3b-4n8g-megatron-ep16tp2cp2-async1off-gym-swe-thinking.yaml"
KNOWN_BAD = (
    RECIPES
    / "known-bad"
    / "grpo-qwen3-30ba3b-instruct-2507-16n8g-megatron-async1off-gym-swe-hermes-nothink.yaml"
)
STANDIN = (sys.executable, "-m", "rlgate.testing.standin")
ONE_NODE = ("cluster.num_nodes=1",)


def swe_env(tmp_path: Path) -> dict[str, str]:
    """The variables rlgate's recipes read through ``${oc.env:...}``."""
    return {"RLGATE_SWE_DATA": str(tmp_path / "swe_data"), "RLGATE_SWE_SIF": str(tmp_path / "sif")}


def recipe_named(tmp_path: Path, stem: str) -> Path:
    """The target recipe (and its ``defaults:`` chain) copied under another file name."""
    folder = tmp_path / "recipes"
    if not folder.exists():
        shutil.copytree(TARGET.parent / "base", folder / "base")
    path = folder / f"{stem}.yaml"
    shutil.copyfile(TARGET, path)
    return path


def local_site(tmp_path: Path) -> SiteConfig:
    """A site config for ``--backend local``: only the environment."""
    return SiteConfig(env=swe_env(tmp_path))


def launch_local(tmp_path: Path, *entry_args: str, steps: int = 4) -> Path:
    """Launch the reference recipe locally on the stand-in driver; its run dir."""
    plan = plan_launch(
        TARGET,
        backend=Backend.LOCAL,
        site=local_site(tmp_path),
        overrides=ONE_NODE,
        steps=steps,
        run_dir=tmp_path / "run",
        entrypoint=(*STANDIN, *entry_args),
    )
    launch(plan)
    return plan.run_dir


def slurm_site(tmp_path: Path, **slurm: object) -> SiteConfig:
    """A site config with a slurm block, as ``ci/site.example.yaml`` has it."""
    block = {
        "account": "acct_llm",
        "partition": "batch_block1",
        "container": "/lustre/containers/nemo-rl.sqsh",
        "mounts": ["/lustre/fsw:/lustre/fsw"],
        "max_minutes": 240,
        "default_minutes": 240,
        "job_name_prefix": "acct_llm",
        **slurm,
    }
    return SiteConfig.model_validate({"slurm": block, "env": swe_env(tmp_path)})


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    out = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def nemo_rl_checkout(root: Path) -> tuple[Path, str, str]:
    """A git checkout with NeMo RL's layout; returns (path, NeMo RL commit, Gym commit)."""
    repo = root / "nemo-rl"
    (repo / "examples" / "nemo_gym").mkdir(parents=True)
    (repo / "examples" / "nemo_gym" / "run_grpo_nemo_gym.py").write_text("# entry point\n")
    (repo / "ray.sub").write_text("#!/bin/bash\n# NeMo RL's Slurm launcher\n")
    gym = repo / GYM_SUBMODULE
    gym.mkdir(parents=True)
    (gym / "pyproject.toml").write_text("[project]\nname = 'nemo-gym'\n")
    for path in (gym, repo):
        _git(path, "init", "-q")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", "snapshot")
    return repo, _git(repo, "rev-parse", "HEAD"), _git(gym, "rev-parse", "HEAD")


def wait_for(predicate, timeout: float = 60.0, step: float = 0.2) -> None:
    """Poll ``predicate`` until true or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(step)


def stop_local_run(run_dir: Path) -> None:
    """Kill a local run this test started: its wrapper's process group, by id."""
    manifest = load_manifest(run_dir)
    if manifest.pid is None:
        return
    try:
        os.killpg(os.getpgid(manifest.pid), signal.SIGKILL)
    except ProcessLookupError:
        pass
