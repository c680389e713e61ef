"""The report's triage section: labels for failing gate checks, and trends over the nightlies.

Built when ``rlgate report`` is given a history (``--db``; the demo's generated nightlies):
:func:`build_triage_section` returns plain typed data (:class:`TriageSection`: a title, an
intro, tables as header + rows of plain text, figure keys, notes) plus the trend figures,
kept in ``ReleaseReport.triage``; :func:`triage_report_section` turns it into the page's
section (:mod:`rlgate.report.document` blocks, registered in
``rlgate.report.sections.SECTIONS``; every cell is untrusted text the backends escape). Two
tables:

* **this report's candidate**: each failing or erroring gate check of the report's JUnit,
  labelled by :func:`rlgate.history.triage.triage` against the last N main nightlies
  (grouped by the recipe each testcase records, ``rlgate.recipe``);
* **the latest main nightly**: each failing gate check of the newest main nightly in the
  history, labelled against the nightlies before it (what main itself is going through).

Trends: one small panel per gate check over the window's main nightlies (values, the
outcome of each nightly as a coloured marker, the check's threshold dashed, the first
failing nightly of a regression as a red line), one figure per tier. Figures are drawn
like :mod:`rlgate.report.plots` (matplotlib Agg, no pyplot, DEMO watermark).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlgate.core.results import Outcome, Result, Tier
from rlgate.history.model import CommitRef, RecordedRun, RunContext
from rlgate.history.quarantine import QuarantineState, quarantine_labels
from rlgate.history.triage import (
    DEFAULT_LAST,
    TABLE_HEADER,
    CandidateIdentity,
    Label,
    Mark,
    SeriesKey,
    TriageLabel,
    label_rows,
    marks_by_series,
    reference_name,
    triage,
    window,
)
from rlgate.report.document import Bullets, Own, Paragraph, Row, Section, Table
from rlgate.report.document import Figure as FigureBlock
from rlgate.report.inputs import Case
from rlgate.report.plots import Figure

if TYPE_CHECKING:
    from rlgate.report.model import ReleaseReport

__all__ = [
    "MAX_PANELS",
    "TABLE_HEADER",
    "SectionTable",
    "TriageSection",
    "build_triage_section",
    "candidate_labels",
    "label_rows",
    "latest_nightly_labels",
    "triage_report_section",
]

#: Panels per trend figure; further checks (all passing) are named in a note.
MAX_PANELS = 36


@dataclass(frozen=True, slots=True)
class SectionTable:
    """A table of plain text: a title, its header and rows, what to say when empty.

    ``note`` is said above its rows: what the table is, when it is not what decides.
    """

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    empty: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class TriageSection:
    """What the report's triage section shows (rendering only formats it)."""

    title: str
    intro: str
    tables: tuple[SectionTable, ...]
    figure_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    labels: tuple[TriageLabel, ...] = ()  # the candidate's
    latest: tuple[TriageLabel, ...] = ()  # the latest main nightly's
    window: tuple[str, ...] = ()
    anchor: str = "triage"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """``report.json``'s ``triage``: the window, both label lists, figure keys, notes."""
        return {
            "window": list(self.window),
            "candidate": [label.to_json() for label in self.labels],
            "latest_nightly": [label.to_json() for label in self.latest],
            "figures": list(self.figure_keys),
            "notes": list(self.notes),
            **self.extra,
        }


def _recipes(labels: Sequence[TriageLabel]) -> str:
    names = sorted({lb.recipe for lb in labels if lb.recipe})
    return f" (recipe {names[0]})" if len(names) == 1 else ""


