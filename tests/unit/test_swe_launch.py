"""``rlgate swe eval --backend gym --launch slurm|ray|local``: the plan as one launched job.

The job's script and the launcher's submission (sbatch script, Ray request, local wrapper) are
checked as text (every command's words shlex round-trip to the plan's argv) and by running
them: the local launch end to end with stand-ins for ``ng_run`` / ``ng_collect_rollouts``
(the real ones need Apptainer, the .sif images and a GPU vLLM server), followed by ``rlgate
watch`` and ``swe compare``; the Slurm submission executed with a stand-in ``sbatch`` that
runs ray.sub's COMMAND, with a site YAML whose values carry shell code. What cannot run
here: a real Slurm cluster and ray.sub, a Ray cluster, Apptainer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rlgate.core.errors import LaunchError
from rlgate.launch.manifest import MANIFEST_NAME, Backend, RunKind, load_manifest
from rlgate.launch.site import SiteConfig
from rlgate.launch.swe_eval import JOB_SCRIPT, job_script, plan_swe_launch
from rlgate.swe.backends import Backend as SweBackend
from rlgate.swe.backends import ClusterEval, plan_eval

from .helpers import swe_formats as sf
from .helpers import swe_inputs as si
from .helpers.launch_fixtures import nemo_rl_checkout, wait_for
from .test_launch_shell import HOSTILE_VALUE, MARKER, fake_slurm, markers
from .test_swe_formats import FOUR, IDS, assert_one_error, run_cli

SIF = "/sif/swebench_sweb.eval.x86_64.{instance_id}.sif"

# The stand-ins take Gym's command lines. The server records its argv and the site's test
# value, says it is ready (or exits first), and records that it was stopped; the collection
# records how many rollouts the output already held, then writes the missing ones (Gym's
# +resume_from_cache=true), or only the first RLGATE_TEST_DIE_AT of them and dies once.
SERVER = """#!{python}
import json, os, pathlib, signal, subprocess, sys, time
calls = pathlib.Path({calls!r})
CHILD = ("import os, signal, time\\n"
         "if os.environ.get('RLGATE_TEST_STUBBORN'):\\n"
         "    signal.signal(signal.SIGINT, signal.SIG_IGN)\\n"
         "while True: time.sleep(1)")
def say(doc):
    with calls.open("a") as fh:
        fh.write(json.dumps(doc) + "\\n")
say({{"program": "ng_run", "argv": sys.argv[1:], "value": os.environ.get("RLGATE_TEST_VALUE")}})
# nemo-gym 0.7.0's RunHelper: the servers are ng_run's children, in its process group; SIGINT
# (KeyboardInterrupt) shuts them down (SIGINT each, kill after 1 s); SIGTERM has no handler.
# RLGATE_TEST_STUBBORN: a server that ignores SIGINT and an ng_run that leaves it behind
stubborn = bool(os.environ.get("RLGATE_TEST_STUBBORN"))
child = subprocess.Popen([sys.executable, "-c", CHILD])
pathlib.Path({calls!r} + ".child").write_text(str(child.pid))
try:
    print("0 / 3 servers ready.", flush=True)
    time.sleep(0.3)
    if os.environ.get("RLGATE_TEST_SERVER_FAILS"):
        child.kill()
        sys.exit(1)
    print("All 3 / 3 servers ready! Polling every 60s", flush=True)
    while True:
        time.sleep(1)
except KeyboardInterrupt:
    if stubborn:
        sys.exit(0)
    child.send_signal(signal.SIGINT)
    try:
        child.wait(timeout=1)
    except subprocess.TimeoutExpired:
        child.kill()
    say({{"program": "ng_run stopped"}})
"""
COLLECT = """#!{python}
import json, os, pathlib, sys, time
args = dict(a.lstrip("+").split("=", 1) for a in sys.argv[1:])
out = pathlib.Path(args["output_jsonl_fpath"].strip("'"))
had = out.read_text().splitlines() if out.is_file() else []
with pathlib.Path({calls!r}).open("a") as fh:
    fh.write(json.dumps({{"program": "ng_collect_rollouts", "had": len(had)}}) + "\\n")
rows = pathlib.Path({rollouts!r}).read_text().splitlines()
hold = os.environ.get("RLGATE_TEST_HOLD")  # a file: the collection runs until it exists
while hold and not pathlib.Path(hold).exists():
    time.sleep(0.1)
