"""``rlgate swe compare | power | eval`` (tier 4).

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into the
library; errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rlgate.cli import term as _cli_term
from rlgate.cli.history import (
    SWE_RECORD_DB_HELP,
    add_record_options,
    context_for,
    open_db,
    record,
    refuse_recorded,
)
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.options import (
    SWE_AFTER,
    SWE_ALPHA,
    SWE_BEFORE,
    SWE_DATASET,
    SWE_MARGIN_PP,
    SWE_MAX_INFRA_ERROR_RATE,
    Extend,
    add_recipe_or_name,
    add_renamed,
)
from rlgate.core.validate import float_in, int_in

__all__ = ["add_swe"]

# --- rlgate swe ------------------------------------------------------------------

_SWE_EXIT_DOC = (
    "exit codes: 0 improved or no_significant_change, 1 regressed, 2 usage/invalid input, "
    "3 inconclusive (infra errors, different instance sets or dataset revisions); "
    "always the full comparison's, also with --exclude"
)


# Bounds of the numeric options (docs/swe-gate.md, section 5), so a bad value stops at
# parsing with exit 2. They equal the library's (a unit test checks), which are not
# imported here: numpy/scipy would load for every rlgate command.
MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000  # swe_compare.MIN_/MAX_RESAMPLES
MAX_SEED = 2**32 - 1  # swe_compare.MAX_SEED
MAX_WORKERS, MAX_TIMEOUT_S = 1024, 7 * 24 * 3600  # harness.MAX_WORKERS / MAX_TIMEOUT_S
MAX_POWER_N = 100_000  # stats.MAX_EXACT_N: instances in a power design
MAX_POWER_SEEDS = 256  # swebench.MAX_RUNS_PER_ARM: runs per arm in a power design
MAX_POWER_VALUES = 50  # values per --n / --discordance / --seeds list
#: Instances enumerated over all exact (one-seed) rows of one `swe power` call.
MAX_POWER_EXACT_WORK = 1_000_000


def _split(text: str) -> str:
    from rlgate.swe.records import check_split

    try:
        return check_split(text)
    except RlgateError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


_SPLIT_HELP = "the dataset split (default: test; an HF slice such as test[:50] also works)"

_POWER_DOC = (
    "The smallest before/after difference in resolve rate (percentage points) an evaluation "
    "of this design detects with the given power: exact McNemar for one seed, a normal "
    "model for more (docs/swe-gate.md). Lists of --n, --discordance and --seeds print one "
    "row per combination. Exit codes: 0 printed, 2 usage/invalid input (a value out of "
    "range, too much exact work), 70 a bug in rlgate"
)


def add_swe(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate swe``."""
    p = sub.add_parser("swe", help="SWE-bench before/after gate (tier 4)")
    swe = p.add_subparsers(dest="swe_command", required=True, metavar="SWE_COMMAND")
    dataset = os.environ.get("RLGATE_SWE_DATASET", "SWE-bench/SWE-bench_Verified")
    c = swe.add_parser("compare", help="compare before/after results", description=_SWE_EXIT_DOC)
    SWE_BEFORE.add_to(c, required=True)
    SWE_AFTER.add_to(c, required=True)
    SWE_DATASET.add_to(c, default=dataset)
    c.add_argument("--split", type=_split, default="test", help=_SPLIT_HELP)
    for option in (SWE_ALPHA, SWE_MARGIN_PP, SWE_MAX_INFRA_ERROR_RATE):
        option.add_to(c)
    c.add_argument(
        "--resamples",
        type=int_in(MIN_RESAMPLES, MAX_RESAMPLES),
        default=10_000,
        help=f"bootstrap/permutation draws ({MIN_RESAMPLES:,}..{MAX_RESAMPLES:,})",
    )
    c.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help="resampling seed")
    c.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="known-broken[:LIST]|flaky",
        help="also compare without these instances, shown beside the full comparison (which "
        "alone gives the verdict): known-broken = every bundled known-broken list, "
        "known-broken:LIST one of them, flaky = instances flipping between runs of one arm "
        "(with --db also between the stored runs of --before-model and --after-model); "
        "repeatable (docs/swe-gate.md)",
    )
    c.add_argument("--json", type=Path, help="write the comparison JSON here")
    c.add_argument("--junit", type=Path, help="write JUnit XML here")
    add_record_options(c, db_help=SWE_RECORD_DB_HELP)
    for arm in ("before", "after"):
        c.add_argument(
            f"--{arm}-model",
            metavar="MODEL",
            help=f"the model of the {arm} arm (with the other arm's): named in every "
            "criterion, so triage keeps each pair of models a series of its own; with --db "
            "its per-instance outcomes are recorded under it (repeated runs of one model show "
            "flaky instances)",
        )
    add_recipe_or_name(c, what="recorded with --db (default: the name swe_gate)")
    c.set_defaults(func=_cmd_swe_compare)
    w = swe.add_parser(
        "power", help="minimum detectable difference for an eval design", description=_POWER_DOC
    )
    w.add_argument(
        "--n",
        type=int_in(1, MAX_POWER_N),
        action=Extend,
        default=[500],
        help=f"instances evaluated (1..{MAX_POWER_N:,}; default 500)",
    )
    w.add_argument(
        "--discordance",
        type=float_in(0, 1, open_lo=True),
        action=Extend,
        default=[0.15],
        help="share of instances resolved by exactly one of two runs, in (0, 1] (same-model "
        "reruns give 0.07-0.15 on Verified; default 0.15)",
    )
    w.add_argument(
        "--seeds",
        type=int_in(1, MAX_POWER_SEEDS),
        action=Extend,
        default=[1],
        help=f"runs per arm (1..{MAX_POWER_SEEDS}; default 1)",
    )
    SWE_ALPHA.add_to(w)
    w.add_argument(
        "--power",
        type=float_in(0, 1, open_lo=True, open_hi=True),
        default=0.8,
        help="probability of detecting the difference, in (0, 1) (default 0.8)",
    )
    w.add_argument(
        "--noise-fraction",
        type=float_in(0, 1),
        default=None,
        help="with --seeds > 1: the share of the one-seed discordance that is sampling noise, "
        "in [0, 1] (default 0.11/0.15)",
    )
    w.add_argument("--json", type=Path, help="also write the rows as JSON here")
    w.set_defaults(func=_cmd_swe_power)
    e = swe.add_parser(
        "eval",
        help="evaluate on SWE-bench: swebench's Docker harness, NeMo Gym or NeMo-Skills",
        description=_EVAL_DOC,
    )
    e.add_argument(
        "--backend",
        choices=["docker", "gym", "nemo-skills"],
        default="docker",
        help="docker: swebench's harness on --predictions (needs a Docker daemon or --modal); "
        "gym / nemo-skills: the agent and grading in Apptainer on a cluster (docs/swe-gate.md)",
    )
    e.add_argument(
        "--predictions",
        type=Path,
        metavar="PREDS.jsonl",
        help="docker backend (required there): the model's patches, one JSON object per line "
        "with instance_id, model_name_or_path and model_patch (swebench's format)",
    )
    add_renamed(
        e,
        "--harness-run-id",
        "--run-id",
        metavar="ID",
        help="docker backend (required there): the swebench harness's run id, fresh per model "
        "and seed (1-128 characters of A-Z a-z 0-9 . _ -, the first a letter or digit); the "
        "run directory defaults to swe_runs/<harness-run-id>. Not a history run id (--run-id "
        "of the commands with --db)",
    )
    SWE_DATASET.add_to(e, default=dataset)
    e.add_argument("--split", type=_split, default="test", help=_SPLIT_HELP)
    e.add_argument(
        "--max-workers",
        type=int_in(1, MAX_WORKERS),
        default=4,
        help=f"docker backend: instances evaluated at once (1..{MAX_WORKERS:,}; default 4)",
    )
    add_renamed(
        e,
        "--timeout-seconds",
        "--timeout",
        type=int_in(1, MAX_TIMEOUT_S),
        default=1800,
        metavar="S",
        help=f"docker backend: per-instance test timeout in seconds (1..{MAX_TIMEOUT_S:,}; "
        "default 1800)",
    )
    e.add_argument(
        "--instance-ids",
        action=Extend,
        default=[],
        metavar="ID",
        help="evaluate only these instances (default: every instance of the split)",
    )
    e.add_argument(
        "--run-dir",
        type=Path,
        help="docker: default swe_runs/<harness-run-id>; --launch: the new run directory "
        "(default: <runs_root>/swe-<output dir name>-<time>)",
    )
    e.add_argument("--modal", action="store_true", help="run on Modal instead of Docker")
    e.add_argument("--allow-pull", action="store_true", help="let the harness pull images")
    e.add_argument("--no-retry", action="store_true", help="do not retry infra failures")
    _add_cluster_eval(e)
    e.set_defaults(func=_cmd_swe_eval)


