"""``rlgate swe eval`` under attack (issue 21): each test is a finding of an attack, now refused.

One writer per output directory (a run here too), servers stopped when their job is killed,
nothing written through a symlink, the rows Gym runs being the ones planned (``--instance-ids``,
Gym's materialized inputs on a resume), a path reaching Gym literally (no Hydra interpolation),
the images folder Gym opens being the one mounted, a manifest's sizes being integers.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlgate.launch.manifest import MANIFEST_NAME, load_manifest
from rlgate.swe.readers._common import dig
from rlgate.swe.readers.formats.gym import ROLLOUT_ID_PATHS

from . import test_swe_launch
from .helpers.launch_fixtures import wait_for
from .helpers.swe_inputs import write_gym_input
from .test_swe_formats import IDS, assert_one_error, run_cli
from .test_swe_launch import calls_of, gym_argv, watch

SRC = Path(__file__).resolve().parents[2] / "src"

on_path = test_swe_launch.on_path  # the stand-ins for ng_run / ng_collect_rollouts on PATH


def _rlgate(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    env = {**env, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-m", "rlgate.cli", *argv],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_run_here_is_a_writer_a_launch_into_its_output_dir_must_see(
    tmp_path, capsys, on_path, monkeypatch
):
    """``swe eval`` without --launch writes the output dir but leaves no lease and takes no lock."""
    hold = tmp_path / "release"
    env = {**os.environ, "RLGATE_TEST_HOLD": str(hold)}
    here = _rlgate(gym_argv(tmp_path), env, tmp_path)
    launched = False
    try:
        wait_for(
            lambda: (
                any(c["program"] == "ng_collect_rollouts" for c in calls_of(on_path))
                or here.poll() is not None
            )
        )
        assert here.poll() is None, here.communicate()
        second = tmp_path / "runs/second"
        code, _, err = run_cli(
            gym_argv(tmp_path, "--launch", "local", "--run-dir", str(second)), capsys
        )
        launched = code == 0
        assert_one_error(code, err, r"--output-dir .* is being written")
        assert not second.exists()
    finally:
        hold.touch()
        here.communicate(timeout=60)
        if launched:
            wait_for(lambda: (second / "launch/exit_status").is_file())


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_launched_eval_killed_with_its_process_group_leaves_no_server_running(
    tmp_path, capsys, on_path, monkeypatch
):
    """The server leads its own session (``setsid``), so a SIGKILL of the job's group misses it.

    The local run is one process group (its wrapper leads it); killing that group (``kill -9
    -PGID``, the OOM killer's kill of the job's shell, Ray's ``stop_job`` SIGKILL after its
    SIGTERM) leaves ``ng_run`` and every server it spawned running with no one to stop them.
    """
    hold = tmp_path / "release"
    monkeypatch.setenv("RLGATE_TEST_HOLD", str(hold))
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    wait_for(lambda: any(c["program"] == "ng_collect_rollouts" for c in calls_of(on_path)))
    child = int(Path(f"{on_path}.child").read_text())  # a server ng_run spawned
    ng_run = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
    try:
        os.killpg(load_manifest(run_dir).pid, signal.SIGKILL)
        time.sleep(2)
        assert not _alive(child), "the job's server outlived the job's process group"
    finally:
        hold.touch()
        for pid in (ng_run, child):  # what this test started, by id
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("edit", "target"),
    [
        ({"backend": "nemo-skills", "cluster": "c", "seeds": 2.0}, 8),  # range(2.0): exit 70
        ({"seeds": 1.5}, 6),  # 4 x 1.5 = 6: "COMPLETED: last step 8 of 6"
    ],
)
def test_watch_refuses_a_manifest_whose_seeds_are_not_an_integer(
    tmp_path, capsys, on_path, edit, target
):
    """ClusterEval checks ``lo <= seeds <= hi`` only: a float from a hand-edited manifest passes."""
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    doc = json.loads((run_dir / MANIFEST_NAME).read_text())
    edited = {**doc, "target_step": target, "config": {**doc["config"], **edit}}
    (run_dir / MANIFEST_NAME).write_text(json.dumps(edited))
    code, out, err = watch(run_dir, capsys)
    assert_one_error(code, err, r"--seeds must be")
    assert "COMPLETED" not in out


def test_a_launch_whose_gym_input_does_not_exist_is_refused_before_anything_is_written(
    tmp_path, capsys, on_path
):
    """The job would start the server (up to an hour) before the collection finds no rows; and
    the manifest records the rows' sha256 as ``unknown``, so watch never checks them again."""
    run_dir = tmp_path / "runs/r"
    argv = gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir))
    (tmp_path / "in.jsonl").unlink()  # gym_argv writes the rows; this launch has none
    code, _, err = run_cli(argv, capsys)
    try:
        assert_one_error(code, err, r"--gym-input .*in\.jsonl")
        assert not run_dir.exists()
    finally:
        if run_dir.exists():
            wait_for(lambda: (run_dir / "launch/exit_status").is_file())


