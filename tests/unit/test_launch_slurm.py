"""The Slurm backend: the generated ray.sub submission, field by field, and ``bash -n``.

There is no Slurm here. The proof is the generated script itself (every sbatch flag and every
variable ray.sub reads) plus the dry-run GPU-hours. One test runs the script against a stand-in
``sbatch`` on PATH: that proves only the argument and environment wiring (and that COMMAND
survives the trip into ray.sub's ``driver_command.sh``), not anything about a cluster.
"""

from __future__ import annotations

import getpass
import json
import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from rlgate.cli.app import main
from rlgate.core.errors import ExitCode, LaunchError
from rlgate.launch.manifest import Backend, load_manifest
from rlgate.launch.plan import backend_for, launch, plan_launch
from rlgate.launch.site import SiteConfig, load_site_config
from rlgate.launch.slurm import (
    SlurmJob,
    format_time_limit,
    parse_job_ids,
    parse_sacct,
    parse_squeue,
    render_sbatch_script,
)

from .helpers import slurm_standin
from .helpers.launch_fixtures import STANDIN, TARGET, nemo_rl_checkout, slurm_site


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    return nemo_rl_checkout(tmp_path)[0]


def plan_slurm(tmp_path: Path, checkout: Path, **kwargs):
    site = kwargs.pop("site", None) or slurm_site(tmp_path)
    return plan_launch(
        TARGET,
        backend=Backend.SLURM,
        site=site,
        nemo_rl_dir=checkout,
        run_dir=tmp_path / "runs" / "nightly-thinking",
        **kwargs,
    )


def sbatch_flags(script: str) -> list[str]:
    """The sbatch arguments of the generated script, shell-parsed."""
    start = script.index("  sbatch ")
    end = script.index("\ndone", start)
    return shlex.split(script[start:end].replace("\\\n", " "))[1:]


def exports(script: str) -> dict[str, str]:
    """``export NAME=value`` lines, shell-parsed."""
    found = {}
    for line in script.splitlines():
        if line.startswith("export ") and "=" in line:
            name, value = line[len("export ") :].split("=", 1)
            found[name] = shlex.split(value)[0] if value else ""
    return found


