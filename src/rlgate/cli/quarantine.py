"""``rlgate history quarantine add | list | remove``, and quarantine's part of triage.

Part of the ``rlgate`` CLI (:mod:`rlgate.cli`): argument parsing and thin calls into
:mod:`rlgate.history.quarantine`; errors become exit codes in ``rlgate.cli.app._handle_errors``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.validate import int_in, utc_time

if TYPE_CHECKING:
    from rlgate.core.results import Result
    from rlgate.history.quarantine import QuarantineState
    from rlgate.history.store import Store
    from rlgate.history.triage import TriageLabel

__all__ = ["active_now", "add_quarantine", "quarantine_triage", "until_time"]

MAX_DAYS = 366  # the furthest --until (a quarantine expires by itself)
MAX_RUNS = 10_000  # rlgate.history.quarantine.MAX_RUNS (building the parser imports nothing)

_DB_HELP = (
    "history database: an SQLite file or postgresql://user@host:port/db "
    "(default: $RLGATE_DB, else $XDG_DATA_HOME/rlgate/history.db)"
)
_DOC = (
    "Quarantine a gate check of one recipe (optionally one hardware): its failure is shown "
    "with the reason, owner and expiry, labelled quarantined by rlgate triage, and does not "
    "block; rlgate report --db says 'GO with N quarantined checks'. An entry expires by "
    "itself (--until DATE, or --runs N: after N nightlies of the recipe are recorded); "
    "removed entries are kept as history (docs/history.md, Quarantine). Exit codes: 0 done, "
    "2 bad input (a reason or owner with a control character or too long, a date passed, an "
    "entry already active, none to remove, a row rlgate did not write), 3 the database "
    "server cannot be reached or the [history] extra is not installed."
)


def until_time(text: str) -> datetime:
    """``--until``'s type: an ISO time, or a date (through that day: 00:00 UTC the day after)."""
    when = utc_time(text)
    if len(text.strip()) == 10:  # YYYY-MM-DD
        try:
            when += timedelta(days=1)
        except OverflowError:
            raise argparse.ArgumentTypeError(f"{text!r} is beyond the last date") from None
    return when


def add_quarantine(hsub: argparse._SubParsersAction) -> None:
    """Register ``rlgate history quarantine``."""
    p = hsub.add_parser("quarantine", help="quarantine a flaky gate check, with a lifecycle",
                        description=_DOC)  # fmt: skip
    qsub = p.add_subparsers(dest="quarantine_command", required=True, metavar="ACTION")
    a = qsub.add_parser("add", help="quarantine a check of a recipe", description=_DOC)
    a.add_argument("check", metavar="CHECK", help="the check's name (as its Result names it)")
    a.add_argument("--recipe", required=True, help="the recipe whose check it is")
    a.add_argument("--hardware", help="only on this hardware (default: every hardware)")
    a.add_argument("--reason", required=True, help="why (one line, at most 500 characters)")
    a.add_argument("--owner", required=True, help="who fixes it (at most 100 characters)")
    until = a.add_mutually_exclusive_group()  # one of them: checked by the command
    until.add_argument(
        "--until",
        type=until_time,
        metavar="DATE",
        help="expires at this ISO time (UTC unless it names a zone); a date: through that day",
    )
    until.add_argument(
        "--runs",
        type=int_in(1, MAX_RUNS),
        metavar="N",
        help="expires once N nightlies of the recipe are recorded after now, whatever their result",
    )
    a.add_argument("--db", metavar="DB", help=_DB_HELP)
    a.set_defaults(func=_cmd_add)

    ls = qsub.add_parser("list", help="the active and expired entries", description=_DOC)
    ls.add_argument("--all", action="store_true", help="removed entries too")
    ls.add_argument(
        "--main-branch",
        default="main",
        help="the branch whose nightlies use up --runs entries (main), as triage's",
    )
    ls.add_argument("--json", dest="json_out", metavar="OUT", help="write the entries as JSON")
    ls.add_argument("--db", metavar="DB", help=_DB_HELP)
    ls.set_defaults(func=_cmd_list)

    rm = qsub.add_parser("remove", help="end a quarantine (kept as history)", description=_DOC)
    rm.add_argument("target", metavar="ID|CHECK", help="the entry's id, or a check with --recipe")
    rm.add_argument("--recipe", help="the recipe of CHECK (every entry of it not yet removed)")
    rm.add_argument("--db", metavar="DB", help=_DB_HELP)
    rm.set_defaults(func=_cmd_remove)


def _now() -> datetime:
    return datetime.now(UTC)


