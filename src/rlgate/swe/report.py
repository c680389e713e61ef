"""Render a :class:`~rlgate.swe.compare.SweComparison`: JSON payload, JUnit XML, summary table.

Invariants: rendering only, no decisions (the verdict comes from
:mod:`rlgate.swe.compare`) and no file writes (callers write the results with
:mod:`rlgate.core.io`, which adds ``schema_version`` and refuses to overwrite inputs).
The JUnit XML (written by :mod:`rlgate.core.junit`, every testcase a Result) has two
suites: ``rlgate.swe_gate`` with one testcase per gate criterion (``<failure>`` only for a
regression, ``<error>`` for infra/input problems; the comparison's verdict is a suite
property) and ``rlgate.swe_gate.instances`` with one informational testcase per instance
so CI dashboards show which instances flipped (lost = ``<failure>``, any infra outcome =
``<error>``); the gate decision is the criteria suite and the CLI exit code.

The flaky instances (:mod:`rlgate.swe.flaky`) are in the JSON (``flaky``), the summary
(one line) and the JUnit (criteria suite properties ``rlgate.flaky.*``, evidence ``flaky``
on a flaky instance's testcase). With ``--exclude`` the reduced comparison
(:mod:`rlgate.swe.exclude`) is written beside the full one, never in its place: the JSON's
``reduced`` block, a side-by-side table in the summary, and a third JUnit suite
``rlgate.swe_gate.reduced`` whose criteria are informational (``reduced``) and whose suite
properties are ``rlgate.reduced.*`` (never ``rlgate.verdict``: the verdict is the full one).
A reduced comparison that could not be formed (:class:`~rlgate.swe.exclude.UnformedReduction`)
is said in the same three places: the JSON's ``reduced_not_formed`` (``reduced`` null), a
line in the summary, and the reduced suite with no testcase and ``rlgate.reduced.formed`` =
``false``, ``rlgate.reduced.not_formed`` = why.
"""

from __future__ import annotations

from typing import Any

from junitparser import JUnitXml

from rlgate.core.junit import PROPERTY_PREFIX, JunitCase, JunitSuite, junit_root
from rlgate.core.results import Op, Result, Tier, render_table
from rlgate.core.results import Outcome as CheckOutcome
from rlgate.swe.compare import ArmSummary, SweComparison
from rlgate.swe.exclude import ReducedComparison, UnformedReduction
from rlgate.swe.flaky import MIN_RUNS, RULE, Flakiness
from rlgate.swe.records import (
    INFRA_OUTCOMES,
    DatasetUniverse,
    InstanceSet,
    Outcome,
    _examples,
    verified_ids,
)

__all__ = [
    "CRITERIA_SUITE",
    "INSTANCE_SUITE",
    "REDUCED_SUITE",
    "build_swe_junit",
    "comparison_to_dict",
    "flaky_line",
    "instance_results",
    "instance_set_text",
    "render_swe_summary",
]

CRITERIA_SUITE = "rlgate.swe_gate"
INSTANCE_SUITE = "rlgate.swe_gate.instances"
REDUCED_SUITE = "rlgate.swe_gate.reduced"
#: ``Result.informational`` of the reduced comparison's criteria: shown, never a gate.
REDUCED = "reduced"
_LISTED = (
    Outcome.EMPTY_PATCH,
    Outcome.PATCH_FAILED,
    Outcome.ERROR,
    Outcome.INFRA,
    Outcome.MISSING,
)


def instance_set_text(universe: DatasetUniverse) -> str:
    """Which instance set was compared, in words; only the full set is called SWE-bench Verified."""
    ids = f"ids sha256 {universe.ids_sha256[:12]}"
    which = universe.instance_set
    if which is InstanceSet.VERIFIED:
        return f"SWE-bench Verified, all {universe.n} instances ({ids})"
    if which is InstanceSet.VERIFIED_SUBSET:
        return (
            f"a subset of Verified: {universe.n} of its {len(verified_ids())} instances, "
            f"not the full benchmark ({ids})"
        )
    return f"an unknown instance set of {universe.n} instances, not a subset of Verified ({ids})"


