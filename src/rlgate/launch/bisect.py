"""``rlgate bisect``: find the first NeMo RL commit whose run fails a recipe's gate.

The commits are good..bad of a NeMo RL git checkout, oldest first, along the first-parent
chain of ``bad`` (a merge is bisected as one commit; ``bad`` is last). Each step runs the
recipe at a midpoint with the launcher (:func:`rlgate.launch.plan.plan_launch`,
:func:`~rlgate.launch.plan.launch`, :func:`~rlgate.launch.watch.watch_run`) from a detached
``git worktree`` of that commit (the user's checkout's files and HEAD are never touched),
then judges the run with the recipe's convergence/perf gate (what ``rlgate check-run``
runs): passed is **good**, failed is **bad**. A run that died without an infrastructure
cause is bad too (the code crashed it).

A step that fails for the infrastructure (the worktree, the plan or the submission failed;
the watch's verdict is exit 3 — an infrastructure signature, a stall, a timeout; the run
stopped short or its job vanished; its metrics cannot be read) is an **infra** attempt:
retried up to ``retries`` times, never counted good or bad; a commit that stays infra is
**skipped** (``git bisect skip``), and the answer may become a range of commits.

:func:`narrow` is the pure core: commits and verdicts in, the next commit to test or the
answer out. :func:`run_bisect` drives it, asking a :class:`StepLog` (the history, in
``rlgate.cli.bisect``) for the attempts already recorded, so a rerun resumes.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from rlgate.core.commands import command
from rlgate.core.errors import ExitCode, LaunchError, RlgateError
from rlgate.core.results import INFRA_CAUSE, Outcome, Result, Tier
from rlgate.launch.job import LaunchPlan
from rlgate.launch.manifest import Backend, RunStatus
from rlgate.launch.site import SiteConfig

__all__ = [
    "IDENTITY",
    "STEP_CHECK",
    "Attempt",
    "BisectResult",
    "BisectSpec",
    "Narrowing",
    "StepLog",
    "StepOutcome",
    "Verdict",
    "bisect_branch",
    "commit_range",
    "default_work_dir",
    "died_for_infra",
    "expected_steps",
    "narrow",
    "remove_stale_worktrees",
    "resolve_commit",
    "run_bisect",
    "run_step",
    "subjects",
    "verdict_of",
]

#: The Result each recorded step carries: PASS good, FAIL bad, ERROR infra.
STEP_CHECK = "bisect_step"
#: The STEP_CHECK evidence key of :meth:`BisectSpec.identity`.
IDENTITY = "bisect_identity"
_GIT_TIMEOUT = 300
_STEP_DIRS = ("runs", "worktrees")  # under the work dir: <commit12>-<attempt> in each


class Attempt(StrEnum):
    """What one run of one commit said."""

    GOOD = "good"
    BAD = "bad"
    INFRA = "infra"


class Verdict(StrEnum):
    """What a commit is, from its attempts."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"  # infra on every allowed attempt


def verdict_of(attempts: Sequence[Attempt], retries: int) -> Verdict | None:
    """A commit's verdict: its last good/bad attempt; skip after ``retries + 1`` infra ones."""
    judged = [a for a in attempts if a is not Attempt.INFRA]
    if judged:
        return Verdict(judged[-1].value)
    return Verdict.SKIP if len(attempts) >= retries + 1 else None


def expected_steps(n: int) -> int:
    """Steps a bisection of ``n`` commits (the last known bad) needs: ``ceil(log2 n)``."""
    return math.ceil(math.log2(n)) if n > 1 else 0


@dataclass(frozen=True, slots=True)
class Narrowing:
    """Where a bisection stands: the next commit to test, or the answer."""

    commits: tuple[str, ...]
    last_good: int  # index of the newest good commit below ``first_bad`` (-1: ``good``)
    first_bad: int  # index of the oldest bad commit (the last: ``bad``)
    next: str | None  # the commit to test next (None: done)

    @property
    def done(self) -> bool:
        """No commit left to test."""
        return self.next is None

    @property
    def culprits(self) -> tuple[str, ...]:
        """The first bad commit, or (skipped commits in the way) the range that holds it."""
        return self.commits[self.last_good + 1 : self.first_bad + 1]