die = pathlib.Path({calls!r} + ".died")
stop = int(os.environ.get("RLGATE_TEST_DIE_AT", "0"))
if stop and not die.exists():
    die.touch()
    out.write_text("".join(r + "\\n" for r in rows[:stop]))
    sys.exit(1)
out.write_text("".join(r + "\\n" for r in had + rows[len(had):]))
"""


def standins(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, calls = tmp_path / "gymbin", tmp_path / "calls.jsonl"
    bin_dir.mkdir()
    made = sf.write_gym_rollouts(tmp_path / "made.jsonl", [FOUR, FOUR])  # 4 instances x 2
    for name, text in (("ng_run", SERVER), ("ng_collect_rollouts", COLLECT)):
        path = bin_dir / name
        path.write_text(text.format(python=sys.executable, calls=str(calls), rollouts=str(made)))
        path.chmod(0o755)
    return bin_dir, calls


def server_child_alive(calls: Path) -> bool:
    """Whether the server the ``ng_run`` stand-in spawned still runs (a zombie does not)."""
    pid = int(Path(f"{calls}.child").read_text())
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def calls_of(calls: Path) -> list[dict]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.is_file() else []


def gym_argv(tmp_path: Path, *extra: str, formatter: str = SIF) -> list[str]:
    dataset = tmp_path / "four.jsonl"
    if not dataset.is_file():
        si.write_subset_dataset(dataset, IDS)
    if not (tmp_path / "in.jsonl").exists():
        si.write_gym_input(tmp_path / "in.jsonl", IDS)
    return ["swe", "eval", "--backend", "gym", "--model", "base", "--seeds", "2",
            "--server-url", "http://127.0.0.1:8000/v1", "--gym-input", str(tmp_path / "in.jsonl"),
            "--container-formatter", formatter, "--output-dir", str(tmp_path / "out"),
            "--dataset", str(dataset), *extra]  # fmt: skip


def watch(run_dir: Path, capsys) -> tuple[int, str, str]:
    return run_cli(["watch", str(run_dir), "--interval", "0.1", "--timeout-minutes", "2"], capsys)


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    bin_dir, calls = standins(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    return calls


def block(script: str, program: str) -> list[str]:
    """The words of ``program``'s command in a generated script (continued lines joined)."""
    lines = [line.removeprefix("own_group ") for line in script.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{program} "))
    end = start
    while lines[end].endswith("\\"):  # bash's line continuation (no value holds a backslash)
        end += 1
    return shlex.split(" ".join(line.removesuffix("\\") for line in lines[start : end + 1]))


# --- the local launch, end to end ----------------------------------------------------------------


def test_a_local_launch_runs_the_plan_and_watch_and_compare_read_it(tmp_path, capsys, on_path):
    run_dir = tmp_path / "runs" / "base-1"
    code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                             capsys)  # fmt: skip
    assert code == 0, err
    assert "launched base-1 on local: job(s) " in out and f"rlgate watch {run_dir}" in out
    manifest = load_manifest(run_dir)
    assert (manifest.kind, manifest.backend, manifest.target_step) == (
        RunKind.SWE_EVAL, Backend.LOCAL, 8)  # fmt: skip
    assert sorted(manifest.config["instance_ids"]) == sorted(IDS)
    code, out, err = watch(run_dir, capsys)
    assert code == 0, err + (run_dir / "driver.log").read_text()
    assert "base-1: COMPLETED: completed: last step 8 of 8 (graded rollouts)" in out
    assert load_manifest(run_dir).status.value == "completed"
    # the plan's semantics: server, its ready line, collection, then the server stopped
    assert [c["program"] for c in calls_of(on_path)] == [
        "ng_run", "ng_collect_rollouts", "ng_run stopped"]  # fmt: skip
    assert not server_child_alive(on_path)  # ng_run stopped the server it spawned
    assert "All 3 / 3 servers ready!" in (tmp_path / "out/ng_run.log").read_text()
    results = tmp_path / "out/rollouts.jsonl"
    argv = ["swe", "compare", "--before", str(results), "--after", str(results),
            "--resamples", "100", "--dataset", str(tmp_path / "four.jsonl"),
            "--json", str(tmp_path / "c.json")]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    doc = json.loads((tmp_path / "c.json").read_text())
    assert [r["format"] for r in doc["before"]["runs"]] == ["gym_rollouts"] * 2
    assert code == 3 and doc["verdict"] == "inconclusive"  # 1 of 4 instances is infra
    # launching again: everything is graded, nothing is submitted
    code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local"), capsys)
    assert code == 0 and "nothing to launch: every rollout is graded" in out, err
    assert len(calls_of(on_path)) == 3