def _r(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


def _arm_dict(arm: ArmSummary, n: int) -> dict[str, Any]:
    runs = []
    for run in arm.runs:
        counts = {o.value: run.count(o) for o in Outcome}
        runs.append(
            {
                "label": run.label,
                "source": run.source,
                "format": run.input_format.value,
                "dataset_name": run.dataset_name,
                "resolved": run.count(Outcome.RESOLVED),
                "rate": _r(run.count(Outcome.RESOLVED) / n, 6),
                "infra_error_rate": _r(run.infra_error_rate, 6),
                "counts": counts,
                "ids": {o.value: run.ids(o) for o in _LISTED},
                "reasons": {
                    i: o.reason
                    for i, o in sorted(run.outcomes.items())
                    if o.reason
                    and o.outcome in (*INFRA_OUTCOMES, Outcome.PATCH_FAILED)
                    and o.outcome is not Outcome.MISSING
                },
                "label_mismatch": list(run.label_mismatch),
            }
        )
    return {
        "runs": runs,
        "resolved": list(arm.resolved),
        "rate": _r(arm.rate, 6),
        "rate_se": None if arm.rate_se is None else _r(arm.rate_se, 6),
        "n_instances": n,
        "empty_patch": list(arm.counts(Outcome.EMPTY_PATCH)),
        "patch_failed": list(arm.counts(Outcome.PATCH_FAILED)),
        "errors": list(arm.counts(Outcome.ERROR)),
        "infra": list(arm.counts(Outcome.INFRA)),
        "missing": list(arm.counts(Outcome.MISSING)),
        "infra_error_rate": [_r(r.infra_error_rate, 6) for r in arm.runs],
    }


def _flaky_dict(flaky: Flakiness) -> dict[str, Any]:
    return {
        "rule": RULE,
        "min_runs": MIN_RUNS,
        "measured_arms": list(flaky.measured),
        "unmeasured_arms": list(flaky.unmeasured),
        "count": len(flaky.ids),
        "ids": list(flaky.ids),
        "by_arm": {arm: list(flaky.in_arm(arm)) for arm in flaky.measured},
    }


def _reduced_dict(reduced: ReducedComparison) -> dict[str, Any]:
    return {
        "gating": False,
        "exclude": list(reduced.requested),
        "excluded_count": len(reduced.excluded),
        "excluded_ids": list(reduced.excluded),
        "sets": [
            {
                "label": s.label,
                "count": len(s.ids),
                "listed": s.listed,
                "source": s.source,
                "ids": list(s.ids),
            }
            for s in reduced.sets
        ],
        "comparison": comparison_to_dict(reduced.comparison),
    }


def _unformed_dict(unformed: UnformedReduction) -> dict[str, Any]:
    return {
        "gating": False,
        "exclude": list(unformed.requested),
        "reason": unformed.reason,
        "sets": [
            {"label": s.label, "count": len(s.ids), "listed": s.listed, "source": s.source}
            for s in unformed.sets
        ],
    }


def comparison_to_dict(
    comparison: SweComparison, reduced: ReducedComparison | UnformedReduction | None = None
) -> dict[str, Any]:
    """Return the JSON payload of ``rlgate swe compare`` (without ``schema_version``).

    The top level is always the full comparison (the verdict); ``reduced`` is the
    ``--exclude`` comparison beside it, or null; ``reduced_not_formed`` says why the one
    asked for could not be formed, or is null.
    """
    unformed = reduced if isinstance(reduced, UnformedReduction) else None
    formed = reduced if isinstance(reduced, ReducedComparison) else None
    c, u, opts = comparison, comparison.universe, comparison.options
    return {
        "verdict": c.verdict.value,
        "reasons": list(c.reasons),
        "delta_pp": _r(c.delta_pp),
        "p_value": float(c.p_value),
        "ci95_pp": [_r(c.ci95_pp[0]), _r(c.ci95_pp[1])],
        "test": c.test,
        "ci_method": c.ci_method,
        "alpha": opts.alpha,
        "margin_pp": opts.margin_pp,
        "max_infra_error_rate": opts.max_infra_error_rate,
        "n_resamples": opts.n_resamples,
        "seed": opts.seed,
        "dataset": {
            "source": u.source,
            "n_instances": u.n,
            "instance_set": u.instance_set.value,
            "file_sha256": u.file_sha256,
            "ids_sha256": u.ids_sha256,
            "labels_sha256": u.labels_sha256,
        },
        "before": _arm_dict(c.before, u.n),
        "after": _arm_dict(c.after, u.n),
        "lost": c.lost,
        "gained": c.gained,
        # Results, with `bound` the threshold's number as it has always been written
        "criteria": [{**r.to_json(), "bound": r.threshold} for r in c.criteria],
        "per_repo": [
            {
                "repo": r.repo,
                "n": r.n,
                "before_resolved": _r(r.before_resolved),
                "after_resolved": _r(r.after_resolved),
                "delta_pp": _r(r.delta_pp),
                "gained": r.gained,
                "lost": r.lost,
            }
            for r in c.per_repo
        ],
        "discordant": [
            {
                "instance_id": f.instance_id,
                "repo": f.repo,
                "before": _r(f.before),
                "after": _r(f.after),
                "direction": "gained" if f.gained else "lost",
            }
            for f in c.flips
        ],
        "flaky": _flaky_dict(c.flaky),
        "reduced": None if formed is None else _reduced_dict(formed),
        "reduced_not_formed": None if unformed is None else _unformed_dict(unformed),
    }


def _criteria_suite(c: SweComparison) -> JunitSuite:
    cases = [JunitCase.of(r, classname=CRITERIA_SUITE) for r in c.criteria]
    u = c.universe
    facts = {
        "verdict": c.verdict.value,
        "dataset": u.source,
        "dataset.sha256": u.file_sha256 or u.ids_sha256,
        "n_instances": u.n,
        "instance_set": u.instance_set.value,
        "instance_set.ids_sha256": u.ids_sha256,
        "instance_set.text": instance_set_text(u),
        **_flaky_facts(c.flaky),
    }
    return JunitSuite.of(
        CRITERIA_SUITE, cases, {f"{PROPERTY_PREFIX}{k}": v for k, v in facts.items()}
    )


def _flaky_facts(flaky: Flakiness) -> dict[str, Any]:
    return {
        "flaky.count": len(flaky.ids),
        "flaky.ids": ",".join(flaky.ids),
        "flaky.measured_arms": ",".join(flaky.measured),
    }


def _unformed_suite(unformed: UnformedReduction) -> JunitSuite:
    """The reduced suite of a reduced comparison that was not formed: no testcase, why."""
    facts = {
        "gating": False,
        "formed": False,
        "exclude": " ".join(unformed.requested),
        "not_formed": unformed.reason,
    }
    prefix = f"{PROPERTY_PREFIX}{REDUCED}."
    return JunitSuite.of(REDUCED_SUITE, [], {f"{prefix}{k}": v for k, v in facts.items()})


def _reduced_suite(reduced: ReducedComparison) -> JunitSuite:
    """The reduced comparison's criteria, informational; its facts under ``rlgate.reduced.``."""
    c, u = reduced.comparison, reduced.comparison.universe
    cases = [
        JunitCase.of(r.model_copy(update={"informational": REDUCED}), classname=REDUCED_SUITE)
        for r in c.criteria
    ]
    facts = {
        "gating": False,
        "verdict": c.verdict.value,
        "exclude": " ".join(reduced.requested),
        "excluded_count": len(reduced.excluded),
        "excluded_ids": ",".join(reduced.excluded),
        **{f"excluded.{s.label}": len(s.ids) for s in reduced.sets},
        "n_instances": u.n,
        "instance_set": u.instance_set.value,
        "instance_set.ids_sha256": u.ids_sha256,
        "instance_set.text": instance_set_text(u),
    }
    prefix = f"{PROPERTY_PREFIX}{REDUCED}."
    return JunitSuite.of(REDUCED_SUITE, cases, {f"{prefix}{k}": v for k, v in facts.items()})


def instance_results(c: SweComparison) -> list[Result]:
    """One informational Result per instance: lost = FAIL, any infra outcome = ERROR.

    ``value`` is the after arm's resolved share (mean over runs), ``threshold`` the before
    arm's: an instance passes when it is not lost (``>=``).
    """
    out, flaky = [], c.flaky.arms_by_id()
    for i, iid in enumerate(c.universe.ids):
        repo = c.universe.repos[iid]
        before, after = float(c.before.instance_mean[i]), float(c.after.instance_mean[i])
        b_out = [r.outcomes[iid] for r in c.before.runs]
        a_out = [r.outcomes[iid] for r in c.after.runs]
        infra = [
            f"{arm} run {run.label}: {o.outcome.value}" + (f" ({o.reason})" if o.reason else "")
            for arm, runs, outs in (
                ("before", c.before.runs, b_out),
                ("after", c.after.runs, a_out),
            )
            for run, o in zip(runs, outs, strict=True)
            if o.outcome in INFRA_OUTCOMES
        ]
        if infra:
            outcome, message = CheckOutcome.ERROR, "not a valid measurement: " + "; ".join(infra)
        elif after < before:
            outcome, message = (
                CheckOutcome.FAIL,
                f"lost: resolved {before:.2f} before, {after:.2f} after",
            )
        else:
            outcome, message = CheckOutcome.PASS, ""
        out.append(
            Result(
                name=iid,
                tier=Tier.SWE_GATE,
                outcome=outcome,
                value=after,
                op=Op.GE,
                threshold=before,
                unit="resolved share",
                message=message,
                evidence={
                    "repo": repo,
                    "before_outcomes": ",".join(o.outcome.value for o in b_out),
                    "after_outcomes": ",".join(o.outcome.value for o in a_out),
                    "flip": "gained" if after > before else "lost" if after < before else "none",
                    **({"flaky": ",".join(flaky[iid])} if iid in flaky else {}),
                },
                informational="instance",
            )
        )
    return out


def build_swe_junit(
    comparison: SweComparison, reduced: ReducedComparison | UnformedReduction | None = None
) -> JUnitXml:
    """Build the JUnit XML: criteria suite, per-instance suite, and the reduced one if given."""
    instances = [
        JunitCase.of(r, classname=f"{INSTANCE_SUITE}.{str(r.evidence['repo']).replace('/', '__')}")
        for r in instance_results(comparison)
    ]
    suites = [_criteria_suite(comparison), JunitSuite.of(INSTANCE_SUITE, instances)]
    if isinstance(reduced, UnformedReduction):
        suites.append(_unformed_suite(reduced))
    elif reduced is not None:
        suites.append(_reduced_suite(reduced))
    return junit_root(suites, name="rlgate swe compare")


def _pct(value: float) -> str:
    return f"{100.0 * value:.1f}%"


def flaky_line(flaky: Flakiness, arms: tuple[ArmSummary, ...]) -> str:
    """One line: how many instances flip between runs of one arm, and which."""
    runs = {arm.name: len(arm.runs) for arm in arms}
    if not flaky.measured:
        return (
            "flaky instances: not measured (one run per arm; a flip needs at least "
            f"{MIN_RUNS} runs of one model)"
        )
    where = ", ".join(
        f"{arm} {len(flaky.in_arm(arm))} over {runs.get(arm, '?')} runs" for arm in flaky.measured
    )
    unmeasured = "".join(f"; {arm} not measured (1 run)" for arm in flaky.unmeasured)
    ids = f": {_examples(flaky.ids)}" if flaky.ids else ""
    return (
        f"flaky instances: {len(flaky.ids)} (resolved in some runs of one arm, not in others; "
        f"{where}{unmeasured}){ids}"
    )


def _side_by_side(full: SweComparison, reduced: ReducedComparison) -> list[str]:
    r, u = reduced.comparison, full.universe
    sets = ", ".join(
        f"{s.label} {len(s.ids)}" + (f" (of {s.listed} listed)" if s.listed != len(s.ids) else "")
        for s in reduced.sets
    )
    width = 26

    def row(name: str, a: str, b: str) -> str:
        return f"    {name:<16}{a:<{width}}{b}"

    def numbers(c: SweComparison) -> dict[str, str]:
        return {
            "instances": str(c.universe.n),
            "instance set": c.universe.instance_set.value,
            "verdict": c.verdict.value.upper(),
            "delta": f"{c.delta_pp:+.2f} pp",
            "95% CI": f"[{c.ci95_pp[0]:+.2f}, {c.ci95_pp[1]:+.2f}] pp",
            "p": f"{c.p_value:.3g}",
            "before / after": f"{_pct(c.before.rate)} / {_pct(c.after.rate)}",
            "lost / gained": f"{c.lost} / {c.gained}",
        }

    a, b = numbers(full), numbers(r)
    lines = [
        f"  reduced comparison (--exclude {' '.join(reduced.requested)}), shown beside the full "
        "one; the verdict above is the full comparison's",
        f"    excluded {len(reduced.excluded)} of {u.n} instances: {sets}",
        f"    reduced instance set: {instance_set_text(r.universe)}",
        row("", "full", "reduced"),
        *(row(k, a[k], b[k]) for k in a),
    ]
    if r.verdict is not full.verdict:
        lines.append(
            f"    note: the reduced verdict ({r.verdict.value}) differs from the full one "
            f"({full.verdict.value}); it is a diagnostic and never decides"
        )
    return [*lines, *(f"    - reduced: {reason}" for reason in r.reasons)]


def _seeds_text(c: SweComparison) -> str:
    """What the per-repository before/after columns count: resolved instances, seed means."""
    b, a = len(c.before.runs), len(c.after.runs)
    seeds = (
        (f"mean of {b} seeds each" if b > 1 else "1 seed each")
        if a == b
        else f"mean of {b} before / {a} after seed(s)"
    )
    return f"resolved instances, {seeds} (not %)"


def render_swe_summary(
    comparison: SweComparison, reduced: ReducedComparison | UnformedReduction | None = None
) -> str:
    """Render the short human summary printed by ``rlgate swe compare`` (full, then reduced)."""
    c, u = comparison, comparison.universe
    lines = [
        f"SWE gate verdict: {c.verdict.value.upper()}",
        f"  delta = {c.delta_pp:+.2f} pp   95% CI [{c.ci95_pp[0]:+.2f}, {c.ci95_pp[1]:+.2f}] pp   "
        f"{c.test} p = {c.p_value:.3g}   lost {c.lost} / gained {c.gained}",
        f"  instance set: {instance_set_text(u)}",
        f"  dataset {u.source}: {u.n} instances, sha256 {(u.file_sha256 or u.ids_sha256)[:12]}",
        "",
        f"  {'arm':<7}{'runs':>5}{'rate':>9}{'+/-SE':>8}{'empty':>7}{'patch-failed':>13}"
        f"{'errors':>7}{'infra':>6}{'missing':>8}{'infra%':>8}",
    ]
    for arm in (c.before, c.after):
        se = "-" if arm.rate_se is None else _pct(arm.rate_se)
        worst = arm.worst_run.infra_error_rate
        lines.append(
            f"  {arm.name:<7}{len(arm.runs):>5}{_pct(arm.rate):>9}{se:>8}"
            f"{max(arm.counts(Outcome.EMPTY_PATCH)):>7}{max(arm.counts(Outcome.PATCH_FAILED)):>13}"
            f"{max(arm.counts(Outcome.ERROR)):>7}{max(arm.counts(Outcome.INFRA)):>6}"
            f"{max(arm.counts(Outcome.MISSING)):>8}{_pct(worst):>8}"
        )
    lines += [
        "  each count: instances, the largest count over an arm's runs; empty: no patch produced;",
        "  patch-failed: the patch failed to apply; errors: no readable harness report;",
        "  infra: an environment fault; missing: no result; infra%: the worst run's infra rate",
    ]
    lines += ["", "  criteria:", *render_table(c.criteria).splitlines()]
    lines += ["", f"  per repository: {_seeds_text(c)}"]
    lines += ["  d pp: the difference of resolve rates; +/-: instances gained / lost"]
    lines += [f"  {'repository':<28}{'n':>5}{'before':>9}{'after':>9}{'d pp':>8}{'+/-':>9}"]
    for r in c.per_repo:
        lines.append(
            f"  {r.repo:<28}{r.n:>5}{r.before_resolved:>9.1f}{r.after_resolved:>9.1f}"
            f"{r.delta_pp:>+8.1f}{f'+{r.gained}/-{r.lost}':>9}"
        )
    lines += ["", *(f"  - {reason}" for reason in c.reasons)]
    lines += ["", f"  {flaky_line(c.flaky, (c.before, c.after))}"]
    if isinstance(reduced, UnformedReduction):
        lines += [
            "",
            f"  reduced comparison (--exclude {' '.join(reduced.requested)}): not formed: "
            f"{reduced.reason}; the verdict above is the full comparison's",
        ]
    elif reduced is not None:
        lines += ["", *_side_by_side(c, reduced)]
    return "\n".join(lines)
