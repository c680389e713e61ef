"""``rlgate history record | show | export | promote | demote``, and the ``--db`` options.

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into
:mod:`rlgate.history`; errors become exit codes in ``rlgate.cli.app._handle_errors``.
``check-run``, ``swe compare`` and ``report`` take ``--db DB`` and the context options
(:func:`add_record_options`) and record what they computed through :func:`record`.

Nothing here imports SQLAlchemy: the store is imported when a command opens it, so every
other command works without the ``[history]`` extra, and a history command without it
exits 3 naming the extra (``rlgate.core.extras``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlgate.cli.args import DEFAULT_LAST  # history prune keeps what triage reads
from rlgate.cli.term import shown
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.options import Extend, add_recipe_or_name
from rlgate.core.validate import int_in, positive_int, utc_time

if TYPE_CHECKING:
    from rlgate.core.results import Result
    from rlgate.history.ingest import Facts
    from rlgate.history.model import RunContext, SweInstanceRow
    from rlgate.history.store import Store

__all__ = [
    "add_history",
    "add_record_options",
    "context_for",
    "manifest_facts",
    "open_db",
    "recipe_facts",
    "record",
    "refuse_recorded",
]

_DB_HELP = (
    "history database: an SQLite file or postgresql://user@host:port/db "
    "(default: $RLGATE_DB, else $XDG_DATA_HOME/rlgate/history.db)"
)
_RECORD_TO = "an SQLite file, created if absent, or postgresql://...; docs/history.md"
#: ``--db`` of check-run and report, which also build a recipe's band from the history.
RECORD_DB_HELP = (
    f"also record this command's results in this history database ({_RECORD_TO}); a recipe "
    "band without static runs is then built from the recipe's promoted runs"
)
#: ``--db`` of ``history record``, where recording is the command.
HISTORY_RECORD_DB_HELP = (
    f"the history database to record into ({_RECORD_TO}; default: $RLGATE_DB, else "
    "$XDG_DATA_HOME/rlgate/history.db)"
)
#: ``--db`` of ``swe compare``, which records and builds no band.
SWE_RECORD_DB_HELP = (
    f"also record the criteria and each model's per-instance outcomes in this history "
    f"database ({_RECORD_TO}; needs --before-model and --after-model)"
)


def add_record_options(parser: argparse.ArgumentParser, *, db_help: str = RECORD_DB_HELP) -> None:
    """``--db`` and the options that say what a recorded run was (docs/history.md).

    ``db_help`` says what this command does with the database.
    """
    group = parser.add_argument_group("history (with --db)")
    group.add_argument("--db", metavar="DB", help=db_help)
    group.add_argument(
        "--run-id",
        help="the id this run is recorded under (default: the run manifest's run name, else "
        "<recipe>@<nightly id>, else <recipe>@<input name>-<hash of its path>)",
    )
    group.add_argument("--nightly-id", help="the nightly this run belongs to (groups runs)")
    group.add_argument("--branch", help="the branch the code came from (e.g. main)")
    group.add_argument(
        "--commit",
        action="append",
        default=[],
        metavar="NAME=SHA",
        help="a checkout's commit: nemo_rl=..., nemo_gym=..., rlgate=... (repeatable; "
        "default: the run manifest's)",
    )
    group.add_argument(
        "--hardware",
        help="the machine type (runs share a band only on the same hardware; default: the "
        "cluster shape, e.g. 64n4g)",
    )
    group.add_argument("--label", help="a label for generated data (DEMO)")


DB_INPUT = "the history database"


SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _refuse_other_names(path: Path) -> None:
    """Refuse an SQLite file or companion that is another file's name too (exit 2).

    SQLite writes the database, its ``-wal`` log, ``-shm`` index and ``-journal`` in place:
    through a hard link it would overwrite the other file (it refuses a symbolic link
    itself, with a less clear message, so one is named here too).
    """
    for name in (path, *(Path(f"{path}{suffix}") for suffix in SQLITE_COMPANIONS)):
        try:
            info = name.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if stat.S_ISLNK(info.st_mode) and name != path:
            why = f"is a symbolic link (to {os.readlink(name)})"
        elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            why = f"has {info.st_nlink} names (hard links)"
        else:
            continue
        raise RlgateError(
            f"refusing to open the history database {path}: {name} {why}; SQLite writes "
            "there and would change the other file",
            hint="give the database its own files (copy it, do not link it), or remove the "
            f"stray {name.name}",
        )


def open_db(target: str | None, *, create: bool = True) -> Store:
    """Open the history database (importing the store only now), an input from now on.

    An SQLite file (and its ``-wal``, ``-shm`` and ``-journal`` files) joins the command's
    output guard: no output may be written over it (checked before the file is created).
    Only recording commands create a database; a read-only one passes ``create=False``
    (one that does not exist: exit 2, ``no history database at PATH``).
    A file among them that has another name (a hard link; a companion that is a symbolic
    link) is refused before SQLite opens anything.
    """
    from rlgate.core.io import note_input
    from rlgate.history.store import open_store, sqlite_path

    if target and "://" not in os.fspath(target):
        note_input(target, DB_INPUT, tree=False, check=True)
    path = sqlite_path(target, create=create)
    if path is not None:
        _refuse_other_names(path)
    store = open_store(target, create=create)
    if store.path is not None:
        try:
            for suffix in ("", "-wal", "-shm", "-journal"):
                note_input(f"{store.path}{suffix}", DB_INPUT, tree=False, check=True)
        except BaseException:
            store.close()
            raise
    return store


def _sha8(*paths: str | os.PathLike[str]) -> str:
    text = "\n".join(os.path.abspath(p) for p in paths)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def manifest_facts(run: str | os.PathLike[str] | None) -> Facts:
    """What the ``rlgate launch`` manifest of the run directory holding ``run`` says.

    The manifest is looked for in ``run`` and the three folders above it, and used when it
    describes a run directory that holds ``run``; a manifest that cannot be read is named
    in a warning and left out (the options give the facts instead).
    """
    from rlgate.history.ingest import Facts
    from rlgate.launch.manifest import MANIFEST_NAME, load_manifest

    if run is None:
        return Facts()
    start = Path(run).resolve()
    for folder in [start, *start.parents][:4]:
        if not (folder / MANIFEST_NAME).is_file():
            continue
        try:
            manifest = load_manifest(folder)
        except RlgateError as exc:
            print(
                f"rlgate: warning: ignoring {folder / MANIFEST_NAME}: {exc.message}",
                file=sys.stderr,
            )
            return Facts()
        commits = {
            name: info.commit
            for name, info in (("nemo_rl", manifest.nemo_rl), ("nemo_gym", manifest.gym))
            if info.commit and info.commit != "unknown"
        }
        return Facts(
            recipe=manifest.recipe.name,
            recipe_sha256=manifest.recipe.sha256,
            run_id=manifest.run_name,
            hardware=f"{manifest.nodes}n{manifest.gpus_per_node}g",
            commits=commits,
            versions=dict(manifest.versions),
            sources=[str(folder / MANIFEST_NAME)],
        )
    return Facts()


def recipe_facts(recipe: str, overrides: Sequence[str] = ()) -> Facts:
    """A recipe's name and content hash and, for a recipe file, its cluster shape (hardware).

    The hardware a run is recorded on defaults to the recipe's cluster shape as NeMo RL
    reads it (``cluster.num_nodes`` x ``cluster.gpus_per_node``, e.g. ``64n4g``), the same
    for ``check-run --db``, ``history record --recipe`` and ``report --db``.
    """
    from rlgate.history.ingest import Facts, recipe_identity

    name, sha = recipe_identity(recipe)
    if sha is None:  # a bare name
        return Facts(recipe=name)
    from rlgate.checks.registry import load_recipe

    loaded = load_recipe(recipe, overrides)
    return Facts(recipe=loaded.name, recipe_sha256=sha, hardware=loaded.facts.cluster.shape)


def context_for(
    args: argparse.Namespace,
    facts: Facts,
    *,
    default_recipe: str,
    inputs: Sequence[str | os.PathLike[str]],
    overrides: Sequence[str] = (),
) -> RunContext:
    """The recorded run's context: the options, then ``facts``, then the defaults."""
    from rlgate.core.versions import tested_versions
    from rlgate.history.ingest import make_context, parse_pairs

    recipe = facts.recipe or default_recipe
    nightly = args.nightly_id
    if args.run_id:
        run_id = args.run_id
    elif facts.run_id:
        run_id = facts.run_id
    elif nightly:
        run_id = f"{recipe}@{nightly}"
    else:
        first = Path(inputs[0]).name if inputs else "run"
        run_id = f"{recipe}@{first}-{_sha8(*inputs)}"
    versions = facts.versions or {k: v for k, v in tested_versions().items() if v != "absent"}
    return make_context(
        run_id=run_id,
        recipe=recipe,
        recipe_sha256=facts.recipe_sha256,
        branch=args.branch,
        commits={**facts.commits, **parse_pairs(args.commit, "--commit")},
        versions=versions,
        hardware=args.hardware or facts.hardware,
        nightly_id=nightly,
        label=args.label,
        overrides=tuple(overrides) or facts.overrides,
        source=" ".join(str(s) for s in [*inputs, *facts.sources]) or None,
    )


