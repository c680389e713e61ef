"""The go/no-go release report: one verdict, one sentence, and the evidence behind both.

``rlgate report --junit FILE... [--run RUN_JSON...] [--swe SWE_JSON] [--recipe R] --out DIR``
writes ``DIR/report.md``, a self-contained ``DIR/report.html``, ``DIR/junit.xml`` (every
input testcase, valid against pytest's ``junit-10.xsd``), ``DIR/report.json`` and
``DIR/plots/*.png``.

The verdict (GO / NO-GO / INCOMPLETE) is decided on the JUnit testcases, the one channel
for gate outcomes, plus the SWE verdict, by :mod:`rlgate._report_verdict`
(``docs/recommendation-rule.md``); the sentence and the stated facts come from
:mod:`rlgate._report_story`, the figures from :mod:`rlgate.plots`, the pages from
:mod:`rlgate._report_render`.

Invariants: inputs are only read; outputs go into a directory rlgate created (marked with
``.rlgate-report``) or an empty one, atomically, never over an input; a demo report says
DEMO in its title, its sentence and every plot.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlgate._errors import RlgateError
from rlgate._io import write_bytes_atomic, write_json_atomic, write_text_atomic
from rlgate._report_inputs import (
    CaseStatus,
    GateCase,
    JunitEvidence,
    ReleaseTier,
    RunDoc,
    SweDoc,
    load_junit,
    load_run_doc,
    load_swe_doc,
    sha256_path,
)
from rlgate._report_story import (
    RecipeFacts,
    StoryInputs,
    TrainingTime,
    VersionFacts,
    load_recipe_facts,
    story_sentence,
    training_time,
    version_facts,
)
from rlgate._report_verdict import (
    Blocker,
    BlockerKind,
    TierSummary,
    Verdict,
    decide,
    summarise_tiers,
    swe_verdict_of,
)
from rlgate.plots import Figure

__all__ = [
    "OUT_MARKER",
    "Blocker",
    "BlockerKind",
    "CaseStatus",
    "GateCase",
    "ReleaseReport",
    "ReleaseTier",
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


@dataclass(frozen=True, slots=True)
class ReleaseReport:
    """Everything the report shows; rendering only formats it."""

    title: str
    demo: bool
    verdict: Verdict
    blockers: tuple[Blocker, ...]
    story: str
    tiers: tuple[TierSummary, ...]
    junit: JunitEvidence
    runs: tuple[tuple[Path, RunDoc], ...]
    swe: tuple[Path, SweDoc] | None
    swe_verdict: str | None
    recipe: RecipeFacts | None
    time: TrainingTime | None
    versions: VersionFacts
    inputs: tuple[tuple[str, str], ...]  # (path, sha256)
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def allowances(self) -> tuple[GateCase, ...]:
        """Skipped and expected-failure testcases of gating suites (allowed, but listed)."""
        return tuple(
            c
            for c in self.junit.cases
            if c.status in (CaseStatus.SKIPPED, CaseStatus.XFAILED) and not c.informational
        )


# --- building -------------------------------------------------------------------------------


def _tier(tiers: Sequence[TierSummary], which: ReleaseTier) -> TierSummary:
    return next(t for t in tiers if t.tier is which)


def _failing(blockers: Sequence[Blocker], tier: ReleaseTier) -> tuple[str, ...]:
    """Names of the NO-GO blockers of ``tier`` (without the ``tier: `` prefix)."""
    return tuple(
        b.title.split(": ", 1)[-1] for b in blockers if b.tier is tier and b.forces is Verdict.NO_GO
    )


def _load_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[tuple[Path, RunDoc], ...]:
    return tuple((Path(p), load_run_doc(p)) for p in paths)


def _metrics(path: str | os.PathLike[str] | None, what: str, notes: list[str]):
    """Load a run for plots and timing; a missing run is a note, not a failure of the gate."""
    from rlgate.metrics import load_run

    if path is None:
        return None
    if not Path(path).exists():
        notes.append(f"{what} {path} not found here: its plots and training time are omitted")
        return None
    return load_run(path)  # MetricsError (exit 2) on a corrupt run


def _figures(
    run, baseline, band_runs, facts, run_docs, swe_doc, demo: bool, notes: list[str]
) -> tuple[list[Figure], list[str]]:
    from rlgate import plots

    return plots.render_all(
        run=run,
        baseline=_metrics(baseline, "baseline", notes),
        band_runs=[m for m in (_metrics(p, "band run", notes) for p in band_runs) if m],
        band_alpha=facts.band_alpha if facts else 0.01,
        checks=run_docs[0][1].checks if run_docs else (),
        swe=swe_doc[1] if swe_doc else None,
        demo=demo,
    )


def _story(evidence, tiers, blockers, facts, run_docs, time, swe_doc, verdict_swe, demo) -> str:
    return story_sentence(
        StoryInputs(
            recipe=facts,
            run_recipe=run_docs[0][1].recipe if run_docs else None,
            time=time,
            health_ran=_tier(tiers, ReleaseTier.CONVERGENCE).ran,
            health_failures=_failing(blockers, ReleaseTier.CONVERGENCE),
            perf_failures=_failing(blockers, ReleaseTier.PERF),
            swe=swe_doc[1] if swe_doc else None,
            swe_verdict=verdict_swe,
            swe_cases=tuple(
                c for c in evidence.cases if c.tier is ReleaseTier.SWE_GATE and not c.informational
            ),
            demo=demo,
        )
    )


def build_report(
    junit: Sequence[str | os.PathLike[str]],
    *,
    runs: Sequence[str | os.PathLike[str]] = (),
    swe: str | os.PathLike[str] | None = None,
    recipe: str | os.PathLike[str] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    band_runs: Sequence[str | os.PathLike[str]] = (),
    tokenizers: str | os.PathLike[str] | None = None,
    demo: bool = False,
    notes: Sequence[str] = (),
    draw_plots: bool = True,
) -> ReleaseReport:
    """Read every input, decide, tell the story and (unless ``draw_plots`` is off) plot."""
    evidence = load_junit(junit)
    run_docs = _load_runs(runs)
    swe_doc = (Path(swe), load_swe_doc(swe)) if swe is not None else None
    tiers = summarise_tiers(evidence.cases)
    verdict_swe = swe_verdict_of(evidence.cases, swe_doc[1] if swe_doc else None, str(swe))
    verdict, blockers = decide(tiers, verdict_swe, run_docs)
    facts = load_recipe_facts(recipe) if recipe is not None else None
    notes = list(notes)
    if facts and run_docs and run_docs[0][1].recipe != facts.name:
        notes.append(
            f"the run was gated with recipe {run_docs[0][1].recipe}, --recipe is {facts.name}"
        )
    run = _metrics(run_docs[0][1].run if run_docs else None, "run", notes)
    time = training_time(run) if run is not None else None
    figures, omitted = [], ["plots not drawn (--no-plots)"]
    if draw_plots:
        figures, omitted = _figures(run, baseline, band_runs, facts, run_docs, swe_doc, demo, notes)
    given = [*junit, *runs, *([swe] if swe else []), *([recipe] if recipe else [])]
    given += [*([baseline] if baseline else []), *band_runs]
    return ReleaseReport(
        title=("DEMO — " if demo else "") + "rlgate release report",
        demo=demo,
        verdict=verdict,
        blockers=blockers,
        story=_story(evidence, tiers, blockers, facts, run_docs, time, swe_doc, verdict_swe, demo),
        tiers=tiers,
        junit=evidence,
        runs=run_docs,
        swe=swe_doc,
        swe_verdict=verdict_swe,
        recipe=facts,
        time=time,
        versions=version_facts(evidence, facts, tokenizers),
        inputs=tuple((str(p), sha256_path(Path(p))) for p in given if Path(p).exists()),
        figures=tuple(figures),
        notes=(*notes, *omitted),
    )


# --- writing --------------------------------------------------------------------------------


def prepare_out_dir(
    out: str | os.PathLike[str],
    *,
    force: bool = False,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> Path:
    """Make ``out`` ready: new, empty, or created by rlgate before (``.rlgate-report``).

    A non-empty directory rlgate did not create is refused unless ``force``; an input path
    is never overwritten either way (the writers check).
    """
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise RlgateError(f"--out {root} exists and is not a directory")
    resolved = root.resolve()
    for item in inputs:
        if Path(item).resolve() == resolved:
            raise RlgateError(f"--out {root} is one of the inputs", hint="choose another --out")
    foreign = root.is_dir() and any(root.iterdir()) and not (root / OUT_MARKER).is_file()
    if foreign and not force:
        raise RlgateError(
            f"--out {root} is not empty and was not created by rlgate",
            hint="choose a new or empty directory, or pass --force to write into it "
            "(rlgate still never overwrites one of its inputs)",
        )
    root.mkdir(parents=True, exist_ok=True)
    if not foreign:  # a directory forced into stays the user's: the next run must --force again
        (root / OUT_MARKER).write_text("written by `rlgate report`; its files are rlgate's\n")
    return root


def write_report(report: ReleaseReport, out_dir: Path) -> dict[str, Path]:
    """Write report.md, report.html, junit.xml, report.json and plots/ into ``out_dir``."""
    from rlgate._report_render import render_html, render_markdown, report_payload

    inputs = [p for p, _ in report.inputs]
    written = {}
    for fig in report.figures:
        target = out_dir / "plots" / f"{fig.key}.png"
        written[f"plot:{fig.key}"] = write_bytes_atomic(target, fig.png, inputs=inputs)
    written["junit"] = write_text_atomic(
        out_dir / "junit.xml", report.junit.merged_xml, inputs=inputs
    )
    written["markdown"] = write_text_atomic(
        out_dir / "report.md", render_markdown(report), inputs=inputs
    )
    written["html"] = write_text_atomic(out_dir / "report.html", render_html(report), inputs=inputs)
    written["json"] = write_json_atomic(
        out_dir / "report.json", report_payload(report), inputs=inputs
    )
    logger.info("report written to %s: %s", out_dir, json.dumps(report.verdict.value))
    return written
