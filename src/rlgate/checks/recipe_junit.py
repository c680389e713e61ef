"""``rlgate recipe check --junit``: one testcase per config and check (rule family).

The classname is ``rlgate.functional.recipe_check.<config name>`` (the functional tier, so
``rlgate report`` and ``history record`` classify it), the name the check's (``keys``,
``ranges``, ``training``... :data:`rlgate.checks.recipe.CONFIG_CHECKS` and the served
checks). A check with an error finding fails: the failure's message is its first error, its
text every finding of the check, each start-up rule's with the NeMo RL (Megatron-core,
vLLM) source it was read from; a check that could not run, or does not apply, is skipped
with the reason; warnings and infos of a passing check are its system-out. A config that
could not be checked is one ``load`` testcase in error. Every testcase records its
:class:`~rlgate.core.results.Result` as rlgate's other writers do (:mod:`rlgate.core.junit`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlgate.core.junit import JunitCase, JunitSuite, write_junit, xml_text
from rlgate.core.results import Outcome, Result, Tier
from rlgate.core.text import one_line
from rlgate.recipe.findings import Finding, Severity

if TYPE_CHECKING:
    from rlgate.checks.recipe import CheckStatus, CompatReport

__all__ = ["CLASSNAME", "SUITE", "recipe_check_junit", "report_cases", "unchecked_case"]

CLASSNAME = "rlgate.functional.recipe_check"
SUITE = "rlgate.recipe_check"


def _sources(finding: Finding) -> list[str]:
    """The sources a start-up rule cites (none for the other checks' findings)."""
    from rlgate.checks.startup import rules

    by_code = {r.code: r for r in rules()}
    found = by_code.get(finding.code)
    if found is None:
        return []
    return [f"  source: {s.where} {s.says} {s.cites!r}" for s in found.sources]


def _lines(findings: tuple[Finding, ...] | list[Finding]) -> str:
    return "\n".join(line for f in findings for line in (str(f), *_sources(f)))


def _case(
    name: str, classname: str, recipe: str, check: CheckStatus | None, found: list[Finding]
) -> JunitCase:
    errors = [f for f in found if f.severity is Severity.ERROR]
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        outcome, message = Outcome.FAIL, f"{errors[0]}{more}"
    elif check is not None and check.status != "ran":
        outcome, message = Outcome.SKIP, f"{check.status}: {check.reason}"
    else:
        outcome, message = Outcome.PASS, f"{len(found)} warnings or notes" if found else "passed"
    result = Result(
        name=name,
        tier=Tier.FUNCTIONAL,
        status=outcome,
        message=message,
        evidence={"findings": [f.as_dict() for f in found]},
    )
    case = JunitCase.of(result, classname=classname, facts={"recipe": recipe})
    text = xml_text(_lines(found)) if found else None
    if outcome is Outcome.FAIL:
        return _replace(case, detail=text or "")
    return _replace(case, system_out=text)


def _replace(case: JunitCase, **changes: object) -> JunitCase:
    import dataclasses

    return dataclasses.replace(case, **changes)  # type: ignore[arg-type]


def report_cases(report: CompatReport) -> list[JunitCase]:
    """One testcase per check of ``report``'s config (and ``setup`` for findings of none)."""
    classname = f"{CLASSNAME}.{one_line(report.recipe.name)}"  # a file name may hold a break
    recipe = str(report.recipe.path)
    cases = [_case(c.name, classname, recipe, c, list(c.findings)) for c in report.checks]
    attributed = {id(f) for c in report.checks for f in c.findings}
    rest = [f for f in report.findings if id(f) not in attributed]
    if rest:  # e.g. no chat template: found while setting up the served checks
        cases.append(_case("setup", classname, recipe, None, rest))
    return cases


def unchecked_case(config: str, name: str, message: str) -> JunitCase:
    """The ``load`` testcase of a config that could not be checked (an error)."""
    result = Result(name="load", tier=Tier.FUNCTIONAL, status=Outcome.ERROR, message=message)
    return JunitCase.of(result, classname=f"{CLASSNAME}.{one_line(name)}", facts={"recipe": config})


def recipe_check_junit(cases: list[JunitCase]) -> str:
    """The JUnit XML of one ``recipe check`` call."""
    return write_junit([JunitSuite.of(SUITE, cases)])
