"""``rlgate history show``: a recipe's checks over its recorded runs, as text.

Check runs (``check-run --db``, ``history record --junit/--run-json``) and SWE runs (``swe
compare --db``: the swe_gate tier's criteria) are two tables: a nightly records one of each,
and one table of both would leave every row half blank. A run that holds both (``history
record --run-json --swe-json``) is in both, each table with its own results. Each table shows
the runs of its ``last`` newest nightlies (:func:`~rlgate.history.model.last_nightlies`).

Without ``--check``: the runs (oldest first, numbered), then one line per check with one
mark per run (``.`` pass, ``F`` fail, ``E`` error, ``s`` skip, blank: not in that run) and
its latest value and bound. With ``--check NAME``: that check run by run (outcome, value,
bound, message), in the table(s) whose runs record it.

Everything shown comes from the database and is shown as one line (:func:`one_line`): a
check name or bound that holds a line break cannot start a line of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rlgate.core.results import Outcome, Result, Tier
from rlgate.core.text import one_line
from rlgate.history.model import RecordedRun, last_nightlies

__all__ = ["MARKS", "render_history", "split_runs"]

MARKS = {Outcome.PASS: ".", Outcome.FAIL: "F", Outcome.ERROR: "E", Outcome.SKIP: "s"}


def _value(result: Result | None) -> str:
    if result is None or result.value is None:
        return ""
    return str(result.value) if not math.isfinite(result.value) else f"{result.value:.6g}"


def _runs_table(runs: Sequence[RecordedRun]) -> list[str]:
    lines = ["  #  recorded (UTC)    run id / nightly / branch / commits / hardware"]
    for i, run in enumerate(runs, 1):
        c = run.context
        commits = " ".join(f"{k}={v[:9]}" for k, v in sorted(c.commits.items()))
        facts = [c.run_id, c.nightly_id or "-", c.branch or "-", commits or "-", c.hardware or "-"]
        mark = " PROMOTED" if run.promoted else ""
        label = f" [{c.label}]" if c.label else ""
        when = c.recorded_at.strftime("%Y-%m-%d %H:%M")
        lines.append(one_line(f"  {i:<2} {when}  {' / '.join(facts)}{label}{mark}"))
    return lines


#: The tables of ``history show``: title, and which Results of a run belong to it.
_TABLES: tuple[tuple[str, Callable[[Result], bool]], ...] = (
    ("check runs", lambda r: r.tier is not Tier.SWE_GATE),
    ("SWE runs", lambda r: r.tier is Tier.SWE_GATE),
)


def split_runs(runs: Sequence[RecordedRun]) -> dict[str, list[RecordedRun]]:
    """Each table's runs (order kept), each run holding only that table's Results.

    A run without Results (only steps or SWE instance outcomes recorded) is a check run.
    """
    tables: dict[str, list[RecordedRun]] = {title: [] for title, _ in _TABLES}
    for run in runs:
        for title, belongs in _TABLES:
            mine = [r for r in run.results if belongs(r)]
            if mine or (title == _TABLES[0][0] and not run.results):
                tables[title].append(run.model_copy(update={"results": mine}))
    return tables


def render_history(
    runs: Sequence[RecordedRun],
    recipe: str,
    *,
    check: str | None = None,
    shown: str = "",
    last: int | None = None,
) -> str:
    """The text of ``rlgate history show`` for ``runs`` (given newest first).

    ``last``: each table keeps the runs of its ``last`` newest nightlies.
    """
    tables = split_runs(runs)
    if last is not None:
        tables = {t: last_nightlies(rs, last, lambda r: r.context) for t, rs in tables.items()}
    window = f"the last {last} nightlies" if last is not None else "every nightly"
    out = [one_line(f"history of {recipe} in {shown} ({window} of each table)")]
    if check is not None:
        hits = {t: rs for t, rs in tables.items() if any(_find(r, check) for r in rs)}
        for title, table in hits.items():
            out += ["", *_table_head(title, table), *_check_rows(list(reversed(table)), check)]
        if not hits:
            out.append(f"  (no run records a check named {one_line(check)!r})")
        return "\n".join(out) + "\n"
    for title, table in tables.items():
        if not table:
            out += ["", f"{title}: none recorded"]
            continue
        out += ["", *_table_head(title, table), *_marks(list(reversed(table)))]
    out.append("marks: . pass  F fail  E error  s skip  (blank: not in that run)")
    return "\n".join(out) + "\n"


def _find(run: RecordedRun, name: str) -> Result | None:
    return next((r for r in run.results if r.name == name), None)


def _table_head(title: str, runs: Sequence[RecordedRun]) -> list[str]:
    promoted = sum(r.promoted for r in runs)
    head = f"{title}: {len(runs)} run(s), oldest first ({promoted} promoted)"
    return [head, *_runs_table(list(reversed(runs))), ""]


def _check_rows(ordered: Sequence[RecordedRun], check: str) -> list[str]:
    rows = [f"check {one_line(check)}:"]
    for i, run in enumerate(ordered, 1):
        hit = _find(run, check)
        if hit is None:
            rows.append(f"  {i:<2} -")
            continue
        rows.append(
            f"  {i:<2} {hit.outcome.value.upper():<5} {_value(hit):>12}  "
            f"{one_line(hit.bound):<24} {one_line(hit.message)[:140]}"
        )
    return rows


def _marks(ordered: Sequence[RecordedRun]) -> list[str]:
    names: list[str] = []
    for run in ordered:
        names += [r.name for r in run.results if r.name not in names and not r.informational]
    shown_name = {name: one_line(name) for name in names}
    width = max((len(n) for n in shown_name.values()), default=5)
    numbers = "".join(str(i % 10) for i in range(1, len(ordered) + 1))
    lines = [f"  {'check':<{width}}  {numbers}  latest value  bound"]
    for name in names:
        marks, latest = "", None
        for run in ordered:
            hit = _find(run, name)
            marks += MARKS[hit.outcome] if hit is not None else " "
            latest = hit or latest
        bound = one_line(latest.bound) if latest is not None else ""
        lines.append(f"  {shown_name[name]:<{width}}  {marks}  {_value(latest):>12}  {bound}")
    return lines