def candidate_labels(
    cases: Sequence[Case],
    history: Sequence[RecordedRun],
    *,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    context: RunContext | None = None,
    commit: CommitRef | None = None,
) -> list[TriageLabel]:
    """Triage the report's gate checks, per recipe their testcases record.

    ``commit``: against that baseline commit's nightlies instead of the main branch's.
    """
    by_recipe: dict[str | None, list[Result]] = defaultdict(list)
    for case in cases:
        if case.gating:
            by_recipe[case.fact("rlgate.recipe")].append(case.judged)
    # its own recordings hold Results of every recipe the report read
    own = CandidateIdentity.of([([c.judged for c in cases], None)])
    out = []
    for recipe, results in by_recipe.items():
        out += triage(
            results, history, main_branch=main_branch, last=last, recipe=recipe, context=context,
            commit=commit, own=own,
        )  # fmt: skip
    return out


def candidate_drifts(
    cases: Sequence[Case],
    history: Sequence[RecordedRun],
    *,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    context: RunContext | None = None,
) -> tuple[list[TriageLabel], list[str]]:
    """The ``drift`` labels of the report's passing gate checks, and notes.

    Per (recipe, hardware) the testcases record (``rlgate.recipe``, ``rlgate.hardware``),
    against the main nightlies (:func:`rlgate.history.changes.drift_labels`); a drift
    blocks when a testcase of its recipe records ``rlgate.block_on_drift`` true (a value
    other than true/false: exit 2, :meth:`Case.flag`). A testcase naming no recipe has no
    series of its own: not looked for (a note). Without otava: none, and a note.
    """
    groups: dict[tuple[str, str | None], list[Result]] = defaultdict(list)
    block: dict[str, bool] = defaultdict(bool)
    unnamed = False
    for case in cases:
        if not case.gating:
            continue
        recipe = case.fact("rlgate.recipe")
        flag = case.flag("rlgate.block_on_drift")
        if recipe is None:
            unnamed = True
            continue
        groups[(recipe, case.fact("rlgate.hardware"))].append(case.judged)
        block[recipe] |= flag
    notes = ["drift not looked for in the checks that name no recipe"] if unnamed else []
    try:
        from rlgate.history.changes import drift_labels

        own = CandidateIdentity.of([([c.judged for c in cases], None)])
        out = []
        for (recipe, hardware), results in groups.items():
            out += drift_labels(
                results, history, recipe=recipe, hardware=hardware, context=context,
                main_branch=main_branch, last=last, block=block[recipe], own=own,
            )  # fmt: skip
    except ImportError as exc:
        name = getattr(exc, "name", None) or "otava"
        return [], [*notes, f"drift not looked for: {name} is not installed (ci/install.sh)"]
    return out, notes


def latest_nightly_labels(
    history: Sequence[RecordedRun], main_branch: str = "main", last: int = DEFAULT_LAST
) -> tuple[str | None, list[TriageLabel]]:
    """The newest main nightly's id and its failing checks, triaged against the ones before."""
    groups = window(history, main_branch=main_branch, last=last + 1)
    if len(groups) < 1:
        return None, []
    nightly, runs = groups[-1]
    by_series: dict[tuple[str, str | None], list[RecordedRun]] = defaultdict(list)
    for run in runs:  # a recipe's runs on two hardware types are two candidates
        by_series[(run.context.recipe, run.context.hardware)].append(run)
    out = []
    for (recipe, hardware), series_runs in by_series.items():
        results = [r for run in series_runs for r in run.results]
        out += triage(
            results,
            history,
            main_branch=main_branch,
            last=last,
            recipe=recipe,
            context=min(series_runs, key=lambda r: r.context.recorded_at).context,
            hardware=hardware,
        )
    return nightly, out


# --- trends ---------------------------------------------------------------------------------

_COLOUR = {Outcome.PASS: "#2ca02c", Outcome.FAIL: "#d62728", Outcome.ERROR: "#ff7f0e"}
_INFRA, _SKIP = "#7f7f7f", "#c7c7c7"
_CHANGE = "#9467bd"  # a change point (purple, dotted)