class TestSbatchScript:
    def test_script_requests_the_recipes_allocation(self, tmp_path: Path, checkout: Path) -> None:
        plan = plan_slurm(tmp_path, checkout)
        flags = sbatch_flags(render_sbatch_script(plan))
        assert flags == [
            "--parsable",
            "--nodes=4",  # cluster.num_nodes of the recipe
            "--gres=gpu:8",  # cluster.gpus_per_node
            "--time=4:00:00",  # the site's default_minutes (240)
            "--account=acct_llm",
            "--partition=batch_block1",
            "--job-name=acct_llm:nightly-thinking",
            "--dependency=singleton",
            f"--chdir={plan.run_dir}",  # Slurm's WorkDir: what proves the job is this run's
            f"--output={plan.run_dir}/slurm/slurm-%j.out",
            "ray.sub",
        ]

    def test_script_sets_every_variable_ray_sub_reads(self, tmp_path: Path, checkout: Path) -> None:
        plan = plan_slurm(tmp_path, checkout)
        script = render_sbatch_script(plan)
        env = exports(script)
        assert env["CONTAINER"] == "/lustre/containers/nemo-rl.sqsh"
        mounts = env["MOUNTS"].split(",")
        assert mounts[0] == "/lustre/fsw:/lustre/fsw"  # the site's, first
        assert f"{plan.run_dir}:{plan.run_dir}" in mounts  # logs and checkpoints
        assert f"{TARGET.parent}:{TARGET.parent}" in mounts  # the recipe and its defaults
        assert f"{checkout}:{checkout}" in mounts  # ray.sub's container workdir
        assert env["GPUS_PER_NODE"] == "8"
        assert env["BASE_LOG_DIR"] == f"{plan.run_dir}/slurm"
        assert env["COMMAND"] == plan.command
        assert env["COMMAND"].startswith(f"cd {checkout} && uv run examples/nemo_gym/")
        assert env["RLGATE_SWE_DATA"] == str(tmp_path / "swe_data")
        assert f"\ncd {checkout}\n" in script  # sbatch from the checkout: SLURM_SUBMIT_DIR

    def test_script_is_valid_bash(self, tmp_path: Path, checkout: Path) -> None:
        site = slurm_site(tmp_path, extra_sbatch_args=["--exclusive", "--comment=rlgate nightly"])
        script = tmp_path / "sbatch.sh"
        script.write_text(render_sbatch_script(plan_slurm(tmp_path, checkout, site=site)))
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        assert "--comment=rlgate nightly" in sbatch_flags(script.read_text())

    def test_site_mount_that_covers_a_path_is_not_repeated(
        self, tmp_path: Path, checkout: Path
    ) -> None:
        site = slurm_site(tmp_path, mounts=[f"{tmp_path}:{tmp_path}"])
        env = exports(render_sbatch_script(plan_slurm(tmp_path, checkout, site=site)))
        assert env["MOUNTS"] == f"{tmp_path}:{tmp_path},{TARGET.parent}:{TARGET.parent}"

    def test_long_run_is_a_chain_of_singleton_jobs(self, tmp_path: Path, checkout: Path) -> None:
        plan = plan_slurm(tmp_path, checkout, steps=20, steps_per_run=8, minutes=180)
        script = render_sbatch_script(plan)
        assert plan.runs == 3 and "for _ in $(seq 1 3); do" in script
        assert "--time=3:00:00" in sbatch_flags(script)
        assert plan.gpu_hours == 3 * 4 * 8 * 180 / 60

    def test_pass_env_is_checked_not_written(
        self, tmp_path: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
        site = slurm_site(tmp_path).model_copy(update={"pass_env": ["HF_TOKEN"]})
        script = render_sbatch_script(plan_slurm(tmp_path, checkout, site=site))
        assert "hf_secret_value" not in script
        assert ': "${HF_TOKEN:?HF_TOKEN (site pass_env) must be set}"; export HF_TOKEN' in script

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            pytest.param({"minutes": 300}, "exceeds the partition limit of 240", id="too_long"),
            pytest.param(
                {"site": slurm_site(Path("/x"), default_minutes=None)}, "--minutes", id="no_time"
            ),
        ],
    )
    def test_script_refuses_jobs_the_partition_cannot_run(
        self, tmp_path: Path, checkout: Path, kwargs: dict, message: str
    ) -> None:
        with pytest.raises(LaunchError, match=message):
            render_sbatch_script(plan_slurm(tmp_path, checkout, **kwargs))

    def test_slurm_needs_a_site_config(self, tmp_path: Path, checkout: Path) -> None:
        site = slurm_site(tmp_path).model_copy(update={"slurm": None})
        with pytest.raises(LaunchError, match="slurm: block"):
            render_sbatch_script(plan_slurm(tmp_path, checkout, site=site))

    def test_site_mounts_must_be_absolute_pairs(self, tmp_path: Path) -> None:
        # checked when the site config is loaded (before: when the script was rendered)
        site = slurm_site(tmp_path).model_dump(mode="json")
        site["slurm"]["mounts"] = ["/a:/a,/b:/b"]
        path = tmp_path / "site.yaml"
        path.write_text(yaml.safe_dump(site))
        with pytest.raises(LaunchError, match="not an absolute SRC:DST"):
            load_site_config(path)

    @pytest.mark.parametrize(
        ("minutes", "limit"),
        [
            pytest.param(240, "4:00:00", id="hours"),
            pytest.param(90, "1:30:00", id="mixed"),
            pytest.param(45, "0:45:00", id="minutes"),
        ],
    )
    def test_time_limit_format(self, minutes: int, limit: str) -> None:
        assert format_time_limit(minutes) == limit