def refuse_recorded(store: Store, context: RunContext) -> None:
    """Before any work: a run id already in the database is refused (exit 2)."""
    if store.exists(context.run_id):
        raise RlgateError(
            f"run {context.run_id!r} is already recorded in {store.shown}; nothing was run",
            hint="give this recording another --run-id (a recorded run is never replaced)",
        )


def record(
    store: Store,
    context: RunContext,
    results: Sequence[Result],
    steps: dict[str, list[tuple[int, float]]] | None = None,
    swe: Sequence[SweInstanceRow] = (),
) -> None:
    """Record one run and say what was recorded where."""
    from rlgate.history.ingest import summary

    store.record(context, results, steps or {}, swe)
    print(
        f"history: recorded run {context.run_id} (recipe {context.recipe}"
        + (f", nightly {context.nightly_id}" if context.nightly_id else "")
        + f") in {store.shown}: {summary(results, steps or {}, swe)}"
    )


# --- rlgate history ----------------------------------------------------------------------------

_HISTORY_DOC = (
    "The nightly history (docs/history.md). Exit codes: 0 done, 2 bad input (a bad database "
    "path or URL, a file that is not a history database, a row rlgate did not write, a run id "
    "that does not exist), 3 the server of a well-formed URL cannot be reached or the "
    "[history] extra is not installed."
)