_EVAL_DOC = (
    "--backend docker runs swebench's harness on a predictions file; --backend gym or "
    "nemo-skills run the agent and the grading on a Docker-less cluster through NeMo Gym "
    "(ng_run + ng_collect_rollouts, swe_agents) or NeMo-Skills (ns eval --benchmarks=swe-bench:N), "
    "resuming from what --output-dir already holds; --dry-run prints the exact commands and "
    "the GPU- and CPU-hours. Exit codes: 0 done (remaining infra failures are a warning; "
    "with --dry-run: printed), 2 usage/invalid input (bad predictions, a run id already "
    "used), 3 infrastructure (no Docker daemon, missing images, no usable report; the "
    "engine not installed or a command failed: rerun to resume), 70 a bug in rlgate"
)


def _add_cluster_eval(e: argparse.ArgumentParser) -> None:
    """The options of ``swe eval --backend gym|nemo-skills``."""
    g = e.add_argument_group("gym / nemo-skills backends")
    g.add_argument("--model", help="the served model name of the checkpoint (or its path)")
    g.add_argument("--output-dir", type=Path, help="where the results go (resumed if present)")
    g.add_argument("--seeds", type=int_in(1, 256), default=1, help="runs per instance (N)")
    g.add_argument("--server-url", help="the checkpoint's vLLM server, http://HOST:PORT/v1")
    g.add_argument("--server-gpus", type=int_in(0, 4096), default=8, help="GPUs serving it")
    g.add_argument(
        "--concurrency",
        type=int_in(1, 100_000),
        default=64,
        help="instances run at once (default 64); also sets the wall-time estimate",
    )
    g.add_argument(
        "--minutes-per-instance",
        type=int_in(1, 7 * 24 * 60),
        default=45,
        help="upper bound per instance for the cost (agent timeout + tests timeout)",
    )
    g.add_argument(
        "--cpus-per-instance",
        type=float_in(0, 1024, open_lo=True),
        default=1.0,
        help="CPU cores one instance's sandbox uses, for the CPU-hours (default 1)",
    )
    g.add_argument("--gym-input", type=Path, help="gym: SWE-bench Verified rows in Gym's format")
    g.add_argument(
        "--gym-config",
        help="gym: the environment's config (default: swe_agents' swebench_openhands.yaml)",
    )
    g.add_argument(
        "--gym-agent",
        default="swe_agents",
        help="gym: the agent server in --gym-config that collects (default swe_agents)",
    )
    g.add_argument(
        "--container-formatter",
        help="gym: .sif path template with {instance_id} (a swe_agents server's; needed by "
        "the default --gym-agent swe_agents)",
    )
    g.add_argument("--cluster", help="nemo-skills: the cluster config ns eval submits through")
    g.add_argument(
        "--agent-framework",
        choices=["openhands", "swe_agent"],
        default="openhands",
        help="nemo-skills: the agent that writes the patch (default openhands)",
    )
    g.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hydra key for the engine (gym: +KEY=VALUE of ng_run; nemo-skills: ++KEY=VALUE)",
    )
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="print the commands and the cost (with --launch: also the job's script)",
    )
    j = e.add_argument_group("launching (gym): the plan as one job through rlgate's launcher")
    j.add_argument(
        "--launch",
        choices=["slurm", "ray", "local"],
        help="gym: submit the plan as one job, as `rlgate launch --backend` does (slurm: "
        "sbatch NeMo RL's ray.sub; ray: a Ray cluster's job API; local: a detached process "
        "here); follow it with `rlgate watch RUN_DIR`; a relaunch resumes. Not for "
        "nemo-skills (ns eval --cluster submits itself)",
    )
    j.add_argument(
        "--site", default=os.environ.get("RLGATE_SITE"), help="--launch: site config YAML"
    )
    j.add_argument(
        "--nemo-rl-dir",
        default=os.environ.get("RLGATE_NEMO_RL_DIR"),
        help="--launch: the NeMo RL checkout the job starts from (slurm: its ray.sub; "
        "default: $RLGATE_NEMO_RL_DIR, else the site config's nemo_rl_dir)",
    )
    j.add_argument("--ray-address", help="--launch ray: the job API, http://<head>:8265")
    j.add_argument(
        "--nodes",
        type=int_in(1, 4096),
        default=1,
        help="--launch: nodes of the job (the sandboxes spread over them; default 1)",
    )
    j.add_argument(
        "--gpus-per-node",
        type=int_in(1, 64),
        default=8,
        help="--launch: GPUs per node of the job (ray.sub's GPUS_PER_NODE; default 8)",
    )
    j.add_argument(
        "--minutes",
        type=int_in(1, 7 * 24 * 60),
        help="--launch: the job's time limit (default: the plan's wall-time bound + 60)",
    )