def test_a_relaunch_after_the_job_died_runs_only_the_remaining_rollouts(
    tmp_path, capsys, on_path, monkeypatch
):
    monkeypatch.setenv("RLGATE_TEST_DIE_AT", "3")
    first, second = tmp_path / "runs/first", tmp_path / "runs/second"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(first)), capsys)
    assert code == 0, err
    code, out, err = watch(first, capsys)
    assert code == 1, out + err
    assert "first: FAILED: run died: driver exited with status 1; last step 3 of 8" in out
    assert "ng_collect_rollouts failed; relaunch to resume" in (first / "driver.log").read_text()
    assert calls_of(on_path)[-1] == {"program": "ng_run stopped"}  # stopped after the failure
    # the dry run of the relaunch counts what the output holds
    code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--dry-run"), capsys)
    assert code == 0 and "3 already graded in" in out and "5 to run" in out, err
    assert "#   5 of 8 rollouts to run" in out
    code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(second)),
                             capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = watch(second, capsys)
    assert code == 0 and "second: COMPLETED: completed: last step 8 of 8" in out, out + err
    collected = [c for c in calls_of(on_path) if c["program"] == "ng_collect_rollouts"]
    assert [c["had"] for c in collected] == [0, 3]  # Gym resumed from the 3 graded rollouts


def test_what_ng_run_leaves_behind_is_killed_with_its_process_group(
    tmp_path, capsys, on_path, monkeypatch
):
    """ng_run gone at SIGINT, its server still up and deaf to SIGINT: the group's SIGKILL."""
    monkeypatch.setenv("RLGATE_TEST_STUBBORN", "1")
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = watch(run_dir, capsys)
    assert code == 0, out + err
    assert not server_child_alive(on_path)  # the job killed the group before it ended


def test_an_output_dir_a_live_job_writes_is_refused_to_a_second_launch_and_a_run_here(
    tmp_path, capsys, on_path, monkeypatch
):
    hold = tmp_path / "release"
    monkeypatch.setenv("RLGATE_TEST_HOLD", str(hold))
    first, second = tmp_path / "runs/first", tmp_path / "runs/second"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(first)), capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "out/.rlgate_launch").read_text()) == {"run_dir": str(first)}
    try:
        wait_for(lambda: any(c["program"] == "ng_collect_rollouts" for c in calls_of(on_path)))
        for extra in (["--launch", "local", "--run-dir", str(second)], ["--dry-run"], []):
            code, out, err = run_cli(gym_argv(tmp_path, *extra), capsys)
            assert_one_error(code, err, rf"--output-dir {tmp_path}/out is being written by run "
                             rf"{first} \(local job \d+, which its backend still runs or "
                             r"queues\): two writers would")  # fmt: skip
            assert not second.exists() and out == ""
    finally:
        hold.touch()
    code, out, err = watch(first, capsys)
    assert code == 0, out + err
    # ended: the next launch goes ahead (here: nothing left to run)
    code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(second)),
                             capsys)  # fmt: skip
    assert code == 0 and "nothing to launch: every rollout is graded" in out, err


@pytest.mark.parametrize(
    "lease",
    ["{", '{"run_dir": 7}', '{"run_dir": "/nonexistent/run"}', '{"run_dir": "RUN"}', "[]"],
)
def test_a_lease_that_names_no_live_job_of_this_output_dir_is_ignored(
    tmp_path, capsys, on_path, monkeypatch, lease
):
    """Unreadable, or a live job of another output dir (RUN): the launch goes ahead."""
    hold = tmp_path / "release"
    monkeypatch.setenv("RLGATE_TEST_HOLD", str(hold))
    other = tmp_path / "runs/other"
    argv = gym_argv(tmp_path, "--launch", "local", "--run-dir", str(other))
    argv[argv.index("--output-dir") + 1] = str(tmp_path / "elsewhere")
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    try:
        (tmp_path / "out").mkdir()
        (tmp_path / "out/.rlgate_launch").write_text(lease.replace("RUN", str(other)))
        code, out, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir",
                                          str(tmp_path / "runs/r")), capsys)  # fmt: skip
        assert code == 0 and "launched r on local" in out, err
        assert load_manifest(other).status.value == "submitted"  # still live meanwhile
    finally:
        hold.touch()
    wait_for(lambda: (tmp_path / "runs/r/launch/exit_status").is_file())
    wait_for(lambda: (other / "launch/exit_status").is_file())


