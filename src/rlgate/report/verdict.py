"""The release verdict rule: GO, NO-GO or INCOMPLETE from the inputs' Results.

Pure: records in, a verdict and its blockers out. The inputs are typed: each JUnit
testcase's :class:`~rlgate.core.results.Result` (and the outcome the JUnit shows), the run
JSON's check Results, the SWE comparison's criteria. The rule (``docs/recommendation-rule.md``):

* **NO-GO** when a testcase of a gating suite fails or errors (excepted: a ``swe_gate``
  error, and an error whose Result names an infrastructure cause), when a testcase's
  recorded verdict contradicts its shown outcome and either side is such a failure, when a
  run JSON reports a failed check the JUnit does not show (or says it did not pass without
  naming a failed check), or when the SWE verdict is ``regressed``, or
  ``no_significant_change`` on the full SWE-bench Verified set;
* otherwise **INCOMPLETE** when a release tier (functional, convergence, perf, swe_gate) had
  no gate check evaluated to PASS or FAIL (missing, every check skipped or errored, only
  informational testcases such as benchmarks, or only contradictory ones), when a
  ``swe_gate`` criterion or an infra-caused check errors, when any other testcase
  contradicts its recorded verdict, when the SWE verdict is ``inconclusive`` or missing,
  when the SWE evidence contradicts its own numbers, or when the comparison did not run on
  the full 500-instance SWE-bench Verified set;
* otherwise **GO**. Skips and expected failures are allowed (the report lists them).

A failing or erroring gate testcase of a recipe (its ``rlgate.recipe``) whose check an
active quarantine entry holds (:mod:`rlgate.history.quarantine`, ``report --db``) forces
nothing: it is a ``quarantined`` entry of the blockers that forces GO, and the verdict's
text (:func:`verdict_text`) says ``GO with N quarantined checks``, never a plain GO. A
contradiction is never waived. A quarantined check that passed is listed as a candidate
for removal.

A passing gate check whose value drifted inside its bound (triage label ``drift``,
``report --db``) is a NO-GO blocker naming the check and its change point only when its
recipe sets ``rlgate.block_on_drift``; otherwise it is shown in the triage table and
changes nothing here.

Informational testcases (the per-instance SWE suite, benchmarks) are shown, never gate. The
SWE verdict is never taken on trust: :func:`swe_evidence` recomputes it from the numbers the
evidence carries (Δ, its CI, p, α, margin, criteria, infra error rates) with the gate's own
rule (:mod:`rlgate.swe.compare`), and names the instance set compared. Every blocker
carries the anchor of its evidence in the rendered report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from rlgate.checks.document import RunDocument
from rlgate.core.errors import ExitCode, RlgateError
from rlgate.core.junit import JunitSuite, classify_tier
from rlgate.core.results import CHECK_TIERS, RELEASE_TIERS, Outcome, Tier
from rlgate.report.inputs import VERDICT, Case, SweComparisonDoc, SweDoc
from rlgate.swe.compare import Verdict as SweVerdict
from rlgate.swe.records import VERIFIED_IDS_SHA256, InstanceSet, classify_instance_set, verified_ids

if TYPE_CHECKING:
    from rlgate.history.quarantine import QuarantineState
    from rlgate.history.triage import TriageLabel

__all__ = [
    "COUNTED",
    "SWE_VERDICT_PROPERTIES",
    "Blocker",
    "BlockerKind",
    "SweEvidence",
    "TierSummary",
    "Verdict",
    "decide",
    "junit_swe_verdict",
    "quarantined_count",
    "summarise_tiers",
    "swe_evidence",
    "verdict_text",
]


class Verdict(Enum):
    """The release recommendation."""

    GO = "GO"
    NO_GO = "NO-GO"
    INCOMPLETE = "INCOMPLETE"

    @property
    def exit_code(self) -> ExitCode:
        """``rlgate report``'s exit code for this verdict: 0 GO, 1 NO-GO, 3 INCOMPLETE."""
        return {Verdict.GO: ExitCode.OK, Verdict.NO_GO: ExitCode.FAIL}.get(self, ExitCode.INFRA)


class BlockerKind(Enum):
    """Why a gate stands in the way of GO."""

    FAILED = "failed"
    ERROR = "error"
    NOT_RUN = "not run"
    SWE = "swe verdict"
    SWE_SET = "swe instance set"
    INCONSISTENT = "inconsistent inputs"
    #: a failure an active quarantine waives (forces GO; :func:`verdict_text` counts it)
    QUARANTINED = "quarantined"
    #: a quarantined check that passed: a candidate for removal (forces GO)
    QUARANTINE_PASSED = "quarantined, passed"
    #: a passing check's value drifted in bound and its recipe blocks on drift (NO-GO)
    DRIFT = "drift"


