"""Launch plans, provenance, the run manifest and the local backend (real subprocesses, git)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from pathlib import Path

import pytest
import yaml

from rlgate.cli.app import main
from rlgate.core.errors import LaunchError, RecipeError
from rlgate.launch import local
from rlgate.launch.job import Phase
from rlgate.launch.manifest import (
    MANIFEST_NAME,
    Backend,
    RunManifest,
    RunStatus,
    load_manifest,
)
from rlgate.launch.plan import DEFAULT_ENTRYPOINT, backend_for, launch, plan_launch, read_git_info
from rlgate.launch.site import SiteConfig, load_site_config
from rlgate.launch.watch import watch_run

from .helpers.launch_fixtures import (
    ONE_NODE,
    STANDIN,
    TARGET,
    local_site,
    nemo_rl_checkout,
    recipe_named,
    stop_local_run,
    swe_env,
    wait_for,
)

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

    def test_launch_requires_pass_env_variables_to_be_set(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Planning reads no pass_env value (a dry run shows the plan); submitting refuses."""
        monkeypatch.delenv("RLGATE_TEST_TOKEN", raising=False)
        site = SiteConfig(env=swe_env(tmp_path), pass_env=["RLGATE_TEST_TOKEN"])
        plan = plan_local(tmp_path, site=site)
        assert plan.pass_env == ("RLGATE_TEST_TOKEN",)
        with pytest.raises(LaunchError, match=r"pass_env names \['RLGATE_TEST_TOKEN'\]"):
            launch(plan)
        assert not plan.run_dir.exists()  # refused before anything is written

    @pytest.mark.parametrize("dry_run", [True, False])
    def test_dry_run_notes_unset_pass_env_and_the_launch_refuses(
        self,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        dry_run: bool,
    ) -> None:
        monkeypatch.delenv("RLGATE_TEST_TOKEN", raising=False)
        monkeypatch.delenv("RLGATE_TEST_OTHER", raising=False)
        site = tmp_path / "site.yaml"
        names = ["RLGATE_TEST_TOKEN", "RLGATE_TEST_OTHER"]
        site.write_text(SiteConfig(env=swe_env(tmp_path), pass_env=names).model_dump_json())
        run = tmp_path / "run"
        argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "local", "--site", str(site)]
        argv += ["--entrypoint", shlex.join(STANDIN), "--run-dir", str(run), "--no-check"]
        monkeypatch.setenv("RLGATE_TEST_OTHER", "set")  # only the unset one is named
        code = main([*argv, "--dry-run"] if dry_run else argv)
        out, err = capsys.readouterr()
        assert not run.exists()
        if dry_run:
            assert code == 0, err
            assert "rlgate dry run, nothing submitted" in out and "rlgate.testing.standin" in out
            assert err.count("\n") == 1 and err.startswith("rlgate: warning: ")
            assert "pass_env names ['RLGATE_TEST_TOKEN']" in err and "not set here" in err
            assert "the launch refuses until they are exported" in err
        else:
            assert code == 2, err
            assert out == ""
            assert err.startswith("rlgate: error: the site config's pass_env names ")
            assert "['RLGATE_TEST_TOKEN'], but they are not set here" in err

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