def test_a_server_that_never_gets_ready_fails_the_job_before_the_collection(
    tmp_path, capsys, on_path, monkeypatch
):
    monkeypatch.setenv("RLGATE_TEST_SERVER_FAILS", "1")
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    code, out, _ = watch(run_dir, capsys)
    assert code == 1 and "r: FAILED: run died: driver exited with status 3" in out, out
    assert "ng_run exited with 1 before it was ready" in (run_dir / "driver.log").read_text()
    assert "ng_collect_rollouts" not in [c["program"] for c in calls_of(on_path)]


def test_a_hostile_container_formatter_reaches_ng_run_as_one_inert_word(tmp_path, capsys, on_path):
    formatter = f"/sif/x $(touch {MARKER}) `touch {MARKER}`; touch {MARKER} #{{instance_id}}.sif"
    run_dir = tmp_path / "runs/r"
    argv = gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir), formatter=formatter)
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    code, out, _ = watch(run_dir, capsys)
    assert code == 0, out
    server = calls_of(on_path)[0]
    key = "+swe_agents.responses_api_agents.swe_agents.container_formatter="
    assert f"{key}'{formatter}'" in server["argv"]
    assert markers(tmp_path) == [] and not Path(MARKER).exists()


# --- Slurm: the sbatch script, executed with a stand-in sbatch; the dry run ---------------------


def hostile_site(tmp_path: Path, **slurm: object) -> Path:
    """A site YAML as an untrusted file: env values carry shell code."""
    doc = {
        "slurm": {
            "account": "acct_llm",
            "partition": "batch",
            "container": "/lustre/containers/nemo-rl.sqsh",
            "mounts": ["/lustre/fsw:/lustre/fsw"],
            "max_minutes": 240,
            "job_name_prefix": "acct_llm",
            **slurm,
        },
        "env": {"RLGATE_TEST_VALUE": HOSTILE_VALUE, "HF_HOME": f"/x/$(touch {MARKER})"},
    }
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_slurm_dry_run_prints_the_sbatch_script_the_job_script_and_the_cost(
    tmp_path, capsys, on_path
):
    checkout = nemo_rl_checkout(tmp_path)[0]
    run_dir = tmp_path / "runs/slurm1"
    argv = gym_argv(tmp_path, "--launch", "slurm", "--site", str(hostile_site(tmp_path)),
                    "--nemo-rl-dir", str(checkout), "--nodes", "2", "--run-dir", str(run_dir),
                    "--dry-run")  # fmt: skip
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "8 rollouts; 0 already graded" in out
    assert "0.8 h wall, 6.0 GPU-hours (8 serving GPUs), 6.0 CPU-hours" in out  # the plan's
    assert "--nodes=2 \\\n    --gres=gpu:8 \\\n    --time=1:45:00" in out  # 45 min + 60 start
    assert "# rlgate dry run, nothing submitted: 1 job x 2 nodes x 8 GPUs x 105 min = 28 " in out
    sbatch, job = out.split(f"# {JOB_SCRIPT}:\n")
    command = next(line for line in sbatch.splitlines() if line.startswith("export COMMAND="))
    (value,) = shlex.split(command.removeprefix("export COMMAND="))
    assert shlex.split(value) == ["cd", str(checkout), "&&", "bash", str(run_dir / JOB_SCRIPT)]
    mounts = next(line for line in sbatch.splitlines() if line.startswith("export MOUNTS="))
    assert f"{tmp_path}:{tmp_path}" in mounts and "/sif:/sif" in mounts  # input, output, images
    plan = plan_eval(_eval_of(tmp_path))
    for cmd in plan.commands:  # the job runs the plan's exact argv
        assert block(job, cmd.argv[0])[: len(cmd.argv)] == list(cmd.argv)
    assert not run_dir.exists() and not (tmp_path / "out").exists()  # nothing written


