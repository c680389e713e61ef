"""The go/no-go release report: one verdict, one sentence, and the evidence behind both.

``rlgate report --junit FILE... [--run RUN_JSON...] [--swe SWE_JSON] [--recipe R] --out DIR``
writes ``DIR/report.md``, a self-contained ``DIR/report.html``, ``DIR/junit.xml`` (every
input testcase, valid against pytest's ``junit-10.xsd``), ``DIR/report.json`` and
``DIR/plots/*.png``.

The verdict (GO / NO-GO / INCOMPLETE) is decided on the JUnit testcases, the one channel
for gate outcomes, plus the SWE verdict, by :mod:`rlgate.report.verdict`
(``docs/recommendation-rule.md``); the sentence and the stated facts come from
:mod:`rlgate.report.story`, the figures from :mod:`rlgate.report.plots`, the pages from
:mod:`rlgate.report.render`.

Invariants: inputs are only read; outputs go into a directory rlgate created (marked with
``.rlgate-report``) or an empty one, atomically, never over or inside an input, never
through a symbolic link the directory holds (a linked marker or ``plots/`` is refused; a
linked output file is replaced, not followed); a demo report says DEMO in its title, its
sentence and every plot.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from rlgate.checks.document import RunDocument
from rlgate.core.errors import RlgateError
from rlgate.core.io import (
    check_output,
    input_within,
    note_input,
    output_conflict,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from rlgate.core.results import Outcome, Tier
from rlgate.history.model import CommitRef, RecordedRun, RunContext
from rlgate.history.quarantine import QuarantineState
from rlgate.history.triage import DEFAULT_LAST, Label
from rlgate.report.inputs import (
    Case,
    load_junit,
    load_run_doc,
    load_swe_doc,
    sha256_path,
)
from rlgate.report.model import ReleaseReport
from rlgate.report.paths import path_roots, shorten_document, shorten_json
from rlgate.report.plots import Figure
from rlgate.report.render import report_payload, to_html, to_markdown
from rlgate.report.sections import build_document
from rlgate.report.story import (
    StoryInputs,
    load_recipe_facts,
    story_sentence,
    training_time,
    version_facts,
)
from rlgate.report.verdict import (
    Blocker,
    BlockerKind,
    SweEvidence,
    TierSummary,
    Verdict,
    decide,
    summarise_tiers,
    swe_evidence,
)
from rlgate.runs.metrics import RunMetrics

__all__ = [
    "OUTPUT_FILES",
    "OUT_MARKER",
    "PLOTS_DIR",
    "Blocker",
    "BlockerKind",
    "Case",
    "Outcome",
    "ReleaseReport",
    "SweEvidence",
    "Tier",
    "TierSummary",
    "Verdict",
    "build_report",
    "decide",
    "prepare_out_dir",
    "summarise_tiers",
    "write_report",
]

logger = logging.getLogger(__name__)

OUT_MARKER = ".rlgate-report"


# --- building -------------------------------------------------------------------------------


def _tier(tiers: Sequence[TierSummary], which: Tier) -> TierSummary:
    return next(t for t in tiers if t.tier is which)


def _failing(blockers: Sequence[Blocker], tier: Tier) -> tuple[str, ...]:
    """Names of the NO-GO blockers of ``tier`` (without the ``tier: `` prefix)."""
    return tuple(
        b.title.split(": ", 1)[-1] for b in blockers if b.tier is tier and b.forces is Verdict.NO_GO
    )


def _paths(items: Sequence[str | os.PathLike[str] | RunMetrics]) -> list[str | os.PathLike[str]]:
    return [p for p in items if not isinstance(p, RunMetrics)]


def _load_runs(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[tuple[Path, RunDocument], ...]:
    docs = tuple((Path(p), load_run_doc(p)) for p in paths)
    for path, doc in docs:  # the run a run JSON names is an input too (plots, timing)
        if Path(doc.run).exists():
            note_input(doc.run, f"the run {path} names")
    return docs


def _metrics(path: str | os.PathLike[str] | None, what: str, notes: list[str]):
    """Load a run for plots and timing; a missing run is a note, not a failure of the gate."""
    from rlgate.runs.metrics import load_run

    if path is None:
        return None
    if not (Path(path).is_dir() or Path(path).is_file()):  # a FIFO or device never ends
        notes.append(
            f"{what} {path} is not a run here (missing, or not a file or directory): its "
            "plots and training time are omitted"
        )
        return None
    return load_run(path)  # MetricsError (exit 2) on a corrupt run


def _figures(
    run, baseline, band_runs, facts, run_docs, swe_doc, swe_ev, demo: bool, notes: list[str]
) -> tuple[list[Figure], list[str]]:
    from rlgate.report import plots

    paths = [p for p in band_runs if not isinstance(p, RunMetrics)]
    loaded = [p for p in band_runs if isinstance(p, RunMetrics)]  # e.g. promoted runs (--db)
    return plots.render_all(
        run=run,
        baseline=_metrics(baseline, "baseline", notes),
        band_runs=[*loaded, *(m for m in (_metrics(p, "band run", notes) for p in paths) if m)],
        band_alpha=facts.band_alpha if facts else 0.01,
        checks=run_docs[0][1].checks if run_docs else (),
        swe=swe_doc[1] if swe_doc else None,
        swe_universe=swe_ev.universe() if swe_ev else "an unidentified instance set",
        demo=demo,
    )


def _story(evidence, tiers, blockers, facts, run_docs, time, swe_doc, swe_ev, demo):
    """The sentence as plain text and as Markdown."""
    from rlgate.core.text import md_text

    inputs = StoryInputs(
        recipe=facts,
        run_recipe=run_docs[0][1].recipe if run_docs else None,
        time=time,
        health_ran=_tier(tiers, Tier.CONVERGENCE).ran,
        health_failures=_failing(blockers, Tier.CONVERGENCE),
        perf_failures=_failing(blockers, Tier.PERF),
        swe=swe_doc[1] if swe_doc else None,
        swe_evidence=swe_ev,
        swe_cases=tuple(
            c for c in evidence.cases if c.tier is Tier.SWE_GATE and not c.informational
        ),
        demo=demo,
    )
    return story_sentence(inputs), story_sentence(inputs, md_text)


def build_report(
    junit: Sequence[str | os.PathLike[str]],
    *,
    runs: Sequence[str | os.PathLike[str]] = (),
    swe: str | os.PathLike[str] | None = None,
    recipe: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    band_runs: Sequence[str | os.PathLike[str] | RunMetrics] = (),
    tokenizers: str | os.PathLike[str] | None = None,
    demo: bool = False,
    notes: Sequence[str] = (),
    draw_plots: bool = True,
    history: Sequence[RecordedRun] | None = None,
    main_branch: str = "main",
    last: int = DEFAULT_LAST,
    candidate: RunContext | None = None,
    baseline_commit: CommitRef | None = None,
    links: Mapping[str, str] = MappingProxyType({}),
    quarantines: Sequence[QuarantineState] = (),
    canary: str | os.PathLike[str] | None = None,
) -> ReleaseReport:
    """Read every input, decide, tell the story and (unless ``draw_plots`` is off) plot.

    ``band_runs`` are run paths, or runs already read (a band from promoted runs, ``--db``).
    ``history``: recorded runs to triage against (the triage section and its trends,
    :mod:`rlgate.report.triage_section`; ``candidate`` is this report's own recorded context;
    ``baseline_commit``: its failing checks are labelled against that commit's nightlies).
    ``links``: kind -> https URL, from :func:`rlgate.core.links.report_links` (never an input).
    ``quarantines``: the active quarantine entries (``--db``): the verdict waives their
    checks' failures and says so (:func:`rlgate.report.verdict.verdict_text`).
    ``canary``: an ``rlgate canary --json`` document, shown in its own section; it never
    changes the verdict (:mod:`rlgate.report.canary_section`).
    """
    evidence = load_junit(junit)
    canary_doc = None
    if canary is not None:
        from rlgate.report.canary_section import load_canary

        canary_doc = load_canary(canary)
    run_docs = _load_runs(runs)
    swe_doc = (Path(swe), load_swe_doc(swe)) if swe is not None else None
    tiers = summarise_tiers(evidence.cases)
    swe_ev = swe_evidence(
        evidence.cases, swe_doc[1] if swe_doc else None, str(swe), evidence.suites
    )
    facts = load_recipe_facts(recipe) if recipe is not None else None
    triage, trends = None, []
    if history is not None:  # before the verdict: a drift the recipe blocks on is a blocker
        from rlgate.report.triage_section import build_triage_section

        triage, trends = build_triage_section(
            evidence.cases, history, main_branch=main_branch, last=last, context=candidate,
            demo=demo, draw_plots=draw_plots, commit=baseline_commit, quarantines=quarantines,
        )  # fmt: skip
    drifts = [lb for lb in triage.labels if lb.label is Label.DRIFT] if triage else []
    verdict, blockers = decide(
        tiers,
        swe_ev,
        run_docs,
        planned=facts.planned if facts else (),
        quarantines=quarantines,
        drifts=drifts,
    )
    notes = list(notes)
    if facts and run_docs and run_docs[0][1].recipe != facts.name:
        notes.append(
            f"the run was gated with recipe {run_docs[0][1].recipe}, --recipe is {facts.name}"
        )
    run = _metrics(run_docs[0][1].run if run_docs else None, "run", notes)
    time = training_time(run) if run is not None else None
    figures, omitted = [], ["plots not drawn (--no-plots)"]
    if draw_plots:
        figures, omitted = _figures(
            run, baseline, band_runs, facts, run_docs, swe_doc, swe_ev, demo, notes
        )
    figures = [*figures, *trends]
    story, story_md = _story(
        evidence, tiers, blockers, facts, run_docs, time, swe_doc, swe_ev, demo
    )
    given = [*junit, *runs, *([swe] if swe else []), *([recipe] if recipe else [])]
    given += [*([baseline] if baseline else []), *_paths(band_runs)]
    given += [canary] if canary is not None else []
    listed = [p for p in given if Path(p).is_file() or Path(p).is_dir()]
    return ReleaseReport(
        title=("DEMO — " if demo else "") + "rlgate release report",
        demo=demo,
        verdict=verdict,
        blockers=blockers,
        story=story,
        story_md=story_md,
        tiers=tiers,
        junit=evidence,
        runs=run_docs,
        swe=swe_doc,
        swe_evidence=swe_ev,
        recipe=facts,
        time=time,
        versions=version_facts(evidence, facts, tokenizers),
        inputs=tuple((str(p), sha256_path(Path(p))) for p in listed),
        figures=tuple(figures),
        notes=(*notes, *omitted),
        protected=tuple(
            str(p) for p in [*given, *(doc.run for _, doc in run_docs if Path(doc.run).exists())]
        ),
        triage=triage,
        links=tuple(links.items()),
        canary=canary_doc,
    )


# --- writing --------------------------------------------------------------------------------


OUTPUT_FILES = ("report.md", "report.html", "report.json", "junit.xml")
PLOTS_DIR = "plots"


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:  # pragma: no cover - raced away
        return "?"


def _refuse_link(path: Path, what: str) -> None:
    if path.is_symlink():
        raise RlgateError(
            f"{what} {path} is a symbolic link (to {_link_target(path)}); rlgate never writes "
            "through a link its output directory holds",
            hint="remove the link, or choose a new --out",
        )


def prepare_out_dir(
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """Make ``out`` ready: new, empty, or created by rlgate before (``.rlgate-report``).

    A non-empty directory rlgate did not create is refused unless ``force``; a symlinked
    marker or ``plots/`` is refused either way (it would lead the writers outside ``out``),
    and so is ``out`` being (or lying inside) an input, or one of the files it writes being
    an input (the same file, a link to one, a hard link): checked against ``inputs`` and
    every input of the command's output guard (:mod:`rlgate.core.io`), so nothing the user
    gave is overwritten.
    """
    root = Path(out)
    check_output(root, flag="--out", directory=True, inputs=inputs)
    for name in (OUT_MARKER, *OUTPUT_FILES):
        why = output_conflict(root / name, inputs=inputs)
        if why is not None:
            raise RlgateError(
                f"refusing --out {root}: {root / name} is where the report writes an output, "
                f"and {why}",
                hint="choose another --out; rlgate never overwrites what you gave it",
            )
    held = input_within(root / PLOTS_DIR, inputs)
    if held is not None:
        raise RlgateError(
            f"refusing --out {root}: the input {held} is where the report writes its plots",
            hint="choose another --out; rlgate never overwrites what you gave it",
        )
    marker = root / OUT_MARKER
    _refuse_link(marker, f"--out {root}: the marker")
    _refuse_link(root / PLOTS_DIR, f"--out {root}: the plots folder")
    foreign = root.is_dir() and any(root.iterdir()) and not marker.is_file()
    if foreign and not force:
        raise RlgateError(
            f"--out {root} is not empty and was not created by rlgate",
            hint="choose a new or empty directory, or pass --force to write into it "
            "(rlgate still never overwrites one of its inputs)",
        )
    root.mkdir(parents=True, exist_ok=True)
    if not foreign:  # a directory forced into stays the user's: the next run must --force again
        write_text_atomic(marker, "written by `rlgate report`; its files are rlgate's\n")
    return root


def _target(out_dir: Path, rel: str) -> Path:
    """``out_dir/rel``, refused if a symbolic link or a file stands in its way.

    The writers replace the final name (``os.replace``): a symbolic link there is replaced,
    never written through. Every folder between ``out_dir`` and the file must be a real one.
    """
    path = out_dir / rel
    for folder in reversed(path.relative_to(out_dir).parents[:-1]):
        here = out_dir / folder
        _refuse_link(here, "output folder")
        if here.exists() and not here.is_dir():
            raise RlgateError(f"output folder {here} exists and is not a directory")
    if path.is_dir() and not path.is_symlink():
        raise RlgateError(f"output {path} exists and is a directory")
    return path  # the writers refuse it over, through or inside an input (core.io)


def write_report(report: ReleaseReport, out_dir: Path) -> dict[str, Path]:
    """Write report.md, report.html, junit.xml, report.json and plots/ into ``out_dir``."""
    inputs = [*report.protected, *(p for p, _ in report.inputs)]

    def target(rel: str) -> Path:
        return _target(out_dir, rel)

    written = {}  # every write refused over, through or inside an input (core.io)
    for fig in report.figures:
        path = target(f"{PLOTS_DIR}/{fig.key}.png")
        written[f"plot:{fig.key}"] = write_bytes_atomic(path, fig.png, inputs=inputs)
    merged = report.junit.merged_xml
    written["junit"] = write_text_atomic(target("junit.xml"), merged, inputs=inputs)
    # local paths read relative to out_dir or the inputs' root (rlgate.report.paths)
    roots = path_roots(out_dir, [p for p, _ in report.inputs])
    document = shorten_document(build_document(report), roots)
    md = to_markdown(document)
    written["markdown"] = write_text_atomic(target("report.md"), md, inputs=inputs)
    html = to_html(document)
    written["html"] = write_text_atomic(target("report.html"), html, inputs=inputs)
    payload = {**shorten_json(report_payload(report), roots), "path_roots": roots.as_json()}
    written["json"] = write_json_atomic(target("report.json"), payload, inputs=inputs)
    logger.info("report written to %s: %s", out_dir, json.dumps(report.verdict.value))
    return written