def _cmd_swe_compare(args: argparse.Namespace) -> int:
    from rlgate.core.io import write_json_atomic, write_text_atomic
    from rlgate.swe.compare import GateOptions, Verdict, compare_arms
    from rlgate.swe.exclude import parse_exclusions, reduce_comparison
    from rlgate.swe.readers import load_arm
    from rlgate.swe.records import load_universe
    from rlgate.swe.report import build_swe_junit, comparison_to_dict, render_swe_summary

    parse_exclusions(args.exclude)  # a bad --exclude stops before any input is read
    models = _models(args)
    store, context = _swe_history(args)
    options = GateOptions(
        alpha=args.alpha,
        margin_pp=args.margin_pp,
        max_infra_error_rate=args.max_infra_error_rate,
        n_resamples=args.resamples,
        seed=args.seed,
    )
    step = _cli_term.current()
    step("swe compare", 0, 4, "reading the dataset")
    universe = load_universe(args.dataset, split=args.split)
    step("swe compare", 1, 4, f"reading the before arm ({len(args.before)} run(s))")
    before = load_arm("before", args.before, universe)
    step("swe compare", 2, 4, f"reading the after arm ({len(args.after)} run(s))")
    after = load_arm("after", args.after, universe)
    step("swe compare", 3, 4, f"comparing ({options.n_resamples} resamples)")
    comparison = compare_arms(before, after, universe, options)
    step("swe compare", 4, 4)
    if models is not None:
        comparison = _with_models(comparison, models)
    stored = None
    if store is not None and "flaky" in parse_exclusions(args.exclude):
        from rlgate.history.swe_flaky import flaky_in_history, runs_by_model

        models = list(dict.fromkeys([args.before_model, args.after_model]))
        rows = [row for m in models for row in store.swe_instances(model=m)]
        stored = flaky_in_history(runs_by_model(rows), models)  # read before it is recorded
    reduced = (
        reduce_comparison(comparison, before, after, args.exclude, stored) if args.exclude else None
    )
    if args.json:  # both kept off every input by the command's output guard (cli.outputs)
        write_json_atomic(args.json, comparison_to_dict(comparison, reduced))
    if args.junit:
        xml = build_swe_junit(comparison, reduced).tostring().decode("utf-8")
        write_text_atomic(args.junit, xml)
    print(render_swe_summary(comparison, reduced))
    if store is not None and context is not None:
        from rlgate.history.ingest import swe_rows

        rows = swe_rows(before, args.before_model) + swe_rows(after, args.after_model)
        with store:
            record(store, context, comparison.criteria, swe=rows)
    return {
        Verdict.IMPROVED: ExitCode.OK,
        Verdict.NO_SIGNIFICANT_CHANGE: ExitCode.OK,
        Verdict.REGRESSED: ExitCode.FAIL,
        Verdict.INCONCLUSIVE: ExitCode.INFRA,
    }[comparison.verdict]