def add_history(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Register ``rlgate history``; its sub-command parsers (for `history quarantine`)."""
    p = sub.add_parser("history", help="record, show, export and promote runs (nightly history)",
                       description=_HISTORY_DOC)  # fmt: skip
    hsub = p.add_subparsers(dest="history_command", required=True, metavar="ACTION")

    r = hsub.add_parser(
        "record",
        help="record results (JUnit, check-run/swe JSON), a run's per-step metrics, SWE outcomes",
        description="Record one run: the Results of the JUnit files and JSON documents given, "
        "the per-step metrics of --run-dir and the per-instance outcomes of --swe-run, in one "
        "transaction. " + _HISTORY_DOC,
    )
    r.add_argument(
        "--junit", action=Extend, default=[], metavar="FILE", help="JUnit XML of any tier"
    )
    r.add_argument("--run-json", action=Extend, default=[], metavar="FILE", help="check-run --json")
    r.add_argument("--swe-json", metavar="FILE", help="swe compare --json (its criteria)")
    r.add_argument("--run-dir", metavar="RUN", help="a run (log dir, metrics.json, MLPerf log): "
                   "its per-step metrics, and its launch manifest if any")  # fmt: skip
    r.add_argument(
        "--swe-run",
        action="append",
        default=[],
        metavar="MODEL=PATH",
        help="a SWE-bench result (final report, log dir, per-instance map, Gym rollouts) of "
        "MODEL: its per-instance outcomes (repeatable)",
    )
    dataset = os.environ.get("RLGATE_SWE_DATASET", "SWE-bench/SWE-bench_Verified")
    r.add_argument("--dataset", default=dataset, help="the SWE-bench dataset of --swe-run")
    add_recipe_or_name(r, what="of the run recorded")
    r.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="NeMo RL override the run was judged with (repeatable)")  # fmt: skip
    add_record_options(r, db_help=HISTORY_RECORD_DB_HELP)
    r.set_defaults(func=_cmd_record)

    s = hsub.add_parser("show", help="trends of a recipe's checks over its recorded runs",
                        description=_HISTORY_DOC)  # fmt: skip
    s.add_argument("recipe", metavar="RECIPE", help="recipe name (its file stem)")
    s.add_argument("--check", help="one check's values, bound and message run by run")
    s.add_argument(
        "--last",
        type=positive_int,
        default=20,
        help="nightlies shown in each table, check runs and SWE runs (default 20)",
    )
    s.add_argument("--branch", help="only runs of this branch")
    s.add_argument("--db", metavar="DB", help=_DB_HELP)
    s.set_defaults(func=_cmd_show)

    e = hsub.add_parser("export", help="write a table as CSV or Parquet (for notebooks)",
                        description=_HISTORY_DOC)  # fmt: skip
    e.add_argument("out", metavar="OUT", help="output file (.csv or .parquet)")
    e.add_argument(
        "--table",
        choices=["results", "runs", "steps", "swe"],
        default="results",
        help="results: one row per check of a run (default); runs: one per run; steps: the "
        "per-step metrics; swe: per-instance SWE-bench outcomes",
    )
    e.add_argument("--format", choices=["csv", "parquet"], help="default: from OUT's suffix")
    e.add_argument("--recipe", help="only runs of this recipe")
    e.add_argument("--db", metavar="DB", help=_DB_HELP)
    e.set_defaults(func=_cmd_export)

    f = hsub.add_parser(
        "flaky",
        help="SWE-bench instances whose outcome flips between stored runs of one model",
        description="List the SWE-bench instances that one stored SWE run of a model resolved "
        "and another graded not resolved (infra outcomes never count), over every run the "
        "history holds (swe compare --db, history record --swe-run). " + _HISTORY_DOC,
    )
    f.add_argument("--model", action="append", default=[], metavar="MODEL",
                   help="only this model (repeatable; default: every recorded model)")  # fmt: skip
    f.add_argument("--json", dest="json_out", metavar="OUT", help="write the list as JSON here")
    f.add_argument("--db", metavar="DB", help=_DB_HELP)
    f.set_defaults(func=_cmd_flaky)

    c = hsub.add_parser(
        "changes",
        help="change points in each check's value series over the main nightlies",
        description="Find change points (E-Divisive, Apache Otava) in each check's value over "
        "the main branch's nightlies, per recipe, check and hardware: each with its nightly, "
        "commit range, size and p-value. " + _HISTORY_DOC,
    )
    c.add_argument("recipe", nargs="?", metavar="RECIPE", help="only this recipe (default: all)")
    c.add_argument("--check", help="only this check (its name)")
    c.add_argument("--branch", default="main", help="the branch whose nightlies (default main)")
    c.add_argument("--json", dest="json_out", metavar="OUT", help="write the series as JSON here")
    c.add_argument("--db", metavar="DB", help=_DB_HELP)
    c.set_defaults(func=_cmd_changes)

    pr = hsub.add_parser(
        "prune",
        help="delete old runs that are neither promoted nor among the newest nightlies",
        description="Delete, in one transaction, the runs recorded before --before that are "
        "not promoted and not among the --keep-last newest nightlies of their recipe on their "
        "branch, with their results, per-step metrics and SWE outcomes. " + _HISTORY_DOC,
    )
    pr.add_argument(
        "--before",
        required=True,
        type=utc_time,
        metavar="DATE",
        help="ISO date or time (UTC unless it names a zone), e.g. 2026-06-01",
    )
    pr.add_argument(
        "--keep-last",
        type=int_in(0, 100_000),
        default=DEFAULT_LAST,
        metavar="N",
        help="always keep the N newest nightlies of each recipe and branch (default "
        f"{DEFAULT_LAST}: what rlgate triage looks back over)",
    )
    pr.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    pr.add_argument("--db", metavar="DB", help=_DB_HELP)
    pr.set_defaults(func=_cmd_prune)

    for name, helptext in (
        ("promote", "mark a run as good: its per-step metrics join its recipe's reference band"),
        ("demote", "take a run out of its recipe's reference band"),
    ):
        q = hsub.add_parser(name, help=helptext, description=_HISTORY_DOC)
        q.add_argument("run_id", metavar="RUN_ID", help="the id the run was recorded under")
        q.add_argument("--db", metavar="DB", help=_DB_HELP)
        if name == "promote":
            q.add_argument(
                "--force",
                action="store_true",
                help="promote a run whose gate checks did not all pass (a failure, an error, "
                "no passed completion): the reasons overridden are printed and recorded",
            )
        q.set_defaults(func=_cmd_promote if name == "promote" else _cmd_demote)
    return hsub  # cli.app adds `history quarantine` (cli.quarantine) to it


def _same_run(json_path: str, judged: str, run_dir: str) -> None:
    """A run JSON recorded with ``--run-dir`` must have judged that run (or a part of it).

    Otherwise one run's metrics would be recorded with another run's verdicts, and a run
    that stopped short could be promoted on a healthy run's checks.
    """
    from rlgate.runs.registry import shown_run

    if "://" in judged or "://" in run_dir:  # a store URL: the same store and run, as shown
        if shown_run(judged) == shown_run(run_dir):
            return
    else:
        a, b = Path(judged).resolve(), Path(run_dir).resolve()
        if a == b or a.is_relative_to(b) or b.is_relative_to(a):
            return
    raise RlgateError(
        f"--run-json {json_path} judged the run {judged}, not --run-dir {run_dir}",
        hint="record each run with its own check-run JSON (or leave --run-dir out)",
    )


def _cmd_record(args: argparse.Namespace) -> int:
    from rlgate.history.ingest import Facts, read_junit_results, steps_of, swe_rows

    if not (args.junit or args.run_json or args.swe_json or args.run_dir or args.swe_run):
        raise RlgateError(
            "history record: nothing to record",
            hint="give --junit, --run-json, --swe-json, --run-dir and/or --swe-run",
        )
    store = open_db(args.db)
    facts = Facts()
    if args.recipe:
        facts = recipe_facts(args.recipe, args.override)
    elif args.recipe_name:
        facts = Facts(recipe=args.recipe_name)
    step = _record_steps(args)
    results: list[Result] = []
    inputs: list[str] = []
    stated: set[str] = set()  # the hardware the inputs say they ran on (check-run, the tiers)
    if args.junit:
        step(f"reading {len(args.junit)} JUnit file(s)")
        junit = read_junit_results(args.junit)
        results += junit.results
        facts = facts.merge(junit.facts)
        stated |= {junit.facts.hardware} if junit.facts.hardware else set()
        inputs += args.junit
    if args.run_json:
        from rlgate.report.inputs import load_run_doc

        step(f"reading {len(args.run_json)} check-run JSON file(s)")
        for path in args.run_json:
            doc = load_run_doc(path)
            if args.run_dir:
                _same_run(path, doc.run, args.run_dir)
            results += [*doc.checks, *doc.skipped]
            facts = facts.merge(Facts(recipe=doc.recipe))
            stated |= {doc.hardware} if doc.hardware else set()
        inputs += args.run_json
    if args.swe_json:
        from rlgate.report.inputs import load_swe_doc

        step("reading the SWE comparison")
        results += load_swe_doc(args.swe_json).criteria
        inputs.append(args.swe_json)
    steps = None
    if args.run_dir:
        from rlgate.runs.metrics import load_run

        # the recipe given wins over the manifest's, the launched shape over the recipe's
        given = Facts(recipe=facts.recipe, recipe_sha256=facts.recipe_sha256)
        facts = given.merge(manifest_facts(args.run_dir)).merge(facts)
        step("reading the run's per-step metrics")
        steps = steps_of(load_run(args.run_dir))
        from rlgate.runs.registry import shown_run

        inputs.append(shown_run(args.run_dir))  # a store URL's password is never recorded
    swe: list[SweInstanceRow] = []
    if args.swe_run:
        from rlgate.history.ingest import parse_pairs
        from rlgate.swe.readers import load_arm
        from rlgate.swe.records import load_universe

        pairs = [next(iter(parse_pairs([item], "--swe-run").items())) for item in args.swe_run]
        step(f"reading {len(pairs)} SWE run(s)")
        universe = load_universe(args.dataset)
        for model, path in pairs:
            swe += swe_rows(load_arm(model, [path], universe), model)
            inputs.append(path)
    if not facts.recipe:
        raise RlgateError(
            "history record: which recipe is this? none of the inputs names one",
            hint="give --recipe RECIPE.yaml (or its name)",
        )
    if len(stated) == 1:  # what the judged run stated beats the recipe's or manifest's shape
        facts = Facts(hardware=stated.pop()).merge(facts)
    context = context_for(args, facts, default_recipe="", inputs=inputs, overrides=args.override)
    step(f"recording {len(results)} result(s), {len(swe)} SWE outcome(s)")
    with store:
        record(store, context, results, steps, swe)
    step("")
    return ExitCode.OK


def _record_steps(args: argparse.Namespace) -> Callable[[str], None]:
    """``history record``'s progress: one step per kind of input given, then the recording."""
    given = (args.junit, args.run_json, args.swe_json, args.run_dir, args.swe_run)
    total = sum(bool(g) for g in given) + 1
    done = -1

    def step(item: str) -> None:
        nonlocal done
        done += 1
        shown("history record", done, total, item)

    return step


def _cmd_show(args: argparse.Namespace) -> int:
    from rlgate.core.text import one_line
    from rlgate.history.model import is_bisect, is_canary
    from rlgate.history.show import render_history

    with open_db(args.db, create=False) as store:
        runs = store.runs(recipe=args.recipe, branch=args.branch)
        isolated: dict[str, int] = {}
        if args.branch is None:  # canary and bisect runs are not the recipe's history
            for run in runs:
                branch = run.context.branch
                if is_canary(branch) or is_bisect(branch):
                    isolated[branch] = isolated.get(branch, 0) + 1  # type: ignore[index]
            runs = [r for r in runs if r.context.branch not in isolated]
        if not runs and isolated:
            raise RlgateError(
                f"recipe {args.recipe!r} has only canary and bisection runs in {store.shown}"
                f" ({one_line(_isolated(isolated))}); they are not its history",
                hint="show them with --branch BRANCH",
            )
        if not runs:
            recipes = sorted({r.context.recipe for r in store.runs(last=200)})
            raise RlgateError(
                f"no runs of recipe {args.recipe!r}"
                + (f" on branch {args.branch!r}" if args.branch else "")
                + f" in {store.shown}",
                hint=f"recorded recipes: {', '.join(recipes[:10]) or 'none'}",
            )
        text = render_history(
            runs, args.recipe, check=args.check, shown=store.shown, last=args.last
        )
        print(text, end="")
        if isolated:
            print(one_line(f"not shown: {_isolated(isolated)} (--branch BRANCH shows them)"))
    return ExitCode.OK


def _isolated(counts: dict[str, int]) -> str:
    """``3 run(s) of canary/vllm-0.26.0, 1 of bisect/...``: the branches kept out of a history."""
    parts = [f"{n} run(s) of {b}" for b, n in sorted(counts.items())[:5]]
    more = f", and {len(counts) - 5} other branch(es)" if len(counts) > 5 else ""
    return ", ".join(parts) + more


def _cmd_export(args: argparse.Namespace) -> int:
    from rlgate.history.export import export_table

    fmt = args.format or {".csv": "csv", ".parquet": "parquet"}.get(Path(args.out).suffix.lower())
    if fmt is None:
        raise RlgateError(
            f"export {args.out}: say the format (--format csv|parquet) or name a .csv/.parquet file"
        )
    with open_db(args.db, create=False) as store:
        rows = export_table(store, args.table, args.out, fmt=fmt, recipe=args.recipe)
    print(f"exported {rows} {args.table} rows to {args.out} ({fmt})")
    return ExitCode.OK


def _cmd_flaky(args: argparse.Namespace) -> int:
    from rlgate.core.io import write_json_atomic
    from rlgate.core.text import one_line
    from rlgate.history.swe_flaky import flaky_in_history, runs_by_model
    from rlgate.swe.flaky import MIN_RUNS, RULE

    models = list(dict.fromkeys(args.model)) or None
    with open_db(args.db, create=False) as store:
        if models is None:
            rows = store.swe_instances()
        else:
            rows = [row for model in models for row in store.swe_instances(model=model)]
        shown = store.shown
    by_model = runs_by_model(rows)
    runs = {m: len(r) for m, r in by_model.items()}
    flaky = flaky_in_history(by_model, models)
    names = list(models or runs)
    shown_name = {m: one_line(m) for m in names}  # a --model is shown, never interpreted
    if not names:
        print(f"history flaky: {one_line(shown)} holds no SWE-bench instance outcome (record "
              "them with swe compare --db or history record --swe-run)")  # fmt: skip
    else:
        print(f"history flaky: SWE instances flipping between stored runs ({one_line(shown)})")
        width = max(len(v) for v in shown_name.values())
        for model in names:
            n = runs.get(model, 0)
            if model in flaky.measured:
                what = f"{len(flaky.in_arm(model))} flaky instance(s)"
            else:
                what = f"not measured (needs {MIN_RUNS} runs)"
            print(f"  {shown_name[model].ljust(width)}  {n} run(s)  {what}")
        for item in flaky.instances:
            print(f"  {shown_name[item.arm].ljust(width)}  {one_line(item.instance_id)}  "
                  f"resolved in {item.resolved}/{item.graded} graded runs")  # fmt: skip
    if args.json_out:
        doc = {
            "rule": RULE,
            "models": {
                m: {
                    "runs": runs.get(m, 0),
                    "measured": m in flaky.measured,
                    "flaky": [
                        {"instance_id": i.instance_id, "resolved": i.resolved, "graded": i.graded}
                        for i in flaky.instances
                        if i.arm == m
                    ],
                }
                for m in names
            },
        }
        write_json_atomic(args.json_out, doc)  # never over the database (open_db)
    return ExitCode.OK


def _cmd_changes(args: argparse.Namespace) -> int:
    from rlgate.core.io import write_json_atomic
    from rlgate.core.text import one_line
    from rlgate.history.changes import MAX_PVALUE, find_changes, render_changes

    with open_db(args.db, create=False) as store:
        runs = store.runs(recipe=args.recipe, branch=args.branch)
        shown = store.shown
    series = find_changes(runs, recipe=args.recipe, check=args.check, main_branch=args.branch)
    if not series:
        what = f"recipe {args.recipe!r}" if args.recipe else "any recipe"
        check = f" with a check named {args.check!r}" if args.check else ""
        raise RlgateError(one_line(f"no {args.branch} nightly of {what}{check} in {shown}"))
    print(render_changes(series, shown, max_pvalue=MAX_PVALUE), end="")
    if args.json_out:
        write_json_atomic(
            args.json_out, {"max_pvalue": MAX_PVALUE, "series": [s.to_json() for s in series]}
        )
    return ExitCode.OK


def _cmd_prune(args: argparse.Namespace) -> int:
    from rlgate.core.text import one_line

    with open_db(args.db, create=False) as store:
        done = store.prune(before=args.before, keep_last=args.keep_last, dry_run=args.dry_run)
        shown, sqlite = one_line(store.shown), store.path is not None
    verb = "would delete" if done.dry_run else "deleted"
    print(
        f"history prune: {verb} {len(done.run_ids)} run(s) recorded before "
        f"{args.before.isoformat()} ({done.results} results, {done.steps} per-step values, "
        f"{done.swe} SWE outcomes) in {shown}; kept every promoted run ({done.promoted_kept} "
        f"of them old enough) and the newest {args.keep_last} nightlies of each recipe and branch"
    )
    for run_id in done.run_ids[:20]:
        print(f"  {one_line(run_id)}")
    if len(done.run_ids) > 20:
        print(f"  ... and {len(done.run_ids) - 20} more")
    if sqlite and done.run_ids and not done.dry_run:
        print("the file keeps its size until compacted: sqlite3 DB 'VACUUM;' (docs/history.md)")
    return ExitCode.OK


def _band_line(store: Store, run: Any) -> str:
    context = run.context
    n = len(store.promoted(context.recipe, context.hardware, overrides=list(context.overrides)))
    where = f" on {context.hardware}" if context.hardware else ""
    return (
        f"the band of {context.recipe}{where} now holds {n} promoted run(s) (its minimum is the "
        "recipe's rlgate.band.min_runs, 5 by default)"
    )


def _user() -> str | None:
    """Who promotes or demotes (the login name; None when the system cannot say)."""
    import getpass

    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        return None
    name = name.strip()
    return name[:200] if name and name.isprintable() else None


def _cmd_promote(args: argparse.Namespace) -> int:
    from rlgate.core.text import one_line

    with open_db(args.db, create=False) as store:
        run = store.promote(args.run_id, force=args.force, by=_user())
        overrode = store.promotion(args.run_id).overrode
        shown = one_line(args.run_id)
        if overrode:
            print(
                f"promoted {shown} by --force, overriding: "
                + "; ".join(one_line(o) for o in overrode)
                + " (recorded with the promotion)"
            )
        print(f"promoted {shown}: {_band_line(store, run)}")
    return ExitCode.OK


def _cmd_demote(args: argparse.Namespace) -> int:
    from rlgate.core.text import one_line

    with open_db(args.db, create=False) as store:
        store.demote(args.run_id, by=_user())
        print(f"demoted {one_line(args.run_id)}: {_band_line(store, store.run(args.run_id))}")
    return ExitCode.OK