def _eval_of(tmp_path: Path, formatter: str = SIF) -> ClusterEval:
    if not (tmp_path / "in.jsonl").exists():
        si.write_gym_input(tmp_path / "in.jsonl", IDS)
    return ClusterEval(
        backend=SweBackend.GYM,
        model="base",
        output_dir=tmp_path / "out",
        instance_ids=IDS,
        seeds=2,
        server_url="http://127.0.0.1:8000/v1",
        gym_input=tmp_path / "in.jsonl",
        container_formatter=formatter,
    )


def test_the_slurm_submission_runs_the_job_with_site_values_inert(
    tmp_path, capsys, on_path, monkeypatch
):
    checkout = nemo_rl_checkout(tmp_path)[0]
    monkeypatch.setenv("PATH", f"{fake_slurm(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "runs/slurm2"
    argv = gym_argv(tmp_path, "--launch", "slurm", "--site", str(hostile_site(tmp_path)),
                    "--nemo-rl-dir", str(checkout), "--run-dir", str(run_dir))  # fmt: skip
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    assert "launched slurm2 on slurm: job(s) 4242" in out
    manifest = load_manifest(run_dir)
    assert manifest.job_ids == ["4242"] and manifest.kind is RunKind.SWE_EVAL
    ray_driver = (run_dir / "slurm/4242-logs/ray-driver.log").read_text()
    server = calls_of(on_path)[0]
    assert server["value"] == HOSTILE_VALUE, ray_driver  # byte for byte through sbatch.sh
    assert [c["program"] for c in calls_of(on_path)][1:] == ["ng_collect_rollouts",
                                                            "ng_run stopped"]  # fmt: skip
    assert len((tmp_path / "out/rollouts.jsonl").read_text().splitlines()) == 8
    sbatch_argv = (run_dir / "slurm/sbatch.argv").read_text().splitlines()
    assert "--job-name=acct_llm:slurm2" in sbatch_argv and sbatch_argv[-1] == "ray.sub"
    assert markers(tmp_path) == [] and not Path(MARKER).exists()


@pytest.mark.parametrize(
    ("slurm", "pattern"),
    [
        ({"account": "a;touch x"}, r"invalid site config:.*is not a plain account"),
        ({"container": "img $(touch x)"}, r"invalid site config:.*is not a plain container"),
        ({"mounts": ["/a:/b,/c:/d"]}, r"invalid site config:.*is not an absolute SRC:DST"),
    ],
)
def test_site_values_ray_sub_would_paste_unquoted_are_refused(tmp_path, capsys, slurm, pattern):
    checkout = nemo_rl_checkout(tmp_path)[0]
    argv = gym_argv(tmp_path, "--launch", "slurm", "--site", str(hostile_site(tmp_path, **slurm)),
                    "--nemo-rl-dir", str(checkout), "--dry-run")  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and "Traceback" not in err and re.search(pattern, err, re.S), err


def test_a_path_the_container_must_mount_is_refused_when_not_plain(tmp_path, capsys):
    checkout = nemo_rl_checkout(tmp_path)[0]
    argv = gym_argv(tmp_path, "--launch", "slurm", "--site", str(hostile_site(tmp_path)),
                    "--nemo-rl-dir", str(checkout), "--dry-run",
                    formatter="/sif,x:/y/{instance_id}.sif")  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"the job's directory, mounted into the container as '/sif,x:/y'")


@pytest.mark.parametrize(
    ("formatter", "mounted"),
    [
        ("/sif/../{instance_id}.sif", None),
        ("/{instance_id}.sif", None),
        ("/sif/./x/../{instance_id}/image.sif", "/sif"),
        ("/sif//images/{instance_id}.sif", "/sif/images"),
    ],
)
def test_the_images_folder_is_mounted_as_the_host_resolves_it_never_the_root(
    tmp_path, formatter, mounted
):
    plan = plan_eval(_eval_of(tmp_path, formatter))
    if mounted is None:
        with pytest.raises(LaunchError, match=r"images folder is /: the job would mount the whole"):
            plan_swe_launch(plan, backend=Backend.LOCAL, site=SiteConfig(), run_dir=tmp_path / "r")
        return
    job = plan_swe_launch(plan, backend=Backend.LOCAL, site=SiteConfig(), run_dir=tmp_path / "r")
    assert Path(mounted) in job.mounts and all(".." not in m.parts for m in job.mounts)


