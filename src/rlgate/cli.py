"""The ``rlgate`` command line: parse arguments, call library functions, map errors to exit codes.

Exit codes: 0 pass, 1 a gate/check failed, 2 usage or invalid input, 3 infrastructure.
Exceptions become messages in exactly one place (:func:`_handle_errors`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from rlgate._errors import ExitCode, RlgateError
from rlgate.versions import format_versions, tested_versions


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


@contextlib.contextmanager
def _handle_errors() -> Iterator[None]:
    try:
        yield
    except RlgateError as exc:
        print(f"rlgate: error: {exc}", file=sys.stderr)
        raise _Exit(int(exc.exit_code)) from exc
    except KeyboardInterrupt:
        print("rlgate: interrupted", file=sys.stderr)
        raise _Exit(130) from None


# --- rlgate versions ---------------------------------------------------------


def _add_versions(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("versions", help="print the library versions rlgate tests against")
    p.set_defaults(func=_cmd_versions)


def _cmd_versions(args: argparse.Namespace) -> int:
    print(format_versions(tested_versions()))
    return ExitCode.OK


# --- rlgate run ----------------------------------------------------------------


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a tier with pytest (extra arguments go to pytest)",
        description="Run tiers of the suite: `rlgate run functional --junitxml out.xml`.",
    )
    p.add_argument("tier", help="marker expression, e.g. functional or 'convergence or perf'")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="arguments passed to pytest")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    import pytest

    code = pytest.main(["-m", args.tier, *args.pytest_args])
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"rlgate: no tests selected by -m {args.tier!r}", file=sys.stderr)
        return ExitCode.USAGE
    return int(code)


# --- rlgate swe ------------------------------------------------------------------

_SWE_EXIT_DOC = (
    "exit codes: 0 improved or no_significant_change, 1 regressed, 2 usage/invalid input, "
    "3 inconclusive (infra errors, different instance sets or dataset revisions)"
)


def _swe_float(lo: float, hi: float, *, open_lo: bool = False, open_hi: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        below = value <= lo if open_lo else value < lo
        above = value >= hi if open_hi else value > hi
        if below or above:
            raise argparse.ArgumentTypeError(f"{value} is outside {lo}..{hi}")
        return value

    return parse


def _add_swe(sub: argparse._SubParsersAction) -> None:
    import os
    from pathlib import Path

    p = sub.add_parser("swe", help="SWE-bench Verified before/after gate (tier 4)")
    swe = p.add_subparsers(dest="swe_command", required=True, metavar="SWE_COMMAND")
    dataset = os.environ.get("RLGATE_SWE_DATASET", "SWE-bench/SWE-bench_Verified")
    c = swe.add_parser("compare", help="compare before/after results", description=_SWE_EXIT_DOC)
    c.add_argument("--before", nargs="+", required=True, metavar="PATH", help="base runs")
    c.add_argument("--after", nargs="+", required=True, metavar="PATH", help="trained runs")
    c.add_argument("--dataset", default=dataset, help="parquet/dir/HF name (the universe)")
    c.add_argument("--split", default="test")
    c.add_argument("--alpha", type=_swe_float(0, 1, open_lo=True, open_hi=True), default=0.05)
    c.add_argument("--margin-pp", type=_swe_float(0, 100), default=0.0, help="tolerated drop")
    c.add_argument("--max-infra-error-rate", type=_swe_float(0, 1), default=0.05)
    c.add_argument("--resamples", type=int, default=10_000, help="bootstrap/permutation draws")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--json", type=Path, help="write the comparison JSON here")
    c.add_argument("--junit", type=Path, help="write JUnit XML here")
    c.set_defaults(func=_cmd_swe_compare)
    w = swe.add_parser("power", help="minimum detectable difference for an eval design")
    w.add_argument("--n", type=int, nargs="+", default=[500], help="instances")
    w.add_argument("--discordance", type=_swe_float(0, 1, open_lo=True), nargs="+", default=[0.15])
    w.add_argument("--seeds", type=int, nargs="+", default=[1], help="runs per arm")
    w.add_argument("--alpha", type=_swe_float(0, 1, open_lo=True, open_hi=True), default=0.05)
    w.add_argument("--power", type=_swe_float(0, 1, open_lo=True, open_hi=True), default=0.8)
    w.add_argument("--noise-fraction", type=_swe_float(0, 1), default=None)
    w.add_argument("--json", type=Path)
    w.set_defaults(func=_cmd_swe_power)
    e = swe.add_parser("eval", help="run swebench.harness.run_evaluation with prechecks")
    e.add_argument("--predictions", type=Path, required=True, metavar="PREDS.jsonl")
    e.add_argument("--run-id", required=True)
    e.add_argument("--dataset", default=dataset)
    e.add_argument("--split", default="test")
    e.add_argument("--max-workers", type=int, default=4)
    e.add_argument("--timeout", type=int, default=1800, help="per-instance test timeout (s)")
    e.add_argument("--instance-ids", nargs="+", default=[])
    e.add_argument("--run-dir", type=Path, help="default: swe_runs/<run-id>")
    e.add_argument("--modal", action="store_true", help="run on Modal instead of Docker")
    e.add_argument("--allow-pull", action="store_true", help="let the harness pull images")
    e.add_argument("--no-retry", action="store_true", help="do not retry infra failures")
    e.set_defaults(func=_cmd_swe_eval)


def _cmd_swe_compare(args: argparse.Namespace) -> int:
    from rlgate._io import write_json_atomic, write_text_atomic
    from rlgate.swe_compare import GateOptions, Verdict, compare_arms
    from rlgate.swe_report import build_swe_junit, comparison_to_dict, render_swe_summary
    from rlgate.swebench import load_arm, load_universe

    options = GateOptions(
        alpha=args.alpha,
        margin_pp=args.margin_pp,
        max_infra_error_rate=args.max_infra_error_rate,
        n_resamples=args.resamples,
        seed=args.seed,
    )
    universe = load_universe(args.dataset, split=args.split)
    before = load_arm("before", args.before, universe)
    after = load_arm("after", args.after, universe)
    comparison = compare_arms(before, after, universe, options)
    inputs = [*args.before, *args.after, args.dataset]
    if args.json:
        write_json_atomic(args.json, comparison_to_dict(comparison), inputs=inputs)
    if args.junit:
        xml = build_swe_junit(comparison).tostring().decode("utf-8")
        write_text_atomic(args.junit, xml, inputs=inputs)
    print(render_swe_summary(comparison))
    return {
        Verdict.IMPROVED: ExitCode.OK,
        Verdict.NO_SIGNIFICANT_CHANGE: ExitCode.OK,
        Verdict.REGRESSED: ExitCode.FAIL,
        Verdict.INCONCLUSIVE: ExitCode.INFRA,
    }[comparison.verdict]


def _cmd_swe_power(args: argparse.Namespace) -> int:
    import dataclasses

    from rlgate import stats
    from rlgate._io import write_json_atomic

    noise = stats.DEFAULT_NOISE_FRACTION if args.noise_fraction is None else args.noise_fraction
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


def _cmd_swe_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rlgate.harness import HarnessOptions, run_swebench_eval

    opts = HarnessOptions(
        predictions=args.predictions,
        run_id=args.run_id,
        dataset=args.dataset,
        split=args.split,
        max_workers=args.max_workers,
        timeout=args.timeout,
        instance_ids=tuple(args.instance_ids),
        modal=args.modal,
    )
    run_dir = args.run_dir or Path("swe_runs") / args.run_id
    result = run_swebench_eval(opts, run_dir, allow_pull=args.allow_pull, retry=not args.no_retry)
    print(f"final report: {result.final_report}")
    print(f"attempts: {len(result.attempts)}; record: {result.record}")
    if result.remaining_infra:
        ids = ", ".join(f"{f.instance_id} ({f.reason})" for f in result.remaining_infra[:10])
        print(f"warning: {len(result.remaining_infra)} infra failure(s) remain: {ids}")
    return ExitCode.OK


# --- rlgate recipe check ------------------------------------------------------


def _add_recipe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recipe", help="validate NeMo RL GRPO configs (rlgate's or NeMo RL's own)")
    rsub = p.add_subparsers(dest="recipe_command", required=True, metavar="ACTION")
    c = rsub.add_parser(
        "check",
        help="joint RL x Gym x template x parser x async validation (no GPU, seconds)",
        description="Exit 0 when compatible (warnings allowed), 1 with one message per problem.",
    )
    c.add_argument("config", help="NeMo RL config YAML (a defaults: chain is followed)")
    c.add_argument("overrides", nargs="*", help="NeMo RL (Hydra) overrides: a.b=c, ++a.b=c, ~a.b")
    c.add_argument(
        "--tokenizers",
        default=os.environ.get("RLGATE_TOKENIZERS"),
        help="tokenizer root, one subfolder per model (default: $RLGATE_TOKENIZERS, else HF)",
    )
    c.add_argument("--json", dest="json_out", help="write the findings as JSON here")
    c.add_argument("-q", "--quiet", action="store_true", help="print errors and warnings only")
    c.set_defaults(func=_cmd_recipe_check)


def _cmd_recipe_check(args: argparse.Namespace) -> int:
    from rlgate._io import write_json_atomic
    from rlgate.compat import check_recipe_file
    from rlgate.findings import Severity

    report = check_recipe_file(args.config, args.overrides, args.tokenizers)
    for finding in report.findings:
        if args.quiet and finding.severity is Severity.INFO:
            continue
        print(finding)
    errors, warnings = (
        len(report.errors),
        sum(f.severity is Severity.WARNING for f in report.findings),
    )
    verdict = "compatible" if report.ok else "INCOMPATIBLE"
    print(f"{report.recipe.name}: {verdict} ({errors} errors, {warnings} warnings)")
    if args.json_out:
        write_json_atomic(args.json_out, report.as_dict(), inputs=[args.config])
    return ExitCode.OK if report.ok else ExitCode.FAIL


# --- rlgate check-run ----------------------------------------------------------


def _add_check_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check-run",
        help="judge a NeMo RL run against a recipe's convergence/perf bounds",
        description="Exit 0 when every check passes, 1 when one fails or errors, 2 on bad input.",
    )
    p.add_argument(
        "run",
        metavar="LOG_DIR_OR_METRICS_JSON",
        help="NeMo RL logger.log_dir, an event file, a metrics.json or an MLPerf log",
    )
    p.add_argument("--recipe", required=True, help="recipe YAML with an rlgate: block")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="NeMo RL (Hydra) override applied to the recipe (repeatable)",
    )
    p.add_argument("--baseline", help="baseline run of the same recipe and hardware (perf)")
    p.add_argument("--rollouts", help="NeMo Gym rollouts JSONL (ng_collect_rollouts output)")
    p.add_argument("--max-steps", type=int, help="target step (default: the recipe's)")
    p.add_argument(
        "--band-run",
        action="append",
        default=[],
        metavar="RUN",
        help="earlier good run for the reference band (repeatable; default: the recipe's "
        "rlgate.band.runs)",
    )
    p.add_argument("--sync-run", help="sync twin of an async run (async-vs-sync speedup)")
    p.add_argument(
        "--tier",
        action="append",
        choices=["convergence", "perf"],
        help="restrict to a tier (repeatable; default: both)",
    )
    p.add_argument("--json", dest="json_out", help="write the results as JSON here")
    p.add_argument("--junit", dest="junit_out", help="write the results as JUnit XML here")
    p.set_defaults(func=_cmd_check_run)


def _cmd_check_run(args: argparse.Namespace) -> int:
    from rlgate._io import write_json_atomic, write_text_atomic
    from rlgate.checkplan import load_inputs, load_plan, render_junit, render_table, run_gate
    from rlgate.checks import Tier

    plan = load_plan(args.recipe, max_steps=args.max_steps, overrides=args.override)
    inputs = load_inputs(
        plan,
        args.run,
        baseline=args.baseline,
        rollouts=args.rollouts,
        band_runs=args.band_run,
        sync_run=args.sync_run,
    )
    tiers = tuple(Tier(t) for t in args.tier) if args.tier else (Tier.CONVERGENCE, Tier.PERF)
    report = run_gate(plan, inputs, tiers)
    print(render_table(report), end="")
    given = [args.recipe, args.run, args.baseline, args.rollouts, args.sync_run, *args.band_run]
    given = [path for path in given if path]
    if args.json_out:
        write_json_atomic(args.json_out, report.to_dict(), inputs=given)
    if args.junit_out:
        write_text_atomic(args.junit_out, render_junit(report), inputs=given)
    return ExitCode.OK if report.passed else ExitCode.FAIL


# --- parser --------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="rlgate", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_versions, _add_run, _add_recipe, _add_swe, _add_check_run):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    # `rlgate run TIER <pytest args>` forwards unknown options (e.g. --swe-before X) to pytest.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if getattr(args, "command", None) != "run":
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.pytest_args = [*unknown, *args.pytest_args]
    try:
        with _handle_errors():
            return int(args.func(args))
    except _Exit as stop:
        return stop.code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
