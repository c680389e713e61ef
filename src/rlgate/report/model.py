"""The release report as one record: everything the report shows (rendering only formats it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rlgate.checks.document import RunDocument
from rlgate.report.canary_section import CanarySection
from rlgate.report.inputs import Case, JunitEvidence, SweDoc
from rlgate.report.plots import Figure
from rlgate.report.story import RecipeFacts, TrainingTime, VersionFacts
from rlgate.report.triage_section import TriageSection
from rlgate.report.verdict import (
    Blocker,
    SweEvidence,
    TierSummary,
    Verdict,
    quarantined_count,
    verdict_text,
)
from rlgate.swe.compare import Verdict as SweVerdict

__all__ = ["ReleaseReport"]


@dataclass(frozen=True, slots=True)
class ReleaseReport:
    """Everything the report shows; rendering only formats it."""

    title: str
    demo: bool
    verdict: Verdict
    blockers: tuple[Blocker, ...]
    story: str
    story_md: str  # the same sentence, its input-derived parts escaped for Markdown
    tiers: tuple[TierSummary, ...]
    junit: JunitEvidence
    runs: tuple[tuple[Path, RunDocument], ...]
    swe: tuple[Path, SweDoc] | None
    swe_evidence: SweEvidence | None
    recipe: RecipeFacts | None
    time: TrainingTime | None
    versions: VersionFacts
    inputs: tuple[tuple[str, str], ...]  # (path, sha256)
    figures: tuple[Figure, ...] = ()
    notes: tuple[str, ...] = field(default=())
    protected: tuple[str, ...] = ()  # every input path, incl. run directories a JSON names
    triage: TriageSection | None = None  # with a history (--db, the demo's nightlies)
    #: (kind, https URL) from the site config's templates and the CI's variables, never an
    #: input's (rlgate.core.links; checked again by rlgate.report.document.Link)
    links: tuple[tuple[str, str], ...] = ()
    #: ``--canary``: an upgrade canary's comparison (informational: never a blocker)
    canary: CanarySection | None = None

    @property
    def verdict_text(self) -> str:
        """The verdict as said: ``GO with 2 quarantined checks`` (never a plain GO then)."""
        return verdict_text(self.verdict, self.blockers)

    @property
    def quarantined(self) -> int:
        """Gate failures an active quarantine waived."""
        return quarantined_count(self.blockers)[0]

    @property
    def swe_verdict(self) -> SweVerdict | None:
        """The SWE verdict the report acts on (None: missing, or contradicted by its numbers)."""
        return self.swe_evidence.verdict if self.swe_evidence else None

    @property
    def allowances(self) -> tuple[Case, ...]:
        """Skipped and expected-failure testcases of gating suites (allowed, but listed)."""
        return tuple(c for c in self.junit.cases if c.allowed_skip)
