"""Quarantine: a gate check whose failure does not block, for a while, with a reason and owner.

An entry (:class:`Quarantine`, table ``quarantines``, revision 0004) names its **scope**: a
recipe and a check name (the Result's name, in whichever tier it is), and optionally the
hardware (None: every hardware the recipe runs on). Only a Result of that check judged for
that recipe (and hardware) is quarantined: other recipes, checks, hardware, a check that
names no recipe (the SWE gate's criteria) are never touched.

**Lifecycle** (:func:`state_of`): an entry is *active* until it expires by itself or is
removed:

* ``until`` (``--until DATE``): expired from that time on (a date alone: through that day,
  UTC; it expires at 00:00 UTC of the next day);
* ``runs`` (``--runs N``): expired once N nightlies of the recipe (on its hardware, when
  the entry names one) are recorded on the main branch after the entry was added, whatever
  their result. Nightlies are counted as ``Store.runs(last=...)`` counts them: the distinct
  ``nightly_id`` values, a run recorded without one counting as a nightly of its own. Runs
  of other branches (an experiment, a canary, ``rlgate bisect``'s steps) never use up a
  quarantine, as they never enter triage's window;
* ``removed_at`` (``history quarantine remove``): removed by hand. A removed entry is kept,
  with when and by whom, as the quarantine's history.

**Effect**: :func:`quarantine_labels` turns a failing check's triage label into
``quarantined`` (the label it would have had kept, with the entry's reason, owner and
expiry); the report's verdict (:func:`rlgate.report.verdict.decide`) waives its failure and
says ``GO with N quarantined checks``. A quarantined check that passes is named as a
candidate for removal. An expired or removed entry changes nothing.

Reason and owner are untrusted text: one line, no control characters (refused when added,
and by the row reader, :func:`rlgate.history.rows.read_quarantine`), at most
:data:`MAX_REASON` / :data:`MAX_OWNER` characters; every output escapes them as any other
database text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rlgate.core.errors import RlgateError
from rlgate.core.results import Outcome, Result
from rlgate.core.text import one_line
from rlgate.history.model import (
    MAX_CHECK,
    MAX_OWNER,
    MAX_REASON,
    MAX_RUNS,
    Quarantine,
    State,
    check_entry,
)
from rlgate.history.triage import Label, TriageLabel

if TYPE_CHECKING:
    from rlgate.history.store import Store

__all__ = [
    "MAX_CHECK",
    "MAX_OWNER",
    "MAX_REASON",
    "MAX_RUNS",
    "Quarantine",
    "QuarantineState",
    "State",
    "active",
    "add_quarantine",
    "check_entry",
    "match",
    "passing_quarantined",
    "quarantine_labels",
    "quarantines",
    "remove_quarantine",
    "state_of",
    "states",
]


@dataclass(frozen=True, slots=True)
class QuarantineState:
    """An entry, where it is in its lifecycle, and (``runs`` entries) the nightlies since."""

    entry: Quarantine
    state: State
    runs_seen: int = 0

    @property
    def active(self) -> bool:
        """Whether the entry quarantines its check now."""
        return self.state is State.ACTIVE

    def expiry(self) -> str:
        """``until 2026-12-31T00:00Z`` or ``2 of 5 nightlies left`` (one line)."""
        q = self.entry
        if q.until is not None:
            return f"until {q.until.strftime('%Y-%m-%dT%H:%MZ')}"
        left = max(0, (q.runs or 0) - self.runs_seen)
        return f"{left} of {q.runs} nightlies left"

    def describe(self) -> str:
        """``quarantined #3 by alice (until ...): reason`` (one line, plain text)."""
        q = self.entry
        return one_line(f"quarantine #{q.id} by {q.owner} ({self.expiry()}): {q.reason}")

    def to_json(self) -> dict[str, Any]:
        """The entry and its state as JSON."""
        q = self.entry

        def t(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "id": q.id, "recipe": q.recipe, "check": q.check, "hardware": q.hardware,
            "reason": q.reason, "owner": q.owner, "added_at": t(q.added_at),
            "added_by": q.added_by, "until": t(q.until), "runs": q.runs,
            "runs_seen": self.runs_seen if q.runs is not None else None,
            "removed_at": t(q.removed_at), "removed_by": q.removed_by,
            "state": self.state.value, "expiry": self.expiry(),
        }  # fmt: skip


