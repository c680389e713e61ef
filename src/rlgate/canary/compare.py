"""What a candidate stack changes against the pin: testcase by testcase, recipe by recipe (pure).

The inputs are what the two stacks' own runs wrote: the functional tier's JUnit (pytest's
xunit1, read by :func:`rlgate.core.junit.read_junit`) and ``rlgate recipe check --json``.
Each testcase's state is one of :class:`State`; a change is classified (:class:`Kind`, by
:func:`rlgate.core.canary_states.classify`, which the JSON's validation reuses):

* ``newly-failing``: passed on the pin, fails (or errors) on the candidate -- a regression;
* ``newly-passing``: failed on the pin, passes on the candidate;
* ``limitation-lifted``: a strict xfail (a documented limitation) that passes on the
  candidate (pytest's ``[XPASS(strict)]``): the finding is named from the xfail's reason;
* ``changed``: any other change of state (skipped now, xfail now, ...); ``added`` and
  ``removed`` for a testcase only one side ran;

and per recipe, a change of ``recipe check``'s verdict (``compatible`` ->
``incompatible``...) with the findings that appeared or went. A regression (exit 1) is a
testcase newly failing, or a recipe compatible on the pin and not on the candidate.

Besides the states, what changed in behaviour (never a regression by itself, shown even when
both testcases pass):

* :class:`BehaviourChange`: a functional scenario whose observation
  (:data:`rlgate.core.observations.OBSERVATION_PROPERTY`: what the real parsers returned,
  the rendered prompt's token-id digest) differs, leaf by leaf;
* :class:`rlgate.canary.probe.ProbeChange`: tool parsers, reasoning parsers, engine
  arguments (NeMo RL's ``policy.generation.vllm_kwargs``), serving kwargs and chat-template
  kwargs added or removed (the two stacks' probes).

An observation that cannot be read (malformed, oversized: the JUnit is untrusted) is left
out with a note in :attr:`Comparison.notes`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlgate.canary.probe import ProbeChange, compare_probes
from rlgate.core.canary_states import Kind, State, classify, recipe_regressed
from rlgate.core.junit import JunitCase, read_junit
from rlgate.core.observations import OBSERVATION_PROPERTY, decode_observation, diff_observations
from rlgate.core.results import Outcome
from rlgate.core.text import unescape_controls

__all__ = [
    "BehaviourChange",
    "Comparison",
    "Kind",
    "RecipeChange",
    "State",
    "TestChange",
    "compare",
    "compare_behaviour",
    "compare_recipes",
    "compare_tests",
    "read_observations",
    "read_states",
]

XPASS_STRICT = "[XPASS(strict)]"


@dataclass(frozen=True, slots=True)
class Case:
    """A testcase's state and the message that goes with it (a failure's, an xfail's reason)."""

    state: State
    message: str = ""


@dataclass(frozen=True, slots=True)
class TestChange:
    """One testcase whose state differs between the pin and the candidate."""

    test: str  # classname::name
    kind: Kind
    pinned: State | None
    candidate: State | None
    detail: str = ""  # the candidate's failure message, or the limitation lifted

    @property
    def regression(self) -> bool:
        """True when it passed on the pin and fails on the candidate."""
        return self.kind is Kind.NEWLY_FAILING


@dataclass(frozen=True, slots=True)
class RecipeChange:
    """One recipe whose ``recipe check`` verdict or findings differ."""

    recipe: str
    pinned: str  # the status: compatible, incompatible, incomplete, invalid, error, absent
    candidate: str
    appeared: tuple[str, ...] = ()  # findings "severity code [key]" only the candidate has
    went: tuple[str, ...] = ()

    @property
    def regression(self) -> bool:
        """True when the recipe is compatible on the pin and not on the candidate."""
        return recipe_regressed(self.pinned, self.candidate)


@dataclass(frozen=True, slots=True)
class BehaviourChange:
    """A scenario whose observation differs: ``path: pinned -> candidate`` per leaf."""

    test: str  # classname::name
    differences: tuple[str, ...]

    regression = False  # a behaviour change is shown, never gated on by itself


