"""``rlgate canary``: what a vLLM, transformers or nemo-gym bump changes, before the bump.

Exit 0 when nothing that passes on the pin fails on the candidate, 1 when something does, 2
on bad input (an unknown package or version), 3 when the candidate stack cannot be resolved
or built (uv's message, one line). See docs/canary.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.options import TOKENIZERS

__all__ = ["add_canary", "junit_text", "table"]


def add_canary(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate canary``."""
    p = sub.add_parser(
        "canary",
        help="run the functional tier and recipe check on a candidate stack, compare to the pin",
        description="Build an isolated environment for a candidate stack (uv; the rest of "
        "ci/constraints.txt kept wherever the resolver allows; cached by the resolved "
        "stack), run the functional tier and `recipe check` there and here (the pin), and "
        "say what changed testcase by testcase and recipe by recipe. Exit 0 when nothing "
        "that passes on the pin fails on the candidate, 1 when something does, 2 on bad "
        "input, 3 when the candidate stack cannot be resolved or built.",
    )
    p.add_argument(
        "--with",
        dest="moves",
        action="append",
        default=[],
        metavar="PKG==VER",
        help="a package of the candidate stack (vllm, transformers, nemo-gym, tokenizers): "
        "PKG==VERSION, or PKG@PATH for a wheel file or a source checkout; repeatable",
    )
    p.add_argument(
        "--recipe",
        dest="recipes",
        action="append",
        default=[],
        metavar="RECIPE.yaml",
        help="a recipe to `recipe check` in both stacks; repeatable",
    )
    TOKENIZERS.add_to(p)
    p.add_argument("--cache-dir", help="where candidate environments are kept "
                   "(default $XDG_CACHE_HOME/rlgate/canary)")  # fmt: skip
    p.add_argument("--constraints", help="the pin (default: the checkout's ci/constraints.txt)")
    p.add_argument("--work-dir", help="write both stacks' JUnit, recipe JSON and logs here")
    p.add_argument("--json", dest="json_out", help="write the comparison as JSON here")
    p.add_argument("--junit", dest="junit_out", help="write a testcase per recipe and change here")
    hist = p.add_argument_group("history (with --db; docs/history.md, Canaries)")
    hist.add_argument(
        "--db",
        metavar="DB",
        help="record the candidate stack's functional tier and recipe check as runs of the "
        "branch canary/<stack> in this history database (an SQLite file, created if absent, "
        "or postgresql://...); never part of main's triage, bands or quarantine counts",
    )
    hist.add_argument(
        "--nightly-id",
        help="the nightly the canary's runs belong to (default canary-<UTC time>); run ids "
        "are <recipe>@canary/<stack>@<nightly id>",
    )
    hist.add_argument(
        "--commit",
        action="append",
        default=[],
        metavar="NAME=SHA",
        help="a checkout's commit recorded with the canary's runs (repeatable: nemo_rl=..., "
        "rlgate=...)",
    )
    p.set_defaults(func=_cmd_canary)


def _state(value: Any) -> str:
    return value.value if value is not None else "-"


def table(comparison: Any, label: str) -> str:
    """The comparison as a terminal table (changed testcases and recipes)."""
    lines = [f"canary {label}: {comparison.unchanged} testcases unchanged"]
    rows = [
        (c.kind.value, c.test, f"{_state(c.pinned)} -> {_state(c.candidate)}", c.detail[:160])
        for c in comparison.tests
    ]
    rows += [
        (
            "recipe-regressed" if c.regression else "recipe-changed",
            c.recipe,
            f"{c.pinned} -> {c.candidate}",
            "; ".join([*(f"+{f}" for f in c.appeared), *(f"-{f}" for f in c.went)])[:160],
        )
        for c in comparison.recipes
    ]
    rows += [
        ("behaviour", c.test, "observed", "; ".join(c.differences)[:400])
        for c in comparison.behaviour
    ]
    rows += [
        (
            c.kind,
            c.where,
            f"+{len(c.added)} -{len(c.removed)}",
            " ".join([*(f"+{n}" for n in c.added), *(f"-{n}" for n in c.removed)])[:400],
        )
        for c in comparison.probes
    ]
    if not rows:
        lines.append("  no testcase and no recipe verdict changed")
    else:
        header = ("CHANGE", "WHAT", "PIN -> CANDIDATE", "DETAIL")
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
        for row in [header, *rows]:
            cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
            lines.append("  " + "  ".join([*cells, row[-1]]).rstrip())
    lines += [f"  note: {n}" for n in comparison.notes]
    verdict = "REGRESSION" if comparison.regressions else "no regression"
    lines.append(f"canary {label}: {verdict} ({len(comparison.regressions)} regressions)")
    return "\n".join(lines) + "\n"


