"""``rlgate triage`` (label a candidate's failing gate checks against the nightly history).

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into the
library; errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlgate.cli.args import DEFAULT_LAST, FLAKY_RATE, MAX_LAST
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.options import Extend
from rlgate.core.validate import float_in, int_in

if TYPE_CHECKING:
    from datetime import datetime

    from rlgate.core.results import Result
    from rlgate.history.model import RecordedRun
    from rlgate.history.store import Store
    from rlgate.history.triage import CandidateIdentity, TriageLabel

__all__ = [
    "BASELINE_COMMIT_HELP",
    "Candidate",
    "add_triage",
    "commit_ref",
    "exit_code",
    "load_candidate",
    "read_candidate",
    "render_table",
]

BASELINE_COMMIT_HELP = (
    "compare with the nightlies of this commit (e.g. the pull request's merge base; its "
    "--main-branch runs and other branches' reruns of the same code; 7+ hex characters, "
    "CHECKOUT is nemo_rl, nemo_gym, rlgate, ...) instead of the last N nightlies of "
    "--main-branch"
)

_DOC = (
    "Label every failing or erroring gate check of a candidate (JUnit, check-run --json or "
    "swe compare --json) against the last N nightlies of the main branch in the history "
    "database (or against the nightlies of a baseline commit, --baseline-commit): "
    "regression, pre-existing, flaky, infra, or unknown (no main nightly ran it). "
    "Exit codes: 0 nothing regressed (no failing check, or only pre-existing ones), 1 a "
    "regression or an unknown failure (never waved through), 2 usage/invalid input, 3 only "
    "infra or flaky failures left unresolved (rerun them). A failing check held by an active "
    "quarantine (rlgate history quarantine) is labelled quarantined and does not block. A "
    "passing check whose value changed inside its bound over the nightlies is labelled drift: "
    "informational, unless its recipe sets rlgate.block_on_drift (then exit 1)."
)


def add_triage(sub: argparse._SubParsersAction) -> None:
    """Register ``rlgate triage``."""
    p = sub.add_parser(
        "triage", help="label a candidate's failures against the nightly history", description=_DOC
    )
    p.add_argument(
        "--candidate",
        action=Extend,
        required=True,
        metavar="JUNIT_OR_RESULTS",
        help="the candidate's JUnit XML, check-run --json or swe compare --json files",
    )
    p.add_argument(
        "--db",
        help="history database: a SQLite file or a database URL (default: $RLGATE_DB, else "
        "the user data directory; docs/history.md)",
    )
    p.add_argument("--main-branch", default="main", help="the branch of reference (main)")
    p.add_argument(
        "--baseline-commit",
        type=commit_ref,
        metavar="[CHECKOUT=]SHA",
        help=BASELINE_COMMIT_HELP,
    )
    p.add_argument(
        "--nightly-id",
        help="the candidate's own nightly, when it is recorded already: left out of the comparison",
    )
    p.add_argument(
        "--run-id",
        dest="run_ids",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="a run id the candidate is recorded under: left out of the comparison "
        "(repeatable; a recording holding only the candidate's Results is left out anyway)",
    )
    p.add_argument(
        "--hardware",
        help="the hardware the candidate ran on (as recorded, e.g. 2n8g): only nightlies on "
        "it are its history (default: what each check of the candidate states, as check-run "
        "and the convergence/perf tiers write rlgate.hardware; a check that states none meets "
        "only nightlies recorded without one)",
    )
    p.add_argument(
        "--last",
        type=int_in(1, MAX_LAST),
        default=DEFAULT_LAST,
        help=f"main nightlies compared with (default {DEFAULT_LAST})",
    )
    p.add_argument(
        "--flaky-rate",
        type=float_in(0, 1, open_lo=True),
        default=FLAKY_RATE,
        help=f"flips per same-code transition from which a check is flaky (default {FLAKY_RATE:g})",
    )
    p.add_argument("--json", dest="json_out", help="write the labels and evidence as JSON here")
    p.add_argument(
        "--junit",
        dest="junit_out",
        help="write the candidate's gate checks as JUnit here, with rlgate.triage.* properties",
    )
    p.set_defaults(func=_cmd_triage)


def commit_ref(text: str) -> Any:
    """``--baseline-commit``'s type: a :class:`~rlgate.history.model.CommitRef`."""
    from rlgate.history.model import CommitRef

    try:
        return CommitRef.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# --- the candidate ----------------------------------------------------------------------------