class TestDryRun:
    def test_dry_run_prints_the_script_and_gpu_hours_and_submits_nothing(
        self, tmp_path: Path, checkout: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        site = tmp_path / "site.yaml"
        site.write_text(slurm_site(tmp_path).model_dump_json())
        run = tmp_path / "runs" / "dry"
        argv = ["launch", str(TARGET), "--backend", "slurm", "--site", str(site)]
        argv += ["--nemo-rl-dir", str(checkout), "--run-dir", str(run), "--dry-run", "--no-check"]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out.startswith("#!/usr/bin/env bash\n") and "sbatch --parsable" in out
        assert out.rstrip().endswith("1 run(s) x 4 nodes x 8 GPUs, GPU-hours 128")
        assert not run.exists()
        script = tmp_path / "printed.sh"
        script.write_text(out)
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0


class TestSubmissionWiring:
    def test_submission_passes_command_through_to_ray_sub(
        self, tmp_path: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Wiring only: a stand-in ``sbatch`` records its argv and environment.

        Then COMMAND is run the way ray.sub runs it (``printf '%s' "$COMMAND" >
        driver_command.sh; bash driver_command.sh``) with rlgate's stand-in trainer, which
        must find its config and write the run where the manifest says.
        """
        record = tmp_path / "sbatch_record"
        fake_bin = tmp_path / "bin"
        fake_bin.mkdir()
        sbatch = fake_bin / "sbatch"
        sbatch.write_text(
            "#!/usr/bin/env bash\n"
            f'printf "%s\\n" "$@" > {record}.argv\n'
            f'printf "%s" "$COMMAND" > {record}.command\n'
            f'printf "%s|%s|%s" "$CONTAINER" "$BASE_LOG_DIR" "$PWD" > {record}.env\n'
            'echo "4242;cluster0"\n'
        )
        sbatch.chmod(sbatch.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
        plan = plan_slurm(tmp_path, checkout, steps=2, entrypoint=STANDIN)
        manifest = launch(plan)
        assert manifest.job_ids == ["4242"]
        assert load_manifest(plan.run_dir).slurm_log_root == str(plan.run_dir / "slurm")
        assert Path(f"{record}.argv").read_text().splitlines()[-1] == "ray.sub"
        container, log_root, cwd = Path(f"{record}.env").read_text().split("|")
        assert (container, log_root, cwd) == (
            "/lustre/containers/nemo-rl.sqsh",
            str(plan.run_dir / "slurm"),
            str(checkout),
        )
        driver = tmp_path / "driver_command.sh"
        driver.write_text(Path(f"{record}.command").read_text())
        env = {**os.environ, **plan.env}
        ran = subprocess.run(["bash", str(driver)], capture_output=True, text=True, env=env)
        assert ran.returncode == 0, ran.stderr
        assert list((plan.log_dir / "exp_001" / "tensorboard").glob("events.out.tfevents.*"))

    def test_cancel_scancels_every_job_of_the_chain(
        self, tmp_path: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A stalled chain is cancelled whole (the later jobs depend on the stalled one)."""
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        manifest = launch(plan_slurm(tmp_path, checkout, steps=4, steps_per_run=2))
        assert len(manifest.job_ids) == 2
        backend = backend_for(Backend.SLURM, SiteConfig())
        assert backend.cancel(manifest) == f"scancel -- {' '.join(manifest.job_ids)}"
        assert slurm.argv("scancel") == ["--", *manifest.job_ids]
        assert all(slurm.jobs()[i]["state"].startswith("CANCELLED") for i in manifest.job_ids)


class TestSlurmOutputParsers:
    def test_job_ids_from_sbatch_parsable(self) -> None:
        assert parse_job_ids("1234\n1235;cluster0\nsbatch: warning\n") == ["1234", "1235"]

    def test_squeue_states_names_and_work_dirs(self) -> None:
        parsed = parse_squeue("1234|RUNNING|acct:r|/runs/r\n1235|PENDING|a|b|/x\n")
        assert parsed == {
            "1234": SlurmJob("RUNNING", "acct:r|/runs/r"),
            "1235": SlurmJob("PENDING", "a|b|/x"),  # a '|' in a foreign name stays in it
        }

    def test_sacct_states_exit_codes_and_cancel_reasons(self) -> None:
        text = (
            "1234|COMPLETED|0:0|2026-01-01T00:00:00|2026-01-01T03:10:00|acct:r|/runs/r\n"
            "1235|CANCELLED by 5001|0:15|2026-01-01T03:11:00|2026-01-01T03:12:00|n|/w\n"
            "1236|TIMEOUT|0:0|2026-01-01T00:00:00|2026-01-01T04:00:00|n|/w\n"
            "1237|OUT_OF_MEMORY|137:0|Unknown|Unknown|n|/w\n"
        )
        parsed = parse_sacct(text)
        assert (parsed["1234"].state, parsed["1234"].exit_status) == ("COMPLETED", 0)
        assert parsed["1234"].owner == "acct:r|/runs/r"
        assert (parsed["1235"].state, parsed["1235"].exit_status) == ("CANCELLED", 0)
        assert parsed["1236"].state == "TIMEOUT"
        assert (parsed["1237"].state, parsed["1237"].exit_status) == ("OUT_OF_MEMORY", 137)


class TestJobIdsAreSlurmsOwn:
    """A manifest's job ids reach scancel/squeue/sacct: only Slurm's numeric forms, after ``--``."""

    def _launched(self, tmp_path: Path, checkout: Path, job_ids: list[str]) -> Path:
        plan = plan_slurm(tmp_path, checkout, steps=2)
        launch(plan)
        return _with_job_ids(plan.run_dir, job_ids)

    def _watch_and_cancel(self, run: Path) -> int:
        argv = ["watch", str(run), "--interval", "0.1", "--stall-minutes", "0.002"]
        return main([*argv, "--cancel-stalled"])

    @pytest.mark.parametrize(
        ("job_ids", "bad"),
        [
            pytest.param(["4242", "--me"], "job_ids[1]", id="scancel_me"),
            pytest.param(["-u", "alice"], "job_ids[0]", id="option_then_value"),
            pytest.param(["4242", "4243,4244"], "job_ids[1]", id="comma_list"),
            pytest.param(["4242.0"], "job_ids[0]", id="step_id"),
            pytest.param(["rlgate-run"], "job_ids[0]", id="not_numeric"),
            pytest.param(["0"], "job_ids[0]", id="zero"),
        ],
    )
    def test_a_job_id_slurm_would_not_give_is_refused_before_any_command(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        job_ids: list[str],
        bad: str,
    ) -> None:
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        run = self._launched(tmp_path, checkout, job_ids)
        assert self._watch_and_cancel(run) == 2
        err = capsys.readouterr().err
        assert "invalid run manifest" in err and bad in err and "Slurm job id" in err, err
        assert (slurm.argv("squeue"), slurm.argv("sacct"), slurm.argv("scancel")) == (None,) * 3

    def test_array_and_het_job_ids_go_after_a_double_dash(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        ids = ["4300", "4301_7", "4302+1"]
        run = self._launched(tmp_path, checkout, ids)
        for job_id in ids:  # jobs Slurm knows as this run's (its name and work directory)
            slurm.add(job_id, name="acct_llm:nightly-thinking", work_dir=str(run))
        assert self._watch_and_cancel(run) == 3  # stalled and cancelled
        assert "cancelled: scancel -- 4300 4301_7 4302+1" in capsys.readouterr().out
        assert slurm.argv("scancel") == ["--", *ids]
        assert slurm.argv("squeue") == [
            "--noheader",
            "--format=%i|%T|%j|%Z",
            "--jobs=4300,4301_7,4302+1",
        ]


def _with_job_ids(run: Path, job_ids: list[str]) -> Path:
    """``run``'s manifest edited to name ``job_ids`` (a hand-made or copied manifest)."""
    path = run / "rlgate_manifest.json"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "job_ids": job_ids}))
    return run