@pytest.mark.parametrize("inside", ["r/out", "r/launch", "r/a/b"])  # r itself: the output guard
def test_an_output_dir_inside_the_run_dir_is_refused_before_anything_is_written(
    tmp_path, capsys, inside
):
    argv = gym_argv(tmp_path, "--launch", "local", "--run-dir", str(tmp_path / "r"))
    argv[argv.index("--output-dir") + 1] = str(tmp_path / inside)
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"--output-dir .* is inside the run directory .*, which must be")
    assert not (tmp_path / "r").exists()


# --- Ray: the job request ------------------------------------------------------------------------


def test_the_ray_request_s_entrypoint_is_the_job_script_from_the_checkout(tmp_path, capsys):
    run_dir = tmp_path / "runs/ray1"
    argv = gym_argv(tmp_path, "--launch", "ray", "--ray-address", "http://head:8265",
                    "--nemo-rl-dir", "/opt/nemo-rl", "--run-dir", str(run_dir),
                    "--dry-run")  # fmt: skip
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    request = json.loads(out[out.index("{\n") : out.index(f"# {JOB_SCRIPT}:")])
    assert request["submission_id"] == "rlgate-ray1"
    assert shlex.split(request["entrypoint"]) == [
        "cd", "/opt/nemo-rl", "&&", "bash", str(run_dir / JOB_SCRIPT)]  # fmt: skip
    assert request["metadata"]["rlgate_run_dir"] == str(run_dir)


# --- the job script: every word quoted -----------------------------------------------------------

# anything a container formatter may hold: Hydra's quoting refuses ' and \\, a command line
# refuses NUL and line breaks (SweError, checked in test_swe_backends)
_TEXT = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="'\\\x85"),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(head=_TEXT, tail=_TEXT)
def test_every_command_of_the_job_script_round_trips_to_the_plan_s_argv(tmp_path, head, tail):
    assume("${" not in f"/sif/{head}{{instance_id}}{tail}")  # refused: Hydra interpolation
    plan = plan_eval(_eval_of(tmp_path, formatter=f"/sif/{head}{{instance_id}}{tail}"))
    text = job_script(plan)
    for cmd in plan.commands:
        assert block(text, cmd.argv[0])[: len(cmd.argv)] == list(cmd.argv)
    check = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


# --- refusals ---------------------------------------------------------------------------------


def test_nemo_skills_is_not_launched_it_submits_itself(tmp_path, capsys):
    argv = ["swe", "eval", "--backend", "nemo-skills", "--model", "/ckpt/rl", "--cluster", "slurm",
            "--output-dir", str(tmp_path / "ns"), "--dataset", str(si.DATASET), "--launch",
            "slurm", "--dry-run"]  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"--launch is for --backend gym; .* ns eval, which submits "
                                r"itself through its own cluster config \(--cluster\)")  # fmt: skip
    assert not (tmp_path / "ns").exists()


def test_slurm_without_a_nemo_rl_checkout_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RLGATE_NEMO_RL_DIR", raising=False)
    argv = gym_argv(tmp_path, "--launch", "slurm", "--site", str(hostile_site(tmp_path)),
                    "--dry-run")  # fmt: skip
    code, _, err = run_cli(argv, capsys)
    assert_one_error(code, err, r"--launch slurm submits NeMo RL's ray.sub: pass --nemo-rl-dir")


