"""Launch plans, provenance, the run manifest and the local backend (real subprocesses, git)."""

from __future__ import annotations

import json
import os
import shlex
import signal
from pathlib import Path

import pytest
from launch_fixtures import (
    ONE_NODE,
    STANDIN,
    TARGET,
    local_site,
    nemo_rl_checkout,
    stop_local_run,
    swe_env,
    wait_for,
)

from rlgate._errors import LaunchError, RecipeError
from rlgate.launch import (
    DEFAULT_ENTRYPOINT,
    Phase,
    SiteConfig,
    backend_for,
    launch,
    load_site_config,
    plan_launch,
    read_git_info,
)
from rlgate.manifest import MANIFEST_NAME, Backend, RunStatus, load_manifest
from rlgate.watch import watch_run

ROOT = Path(__file__).parents[2]


def plan_local(tmp_path: Path, *overrides: str, **kwargs):
    kwargs.setdefault("site", local_site(tmp_path))
    kwargs.setdefault("entrypoint", STANDIN)
    kwargs.setdefault("run_dir", tmp_path / "run")
    return plan_launch(TARGET, backend=Backend.LOCAL, overrides=(*ONE_NODE, *overrides), **kwargs)


class TestPlan:
    def test_plan_runs_nemo_rl_gym_entry_point_with_the_suite_overrides(
        self, tmp_path: Path
    ) -> None:
        repo, _, _ = nemo_rl_checkout(tmp_path)
        plan = plan_local(tmp_path, "grpo.val_period=5", entrypoint=None, nemo_rl_dir=repo)
        run = (tmp_path / "run").resolve()
        assert DEFAULT_ENTRYPOINT == ("uv", "run", "examples/nemo_gym/run_grpo_nemo_gym.py")
        assert plan.argv[:3] == DEFAULT_ENTRYPOINT
        assert plan.argv[3:5] == ("--config", str(TARGET.resolve()))
        assert plan.argv[5:9] == (
            "grpo.max_num_steps=20",
            f"logger.log_dir={run}/logs",
            "logger.tensorboard_enabled=True",
            f"checkpointing.checkpoint_dir={run}/ckpts",
        )
        assert plan.argv[9:] == ("cluster.num_nodes=1", "grpo.val_period=5")  # user's last
        assert plan.command == f"cd {repo} && {shlex.join(plan.argv)}"
        assert (plan.target_step, plan.nodes, plan.gpus_per_node) == (20, 1, 8)

    def test_plan_resolves_the_config_nemo_rl_will_receive(self, tmp_path: Path) -> None:
        plan = plan_local(tmp_path, steps=7)
        cfg = plan.recipe.config
        assert cfg["grpo"]["max_num_steps"] == 7
        assert cfg["logger"]["log_dir"] == str((tmp_path / "run" / "logs").resolve())
        data = swe_env(tmp_path)["RLGATE_SWE_DATA"]
        assert cfg["data"]["train"]["data_path"] == f"{data}/train.jsonl"
        assert plan.recipe.unresolved == ()

    def test_plan_rejects_a_typo_in_an_override(self, tmp_path: Path) -> None:
        with pytest.raises(RecipeError, match="max_num_stepz"):
            plan_local(tmp_path, "grpo.max_num_stepz=3")

    @pytest.mark.parametrize(
        "override",
        [
            pytest.param("logger.log_dir=/elsewhere", id="log_dir"),
            pytest.param("++grpo.max_num_steps=3", id="steps"),
            pytest.param("checkpointing.checkpoint_dir=/x", id="ckpt_dir"),
            pytest.param("logger.tensorboard_enabled=false", id="tensorboard"),
        ],
    )
    def test_plan_refuses_overrides_of_keys_the_tiers_read(
        self, tmp_path: Path, override: str
    ) -> None:
        with pytest.raises(LaunchError, match="which rlgate sets"):
            plan_local(tmp_path, override)

    def test_plan_refuses_a_run_whose_env_interpolation_cannot_resolve(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("RLGATE_SWE_DATA", raising=False)
        monkeypatch.delenv("RLGATE_SWE_SIF", raising=False)
        with pytest.raises(LaunchError, match=r"\['RLGATE_SWE_DATA', 'RLGATE_SWE_SIF'\]"):
            plan_local(tmp_path, site=SiteConfig())

    def test_plan_takes_env_from_the_launching_shell_for_local_runs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for key, value in swe_env(tmp_path).items():
            monkeypatch.setenv(key, value)
        assert plan_local(tmp_path, site=SiteConfig()).recipe.unresolved == ()

    def test_plan_requires_pass_env_variables_to_be_set(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("RLGATE_TEST_TOKEN", raising=False)
        site = SiteConfig(env=swe_env(tmp_path), pass_env=["RLGATE_TEST_TOKEN"])
        with pytest.raises(LaunchError, match="RLGATE_TEST_TOKEN"):
            plan_local(tmp_path, site=site)

    def test_plan_never_reuses_a_run_directory(self, tmp_path: Path) -> None:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "keep.txt").write_text("user data")
        with pytest.raises(LaunchError, match="not empty"):
            plan_local(tmp_path)
        assert (tmp_path / "run" / "keep.txt").read_text() == "user data"

    def test_plan_refuses_chained_jobs_without_checkpoints(self, tmp_path: Path) -> None:
        with pytest.raises(LaunchError, match=r"checkpointing\.enabled is false"):
            plan_local(tmp_path, "checkpointing.enabled=false", steps=20, steps_per_run=10)

    def test_plan_needs_a_nemo_rl_checkout_for_the_real_entry_point(self, tmp_path: Path) -> None:
        with pytest.raises(LaunchError, match="--nemo-rl-dir"):
            plan_local(tmp_path, entrypoint=None)
        with pytest.raises(LaunchError, match="not a NeMo RL checkout"):
            plan_local(tmp_path, entrypoint=None, nemo_rl_dir=tmp_path)

    def test_local_backend_refuses_a_multi_node_recipe(self, tmp_path: Path) -> None:
        plan = plan_launch(
            TARGET,
            backend=Backend.LOCAL,
            site=local_site(tmp_path),
            entrypoint=STANDIN,
            run_dir=tmp_path / "run",
        )
        with pytest.raises(LaunchError, match=r"cluster\.num_nodes is 4"):
            backend_for(Backend.LOCAL).render(plan)


class TestSiteConfig:
    def test_example_site_config_is_valid(self) -> None:
        site = load_site_config(ROOT / "ci" / "site.example.yaml")
        assert site.slurm is not None and site.slurm.container and site.slurm.mounts
        assert site.ray is not None and site.ray.address.startswith("http")
        assert "HF_TOKEN" in site.pass_env and "HF_TOKEN" not in site.env

    def test_site_config_rejects_unknown_keys(self, tmp_path: Path) -> None:
        bad = tmp_path / "site.yaml"
        bad.write_text("slurm: {account: a, partition: p, container: c, mount: [/a:/a]}\n")
        with pytest.raises(LaunchError, match="mount"):
            load_site_config(bad)


class TestGitInfo:
    def test_git_info_reads_nemo_rl_and_gym_commits(self, tmp_path: Path) -> None:
        repo, rl_commit, gym_commit = nemo_rl_checkout(tmp_path)
        info = read_git_info(repo)
        assert (info.commit, info.dirty) == (rl_commit, False)
        assert read_git_info(repo / "3rdparty/Gym-workspace/Gym").commit == gym_commit
        (repo / "ray.sub").write_text("edited\n")
        assert read_git_info(repo).dirty is True

    def test_git_info_is_unknown_with_a_reason_outside_git(self, tmp_path: Path) -> None:
        info = read_git_info(tmp_path)
        assert info.commit == "unknown" and info.reason.startswith("not a git checkout")
        assert read_git_info(None).reason == "no NeMo RL checkout given"


class TestManifest:
    def test_manifest_is_written_before_submission_with_provenance(self, tmp_path: Path) -> None:
        repo, rl_commit, gym_commit = nemo_rl_checkout(tmp_path)
        plan = plan_local(tmp_path, "grpo.val_period=5", nemo_rl_dir=repo, steps=2)
        manifest = launch(plan)
        try:
            on_disk = json.loads((plan.run_dir / MANIFEST_NAME).read_text())
            assert on_disk["schema_version"] == 1
            loaded = load_manifest(plan.run_dir)
            assert loaded == manifest
            assert loaded.nemo_rl.commit == rl_commit and loaded.gym.commit == gym_commit
            assert loaded.recipe.path == str(TARGET.resolve())
            assert len(loaded.recipe.sources) == 3 and len(loaded.recipe.sha256) == 64
            assert loaded.user_overrides == ["cluster.num_nodes=1", "grpo.val_period=5"]
            assert loaded.config["grpo"]["max_num_steps"] == 2
            assert loaded.versions["ray"] and loaded.backend is Backend.LOCAL
            assert loaded.submitted_at and loaded.pid and loaded.job_ids == [str(loaded.pid)]
        finally:
            stop_local_run(plan.run_dir)

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            pytest.param('{"schema_version": 1, "run_na', "not valid JSON", id="truncated"),
            pytest.param('{"schema_version": 9}', "schema_version 9", id="future_schema"),
            pytest.param(
                '{"schema_version": 1, "run_name": "x"}',
                "invalid run manifest",
                id="missing_fields",
            ),
            pytest.param("[1, 2]", "JSON object", id="not_an_object"),
        ],
    )
    def test_bad_manifest_is_a_clear_error(
        self, tmp_path: Path, content: str, message: str
    ) -> None:
        (tmp_path / MANIFEST_NAME).write_text(content)
        with pytest.raises(LaunchError, match=message):
            load_manifest(tmp_path)

    def test_missing_manifest_names_the_directory(self, tmp_path: Path) -> None:
        with pytest.raises(LaunchError, match="no run manifest"):
            load_manifest(tmp_path)