class TestPlanRefusals:
    """Values that would run wrong are refused before anything is written (exit 2)."""

    @pytest.mark.parametrize(
        "name",
        ["a,b", "${oc.env:HOME}", "a b", "a\nb", "a%j", "a:b", "a'b", "a=b", "é"],
        ids=repr,
    )
    def test_run_dir_that_a_consumer_would_interpret_is_refused(
        self, tmp_path: Path, name: str
    ) -> None:
        with pytest.raises(LaunchError, match=r"run directory .* holds") as info:
            plan_local(tmp_path, run_dir=tmp_path / name)
        assert "letters, digits" in str(info.value)
        assert not (tmp_path / name).exists()

    def test_run_dir_that_is_a_file_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "run").write_text("user data")
        with pytest.raises(LaunchError, match="exists and is not a directory"):
            plan_local(tmp_path)
        assert (tmp_path / "run").read_text() == "user data"

    def test_default_run_dir_name_is_made_plain(self, tmp_path: Path) -> None:
        recipe = recipe_named(tmp_path, "r\ntouch x; $(y) #")
        site = SiteConfig(env=swe_env(tmp_path), runs_root=str(tmp_path / "runs"))
        plan = plan_launch(
            recipe, backend=Backend.LOCAL, site=site, overrides=ONE_NODE, entrypoint=STANDIN
        )
        assert plan.run_dir.parent == (tmp_path / "runs").resolve()
        assert plan.run_dir.name.startswith("r_touch_x____y___-")
        assert plan.argv[plan.argv.index("--config") + 1] == str(recipe)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            pytest.param({"steps": 0}, "--steps must be a positive integer, got 0", id="steps_0"),
            pytest.param(
                {"steps_per_run": 0}, "--steps-per-run must be a positive integer", id="per_run_0"
            ),
            pytest.param(
                {"steps_per_run": -3}, "--steps-per-run must be a positive integer", id="per_run_-3"
            ),
            pytest.param({"minutes": -5}, "--minutes must be a positive integer", id="minutes_-5"),
            pytest.param({"minutes": 0}, "--minutes must be a positive integer", id="minutes_0"),
            pytest.param(
                {"steps": 1000, "steps_per_run": 1}, "chain of 1000 jobs", id="chain_too_long"
            ),
        ],
    )
    def test_non_positive_counts_are_refused(
        self, tmp_path: Path, kwargs: dict, message: str
    ) -> None:
        with pytest.raises(LaunchError, match=re.escape(message)):
            plan_local(tmp_path, **kwargs)

    @pytest.mark.parametrize(
        ("option", "value", "message"),
        [
            pytest.param("--minutes", "-5", "must be >= 1, got -5", id="minutes_negative"),
            pytest.param("--minutes", "0", "must be >= 1, got 0", id="minutes_zero"),
            pytest.param("--steps-per-run", "0", "must be >= 1, got 0", id="per_run_zero"),
            pytest.param("--steps-per-run", "-3", "must be >= 1, got -3", id="per_run_negative"),
            pytest.param("--steps", "1.5", "not an integer: '1.5'", id="steps_fraction"),
            pytest.param("--interval", "nan", "must be a finite number > 0", id="interval_nan"),
            pytest.param("--interval", "-1", "must be a finite number > 0", id="interval_neg"),
        ],
    )
    def test_cli_refuses_non_positive_options(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        option: str,
        value: str,
        message: str,
    ) -> None:
        argv = ["launch", str(TARGET), "--backend", "slurm", "--dry-run", "--no-check"]
        with pytest.raises(SystemExit) as info:
            main([*argv, f"{option}={value}"])
        assert info.value.code == 2
        assert f"argument {option}: {message}" in capsys.readouterr().err

    def test_cli_refuses_an_entrypoint_that_is_not_a_word_list(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(yaml.safe_dump({"env": swe_env(tmp_path)}))
        argv = ["launch", str(TARGET), *ONE_NODE, "--backend", "local", "--site", str(site)]
        argv += ["--entrypoint", "python -c 'unclosed", "--dry-run", "--no-check"]
        assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
        assert "--entrypoint" in capsys.readouterr().err


SLURM_OK = {"account": "acct", "partition": "batch", "container": "/c/nemo-rl.sqsh"}
# id: (site config YAML text, what the message must name)
BAD_SITES = {
    "env_key_with_commands": ('env: {"X; touch y; Y": v}', "'X; touch y; Y' is not an environment"),
    "env_key_with_equals": ("env: {A=B: c}", "'A=B' is not an environment variable name"),
    "env_key_with_newline": ('env: {"A\\nB": c}', "'A\\nB' is not an environment"),
    "env_key_digit_first": ("env: {1A: c}", "'1A' is not an environment variable name"),
    "env_sets_command": ("env: {COMMAND: rm}", "'COMMAND' is set by rlgate for ray.sub"),
    "env_sets_bash_env": ("env: {BASH_ENV: /x}", "'BASH_ENV' changes how bash runs"),
    "env_value_nul": ('env: {A: "a\\0b"}', "the value of A holds a NUL byte"),
    "env_value_number": ("env: {A: 1}", "env.A: Input should be a valid string"),
    "env_not_a_mapping": ("env: [A]", "env: Input should be a valid dictionary"),
    "pass_env_with_commands": ('pass_env: ["HF_TOKEN}; touch y; #"]', "is not an environment"),
    "pass_env_in_env_too": ("env: {A: b}\npass_env: [A]", "in both env and pass_env"),
    "account_with_space": ({"account": "a b"}, "slurm.account: 'a b' is not a plain account"),
    "partition_with_semicolon": ({"partition": "p;x"}, "slurm.partition: 'p;x' is not a plain"),
    "container_with_substitution": ({"container": "$(x)"}, "slurm.container: '$(x)'"),
    "container_with_space": ({"container": "/c/a b"}, "is not a plain container"),
    "job_name_with_newline": ({"job_name_prefix": "a\nb"}, "slurm.job_name_prefix"),
    "ray_sub_with_dollar": ({"ray_sub": "$HOME/x"}, "slurm.ray_sub"),
    "mount_with_space": ({"mounts": ["/a b:/a"]}, "entry '/a b:/a' is not an absolute"),
    "mount_relative": ({"mounts": ["a:/a"]}, "entry 'a:/a' is not an absolute"),
    "sbatch_arg_reserved": (
        {"extra_sbatch_args": ["--output=/elsewhere"]},
        "rlgate sets --output itself",
    ),
    "sbatch_arg_chdir": ({"extra_sbatch_args": ["--chdir=/x"]}, "rlgate sets --chdir itself"),
    "sbatch_arg_abbreviated": (  # getopt_long takes --chd for --chdir
        {"extra_sbatch_args": ["--chd=/elsewhere"]},
        "rlgate sets --chdir itself",
    ),
    "sbatch_arg_short": ({"extra_sbatch_args": ["-N4"]}, "'-N4' is not a long sbatch option"),
    "sbatch_arg_newline": ({"extra_sbatch_args": ["--comment=a\nb"]}, "is not a long sbatch"),
    "minutes_negative": ({"max_minutes": -5}, "slurm.max_minutes"),
    "minutes_bool": ({"default_minutes": True}, "slurm.default_minutes"),
    "runs_root_newline": ('runs_root: "a\\nb"', "runs_root: holds a control character"),
    "list_not_mapping": ("- a\n- b", "a site config is a mapping"),
    "ray_address_space": ("ray: {address: a b}", "ray.address: 'a b' is not an address"),
}


def site_text(spec: str | dict) -> str:
    if isinstance(spec, str):
        return spec + "\n"
    return yaml.safe_dump({"slurm": {**SLURM_OK, **spec}})


class TestSiteConfigValidation:
    """Every site value that reaches a script is a POSIX name, quoted, or constrained."""

    @pytest.mark.parametrize(("spec", "message"), BAD_SITES.values(), ids=BAD_SITES.keys())
    def test_bad_site_config_is_exit_2_naming_the_value(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str | dict, message: str
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(site_text(spec))
        argv = ["launch", str(TARGET), "--backend", "local", "--site", str(site)]
        code = main([*argv, "--run-dir", str(tmp_path / "run"), "--dry-run", "--no-check"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert "invalid site config" in err or "is a mapping" in err
        assert message in err
        assert "Traceback" not in err and "errors.pydantic.dev" not in err
        assert not (tmp_path / "run").exists() and not Path("y").exists()

    def test_valid_names_and_hostile_values_are_accepted(self, tmp_path: Path) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(
            yaml.safe_dump(
                {
                    "env": {"_A1": "$(touch y); `x`", "HF_HOME": "/a b/'c'"},
                    "pass_env": ["HF_TOKEN"],
                    "slurm": {
                        **SLURM_OK,
                        "partition": "batch,batch_short",
                        "container": "nvcr.io#nvidia/nemo-rl:v0.4.0",
                        "mounts": ["/lustre/a:/data:ro", "/:/host"],
                        "extra_sbatch_args": ["--exclusive", "--comment=nightly run"],
                    },
                }
            )
        )
        loaded = load_site_config(site)
        assert loaded.env["_A1"] == "$(touch y); `x`" and loaded.slurm.mounts[1] == "/:/host"

    def test_ray_address_option_is_validated(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["launch", str(TARGET), "--backend", "ray", "--ray-address", "http://h:8265 x"]
        assert main([*argv, "--run-dir", str(tmp_path / "run"), "--dry-run", "--no-check"]) == 2
        assert "--ray-address: invalid site config" in capsys.readouterr().err


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

    def test_a_run_that_ends_between_the_stat_and_the_environ_read_has_ended(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The CI race, made certain: the process is killed and reaped after its stat is read.

        The kernel then answers the read of ``/proc/<pid>/environ`` with ESRCH (through a
        directory descriptor held from before, as for a lookup that raced the reaping): the
        run ended, it is not another user's process.
        """
        plan = plan_local(tmp_path, entrypoint=(*STANDIN, "--seconds", "60"))
        manifest = launch(plan)
        pid = manifest.pid
        assert pid is not None
        environ, read_bytes = Path(f"/proc/{pid}/environ"), Path.read_bytes
        raised: list[OSError] = []

        def racing(self: Path) -> bytes:
            if self != environ:
                return read_bytes(self)
            folder = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.killpg(pid, signal.SIGKILL)
                wait_for(lambda: not os.path.exists(f"/proc/{pid}"), step=0.02)  # reaped
                fd = os.open("environ", os.O_RDONLY, dir_fd=folder)
            except OSError as exc:
                raised.append(exc)
                raise
            finally:
                os.close(folder)
            os.close(fd)
            raise AssertionError("the kernel read a reaped process's environment")

        monkeypatch.setattr(Path, "read_bytes", racing)
        state = backend_for(Backend.LOCAL).poll(manifest)
        assert [type(exc) for exc in raised] == [ProcessLookupError]
        assert state.phase is Phase.FAILED and state.exit_status is None
        assert "without recording an exit status" in state.message

    def test_a_run_that_ends_between_its_proof_and_the_signal_had_already_ended(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The same race one step later: the group is gone when SIGTERM is sent (ESRCH)."""
        plan = plan_local(tmp_path, entrypoint=(*STANDIN, "--seconds", "60"))
        manifest = launch(plan)
        pid = manifest.pid
        assert pid is not None
        proven = local.prove_ours

        def then_killed(m: RunManifest) -> bool:
            ours = proven(m)
            os.killpg(pid, signal.SIGKILL)
            wait_for(lambda: not os.path.exists(f"/proc/{pid}"), step=0.02)  # reaped
            return ours

        monkeypatch.setattr(local, "prove_ours", then_killed)
        said = backend_for(Backend.LOCAL).cancel(manifest)
        assert said == f"process {pid} had already ended"

    def test_symlink_put_at_the_run_dir_after_planning_is_not_written_through(
        self, tmp_path: Path
    ) -> None:
        plan = plan_local(tmp_path)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (tmp_path / "run").symlink_to(elsewhere)
        with pytest.raises(LaunchError, match="a symlink was put there"):
            launch(plan)
        assert list(elsewhere.iterdir()) == []

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
