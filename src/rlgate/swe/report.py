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
"""

from __future__ import annotations

from typing import Any

from junitparser import JUnitXml

from rlgate.core.junit import PROPERTY_PREFIX, JunitCase, JunitSuite, junit_root
from rlgate.core.results import Op, Result, Tier, render_table
from rlgate.core.results import Outcome as CheckOutcome
from rlgate.swe.compare import ArmSummary, SweComparison
from rlgate.swe.records import INFRA_OUTCOMES, DatasetUniverse, InstanceSet, Outcome, verified_ids

__all__ = [
    "CRITERIA_SUITE",
    "INSTANCE_SUITE",
    "build_swe_junit",
    "comparison_to_dict",
    "instance_results",
    "instance_set_text",
    "render_swe_summary",
]

CRITERIA_SUITE = "rlgate.swe_gate"
INSTANCE_SUITE = "rlgate.swe_gate.instances"
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


def comparison_to_dict(comparison: SweComparison) -> dict[str, Any]:
    """Return the JSON payload of ``rlgate swe compare`` (without ``schema_version``)."""
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
    }
    return JunitSuite.of(
        CRITERIA_SUITE, cases, {f"{PROPERTY_PREFIX}{k}": v for k, v in facts.items()}
    )


def instance_results(c: SweComparison) -> list[Result]:
    """One informational Result per instance: lost = FAIL, any infra outcome = ERROR.

    ``value`` is the after arm's resolved share (mean over runs), ``threshold`` the before
    arm's: an instance passes when it is not lost (``>=``).
    """
    out = []
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
                },
                informational="instance",
            )
        )
    return out


def build_swe_junit(comparison: SweComparison) -> JUnitXml:
    """Build the JUnit XML: gate criteria suite plus one testcase per instance."""
    instances = [
        JunitCase.of(r, classname=f"{INSTANCE_SUITE}.{str(r.evidence['repo']).replace('/', '__')}")
        for r in instance_results(comparison)
    ]
    suites = [_criteria_suite(comparison), JunitSuite.of(INSTANCE_SUITE, instances)]
    return junit_root(suites, name="rlgate swe compare")


def _pct(value: float) -> str:
    return f"{100.0 * value:.1f}%"


def render_swe_summary(comparison: SweComparison) -> str:
    """Render the short human summary table printed by ``rlgate swe compare``."""
    c, u = comparison, comparison.universe
    lines = [
        f"SWE gate verdict: {c.verdict.value.upper()}",
        f"  delta = {c.delta_pp:+.2f} pp   95% CI [{c.ci95_pp[0]:+.2f}, {c.ci95_pp[1]:+.2f}] pp   "
        f"{c.test} p = {c.p_value:.3g}   lost {c.lost} / gained {c.gained}",
        f"  instance set: {instance_set_text(u)}",
        f"  dataset {u.source}: {u.n} instances, sha256 {(u.file_sha256 or u.ids_sha256)[:12]}",
        "",
        f"  {'arm':<7}{'runs':>5}{'rate':>9}{'+/-SE':>8}{'empty':>7}{'nopatch':>8}"
        f"{'errors':>7}{'infra':>6}{'missing':>8}{'infra%':>8}",
    ]
    for arm in (c.before, c.after):
        se = "-" if arm.rate_se is None else _pct(arm.rate_se)
        worst = arm.worst_run.infra_error_rate
        lines.append(
            f"  {arm.name:<7}{len(arm.runs):>5}{_pct(arm.rate):>9}{se:>8}"
            f"{max(arm.counts(Outcome.EMPTY_PATCH)):>7}{max(arm.counts(Outcome.PATCH_FAILED)):>8}"
            f"{max(arm.counts(Outcome.ERROR)):>7}{max(arm.counts(Outcome.INFRA)):>6}"
            f"{max(arm.counts(Outcome.MISSING)):>8}{_pct(worst):>8}"
        )
    lines += ["", "  criteria:", *render_table(c.criteria).splitlines()]
    lines += ["", f"  {'repository':<28}{'n':>5}{'before':>9}{'after':>9}{'d pp':>8}{'+/-':>9}"]
    for r in c.per_repo:
        lines.append(
            f"  {r.repo:<28}{r.n:>5}{r.before_resolved:>9.1f}{r.after_resolved:>9.1f}"
            f"{r.delta_pp:>+8.1f}{f'+{r.gained}/-{r.lost}':>9}"
        )
    lines += ["", *(f"  - {reason}" for reason in c.reasons)]
    return "\n".join(lines)
