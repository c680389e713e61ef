"""``rlgate history show``: a recipe's checks over its recorded runs, as text.

Without ``--check``: the runs (oldest first, numbered), then one line per check with one
mark per run (``.`` pass, ``F`` fail, ``E`` error, ``s`` skip, blank: not in that run) and
its latest value and bound. With ``--check NAME``: that check run by run (outcome, value,
bound, message).

Everything shown comes from the database and is shown as one line (:func:`one_line`): a
check name or bound that holds a line break cannot start a line of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rlgate.core.results import Outcome, Result
from rlgate.core.text import one_line
from rlgate.history.model import RecordedRun

__all__ = ["MARKS", "render_history"]

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


def render_history(
    runs: Sequence[RecordedRun], recipe: str, *, check: str | None = None, shown: str = ""
) -> str:
    """The text of ``rlgate history show`` for ``runs`` (given newest first)."""
    ordered = list(reversed(runs))
    promoted = sum(r.promoted for r in ordered)
    head = [
        one_line(
            f"history of {recipe} in {shown}: {len(ordered)} run(s), oldest first "
            f"({promoted} promoted)"
        ),
        *_runs_table(ordered),
        "",
    ]
    if check is not None:
        rows = []
        for i, run in enumerate(ordered, 1):
            hit = next((r for r in run.results if r.name == check), None)
            if hit is None:
                rows.append(f"  {i:<2} -")
                continue
            rows.append(
                f"  {i:<2} {hit.outcome.value.upper():<5} {_value(hit):>12}  "
                f"{one_line(hit.bound):<24} {one_line(hit.message)[:140]}"
            )
        if all(row.endswith(" -") for row in rows):
            rows.append(f"  (no run records a check named {one_line(check)!r})")
        return "\n".join([*head, f"check {one_line(check)}:", *rows]) + "\n"
    names: list[str] = []
    for run in ordered:
        names += [r.name for r in run.results if r.name not in names and not r.informational]
    shown_name = {name: one_line(name) for name in names}
    width = max((len(n) for n in shown_name.values()), default=5)
    numbers = "".join(str(i % 10) for i in range(1, len(ordered) + 1))
    lines = [*head, f"  {'check':<{width}}  {numbers}  latest value  bound"]
    for name in names:
        marks, latest = "", None
        for run in ordered:
            hit = next((r for r in run.results if r.name == name), None)
            marks += MARKS[hit.outcome] if hit is not None else " "
            latest = hit or latest
        bound = one_line(latest.bound) if latest is not None else ""
        lines.append(f"  {shown_name[name]:<{width}}  {marks}  {_value(latest):>12}  {bound}")
    lines.append("marks: . pass  F fail  E error  s skip  (blank: not in that run)")
    return "\n".join(lines) + "\n"
