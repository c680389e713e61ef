"""``rlgate bisect``: narrow good..bad of a NeMo RL checkout to the first commit failing a gate.

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing, the history as the
bisection's step log (:class:`HistoryLog`), and thin calls into :mod:`rlgate.launch.bisect`;
errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlgate.core.errors import ExitCode
from rlgate.core.options import MAX_STEPS, RECIPE
from rlgate.core.validate import int_in, poll_seconds, positive_float, positive_int

if TYPE_CHECKING:
    from rlgate.history.store import Store
    from rlgate.launch.bisect import Attempt, StepOutcome

__all__ = ["HistoryLog", "add_bisect"]

MAX_RETRIES = 10


def add_bisect(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate bisect``."""
    p = sub.add_parser(
        "bisect",
        help="find the first NeMo RL commit whose run fails a recipe's gate (launch + check-run "
        "at midpoints of good..bad)",
        description="Each step runs the recipe with the launcher from a detached git worktree "
        "of a midpoint commit and judges it with the recipe's convergence/perf gate; steps are "
        "recorded in the history (branch bisect/<recipe>/<good>..<bad>), so a rerun resumes. "
        "Exit 0 when the first bad commit is found (or with --dry-run), 2 on bad input (a SHA "
        "that is not a commit, --good not an ancestor of --bad), 3 when commits skipped for "
        "infrastructure leave a range.",
    )
    RECIPE.add_to(p, required=True)
    p.add_argument("--good", required=True, metavar="SHA", help="a commit whose run passes")
    p.add_argument("--bad", required=True, metavar="SHA", help="a later commit whose run fails")
    p.add_argument(
        "--nemo-rl-dir",
        default=os.environ.get("RLGATE_NEMO_RL_DIR"),
        help="the NeMo RL git checkout (default: $RLGATE_NEMO_RL_DIR); its files and HEAD are "
        "never changed: each step runs from a worktree of its commit",
    )
    p.add_argument(
        "--backend",
        required=True,
        choices=["slurm", "ray", "local"],
        help="as rlgate launch --backend (slurm: the site's ray.sub; ray: a Ray job; local)",
    )
    p.add_argument("--site", default=os.environ.get("RLGATE_SITE"), help="site config YAML")
    p.add_argument(
        "--db",
        metavar="DB",
        help="history database the steps are recorded in and resumed from (SQLite file or "
        "postgresql://...; default: $RLGATE_DB, else $XDG_DATA_HOME/rlgate/history.db)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    MAX_STEPS.add_to(p)
    p.add_argument(
        "--retries",
        type=int_in(0, MAX_RETRIES),
        default=1,
        help="reruns of a step that fails for infrastructure before its commit is skipped "
        f"(default 1, at most {MAX_RETRIES})",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="NeMo RL (Hydra) override of every step's run and gate (repeatable)",
    )
    p.add_argument("--minutes", type=positive_int, help="time limit of one job (Slurm)")
    p.add_argument(
        "--entrypoint",
        help="as rlgate launch --entrypoint, e.g. 'python -m rlgate.testing.standin'",
    )
    p.add_argument(
        "--work-dir",
        help="the steps' run directories and worktrees (default: "
        "<runs_root>/bisect-<recipe>-<good12>-<bad12>)",
    )
    p.add_argument("--interval", type=poll_seconds, default=60.0, help="watch poll interval (s)")
    p.add_argument(
        "--timeout-minutes",
        type=positive_float,
        metavar="MIN",
        help="a step still running after this long is an infrastructure attempt",
    )
    p.add_argument(
        "--tier",
        action="append",
        choices=["convergence", "perf"],
        help="the gate's tiers judged at each step (repeatable; default: both)",
    )
    p.set_defaults(func=_cmd_bisect)


def _spec(args: argparse.Namespace) -> Any:
    from rlgate.cli.runs import _entrypoint
    from rlgate.core.errors import LaunchError
    from rlgate.core.results import Tier
    from rlgate.launch.bisect import BisectSpec, commit_range, default_work_dir, resolve_commit
    from rlgate.launch.manifest import Backend
    from rlgate.launch.site import load_site_config

    if not args.nemo_rl_dir:
        raise LaunchError("rlgate bisect needs --nemo-rl-dir (a NeMo RL git checkout)")
    repo = Path(args.nemo_rl_dir).expanduser().resolve()
    if not repo.is_dir():
        raise LaunchError(f"--nemo-rl-dir {repo} is not a directory")
    good = resolve_commit(repo, args.good, "--good")
    bad = resolve_commit(repo, args.bad, "--bad")
    commits = commit_range(repo, good, bad)
    site = load_site_config(args.site)
    recipe = Path(args.recipe).expanduser().resolve()
    work = Path(args.work_dir) if args.work_dir else default_work_dir(site, recipe.stem, good, bad)
    tiers = tuple(Tier(t) for t in args.tier) if args.tier else (Tier.CONVERGENCE, Tier.PERF)
    entry = _entrypoint(args.entrypoint)
    return BisectSpec(
        recipe=recipe,
        repo=repo,
        good=good,
        bad=bad,
        commits=tuple(commits),
        backend=Backend(args.backend),
        site=site,
        work_dir=work.expanduser().resolve(),
        overrides=tuple(args.override),
        max_steps=args.max_steps,
        minutes=args.minutes,
        entrypoint=tuple(entry) if entry else None,
        retries=args.retries,
        interval=args.interval,
        timeout=args.timeout_minutes * 60 if args.timeout_minutes is not None else None,
        tiers=tiers,
    )


def _cmd_bisect(args: argparse.Namespace) -> int:
    from rlgate.history.ingest import recipe_identity
    from rlgate.launch.bisect import Verdict, bisect_branch, narrow, run_bisect, subjects

    spec = _spec(args)
    names = subjects(spec.repo, [spec.good, *spec.commits])
    # the first step's launch, planned before anything runs: a bad recipe, override or site
    # is exit 2 here, never an "infrastructure" skip of every commit
    first = narrow(spec.commits, {}).next
    shown = f"{(first or spec.bad)[:12]}-1" if args.dry_run else "probe"  # never created
    probe = spec.plan(spec.work_dir / "runs" / shown, spec.repo)
    from rlgate.launch.plan import backend_for

    backend_for(probe.backend, spec.site).render(probe)  # the launch's own backend check
    if args.dry_run:
        return _dry_run(spec, probe, first, names)
    name, sha = recipe_identity(spec.recipe)
    branch = bisect_branch(name, spec.good, spec.bad)
    from rlgate.cli.history import open_db

    store = open_db(args.db if args.db is not None else os.environ.get("RLGATE_DB"))
    with store:
        log = HistoryLog(store, branch, name, sha, _recorded_overrides(spec), spec.identity())
        result = run_bisect(spec, log, on_event=_event)
    ran, judged = len(result.ran), len(result.verdicts)
    print(
        f"bisect {name} on branch {branch} of {store.shown}: {ran} run(s) now, "
        f"{judged} commit(s) judged in all"
    )
    culprits = result.narrowing.culprits
    if len(culprits) == 1:
        print(f"first bad commit: {culprits[0]} {names.get(culprits[0], '')}".rstrip())
    else:
        skipped = [c[:12] for c in culprits if result.verdicts.get(c) is Verdict.SKIP]
        print(
            f"the first bad commit is one of {len(culprits)} (skipped for infrastructure: "
            f"{', '.join(skipped)}):"
        )
        for commit in culprits:
            print(f"  {commit} {names.get(commit, '')}".rstrip())
    return result.exit_code


def _dry_run(spec: Any, probe: Any, first: str | None, names: dict[str, str]) -> int:
    from rlgate.launch.bisect import expected_steps
    from rlgate.launch.plan import backend_for

    n = len(spec.commits)
    steps = expected_steps(n)
    # the worst case: skips leave every commit but --bad to test, each on every attempt
    worst = max(n - 1, 0) * (spec.retries + 1)
    print(f"bisect {spec.recipe.stem}: {n} commit(s) after --good, --bad last (first parents):")
    print(f"  good {spec.good[:12]} {names.get(spec.good, '')}".rstrip())
    for commit in spec.commits:
        mark = "bad" if commit == spec.bad else ""
        print(f"  {mark:<4} {commit[:12]} {names.get(commit, '')}".rstrip())
    per = probe.gpu_hours
    cost = f"{probe.runs} run(s) x {probe.nodes} nodes x {probe.gpus_per_node} GPUs"
    if per is None:
        hours = "GPU-hours n/a (no --minutes)"
    else:
        hours = (
            f"GPU-hours {per:g} per step, {per * steps:g} for {steps} step(s) (at most "
            f"{per * worst:g} for {worst} run(s): every commit but --bad tested, with "
            f"{spec.retries} infra retr(y/ies) each)"
        )
    print(f"expected steps: {steps} (ceil(log2 {n})); each step {cost}; {hours}")
    if first is not None:
        # rendered from the checkout (the backend reads ray.sub there), shown as the step
        # runs it: from its worktree, a checkout of the same files at the step's commit
        tree = spec.work_dir / "worktrees" / f"{first[:12]}-1"
        script = backend_for(probe.backend, spec.site).render(probe)
        print(f"# the first step ({first[:12]}), run from the worktree {tree}:")
        print(script.replace(str(spec.repo), str(tree)), end="")
    print("# rlgate dry run: nothing checked out, launched or recorded")
    return ExitCode.OK


def _event(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] bisect: {text}", flush=True)


def _recorded_overrides(spec: Any) -> tuple[str, ...]:
    """What the steps are recorded as judged with: the overrides and --max-steps."""
    steps = (f"grpo.max_num_steps={spec.max_steps}",) if spec.max_steps is not None else ()
    return (*spec.overrides, *steps)


class HistoryLog:
    """The history as a bisection's step log: one recorded run per attempt, on its branch.

    Only runs of this recipe file (its hash) judged with the same overrides and the same
    :meth:`~rlgate.launch.bisect.BisectSpec.identity` (tiers, entrypoint, backend, site)
    count, so a bisection rerun with other options starts over rather than reusing other
    verdicts.
    """

    def __init__(
        self,
        store: Store,
        branch: str,
        recipe: str,
        sha: str | None,
        overrides: tuple[str, ...],
        identity: str | None = None,
    ) -> None:
        self.store, self.branch, self.recipe = store, branch, recipe
        self.sha, self.overrides, self.identity = sha, overrides, identity

    def attempts(self) -> dict[str, list[Attempt]]:
        """Commit -> its recorded attempts, oldest first."""
        from rlgate.core.results import Outcome
        from rlgate.launch.bisect import IDENTITY, STEP_CHECK, Attempt

        found: dict[str, list[Attempt]] = {}
        runs = self.store.runs(recipe=self.recipe, branch=self.branch)
        for run in sorted(runs, key=lambda r: r.context.recorded_at):
            ctx = run.context
            if ctx.recipe_sha256 != self.sha or tuple(ctx.overrides) != self.overrides:
                continue
            commit = ctx.commits.get("nemo_rl")
            step = next((r for r in run.results if r.name == STEP_CHECK), None)
            if commit is None or step is None or step.evidence.get(IDENTITY) != self.identity:
                continue
            verdict = {Outcome.PASS: Attempt.GOOD, Outcome.FAIL: Attempt.BAD}.get(
                step.outcome, Attempt.INFRA
            )
            found.setdefault(commit, []).append(verdict)
        return found

    def record(self, outcome: StepOutcome) -> None:
        """Record one attempt (its gate's results and per-step metrics too)."""
        from rlgate.cli.history import record
        from rlgate.core.versions import tested_versions
        from rlgate.history.ingest import make_context, steps_of

        number = outcome.attempt
        while self.store.exists(run_id := f"{self.branch}@{outcome.commit[:12]}#{number}"):
            number += 1
        versions = {k: v for k, v in tested_versions().items() if v != "absent"}
        context = make_context(
            run_id=run_id,
            recipe=self.recipe,
            recipe_sha256=self.sha,
            branch=self.branch,
            commits=outcome.commits or {"nemo_rl": outcome.commit},
            versions=versions,
            hardware=outcome.hardware,
            overrides=self.overrides,
            source=str(outcome.run_dir),
        )
        steps = steps_of(outcome.run) if outcome.run is not None else {}
        record(self.store, context, [outcome.step_result(self.identity), *outcome.results], steps)
        sys.stdout.flush()