@dataclass(frozen=True, slots=True)
class Blocker:
    """A failing or missing gate, with the verdict it forces and a link to its evidence."""

    kind: BlockerKind
    tier: Tier
    title: str
    detail: str
    anchor: str
    forces: Verdict


#: The counts a tier summary shows, by what the JUnit shows (``Case.status``).
COUNTED = ("passed", "failed", "error", "skipped", "xfailed")


@dataclass(frozen=True, slots=True)
class TierSummary:
    """The testcases of one tier and their counts."""

    tier: Tier
    cases: tuple[Case, ...]

    def counts(self) -> dict[str, int]:
        """Non-informational testcases per shown status (:data:`COUNTED`)."""
        out = dict.fromkeys(COUNTED, 0)
        for case in self.cases:
            if not case.informational:
                out[case.status] += 1
        return out

    @property
    def ran(self) -> bool:
        """True when a gate check of the tier was evaluated to PASS or FAIL (Case.evaluated)."""
        return any(c.evaluated for c in self.cases)

    @property
    def anchor(self) -> str:
        """Anchor of this tier's evidence section."""
        return f"tier-{self.tier.value}"


def summarise_tiers(cases: Sequence[Case]) -> tuple[TierSummary, ...]:
    """One summary per release tier (present or not) and per other tier with testcases."""
    out = []
    for tier in Tier:
        mine = tuple(c for c in cases if c.tier is tier)
        if mine or tier in RELEASE_TIERS:
            out.append(TierSummary(tier, mine))
    return tuple(out)


# --- the SWE evidence ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SweEvidence:
    """The SWE verdict as stated, the instance set it was computed on, and contradictions.

    ``verdict`` is what the report acts on: the stated verdict, or ``None`` when the
    evidence contradicts itself (its numbers give another verdict, or its instance set is
    not what it claims); ``contradictions`` says how.
    """

    stated: SweVerdict
    instance_set: InstanceSet
    n: int | None
    source: str
    contradictions: tuple[str, ...] = ()
    #: the ``--exclude`` comparison of the SWE JSON, checked the same way; shown, never acted on
    reduced: SweEvidence | None = None

    @property
    def verdict(self) -> SweVerdict | None:
        """The stated verdict when the evidence is consistent, else None."""
        return None if self.contradictions else self.stated

    @property
    def full_verified(self) -> bool:
        """True when the comparison ran on the full SWE-bench Verified set."""
        return self.instance_set is InstanceSet.VERIFIED

    def universe(self) -> str:
        """``SWE-bench Verified`` / ``a 100-instance subset of SWE-bench Verified`` / ..."""
        if self.instance_set is InstanceSet.VERIFIED:
            return "SWE-bench Verified"
        if self.instance_set is InstanceSet.VERIFIED_SUBSET:
            size = f"{self.n}-instance " if self.n else ""
            return f"a {size}subset of SWE-bench Verified"
        return f"an unrecognised {self.n}-instance set" if self.n else "an unrecognised set"


def _decided(
    delta: float, p: float, ci: tuple[float, float], alpha: float, margin: float | None
) -> tuple[set[SweVerdict], str]:
    """Verdicts the gate's rule gives for these numbers (both when the margin is unknown)."""
    from rlgate.swe.compare import GateOptions, decide_verdict

    margins = (margin,) if margin is not None else (0.0, 200.0)
    out = [
        decide_verdict(delta, p, ci, "test", GateOptions(alpha=alpha, margin_pp=m)) for m in margins
    ]
    return {v for v, _ in out}, out[0][1].replace("test p", "p")


def _number_contradictions(
    stated: SweVerdict,
    *,
    delta: float,
    p: float,
    ci: tuple[float, float],
    alpha: float,
    margin: float | None,
    input_error: str | None,
    failed: bool,
) -> list[str]:
    """How ``stated`` disagrees with the numbers it was stated with (empty: it agrees)."""
    out = []
    says = repr(stated.value)
    if input_error is not None:
        if stated is not SweVerdict.INCONCLUSIVE:
            out.append(f"it states {says} although {input_error} (that is inconclusive)")
    else:
        expected, why = _decided(delta, p, ci, alpha, margin)
        if stated not in expected:
            given = " or ".join(sorted(v.value for v in expected))
            out.append(f"it states {says} but its numbers give {given} ({why})")
        elif failed != (stated is SweVerdict.REGRESSED):
            failing = "a criterion failed" if failed else "no criterion failed"
            out.append(f"it states {says} but {failing}")
    lo, hi = ci
    if not lo - 0.01 <= delta <= hi + 0.01:
        out.append(f"Δ {delta:+.2f} pp lies outside its own 95% CI [{lo:+.2f}, {hi:+.2f}] pp")
    return out


