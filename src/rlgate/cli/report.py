"""``rlgate report`` (the go/no-go release report and ``--demo``).

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into the
library; errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from rlgate.cli.history import (
    add_record_options,
    context_for,
    open_db,
    recipe_facts,
    record,
    refuse_recorded,
)
from rlgate.cli.term import current
from rlgate.cli.triage import BASELINE_COMMIT_HELP, DEFAULT_LAST, MAX_LAST, commit_ref
from rlgate.core.errors import RlgateError
from rlgate.core.options import BAND_RUN, BASELINE, RECIPE, TOKENIZERS, Extend
from rlgate.core.validate import int_in

__all__ = ["add_report"]

# --- rlgate report ----------------------------------------------------------------

_REPORT_DOC = (
    "Merge every tier's JUnit into one go/no-go report (report.md, self-contained report.html, "
    "junit.xml, report.json, plots/). Exit codes: 0 GO, 1 NO-GO, 2 usage/invalid input, "
    "3 INCOMPLETE (a tier did not run, or the SWE comparison is inconclusive or missing). "
    "With --db the report also triages its failing gate checks against the last N main "
    "nightlies (--main-branch, --last) and draws their trends."
)


def add_report(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate report``."""
    p = sub.add_parser("report", help="the go/no-go release report", description=_REPORT_DOC)
    p.add_argument(
        "--junit", action=Extend, default=[], metavar="FILE", help="JUnit XML of any tier"
    )
    p.add_argument("--run", action=Extend, default=[], metavar="RUN_JSON", help="check-run --json")
    p.add_argument("--swe", metavar="SWE_JSON", help="rlgate swe compare --json output")
    p.add_argument(
        "--canary",
        metavar="CANARY_JSON",
        help='rlgate canary --json output: an "Upgrade canary" section (informational: it '
        "never changes the verdict; its newly failing testcases and recipes are listed first)",
    )
    # the recipe trained (model, cluster, template), the perf plot's baseline, the reward band
    RECIPE.add_to(p)
    BASELINE.add_to(p)
    BAND_RUN.add_to(p, action=Extend)  # --band-run A B C (and repeated)
    TOKENIZERS.add_to(p)  # hashes in the report; the demo's functional tier needs it
    p.add_argument("--out", help="output directory (default: rlgate-report, demo-report)")
    p.add_argument("--force", action="store_true", help="write into a non-empty foreign --out")
    p.add_argument("--no-plots", action="store_true", help="skip the figures (faster)")
    p.add_argument(
        "--site",
        default=os.environ.get("RLGATE_SITE"),
        metavar="SITE_YAML",
        help="site config whose links: templates (https, plain {run_id} {run_name} {recipe} "
        "{nightly_id} {branch} fields) the report links to; the CI job's link comes from "
        "CI_JOB_URL or GITHUB_SERVER_URL/GITHUB_REPOSITORY/GITHUB_RUN_ID (default $RLGATE_SITE)",
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="build the bundled demo: the functional tier for real, generated DEMO runs and "
        "SWE results, and their report",
    )
    add_record_options(p)
    triage = p.add_argument_group("triage (with --db; docs/history.md)")
    triage.add_argument("--main-branch", default="main", help="the branch of reference (main)")
    triage.add_argument(
        "--baseline-commit", type=commit_ref, metavar="[CHECKOUT=]SHA", help=BASELINE_COMMIT_HELP
    )
    triage.add_argument(
        "--last",
        type=int_in(1, MAX_LAST),
        default=DEFAULT_LAST,
        help=f"main nightlies the triage section compares with (default {DEFAULT_LAST})",
    )
    p.set_defaults(func=_cmd_report)


def _report_history(args: argparse.Namespace) -> tuple[Any, Any, list[Any], list[str]]:
    """With --db: the store, the run's context, a band from promoted runs and what it holds."""
    if args.db is None:
        return None, None, [], []
    from rlgate.history.ingest import Facts

    facts, band = Facts(), None
    if args.recipe:
        from rlgate.checks.registry import load_recipe

        facts = recipe_facts(args.recipe)
        band = load_recipe(args.recipe).gate.band
    store = open_db(args.db)
    context = context_for(args, facts, default_recipe="release", inputs=args.junit)
    refuse_recorded(store, context)
    if band is None or band.runs or args.band_run:
        return store, context, [], []
    from rlgate.history.bands import promoted_band

    promoted = promoted_band(
        store,
        recipe=context.recipe,
        hardware=context.hardware,
        overrides=[],
        metrics=list(band.metrics),
        min_runs=band.min_runs,
    )
    note = promoted.describe() + ("" if promoted.enough else "; no band is drawn")
    return store, context, list(promoted.runs) if promoted.enough else [], [note]