def _kind(path: Path) -> str:
    """``junit`` or ``json`` from the file's first non-blank byte (or an error naming it)."""
    from rlgate.core.io import require_regular_file
    from rlgate.core.junit import MAX_JUNIT_BYTES

    require_regular_file(path, "candidate", MAX_JUNIT_BYTES)
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        return "junit"
    if head.startswith((b"{", b"[")):
        return "json"
    raise RlgateError(
        f"candidate {path}: neither JUnit XML nor JSON",
        hint="pass a JUnit file, a `rlgate check-run --json` or a `rlgate swe compare --json`",
    )


@dataclass(frozen=True)
class Candidate:
    """What the candidate's files hold.

    ``checks``: its gate-check Results with their recipe (None: not stated); ``hardware``:
    the hardware each of them states it ran on (aligned with ``checks``: check-run's and
    the convergence/perf tiers' ``rlgate.hardware``; None: not stated); ``inputs``:
    every file's judged Results and when the file says it was written (a JUnit suite's
    ``timestamp`` with a zone; None when unstated), what
    :class:`~rlgate.history.triage.CandidateIdentity` recognises its recordings by;
    ``block_drift``: whether each check's recipe sets ``rlgate.block_on_drift`` (aligned
    with ``checks``; the JUnit property or the run JSON's key, absent: false).
    A JUnit testcase whose element and recorded verdict disagree counts as its shown
    failure (:attr:`rlgate.report.inputs.Case.judged`): a contradiction never waves a
    failure through.
    """

    checks: list[tuple[str | None, Result]]
    inputs: list[tuple[list[Result], datetime | None]]
    hardware: list[str | None] = field(default_factory=list)
    block_drift: list[bool] = field(default_factory=list)

    def blocks_drift(self, recipe: str | None) -> bool:
        """Whether ``recipe`` asks a drift to block (any of its checks' files says so)."""
        flags = self.block_drift or [False] * len(self.checks)
        return any(b for (r, _), b in zip(self.checks, flags, strict=True) if r == recipe)

    def groups(self, hardware: str | None) -> dict[tuple[str | None, str | None], list[Result]]:
        """The checks per (recipe, hardware): ``hardware`` (``--hardware``), else each one's own."""
        out: dict[tuple[str | None, str | None], list[Result]] = {}
        stated = self.hardware or [None] * len(self.checks)
        for (recipe, result), own in zip(self.checks, stated, strict=True):
            out.setdefault((recipe, hardware or own), []).append(result)
        return out

    def identity(
        self, run_ids: Sequence[str] = (), nightly_ids: Sequence[str] = ()
    ) -> CandidateIdentity:
        """The candidate's own recordings: by content, and the run/nightly ids given."""
        from rlgate.history.triage import CandidateIdentity

        return CandidateIdentity.of(self.inputs, run_ids=run_ids, nightly_ids=nightly_ids)


def _suite_time(stamp: str | None) -> datetime | None:
    """A JUnit suite's ``timestamp`` as UTC (None: absent, unparsable or without a zone)."""
    from datetime import UTC, datetime

    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.strip())
    except ValueError:
        return None
    return when.astimezone(UTC) if when.tzinfo is not None else None