def _set_from_hash(ids_sha256: str | None, n: int | None) -> InstanceSet | None:
    if ids_sha256 == VERIFIED_IDS_SHA256 and n in (None, len(verified_ids())):
        return InstanceSet.VERIFIED
    return None


def _claimed_set(claim: str, ids_sha256: str | None, n: int | None) -> tuple[InstanceSet, str]:
    """The instance set a document claims, checked against its id hash and size."""
    try:
        claimed = InstanceSet(claim)
    except ValueError:
        return InstanceSet.UNKNOWN, f"instance set {claim!r} is not one rlgate knows"
    full = len(verified_ids())
    if claimed is InstanceSet.VERIFIED and (
        (ids_sha256 is not None and ids_sha256 != VERIFIED_IDS_SHA256)
        or (n is not None and n != full)
    ):
        return InstanceSet.UNKNOWN, (
            f"it claims the full SWE-bench Verified set, but its {n} instance ids "
            f"(sha256 {str(ids_sha256)[:12]}) are not the {full} Verified ids"
        )
    if claimed is not InstanceSet.VERIFIED and _set_from_hash(ids_sha256, n):
        return InstanceSet.VERIFIED, ""
    if claimed is InstanceSet.VERIFIED_SUBSET and n is not None and n >= full:
        return InstanceSet.UNKNOWN, f"it claims a subset of SWE-bench Verified of {n} instances"
    return claimed, ""


def _from_json(doc: SweComparisonDoc, source: str) -> SweEvidence:
    ds = doc.dataset
    problems = []
    errored = [c.name for c in doc.criteria if c.outcome is Outcome.ERROR]
    worst = max(r.infra_error_rate for arm in (doc.before, doc.after) for r in arm.runs)
    input_error = None
    if errored:
        input_error = f"criteria {', '.join(errored)} errored"
    elif worst > doc.max_infra_error_rate:
        input_error = (
            f"a run has {worst:.1%} infra errors (more than max_infra_error_rate "
            f"{doc.max_infra_error_rate:.1%})"
        )
    problems += _number_contradictions(
        doc.verdict,
        delta=doc.delta_pp,
        p=doc.p_value,
        ci=doc.ci95_pp,
        alpha=doc.alpha,
        margin=doc.margin_pp,
        input_error=input_error,
        failed=any(c.outcome is Outcome.FAIL for c in doc.criteria),
    )
    delta_rates = 100.0 * (doc.after.rate - doc.before.rate)
    if abs(doc.delta_pp - delta_rates) > 0.01:
        problems.append(
            f"Δ {doc.delta_pp:+.2f} pp, but the arms' resolve rates {doc.before.rate:.4f} → "
            f"{doc.after.rate:.4f} differ by {delta_rates:+.2f} pp"
        )
    if ds.instance_set is None:  # written before rlgate named the set: the id hash decides
        instance_set = _set_from_hash(ds.ids_sha256, ds.n_instances) or InstanceSet.UNKNOWN
    else:
        instance_set, problem = _claimed_set(ds.instance_set, ds.ids_sha256, ds.n_instances)
        problems += [problem] if problem else []
    return SweEvidence(doc.verdict, instance_set, ds.n_instances, source, tuple(problems))


_SET_PROPERTIES = ("rlgate.instance_set", "rlgate.swe.instance_set")
_SHA_PROPERTIES = ("rlgate.dataset.sha256", "rlgate.swe.dataset_sha256")


def _one_value(props: Sequence[tuple[str, str, str]], names: tuple[str, ...]) -> str | None:
    values = {(src, v) for src, k, v in props if k in names}
    if len({v for _, v in values}) > 1:
        raise RlgateError(
            f"the swe_gate JUnit files disagree on {names[0]}: "
            + "; ".join(f"{v!r} in {src}" for src, v in sorted(values)),
            hint="pass the JUnit of one `rlgate swe compare` run",
        )
    return next((v for _, v in values), None)