def active_now(store: Store, main_branch: str) -> list[QuarantineState]:
    """The entries active now (what ``report --db`` and ``triage`` apply)."""
    from rlgate.history.quarantine import active

    return active(store, _now(), main_branch)


def _cmd_add(args: argparse.Namespace) -> int:
    from rlgate.cli.history import _user, open_db
    from rlgate.history.quarantine import Quarantine, add_quarantine

    if args.until is None and args.runs is None:
        raise RlgateError(
            "history quarantine add needs an expiry: --until DATE or --runs N",
            hint="a quarantine always expires by itself (docs/history.md, Quarantine)",
        )
    if args.until is not None and args.until - _now() > timedelta(days=MAX_DAYS):
        raise RlgateError(
            f"history quarantine add: --until is more than {MAX_DAYS} days ahead",
            hint="a quarantine expires by itself: renew it when it expires, with its reason",
        )
    entry = Quarantine(
        id=0, recipe=args.recipe, check=args.check, hardware=args.hardware, reason=args.reason,
        owner=args.owner, added_at=_now(), added_by=_user(), until=args.until, runs=args.runs,
    )  # fmt: skip
    with open_db(args.db) as store:
        state = add_quarantine(store, entry)
    print(f"quarantined {state.entry.scope()}: {state.describe()}")
    return ExitCode.OK


def _row(s: QuarantineState) -> str:
    from rlgate.core.text import one_line

    q = s.entry
    gone = ""
    if q.removed_at is not None:
        gone = f" (removed {q.removed_at:%Y-%m-%dT%H:%MZ} by {q.removed_by or '?'})"
    return one_line(
        f"#{q.id}  {s.state.value:<8} {q.scope()}  owner {q.owner}  {s.expiry()}  "
        f"added {q.added_at:%Y-%m-%dT%H:%MZ} by {q.added_by or '?'}{gone}  reason: {q.reason}"
    )


def _cmd_list(args: argparse.Namespace) -> int:
    from rlgate.cli.history import open_db
    from rlgate.core.io import write_json_atomic
    from rlgate.core.text import one_line
    from rlgate.history.quarantine import State, states

    with open_db(args.db, create=False) as store:
        found = states(store, _now(), args.main_branch)
        shown = one_line(store.shown)
    listed = [s for s in found if args.all or s.state is not State.REMOVED]
    counts = {st: sum(s.state is st for s in found) for st in State}
    print(
        f"history quarantine: {counts[State.ACTIVE]} active, {counts[State.EXPIRED]} expired, "
        f"{counts[State.REMOVED]} removed{'' if args.all else ' (--all lists them)'} in {shown}"
    )
    for s in listed:
        print(f"  {_row(s)}")
    if args.json_out:
        write_json_atomic(args.json_out, {"entries": [s.to_json() for s in listed]})
    return ExitCode.OK


def _cmd_remove(args: argparse.Namespace) -> int:
    from rlgate.cli.history import _user, open_db
    from rlgate.history.quarantine import remove_quarantine

    with open_db(args.db, create=False) as store:
        gone = remove_quarantine(store, args.target, recipe=args.recipe, by=_user(), now=_now())
    for q in gone:
        print(f"removed quarantine #{q.id} of {q.scope()} (kept as history: list --all)")
    return ExitCode.OK


def quarantine_triage(
    store: Store,
    labels: Sequence[TriageLabel],
    groups: Mapping[tuple[str | None, str | None], Sequence[Result]],
    main_branch: str,
) -> tuple[list[TriageLabel], list[str], dict[str, Any]]:
    """Triage's labels with the active quarantines applied, notes, and the JSON's part.

    ``groups``: the candidate's checks per (recipe, hardware). A quarantined check that
    passed is named: a candidate for removal.
    """
    from rlgate.core.text import one_line
    from rlgate.history.quarantine import active, passing_quarantined, quarantine_labels

    entries = active(store, _now(), main_branch)
    labels = quarantine_labels(labels, entries)
    checks = [(recipe, hw, r) for (recipe, hw), results in groups.items() for r in results]
    passing = passing_quarantined(checks, entries)
    notes = [
        one_line(
            f"quarantined check {s.entry.scope()} passed: a candidate for removal "
            f"(rlgate history quarantine remove {s.entry.id}); {s.describe()}"
        )
        for s, _ in passing
    ]
    doc = {
        "quarantined": sum(1 for lb in labels if lb.quarantine is not None),
        "quarantined_passing": [s.to_json() for s, _ in passing],
    }
    return labels, notes, doc