def _panel(
    ax,
    key: SeriesKey,
    marks: Sequence[Mark],
    x: Sequence[int],
    width: int,
    lb: TriageLabel | None,
    ref: Result | None,
    series: str = "",
    changes: Sequence[Any] = (),
) -> None:
    """One series' panel: ``x`` the marks' nightly positions (1-based) among ``width``.

    ``series``: which series of the check it is, when the check has several.
    """
    from rlgate.report.plots import _plain

    values = [m.value if m.value is not None and math.isfinite(m.value) else None for m in marks]
    drawn = [(i, v) for i, v in zip(x, values, strict=True) if v is not None]
    if drawn:
        ax.plot([i for i, _ in drawn], [v for _, v in drawn], color="#1f77b4", linewidth=1)
    for i, m, v in zip(x, marks, values, strict=True):
        colour = _INFRA if m.infra else _COLOUR.get(m.outcome, _SKIP)
        marker = "s" if m.infra else ("x" if m.outcome is Outcome.FAIL else "o")
        if v is None:  # no value: the outcome on the panel's floor
            ax.plot(i, 0.04, marker=marker, color=colour, transform=ax.get_xaxis_transform())
        else:
            ax.plot(i, v, marker=marker, color=colour, markersize=4)
    if ref is not None and ref.threshold is not None and math.isfinite(ref.threshold) and drawn:
        ax.axhline(ref.threshold, color="#d62728", linestyle="--", linewidth=0.8)
    if lb is not None and lb.label is Label.REGRESSION:
        first = next(
            (i for i, m in zip(x, marks, strict=True) if m.nightly == lb.first_failing), None
        )
        if first is not None:
            ax.axvline(first - 0.5, color="#d62728", linewidth=1.2)
    position = dict(zip((m.nightly for m in marks), x, strict=True))
    for change in changes:  # history.changes: where the value's level moved
        if change.nightly in position:
            ax.axvline(position[change.nightly] - 0.5, color=_CHANGE, linestyle=":", linewidth=1.2)
    title = _plain(key.check, 44) + (f"\n{_plain(series, 44)}" if series else "")
    title += f"\n[{lb.label.value}]" if lb is not None else ""
    ax.set_title(title, fontsize=7, color="#d62728" if lb and lb.blocks else "black")
    ax.tick_params(labelsize=6)
    ax.set_xlim(0.5, width + 0.5)