def _junit_set(
    cases: Sequence[Case], props: Sequence[tuple[str, str, str]]
) -> tuple[InstanceSet, int | None, list[str]]:
    """The instance set of a swe_gate JUnit: its per-instance suite, else what it states."""
    n_raw = _one_value(props, ("rlgate.n_instances",))
    n = int(n_raw) if n_raw is not None and n_raw.isdigit() else None
    claim = _one_value(props, _SET_PROPERTIES)
    ids_sha = _one_value(props, ("rlgate.instance_set.ids_sha256",))
    sha = ids_sha or _one_value(props, _SHA_PROPERTIES)
    ids = [c.name for c in cases if c.tier is Tier.SWE_GATE and c.informational == "instance"]
    if ids:
        counted = classify_instance_set(ids)
        problems = []
        if n is not None and n != len(set(ids)):
            problems.append(f"it states {n} instances but lists {len(set(ids))}")
        if claim is not None and claim != counted.value:
            problems.append(f"it claims {claim!r} but its instances are {counted.value!r}")
        return counted, len(set(ids)), problems
    if claim is not None:
        instance_set, problem = _claimed_set(claim, ids_sha, n)
        return instance_set, n, [problem] if problem else []
    return _set_from_hash(sha, n) or InstanceSet.UNKNOWN, n, []


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _from_junit(
    cases: Sequence[Case], props: Sequence[tuple[str, str, str]], stated: SweVerdict
) -> SweEvidence:
    gate = [c for c in cases if c.tier is Tier.SWE_GATE and c.gating]
    instance_set, n, problems = _junit_set(cases, props)
    significance = next(
        (c for c in gate if "significance" in (c.name, c.fact("rlgate.criterion"))), None
    )
    numbers: list[float | None] | None = None
    if significance is not None:
        result, evidence = significance.result, significance.result.evidence
        numbers = [_number(evidence.get("delta_pp")), result.value]
        numbers += [_number(evidence.get("ci95_low_pp")), _number(evidence.get("ci95_high_pp"))]
        numbers.append(result.threshold)
    errored = [c.name for c in gate if c.shown is Outcome.ERROR]
    failed = any(c.shown is Outcome.FAIL for c in gate)
    if significance is not None and numbers is not None and None not in numbers:
        delta, p, lo, hi, alpha = numbers
        if not (0 <= p <= 1 and 0 < alpha < 1 and lo <= hi):
            raise RlgateError(
                f"{significance.source}: testcase {significance.name!r}: p = {p}, α = {alpha}, "
                f"CI [{lo}, {hi}] are not a p-value, a significance level and an interval"
            )
        problems += _number_contradictions(
            stated,
            delta=delta,
            p=p,
            ci=(lo, hi),
            alpha=alpha,
            margin=_number(significance.result.evidence.get("margin_pp")),
            input_error=f"criteria {', '.join(errored)} errored" if errored else None,
            failed=failed,
        )
    elif errored and stated is not SweVerdict.INCONCLUSIVE:
        problems.append(
            f"it states {stated.value!r} although criteria {', '.join(errored)} errored"
        )
    elif stated is not SweVerdict.INCONCLUSIVE:  # a verdict is checked, never taken on trust
        missing = (
            "holds no significance criterion"
            if significance is None
            else f"its significance criterion {significance.name!r} does not carry "
            + ", ".join(
                n
                for n, v in zip(("Δ", "p", "CI low", "CI high", "α"), numbers or (), strict=True)
                if v is None
            )
        )
        problems.append(f"it states {stated.value!r} but {missing}, so it cannot be checked")
    source = "swe_gate JUnit " + ", ".join(sorted({c.source for c in gate}))
    return SweEvidence(stated, instance_set, n, source, tuple(problems))


#: Suite properties stating the SWE comparison's verdict (swe compare, the swe_gate tier).
SWE_VERDICT_PROPERTIES = ("rlgate.verdict", "rlgate.swe.verdict")


def junit_swe_verdict(suites: Sequence[JunitSuite], cases: Sequence[Case]) -> SweVerdict | None:
    """The SWE verdict the swe_gate JUnit states (suite property), or None.

    Raises RlgateError when a stated verdict is not one, or the files disagree.
    """
    holders = {(c.source, c.suite) for c in cases if c.tier is Tier.SWE_GATE}
    stated: dict[SweVerdict, str] = {}
    for suite in suites:
        if (suite.source, suite.name) not in holders:
            continue
        for key, raw in suite.properties:
            if key not in SWE_VERDICT_PROPERTIES:
                continue
            try:
                stated.setdefault(SweVerdict(raw), suite.source)
            except ValueError:
                raise RlgateError(
                    f"{suite.source}: {key} = {raw!r} is not a swe_gate verdict (expected one "
                    f"of {', '.join(v.value for v in SweVerdict)})",
                    hint="regenerate the JUnit with the rlgate command or tier that wrote it",
                ) from None
    if len(stated) > 1:
        raise RlgateError(
            "the swe_gate JUnit disagrees on the verdict: "
            + "; ".join(f"{v.value!r} in {src}" for v, src in sorted(stated.items(), key=str))
        )
    return next(iter(stated), None)


