"""The release verdict rule: GO, NO-GO or INCOMPLETE from classified JUnit testcases.

Pure: records in, a verdict and its blockers out. The rule (``docs/recommendation-rule.md``):

* **NO-GO** when a testcase of a gating suite fails or errors (a ``swe_gate`` error
  excepted), when a run JSON reports a failed check the JUnit does not show, or when the SWE
  verdict is ``regressed`` or ``no_significant_change``;
* otherwise **INCOMPLETE** when a release tier (functional, convergence, perf, swe_gate) has
  no executed testcase (missing, or every testcase skipped), when a ``swe_gate`` criterion
  errors (infra or inputs: the comparison is inconclusive), or when the SWE verdict is
  ``inconclusive`` or unknown;
* otherwise **GO**. Skips and expected failures are allowed (the report lists them).

The per-instance SWE suite is informational: a lost instance is not a gate failure. Every
blocker carries the anchor of its evidence in the rendered report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from rlgate._errors import RlgateError
from rlgate._report_inputs import (
    REQUIRED_TIERS,
    CaseStatus,
    GateCase,
    ReleaseTier,
    RunDoc,
    SweDoc,
)

__all__ = [
    "Blocker",
    "BlockerKind",
    "TierSummary",
    "Verdict",
    "decide",
    "summarise_tiers",
    "swe_verdict_of",
]


class Verdict(Enum):
    """The release recommendation."""

    GO = "GO"
    NO_GO = "NO-GO"
    INCOMPLETE = "INCOMPLETE"


class BlockerKind(Enum):
    """Why a gate stands in the way of GO."""

    FAILED = "failed"
    ERROR = "error"
    NOT_RUN = "not run"
    SWE = "swe verdict"
    INCONSISTENT = "inconsistent inputs"


@dataclass(frozen=True, slots=True)
class Blocker:
    """A failing or missing gate, with the verdict it forces and a link to its evidence."""

    kind: BlockerKind
    tier: ReleaseTier
    title: str
    detail: str
    anchor: str
    forces: Verdict


@dataclass(frozen=True, slots=True)
class TierSummary:
    """The testcases of one tier and their counts."""

    tier: ReleaseTier
    cases: tuple[GateCase, ...]

    def count(self, status: CaseStatus) -> int:
        """Number of gating testcases with ``status``."""
        return sum(1 for c in self.cases if c.status is status and not c.informational)

    @property
    def ran(self) -> bool:
        """True when at least one gating testcase executed (not every one skipped)."""
        return any(c.executed and not c.informational for c in self.cases)

    @property
    def anchor(self) -> str:
        """Anchor of this tier's evidence section."""
        return f"tier-{self.tier.value}"


def summarise_tiers(cases: Sequence[GateCase]) -> tuple[TierSummary, ...]:
    """One summary per release tier (present or not) and per other tier with testcases."""
    out = []
    for tier in ReleaseTier:
        mine = tuple(c for c in cases if c.tier is tier)
        if mine or tier in REQUIRED_TIERS:
            out.append(TierSummary(tier, mine))
    return tuple(out)


def swe_verdict_of(cases: Sequence[GateCase], swe: SweDoc | None, source: str = "") -> str | None:
    """The SWE verdict from the SWE JSON, else from swe_gate JUnit properties; None if absent.

    Raises RlgateError when the two disagree (they describe different comparisons).
    """
    from_junit = {
        c.prop("rlgate.verdict")
        for c in cases
        if c.tier is ReleaseTier.SWE_GATE and not c.informational and c.prop("rlgate.verdict")
    }
    if len(from_junit) > 1:
        raise RlgateError(f"the swe_gate JUnit testcases disagree on the verdict: {from_junit}")
    junit_verdict = next(iter(from_junit), None)
    if swe is not None:
        if junit_verdict is not None and junit_verdict != swe.verdict:
            raise RlgateError(
                f"SWE JSON {source} says {swe.verdict!r} but the swe_gate JUnit says "
                f"{junit_verdict!r}",
                hint="pass the JSON and the JUnit of the same `rlgate swe compare` run",
            )
        return swe.verdict
    return junit_verdict