def _trend_figures(
    groups,
    labels: Sequence[TriageLabel],
    demo: bool,
    changes: Mapping[SeriesKey, Any] | None = None,
) -> tuple[list[Figure], list[str]]:
    changes = changes or {}
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    from rlgate.report.plots import _finish

    marks = marks_by_series(groups)
    several: dict[tuple[Tier, str], set[SeriesKey]] = defaultdict(set)  # named in the title
    for key in marks:
        several[key.check_key].add(key)

    def label_of(key: SeriesKey) -> TriageLabel | None:
        return next((lb for lb in labels if lb.series.matches(key)), None)

    refs: dict[SeriesKey, Result] = {}
    for _, runs in groups:
        for run in runs:
            for r in run.results:
                refs[SeriesKey.of(run.context.recipe, run.context.hardware, r)] = r
    figures, notes = [], []
    ids = [n for n, _ in groups]
    position = {n: i for i, n in enumerate(ids, start=1)}
    for tier in Tier:
        keys = [k for k in marks if k.tier is tier]
        if not keys:
            continue
        keys.sort(
            key=lambda k: (label_of(k) is None, all(m.passed for m in marks[k]), k.check, str(k))
        )
        shown, left = keys[:MAX_PANELS], keys[MAX_PANELS:]
        if left:
            notes.append(
                f"{tier.value} trends: {len(left)} more checks not drawn "
                f"({', '.join(k.check for k in left[:5])}{' …' if len(left) > 5 else ''})"
            )
        cols = min(6, len(shown))
        rows = -(-len(shown) // cols)
        wide = 3.4 if cols <= 3 else 2.4  # a few panels get room for their long names
        fig = MplFigure(figsize=(wide * cols, 1.9 * rows + 0.6), dpi=90, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax, key in zip(axes, shown, strict=False):
            x = [position[m.nightly] for m in marks[key]]
            series = key.describe() if len(several[key.check_key]) > 1 else ""
            _panel(
                ax, key, marks[key], x, len(ids), label_of(key), refs.get(key), series,
                changes.get(key, ()),
            )  # fmt: skip
        for ax in axes[len(shown) :]:
            ax.set_axis_off()
        caption = (
            f"one panel per {tier.value} gate check over the main nightlies {ids[0]} … "
            f"{ids[-1]} (oldest left): line = value, o pass (green), x fail (red), o error "
            "(orange), grey square infra error, dashed = threshold, red line = first failing "
            "nightly of a regression, purple dotted = a change point of the value (rlgate "
            "history changes); panel title [label] of the latest nightly's triage"
        )
        key = f"trend-{tier.value}"
        figures.append(_finish(fig, key, f"{tier.value} checks over the nightlies", caption, demo))
    return figures, notes


#: Change points named in the section's notes (all are in report.json).
MAX_CHANGE_NOTES = 10


def _change_points(groups) -> tuple[dict[SeriesKey, Any], list[str], list[dict[str, Any]]]:
    """The window's change points per series (``history.changes``), notes, their JSON."""
    if not groups:
        return {}, [], []
    from rlgate.history.changes import changes_in

    try:
        found = [s for s in changes_in(groups) if s.changes]
    except ModuleNotFoundError as exc:
        return {}, [f"change points not marked: {exc.name} is not installed (ci/install.sh)"], []
    notes = []
    for s in found:
        for c in s.changes:
            rel = "n/a" if c.relative is None else f"{c.relative * 100:+.1f} %"
            notes.append(
                f"change point: {s.key.tier.value}: {s.key.check} [{s.key.describe()}] at "
                f"{c.nightly} ({c.commit_range()}): {c.mean_before:.4g} -> {c.mean_after:.4g} "
                f"({rel}), p = {c.pvalue:.2g}"
            )
    if len(notes) > MAX_CHANGE_NOTES:
        more = len(notes) - MAX_CHANGE_NOTES
        notes = [*notes[:MAX_CHANGE_NOTES], f"{more} more change points in report.json"]
    return {s.key: s.changes for s in found}, notes, [s.to_json() for s in found]


def build_triage_section(
    cases: Sequence[Case],
    history: Sequence[RecordedRun],
    *,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    context: RunContext | None = None,
    demo: bool = False,
    draw_plots: bool = True,
    commit: CommitRef | None = None,
    quarantines: Sequence[QuarantineState] = (),
) -> tuple[TriageSection, list[Figure]]:
    """The section and its trend figures (none when ``draw_plots`` is off).

    ``commit``: the report's failing checks are labelled against that baseline commit's
    nightlies; the trends and the latest main nightly's table stay the main branch's.
    """
    labels = candidate_labels(
        cases, history, main_branch=main_branch, last=last, context=context, commit=commit
    )
    groups = window(history, main_branch=main_branch, last=last, before=context)
    latest_id, latest = latest_nightly_labels(history, main_branch, last)
    if quarantines:  # the check's label becomes quarantined (reason, owner, expiry)
        labels = quarantine_labels(labels, quarantines)
        latest = quarantine_labels(latest, quarantines)
    # after quarantine: a quarantine holds a check's failure, it never hides a drift
    drifts, notes = candidate_drifts(
        cases, history, main_branch=main_branch, last=last, context=context
    )
    labels = [*labels, *drifts]
    if commit is not None:
        base = window(history, last=last, before=context, commit=commit)
        if not base:
            notes.append(
                f"the history holds no run of baseline commit {commit}: every failing check "
                "of this report is unknown (record the baseline's runs with --commit)"
            )
    if not groups:
        notes.append(
            f"the history holds no nightly of branch {main_branch!r}: every failing check is "
            "unknown (record nightlies with their branch, or pass --main-branch)"
        )
    changes, change_notes, change_json = _change_points(groups)
    notes += change_notes
    figures: list[Figure] = []
    if draw_plots and groups:
        trend_labels = [*latest, *labels]  # the candidate's label wins on a panel's title
        figures, omitted = _trend_figures(groups, trend_labels, demo, changes)
        notes += omitted
    window_ids = tuple(n for n, _ in groups)
    span = f"{window_ids[0]} … {window_ids[-1]}" if window_ids else "none"
    intro = (
        f"Each failing or erroring gate check, labelled against the last {len(window_ids)} "
        f"nightlies of {main_branch} ({span}): regression (passed on main in the window, fails "
        "now; the first failing nightly named), pre-existing (fails on main throughout), "
        "flaky (flips between nightlies of the same code, or passed on a rerun), infra (an "
        "error with an infrastructure cause), unknown (no main nightly ran it). A regression "
        "or unknown is never waved through (docs/recommendation-rule.md). A passing check "
        "whose value changed inside its bound over those nightlies is labelled drift (its "
        "change point named): informational, unless its recipe sets rlgate.block_on_drift "
        "(then a blocker: NO-GO)."
    )
    if commit is not None:
        intro += (
            f" This report's own checks are labelled against the nightlies of baseline "
            f"commit {commit} instead (its main-branch runs and reruns of the same code): "
            "regression = passed on the baseline."
        )

    def header(labels: Sequence[TriageLabel], ref: str = main_branch) -> tuple[str, ...]:
        n = len(labels[0].window) if labels else len(window_ids)
        return (*TABLE_HEADER[:2], f"{ref} last {n}", *TABLE_HEADER[3:])

    tables = [
        SectionTable(
            "This report's failing"
            + (" and drifting" if drifts else "")
            + " gate checks"
            + _recipes(labels),
            header(labels, reference_name(main_branch, commit)),
            label_rows(labels),
            "No gate check of this report fails or errors: nothing to triage.",
        )
    ]
    if latest_id is not None:
        tables.append(
            SectionTable(
                f"Latest {main_branch} nightly {latest_id}, against the nightlies before it"
                + _recipes(latest),
                header(latest),
                label_rows(latest),
                f"No gate check of {latest_id} fails or errors.",
                note=(
                    f"Context from the history, not this report's verdict: the failing gate "
                    f"checks of {main_branch}'s own latest nightly. They do not block this "
                    "report; its own checks decide (the table above and the evidence by tier)."
                ),
            )
        )
    section = TriageSection(
        title="Triage against the nightly history",
        intro=intro,
        tables=tuple(tables),
        figure_keys=tuple(f.key for f in figures),
        notes=tuple(notes),
        labels=tuple(labels),
        latest=tuple(latest),
        window=window_ids,
        extra={
            "main_branch": main_branch,
            "baseline_commit": None if commit is None else str(commit),
            "last": last,
            "latest_nightly_id": latest_id,
            "change_points": change_json,
        },
    )
    return section, figures


def triage_report_section(report: ReleaseReport) -> Section | None:
    """The page's section (absent without a history): intro, the two tables, trends, notes."""
    section = report.triage
    if section is None:
        return None
    tables = tuple(
        Section(
            table.title,
            (
                *((Paragraph(table.note),) if table.note else ()),
                Table(table.header, tuple(Row(row) for row in table.rows)),
            )
            if table.rows
            else (Paragraph(table.empty),),  # names a nightly id: database text
        )
        for table in section.tables
    )
    figures = tuple(
        FigureBlock(f.key, f.title, f.caption, f.data_uri())
        for f in report.figures
        if f.key in section.figure_keys
    )
    notes = (Bullets(tuple(Paragraph(n) for n in section.notes)),) if section.notes else ()
    trends = (Section(Own("Trends"), (*figures, *notes)),) if figures or notes else ()
    return Section(
        Own(section.title),
        (Paragraph(section.intro),),
        anchor=section.anchor,
        subsections=(*tables, *trends),
    )