def narrow(commits: Sequence[str], verdicts: Mapping[str, Verdict]) -> Narrowing:
    """The next midpoint of ``commits`` (oldest first, the last one bad) given ``verdicts``.

    The untested commit nearest the middle of (newest good, oldest bad) is next; skipped
    commits are stepped over. A good verdict above the oldest bad one is ignored.
    """
    if not commits:
        raise ValueError("a bisection needs at least the bad commit")
    first_bad = len(commits) - 1
    for i, c in enumerate(commits):
        if verdicts.get(c) is Verdict.BAD:
            first_bad = i
            break
    last_good = -1
    for i in range(first_bad):
        if verdicts.get(commits[i]) is Verdict.GOOD:
            last_good = i
    untested = [i for i in range(last_good + 1, first_bad) if commits[i] not in verdicts]
    if not untested:
        return Narrowing(tuple(commits), last_good, first_bad, None)
    middle = (last_good + first_bad) / 2
    pick = min(untested, key=lambda i: (abs(i - middle), i))
    return Narrowing(tuple(commits), last_good, first_bad, commits[pick])


# --- git ---------------------------------------------------------------------------------


def _git(template: str, **values: Any) -> subprocess.CompletedProcess[str]:
    cmd = command(template, error=LaunchError, **values)
    try:
        return subprocess.run(
            cmd.argv, capture_output=True, text=True, timeout=_GIT_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"cannot run {cmd}: {exc}") from None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "git failed"


def resolve_commit(repo: Path, rev: str, option: str) -> str:
    """``git rev-parse --verify REV^{commit}``: the full SHA, or exit 2 naming ``option``."""
    out = _git(
        "git -C {repo} rev-parse --quiet --verify --end-of-options {rev}",
        repo=repo,
        rev=f"{rev}^{{commit}}",
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise LaunchError(f"{option} {rev!r} is not a commit of {repo}")
    return out.stdout.strip()


def commit_range(repo: Path, good: str, bad: str) -> list[str]:
    """good..bad along ``bad``'s first parents, oldest first (exit 2 unless good < bad).

    Only descendants of ``good`` (``--ancestry-path``): with ``good`` on a merged side
    branch, the mainline commits before the merge never had good's code and are left out.
    """
    if good == bad:
        raise LaunchError(f"--good and --bad are the same commit {good[:12]}")
    out = _git("git -C {repo} merge-base --is-ancestor {good} {bad}", repo=repo, good=good, bad=bad)
    if out.returncode == 1:
        raise LaunchError(
            f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}",
            hint="bisect from an older good commit to a newer bad one",
        )
    if out.returncode != 0:
        raise LaunchError(f"git merge-base failed in {repo}: {_last_line(out.stderr)}")
    span = f"{good}..{bad}"
    chain = _rev_list(repo, "git -C {repo} rev-list --first-parent --reverse {span}", span)
    descendants = set(_rev_list(repo, "git -C {repo} rev-list --ancestry-path {span}", span))
    commits = [c for c in chain if c in descendants]
    # the descendants on a first-parent chain are a suffix of it (a descendant's later
    # first-parent commits descend from it too): anything else is a history bisect can't walk
    if not commits or commits != chain[len(chain) - len(commits) :] or commits[-1] != bad:
        raise LaunchError(
            f"no first-parent line of commits descending from --good {good[:12]} leads to "
            f"--bad {bad[:12]}",
            hint="pick a --good on --bad's first-parent chain (or the merge that brought it in)",
        )
    return commits


def _rev_list(repo: Path, template: str, span: str) -> list[str]:
    out = _git(template, repo=repo, span=span)
    if out.returncode != 0:
        raise LaunchError(f"git rev-list failed in {repo}: {_last_line(out.stderr)}")
    return out.stdout.split()


_SUBJECTS_CHUNK = 1000  # SHAs per git log call: far below any argv limit


def subjects(repo: Path, commits: Sequence[str]) -> dict[str, str]:
    """Each commit's subject line (for messages; empty where git says nothing)."""
    found: dict[str, str] = {}
    for at in range(0, len(commits), _SUBJECTS_CHUNK):
        out = _git("git -C {repo} log --no-walk=unsorted --format=%H%x09%s {revs}", repo=repo,
                   revs=list(commits[at : at + _SUBJECTS_CHUNK]))  # fmt: skip
        found |= dict(line.split("\t", 1) for line in out.stdout.splitlines() if "\t" in line)
    return {c: found.get(c, "") for c in commits}