def _models(args: argparse.Namespace) -> dict[str, str] | None:
    """``{"before": M1, "after": M2}`` from --before-model/--after-model (None: neither given)."""
    given = {arm: getattr(args, f"{arm}_model") for arm in ("before", "after")}
    if not any(given.values()):
        return None
    for arm, name in given.items():
        if not name or len(name) > 200 or not name.isprintable() or name != name.strip():
            shown = "missing" if not name else f"{name[:80]!r}"
            raise RlgateError(
                f"--{arm}-model {shown}: give both models, each a name of one printable line "
                "(at most 200 characters)",
                hint="e.g. --before-model Qwen3.5-35B-A3B --after-model my-rl-checkpoint",
            )
    return given


def _with_models(comparison: Any, models: dict[str, str]) -> Any:
    """The comparison with every criterion naming the models it judged (``evidence.models``)."""
    import dataclasses

    from rlgate.core.results import MODELS

    criteria = tuple(
        r.model_copy(update={"evidence": {**r.evidence, MODELS: dict(models)}})
        for r in comparison.criteria
    )
    return dataclasses.replace(comparison, criteria=criteria)


def _swe_history(args: argparse.Namespace) -> tuple[Any, Any]:
    """With --db: the open store and the run's context, checked before any work."""
    if args.db is None:
        return None, None
    missing = [f"--{arm}-model" for arm in ("before", "after") if not getattr(args, f"{arm}_model")]
    if missing:
        raise RlgateError(
            "swe compare --db records per-instance outcomes per model: give "
            + " and ".join(missing),
            hint="e.g. --before-model Qwen3.5-35B-A3B --after-model my-rl-checkpoint",
        )
    from rlgate.history.ingest import Facts, recipe_identity

    facts = Facts()
    if args.recipe:
        name, sha = recipe_identity(args.recipe)
        facts = Facts(recipe=name, recipe_sha256=sha)
    elif args.recipe_name:
        facts = Facts(recipe=args.recipe_name)
    store = open_db(args.db)
    inputs = [*args.before, *args.after]
    context = context_for(args, facts, default_recipe="swe_gate", inputs=inputs)
    refuse_recorded(store, context)
    return store, context