def _case_blockers(cases: Sequence[GateCase]) -> list[Blocker]:
    out = []
    for case in cases:
        if case.informational or case.status not in (CaseStatus.FAILED, CaseStatus.ERROR):
            continue
        infra = case.tier is ReleaseTier.SWE_GATE and case.status is CaseStatus.ERROR
        out.append(
            Blocker(
                BlockerKind.ERROR if case.status is CaseStatus.ERROR else BlockerKind.FAILED,
                case.tier,
                f"{case.tier.value}: {case.name}",
                case.message or f"{case.status.value} ({case.classname})",
                case.anchor,
                Verdict.INCOMPLETE if infra else Verdict.NO_GO,
            )
        )
    return out


def _tier_blockers(tiers: Sequence[TierSummary]) -> list[Blocker]:
    out = []
    for summary in tiers:
        if summary.tier not in REQUIRED_TIERS or summary.ran:
            continue
        skipped = [c for c in summary.cases if not c.informational]
        if skipped:
            reasons = sorted({c.message for c in skipped if c.message})
            detail = f"all {len(skipped)} testcase(s) skipped: " + "; ".join(reasons[:3])
        else:
            detail = "no JUnit testcase of this tier was given"
        out.append(
            Blocker(
                BlockerKind.NOT_RUN,
                summary.tier,
                f"{summary.tier.value}: tier did not run",
                detail,
                summary.anchor,
                Verdict.INCOMPLETE,
            )
        )
    return out


def _run_blockers(runs: Sequence[tuple[Path, RunDoc]], cases: Sequence[GateCase]) -> list[Blocker]:
    """A check the run JSON failed must show in the JUnit as a failure or error too."""
    failing = {(c.tier.value, c.name) for c in cases if c.status in _BAD} | {
        (c.tier.value, _param_id(c.name)) for c in cases if c.status in _BAD
    }
    out = []
    for path, doc in runs:
        for check in doc.checks:
            if check.status != "pass" and (check.tier, check.name) not in failing:
                out.append(
                    Blocker(
                        BlockerKind.INCONSISTENT,
                        ReleaseTier(check.tier),
                        f"{check.tier}: {check.name} ({doc.recipe})",
                        f"run JSON {path} reports {check.status.upper()} ({check.message}) "
                        "but no JUnit testcase shows it; pass that run's --junit too",
                        "runs",
                        Verdict.NO_GO,
                    )
                )
    return out


_BAD = (CaseStatus.FAILED, CaseStatus.ERROR)


def _param_id(name: str) -> str:
    """``test_convergence_check[reward_improvement]`` -> ``reward_improvement``."""
    return name[name.find("[") + 1 : -1] if name.endswith("]") and "[" in name else name


def _swe_blocker(verdict: str | None) -> Blocker | None:
    if verdict == "improved":
        return None
    text = {
        None: ("no SWE verdict", "no --swe JSON and no swe_gate JUnit carrying a verdict"),
        "inconclusive": ("SWE comparison inconclusive", "infra errors or mismatched inputs"),
        "regressed": ("SWE-bench Verified regressed", "the trained model is significantly worse"),
        "no_significant_change": (
            "no significant SWE-bench improvement",
            "training did not measurably improve SWE-bench Verified",
        ),
    }[verdict]
    incomplete = verdict in (None, "inconclusive")
    return Blocker(
        BlockerKind.SWE,
        ReleaseTier.SWE_GATE,
        f"swe_gate: {text[0]}",
        text[1],
        "swe",
        Verdict.INCOMPLETE if incomplete else Verdict.NO_GO,
    )


def decide(
    tiers: Sequence[TierSummary],
    swe_verdict: str | None,
    runs: Sequence[tuple[Path, RunDoc]] = (),
) -> tuple[Verdict, tuple[Blocker, ...]]:
    """Apply the verdict rule (module docstring); every blocker is returned, NO-GO first."""
    cases = [c for t in tiers for c in t.cases]
    blockers = _case_blockers(cases) + _tier_blockers(tiers) + _run_blockers(runs, cases)
    swe = _swe_blocker(swe_verdict)
    if swe is not None:
        blockers.append(swe)
    blockers.sort(key=lambda b: b.forces is not Verdict.NO_GO)
    if any(b.forces is Verdict.NO_GO for b in blockers):
        return Verdict.NO_GO, tuple(blockers)
    if blockers:
        return Verdict.INCOMPLETE, tuple(blockers)
    return Verdict.GO, ()