def swe_evidence(
    cases: Sequence[Case],
    swe: SweDoc | None,
    source: str = "",
    suites: Sequence[JunitSuite] = (),
) -> SweEvidence | None:
    """The SWE evidence from the SWE JSON, else from the swe_gate JUnit; None if absent.

    Raises RlgateError when the JSON and the JUnit describe different comparisons.
    """
    junit_verdict = junit_swe_verdict(suites, cases)
    suite_properties = [(s.source, k, v) for s in suites for k, v in s.properties]
    if swe is not None:
        if junit_verdict is not None and junit_verdict is not swe.verdict:
            raise RlgateError(
                f"SWE JSON {source} says {swe.verdict.value!r} but the swe_gate JUnit says "
                f"{junit_verdict.value!r}",
                hint="pass the JSON and the JUnit of the same `rlgate swe compare` run",
            )
        evidence = _from_json(swe, f"SWE JSON {source}")
        if swe.reduced is not None:
            reduced = _from_json(swe.reduced.comparison, f"SWE JSON {source} (reduced)")
            evidence = dataclasses.replace(evidence, reduced=reduced)
        if junit_verdict is not None:
            junit_set, _, _ = _junit_set(cases, suite_properties)
            named = _one_value(suite_properties, _SET_PROPERTIES) or any(
                c.informational == "instance" for c in cases
            )
            if named and junit_set is not evidence.instance_set and not evidence.contradictions:
                raise RlgateError(
                    f"SWE JSON {source} compared {evidence.universe()} but the swe_gate "
                    f"JUnit compared {junit_set.value}",
                    hint="pass the JSON and the JUnit of the same `rlgate swe compare` run",
                )
        return evidence
    if junit_verdict is None:
        return None
    return _from_junit(cases, suite_properties, junit_verdict)


# --- blockers -------------------------------------------------------------------------------


_BAD = (Outcome.FAIL, Outcome.ERROR)
_ORDER = (Verdict.GO, Verdict.INCOMPLETE, Verdict.NO_GO)


def _forces(case: Case, outcome: Outcome) -> Verdict:
    """What a gate testcase with ``outcome`` forces (GO: nothing).

    A FAIL, or an ERROR of the code, is NO-GO; an ERROR of the infrastructure (a
    ``swe_gate`` error, or one whose Result names its cause) is INCOMPLETE.
    """
    if outcome is Outcome.FAIL:
        return Verdict.NO_GO
    if outcome is Outcome.ERROR:
        infra = case.tier is Tier.SWE_GATE or case.result.infra_cause is not None
        return Verdict.INCOMPLETE if infra else Verdict.NO_GO
    return Verdict.GO


def _shown_text(case: Case) -> str:
    if case.junit.xfail:
        return "was an expected failure"
    return {
        Outcome.PASS: "passed",
        Outcome.FAIL: "failed",
        Outcome.ERROR: "errored",
        Outcome.SKIP: "was skipped",
    }[case.shown]


def _contradiction(case: Case, recorded: Outcome) -> Blocker:
    """A testcase whose element and recorded verdict disagree: the worse side, never GO."""
    forces = max(
        _forces(case, case.shown), _forces(case, recorded), Verdict.INCOMPLETE, key=_ORDER.index
    )
    return Blocker(
        BlockerKind.INCONSISTENT,
        case.tier,
        f"{case.tier.value}: {case.name}",
        f"the testcase {_shown_text(case)} but records {VERDICT} = {recorded.value} "
        f"({case.source}); a JUnit that contradicts itself cannot say which is true: rerun "
        "the tier and pass its JUnit unedited",
        case.anchor,
        forces,
    )


def _tier_contradiction(case: Case) -> Blocker:
    """A testcase whose classname names one tier and whose recorded ``rlgate.tier`` another."""
    by_name = classify_tier(case.junit.classname)
    forces = max(
        _forces(case, case.shown),
        _forces(case, case.recorded or case.shown),
        Verdict.INCOMPLETE,
        key=_ORDER.index,
    )
    return Blocker(
        BlockerKind.INCONSISTENT,
        case.tier,
        f"{case.tier.value}: {case.name}",
        f"the testcase's classname {case.junit.classname} puts it in the {by_name.value} tier "
        f"but it records rlgate.tier = {case.tier.value} ({case.source}); a testcase counts "
        "for the tier it comes from only, so it is no gate check of either",
        case.anchor,
        forces,
    )