def _cmd_swe_power(args: argparse.Namespace) -> int:
    import dataclasses

    from rlgate.core.io import write_json_atomic
    from rlgate.swe import stats

    noise = stats.DEFAULT_NOISE_FRACTION if args.noise_fraction is None else args.noise_fraction
    for flag, values in (
        ("--n", args.n),
        ("--discordance", args.discordance),
        ("--seeds", args.seeds),
    ):
        if len(values) > MAX_POWER_VALUES:
            raise RlgateError(
                f"swe power: {flag} has {len(values)} values (at most {MAX_POWER_VALUES})"
            )
    work = sum(args.n) * len(args.discordance) * args.seeds.count(1)
    if work > MAX_POWER_EXACT_WORK:
        raise RlgateError(
            f"swe power: the one-seed rows enumerate {work:,} instances in total "
            f"(at most {MAX_POWER_EXACT_WORK:,}; the exact power costs time in proportion)",
            hint="ask for fewer --n/--discordance values with --seeds 1",
        )
    try:
        rows = [
            stats.minimum_detectable_difference(
                n, psi, seeds=k, alpha=args.alpha, power=args.power, noise_fraction=noise
            )
            for n in args.n
            for psi in args.discordance
            for k in args.seeds
        ]
    except ValueError as exc:
        raise RlgateError(f"swe power: {exc}") from exc
    print(f"minimum detectable difference (two-sided alpha={args.alpha}, power={args.power})")
    print(f"{'n':>6}{'discordance':>13}{'seeds':>7}{'MDE pp':>9}  method")
    for r in rows:
        mde = "n/a" if r.mde is None else f"{100 * r.mde:.1f}"
        print(f"{r.n:>6}{r.discordance:>13.3f}{r.seeds:>7}{mde:>9}  {r.method}")
    if len(rows) == 1 and rows[0].mde is not None:
        print(f"MDE = {100 * rows[0].mde:.1f} pp")
    if args.json:
        payload = {"rows": [dataclasses.asdict(r) for r in rows], "noise_fraction": noise}
        write_json_atomic(args.json, payload)
    return ExitCode.OK