@dataclass(frozen=True, slots=True)
class Comparison:
    """The whole comparison: changes, and how many testcases did not change."""

    tests: tuple[TestChange, ...]
    recipes: tuple[RecipeChange, ...]
    unchanged: int
    counts: Mapping[str, int] = field(default_factory=dict)
    behaviour: tuple[BehaviourChange, ...] = ()
    probes: tuple[ProbeChange, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def regressions(self) -> list[TestChange | RecipeChange]:
        """Everything that passes on the pin and fails on the candidate."""
        return [c for c in (*self.tests, *self.recipes) if c.regression]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``rlgate canary --json``)."""
        return {
            "regression": bool(self.regressions),
            "unchanged": self.unchanged,
            "counts": dict(self.counts),
            "tests": [
                {
                    "test": c.test,
                    "kind": c.kind.value,
                    "pinned": c.pinned.value if c.pinned else None,
                    "candidate": c.candidate.value if c.candidate else None,
                    "detail": c.detail,
                    "regression": c.regression,
                }
                for c in self.tests
            ],
            "recipes": [
                {
                    "recipe": c.recipe,
                    "pinned": c.pinned,
                    "candidate": c.candidate,
                    "appeared": list(c.appeared),
                    "went": list(c.went),
                    "regression": c.regression,
                }
                for c in self.recipes
            ],
            "behaviour": [
                {"test": c.test, "differences": list(c.differences)} for c in self.behaviour
            ],
            "probes": [c.as_dict() for c in self.probes],
            "notes": list(self.notes),
        }


def _case(case: JunitCase) -> Case:
    lines = case.detail.strip().splitlines()
    message = unescape_controls(case.message or (lines[-1] if lines else ""))
    if case.xfail:
        return Case(State.XFAIL, unescape_controls(case.message))
    if case.shown is Outcome.FAIL and case.message.startswith(XPASS_STRICT):
        return Case(
            State.XPASS_STRICT, unescape_controls(case.message)[len(XPASS_STRICT) :].strip()
        )
    state = {
        Outcome.PASS: State.PASS,
        Outcome.FAIL: State.FAIL,
        Outcome.ERROR: State.ERROR,
        Outcome.SKIP: State.SKIP,
    }.get(case.shown, State.FAIL)
    return Case(state, message)


def read_states(paths: Iterable[str | os.PathLike[str]]) -> dict[str, Case]:
    """``classname::name`` -> Case for every testcase of the JUnit files (read safely)."""
    out: dict[str, Case] = {}
    for path in paths:
        for suite in read_junit(path):
            for case in suite.cases:
                out[f"{case.classname}::{case.name}"] = _case(case)
    return out


def read_observations(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``classname::name`` -> observation of every testcase that has one, and notes on bad ones."""
    out: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    for path in paths:
        for suite in read_junit(path):
            for case in suite.cases:
                raw = case.prop(OBSERVATION_PROPERTY)
                doc, why = decode_observation(unescape_controls(raw) if raw is not None else None)
                test = f"{case.classname}::{case.name}"
                if doc is not None:
                    out[test] = doc
                elif why:
                    bad.append(f"{test} ({why})")
    notes = []
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        notes.append(f"{len(bad)} observations ignored: {shown}")
    return out, notes


def compare_behaviour(
    pinned: Mapping[str, Mapping[str, Any]], candidate: Mapping[str, Mapping[str, Any]]
) -> list[BehaviourChange]:
    """Scenarios (sorted) whose observations differ; one side only: said in one line."""
    changes = []
    for test in sorted(set(pinned) | set(candidate)):
        before, after = pinned.get(test), candidate.get(test)
        if before is None or after is None:
            side = "the pin" if after is None else "the candidate"
            changes.append(BehaviourChange(test, (f"observed on {side} only",)))
            continue
        differences = diff_observations(before, after)
        if differences:
            changes.append(BehaviourChange(test, tuple(differences)))
    return changes


