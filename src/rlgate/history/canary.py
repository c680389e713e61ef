"""Canary runs in the history: the branch ``canary/<stack>`` and what is recorded under it.

``rlgate canary --db`` records the **candidate** stack's functional tier and ``recipe
check`` as runs of the branch :func:`canary_branch` names (``canary/vllm-0.26.0``,
``canary/transformers-5.12.0_vllm-0.29.0``): a slug of the moved packages at the versions
the candidate environment itself reports (its JUnit's ``rlgate.version.*`` properties), so
``vllm@/dl/vllm-0.30.0rc1-...whl`` is ``canary/vllm-0.30.0rc1``. Every testcase is recorded
under the recipe it names (``rlgate.recipe``), those naming none under
:data:`CANARY_RECIPE`; the runs of one canary share a nightly id.

A canary branch is never main: :func:`rlgate.history.triage.window` keeps a canary run only
in a window *of its own branch* (``--main-branch canary/...``), never in a main or
baseline-commit window; :meth:`rlgate.history.store.Store.promote` refuses it and
``Store.promoted`` leaves it out (no band is built from a canary); a quarantine's ``--runs``
count never counts it. Recording canaries changes no label of main's triage
(tests/unit/test_canary_record.py, a hypothesis property).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from rlgate.core.junit import read_junit
from rlgate.core.results import Outcome, Result, Tier
from rlgate.core.text import one_line, unescape_controls
from rlgate.history.ingest import RECIPE_PROPERTY, add_versions, make_context
from rlgate.history.model import CANARY_PREFIX, RunContext, check_canary_branch, is_canary

__all__ = [
    "CANARY_PREFIX",
    "CANARY_RECIPE",
    "canary_branch",
    "canary_runs",
    "check_canary_branch",
    "is_canary",
    "recipe_check_results",
]

#: The recipe the functional tier's testcases that name no recipe are recorded under.
CANARY_RECIPE = "functional-tier"


def canary_branch(packages: Iterable[str], versions: Mapping[str, str]) -> str:
    """``canary/<pkg>-<version>[_...]`` of the moved ``packages`` at the candidate's ``versions``.

    Raises:
        ValueError: a package's version is unknown (``absent``) or not slug text.
    """
    parts = []
    for name in sorted(set(packages)):
        version = versions.get(name, "absent")
        if version == "absent":
            raise ValueError(f"the candidate environment reports no version of {name}")
        parts.append(f"{name}-{version}".lower())
    return check_canary_branch(CANARY_PREFIX + "_".join(parts))


def _junit_cases(paths: Iterable[str | os.PathLike[str]]) -> tuple[list, dict[str, str]]:
    """(recipe or None, Result) per testcase, and the suites' ``rlgate.version.*``."""
    cases: list[tuple[str | None, Result]] = []
    versions: dict[str, str] = {}
    for path in paths:
        for suite in read_junit(path):
            add_versions(versions, suite)
            for case in suite.cases:
                recipe = case.prop(RECIPE_PROPERTY)
                cases.append((unescape_controls(recipe) if recipe else None, case.judged))
    return cases, versions


def recipe_check_results(doc: Mapping[str, object] | None) -> list[tuple[str, Result]]:
    """(recipe, Result) per report of a ``recipe check --json`` document: pass = compatible."""
    if not doc or not isinstance(doc.get("reports"), list):
        return []
    out = []
    for report in doc["reports"]:
        if not isinstance(report, Mapping):
            continue
        name = str(report.get("name") or report.get("recipe") or "")
        status = str(report.get("status", "absent"))
        findings = [f for f in report.get("findings", []) or [] if isinstance(f, Mapping)]
        codes = sorted({str(f.get("code", "?")) for f in findings})
        result = Result(
            name="recipe check",
            tier=Tier.FUNCTIONAL,
            status=Outcome.PASS if status == "compatible" else Outcome.FAIL,
            message=one_line(
                f"recipe check: {status}" + (f" ({', '.join(codes)})" if codes else "")
            ),
            evidence={"status": status, "findings": codes},
        )
        out.append((name, result))
    return out


def canary_runs(
    junit: Sequence[str | os.PathLike[str]],
    *,
    packages: Iterable[str],
    recipe_doc: Mapping[str, object] | None = None,
    nightly_id: str,
    recorded_at: datetime,
    commits: Mapping[str, str] | None = None,
    label: str | None = None,
) -> list[tuple[RunContext, list[Result]]]:
    """The candidate's runs to record: one per recipe, on the stack's canary branch.

    Run ids are ``<recipe>@<branch>@<nightly id>``; versions are what the candidate's JUnit states
    (its environment's own ``rlgate versions``). Raises RlgateError (exit 2) when a
    context is invalid, ValueError when the stack's versions are unknown.
    """
    cases, versions = _junit_cases(junit)
    branch = canary_branch(packages, versions)
    grouped: dict[str, list[Result]] = {}
    for recipe, result in cases:
        grouped.setdefault(recipe or CANARY_RECIPE, []).append(result)
    for recipe, result in recipe_check_results(recipe_doc):
        grouped.setdefault(recipe or CANARY_RECIPE, []).append(result)
    runs = []
    for recipe, results in sorted(grouped.items()):
        context = make_context(
            run_id=f"{recipe}@{branch}@{nightly_id}",
            recipe=recipe,
            branch=branch,
            commits=dict(commits or {}),
            versions={k: v for k, v in versions.items() if v != "absent"},
            nightly_id=nightly_id,
            recorded_at=recorded_at,
            label=label,
            source=" ".join(os.fspath(p) for p in junit) or None,
        )
        runs.append((context, results))
    return runs
