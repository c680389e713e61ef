"""``rlgate check-run``, ``launch``, ``watch``, ``budget``, ``bench rollout`` (tiers 2-3, runs).

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into the
library; errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from rlgate.bench.limits import MAX_PARSER_LENGTHS, MAX_PARSER_TOKENS, MAX_REPEATS, MAX_TURNS
from rlgate.cli.history import (
    add_record_options,
    context_for,
    manifest_facts,
    open_db,
    record,
    refuse_recorded,
)
from rlgate.core.errors import EXIT_ORDER_TEXT, ExitCode, LaunchError, RlgateError, worst_exit_code
from rlgate.core.options import (
    BAND_RUN,
    BASELINE,
    MAX_STEPS,
    RECIPE,
    ROLLOUTS,
    SYNC_RUN,
    TOKENIZERS,
    Extend,
    add_renamed,
)
from rlgate.core.validate import int_in, poll_seconds, positive_float, positive_int

# rlgate.launch.watch.DEFAULT_STALL_FACTOR, kept here so building the parser imports nothing
# heavy (tests/unit/test_watch.py checks the two agree).
STALL_FACTOR = 5.0

__all__ = ["add_bench", "add_budget", "add_check_run", "add_launch", "add_watch"]

# --- rlgate check-run ----------------------------------------------------------


def add_check_run(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate check-run``."""
    p = sub.add_parser(
        "check-run",
        help="judge a NeMo RL run against a recipe's convergence/perf bounds",
        description="Exit 0 when every check passes, 1 when one fails or errors, 2 on bad "
        "input (also when the recipe declares no gates, or every check was skipped).",
    )
    p.add_argument(
        "run",
        metavar="LOG_DIR_OR_METRICS_JSON",
        help="NeMo RL logger.log_dir, an event file, a metrics.json, an MLPerf log, or an "
        "MLflow store (mlflow.db, sqlite:///..., mlruns/, http://host:port; #run_id or "
        "#experiment/run name picks the run)",
    )
    RECIPE.add_to(p, required=True)
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="NeMo RL (Hydra) override applied to the recipe (repeatable)",
    )
    for option in (BASELINE, ROLLOUTS, MAX_STEPS, BAND_RUN, SYNC_RUN):
        option.add_to(p)
    p.add_argument(
        "--condition",
        action="append",
        default=[],
        metavar="COND",
        help='a NeMo RL tests/check_metrics.py condition, e.g. \'mean(data["train/reward"]) '
        "> 0.5' (repeatable; added to the recipe's rlgate.convergence.checks, so a plain NeMo "
        "RL config works as --recipe; completion is still judged)",
    )
    p.add_argument(
        "--tier",
        action="append",
        choices=["convergence", "perf"],
        help="restrict to a tier (repeatable; default: both)",
    )
    p.add_argument("--json", dest="json_out", help="write the results as JSON here")
    p.add_argument("--junit", dest="junit_out", help="write the results as JUnit XML here")
    add_record_options(p)
    p.set_defaults(func=_cmd_check_run)