def _add_worktree(repo: Path, path: Path, commit: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = _git(
        "git -C {repo} worktree add --detach {path} {commit}", repo=repo, path=path, commit=commit
    )
    if out.returncode != 0:
        raise LaunchError(f"git worktree add failed: {_last_line(out.stderr)}")
    if (path / ".gitmodules").is_file():
        out = _git("git -C {path} submodule update --init --recursive", path=path)
        if out.returncode != 0:
            raise LaunchError(f"git submodule update failed: {_last_line(out.stderr)}")


def _remove_worktree(repo: Path, path: Path) -> bool:
    """Remove bisect's own worktree ``path`` (never a prune: the user's registrations stay)."""
    out = _git("git -C {repo} worktree remove --force {path}", repo=repo, path=path)
    return out.returncode == 0 or not path.exists()


# --- the driver ----------------------------------------------------------------------------


def bisect_branch(recipe: str, good: str, bad: str) -> str:
    """The history branch a bisection's steps are recorded on (never a nightly branch)."""
    return f"bisect/{recipe}/{good[:12]}..{bad[:12]}"


@dataclass(frozen=True)
class BisectSpec:
    """What to bisect and how each step runs (the launch options of ``rlgate launch``)."""

    recipe: Path
    repo: Path
    good: str
    bad: str
    commits: tuple[str, ...]
    backend: Backend
    site: SiteConfig
    work_dir: Path
    overrides: tuple[str, ...] = ()
    max_steps: int | None = None
    minutes: int | None = None
    entrypoint: tuple[str, ...] | None = None
    retries: int = 1
    interval: float = 60.0
    timeout: float | None = None
    tiers: tuple[Tier, ...] = (Tier.CONVERGENCE, Tier.PERF)

    def identity(self) -> str:
        """A hash of the tiers, entrypoint, backend and site: what decides a verdict.

        The recipe and overrides are in the history's context already. Steps recorded under
        another identity are not reused.
        """
        import hashlib
        import json

        facts = {
            "tiers": sorted(t.value for t in self.tiers),
            "entrypoint": list(self.entrypoint) if self.entrypoint else None,
            "backend": self.backend.value,
            "site": self.site.model_dump(mode="json"),
        }
        text = json.dumps(facts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def plan(self, run_dir: Path, workdir: Path) -> LaunchPlan:
        """The launch of one step (RecipeError/LaunchError as ``rlgate launch`` raises)."""
        from rlgate.launch.plan import plan_launch

        return plan_launch(
            self.recipe,
            backend=self.backend,
            site=self.site,
            overrides=self.overrides,
            steps=self.max_steps,
            minutes=self.minutes,
            run_dir=run_dir,
            nemo_rl_dir=workdir,
            entrypoint=self.entrypoint,
        )


@dataclass
class StepOutcome:
    """One attempt at one commit: its verdict, why, and what to record."""

    commit: str
    attempt: int
    verdict: Attempt
    message: str
    run_dir: Path
    results: list[Result] = field(default_factory=list)
    run: Any = None  # the run's RunMetrics when it was read
    hardware: str | None = None
    commits: dict[str, str] = field(default_factory=dict)

    def step_result(self, identity: str | None = None) -> Result:
        """The :data:`STEP_CHECK` Result (PASS good, FAIL bad, ERROR infra with its cause).

        ``identity``: :meth:`BisectSpec.identity`, recorded so a rerun reuses only its own.
        """
        outcome = {Attempt.GOOD: Outcome.PASS, Attempt.BAD: Outcome.FAIL}.get(
            self.verdict, Outcome.ERROR
        )
        evidence: dict[str, object] = {"commit": self.commit, "attempt": self.attempt}
        if identity is not None:
            evidence[IDENTITY] = identity
        if self.verdict is Attempt.INFRA:
            evidence[INFRA_CAUSE] = {"reason": "bisect_infra", "detail": self.message}
        return Result(
            name=STEP_CHECK,
            tier=Tier.CONVERGENCE,
            outcome=outcome,
            message=self.message,
            evidence=evidence,
        )


class StepLog(Protocol):
    """Where steps are recorded and read back (the history)."""

    def attempts(self) -> dict[str, list[Attempt]]:
        """Commit -> its recorded attempts, oldest first."""
        ...

    def record(self, outcome: StepOutcome) -> None:
        """Record one attempt."""
        ...


@dataclass(frozen=True)
class BisectResult:
    """The answer: the first bad commit, or the range holding it, and what was run."""

    narrowing: Narrowing
    verdicts: dict[str, Verdict]
    ran: list[StepOutcome]

    @property
    def exit_code(self) -> ExitCode:
        """0: one first bad commit; 3: a range, because infra skips left commits untested."""
        return ExitCode.OK if len(self.narrowing.culprits) == 1 else ExitCode.INFRA


def _infra(spec: BisectSpec, commit: str, attempt: int, run_dir: Path, why: str) -> StepOutcome:
    return StepOutcome(commit, attempt, Attempt.INFRA, why, run_dir)


def died_for_infra(manifest: Any) -> str | None:
    """Why a run that died is the infrastructure's, not its code's (None: the code's).

    The code is only blamed for a run that started training (logged a step) and then exited
    with its own non-zero status. No step logged, no exit status recorded, a signal (exit
    128+N, e.g. 137: SIGKILL, the OOM killer; or a negative status), 126/127 (the command
    not executable / not found) and a failed job with status 0 (Slurm: killed by a signal)
    are infrastructure.
    """
    code = manifest.exit_status
    if code in (126, 127):
        return f"exit status {code}: the command was not found or not executable"
    if code is not None and (code >= 128 or code < 0):
        signal = code - 128 if code >= 128 else -code
        return f"exit status {code}: killed by signal {signal}"
    if manifest.last_step is None:
        return "no step logged"
    if code is None:
        return "no exit status recorded (killed?)"
    if code == 0:
        return "the job failed with exit status 0 (killed by a signal?)"
    return None


def _stop_job(spec: BisectSpec, manifest: Any) -> str | None:
    """Cancel a job still running (the launcher's cancel: only a job proven rlgate's).

    Returns what was done, or None when it could not be cancelled (it may still run).
    """
    from rlgate.launch.plan import backend_for

    backend = backend_for(manifest.backend, spec.site)
    try:
        if backend.poll(manifest).phase.terminal:
            return "ended"
        return f"cancelled: {backend.cancel(manifest)}"
    except RlgateError:
        return None


def run_step(spec: BisectSpec, commit: str, attempt: int) -> StepOutcome:
    """Launch, watch and judge one attempt at ``commit`` from its own worktree."""
    from rlgate.checks.plan import load_inputs, load_plan, run_gate
    from rlgate.launch.plan import launch
    from rlgate.launch.watch import run_result, watch_run

    name = f"{commit[:12]}-{attempt}"
    run_dir = spec.work_dir / "runs" / name
    tree = spec.work_dir / "worktrees" / name
    # the worktree goes once the job is over; an interrupt (^C) leaves it to a job that
    # may still run from it (the next attempt number steps over it, the next run removes it
    # once its job has ended)
    try:
        _add_worktree(spec.repo, tree, commit)
        plan = spec.plan(run_dir, tree)
        manifest = launch(plan)
        watched = watch_run(
            run_dir, interval=spec.interval, timeout=spec.timeout, cancel_stalled=True
        )
    except RlgateError as exc:
        why = f"{type(exc).__name__}: {exc.message}"
        if "manifest" in locals() and _stop_job(spec, manifest) is None:
            why += f"; the job could not be cancelled: its worktree {tree} is kept"
        else:
            _remove_worktree(spec.repo, tree)
        return _infra(spec, commit, attempt, run_dir, why)
    facts = {
        "hardware": f"{manifest.nodes}n{manifest.gpus_per_node}g",
        "commits": {"nemo_rl": commit}
        | ({"nemo_gym": manifest.gym.commit} if manifest.gym.commit != "unknown" else {}),
    }
    status = run_result(watched)
    if watched.exit_code is ExitCode.INFRA or watched.status in (
        RunStatus.STOPPED_SHORT,
        RunStatus.LOST,
    ):
        message = watched.message
        stopped = _stop_job(spec, watched.manifest)
        if stopped is None:
            message += f"; the job could not be cancelled: its worktree {tree} is kept"
        else:
            _remove_worktree(spec.repo, tree)
            if stopped != "ended":
                message += f"; {stopped}"
        out = _infra(spec, commit, attempt, run_dir, message)
        out.results, out.hardware, out.commits = [status], facts["hardware"], facts["commits"]
        return out
    _remove_worktree(spec.repo, tree)
    if watched.status is not RunStatus.COMPLETED:
        if (why := died_for_infra(watched.manifest)) is not None:
            out = _infra(spec, commit, attempt, run_dir, f"{watched.message} ({why})")
            out.results, out.hardware, out.commits = [status], facts["hardware"], facts["commits"]
            return out
        # it trained, then exited with its own status and no infrastructure cause: the code
        return StepOutcome(commit, attempt, Attempt.BAD, watched.message, run_dir,
                           [status], None, **facts)  # fmt: skip
    try:
        gate = load_plan(spec.recipe, max_steps=spec.max_steps, overrides=spec.overrides)
        inputs = load_inputs(gate, watched.manifest.log_dir)
        report = run_gate(gate, inputs, spec.tiers)
    except RlgateError as exc:
        out = _infra(spec, commit, attempt, run_dir, f"metrics unreadable: {exc.message}")
        out.results, out.hardware, out.commits = [status], facts["hardware"], facts["commits"]
        return out
    failed = [r.name for r in report.results if not r.passed]
    verdict = Attempt.GOOD if report.passed else Attempt.BAD
    message = "gate passed" if report.passed else f"gate failed: {', '.join(failed) or 'no check'}"
    results = [status, *report.results, *report.skipped]
    return StepOutcome(commit, attempt, verdict, message, run_dir, results, inputs.run, **facts)


def remove_stale_worktrees(spec: BisectSpec) -> list[str]:
    """Remove this bisection's worktrees an interrupted step left whose job has ended.

    A worktree whose run has a manifest and a job the backend still reports running (or
    cannot be asked about) is kept. Returns the names removed.
    """
    from rlgate.launch.manifest import MANIFEST_NAME, load_manifest
    from rlgate.launch.plan import backend_for

    root = spec.work_dir / "worktrees"
    removed: list[str] = []
    if not root.is_dir():
        return removed
    for tree in sorted(root.iterdir()):
        run_dir = spec.work_dir / "runs" / tree.name
        if (run_dir / MANIFEST_NAME).exists():  # written before anything is submitted
            try:
                manifest = load_manifest(run_dir)
                if manifest.job_ids:
                    state = backend_for(manifest.backend, spec.site).poll(manifest)
                    if not state.phase.terminal:
                        continue  # its job still runs from the tree
            except RlgateError:
                continue  # cannot tell: the job may still run from the tree
        if _remove_worktree(spec.repo, tree):
            removed.append(tree.name)
    return removed


def _next_attempt(spec: BisectSpec, commit: str, recorded: int) -> int:
    """The first attempt number after the recorded ones whose run dir and worktree are free."""
    attempt = recorded + 1
    while any((spec.work_dir / d / f"{commit[:12]}-{attempt}").exists() for d in _STEP_DIRS):
        attempt += 1
    return attempt


def run_bisect(
    spec: BisectSpec,
    log: StepLog,
    *,
    on_event: Callable[[str], None] = lambda _: None,
    step: Callable[[BisectSpec, str, int], StepOutcome] = run_step,
) -> BisectResult:
    """Narrow good..bad to the first bad commit, resuming from ``log``'s recorded attempts."""
    if stale := remove_stale_worktrees(spec):
        on_event(f"removed {len(stale)} worktree(s) an interrupted step left: {', '.join(stale)}")
    recorded = {c: list(a) for c, a in log.attempts().items() if c in spec.commits}
    verdicts: dict[str, Verdict] = {}
    for commit, attempts in recorded.items():
        if (v := verdict_of(attempts, spec.retries)) is not None:
            verdicts[commit] = v
    if verdicts:
        on_event(f"resumed: {len(verdicts)} commit(s) judged in the history")
    ran: list[StepOutcome] = []
    while (state := narrow(spec.commits, verdicts)).next is not None:
        commit = state.next
        attempts = recorded.setdefault(commit, [])
        while (verdict := verdict_of(attempts, spec.retries)) is None:
            number = _next_attempt(spec, commit, len(attempts))
            on_event(f"testing {commit[:12]} (attempt {len(attempts) + 1}/{spec.retries + 1})")
            outcome = step(spec, commit, number)
            log.record(outcome)
            ran.append(outcome)
            attempts.append(outcome.verdict)
            on_event(f"{commit[:12]}: {outcome.verdict.value}: {outcome.message}")
        verdicts[commit] = verdict
        if verdict is Verdict.SKIP:
            on_event(f"{commit[:12]}: skipped (infrastructure on {len(attempts)} attempt(s))")
    return BisectResult(state, verdicts, ran)


def default_work_dir(site: SiteConfig, recipe: str, good: str, bad: str) -> Path:
    """``<runs_root>/bisect-<recipe>-<good12>-<bad12>`` (the steps' runs and worktrees)."""
    root = Path(site.runs_root or "rlgate-runs")
    return root / f"bisect-{recipe}-{good[:12]}-{bad[:12]}"