def _hidden_failure(case: Case) -> Blocker:
    """An informational testcase (a benchmark) that failed: not a gate, never waved through."""
    return Blocker(
        BlockerKind.INCONSISTENT,
        case.tier,
        f"{case.tier.value}: {case.name}",
        f"the testcase is marked informational ({case.informational}) but it "
        f"{_shown_text(case)}"
        + (f": {case.message}" if case.message else "")
        + f" ({case.source}); an informational testcase never gates, and never hides a "
        "failure: fix it, or run it outside the release gate",
        case.anchor,
        Verdict.INCOMPLETE,
    )


def _case_blockers(cases: Sequence[Case]) -> list[Blocker]:
    out = []
    for case in cases:
        if case.junit.tier_contradicts:
            out.append(_tier_contradiction(case))
            continue
        if case.informational:
            if case.hides_failure:
                out.append(_hidden_failure(case))
            continue
        if case.recorded is not None and case.contradicts:
            out.append(_contradiction(case, case.recorded))
            continue
        if case.shown not in _BAD:
            continue
        out.append(
            Blocker(
                BlockerKind.ERROR if case.shown is Outcome.ERROR else BlockerKind.FAILED,
                case.tier,
                f"{case.tier.value}: {case.name}",
                case.message or f"{case.status} ({case.junit.classname})",
                case.anchor,
                _forces(case, case.shown),
            )
        )
    return out


def _not_run_detail(cases: Sequence[Case]) -> str:
    """Why a tier with testcases had no gate check evaluated."""
    if not cases:
        return "no JUnit testcase of this tier was given"
    parts = []
    gate = [c for c in cases if not c.informational]
    skipped = [c for c in gate if not c.executed and not c.contradicts]
    if skipped:
        reasons = sorted({c.message for c in skipped if c.message})
        parts.append(f"{len(skipped)} testcase(s) skipped: " + "; ".join(reasons[:3]))
    errored = [c for c in gate if c.gating and c.shown is Outcome.ERROR and not c.contradicts]
    if errored:
        parts.append(f"{len(errored)} gate check(s) errored (could not judge)")
    torn = [c for c in gate if c.contradicts]
    if torn:
        parts.append(f"{len(torn)} testcase(s) contradict their recorded {VERDICT}")
    plain = [c for c in gate if c.executed and not c.gating]
    if plain:
        names = ", ".join(c.name for c in plain[:3]) + (" …" if len(plain) > 3 else "")
        parts.append(
            f"{len(plain)} testcase(s) ran but record no {VERDICT}, so are no gate check ({names})"
        )
    info = [c for c in cases if c.informational]
    if info:
        kinds = ", ".join(sorted({c.informational for c in info}))
        parts.append(f"{len(info)} informational testcase(s) ({kinds}) never count")
    if len(parts) == 1 and skipped and len(skipped) == len(cases):
        return f"all {parts[0]}"
    return "no gate check was evaluated: " + "; ".join(parts)


def _tier_blockers(tiers: Sequence[TierSummary]) -> list[Blocker]:
    return [
        Blocker(
            BlockerKind.NOT_RUN,
            summary.tier,
            f"{summary.tier.value}: tier did not run",
            _not_run_detail(summary.cases),
            summary.anchor,
            Verdict.INCOMPLETE,
        )
        for summary in tiers
        if summary.tier in RELEASE_TIERS and not summary.ran
    ]


def _run_blockers(runs: Sequence[tuple[Path, RunDocument]], cases: Sequence[Case]) -> list[Blocker]:
    """Every check of a run JSON shows in the JUnit, and a check it failed as a failure too."""
    failing = {(c.tier, c.name) for c in cases if c.shown in _BAD}
    shown = {(c.tier, c.name) for c in cases}
    out = []
    for path, doc in runs:
        absent = [c for c in (*doc.checks, *doc.skipped) if (c.tier, c.name) not in shown]
        if absent:
            names = ", ".join(f"{c.tier.value}: {c.name}" for c in absent[:5])
            more = f" and {len(absent) - 5} more" if len(absent) > 5 else ""
            out.append(
                Blocker(
                    BlockerKind.INCONSISTENT,
                    absent[0].tier,
                    f"run JSON: {len(absent)} check(s) of {doc.recipe} missing from the JUnit",
                    f"run JSON {path} lists {names}{more}, which no JUnit testcase shows; pass "
                    "that run's --junit (all of it)",
                    "runs",
                    Verdict.INCOMPLETE,
                )
            )
        for check in doc.checks:
            if not check.passed and (check.tier, check.name) not in failing:
                out.append(
                    Blocker(
                        BlockerKind.INCONSISTENT,
                        check.tier,
                        f"{check.tier.value}: {check.name} ({doc.recipe})",
                        f"run JSON {path} reports {check.outcome.value.upper()} "
                        f"({check.message}) but no JUnit testcase shows it; pass that run's "
                        "--junit too",
                        "runs",
                        Verdict.NO_GO,
                    )
                )
        if not doc.passed and all(c.passed for c in doc.checks):
            out.append(
                Blocker(
                    BlockerKind.INCONSISTENT,
                    Tier.CONVERGENCE,
                    f"run JSON: {doc.recipe} did not pass",
                    f"run JSON {path} says passed = false but lists no failed check",
                    "runs",
                    Verdict.NO_GO,
                )
            )
    return out