def _cmd_check_run(args: argparse.Namespace) -> int:
    import dataclasses

    from rlgate.checks.plan import load_inputs, load_plan, render_junit, render_table, run_gate
    from rlgate.core.io import write_json_atomic, write_text_atomic
    from rlgate.core.results import Tier

    # a bad database (an empty --db too) stops before any work
    store = open_db(args.db) if args.db is not None else None
    plan = load_plan(
        args.recipe, max_steps=args.max_steps, overrides=args.override, conditions=args.condition
    )
    facts = _check_run_facts(args, plan)
    context = None
    if store is not None:
        from rlgate.runs.registry import shown_run

        context = context_for(
            args,
            facts,
            default_recipe=plan.recipe,
            inputs=[shown_run(args.run)],  # a store URL's password is never recorded
            overrides=args.override,
        )
        refuse_recorded(store, context)
    inputs = load_inputs(
        plan,
        args.run,
        baseline=args.baseline,
        rollouts=args.rollouts,
        band_runs=args.band_run,
        sync_run=args.sync_run,
    )
    tiers = tuple(Tier(t) for t in args.tier) if args.tier else (Tier.CONVERGENCE, Tier.PERF)
    band_line = None
    if store is not None and context is not None and _band_from_history(plan, args, tiers):
        from rlgate.history.bands import promoted_band

        assert plan.gate.band is not None
        band = promoted_band(
            store,
            recipe=context.recipe,
            hardware=context.hardware,
            overrides=args.override,
            metrics=list(plan.gate.band.metrics),
            min_runs=plan.gate.band.min_runs,
        )
        inputs = dataclasses.replace(inputs, band_runs=band.runs, band_origin=band.origin)
        band_line = band.describe()
    elif inputs.band_runs and plan.gate.band is not None:
        source = "--band-run" if args.band_run else "rlgate.band.runs"
        band_line = (
            f"reference band: {len(inputs.band_runs)} run(s) from {source} "
            f"(minimum {plan.gate.band.min_runs})"
        )
    report = dataclasses.replace(run_gate(plan, inputs, tiers), hardware=facts.hardware)
    print(render_table(report), end="")
    if band_line and any(r.name.startswith(("band_curve:", "band_mean:")) for r in report.results):
        print(band_line)
    if args.json_out:  # kept off every input by the command's output guard (cli.outputs)
        write_json_atomic(args.json_out, report.to_dict())
    if args.junit_out:
        write_text_atomic(args.junit_out, render_junit(report))
    if store is not None and context is not None:
        from rlgate.history.ingest import steps_of

        with store:
            record(store, context, [*report.results, *report.skipped], steps_of(inputs.run))
    return ExitCode.OK if report.passed else ExitCode.FAIL


def _check_run_facts(args: argparse.Namespace, plan: Any) -> Any:
    """What the judged run was: the recipe, then its manifest, then the recipe's shape.

    Judged with this recipe: its name and hash; hardware: ``--hardware``, else the launched
    shape (the manifest's), else the recipe's (overrides applied). The hardware is also
    written into check-run's JSON and JUnit, so ``rlgate triage`` compares the run with the
    nightlies of the same hardware without being told.
    """
    from rlgate.history.ingest import Facts, recipe_identity

    _, sha = recipe_identity(args.recipe)
    facts = Facts(recipe=plan.recipe, recipe_sha256=sha).merge(manifest_facts(args.run))
    chosen = Facts(hardware=args.hardware).merge(facts)
    return chosen.merge(Facts(hardware=plan.context.cluster.shape))


def _band_from_history(plan: Any, args: argparse.Namespace, tiers: Sequence[Any]) -> bool:
    """Band checks to run, and neither --band-run nor rlgate.band.runs gives their runs."""
    from rlgate.checks.plan import Need

    band = plan.gate.band
    wanted = any(c.need is Need.BAND and c.tier in tiers for c in plan.checks)
    return wanted and band is not None and not band.runs and not args.band_run


# --- rlgate launch / watch / budget ----------------------------------------------