def test_the_launch_lock_is_never_opened_through_a_symlink(tmp_path, on_path):
    """``_launch_lock`` opens ``.rlgate_launch.lock`` with ``open("a")``: a dangling symlink
    there makes rlgate create a file where it points, outside the output dir."""
    out = tmp_path / "out"
    out.mkdir()
    outside = tmp_path / "elsewhere/created-by-rlgate"
    outside.parent.mkdir()
    (out / ".rlgate_launch.lock").symlink_to(outside)
    run_dir = tmp_path / "runs/r"
    proc = _rlgate(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                   dict(os.environ), tmp_path)  # fmt: skip
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("the launch hung opening the output dir's lock") from None
    finally:
        if (run_dir / "launch/local_wrapper.sh").is_file():
            wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    assert "Traceback" not in err, err
    assert not outside.exists(), "rlgate created a file outside the output dir"


def test_gym_instance_ids_restrict_what_the_job_runs_not_only_what_rlgate_counts(
    tmp_path, capsys, on_path
):
    """``--instance-ids`` shapes the plan (total, cost, the launched job's time limit) but not
    the commands: ``ng_collect_rollouts`` runs every row of ``--gym-input``."""
    argv = gym_argv(tmp_path, "--instance-ids", IDS[0], "--launch", "local", "--dry-run")
    code, out, err = run_cli(argv, capsys)
    if code == 2:  # refusing a subset Gym cannot run is a fix too
        assert_one_error(code, err, r"--instance-ids")
        return
    assert code == 0, err
    assert "1 instances x 2 seed(s) = 2 rollouts" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("ng_collect_rollouts "))
    (word,) = [w for w in shlex.split(line) if w.startswith("+input_jsonl_fpath=")]
    given = word.split("=", 1)[1].strip("'")
    ran = {
        next(v for p in ROLLOUT_ID_PATHS if isinstance(v := dig(json.loads(line), p), str))
        for line in Path(given).read_text().splitlines()
    }
    assert ran <= {IDS[0]}, f"the job runs {sorted(ran)}, the plan counts and sizes [{IDS[0]!r}]"


def test_a_relaunch_with_other_seeds_than_gym_materialized_is_refused(tmp_path, capsys, on_path):
    """Gym resumes from its materialized inputs, not from the command line (nemo-gym 0.7.0
    ``rollout_collection.py``: ``_load_from_cache`` reads ``materialized_jsonl_fpath`` when
    ``resume_from_cache`` and both files exist). An output dir materialized for 1 seed and
    relaunched with ``--seeds 2`` runs 4 rollouts while rlgate plans, sizes and waits for 8."""
    out = tmp_path / "out"
    out.mkdir()
    materialized = [
        {"responses_create_params": {"metadata": {"instance_id": iid}},
         "_ng_task_index": k, "_ng_rollout_index": 0}
        for k, iid in enumerate(IDS)
    ]  # fmt: skip
    (out / "rollouts_materialized_inputs.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in materialized)
    )
    first = (tmp_path / "made.jsonl").read_text().splitlines()[0]  # seed 0 of IDS[0], graded
    (out / "rollouts.jsonl").write_text(first + "\n")
    code, out_text, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--dry-run"), capsys)
    assert "7 to run" not in out_text or code == 2, "planned 7 of 8; Gym would run 3 of 4"
    assert_one_error(code, err, r"materialized")