def state_of(q: Quarantine, now: datetime, runs_seen: int = 0) -> QuarantineState:
    """The entry's state at ``now`` with ``runs_seen`` nightlies recorded since it was added."""
    if q.removed_at is not None and q.removed_at <= now:
        state = State.REMOVED
    elif q.until is not None and now >= q.until:
        state = State.EXPIRED
    elif q.runs is not None and runs_seen >= q.runs:
        state = State.EXPIRED
    else:
        state = State.ACTIVE
    return QuarantineState(q, state, runs_seen)


def match(
    entries: Iterable[QuarantineState], recipe: str | None, check: str, hardware: str | None
) -> QuarantineState | None:
    """The active entry whose scope holds ``check`` of ``recipe`` on ``hardware`` (or None).

    A check without a recipe is never quarantined; an entry naming hardware holds only
    Results stating that hardware.
    """
    if recipe is None:
        return None
    for s in entries:
        q = s.entry
        if s.active and q.recipe == recipe and q.check == check:
            if q.hardware is None or q.hardware == hardware:
                return s
    return None


# --- triage -------------------------------------------------------------------------------


def quarantine_labels(
    labels: Sequence[TriageLabel], entries: Sequence[QuarantineState]
) -> list[TriageLabel]:
    """``labels`` with each quarantined check's label replaced by ``quarantined``.

    The reason names the entry (reason, owner, expiry) and the label it would have had.
    """
    out = []
    for lb in labels:
        s = match(entries, lb.recipe, lb.check, lb.hardware)
        if s is None or lb.label is Label.QUARANTINED:
            out.append(lb)
            continue
        reason = f"{s.describe()}; would be {lb.label.value}: {lb.reason}"
        out.append(dataclasses.replace(lb, label=Label.QUARANTINED, reason=reason, quarantine=s))
    return out


def passing_quarantined(
    checks: Iterable[tuple[str | None, str | None, Result]], entries: Sequence[QuarantineState]
) -> list[tuple[QuarantineState, Result]]:
    """Active entries whose check passed (``(recipe, hardware, Result)`` in): removable.

    A check that also failed (a rerun) is not listed.
    """
    by: dict[int, tuple[QuarantineState, Result]] = {}
    failed: set[int] = set()
    for recipe, hardware, result in checks:
        s = match(entries, recipe, result.name, hardware)
        if s is None:
            continue
        if result.outcome is Outcome.PASS:
            by.setdefault(s.entry.id, (s, result))
        elif result.outcome in (Outcome.FAIL, Outcome.ERROR):
            failed.add(s.entry.id)
    return [v for k, v in by.items() if k not in failed]


# --- the store ----------------------------------------------------------------------------


def _table() -> Any:
    from rlgate.history.schema import QuarantineRow

    return QuarantineRow.__table__


def quarantines(store: Store) -> list[Quarantine]:
    """Every entry (removed ones too), oldest first, each read by its typed reader."""
    import sqlalchemy as sa

    from rlgate.history.rows import QUARANTINE_COLUMNS, raw_columns, read_quarantine

    table = _table()
    query = sa.select(*raw_columns(table, QUARANTINE_COLUMNS)).order_by(table.c.id)
    with store._begin() as conn:
        return [read_quarantine(row, store.shown) for row in conn.execute(query)]