def add_launch(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate launch``."""
    p = sub.add_parser(
        "launch",
        help="start a recipe's NeMo RL run on Slurm (ray.sub), a Ray cluster, or locally",
        description="Exit 0 when submitted (or, with --watch, completed), 1 when the recipe "
        "check fails, 2 on bad input, 3 when the cluster is unreachable.",
    )
    p.add_argument("recipe", help="NeMo RL config YAML (a defaults: chain is followed)")
    p.add_argument("overrides", nargs="*", help="NeMo RL (Hydra) overrides: a.b=c, ++a.b=c, ~a.b")
    p.add_argument(
        "--backend",
        required=True,
        choices=["slurm", "ray", "local"],
        help="slurm: sbatch NeMo RL's ray.sub (the site config's slurm: block); ray: submit "
        "to a Ray cluster's job API (--ray-address or the site's); local: a subprocess here",
    )
    p.add_argument(
        "--nemo-rl-dir",
        default=os.environ.get("RLGATE_NEMO_RL_DIR"),
        help="the NeMo RL checkout the run starts from (default: $RLGATE_NEMO_RL_DIR, else "
        "the site config's nemo_rl_dir); with --backend ray, its path on the head node",
    )
    p.add_argument("--site", default=os.environ.get("RLGATE_SITE"), help="site config YAML")
    p.add_argument("--steps", type=positive_int, help="grpo.max_num_steps (default: the recipe's)")
    p.add_argument(
        "--steps-per-run", type=positive_int, help="steps one job reaches (Slurm chains)"
    )
    p.add_argument("--minutes", type=positive_int, help="time limit of one job (Slurm)")
    p.add_argument("--run-dir", help="new run directory (default: <runs_root>/<recipe>-<time>)")
    p.add_argument("--ray-address", help="Ray job API, http://<head>:8265 (overrides the site)")
    p.add_argument(
        "--entrypoint",
        help="replace `uv run examples/nemo_gym/run_grpo_nemo_gym.py` (shell words), e.g. "
        "'python -m rlgate.testing.standin' for a GPU-free smoke test",
    )
    p.add_argument("--dry-run", action="store_true", help="print the script, submit nothing")
    p.add_argument("--no-check", action="store_true", help="skip the `recipe check` gate")
    TOKENIZERS.add_to(p)
    p.add_argument("--watch", action="store_true", help="then follow the run (rlgate watch)")
    p.add_argument("--interval", type=poll_seconds, default=60.0, help="watch poll interval (s)")
    p.set_defaults(func=_cmd_launch)


def _cmd_launch(args: argparse.Namespace) -> int:
    from rlgate.launch.manifest import Backend
    from rlgate.launch.plan import (
        backend_for,
        launch,
        plan_launch,
        require_pass_env,
        unset_pass_env,
    )
    from rlgate.launch.site import load_site_config, with_ray_address

    site = with_ray_address(load_site_config(args.site), args.ray_address)
    plan = plan_launch(
        args.recipe,
        backend=Backend(args.backend),
        site=site,
        overrides=args.overrides,
        steps=args.steps,
        steps_per_run=args.steps_per_run,
        minutes=args.minutes,
        run_dir=args.run_dir,
        nemo_rl_dir=args.nemo_rl_dir,
        entrypoint=_entrypoint(args.entrypoint),
    )
    script = backend_for(plan.backend, site).render(plan)
    if not args.dry_run:  # the submit reads their values: refused before the recipe gate
        require_pass_env(plan.pass_env)
    overrides = [*plan.launch_overrides, *plan.user_overrides]
    if not args.no_check and not _launch_gate(args.recipe, overrides, args.tokenizers):
        return ExitCode.FAIL
    hours = "n/a (no --minutes)" if plan.gpu_hours is None else f"{plan.gpu_hours:g}"
    cost = f"{plan.runs} run(s) x {plan.nodes} nodes x {plan.gpus_per_node} GPUs"
    if args.dry_run:
        print(script, end="")
        print(f"# rlgate dry run, nothing submitted: {cost}, GPU-hours {hours}")
        if absent := unset_pass_env(plan.pass_env):
            print(
                f"rlgate: warning: the site config's pass_env names {absent}, which are not "
                "set here: the launch refuses until they are exported",
                file=sys.stderr,
            )
        return ExitCode.OK
    manifest = launch(plan)
    print(f"launched {manifest.run_name} on {args.backend}: job(s) {' '.join(manifest.job_ids)}")
    print(f"run dir {manifest.run_dir} ({cost}, GPU-hours {hours})")
    if args.watch:
        return _watch_dirs([manifest.run_dir], interval=args.interval, timeout=None, follow=False)
    return ExitCode.OK


def _entrypoint(text: str | None) -> list[str] | None:
    import shlex

    if not text:
        return None
    try:
        words = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise LaunchError(f"--entrypoint {text!r} is not a shell word list: {exc}") from None
    if not words:
        raise LaunchError("--entrypoint is empty")
    return words


def _launch_gate(recipe: str, overrides: Sequence[str], tokenizers: str | None) -> bool:
    from rlgate.checks.recipe import check_recipe_file

    report = check_recipe_file(recipe, overrides, tokenizers)
    for finding in report.errors:
        print(finding, file=sys.stderr)
    for check in report.skipped:  # e.g. a parser from a plugin: said, not silently passed
        print(f"NOT RUN {check.name}: {check.reason}", file=sys.stderr)
    if not report.ok:
        print(
            f"rlgate: {report.recipe.name}: recipe check failed ({len(report.errors)} errors); "
            "nothing launched (--no-check skips the gate)",
            file=sys.stderr,
        )
    return report.ok


def add_watch(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate watch``."""
    p = sub.add_parser(
        "watch",
        help="follow launched runs to their end; non-zero if one died, stopped short or stalled",
        description="Exit 0 when every run completed its target step, 1 when one died or "
        "stopped short, 3 on an infrastructure failure, a timeout or a stalled run, 2 on an "
        "invalid run directory or manifest. With several runs: the worst of them, in the "
        f"order {EXIT_ORDER_TEXT} (a failed run is never hidden by a stalled one).",
    )
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="directory from rlgate launch")
    p.add_argument("--interval", type=poll_seconds, default=60.0, help="seconds between polls")
    add_renamed(
        p,
        "--timeout-minutes",
        "--timeout",
        type=positive_float,
        metavar="MIN",
        help="give up after this many minutes (exit 3)",
    )
    p.add_argument("--follow", action="store_true", help="print the driver log as it grows")
    p.add_argument(
        "--stall-factor",
        type=positive_float,
        default=STALL_FACTOR,
        help="a running job with no new step for this many times its median step time is "
        f"stalled (exit 3; default {STALL_FACTOR:g})",
    )
    p.add_argument(
        "--stall-minutes",
        type=positive_float,
        help="... or with no new step for this many minutes (also before its first step)",
    )
    p.add_argument(
        "--cancel-stalled", action="store_true", help="cancel a stalled job through its backend"
    )
    p.add_argument(
        "--junit",
        dest="junit_out",
        help="write each verdict as the run_status check (JUnit; infra causes in its evidence)",
    )
    p.set_defaults(func=_cmd_watch)


