"""The report's sections, built once from a :class:`~rlgate.report.model.ReleaseReport`.

Each section is one function ``(ReleaseReport) -> Section | None`` (None: nothing to show)
registered in :data:`SECTIONS`, in page order. Both pages, Markdown and HTML, are rendered
from the one :class:`~rlgate.report.document.Document` that :func:`build_document` makes,
so they carry the same sections, in the same order, with the same facts.

**Adding a section**: write a function returning a
:class:`~rlgate.report.document.Section` (in its own module if it is large, e.g.
``report/triage_section.py``, importing the blocks from :mod:`rlgate.report.document`, not
from here: this module imports it), and add it to :data:`SECTIONS` where it belongs. Put
input text in plain ``str`` (the backends escape it for each page), rlgate's own wording in
:class:`~rlgate.report.document.Own`; never pre-escape.

The verdict comes first, then the sentence, then every blocker linked to the anchor of its
evidence (``#case-N`` testcase rows, ``#tier-<tier>`` sections, ``#swe``, ``#runs``): a
testcase a blocker links to is always a row of its tier's table, never only a name in a
listing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rlgate.core.junit import format_value
from rlgate.core.results import Outcome
from rlgate.report.canary_section import canary_report_section
from rlgate.report.document import (
    Bullets,
    Cell,
    Code,
    Document,
    Entry,
    Escaped,
    Figure,
    Item,
    Link,
    Listing,
    Notice,
    Own,
    Paragraph,
    Ref,
    Row,
    Section,
    Strong,
    Table,
    VerdictBanner,
    clip,
    parts,
)
from rlgate.report.inputs import DIRECTORY_DIGEST
from rlgate.report.triage_section import triage_report_section

if TYPE_CHECKING:
    from rlgate.checks.document import RunDocument
    from rlgate.report.inputs import Case
    from rlgate.report.model import ReleaseReport
    from rlgate.report.verdict import TierSummary

__all__ = ["SECTIONS", "SectionBuilder", "build_document"]

SectionBuilder = Callable[["ReleaseReport"], Section | None]

DEMO_BANNER = "DEMO — generated demo runs and demo SWE results; not a release result."
EXPLAIN = {
    "GO": "Every release tier ran with no failure or error and SWE-bench Verified improved.",
    "NO-GO": "A gate failed, or training did not improve SWE-bench Verified.",
    "INCOMPLETE": "Evidence is missing, inconclusive or inconsistent: this is not a GO.",
}
#: A GO with quarantine entries: what the list under it is.
QUARANTINE_EXPLAIN = (
    "Every release tier ran and SWE-bench Verified improved; the gate checks below are "
    "quarantined (rlgate history quarantine: reason, owner, expiry): a quarantined failure "
    "does not block, a quarantined pass is a candidate for removal."
)


def _bullets(lines: Sequence[Cell]) -> Bullets:
    return Bullets(tuple(Item(line) for line in lines))


def _table(head: Sequence[str], rows: Sequence[Sequence[Cell]]) -> Table:
    return Table(tuple(head), tuple(Row(tuple(r)) for r in rows))


# --- the verdict and why ----------------------------------------------------------------------


def _why(report: ReleaseReport) -> Section:
    if not report.blockers:
        n = len(report.allowances)
        text = Own(
            EXPLAIN["GO"] + f" {n} skipped or expected-failure testcase(s) are allowed and "
            "listed under "
        )
        link = Ref("allowances", Own("Skips and expected failures"))
        return Section(Own("Why"), (Paragraph((text, link, Own("."))),))
    items = tuple(
        Item(
            (
                Strong(Own(b.forces.value)),
                Own(" · "),
                b.title,
                Own(": "),
                clip(b.detail),
                Own(" ("),
                Ref(b.anchor, Own("evidence")),
                Own(")"),
            ),
            style=f"b-{b.forces.value}",
        )
        for b in report.blockers
    )
    explain = EXPLAIN[report.verdict.value]
    if report.verdict.value == "GO":
        explain = QUARANTINE_EXPLAIN
    return Section(Own("Why"), (Paragraph(Own(explain)), Bullets(items)))


def verdict_section(report: ReleaseReport) -> Section:
    """The DEMO banner, the verdict, the sentence, and why (every blocker, linked)."""
    blocks = (
        *([Notice(Own(DEMO_BANNER))] if report.demo else []),
        VerdictBanner(report.verdict.value, report.verdict_text),
        Paragraph(Escaped(report.story_md, report.story), style="story"),
    )
    return Section(None, blocks, subsections=(_why(report),))


# --- tiers and plots --------------------------------------------------------------------------


def _tier_row(t: TierSummary) -> Row:
    gating = [c for c in t.cases if not c.informational]
    info = len(t.cases) - len(gating)
    extra = f" (+{info} informational)" if info else ""
    counts = [Own(str(n)) for n in t.counts().values()]
    ran = Own("yes") if t.ran else Strong(Own("NOT RUN"))
    return Row((Own(t.tier.value), Own(f"{len(gating)}{extra}"), *counts, ran))


def tiers_section(report: ReleaseReport) -> Section:
    """One row per tier: testcases by outcome and whether a gate check ran."""
    head = ("tier", "testcases", "passed", "failed", "errors", "skipped", "xfailed", "ran")
    return Section(Own("Tiers"), (Table(head, tuple(_tier_row(t) for t in report.tiers)),))


def plots_section(report: ReleaseReport) -> Section | None:
    """The figures (absent when none was drawn); the triage trends go in their section."""
    trends = set(report.triage.figure_keys) if report.triage else set()
    shown = [f for f in report.figures if f.key not in trends]
    if not shown:
        return None
    figures = tuple(Figure(f.key, f.title, f.caption, f.data_uri()) for f in shown)
    return Section(Own("Plots"), figures)


# --- SWE-bench --------------------------------------------------------------------------------


def _flips(lost: int, gained: int, n: int, single: bool) -> str:
    if single:  # one run per arm: the discordance that sizes the eval (rlgate swe power)
        return f"lost {lost}, gained {gained}: discordance ψ = {(lost + gained) / n:.3f}"
    return f"instances whose mean over seeds differs: {lost} lower after, {gained} higher after"


def _swe_lines(report: ReleaseReport) -> list[Cell]:
    ev = report.swe_evidence
    lines: list[Cell] = []
    if report.swe is not None:
        path, doc = report.swe
        n = doc.before.n_instances
        lo, hi = doc.ci95_pp
        margin = "" if doc.margin_pp is None else f", margin {doc.margin_pp:g} pp"
        ds = doc.dataset
        single = len(doc.before.runs) == len(doc.after.runs) == 1
        lines += [
            (
                Own(
                    f"verdict {doc.verdict.value}: Δ {doc.delta_pp:+.2f} pp, "
                    f"95% CI [{lo:+.2f}, {hi:+.2f}] pp, "
                ),
                doc.test,
                Own(f" p = {doc.p_value:.3g} (α = {doc.alpha:g}{margin})"),
            ),
            Own(_flips(doc.lost, doc.gained, n, single)),
            (
                Own("dataset "),
                ds.source,
                Own(f" ({n} instances, sha256 "),
                (ds.file_sha256 or ds.ids_sha256)[:12],
                Own("); JSON "),
                str(path),
            ),
            *_swe_flaky_reduced(report),
        ]
    elif ev is not None:
        lines.append((Own("No SWE JSON given; from the swe_gate JUnit: verdict "), ev.stated.value))
    else:
        lines.append(Own("No SWE JSON and no swe_gate JUnit verdict given."))
    if ev is not None:
        full = "" if ev.full_verified else " (not the full set: no GO)"
        lines.append(Own(f"instance set compared: {ev.universe()}{full}"))
        lines += [(Own("CONTRADICTION: "), c) for c in ev.contradictions]
    return lines


def _swe_flaky_reduced(report: ReleaseReport) -> list[Cell]:
    """The flaky instances and the ``--exclude`` comparison of the SWE JSON, if it has them."""
    assert report.swe is not None
    doc, ev, lines = report.swe[1], report.swe_evidence, []
    if doc.flaky is not None and not doc.flaky.measured_arms:
        lines.append(Own("flaky instances: not measured (one run per arm)"))
    elif doc.flaky is not None:
        shown = doc.flaky.ids[:5]
        more = f" … (+{len(doc.flaky.ids) - 5} more)" if len(doc.flaky.ids) > 5 else ""
        head = Own(
            "flaky instances (resolved in some runs of one arm, not in others): "
            f"{doc.flaky.count}" + (": " if shown else "")
        )
        lines.append((head, ", ".join(shown), Own(more)) if shown else head)
    reduced = ev.reduced if ev is not None else None
    if doc.reduced is not None and reduced is not None:
        r, c = doc.reduced, doc.reduced.comparison
        lines.append(
            (
                Own("reduced comparison (--exclude "),
                " ".join(r.exclude),
                Own(f"; shown, never decides): without {r.excluded_count} instances ("),
                ", ".join(f"{x.label} {x.count}" for x in r.sets),
                Own(
                    f"), on {reduced.universe()}: verdict {c.verdict.value}, "
                    f"Δ {c.delta_pp:+.2f} pp, 95% CI [{c.ci95_pp[0]:+.2f}, "
                    f"{c.ci95_pp[1]:+.2f}] pp, p = {c.p_value:.3g}"
                ),
            )
        )
        lines += [(Own("CONTRADICTION (reduced): "), x) for x in reduced.contradictions]
    if doc.reduced_not_formed is not None:
        unformed = doc.reduced_not_formed
        lines.append(
            (
                Own("reduced comparison (--exclude "),
                " ".join(unformed.exclude),
                Own("; shown, never decides): not formed: "),
                unformed.reason,
            )
        )
    return lines


def _swe_side_by_side(report: ReleaseReport) -> list[list[Cell]]:
    """Rows of the full and the reduced comparison side by side (rlgate's numbers and words)."""
    assert report.swe is not None and report.swe[1].reduced is not None
    ev = report.swe_evidence
    assert ev is not None and ev.reduced is not None
    cols = []
    for doc, e in ((report.swe[1], ev), (report.swe[1].reduced.comparison, ev.reduced)):
        cols.append(
            [
                e.universe(),
                str(doc.dataset.n_instances),
                doc.verdict.value,
                f"{doc.delta_pp:+.2f} pp",
                f"[{doc.ci95_pp[0]:+.2f}, {doc.ci95_pp[1]:+.2f}] pp",
                f"{doc.p_value:.3g}",
                f"{100 * doc.before.rate:.1f}% → {100 * doc.after.rate:.1f}%",
            ]
        )
    names = ["instance set", "instances", "verdict", "Δ", "95% CI", "p", "before → after"]
    return [[Own(x) for x in row] for row in zip(names, *cols, strict=True)]


def swe_section(report: ReleaseReport) -> Section:
    """The SWE-bench comparison: verdict, effect, dataset; the arms and the criteria."""
    blocks: list = [_bullets(_swe_lines(report))]
    if report.swe is not None:
        doc = report.swe[1]
        arms = []
        for name, arm in (("before", doc.before), ("after", doc.after)):
            se = "–" if arm.rate_se is None else f"{100 * arm.rate_se:.1f}%"
            worst = max((r.infra_error_rate for r in arm.runs), default=0.0)
            cells = [name, str(len(arm.runs)), f"{100 * arm.rate:.1f}%", se, f"{worst:.1%}"]
            arms.append([Own(x) for x in cells])
        blocks.append(_table(["arm", "runs", "resolved", "± SE", "worst infra"], arms))
        crit = [[c.name, Own(c.outcome.value.upper()), clip(c.message)] for c in doc.criteria]
        blocks.append(_table(["criterion", "status", "message"], crit))
        if doc.reduced is not None and report.swe_evidence is not None:
            head = ["", "full (the verdict)", "reduced"]
            blocks.append(_table(head, _swe_side_by_side(report)))
    return Section(Own("SWE-bench"), tuple(blocks), anchor="swe")


# --- training runs ----------------------------------------------------------------------------


def _check_rows(doc: RunDocument) -> list[list[Cell]]:
    return [
        [
            Own(c.outcome.value.upper()),
            Own(c.tier.value),
            c.name,
            "" if c.outcome is Outcome.SKIP else format_value(c.value),
            c.bound,
            clip(c.message),
        ]
        for c in (*doc.checks, *doc.skipped)
    ]


def runs_section(report: ReleaseReport) -> Section:
    """Each run's gate checks (from its check-run JSON) and the training time."""
    blocks: list = []
    head = ["status", "tier", "check", "value", "bound", "message"]
    for path, doc in report.runs:
        about = (
            Strong(doc.recipe),
            Own(" — run "),
            Code(doc.run),
            Own(" (JSON "),
            str(path),
            Own(f"), target step {doc.target_step}, {'passed' if doc.passed else 'FAILED'}"),
        )
        blocks += [Paragraph(about), _table(head, _check_rows(doc))]
    if report.time is not None:
        time = f"Training time: {report.time.text()} (sum of timing/train/total_step_time)."
        blocks.append(Paragraph(Own(time)))
    return Section(Own("Training runs"), tuple(blocks), anchor="runs")


# --- evidence by tier -------------------------------------------------------------------------


def _case_row(c: Case) -> Row:
    cells = (Own(c.status.upper()), c.name, clip(c.message), c.source)
    return Row(cells, anchor=c.anchor, style=c.status)


def _tier_evidence(t: TierSummary, linked: set[str]) -> Section:
    title, anchor = Own(t.tier.value), t.anchor
    if not t.cases:
        return Section(title, (Paragraph(Own("No testcase of this tier was given.")),), anchor)
    gating = [c for c in t.cases if not c.informational]
    # an allowed skip or expected failure is a row of the allowances table only (once)
    allowed = [c for c in gating if c.allowed_skip and c.anchor not in linked]
    shown = [
        c
        for c in gating
        if (c.shown is not Outcome.PASS or c.anchor in linked) and c not in allowed
    ]
    passed = [c for c in gating if c not in shown and c not in allowed]
    blocks: list = []
    if shown:
        head = ("status", "testcase", "message", "source")
        blocks.append(Table(head, tuple(_case_row(c) for c in shown)))
    label = Own(f"{len(passed)} passed testcase" + ("" if len(passed) == 1 else "s"))
    blocks.append(Listing(label, tuple(Entry(c.name) for c in passed)))
    if allowed:
        n = len(allowed)
        text = Own(f"{n} skipped or expected-failure testcase{'' if n == 1 else 's'}: under ")
        link = Ref("allowances", Own("Skips and expected failures"))
        blocks.append(Paragraph((text, link, Own("."))))
    instances = [c for c in t.cases if c.informational == "instance"]
    if instances:
        lost = sum(c.shown is Outcome.FAIL for c in instances)
        blocks.append(
            Paragraph(
                Own(f"Per-instance suite (informational): {len(instances)} instances, {lost} lost.")
            )
        )
    info = [c for c in t.cases if c.informational]
    if info:
        kinds = ", ".join(sorted({c.informational for c in info}))
        label = (Own("Informational ("), kinds, Own("; never a gate check)"))
        blocks.append(Listing(label, tuple(Entry(c.name, c.status) for c in info)))
    return Section(title, tuple(blocks), anchor)


def evidence_section(report: ReleaseReport) -> Section:
    """Per tier: every testcase that did not pass (or that a blocker names), then the rest."""
    linked = {b.anchor for b in report.blockers}
    subsections = tuple(_tier_evidence(t, linked) for t in report.tiers)
    return Section(Own("Evidence by tier"), subsections=subsections)


# --- allowances, versions, recipe, inputs, notes ----------------------------------------------


def allowances_section(report: ReleaseReport) -> Section:
    """Skipped and expected-failure testcases of gating suites: allowed, but listed."""
    linked = {b.anchor for b in report.blockers}  # those rows are in the evidence tables
    rows = tuple(
        Row(
            (Own(c.status), Own(c.tier.value), c.name, clip(c.message), c.source),
            anchor=None if c.anchor in linked else c.anchor,
            style=c.status,
        )
        for c in report.allowances
    )
    head = ("kind", "tier", "testcase", "reason", "source")
    block = Table(head, rows) if rows else Paragraph(Own("None."))
    return Section(Own("Skips and expected failures"), (block,), anchor="allowances")


def versions_section(report: ReleaseReport) -> Section:
    """This machine's packages, and the versions and hashes the evidence names."""
    v = report.versions
    installed = [[Own(k), Own(val)] for k, val in v.environment]  # this machine's
    lines: list[Cell] = [v.nemo_rl, v.nemo_gym]
    lines += [(Own("JUnit "), s, Own(": "), k, Own(" "), val) for s, k, val in v.from_junit]
    lines += [(Own("tokenizer file "), p, Own(": "), *_digest(h)) for p, h in v.tokenizer_files]
    lines += [(Own("template "), w, Own(": sha256 "), Code(h)) for w, h in v.templates]
    blocks = (_table(["package", "version"], installed), _bullets(lines))
    return Section(Own("Versions tested"), blocks)


def _digest(sha256: str, width: int | None = None) -> tuple[Own | Code, ...]:
    """``sha256 <hash>``, or what the input is when it has no hash (a directory, no file)."""
    if sha256 == DIRECTORY_DIGEST:
        return (Own("a directory (its files are not hashed)"),)
    if not sha256:
        return (Own("not a regular file (not hashed)"),)
    return (Own("sha256 "), Code(sha256[:width]))


def _fact(value: object) -> str:
    """A recipe fact as a reader says it: ``not set`` for an absent one, ``yes``/``no``."""
    if value is None or value == "":
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def recipe_section(report: ReleaseReport) -> Section:
    """The recipe trained and gated (``--recipe``)."""
    r = report.recipe
    if r is None:
        text = Own("No --recipe given: model and cluster are not stated.")
        return Section(Own("Recipe"), (Paragraph(text),))
    facts: list[tuple[str, Cell]] = [
        ("name", r.name),
        ("file", (r.path, Own(" ("), *_digest(r.sha256, 12), Own(")"))),
        ("model", r.model),
        ("cluster", r.cluster),
        ("tool / reasoning parser", f"{_fact(r.tool_parser)} / {_fact(r.reasoning_parser)}"),
        (
            "async GRPO",
            f"{_fact(r.async_grpo)} (max trajectory age {_fact(r.max_trajectory_age)}, "
            f"in-flight weight updates {_fact(r.in_flight_weight_updates)})",
        ),
        ("steps, batch", f"{_fact(r.max_num_steps)}, {_fact(r.batch)}"),
        ("defaults chain", " → ".join(r.sources)),
    ]
    lines: list[Cell] = [(Own(f"{k}: "), *parts(v)) for k, v in facts]
    return Section(Own("Recipe"), (_bullets(lines),))


#: How each kind of link is named in the Links section.
LINK_TEXT = {
    "run": "the run",
    "wandb": "Weights & Biases",
    "tensorboard": "TensorBoard",
    "ci_job": "the CI job",
    "release": "the release",
}


def links_section(report: ReleaseReport) -> Section | None:
    """Links to the run, its W&B / TensorBoard, the CI job (absent when none is configured)."""
    if not report.links:
        return None
    items = [
        (Link(url, Own(LINK_TEXT.get(kind, kind))), Own(f" ({kind})")) for kind, url in report.links
    ]
    return Section(Own("Links"), (_bullets(items),), anchor="links")


def inputs_section(report: ReleaseReport) -> Section:
    """Every input file with its sha256."""
    lines = [(Code(p), Own(" "), *_digest(h)) for p, h in report.inputs]
    return Section(Own("Inputs"), (_bullets(lines),))


def notes_section(report: ReleaseReport) -> Section | None:
    """What the report could not do (absent when nothing)."""
    if not report.notes:
        return None
    return Section(Own("Notes"), (_bullets(list(report.notes)),))


# --- the registry -----------------------------------------------------------------------------

#: The report's sections in page order. A new section: one builder, one line here.
SECTIONS: list[SectionBuilder] = [
    verdict_section,
    tiers_section,
    links_section,  # site config templates and CI variables (rlgate.core.links)
    plots_section,
    triage_report_section,  # with a history (--db): report/triage_section.py
    canary_report_section,  # with --canary: report/canary_section.py (informational)
    swe_section,
    runs_section,
    evidence_section,
    allowances_section,
    versions_section,
    recipe_section,
    inputs_section,
    notes_section,
]


def build_document(
    report: ReleaseReport, sections: Sequence[SectionBuilder] | None = None
) -> Document:
    """The report as one document: every registered section that has something to show."""
    built = (make(report) for make in (SECTIONS if sections is None else sections))
    return Document(
        title=report.title,
        tab_title=f"{report.verdict.value} — {report.title}",
        sections=tuple(s for s in built if s is not None),
    )