def eval_run_dir(args: argparse.Namespace) -> Path | None:
    """``swe eval``'s run directory: ``--run-dir``, else ``swe_runs/<harness-run-id>``.

    None: neither is given.
    """
    if args.run_dir:
        return Path(args.run_dir)
    return Path("swe_runs") / args.harness_run_id if args.harness_run_id else None


def _cmd_swe_eval(args: argparse.Namespace) -> int:
    if args.backend != "docker":
        return _cmd_cluster_eval(args)
    missing = [
        f
        for f, v in (("--predictions", args.predictions), ("--harness-run-id", args.harness_run_id))
        if not v
    ]
    if missing:
        raise RlgateError(
            f"swe eval --backend docker needs {' and '.join(missing)}",
            hint="or evaluate without Docker: --backend gym|nemo-skills (docs/swe-gate.md)",
        )
    from rlgate.swe.harness import HarnessOptions, run_swebench_eval

    opts = HarnessOptions(
        predictions=args.predictions,
        run_id=args.harness_run_id,
        dataset=args.dataset,
        split=args.split,
        max_workers=args.max_workers,
        timeout=args.timeout_seconds,
        instance_ids=tuple(args.instance_ids),
        modal=args.modal,
    )
    run_dir = eval_run_dir(args)
    assert run_dir is not None  # --harness-run-id is required above
    result = run_swebench_eval(
        opts,
        run_dir,
        allow_pull=args.allow_pull,
        retry=not args.no_retry,
        progress=_cli_term.current(),
    )
    print(f"final report: {result.final_report}")
    print(f"attempts: {len(result.attempts)}; record: {result.record}")
    if result.remaining_infra:
        ids = ", ".join(f"{f.instance_id} ({f.reason})" for f in result.remaining_infra[:10])
        print(f"warning: {len(result.remaining_infra)} infra failure(s) remain: {ids}")
    return ExitCode.OK


def _cmd_cluster_eval(args: argparse.Namespace) -> int:
    """``swe eval --backend gym|nemo-skills``: plan, print (``--dry-run``) or run."""
    from rlgate.swe.backends import GYM_CONFIG, NS_BENCHMARK, Backend, ClusterEval, plan_eval
    from rlgate.swe.records import load_universe

    missing = [f for f, v in (("--model", args.model), ("--output-dir", args.output_dir)) if not v]
    if missing:
        raise RlgateError(f"swe eval --backend {args.backend} needs {' and '.join(missing)}")
    if args.launch and args.backend != "gym":
        raise RlgateError(
            f"--launch is for --backend gym; --backend {args.backend} runs ns eval, which "
            "submits itself through its own cluster config (--cluster)",
            hint="drop --launch: ns eval --cluster=<config> is the Slurm submission",
        )
    universe = load_universe(args.dataset, split=args.split)
    ids = tuple(args.instance_ids) or universe.ids
    if unknown := sorted(set(ids) - set(universe.ids)):
        raise RlgateError(f"--instance-ids not in the dataset {args.dataset}: {unknown[:5]}")
    if args.backend == "nemo-skills" and set(ids) != set(universe.ids):
        raise RlgateError(
            f"--instance-ids: ns eval --benchmarks={NS_BENCHMARK}:N runs every instance of "
            f"its benchmark, not {len(set(ids))} of the {len(universe.ids)}: the plan would "
            "count and compare another evaluation than the one run",
            hint="drop --instance-ids (exclude instances at compare time: swe compare --exclude)",
        )
    e = ClusterEval(
        backend=Backend(args.backend),
        model=args.model,
        output_dir=args.output_dir,
        instance_ids=ids,
        seeds=args.seeds,
        server_url=args.server_url,
        server_gpus=args.server_gpus,
        concurrency=args.concurrency,
        minutes_per_instance=args.minutes_per_instance,
        cpus_per_instance=args.cpus_per_instance,
        gym_input=args.gym_input,
        gym_config=args.gym_config or GYM_CONFIG,
        gym_agent=args.gym_agent,
        container_formatter=args.container_formatter,
        cluster=args.cluster,
        agent_framework=args.agent_framework,
        overrides=tuple(args.override),
    )
    if e.backend is Backend.GYM:
        from rlgate.launch.swe_eval import refuse_live_writer, refuse_symlinked_outputs

        refuse_symlinked_outputs(e.output_dir)
        refuse_live_writer(e.output_dir)  # a job launched into it may still write there
    plan = plan_eval(e)
    print(_render_plan(plan))
    if args.launch:
        return _launch_plan(plan, args)
    if args.dry_run or plan.remaining == 0:
        return ExitCode.OK
    return _run_plan(plan)