def junit_text(comparison: Any, label: str) -> str:
    """JUnit: a testcase per recipe checked and per testcase changed."""
    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.core.results import Outcome, Result, Tier

    cases = []
    for c in comparison.tests:
        outcome = Outcome.FAIL if c.regression else Outcome.PASS
        message = f"{c.kind.value}: {_state(c.pinned)} -> {_state(c.candidate)}"
        result = Result(
            name=c.test,
            tier=Tier.FUNCTIONAL,
            status=outcome,
            message=f"{message}: {c.detail}" if c.detail else message,
            informational="" if c.regression else "a change on the candidate, not a regression",
        )
        cases.append(
            JunitCase.of(result, classname=f"rlgate.canary.{label}", facts={"change": c.kind.value})
        )
    for r in comparison.recipes:
        result = Result(
            name=r.recipe,
            tier=Tier.FUNCTIONAL,
            status=Outcome.FAIL if r.regression else Outcome.PASS,
            message=f"recipe check {r.pinned} -> {r.candidate}",
        )
        cases.append(JunitCase.of(result, classname=f"rlgate.canary.{label}.recipe"))
    informational = "a change on the candidate, not a regression"
    for b in comparison.behaviour:
        result = Result(
            name=b.test,
            tier=Tier.FUNCTIONAL,
            status=Outcome.PASS,
            message="behaviour changed: " + "; ".join(b.differences),
            informational=informational,
        )
        cases.append(
            JunitCase.of(
                result, classname=f"rlgate.canary.{label}.behaviour", facts={"change": "behaviour"}
            )
        )
    for p in comparison.probes:
        names = [*(f"+{n}" for n in p.added), *(f"-{n}" for n in p.removed)]
        result = Result(
            name=p.where,
            tier=Tier.FUNCTIONAL,
            status=Outcome.PASS,
            message=f"{p.kind} added {len(p.added)}, removed {len(p.removed)}: " + " ".join(names),
            informational=informational,
        )
        cases.append(
            JunitCase.of(
                result, classname=f"rlgate.canary.{label}.{p.kind}", facts={"change": p.kind}
            )
        )
    return write_junit([JunitSuite.of(f"rlgate.canary.{label}", cases)])


def _probe(
    canary_env: Any, python: Path, out: Path, tokenizers: str, side: str
) -> tuple[dict[str, Any] | None, str]:
    """The side's probe (parsers, engine args, kwargs), or None and a note why not."""
    from rlgate.canary.probe import read_probe

    code, seconds = canary_env.run_probe(python, out, tokenizers)
    print(f"canary: probe of the {side} stack: exit {code}, {seconds:.0f} s")
    if code != 0 or not (out / "probe.json").is_file():
        return None, f"the probe of the {side} stack failed (exit {code}; log {out / 'probe.log'})"
    return read_probe(out / "probe.json")