def read_candidate(paths: Sequence[str | os.PathLike[str]]) -> Candidate:
    """The candidate's gate checks and what identifies its recordings (:class:`Candidate`)."""
    from rlgate.core.io import read_json, require_regular_file
    from rlgate.report.inputs import MAX_JSON_BYTES, load_junit, load_run_doc, load_swe_doc

    out: list[tuple[str | None, Result]] = []
    hardware: list[str | None] = []
    block: list[bool] = []
    inputs: list[tuple[list[Result], datetime | None]] = []
    for raw in paths:
        path = Path(raw)
        if _kind(path) == "junit":
            evidence = load_junit([path])
            for case in evidence.cases:
                if case.gating or case.hides_failure:  # a failing benchmark is triaged too
                    judged = case.judged
                    if case.hides_failure:  # ... as the gate check it is not marked to be
                        judged = judged.model_copy(update={"informational": ""})
                    out.append((case.fact("rlgate.recipe"), judged))
                    hardware.append(case.fact("rlgate.hardware"))
                    block.append(case.flag("rlgate.block_on_drift"))
            for suite in evidence.suites:
                inputs.append(([c.judged for c in suite.cases], _suite_time(suite.timestamp)))
            continue
        require_regular_file(path, "candidate JSON", MAX_JSON_BYTES)
        doc = read_json(path, what="candidate JSON")
        if isinstance(doc, dict) and "checks" in doc:
            run = load_run_doc(path)
            out += [(run.recipe, r) for r in run.checks]
            hardware += [run.hardware] * len(run.checks)
            block += [run.block_on_drift] * len(run.checks)
            inputs.append(([*run.checks, *run.skipped], None))
        elif isinstance(doc, dict) and "criteria" in doc:
            criteria = load_swe_doc(path).criteria
            out += [(None, r) for r in criteria]
            hardware += [None] * len(criteria)
            block += [False] * len(criteria)
            inputs.append((list(criteria), None))
        else:
            raise RlgateError(
                f"candidate {path}: a JSON document with neither 'checks' nor 'criteria'",
                hint="pass the output of `rlgate check-run --json` or `rlgate swe compare --json`",
            )
    if not out:
        raise RlgateError(
            "the candidate holds no gate check (only informational or unrecorded testcases)",
            hint="pass the JUnit or JSON the gate tiers wrote",
        )
    return Candidate(out, inputs, hardware, block)


def load_candidate(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str | None, Result]]:
    """The candidate's gate-check Results with their recipe (None: not stated)."""
    return read_candidate(paths).checks


# --- output ----------------------------------------------------------------------------------


def exit_code(labels: Sequence[TriageLabel]) -> ExitCode:
    """1 a label that blocks, else 3 an infra or flaky failure, else 0 (docs/history.md).

    A label blocks (:attr:`TriageLabel.blocks`): a regression, an unknown, a drift whose
    recipe sets ``rlgate.block_on_drift``.
    """
    from rlgate.history.triage import Label

    found = {lb.label for lb in labels}
    if any(lb.blocks for lb in labels):
        return ExitCode.FAIL
    if found & {Label.FLAKY, Label.INFRA}:
        return ExitCode.INFRA
    return ExitCode.OK


def render_table(labels: Sequence[TriageLabel], title: str, header: Sequence[str]) -> str:
    """The labels as an aligned text table (the columns of the report's triage table)."""
    from rlgate.core.text import one_line
    from rlgate.history.triage import label_rows

    rows = [tuple(one_line(c) for c in row) for row in label_rows(labels)]
    if not rows:
        return f"{title}\n  no gate check fails or errors: nothing to triage\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header[:-1])]
    lines = [title]
    for row in [tuple(header), *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)]
        lines.append("  " + "  ".join([*cells, row[-1]]))
    return "\n".join(lines) + "\n"