def compare_tests(
    pinned: Mapping[str, Case], candidate: Mapping[str, Case]
) -> tuple[list[TestChange], int]:
    """The changed testcases (sorted by name) and the number of unchanged ones."""
    changes: list[TestChange] = []
    unchanged = 0
    for test in sorted(set(pinned) | set(candidate)):
        before, after = pinned.get(test), candidate.get(test)
        if before is None or after is None:
            kind = Kind.ADDED if before is None else Kind.REMOVED
            shown = after or before
            changes.append(
                TestChange(
                    test,
                    kind,
                    before.state if before else None,
                    after.state if after else None,
                    shown.message if shown else "",
                )
            )
            continue
        if before.state is after.state:
            unchanged += 1
            continue
        kind = classify(before.state, after.state)
        assert kind is not None  # the states differ
        detail = before.message if kind is Kind.LIMITATION_LIFTED else after.message
        changes.append(TestChange(test, kind, before.state, after.state, detail))
    return changes, unchanged


def _finding(doc: Mapping[str, Any]) -> str:
    key = f" [{doc.get('key')}]" if doc.get("key") else ""
    return f"{doc.get('severity', '?')} {doc.get('code', '?')}{key}"


def _reports(doc: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    if not doc:
        return {}
    return {str(r.get("name") or r.get("recipe")): r for r in doc.get("reports", [])}


def compare_recipes(
    pinned: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> list[RecipeChange]:
    """Per recipe of two ``recipe check --json`` documents: verdict and findings changed."""
    before, after = _reports(pinned), _reports(candidate)
    changes = []
    for name in sorted(set(before) | set(after)):
        b, a = before.get(name, {}), after.get(name, {})
        fb = {_finding(f) for f in b.get("findings", [])}
        fa = {_finding(f) for f in a.get("findings", [])}
        sb, sa = str(b.get("status", "absent")), str(a.get("status", "absent"))
        if sb != sa or fb != fa:
            changes.append(
                RecipeChange(name, sb, sa, tuple(sorted(fa - fb)), tuple(sorted(fb - fa)))
            )
    return changes


def compare(
    pinned_junit: Iterable[str | os.PathLike[str]],
    candidate_junit: Iterable[str | os.PathLike[str]],
    pinned_recipes: Mapping[str, Any] | None = None,
    candidate_recipes: Mapping[str, Any] | None = None,
    pinned_probe: Mapping[str, Any] | None = None,
    candidate_probe: Mapping[str, Any] | None = None,
    notes: Iterable[str] = (),
) -> Comparison:
    """Compare the pin's and the candidate's functional tier, recipe checks and probes."""
    pinned_junit, candidate_junit = list(pinned_junit), list(candidate_junit)
    pinned_states, candidate_states = read_states(pinned_junit), read_states(candidate_junit)
    tests, unchanged = compare_tests(pinned_states, candidate_states)
    recipes = compare_recipes(pinned_recipes, candidate_recipes)
    seen_before, notes_before = read_observations(pinned_junit)
    seen_after, notes_after = read_observations(candidate_junit)
    both = set(pinned_states) & set(candidate_states)  # a testcase one side lacks: added/removed
    behaviour = compare_behaviour(
        {t: o for t, o in seen_before.items() if t in both},
        {t: o for t, o in seen_after.items() if t in both},
    )
    probes = compare_probes(pinned_probe, candidate_probe)
    counts = {k.value: sum(c.kind is k for c in tests) for k in Kind}
    counts["recipes_changed"] = len(recipes)
    counts["behaviour_changed"] = len(behaviour)
    counts["probe_changes"] = len(probes)
    all_notes = [
        *notes,
        *(f"pin: {n}" for n in notes_before),
        *(f"candidate: {n}" for n in notes_after),
    ]
    return Comparison(
        tuple(tests),
        tuple(recipes),
        unchanged,
        counts,
        tuple(behaviour),
        tuple(probes),
        tuple(all_notes),
    )