def _nightlies_since(
    store: Store, entries: Sequence[Quarantine], main_branch: str
) -> dict[int, int]:
    """Per ``runs`` entry: main-branch nightlies of its recipe (hardware) since it was added."""
    from rlgate.history.schema import RunRow

    runs = RunRow.__table__
    counted = [q for q in entries if q.runs is not None and q.removed_at is None]
    out: dict[int, int] = {}
    if not counted:
        return out
    with store._begin() as conn:
        for recipe in sorted({q.recipe for q in counted}):
            stored = store._contexts(conn, [runs.c.recipe == recipe])
            for q in (q for q in counted if q.recipe == recipe):
                keys = {
                    ("nightly", r.context.nightly_id) if r.context.nightly_id else ("run", r.pk)
                    for r in stored
                    if r.context.recorded_at > q.added_at
                    and r.context.branch == main_branch  # never a canary, a bisect step
                    and (q.hardware is None or r.context.hardware == q.hardware)
                }
                out[q.id] = len(keys)
    return out


def states(store: Store, now: datetime, main_branch: str = "main") -> list[QuarantineState]:
    """Every entry and its state at ``now``, oldest first (``runs`` counted on ``main_branch``)."""
    entries = quarantines(store)
    seen = _nightlies_since(store, entries, main_branch)
    return [state_of(q, now, seen.get(q.id, 0)) for q in entries]


def active(store: Store, now: datetime, main_branch: str = "main") -> list[QuarantineState]:
    """The entries active at ``now``."""
    return [s for s in states(store, now, main_branch) if s.active]


def add_quarantine(store: Store, entry: Quarantine) -> QuarantineState:
    """Store ``entry`` (its ``id`` is assigned); refused while its scope has an active entry."""
    import sqlalchemy as sa

    try:
        check_entry(entry)
    except ValueError as exc:
        raise RlgateError(f"quarantine of {entry.check[:80]!r}: {exc}") from None
    if entry.until is not None and entry.until <= entry.added_at:
        raise RlgateError(
            f"quarantine of {entry.scope()}: --until {entry.until.isoformat()} has passed",
            hint="give a date or time in the future",
        )
    for s in states(store, entry.added_at):
        q = s.entry
        same = (q.recipe, q.check, q.hardware) == (entry.recipe, entry.check, entry.hardware)
        if s.active and same:
            raise RlgateError(
                f"{q.scope()} is quarantined already: {s.describe()}",
                hint=f"remove it first (rlgate history quarantine remove {q.id})",
            )
    values = {
        f.name: getattr(entry, f.name) for f in dataclasses.fields(Quarantine) if f.name != "id"
    }
    values["check_name"] = values.pop("check")
    table = _table()
    with store._begin() as conn:
        pk = conn.execute(sa.insert(table).returning(table.c.id), values).scalar_one()
    return state_of(dataclasses.replace(entry, id=pk), entry.added_at)


def remove_quarantine(
    store: Store, target: str, *, recipe: str | None, by: str | None, now: datetime
) -> list[Quarantine]:
    """Mark entries removed (kept as history): entry ``target`` (an id), or check ``target``.

    A check needs ``recipe``; its entries not removed yet (active or expired, every
    hardware) are removed. Raises RlgateError when nothing matches.
    """
    import sqlalchemy as sa

    entries = [q for q in quarantines(store) if q.removed_at is None]
    if target.isdigit() and recipe is None:
        chosen = [q for q in entries if q.id == int(target)]
        what = f"quarantine #{target}"
    elif recipe is None:
        raise RlgateError(
            f"history quarantine remove {one_line(target)[:80]}: a check needs --recipe",
            hint="give the entry's id (history quarantine list) or the check and --recipe",
        )
    else:
        chosen = [q for q in entries if q.check == target and q.recipe == recipe]
        what = f"a quarantine of {one_line(target)[:80]} ({one_line(recipe)[:80]})"
    if not chosen:
        raise RlgateError(
            f"no {what} that is not removed already in {store.shown}",
            hint="`rlgate history quarantine list --all` lists every entry",
        )
    table = _table()
    with store._begin() as conn:
        conn.execute(
            sa.update(table)
            .where(table.c.id.in_([q.id for q in chosen]))
            .values(removed_at=now, removed_by=by)
        )
    return [dataclasses.replace(q, removed_at=now, removed_by=by) for q in chosen]