class TestLocalBackend:
    def test_local_run_executes_the_command_and_records_its_exit_status(
        self, tmp_path: Path
    ) -> None:
        plan = plan_local(tmp_path, steps=3)
        manifest = launch(plan)
        backend = backend_for(Backend.LOCAL)
        wait_for(lambda: backend.poll(manifest).phase.terminal)
        state = backend.poll(manifest)
        assert (state.phase, state.exit_status) == (Phase.SUCCEEDED, 0)
        run = plan.run_dir
        assert (run / "launch" / "driver_command.sh").read_text() == plan.command
        assert "3/3 steps" in (run / "driver.log").read_text()
        assert list((run / "logs" / "exp_001" / "tensorboard").glob("events.out.tfevents.*"))

    def test_local_run_that_is_killed_is_a_failure_without_exit_status(
        self, tmp_path: Path
    ) -> None:
        plan = plan_local(tmp_path, entrypoint=(*STANDIN, "--seconds", "60"))
        manifest = launch(plan)
        backend = backend_for(Backend.LOCAL)
        assert backend.poll(manifest).phase is Phase.RUNNING
        os.killpg(os.getpgid(manifest.pid), signal.SIGKILL)  # the OOM killer, say
        wait_for(lambda: backend.poll(manifest).phase.terminal)
        state = backend.poll(manifest)
        assert state.phase is Phase.FAILED and state.exit_status is None
        assert "without recording an exit status" in state.message
        assert load_manifest(plan.run_dir).status is RunStatus.SUBMITTED  # watch updates it

    def test_failed_submission_is_recorded_in_the_manifest(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        plan = plan_local(tmp_path)
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bash: the spawn fails
        with pytest.raises(LaunchError, match="submission failed"):
            launch(plan)
        manifest = load_manifest(plan.run_dir)
        assert manifest.status is RunStatus.FAILED and "submission failed" in manifest.message
        monkeypatch.undo()
        result = watch_run(plan.run_dir)
        assert result.exit_code == 1 and result.message.startswith("nothing to watch")