def _swe_blockers(swe: SweEvidence | None) -> list[Blocker]:
    def blocker(kind: BlockerKind, title: str, detail: str, forces: Verdict) -> Blocker:
        return Blocker(kind, Tier.SWE_GATE, f"swe_gate: {title}", detail, "swe", forces)

    if swe is None:
        detail = "no --swe JSON and no swe_gate JUnit carrying a verdict"
        return [blocker(BlockerKind.SWE, "no SWE verdict", detail, Verdict.INCOMPLETE)]
    if swe.contradictions:
        detail = (
            f"{swe.source}: "
            + "; ".join(swe.contradictions)
            + ("; rerun `rlgate swe compare` and pass its JSON and JUnit unedited")
        )
        title = "the SWE evidence contradicts itself"
        return [blocker(BlockerKind.INCONSISTENT, title, detail, Verdict.INCOMPLETE)]
    out = []
    on = swe.universe()
    if swe.stated is SweVerdict.INCONCLUSIVE:
        detail = "infra errors or mismatched inputs"
        out.append(
            blocker(BlockerKind.SWE, "SWE comparison inconclusive", detail, Verdict.INCOMPLETE)
        )
    elif swe.stated is SweVerdict.REGRESSED:
        detail = f"the trained model is significantly worse on {on}"
        out.append(blocker(BlockerKind.SWE, "SWE-bench regressed", detail, Verdict.NO_GO))
    elif swe.stated is SweVerdict.NO_SIGNIFICANT_CHANGE:
        detail = f"training did not measurably improve {on}"
        # on a smaller set, a larger design (the full set) could still decide: INCOMPLETE
        forces = Verdict.NO_GO if swe.full_verified else Verdict.INCOMPLETE
        out.append(blocker(BlockerKind.SWE, "no significant SWE-bench improvement", detail, forces))
    if not swe.full_verified:
        detail = (
            f"a release GO needs the full {len(verified_ids())}-instance SWE-bench Verified "
            f"set; this comparison ran on {on}"
        )
        out.append(
            blocker(
                BlockerKind.SWE_SET,
                "not the full SWE-bench Verified set",
                detail,
                Verdict.INCOMPLETE,
            )
        )
    return out


def _planned_blockers(planned: Sequence[tuple[Tier, str]], cases: Sequence[Case]) -> list[Blocker]:
    """Every convergence/perf check the recipe plans shows in the JUnit (even as skipped)."""
    shown = {(c.tier, c.name) for c in cases}
    out = []
    for tier in CHECK_TIERS:
        absent = [name for t, name in planned if t is tier and (t, name) not in shown]
        if absent:
            names = ", ".join(absent[:5]) + (
                f" and {len(absent) - 5} more" if len(absent) > 5 else ""
            )
            out.append(
                Blocker(
                    BlockerKind.NOT_RUN,
                    tier,
                    f"{tier.value}: {len(absent)} planned check(s) missing",
                    f"the recipe plans {names}, which no JUnit testcase shows (not even as "
                    "skipped): the tier's JUnit is incomplete; pass all of it",
                    f"tier-{tier.value}",
                    Verdict.INCOMPLETE,
                )
            )
    return out