def _launch_plan(plan: Any, args: argparse.Namespace) -> int:
    """``--launch``: the plan as one job through rlgate's launcher (rlgate.launch.swe_eval)."""
    from rlgate.launch.manifest import Backend
    from rlgate.launch.plan import backend_for, require_pass_env
    from rlgate.launch.site import load_site_config, with_ray_address
    from rlgate.launch.swe_eval import JOB_SCRIPT, launch_swe_eval, plan_swe_launch

    if plan.remaining == 0:
        print("nothing to launch: every rollout is graded")
        return ExitCode.OK
    site = with_ray_address(load_site_config(args.site), args.ray_address)
    job = plan_swe_launch(
        plan,
        backend=Backend(args.launch),
        site=site,
        run_dir=args.run_dir,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        minutes=args.minutes,
        nemo_rl_dir=args.nemo_rl_dir,
    )
    rendered = backend_for(job.backend, site).render(job)
    hours = "n/a" if job.gpu_hours is None else f"{job.gpu_hours:g}"
    cost = (
        f"1 job x {job.nodes} nodes x {job.gpus_per_node} GPUs x {job.minutes} min = "
        f"{hours} GPU-hours allocated"
    )
    if args.dry_run:
        print(rendered, end="")
        print(f"# {JOB_SCRIPT}:")
        print(job.files[JOB_SCRIPT], end="")
        print(f"# rlgate dry run, nothing submitted: {cost}")
        return ExitCode.OK
    require_pass_env(job.pass_env)
    manifest = launch_swe_eval(job, plan)
    print(f"launched {manifest.run_name} on {args.launch}: job(s) {' '.join(manifest.job_ids)}")
    print(f"run dir {manifest.run_dir} ({cost}); follow it: rlgate watch {manifest.run_dir}")
    return ExitCode.OK


def _render_plan(plan: Any) -> str:
    e = plan.eval
    lines = [
        f"backend {e.backend.value}: {len(e.instance_ids)} instances x {e.seeds} seed(s) = "
        f"{plan.total} rollouts; {plan.total - plan.remaining} already graded in {e.output_dir}, "
        f"{plan.remaining} to run",
        f"cost (upper bound, {e.minutes_per_instance} min per instance, {e.concurrency} at a "
        f"time): {plan.wall_hours:.1f} h wall, {plan.gpu_hours:.1f} GPU-hours "
        f"({e.server_gpus} serving GPUs), {plan.cpu_hours:.1f} CPU-hours "
        f"({e.cpus_per_instance:g} core per instance)",
        *(f"note: {note}" for note in plan.notes),
        "commands:",
    ]
    for cmd, background in zip(plan.commands, plan.background, strict=True):
        lines.append(f"  {cmd}{'  &  # a server the next command uses' if background else ''}")
    lines.append(f"then: rlgate swe compare --before ... --after {plan.results}")
    return "\n".join(lines)


def _run_plan(plan: Any, *, server_timeout_s: float | None = None) -> int:
    """Run the plan's commands here; a background server must say it is up first (its log).

    A server runs in a process group of its own and is stopped, when the last command ends
    whatever happened, as Ctrl-C would stop it: SIGINT to its group, SIGKILL to the group
    after 60 s (:func:`_stop_server`).
    """
    from rlgate.launch.swe_eval import writing_here
    from rlgate.swe.backends import SERVER_READY_TIMEOUT_S

    if server_timeout_s is None:
        server_timeout_s = SERVER_READY_TIMEOUT_S
    out = plan.eval.output_dir
    with writing_here(out):  # the lock for the whole run, and a lease naming this process
        return _run_commands(plan, out, server_timeout_s)


