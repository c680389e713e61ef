"""launch -> watch -> check-run through the CLI, with a local command writing NeMo RL's events.

The driver is ``rlgate.testing.standin`` given NeMo RL's own command line (``--config`` plus
the overrides rlgate adds); it loads the recipe like the real entry point and writes
TensorBoard events with NeMo RL's tags under ``logger.log_dir``. The gate then reads them with
the same code the convergence tier uses.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.launch.site import SiteConfig

from .helpers.launch_fixtures import (
    KNOWN_BAD,
    ONE_NODE,
    ROOT,
    STANDIN,
    TARGET,
    nemo_rl_checkout,
    slurm_site,
    swe_env,
)


def tokenizer_root(config: pytest.Config) -> str:
    for candidate in (
        config.getoption("tokenizers"),
        os.environ.get("RLGATE_TOKENIZERS"),
        str(ROOT.parent / "shared" / "tokenizers"),
    ):
        if candidate and Path(candidate).is_dir():
            return candidate
    pytest.fail("the pre-launch gate needs --tokenizers DIR or RLGATE_TOKENIZERS", pytrace=False)


def site_file(tmp_path: Path, site: SiteConfig) -> str:
    path = tmp_path / "site.yaml"
    path.write_text(site.model_dump_json())
    return str(path)


def launch_argv(tmp_path: Path, name: str, *entry_args: str, steps: int = 20) -> list[str]:
    site = site_file(tmp_path, SiteConfig(env=swe_env(tmp_path)))
    entrypoint = shlex.join([*STANDIN, *entry_args])
    argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "local", "--site", site]
    argv += ["--entrypoint", entrypoint, "--run-dir", str(tmp_path / name), "--no-check"]
    return [*argv, "--steps", str(steps)]


class TestLaunchWatchCheckRun:
    def test_healthy_run_launches_completes_and_passes_the_gate(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(launch_argv(tmp_path, "good")) == 0
        assert "launched good on local" in capsys.readouterr().out
        assert main(["watch", str(tmp_path / "good"), "--interval", "0.2"]) == 0
        assert "good: COMPLETED: completed: last step 20 of 20" in capsys.readouterr().out
        out = tmp_path / "check.json"
        argv = ["check-run", str(tmp_path / "good" / "logs"), "--recipe", str(TARGET)]
        assert main([*argv, "--tier", "convergence", "--json", str(out)]) == 0
        doc = json.loads(out.read_text())
        completion = next(c for c in doc["checks"] if c["name"] == "completion")
        assert doc["passed"] and completion["status"] == "pass" and doc["target_step"] == 20

    def test_run_that_stops_early_fails_watch_and_the_completion_check(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(launch_argv(tmp_path, "short", "--stop-at-step", "12")) == 0
        assert main(["watch", str(tmp_path / "short"), "--interval", "0.2"]) == 1
        assert "short: STOPPED_SHORT: exited 0 but stopped short: last step 12 of 20" in (
            capsys.readouterr().out
        )
        out = tmp_path / "check.json"
        argv = ["check-run", str(tmp_path / "short" / "logs"), "--recipe", str(TARGET)]
        assert main([*argv, "--tier", "convergence", "--json", str(out)]) == 1
        completion = next(
            c for c in json.loads(out.read_text())["checks"] if c["name"] == "completion"
        )
        assert completion["status"] != "pass" and "12" in completion["message"]

    def test_launch_with_watch_follows_the_run_it_started(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = launch_argv(tmp_path, "died", "--stop-at-step", "0", "--exit-code", "2")
        assert main([*argv, "--watch", "--interval", "0.2"]) == 1
        assert "died: FAILED: run died: driver exited with status 2" in capsys.readouterr().out

    def test_watch_of_several_runs_reports_the_worst(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(launch_argv(tmp_path, "a", steps=2)) == 0
        assert main(launch_argv(tmp_path, "b", "--stop-at-step", "1", steps=2)) == 0
        dirs = [str(tmp_path / name) for name in ("a", "b", "none")]
        code = main(["watch", *dirs, "--interval", "0.2"])
        out, err = capsys.readouterr()
        assert code == 2  # the missing manifest is a usage error, the worst of 0, 1, 2
        assert "a: COMPLETED" in out and "b: STOPPED_SHORT" in out and "no run manifest" in err


class TestPreLaunchGate:
    def test_gate_refuses_to_launch_an_incompatible_recipe(
        self,
        tmp_path: Path,
        request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        repo = nemo_rl_checkout(tmp_path)[0]
        site = site_file(tmp_path, slurm_site(tmp_path))
        argv = ["launch", str(KNOWN_BAD), "--backend", "slurm", "--site", site]
        argv += ["--nemo-rl-dir", str(repo), "--run-dir", str(tmp_path / "bad"), "--dry-run"]
        argv += ["--tokenizers", tokenizer_root(request.config)]
        assert main(argv) == 1
        captured = capsys.readouterr()
        assert "recipe check failed" in captured.err and "ERROR" in captured.err
        assert "sbatch" not in captured.out and not (tmp_path / "bad").exists()

    def test_typo_in_an_override_stops_the_launch_with_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = launch_argv(tmp_path, "typo")
        argv.insert(2, "grpo.num_prompts_per_stpe=4")
        assert main(argv) == 2
        assert "num_prompts_per_stpe" in capsys.readouterr().err
        assert not (tmp_path / "typo").exists()