def _quarantined(
    blockers: Sequence[Blocker],
    tiers: Sequence[TierSummary],
    entries: Sequence[QuarantineState],
) -> list[Blocker]:
    """``blockers`` with each quarantined failure waived, and quarantined passes named.

    A quarantined check is no evidence for its tier: a release tier whose every evaluated
    gate check is quarantined did not run (INCOMPLETE), as if they were absent.
    """
    from rlgate.history.quarantine import match

    def held(case: Case) -> QuarantineState | None:
        recipe, hardware = case.fact("rlgate.recipe"), case.fact("rlgate.hardware")
        return match(entries, recipe, case.name, hardware)

    cases = [c for t in tiers for c in t.cases]
    by_anchor = {c.anchor: c for c in cases}
    out = []
    failing: set[int] = set()
    for b in blockers:
        case = by_anchor.get(b.anchor)
        s = None
        if case is not None and b.kind in (BlockerKind.FAILED, BlockerKind.ERROR):
            s = held(case)
        if s is None:
            out.append(b)
            continue
        failing.add(s.entry.id)
        detail = f"{s.describe()}; {b.forces.value} without it: {b.detail}"
        out.append(dataclasses.replace(b, kind=BlockerKind.QUARANTINED, detail=detail,
                                       forces=Verdict.GO))  # fmt: skip
    passed: dict[int, Blocker] = {}
    for case in cases:
        if not case.gating or case.shown is not Outcome.PASS or case.contradicts:
            continue
        s = held(case)
        if s is not None and s.entry.id not in failing and s.entry.id not in passed:
            passed[s.entry.id] = Blocker(
                BlockerKind.QUARANTINE_PASSED, case.tier, f"{case.tier.value}: {case.name}",
                f"{s.describe()}; it passed: a candidate for removal (rlgate history "
                f"quarantine remove {s.entry.id})",
                case.anchor, Verdict.GO,
            )  # fmt: skip
    for summary in tiers:
        evaluated = [c for c in summary.cases if c.evaluated]
        if summary.tier in RELEASE_TIERS and evaluated and all(held(c) for c in evaluated):
            detail = (
                f"every evaluated gate check of the tier ({len(evaluated)}) is quarantined: "
                "a quarantined check is no evidence"
            )
            title = f"{summary.tier.value}: tier did not run"
            kind, forces = BlockerKind.NOT_RUN, Verdict.INCOMPLETE
            out.append(Blocker(kind, summary.tier, title, detail, summary.anchor, forces))
    return out + list(passed.values())


def _drift_blockers(drifts: Sequence[TriageLabel]) -> list[Blocker]:
    """A NO-GO blocker per drift label that blocks (its recipe's ``block_on_drift``)."""
    return [
        Blocker(
            BlockerKind.DRIFT,
            lb.tier,
            f"{lb.tier.value}: {lb.check} drifted",
            f"{lb.reason} (recipe {lb.recipe} sets rlgate.block_on_drift)",
            "triage",
            Verdict.NO_GO,
        )
        for lb in drifts
        if lb.blocks
    ]


def quarantined_count(blockers: Sequence[Blocker]) -> tuple[int, int]:
    """The failures quarantine waived, and the quarantined checks that passed."""
    waived = sum(b.kind is BlockerKind.QUARANTINED for b in blockers)
    return waived, sum(b.kind is BlockerKind.QUARANTINE_PASSED for b in blockers)


def verdict_text(verdict: Verdict, blockers: Sequence[Blocker]) -> str:
    """The verdict as the report and the terminal say it: ``GO with 2 quarantined checks``.

    A plain ``GO`` only when no quarantine is involved at all.
    """
    waived, passed = quarantined_count(blockers)
    text = verdict.value
    if waived:
        text += f" with {waived} quarantined check{'s' if waived != 1 else ''}"
    if passed:
        text += (
            f"{',' if waived else ''} ({passed} quarantined check{'s' if passed != 1 else ''} "
            "passed: candidate for removal)"
        )
    return text


def decide(
    tiers: Sequence[TierSummary],
    swe: SweEvidence | None,
    runs: Sequence[tuple[Path, RunDocument]] = (),
    *,
    planned: Sequence[tuple[Tier, str]] = (),
    quarantines: Sequence[QuarantineState] = (),
    drifts: Sequence[TriageLabel] = (),
) -> tuple[Verdict, tuple[Blocker, ...]]:
    """Apply the verdict rule (module docstring); every blocker is returned, NO-GO first.

    ``planned``: the convergence/perf checks the recipe plans (``--recipe``); each must
    show in the JUnit. ``quarantines``: the active quarantine entries (others are ignored);
    the entries they produce force GO and come last. ``drifts``: the report's ``drift``
    labels (triage section); each that blocks is a NO-GO blocker, the others add nothing.
    """
    cases = [c for t in tiers for c in t.cases]
    blockers = _case_blockers(cases) + _tier_blockers(tiers) + _run_blockers(runs, cases)
    blockers += _planned_blockers(planned, cases) + _swe_blockers(swe)
    if quarantines:
        blockers = _quarantined(blockers, tiers, [q for q in quarantines if q.active])
    blockers += _drift_blockers(drifts)
    blockers.sort(key=lambda b: _ORDER.index(b.forces), reverse=True)
    if any(b.forces is Verdict.NO_GO for b in blockers):
        return Verdict.NO_GO, tuple(blockers)
    if any(b.forces is not Verdict.GO for b in blockers):
        return Verdict.INCOMPLETE, tuple(blockers)
    return Verdict.GO, tuple(blockers)