class TestOnlyTheRunsOwnJobs:
    """A job id in a manifest proves nothing: Slurm must say the job is this run's.

    rlgate submits with ``--chdir=<run dir>`` and ``--job-name=<prefix>:<run>``; squeue
    (``%j``, ``%Z``) and sacct (``JobName``, ``WorkDir``) must give both back before a job's
    state is trusted or the job cancelled.
    """

    def _watch(self, run: Path, *extra: str) -> int:
        argv = ["watch", str(run), "--interval", "0.1", "--stall-minutes", "0.002"]
        return main([*argv, "--timeout-minutes", "0.2", *extra])  # a pending job: bounded

    def test_another_runs_job_ids_copied_into_a_manifest_are_refused_and_not_cancelled(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        run_a = launch(plan_slurm(tmp_path / "a", checkout, steps=2))
        run_b = launch(plan_slurm(tmp_path / "b", checkout, steps=2))
        _with_job_ids(Path(run_b.run_dir), run_a.job_ids)
        assert self._watch(Path(run_b.run_dir), "--cancel-stalled") == ExitCode.USAGE
        err = capsys.readouterr().err
        assert err.count("rlgate: error:") == 1 and "nothing was cancelled" in err, err
        assert (
            f"Slurm job {run_a.job_ids[0]} was not submitted by rlgate for {run_b.run_dir}" in err
        )
        assert f"acct_llm:nightly-thinking|{run_a.run_dir}" in err
        assert slurm.argv("scancel") is None
        assert slurm.jobs()[run_a.job_ids[0]]["state"] == "RUNNING"  # run A's job untouched

    @pytest.mark.parametrize(
        ("job", "tool"),
        [
            pytest.param({"state": "RUNNING"}, "squeue", id="another_users_running_job"),
            pytest.param(
                {"state": "PENDING", "user": getpass.getuser()},
                "squeue",
                id="own_job_submitted_by_hand",
            ),
            pytest.param({"state": "COMPLETED"}, "sacct", id="finished_job_in_accounting"),
            pytest.param({"state": "FAILED", "exit_code": "1:0"}, "sacct", id="failed_job"),
        ],
    )
    def test_a_hand_written_manifest_naming_a_foreign_job_is_refused(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        job: dict[str, str],
        tool: str,
    ) -> None:
        """``backend: slurm, job_ids: ["4242"]``: neither cancelled nor its state believed."""
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        slurm.add("4242", name="train-7b", work_dir="/home/other/exp", **job)
        plan = plan_slurm(tmp_path, checkout, steps=2)
        launch(plan)
        run = _with_job_ids(plan.run_dir, ["4242"])
        assert self._watch(run, "--cancel-stalled") == ExitCode.USAGE
        err = capsys.readouterr().err
        assert "Slurm job 4242 was not submitted by rlgate" in err, err
        assert "'train-7b|/home/other/exp'" in err and "nothing was cancelled" in err
        assert slurm.argv(tool) is not None and slurm.argv("scancel") is None
        assert slurm.jobs()["4242"]["state"] == job["state"]
        assert load_manifest(run).status.value == "submitted"  # nothing recorded from it

    def test_the_runs_own_chain_is_followed_and_only_its_live_jobs_cancelled(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        manifest = launch(plan_slurm(tmp_path, checkout, steps=6, steps_per_run=2))
        first, *rest = manifest.job_ids
        assert len(rest) == 2
        jobs = slurm.jobs()
        assert {jobs[i]["work_dir"] for i in manifest.job_ids} == {manifest.run_dir}
        slurm.set_state(first, "COMPLETED")  # the first job of the chain has ended
        assert self._watch(Path(manifest.run_dir), "--cancel-stalled") == ExitCode.INFRA
        assert f"cancelled: scancel -- {' '.join(rest)}" in capsys.readouterr().out
        assert slurm.argv("scancel") == ["--", *rest]
        assert all(slurm.jobs()[i]["state"].startswith("CANCELLED") for i in rest)

    def test_the_runs_finished_job_is_judged_from_accounting(
        self,
        tmp_path: Path,
        checkout: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        slurm = slurm_standin.install(tmp_path, monkeypatch)
        manifest = launch(plan_slurm(tmp_path, checkout, steps=2))
        slurm.set_state(manifest.job_ids[0], "FAILED", "3:0")
        assert self._watch(Path(manifest.run_dir)) == ExitCode.FAIL  # died, no step logged
        saved = load_manifest(manifest.run_dir)
        assert saved.status.value == "failed" and saved.exit_status == 3
        assert slurm.argv("sacct") == [
            "--noheader",
            "--parsable2",
            "--allocations",
            "--format=JobIDRaw,State,ExitCode,Start,End,JobName,WorkDir",
            f"--jobs={manifest.job_ids[0]}",
        ]