def _cmd_watch(args: argparse.Namespace) -> int:
    timeout = args.timeout_minutes * 60 if args.timeout_minutes is not None else None
    stall = {
        "stall_factor": args.stall_factor,
        "stall_minutes": args.stall_minutes,
        "cancel_stalled": args.cancel_stalled,
    }
    return _watch_dirs(
        args.run_dirs,
        interval=args.interval,
        timeout=timeout,
        follow=args.follow,
        junit=args.junit_out,
        **stall,
    )


def _watch_dirs(
    run_dirs: Sequence[str],
    *,
    interval: float,
    timeout: float | None,
    follow: bool,
    junit: str | None = None,
    **stall: Any,
) -> int:
    import time

    from rlgate.core.io import write_text_atomic
    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.launch.watch import run_result, watch_run

    codes: list[int] = []
    cases = []
    for run_dir in run_dirs:
        name = os.path.basename(os.path.normpath(run_dir))

        def event(text: str, name: str = name) -> None:
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {text}", flush=True)

        try:
            result = watch_run(
                run_dir,
                interval=interval,
                timeout=timeout,
                on_event=event,
                on_log=(lambda line: print(line, flush=True)) if follow else None,
                **stall,
            )
        except RlgateError as exc:
            print(f"rlgate: error: {name}: {exc}", file=sys.stderr)
            codes.append(exc.exit_code)
            continue
        print(f"{name}: {result.status.value.upper()}: {result.message}")
        codes.append(result.exit_code)
        recipe = result.manifest.recipe.name
        facts = {"recipe": recipe, "run_dir": result.manifest.run_dir}
        check = run_result(result)
        cases.append(JunitCase.of(check, classname=f"rlgate.convergence.{recipe}", facts=facts))
    if junit:  # never in a run directory watched (the command's output guard, cli.outputs)
        suite = JunitSuite.of("rlgate.watch", cases)
        write_text_atomic(junit, write_junit([suite]))
    return worst_exit_code(codes)