def _junit(candidate: Sequence[tuple[str | None, Result]], labels: Sequence[TriageLabel]) -> str:
    import json

    from rlgate.core.junit import JunitCase, JunitSuite, write_junit
    from rlgate.history.triage import models_of

    by_key = {(lb.recipe, lb.tier, lb.check, lb.models): lb for lb in labels}
    cases, seen = [], set()
    for recipe, result in candidate:
        key = (recipe, result.tier, result.name, models_of(result))
        label = by_key.get(key) if key not in seen else None
        seen.add(key)
        facts: dict[str, Any] = {"recipe": recipe} if recipe else {}
        if label is not None:
            doc = label.to_json()
            facts |= {
                "triage.label": label.label.value,
                "triage.blocks": "true" if label.blocks else "false",
                "triage.reason": label.reason,
                "triage.main": label.main_text(),
                "triage.first_failing": label.first_failing or "",
                "triage.last_passing": label.last_passing or "",
                "triage.flip_rate": label.flip_rate if label.flip_rate is not None else "",
                "triage.nightlies": json.dumps(doc["nightlies"], sort_keys=True),
            }
        classname = f"rlgate.{result.tier.value}.{recipe or 'candidate'}"
        cases.append(JunitCase.of(result, classname=classname, facts=facts))
    return write_junit([JunitSuite.of("rlgate.triage", cases)])


def _triage_recipe(
    store: Store,
    results: Sequence[Result],
    recipe: str | None,
    args: argparse.Namespace,
    own: CandidateIdentity,
    hardware: str | None,
) -> tuple[list[TriageLabel], list[RecordedRun]]:
    """One recipe's labels on one hardware, and the runs read for them.

    Each failing check is compared with the last N nightlies of its own series; the store
    is read for the last N + 1 nightlies of the recipe (the candidate's own one may be
    among them) and again for twice as many while a series window is short and the
    history holds more (other hardware, models or the candidate's recordings took
    nightlies of the read).
    """
    from rlgate.history.model import is_canary
    from rlgate.history.triage import nightlies, triage

    commit = args.baseline_commit
    branch = None if commit is not None else args.main_branch
    fetch = args.last + 1
    while True:
        history = store.runs(
            recipe=recipe, branch=branch, commit=commit, last=fetch,
            canaries=is_canary(args.main_branch),
        )  # fmt: skip
        labels = triage(
            results, history, main_branch=args.main_branch, last=args.last,
            flaky_rate=args.flaky_rate, recipe=recipe, commit=commit, hardware=hardware,
            own=own,
        )  # fmt: skip
        read_all = len(nightlies(history)) < fetch
        if read_all or all(len(lb.history) >= args.last for lb in labels):
            return labels, history
        fetch *= 2


def _drifts(
    candidate: Candidate,
    groups: dict[tuple[str | None, str | None], list[Result]],
    read: dict[tuple[str | None, str | None], list[RecordedRun]],
    args: argparse.Namespace,
    own: CandidateIdentity,
) -> tuple[list[TriageLabel], list[str]]:
    """The ``drift`` labels of the candidate's passing gate checks, and notes.

    Each (recipe, hardware) group against the main nightlies read for its triage; its
    recipe's ``rlgate.block_on_drift`` decides whether a drift blocks. Not looked for
    against a baseline commit (one commit's nightlies are no series over time), in checks
    that name no recipe (no series of their own), nor without otava (one note).
    """
    from rlgate.history.changes import drift_labels

    if args.baseline_commit is not None:
        return [], ["drift not looked for: a baseline commit's nightlies are no series over time"]
    out: list[TriageLabel] = []
    notes = []
    if any(recipe is None for recipe, _ in groups):
        notes.append("drift not looked for in the checks that name no recipe (rlgate.recipe)")
    try:
        for (recipe, hardware), results in groups.items():
            if recipe is None:
                continue
            out += drift_labels(
                results, read[(recipe, hardware)], recipe=recipe, hardware=hardware,
                main_branch=args.main_branch, last=args.last,
                block=candidate.blocks_drift(recipe), own=own,
            )  # fmt: skip
    except ImportError as exc:
        name = getattr(exc, "name", None) or "otava"
        return [], [*notes, f"drift not looked for: {name} is not installed (ci/install.sh)"]
    return out, notes


