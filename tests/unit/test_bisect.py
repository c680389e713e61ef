"""``rlgate bisect``: the narrowing core, the history as its step log, and the CLI end to end.

The end-to-end tests run the real launcher (local backend) on the stand-in driver from
worktrees of a real git repository made here, whose commits plant a regression (a file
naming a corpus fault the stand-in then writes) or an infrastructure failure (a file with
an out-of-memory line the stand-in prints before exiting 1).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgate.cli.app import main
from rlgate.launch.bisect import (
    Attempt,
    BisectSpec,
    StepOutcome,
    Verdict,
    expected_steps,
    narrow,
    run_bisect,
    verdict_of,
)
from rlgate.launch.manifest import Backend
from rlgate.launch.site import SiteConfig

from .helpers.history_inputs import BACKENDS, database
from .helpers.launch_fixtures import STANDIN, TARGET, _git, slurm_site, swe_env

# --- the narrowing core ---------------------------------------------------------------------


def bisect_with(n: int, first_bad: int, skipped: frozenset[int] = frozenset()) -> tuple:
    """Run the pure core against a monotone oracle; (narrowing, tested indices)."""
    commits = [f"c{i}" for i in range(n)]
    verdicts: dict[str, Verdict] = {}
    tested = []
    while (state := narrow(commits, verdicts)).next is not None:
        i = commits.index(state.next)
        tested.append(i)
        if i in skipped:
            verdicts[state.next] = Verdict.SKIP
        else:
            verdicts[state.next] = Verdict.BAD if i >= first_bad else Verdict.GOOD
    return state, tested


class TestNarrow:
    @settings(max_examples=300, deadline=None)
    @given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
    def test_finds_the_first_bad_commit_in_ceil_log2_steps(self, case: tuple[int, int]) -> None:
        n, first_bad = case
        state, tested = bisect_with(n, first_bad)
        assert state.culprits == (f"c{first_bad}",)
        assert len(tested) <= expected_steps(n)
        assert len(set(tested)) == len(tested)  # no commit tested twice

    @settings(max_examples=300, deadline=None)
    @given(
        st.integers(2, 60).flatmap(
            lambda n: st.tuples(
                st.just(n), st.integers(0, n - 1), st.frozensets(st.integers(0, n - 2))
            )
        )
    )
    def test_skipped_commits_make_a_range_that_holds_the_first_bad_one(
        self, case: tuple[int, int, frozenset[int]]
    ) -> None:
        n, first_bad, skipped = case
        state, _ = bisect_with(n, first_bad, skipped)
        culprits = [int(c[1:]) for c in state.culprits]
        assert first_bad in culprits
        assert culprits == list(range(culprits[0], culprits[-1] + 1))
        assert set(culprits[:-1]) <= skipped  # only skips stand between good and bad
        assert culprits[-1] >= first_bad and culprits[-1] not in skipped - {n - 1}

    def test_counts(self) -> None:
        assert [expected_steps(n) for n in (1, 2, 3, 4, 5, 8, 9, 1000)] == [0, 1, 2, 2, 3, 3, 4, 10]

    def test_the_midpoint_steps_over_a_skipped_commit(self) -> None:
        commits = ["a", "b", "c", "d", "e"]
        assert narrow(commits, {}).next == "b"
        assert narrow(commits, {"b": Verdict.SKIP}).next == "c"  # nearest the middle
        after = narrow(commits, {"b": Verdict.SKIP, "c": Verdict.BAD})
        assert after.next == "a" and after.culprits == ("a", "b", "c")
        done = narrow(commits, {"b": Verdict.SKIP, "c": Verdict.BAD, "a": Verdict.GOOD})
        assert done.done and done.culprits == ("b", "c")

    def test_verdict_of_attempts(self) -> None:
        infra, bad, good = Attempt.INFRA, Attempt.BAD, Attempt.GOOD
        assert verdict_of([infra], retries=1) is None
        assert verdict_of([infra, infra], retries=1) is Verdict.SKIP
        assert verdict_of([infra, bad], retries=1) is Verdict.BAD
        assert verdict_of([infra, good], retries=0) is Verdict.GOOD
        assert verdict_of([], retries=0) is None


# --- the history as the step log (SQLite and PostgreSQL) --------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_history_log_records_every_attempt_and_resumes(backend: str, tmp_path: Path) -> None:
    from rlgate.cli.bisect import HistoryLog
    from rlgate.history.store import open_store
    from rlgate.history.triage import window

    commits = tuple(f"{i:040x}" for i in range(1, 9))
    spec = BisectSpec(
        recipe=TARGET, repo=tmp_path, good="0" * 40, bad=commits[-1], commits=commits,
        backend=Backend.LOCAL, site=SiteConfig(), work_dir=tmp_path / "work", retries=1,
    )  # fmt: skip
    calls: list[str] = []

    def step(spec: BisectSpec, commit: str, attempt: int) -> StepOutcome:
        calls.append(commit)
        i = commits.index(commit)
        verdict = Attempt.INFRA if i == 3 else (Attempt.BAD if i >= 5 else Attempt.GOOD)
        return StepOutcome(commit, attempt, verdict, f"step {i}", spec.work_dir / commit[:12])

    url = database(backend, tmp_path)
    branch = "bisect/r/0000..0008"
    with open_store(url) as store:
        log = HistoryLog(store, branch, "r", None, ("grpo.max_num_steps=3",))
        first = run_bisect(spec, log, step=step)
        assert first.narrowing.culprits == (commits[5],)
        # 3 is infra twice (skipped), then the midpoints around it: 2 good, 4 good, 5 bad
        assert [commits.index(c) for c in calls] == [3, 3, 2, 4, 5]
        recorded = store.runs(branch=branch)
        assert len(recorded) == len(calls)
        assert all(r.context.commits["nemo_rl"] in commits for r in recorded)
        assert window(store.runs(), main_branch="main", last=None) == []  # no nightly
        calls.clear()
        again = run_bisect(spec, HistoryLog(store, branch, "r", None, ("grpo.max_num_steps=3",)),
                           step=step)  # fmt: skip
        assert calls == [] and again.narrowing.culprits == first.narrowing.culprits
        # other options: other verdicts (nothing is reused)
        other = run_bisect(spec, HistoryLog(store, branch, "r", None, ()), step=step)
        assert calls and other.narrowing.culprits == first.narrowing.culprits


def test_an_interrupted_attempt_leaves_its_worktree_and_the_next_one_steps_over_it(
    tmp_path: Path,
) -> None:
    commits = ("a" * 40, "b" * 40)
    spec = BisectSpec(
        recipe=TARGET, repo=tmp_path, good="0" * 40, bad=commits[-1], commits=commits,
        backend=Backend.LOCAL, site=SiteConfig(), work_dir=tmp_path / "work",
    )  # fmt: skip
    (tmp_path / "work" / "worktrees" / f"{'a' * 12}-1").mkdir(parents=True)  # a ^C left it
    (tmp_path / "work" / "runs" / f"{'a' * 12}-2").mkdir(parents=True)
    numbers: list[int] = []

    class Log:
        def attempts(self) -> dict[str, list[Attempt]]:
            return {}

        def record(self, outcome: StepOutcome) -> None:
            pass

    def step(spec: BisectSpec, commit: str, attempt: int) -> StepOutcome:
        numbers.append(attempt)
        return StepOutcome(commit, attempt, Attempt.BAD, "bad", spec.work_dir)

    assert run_bisect(spec, Log(), step=step).narrowing.culprits == (commits[0],)
    assert numbers == [3]


# --- end to end: the CLI, the local launcher, the stand-in and a real git repository ------------

ENTRY = shlex.join([*STANDIN, "--fault-file", "fault.txt", "--fail-file", "infra.txt"])
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


DRIVER = f'exec {shlex.join(STANDIN)} --fault-file fault.txt "$@"\n'


def make_repo(
    root: Path,
    n: int,
    *,
    fault_at: int,
    infra_at: int | None = None,
    driver_at: tuple[int, str] | None = None,
) -> list[str]:
    """A NeMo RL-shaped repository of commits 0..n; from ``fault_at`` on, a reward regression.

    ``driver.sh`` (run by the entrypoint ``bash driver.sh``) starts the stand-in, except at
    ``driver_at``'s commit, where it is that script.
    """
    repo = root / "nemo-rl"
    (repo / "examples" / "nemo_gym").mkdir(parents=True)
    (repo / "examples" / "nemo_gym" / "run_grpo_nemo_gym.py").write_text("# entry point\n")
    (repo / "ray.sub").write_text("#!/bin/bash\n# NeMo RL's Slurm launcher\n")
    _git(repo, "init", "-q")
    shas = []
    for i in range(n + 1):
        (repo / "version.txt").write_text(f"{i}\n")
        if i == fault_at:
            (repo / "fault.txt").write_text("reward_flat\n")
        script = driver_at[1] if driver_at is not None and driver_at[0] == i else DRIVER
        (repo / "driver.sh").write_text(script)
        infra = repo / "infra.txt"
        if i == infra_at:
            infra.write_text(OOM + "\n")
        elif infra.exists():
            infra.unlink()
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return shas


def bisect_argv(tmp_path: Path, shas: list[str], *extra: str, db: str | None = None) -> list[str]:
    site = tmp_path / "site.yaml"
    site.write_text(SiteConfig(env=swe_env(tmp_path)).model_dump_json())
    return [
        "bisect", "--recipe", str(TARGET), "--good", shas[0], "--bad", shas[-1],
        "--nemo-rl-dir", str(tmp_path / "nemo-rl"), "--backend", "local", "--site", str(site),
        "--db", db or str(tmp_path / "history.db"), "--work-dir", str(tmp_path / "work"),
        "--entrypoint", ENTRY, "--interval", "0.2", "--max-steps", "6",
        "--override", "cluster.num_nodes=1", "--tier", "convergence", *extra,
    ]  # fmt: skip


def rows(db: str) -> list[tuple[str, str | None, str]]:
    """(run id, branch, bisect_step outcome) of every recorded step, oldest first."""
    from rlgate.history.store import open_store

    with open_store(db, create=False) as store:
        runs = sorted(store.runs(), key=lambda r: r.context.recorded_at)
    return [
        (r.context.run_id, r.context.branch, x.outcome.value)
        for r in runs
        for x in r.results
        if x.name == "bisect_step"
    ]


class TestBisectEndToEnd:
    @pytest.mark.parametrize("backend", BACKENDS)
    def test_finds_the_planted_regression_records_steps_and_resumes(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
    ) -> None:
        db = database(backend, tmp_path)
        shas = make_repo(tmp_path, 4, fault_at=3)  # good 0; 1..4, bad 4; first bad 3
        repo = tmp_path / "nemo-rl"
        head = _git(repo, "rev-parse", "HEAD")
        assert main(bisect_argv(tmp_path, shas, db=db)) == 0
        out = capsys.readouterr().out
        assert f"first bad commit: {shas[3]} commit 3" in out
        assert f"{shas[2][:12]}: good: gate passed" in out
        assert f"{shas[3][:12]}: bad: gate failed: reward_improvement" in out
        found = rows(db)
        branch = f"bisect/{TARGET.stem}/{shas[0][:12]}..{shas[4][:12]}"
        assert [(r[0].rsplit("@", 1)[1], r[1], r[2]) for r in found] == [
            (f"{shas[2][:12]}#1", branch, "pass"),
            (f"{shas[3][:12]}#1", branch, "fail"),
        ]  # 2 steps = ceil(log2 4)
        # the user's checkout: same HEAD, clean, no worktree left behind
        assert _git(repo, "rev-parse", "HEAD") == head
        assert _git(repo, "status", "--porcelain") == ""
        assert len(_git(repo, "worktree", "list").splitlines()) == 1
        # resumed from the history: no step runs again
        assert main(bisect_argv(tmp_path, shas, db=db)) == 0
        out = capsys.readouterr().out
        assert "resumed: 2 commit(s) judged" in out and "testing" not in out
        assert f"first bad commit: {shas[3]}" in out and "0 run(s) now" in out
        assert len(rows(db)) == 2

    def test_an_infra_step_is_retried_then_skipped_and_the_answer_is_a_range(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        shas = make_repo(tmp_path, 4, fault_at=3, infra_at=2)  # the first midpoint OOMs
        assert main(bisect_argv(tmp_path, shas, "--retries", "1")) == 3
        out = capsys.readouterr().out
        assert out.count(f"testing {shas[2][:12]}") == 2
        assert f"{shas[2][:12]}: skipped (infrastructure on 2 attempt(s))" in out
        assert "gpu_out_of_memory" in out
        assert f"the first bad commit is one of 2 (skipped for infrastructure: {shas[2][:12]})" in (
            out
        )
        assert f"  {shas[3]} commit 3" in out
        assert [r[2] for r in rows(str(tmp_path / "history.db"))] == [
            "error",
            "error",
            "pass",
            "fail",
        ]


# --- bad input and the dry run ------------------------------------------------------------------


class TestInputAndPlan:
    @pytest.mark.parametrize(
        ("which", "value", "message"),
        [
            ("--good", "nosuchref", "--good 'nosuchref' is not a commit"),
            ("--bad", "0" * 40, f"--bad '{'0' * 40}' is not a commit"),
            ("--good", "-x", "starts with '-'"),
        ],
    )
    def test_a_bad_sha_is_exit_2_with_one_message(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str, value: str, message
    ) -> None:
        shas = make_repo(tmp_path, 2, fault_at=2)
        argv = bisect_argv(tmp_path, shas, "--dry-run")
        at = argv.index(which)
        argv[at : at + 2] = [f"{which}={value}"]  # argparse takes '-x' only after '='
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("rlgate: error:") == 1 and "Traceback" not in err

    def test_good_must_be_an_ancestor_of_bad(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        shas = make_repo(tmp_path, 2, fault_at=2)
        assert main(bisect_argv(tmp_path, [shas[2], shas[0]], "--dry-run")) == 2
        assert "is not an ancestor of --bad" in capsys.readouterr().err

    def test_slurm_dry_run_prints_commits_steps_gpu_hours_and_sbatch(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        shas = make_repo(tmp_path, 8, fault_at=5)
        site = tmp_path / "slurm.yaml"
        site.write_text(slurm_site(tmp_path).model_dump_json())
        argv = [
            "bisect", "--recipe", str(TARGET), "--good", shas[0], "--bad", shas[-1],
            "--nemo-rl-dir", str(tmp_path / "nemo-rl"), "--backend", "slurm",
            "--site", str(site), "--work-dir", str(tmp_path / "work"), "--minutes", "120",
            "--dry-run",
        ]  # fmt: skip
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "8 commit(s) after --good" in out and "expected steps: 3 (ceil(log2 8))" in out
        assert all(sha[:12] in out for sha in shas)
        # the recipe's 4 nodes x 8 GPUs x 2 h = 64 GPU-h per step, 3 steps
        # at most: skips leave all 7 commits but --bad to test, each twice (1 retry)
        assert "GPU-hours 64 per step, 192 for 3 step(s) (at most 896 for 14 run(s)" in out
        tree = tmp_path / "work" / "worktrees" / f"{shas[4][:12]}-1"
        assert f"\ncd {tree}\n" in out and f"COMMAND='cd {tree} && uv run examples/" in out
        assert "sbatch --parsable" in out and "--time=2:00:00" in out
        assert not (tmp_path / "work").exists()
        assert len(_git(tmp_path / "nemo-rl", "worktree", "list").splitlines()) == 1

    def test_ray_dry_run_prints_the_job_submission(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from rlgate.launch.site import RaySite

        shas = make_repo(tmp_path, 3, fault_at=2)
        site = tmp_path / "ray.yaml"
        ray = SiteConfig(ray=RaySite(address="http://head:8265"), env=swe_env(tmp_path))
        site.write_text(ray.model_dump_json())
        argv = [
            "bisect", "--recipe", str(TARGET), "--good", shas[0], "--bad", shas[-1],
            "--nemo-rl-dir", str(tmp_path / "nemo-rl"), "--backend", "ray",
            "--site", str(site), "--work-dir", str(tmp_path / "work"), "--dry-run",
        ]  # fmt: skip
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "expected steps: 2 (ceil(log2 3))" in out and "GPU-hours n/a" in out
        assert "http://head:8265" in out and f"{shas[2][:12]}" in out


# --- findings: what is infrastructure, what a rerun reuses, what the range holds ----------------

SH_STANDIN = shlex.join(STANDIN) + ' --fault-file fault.txt "$@"'


class TestInfraIsNeverAVerdict:
    @pytest.mark.parametrize(
        ("script", "said"),
        [
            (f"{SH_STANDIN}\nkill -9 $$\n", "exit status 137: killed by signal 9"),
            ('exec rlgate-no-such-driver "$@"\n', "exit status 127: the command was not found"),
            ("chmod -x driver.sh; ./driver.sh\n", "exit status 126"),
            ("echo 'something went wrong' >&2\nexit 1\n", "no step logged"),
        ],
        ids=["sigkill", "not-found", "not-executable", "no-step"],
    )
    def test_a_killed_or_missing_driver_is_retried_then_skipped(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, said: str
    ) -> None:
        shas = make_repo(tmp_path, 4, fault_at=3, driver_at=(2, script))  # the first midpoint
        argv = bisect_argv(tmp_path, shas, "--retries", "1")
        argv[argv.index("--entrypoint") + 1] = "bash driver.sh"
        assert main(argv) == 3  # never a confident (wrong) first bad commit 2
        out = capsys.readouterr().out
        assert out.count(f"testing {shas[2][:12]}") == 2 and said in out
        assert f"{shas[2][:12]}: skipped (infrastructure on 2 attempt(s))" in out
        assert f"the first bad commit is one of 2 (skipped for infrastructure: {shas[2][:12]})" in (
            out
        )
        assert [r[2] for r in rows(str(tmp_path / "history.db"))] == [
            "error",
            "error",
            "pass",
            "fail",
        ]

    def test_a_run_that_trained_then_crashed_on_its_own_is_bad(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        crash = f"{SH_STANDIN} --stop-at-step 2\necho 'ValueError: the code broke' >&2\nexit 1\n"
        shas = make_repo(tmp_path, 4, fault_at=3, driver_at=(2, crash))
        argv = bisect_argv(tmp_path, shas)
        argv[argv.index("--entrypoint") + 1] = "bash driver.sh"
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"{shas[2][:12]}: bad: run died" in out
        assert f"first bad commit: {shas[2]} commit 2" in out

    def test_a_watch_timeout_cancels_the_job_before_its_worktree_goes(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        from rlgate.launch.local import LocalBackend
        from rlgate.launch.manifest import load_manifest

        shas = make_repo(tmp_path, 2, fault_at=2, driver_at=(1, f"{SH_STANDIN} --hang\n"))
        argv = bisect_argv(tmp_path, shas, "--retries", "0", "--timeout-minutes", "0.03")
        argv[argv.index("--entrypoint") + 1] = "bash driver.sh"
        assert main(argv) == 3
        out = capsys.readouterr().out
        assert "cancelled: process group" in out
        manifest = load_manifest(tmp_path / "work" / "runs" / f"{shas[1][:12]}-1")
        assert manifest.pid is not None and not LocalBackend._alive(manifest)
        assert len(_git(tmp_path / "nemo-rl", "worktree", "list").splitlines()) == 1


def test_a_rerun_with_other_tiers_entrypoint_backend_or_site_starts_over(tmp_path: Path) -> None:
    from dataclasses import replace

    from rlgate.cli.bisect import HistoryLog
    from rlgate.core.results import Tier
    from rlgate.history.store import open_store

    commits = tuple(f"{i:040x}" for i in range(1, 5))
    spec = BisectSpec(
        recipe=TARGET, repo=tmp_path, good="0" * 40, bad=commits[-1], commits=commits,
        backend=Backend.LOCAL, site=SiteConfig(), work_dir=tmp_path / "work",
        tiers=(Tier.CONVERGENCE,),
    )  # fmt: skip
    calls: list[str] = []

    def step(spec: BisectSpec, commit: str, attempt: int) -> StepOutcome:
        calls.append(commit)
        verdict = Attempt.BAD if commits.index(commit) >= 2 else Attempt.GOOD
        return StepOutcome(commit, attempt, verdict, "v", spec.work_dir / commit[:12])

    others = [
        replace(spec, tiers=(Tier.CONVERGENCE, Tier.PERF)),
        replace(spec, entrypoint=("python", "-m", "other")),
        replace(spec, backend=Backend.RAY),
        replace(spec, site=SiteConfig(runs_root=str(tmp_path / "elsewhere"))),
    ]
    with open_store(str(tmp_path / "h.db")) as store:
        log = lambda s: HistoryLog(store, "bisect/r/x", "r", None, (), s.identity())  # noqa: E731
        run_bisect(spec, log(spec), step=step)
        calls.clear()
        run_bisect(spec, log(spec), step=step)
        assert calls == []  # the same options: resumed
        for other in others:
            run_bisect(other, log(other), step=step)
            assert calls, other
            calls.clear()


def side_branch_repo(root: Path) -> dict[str, str]:
    """base -> B (mainline) -> M (merges side G) -> bad; G branches off base."""
    repo = root / "nemo-rl"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = {}
    for name in ("base", "B"):
        (repo / f"{name}.txt").write_text(name)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", name)
        shas[name] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "side", shas["base"])
    (repo / "G.txt").write_text("G")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "G")
    shas["G"] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "M", "side")
    shas["M"] = _git(repo, "rev-parse", "HEAD")
    (repo / "bad.txt").write_text("bad")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "bad")
    shas["bad"] = _git(repo, "rev-parse", "HEAD")
    return shas


def test_a_good_on_a_merged_side_branch_bisects_only_its_descendants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlgate.launch.bisect import commit_range

    shas = side_branch_repo(tmp_path)
    repo = tmp_path / "nemo-rl"
    # B never had G's code: it is no candidate for the first bad commit after G
    assert commit_range(repo, shas["G"], shas["bad"]) == [shas["M"], shas["bad"]]
    assert commit_range(repo, shas["base"], shas["bad"]) == [shas["B"], shas["M"], shas["bad"]]
    argv = bisect_argv(tmp_path, [shas["G"], shas["bad"]], "--dry-run")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 commit(s) after --good" in out and shas["B"][:12] not in out


def test_bisect_steps_are_no_baseline_of_triage_or_report(tmp_path: Path) -> None:
    from rlgate.cli.bisect import HistoryLog
    from rlgate.history.model import CommitRef
    from rlgate.history.store import open_store
    from rlgate.history.triage import window

    sha = "ab" * 20
    with open_store(str(tmp_path / "h.db")) as store:
        log = HistoryLog(store, f"bisect/r/{'0' * 12}..{sha[:12]}", "r", None, (), "id")
        log.record(StepOutcome(sha, 1, Attempt.GOOD, "gate passed", tmp_path / "run"))
        assert len(store.runs()) == 1
        assert window(store.runs(), commit=CommitRef(sha), last=None) == []
        assert window(store.runs(), commit=CommitRef(sha[:12], "nemo_rl"), last=None) == []


def test_a_bad_node_count_for_the_local_backend_is_exit_2_before_any_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shas = make_repo(tmp_path, 2, fault_at=2)
    argv = bisect_argv(tmp_path, shas)
    at = argv.index("cluster.num_nodes=1")
    del argv[at - 1 : at + 1]  # the recipe's own 4 nodes
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("rlgate: error:") == 1 and "the local backend" in err
    assert not (tmp_path / "work" / "runs").exists()


def test_own_stale_worktrees_go_and_the_users_prunable_ones_stay(tmp_path: Path) -> None:
    shas = make_repo(tmp_path, 2, fault_at=2)
    repo = tmp_path / "nemo-rl"
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "users"), shas[0])
    import shutil

    shutil.rmtree(tmp_path / "users")  # the user's own prunable registration
    work = tmp_path / "work"
    stale = work / "worktrees" / f"{shas[1][:12]}-1"  # a ^C before launch left it
    kept = work / "worktrees" / f"{shas[1][:12]}-2"  # its run cannot be read: may still run
    for tree in (stale, kept):
        _git(repo, "worktree", "add", "-q", "--detach", str(tree), shas[1])
    (work / "runs" / kept.name).mkdir(parents=True)
    (work / "runs" / kept.name / "rlgate_manifest.json").write_text("{not json")
    spec = BisectSpec(
        recipe=TARGET, repo=repo, good=shas[0], bad=shas[-1], commits=tuple(shas[1:]),
        backend=Backend.LOCAL, site=SiteConfig(), work_dir=work,
    )  # fmt: skip

    class Log:
        def attempts(self) -> dict[str, list[Attempt]]:
            return {}

        def record(self, outcome: StepOutcome) -> None:
            pass

    def step(spec: BisectSpec, commit: str, attempt: int) -> StepOutcome:
        return StepOutcome(commit, attempt, Attempt.BAD, "bad", spec.work_dir)

    events: list[str] = []
    run_bisect(spec, Log(), step=step, on_event=events.append)
    assert not stale.exists() and kept.exists()
    assert any(stale.name in e and "removed 1 worktree" in e for e in events)
    listed = _git(repo, "worktree", "list", "--porcelain")
    assert str(tmp_path / "users") in listed and str(kept) in listed and str(stale) not in listed
    # an own removal never prunes the user's registration
    from rlgate.launch.bisect import _remove_worktree

    assert _remove_worktree(repo, kept)
    assert str(tmp_path / "users") in _git(repo, "worktree", "list", "--porcelain")


def test_subjects_of_more_commits_than_one_argv_holds(tmp_path: Path) -> None:
    import subprocess

    from rlgate.launch.bisect import subjects

    repo = tmp_path / "many"
    repo.mkdir()
    _git(repo, "init", "-q")
    n = 60_000  # 60k SHAs on one argv: past Linux's 2 MiB ARG_MAX
    stream = "".join(
        f"commit refs/heads/main\ncommitter a <a@b> {1700000000 + i} +0000\n"
        f"data {len(f'c{i:03d}')}\nc{i:03d}\n"
        for i in range(n)
    )
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input=stream.encode(),
                   check=True)  # fmt: skip
    shas = _git(repo, "rev-list", "--reverse", "main").split()
    assert len(shas) == n
    found = subjects(repo, shas)
    assert found[shas[0]] == "c000" and found[shas[-1]] == f"c{n - 1:03d}"
    assert all(found.values())