def test_a_path_reaches_gym_as_the_literal_path_not_a_hydra_interpolation(
    tmp_path, capsys, on_path, monkeypatch
):
    """``hydra_string`` quotes a value for Hydra but leaves ``${...}``, which Hydra and OmegaConf
    resolve inside quoted strings: Gym writes the rollouts to another directory than the
    ``--output-dir`` rlgate checked, leased and reads (and reads other rows than it hashed)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    odd = tmp_path / "${oc.env:RLGATE_A21}"
    odd.mkdir()
    argv = gym_argv(tmp_path, "--dry-run")
    argv[argv.index("--output-dir") + 1] = str(odd / "out")
    monkeypatch.setenv("RLGATE_A21", "elsewhere")
    code, out, err = run_cli(argv, capsys)
    if code == 2:  # refusing such a path is a fix too
        assert_one_error(code, err, r"--output-dir")
        return
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.strip().startswith("ng_collect_rollouts "))
    (word,) = [w for w in shlex.split(line) if w.startswith("+output_jsonl_fpath=")]
    value = OverridesParser.create().parse_override(word).value()
    gym_sees = OmegaConf.create({"output_jsonl_fpath": value}).output_jsonl_fpath
    assert gym_sees == str(odd / "out/rollouts.jsonl"), f"Gym writes {gym_sees}"


@pytest.mark.parametrize("where", ["symlinked", "relative"])
def test_the_images_folder_gym_opens_is_the_one_the_container_mounts(tmp_path, monkeypatch, where):
    """``_job_dirs`` mounts the images folder as the host resolves it, but ng_run gets the
    ``--container-formatter`` as given: through a symlink (or relative to the job's cwd, the
    NeMo RL checkout) the .sif path Gym opens in the container is under no mount."""
    from rlgate.launch.manifest import Backend
    from rlgate.launch.site import SiteConfig
    from rlgate.launch.swe_eval import plan_swe_launch
    from rlgate.swe.backends import Backend as SweBackend
    from rlgate.swe.backends import ClusterEval, plan_eval

    work, store = tmp_path / "work", tmp_path / "store/sif"
    work.mkdir()
    store.mkdir(parents=True)
    write_gym_input(work / "in.jsonl", IDS)
    (tmp_path / "images").symlink_to(store)
    monkeypatch.chdir(tmp_path)
    formatter = {
        "symlinked": f"{tmp_path}/images/{{instance_id}}.sif",
        "relative": "store/sif/{instance_id}.sif",
    }[where]
    plan = plan_eval(
        ClusterEval(backend=SweBackend.GYM, model="base", output_dir=work / "out",
                    instance_ids=IDS, server_url="http://127.0.0.1:8000/v1",
                    gym_input=work / "in.jsonl", container_formatter=formatter)
    )  # fmt: skip
    job = plan_swe_launch(
        plan,
        backend=Backend.SLURM,
        site=SiteConfig(),
        run_dir=tmp_path / "runs/r",
        nemo_rl_dir=str(tmp_path / "nemo-rl"),
    )
    (word,) = [w for w in plan.commands[0].argv if ".container_formatter=" in w]
    opened = Path(word.split("=", 1)[1].strip("'")).parent
    assert opened.is_absolute() and any(m == opened or m in opened.parents for m in job.mounts), (
        f"Gym opens {opened}; the container mounts {[str(m) for m in job.mounts]}"
    )


@pytest.mark.parametrize("launch", [[], ["--launch", "local"]])
def test_the_server_log_is_never_written_through_a_symlink_in_the_output_dir(
    tmp_path, capsys, on_path, launch
):
    """``_run_plan`` opens ``<out>/ng_run.log`` with ``open("wb")`` and the job script
    redirects ``> <out>/ng_run.log``: a symlink there truncates the file it points to."""
    out = tmp_path / "out"
    out.mkdir()
    precious = tmp_path / "notes.txt"
    precious.write_text("the user's notes\n")
    (out / "ng_run.log").symlink_to(precious)
    run_dir = tmp_path / "runs/r"
    extra = [*launch, "--run-dir", str(run_dir)] if launch else []
    code, _, err = run_cli(gym_argv(tmp_path, *extra), capsys)
    if launch and code == 0:
        wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    assert "Traceback" not in err, err
    assert precious.read_text() == "the user's notes\n", (
        "a file outside the output dir was overwritten"
    )