def add_budget(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate budget``."""
    p = sub.add_parser(
        "budget",
        help="sum the GPU-hours of a nightly list; fail over the cap",
        description="Exit 0 within the cap, 1 over it, 2 on an invalid list.",
    )
    p.add_argument("nightly", help="nightly list YAML, e.g. ci/nightly.yaml")
    p.add_argument(
        "--cap", type=positive_float, help="GPU-hour cap (default: the file's cap_gpu_hours)"
    )
    p.add_argument(
        "--list",
        action="store_true",
        help="print one tab-separated line per run (name, recipe, steps, steps_per_run, "
        "minutes, baseline, overrides) for shell loops; the summary goes to stderr",
    )
    p.set_defaults(func=_cmd_budget)


def _cmd_budget(args: argparse.Namespace) -> int:
    from rlgate.launch.budget import evaluate_budget, render_budget, render_run_table

    budget = evaluate_budget(args.nightly, cap=args.cap)
    if args.list:
        print(render_run_table(budget.lines), end="")
        print(render_budget(budget, verbose=False), end="", file=sys.stderr)
    else:
        print(render_budget(budget), end="")
    return ExitCode.OK if budget.within_cap else ExitCode.FAIL


# --- rlgate bench rollout ------------------------------------------------------

_BENCH_DOC = (
    "CPU cost of the rollout path per turn on the recipe's real tokenizer, template, vLLM "
    "parsers and nemo-gym code: full re-render + re-tokenize vs incremental append, Gym "
    "conversion, streaming vs one-shot parsing (docs/rollout-path.md). Exit codes: 0 ok, "
    "1 a metric regressed beyond the baseline's noise, 2 usage/invalid input."
)


def add_bench(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate bench``."""
    p = sub.add_parser("bench", help="CPU benchmarks of the rollout path (no GPU)")
    bsub = p.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    r = bsub.add_parser("rollout", help="per-turn rollout-path overhead", description=_BENCH_DOC)
    RECIPE.add_to(r, required=True)
    r.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="Hydra override"
    )
    r.add_argument(
        "--turns",
        type=int_in(1, MAX_TURNS),
        help=f"model calls (default: agent_max_turns; at most {MAX_TURNS:,})",
    )
    r.add_argument(
        "--parser-lengths",
        type=int_in(1, MAX_PARSER_TOKENS),
        action=Extend,
        metavar="TOKENS",
        help="model-output lengths for the parser bench (default: 1024 4096 16384; at most "
        f"{MAX_PARSER_LENGTHS} lengths of at most {MAX_PARSER_TOKENS:,} tokens)",
    )
    r.add_argument(
        "--repeats",
        type=int_in(1, MAX_REPEATS),
        default=3,
        help=f"timed passes (default 3, at most {MAX_REPEATS})",
    )
    TOKENIZERS.add_to(r)
    r.add_argument(
        "--baseline",
        help="stored baseline (benchmarks/rollout_baselines/<key>.json) or an earlier --json "
        "of the same recipe, configuration, library versions and CPU",
    )
    r.add_argument("--json", dest="json_out", help="write the numbers and curves as JSON here")
    r.add_argument("--plot", dest="plot_out", help="draw the curves to this PNG")
    r.set_defaults(func=_cmd_bench_rollout)


def _cmd_bench_rollout(args: argparse.Namespace) -> int:
    import logging

    from rlgate.bench.gate import compare_metrics, environment, load_baseline
    from rlgate.bench.report import (
        bench_summary,
        plot_bench,
        render_bench,
        render_verdicts,
        verdict_rows,
    )
    from rlgate.bench.rollout import (
        CLI_PARSER_LENGTHS,
        bench_config,
        prepare_bench,
        run_rollout_bench,
    )
    from rlgate.checks.registry import load_recipe
    from rlgate.core.errors import MetricsError
    from rlgate.core.io import write_json_atomic
    from rlgate.core.results import Outcome
    from rlgate.serving.setup import serving_setup

    recipe = load_recipe(args.recipe, args.override)
    config = bench_config(recipe, args.turns, args.parser_lengths or CLI_PARSER_LENGTHS)
    entry = None
    if args.baseline:  # checked before minutes of measuring
        baseline = load_baseline(args.baseline)
        baseline.require_environment(environment())
        entry = baseline.entry(recipe.name, config.as_dict())
        if entry is None:
            raise MetricsError(
                f"{args.baseline} has no entry for {recipe.name} with {config.as_dict()}",
                hint="use the same --turns/--parser-lengths as the baseline, or record one",
            )
    logging.getLogger("vllm").setLevel(logging.CRITICAL)  # per-parse tracebacks, not results
    inputs = prepare_bench(serving_setup(recipe, args.tokenizers), config)
    summary = bench_summary(run_rollout_bench(inputs, args.repeats))
    comparisons = compare_metrics(summary["metrics"], entry.metrics) if entry else []
    results = [c.result() for c in comparisons]
    if comparisons:
        summary["gate"] = verdict_rows(comparisons)
    print(render_bench(summary))
    if results:
        print(render_verdicts(results), end="")
    if args.json_out:  # both kept off every input by the command's output guard
        write_json_atomic(args.json_out, summary)
    if args.plot_out:
        plot_bench(summary, args.plot_out)
    failed = any(r.outcome is Outcome.FAIL for r in results)
    return ExitCode.FAIL if failed else ExitCode.OK