def _run_commands(plan: Any, out: Path, server_timeout_s: float) -> int:
    """:func:`_run_plan`'s commands, the output directory held.

    Every command runs under :data:`rlgate.launch.swe_eval.SUPERVISOR` in a session of its
    own, so that a kill of this process (even SIGKILL) stops it and what it spawned; SIGTERM
    here stops them (``finally``) and is exit 3. A Gym collection that ends with rollouts not
    graded (Gym puts failed ones in its failures file and still exits 0) is exit 3: rerun.
    """
    import errno
    import shutil
    import signal
    import subprocess

    from rlgate.core.commands import command
    from rlgate.core.errors import InfraError
    from rlgate.launch.swe_eval import SUPERVISOR
    from rlgate.swe.backends import Backend, progress

    def terminated(signum: int, frame: Any) -> None:
        raise InfraError(
            f"stopped by signal {signal.Signals(signum).name}; every command was stopped",
            hint="rerun the same command to resume",
        )

    started: list[subprocess.Popen[bytes]] = []
    try:
        previous = signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread: no handler can be set
        previous = None
    try:
        for cmd, background, ready in zip(plan.commands, plan.background, plan.ready, strict=True):
            if shutil.which(cmd.argv[0]) is None:
                raise InfraError(
                    f"{cmd.argv[0]} is not installed here ({os.strerror(errno.ENOENT)})",
                    hint="run where the engine is installed (NeMo Gym: ng_run; NeMo-Skills: ns)",
                )
            supervised = command(
                "bash -c {supervisor} own_group {pid} {argv}",
                supervisor=SUPERVISOR,
                pid=os.getpid(),
                argv=list(cmd.argv),
            )
            if background:
                log = out / f"{cmd.argv[0]}.log"
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
                with os.fdopen(os.open(log, flags, 0o666), "wb") as fh:  # never a symlink
                    started.append(
                        subprocess.Popen(
                            supervised.argv,
                            stdout=fh,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
                _wait_until_ready(started[-1], log, ready, server_timeout_s, cmd.argv[0])
                continue
            started.append(subprocess.Popen(supervised.argv, start_new_session=True))
            code = started[-1].wait()
            if code != 0:
                raise InfraError(f"{cmd.argv[0]} exited with {code}; rerun to resume")
    finally:
        for proc in reversed(started):
            _stop_server(proc)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if plan.eval.backend is Backend.GYM:
        left = plan.total - len(progress(plan.eval).done)
        if left > 0:
            failures = plan.results.with_name(f"{plan.results.stem}_failures.jsonl")
            raise InfraError(
                f"{left} of {plan.total} rollouts are not graded after the collection"
                + (f" (Gym's failures: {failures})" if failures.is_file() else ""),
                hint="rerun the same command: Gym resumes and runs only what is not graded",
            )
    print(f"results: {plan.results}")
    return ExitCode.OK


def _stop_server(server: Any, grace_s: float = 60.0) -> None:
    """Stop a server and what it spawned: SIGINT to its process group, SIGKILL after ``grace_s``.

    ``ng_run`` shuts its servers down on SIGINT (nemo-gym 0.7.0 ``nemo_gym/cli/env.py``:
    ``RunHelper.run_forever`` catches ``KeyboardInterrupt`` and calls ``RunHelper.shutdown``);
    SIGTERM would end it and leave them running. The group is the server's pid
    (``start_new_session``); the final SIGKILL reaches whatever of the group is left.
    """
    import signal
    import subprocess

    def signal_group(sig: int) -> None:
        try:
            os.killpg(server.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    if server.poll() is None:
        signal_group(signal.SIGINT)
        try:
            server.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    signal_group(signal.SIGKILL)
    server.wait()


def _wait_until_ready(proc: Any, log: Path, ready: Any, timeout_s: float, name: str) -> None:
    """Block until ``log`` shows ``ready``; the server's exit or the timeout is InfraError."""
    import time

    from rlgate.core.errors import InfraError as infra

    deadline = time.monotonic() + timeout_s
    while ready is not None:
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        if ready.search(text):
            return
        if proc.poll() is not None:
            tail = "".join(text.splitlines(True)[-10:])
            raise infra(f"{name} exited with {proc.returncode} before it was ready; {log}:\n{tail}")
        if time.monotonic() > deadline:
            raise infra(f"{name} was not ready after {timeout_s:g} s (log: {log})")
        time.sleep(0.2)