def test_watch_refuses_a_manifest_whose_evaluation_was_edited(tmp_path, capsys, on_path):
    run_dir = tmp_path / "runs/r"
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    doc = json.loads((run_dir / MANIFEST_NAME).read_text())
    for key, value, pattern in (
        ("instance_ids", ["a\nb"], r"the manifest's evaluation: dataset: instance_id 'a\\nb'"),
        ("seeds", 0, r"the manifest's evaluation: --seeds must be an integer in 1\.\.256, got 0"),
        ("seeds", 1, r"target of 8 rollouts is not its evaluation's 4 instances x 1 seed"),
        ("output_dir", None, r"the manifest's config is not an SWE evaluation"),
        ("output_dir", f"{tmp_path}/o\x00ut", r"(?s)manifest:.*config\.output_dir holds a NUL"),
        ("gym_input", f"{tmp_path}/in\x00.jsonl", r"(?s)manifest:.*config\.gym_input holds a NUL"),
        ("container_formatter", "/s\x00if/{instance_id}", r"(?s)invalid run manifest:.*NUL byte"),
    ):
        edited = {**doc, "config": {**doc["config"], key: value}}
        (run_dir / MANIFEST_NAME).write_text(json.dumps(edited))
        code, _, err = watch(run_dir, capsys)
        assert_one_error(code, err, pattern)
    for key, value in (("command", "bash x\x00"), ("workdir", "/w\x00"), ("run_name", "r\x00")):
        (run_dir / MANIFEST_NAME).write_text(json.dumps({**doc, key: value}))
        code, _, err = watch(run_dir, capsys)
        assert_one_error(code, err, rf"(?s)invalid run manifest:.*{key} holds a NUL byte")
    (run_dir / MANIFEST_NAME).write_text(json.dumps(doc))


def test_watch_refuses_an_evaluation_whose_input_rows_changed_since_the_launch(
    tmp_path, capsys, on_path
):
    """Progress is that of the rows launched: other rows are another evaluation."""
    run_dir = tmp_path / "runs/r"
    si.write_gym_input(tmp_path / "in.jsonl", IDS)
    code, _, err = run_cli(gym_argv(tmp_path, "--launch", "local", "--run-dir", str(run_dir)),
                           capsys)  # fmt: skip
    assert code == 0, err
    wait_for(lambda: (run_dir / "launch/exit_status").is_file())
    code, out, err = watch(run_dir, capsys)
    assert code == 0, out + err
    with (tmp_path / "in.jsonl").open("a") as fh:
        fh.write('{"responses_create_params": {"x": 1}}\n')
    code, _, err = watch(run_dir, capsys)
    assert_one_error(code, err, r"in\.jsonl changed since the launch \(sha256 [0-9a-f]{12}, "
                     r"launched with [0-9a-f]{12}\)")  # fmt: skip
    (tmp_path / "in.jsonl").unlink()
    code, _, err = watch(run_dir, capsys)
    assert_one_error(code, err, r"in\.jsonl, the rows launched, cannot be read")


def test_plan_swe_launch_sizes_and_site_defaults(tmp_path):
    plan = plan_eval(_eval_of(tmp_path))
    job = plan_swe_launch(
        plan, backend=Backend.LOCAL, site=SiteConfig(), run_dir=tmp_path / "r", minutes=30
    )
    assert (job.nodes, job.gpus_per_node, job.minutes, job.gpu_hours) == (1, 8, 30, 4.0)
    assert job.label.startswith("swe eval gym of base")


@pytest.mark.parametrize(
    "written", ["ng_run.log", "rollouts.jsonl", "rollouts_failures.jsonl", ".rlgate_launch"]
)
@pytest.mark.parametrize("launch", [["--launch", "local", "--run-dir", "runs/r"], ["--dry-run"]])
def test_a_gym_input_the_job_writes_is_refused_before_any_work(
    tmp_path, capsys, on_path, written, launch
):
    """The input rows kept as the server's log (or the results) would be overwritten by the job."""
    out = tmp_path / "out"
    out.mkdir()
    (out / written).write_text((tmp_path / "made.jsonl").read_text())
    (tmp_path / "link.jsonl").symlink_to(out / written)
    for rows in (out / written, tmp_path / "link.jsonl"):
        argv = gym_argv(tmp_path, *launch)
        argv[argv.index("--gym-input") + 1] = str(rows)
        code, _, err = run_cli(argv, capsys)
        assert_one_error(
            code, err, rf"refusing to write --output-dir's {re.escape(written)} .*: it is "
        )
        assert not (tmp_path / "runs").exists() and calls_of(on_path) == []
    # an input elsewhere in the output directory is not what the job writes
    si.write_gym_input(out / "verified_gym.jsonl", IDS)
    argv = gym_argv(tmp_path, "--dry-run")
    argv[argv.index("--gym-input") + 1] = str(out / "verified_gym.jsonl")
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