def _notes(
    args: argparse.Namespace,
    labels: Sequence[TriageLabel],
    read: Sequence[RecordedRun],
    stated: Sequence[str],
) -> list[str]:
    """What the output says when the history holds no comparable nightly."""
    from rlgate.core.text import one_line
    from rlgate.history.triage import window

    commit = args.baseline_commit
    ref = window(read, main_branch=args.main_branch, last=None, commit=commit)
    notes = []
    if not ref and commit is not None:
        notes.append(
            f"the history holds no run of commit {commit} for the candidate's recipe(s): every "
            "failing check is unknown (record the baseline's runs with --commit, or check the "
            "commit)"
        )
    elif not ref:
        notes.append(
            f"the history holds no {args.main_branch!r} nightly of the candidate's recipe(s): "
            "every failing check is unknown (record nightlies with --branch, or pass "
            "--main-branch)"
        )
    elif labels and not stated:
        seen = sorted({r.context.hardware for _, runs in ref for r in runs if r.context.hardware})
        if seen:
            notes.append(
                "the candidate states no hardware (--hardware): only nightlies recorded "
                "without one are its history; the history's ran on "
                + ", ".join(one_line(h) for h in seen[:5])
            )
    return notes


def _cmd_triage(args: argparse.Namespace) -> int:
    from rlgate.cli.history import open_db
    from rlgate.core.io import write_json_atomic, write_text_atomic
    from rlgate.history.triage import reference_name

    candidate = read_candidate(args.candidate)
    own = candidate.identity(args.run_ids, [args.nightly_id] if args.nightly_id else [])
    groups = candidate.groups(args.hardware)
    labels: list[TriageLabel] = []
    read: list[RecordedRun] = []
    by_group: dict[tuple[str | None, str | None], list[RecordedRun]] = {}
    commit = args.baseline_commit
    with open_db(args.db, create=False) as store:
        for (recipe, hardware), results in groups.items():
            found, history = _triage_recipe(store, results, recipe, args, own, hardware)
            labels += found
            read += history
            by_group[(recipe, hardware)] = history
        from rlgate.cli.quarantine import quarantine_triage

        labels, quarantine_notes, quarantine_doc = quarantine_triage(
            store, labels, groups, args.main_branch
        )
    # after quarantine: a quarantine holds a check's failure, it never hides a drift
    drifts, drift_notes = _drifts(candidate, groups, by_group, args, own)
    failing = len(labels)
    labels += drifts
    nightlies = {nightly for lb in labels for nightly in lb.window}
    ref = reference_name(args.main_branch, commit)
    drifting = f" and {len(drifts)} drifting" if drifts else ""
    title = (
        f"rlgate triage: {failing} failing{drifting} gate check(s) of the candidate against "
        f"{len(nightlies)} {ref} nightlies (last {args.last})"
    )
    header = ("check", "candidate", f"{ref} last {args.last}", "label", "evidence")
    print(render_table(labels, title, header), end="")
    stated = sorted({hw for _, hw in groups if hw is not None})
    for note in [*_notes(args, labels, read, stated), *quarantine_notes, *drift_notes]:
        print(f"note: {note}")
    code = exit_code(labels)
    if args.json_out:  # outputs never over a candidate or the database (cli.outputs, open_db)
        doc = {
            "main_branch": args.main_branch,
            "baseline_commit": None
            if commit is None
            else {"sha": commit.sha, "checkout": commit.checkout},
            "hardware": [args.hardware] if args.hardware is not None else stated,
            "last": args.last,
            "flaky_rate": args.flaky_rate,
            "nightlies": len(nightlies),
            "exit_code": int(code),
            "labels": [lb.to_json() for lb in labels],
            "drifting": len(drifts),
            "drift_blocks": any(lb.blocks for lb in drifts),
            **quarantine_doc,
        }
        write_json_atomic(args.json_out, doc)
    if args.junit_out:
        write_text_atomic(args.junit_out, _junit(candidate.checks, labels))
    return code