def _with_links(report: Any, args: argparse.Namespace, context: Any) -> Any:
    """``report`` with the links of ``--site``'s templates and of the CI (rlgate.core.links)."""
    from rlgate.core.links import report_links

    templates: dict[str, str] = {}
    if args.site:
        from rlgate.launch.site import load_site_config

        templates = dict(load_site_config(args.site).links)
    run = report.runs[0][1].run if report.runs else None
    values = {
        "run_id": context.run_id if context is not None else getattr(args, "run_id", None),
        "nightly_id": context.nightly_id if context else getattr(args, "nightly_id", None),
        "branch": context.branch if context is not None else getattr(args, "branch", None),
        "recipe": report.recipe.name if report.recipe else None,
        "run_name": Path(run).name if run else None,
    }
    links = report_links(templates, values)
    return dataclasses.replace(report, links=tuple(links.items())) if links else report


def out_dir(args: argparse.Namespace) -> str:
    """The report's directory: ``--out``, else ``demo-report`` / ``rlgate-report``."""
    return args.out or ("demo-report" if args.demo else "rlgate-report")


def _cmd_report(args: argparse.Namespace) -> int:
    from rlgate.report.build import build_report, prepare_out_dir, write_report

    given = [*args.junit, *args.run, *args.band_run, args.swe, args.recipe, args.baseline]
    given += [args.canary]
    given = [g for g in given if g]
    if args.demo:
        if given or args.db is not None:
            raise RlgateError(
                "--demo builds its own inputs; do not pass --junit/--run/--swe/--db/..."
            )
        from rlgate.demo.build import run_demo

        result = run_demo(
            out_dir(args), tokenizers=args.tokenizers, force=args.force, progress=current()
        )
        report, files = result.report, result.files
        print(result.functional)
    else:
        if not args.junit:
            raise RlgateError("rlgate report needs --junit FILE... (or --demo)")
        store, context, promoted, notes = _report_history(args)
        history = None  # the triage section's nightlies (the last N + the one before them)
        quarantines: list[Any] = []
        if store is not None:
            from rlgate.cli.quarantine import active_now

            quarantines = active_now(store, args.main_branch)
            history = store.runs(branch=args.main_branch, last=args.last + 1)
            if args.baseline_commit is not None:
                from rlgate.history.model import is_canary

                seen = {r.context.run_id for r in history}
                base = store.runs(
                    commit=args.baseline_commit, last=args.last + 1,
                    canaries=is_canary(args.main_branch),
                )  # fmt: skip
                history += [r for r in base if r.context.run_id not in seen]
        step = current()
        plots = "" if args.no_plots else ", drawing the plots"
        step("report", 0, 3, "reading the inputs" + plots)
        report = build_report(
            args.junit,
            runs=args.run,
            swe=args.swe,
            recipe=args.recipe,
            baseline=args.baseline,
            band_runs=[*args.band_run, *promoted],
            tokenizers=args.tokenizers,
            notes=notes,
            draw_plots=not args.no_plots,
            history=history,
            main_branch=args.main_branch,
            last=args.last,
            candidate=context,
            baseline_commit=args.baseline_commit,
            quarantines=quarantines,
            canary=args.canary,
        )
        # after reading: every input is known to the output guard (run directories a run
        # JSON names included) and nothing is created on disk for inputs that turn out invalid
        report = _with_links(report, args, context)
        out = prepare_out_dir(out_dir(args), force=args.force)
        step("report", 1, 3, "writing the report")
        files = write_report(report, out)
        step("report", 2, 3, "recording the run" if store is not None else "")
        for note in notes:
            print(note)
        if store is not None:
            with store:
                record(store, context, [case.judged for case in report.junit.cases])
        step("report", 3, 3)
    print(f"verdict: {report.verdict_text}")
    print(report.story)
    for b in report.blockers:
        shown = b.kind.value if b.forces.value == "GO" else b.forces.value  # quarantined
        print(f"  {shown:<10} {b.title}: {b.detail[:160]}")
    print(f"report: {files['html']} and {files['markdown']}; merged JUnit: {files['junit']}")
    return report.verdict.exit_code