def _cmd_canary(args: argparse.Namespace) -> int:
    from rlgate.canary import env as canary_env
    from rlgate.canary.compare import compare
    from rlgate.canary.record import document as canary_document
    from rlgate.canary.stack import parse_moves, stack_label
    from rlgate.core.io import read_json, write_json_atomic, write_text_atomic

    moves = parse_moves(args.moves)
    label = stack_label(moves)
    packages = [m.name for m in moves]
    tokenizers = args.tokenizers
    if not tokenizers or not Path(tokenizers).is_dir():
        raise RlgateError(
            f"no tokenizer root ({tokenizers or 'unset'}): the functional tier needs one",
            hint="pass --tokenizers DIR or set RLGATE_TOKENIZERS (one subfolder per model)",
        )
    recipes = [Path(r) for r in args.recipes]
    for recipe in recipes:
        if not recipe.is_file():
            raise RlgateError(f"--recipe {recipe}: no such file")
    constraints = canary_env.pinned_constraints(
        Path(args.constraints) if args.constraints else None
    )
    cache = Path(args.cache_dir) if args.cache_dir else canary_env.default_cache_dir()
    store, commits = None, {}
    if args.db:  # before any work: a bad database or --commit is exit 2 now, not in an hour
        from rlgate.canary.record import check_nightly
        from rlgate.cli.history import open_db
        from rlgate.history.ingest import parse_pairs
        from rlgate.history.model import utc_now

        commits = parse_pairs(args.commit, "--commit")
        nightly = args.nightly_id or f"canary-{utc_now().strftime('%Y%m%dT%H%M%SZ')}"
        store = open_db(args.db)
        with store:
            check_nightly(store, moves, nightly)
    elif args.commit or args.nightly_id:
        raise RlgateError("--commit and --nightly-id say what --db records; give --db too")
    with tempfile.TemporaryDirectory(prefix="rlgate-canary-") as scratch:
        work = Path(args.work_dir) if args.work_dir else Path(scratch)
        resolution = canary_env.resolve(moves, constraints, work / "resolve")
        relaxed = ", ".join(resolution.relaxed) or "none"
        print(f"canary {label}: resolved in {resolution.seconds:.0f} s; pins relaxed: {relaxed}")
        built = canary_env.build(resolution, cache, label=label)
        how = "reused" if built.reused else f"built in {built.seconds:.0f} s"
        print(f"canary {label}: environment {built.path} ({how})")
        junits, docs, probes, notes = [], [], [], []
        for side, python in (("pinned", Path(sys.executable)), ("candidate", built.python)):
            out = work / side
            code, seconds = canary_env.run_functional(python, out, tokenizers)
            print(f"canary {label}: functional tier on the {side} stack: pytest exit {code}, "
                  f"{seconds:.0f} s")  # fmt: skip
            if not (out / "functional.xml").is_file():
                raise canary_env.CandidateError(
                    f"the functional tier on the {side} stack wrote no JUnit (pytest exit "
                    f"{code}; log {out / 'functional.log'})"
                )
            junits.append(out / "functional.xml")
            doc = None
            if recipes:
                code, seconds = canary_env.run_recipe_check(python, out, recipes, tokenizers)
                print(f"canary {label}: recipe check on the {side} stack: exit {code}, "
                      f"{seconds:.0f} s")  # fmt: skip
                if (out / "recipes.json").is_file():
                    doc = read_json(
                        out / "recipes.json", what=f"recipe check JSON of the {side} stack"
                    )
            docs.append(doc)
            probe, note = _probe(canary_env, python, out, tokenizers, side)
            probes.append(probe)
            notes += [note] if note else []
        comparison = compare(
            [junits[0]], [junits[1]], docs[0], docs[1], probes[0], probes[1], notes=notes
        )
        doc = canary_document(
            comparison, label=label, relaxed=resolution.relaxed, environment=str(built.path),
            pinned_junit=[junits[0]], candidate_junit=[junits[1]], packages=packages,
        )  # fmt: skip
        # the comparison is out before anything is recorded: a refused record loses nothing
        print(table(comparison, label), end="")
        if args.json_out:
            write_json_atomic(args.json_out, doc)
        if args.junit_out:
            write_text_atomic(args.junit_out, junit_text(comparison, label))
        if store is not None:
            recorded = _record(store, nightly, [junits[1]], docs[1], packages, commits, args)
            print(f"canary {label}: recorded {len(recorded)} run(s) of branch {doc['branch']} "
                  f"in {store.shown} (nightly {nightly})")  # fmt: skip
    return ExitCode.FAIL if comparison.regressions else ExitCode.OK


def _record(
    store: Any,
    nightly: str,
    candidate_junit: list[Path],
    recipe_doc: Any,
    packages: list[str],
    commits: dict[str, str],
    args: argparse.Namespace,
) -> list[Any]:
    """Record the candidate's runs (``--db``) on the branch ``canary/<stack>``.

    A refused record (exit 2) says that the comparison was printed and written all the same.
    """
    from rlgate.canary.record import record_candidate
    from rlgate.history.model import utc_now

    try:
        with store:
            return record_candidate(
                store, candidate_junit, packages=packages, recipe_doc=recipe_doc,
                nightly_id=nightly, recorded_at=utc_now(), commits=commits,
            )  # fmt: skip
    except RlgateError as exc:
        kept = [p for p in (args.json_out, args.junit_out) if p]
        where = f" and written to {', '.join(kept)}" if kept else ""
        exc.message += f" (the comparison above was printed{where}; only the record failed)"
        raise
