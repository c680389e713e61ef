"""The report's "Upgrade canary" section (``rlgate report --canary CANARY.json``).

The input is what ``rlgate canary --json`` writes (:func:`rlgate.canary.record.document`),
read as **untrusted**: a regular file of at most 64 MiB, validated by :class:`CanaryDoc`
(types, the known kinds and states, bounded strings and lists, and its own consistency: a
testcase's kind is what its two states make it by the comparison's own rule,
:func:`rlgate.core.canary_states.classify`, and it is a regression exactly when that is newly
failing; a recipe is a regression exactly when its verdicts make it one; the document's
``regression`` exactly when it lists one); anything else is exit 2 with one message. Names
and details are plain ``str`` in the section (the backends escape them,
:mod:`rlgate.report.document`).

**A canary does not block this release.** The report judges the pinned stack its JUnit ran
on; a canary says what an *upgrade* would break. Its verdict never enters
:func:`rlgate.report.verdict.decide`, and the section says so -- but its newly failing
testcases and recipes come first in the section, by name, under "Would break on the
candidate".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from rlgate.core.canary_states import Kind, classify, recipe_regressed
from rlgate.core.canary_states import State as CanaryState
from rlgate.core.errors import RlgateError
from rlgate.core.io import read_json, require_regular_file
from rlgate.core.text import one_line
from rlgate.core.validate import LineText
from rlgate.report.document import Bullets, Code, Item, Own, Paragraph, Row, Section, Strong, Table
from rlgate.report.document import clip as clip_text

if TYPE_CHECKING:
    from rlgate.report.model import ReleaseReport

__all__ = ["CANARY_ANCHOR", "CanaryDoc", "CanarySection", "canary_report_section", "load_canary"]

CANARY_ANCHOR = "canary"
MAX_BYTES = 64 * 2**20
MAX_NAME = 2000
MAX_DETAIL = 20_000
MAX_ITEMS = 100_000
#: Changed testcases the section lists by name (the rest are counted; all are in the JSON).
SHOWN = 200
#: Differences shown per behaviour change (all are in the JSON).
SHOWN_DIFFS = 5

KINDS = ("newly-failing", "newly-passing", "limitation-lifted", "changed", "added", "removed")
STATES = ("pass", "fail", "error", "skip", "xfail", "xpass-strict")
HINT = "expected the output of rlgate canary --json"

Name = Annotated[LineText, Field(min_length=1, max_length=MAX_NAME)]
Short = Annotated[LineText, Field(max_length=200)]
State = Literal["pass", "fail", "error", "skip", "xfail", "xpass-strict"]


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


class CanaryTest(_Doc):
    """One changed testcase."""

    test: Name
    kind: Literal["newly-failing", "newly-passing", "limitation-lifted", "changed", "added",
                  "removed"]  # fmt: skip
    pinned: State | None = None
    candidate: State | None = None
    detail: Annotated[str, Field(max_length=MAX_DETAIL)] = ""
    regression: StrictBool


class CanaryRecipe(_Doc):
    """One recipe whose ``recipe check`` verdict or findings changed."""

    recipe: Name
    pinned: Short
    candidate: Short
    appeared: Annotated[list[Name], Field(max_length=1000)] = []
    went: Annotated[list[Name], Field(max_length=1000)] = []
    regression: StrictBool


class CanaryBehaviour(_Doc):
    """A scenario whose observation (what the real parsers returned) differs."""

    test: Name
    differences: Annotated[list[Annotated[str, Field(max_length=MAX_DETAIL)]],
                           Field(min_length=1, max_length=1000)]  # fmt: skip


class CanaryProbe(_Doc):
    """Names one stack's vLLM registers or accepts that the other does not."""

    kind: Short
    where: Annotated[LineText, Field(max_length=MAX_NAME)]
    added: Annotated[list[Name], Field(max_length=10_000)] = []
    removed: Annotated[list[Name], Field(max_length=10_000)] = []


#: ``counts`` entries besides the testcase kinds, and what each counts in the document.
_COUNTED = {"recipes_changed": "recipes", "behaviour_changed": "behaviour",
            "probe_changes": "probes"}  # fmt: skip


class CanaryDoc(_Doc):
    """``rlgate canary --json``, validated."""

    schema_version: Literal[1]
    command: Literal["canary"]
    stack: Name
    branch: Short | None = None
    pinned_versions: Annotated[dict[Short, Short], Field(max_length=100)] = {}
    candidate_versions: Annotated[dict[Short, Short], Field(max_length=100)] = {}
    relaxed: Annotated[list[Short], Field(max_length=1000)] = []
    regression: StrictBool
    unchanged: Annotated[StrictInt, Field(ge=0)]
    tests: Annotated[list[CanaryTest], Field(max_length=MAX_ITEMS)] = []
    recipes: Annotated[list[CanaryRecipe], Field(max_length=MAX_ITEMS)] = []
    counts: Annotated[dict[Short, Annotated[StrictInt, Field(ge=0)]], Field(max_length=100)] = {}
    behaviour: Annotated[list[CanaryBehaviour], Field(max_length=MAX_ITEMS)] = []
    probes: Annotated[list[CanaryProbe], Field(max_length=1000)] = []
    notes: Annotated[list[Annotated[str, Field(max_length=MAX_DETAIL)]],
                     Field(max_length=1000)] = []  # fmt: skip

    def contradictions(self) -> list[str]:
        """What the document says that its own entries contradict.

        A testcase's kind is what its states make it (:func:`rlgate.core.canary_states.classify`,
        the comparison's own rule) and its ``regression`` exactly when that is newly failing; a
        recipe's ``regression`` is what its verdicts make it (:func:`recipe_regressed`); the
        document's ``regression`` exactly when it lists one.
        """
        out = []
        for i, t in enumerate(self.tests):
            where = f"tests[{i}] ({one_line(t.test)[:80]})"
            pinned = CanaryState(t.pinned) if t.pinned else None
            candidate = CanaryState(t.candidate) if t.candidate else None
            kind = classify(pinned, candidate)
            if kind is None or kind.value != t.kind:
                said = kind.value if kind else "no change"
                out.append(f"{where}: kind is {t.kind} but {t.pinned} -> {t.candidate} is {said}")
            if t.regression != (kind is Kind.NEWLY_FAILING):
                out.append(f"{where}: regression is {t.regression} for {t.pinned} -> "
                           f"{t.candidate}")  # fmt: skip
        for i, r in enumerate(self.recipes):
            if r.regression != recipe_regressed(r.pinned, r.candidate):
                out.append(f"recipes[{i}] ({one_line(r.recipe)[:80]}): regression is "
                           f"{r.regression} for {r.pinned} -> {r.candidate}")  # fmt: skip
        for key, n in self.counts.items():  # what it counts, where it says so
            if key in KINDS:
                listed_n = sum(t.kind == key for t in self.tests)
            elif key in _COUNTED:
                listed_n = len(getattr(self, _COUNTED[key]))
            else:
                out.append(f"counts has an unknown entry {one_line(key)[:80]!r}")
                continue
            if n != listed_n:
                out.append(f"counts.{key} is {n} but it lists {listed_n}")
        listed = any(t.regression for t in self.tests) or any(r.regression for r in self.recipes)
        if self.regression != listed:
            out.append(f"regression is {self.regression} but it lists {'a' if listed else 'no'} "
                       "regression")  # fmt: skip
        return out


@dataclass(frozen=True, slots=True)
class CanarySection:
    """What the section shows: the document and where it came from."""

    path: str
    doc: CanaryDoc

    def count(self, kind: str) -> int:
        """Testcases of one kind of change."""
        return sum(t.kind == kind for t in self.doc.tests)

    def as_json(self) -> dict[str, object]:
        """The ``canary`` entry of report.json."""
        d = self.doc
        return {
            "stack": d.stack,
            "branch": d.branch,
            "blocks_release": False,
            "regression": d.regression,
            "counts": {k: self.count(k) for k in KINDS}
            | {
                "unchanged": d.unchanged,
                "behaviour_changed": len(d.behaviour),
                "probe_changes": len(d.probes),
            },
            "newly_failing": [t.test for t in d.tests if t.kind == "newly-failing"],
            "recipes_regressed": [r.recipe for r in d.recipes if r.regression],
        }


def load_canary(path: str | os.PathLike[str]) -> CanarySection:
    """Read and validate ``rlgate canary --json`` (RlgateError, exit 2, on anything else)."""
    src = Path(path)
    what = "canary JSON"
    require_regular_file(src, what, MAX_BYTES)
    raw = read_json(src, what=what, hint=HINT)
    if not isinstance(raw, dict):
        raise RlgateError(f"{what} {src}: the JSON is not an object", hint=HINT)
    try:
        doc = CanaryDoc.model_validate(raw)
    except ValidationError as exc:
        found = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        raise RlgateError(one_line(f"{what} {src}: unexpected shape: {found}"), hint=HINT) from None
    wrong = doc.contradictions()
    if wrong:
        raise RlgateError(one_line(f"{what} {src}: contradicts itself: {'; '.join(wrong[:3])}"))
    return CanarySection(str(src), doc)


INFORMATIONAL = (
    "Informational: a canary does not change this report's verdict, which judges the pinned "
    "stack the release ships. It says what moving to the candidate stack would break; "
    'anything listed under "Would break on the candidate" must be fixed (or the finding '
    "documented) before that upgrade."
)


def _change(state: str | None) -> str:
    return state or "-"


def canary_report_section(report: ReleaseReport) -> Section | None:
    """The "Upgrade canary" section (None: no ``--canary``)."""
    canary = report.canary
    if canary is None:
        return None
    d = canary.doc
    blocks: list = [Paragraph((Own("Candidate stack "), Code(d.stack), Own(" against the pin"),
                               *((Own(", history branch "), Code(d.branch)) if d.branch else ()),
                               Own(".")))]  # fmt: skip
    blocks.append(Paragraph(Strong(Own(INFORMATIONAL))))
    packages = sorted(set(d.pinned_versions) | set(d.candidate_versions))
    if packages:
        rows = []
        for p in packages:
            pin, cand = d.pinned_versions.get(p, "-"), d.candidate_versions.get(p, "-")
            rows.append(Row((Code(p), pin, cand, Own("yes" if pin != cand else ""))))
        blocks.append(Table(("package", "pin", "candidate", "moved"), tuple(rows)))
    counts = [
        f"{canary.count('newly-failing')} newly failing",
        f"{canary.count('newly-passing')} newly passing",
        f"{canary.count('limitation-lifted')} strict xfail(s) lifted",
        f"{canary.count('changed')} changed otherwise",
        f"{canary.count('added') + canary.count('removed')} added or removed",
        f"{sum(r.regression for r in d.recipes)} recipe(s) regressed",
        f"{d.unchanged} testcases unchanged",
        f"{len(d.behaviour)} scenario(s) behaving differently",
        f"{len(d.probes)} vLLM surface change(s)",
    ]
    blocks.append(Paragraph(Own("Testcases: " + ", ".join(counts) + ".")))
    if d.relaxed:
        blocks.append(Paragraph((Own(f"{len(d.relaxed)} pin(s) relaxed to resolve it: "),
                                 clip_text(", ".join(d.relaxed)))))  # fmt: skip
    broken = [t for t in d.tests if t.kind == "newly-failing"]
    recipes = [r for r in d.recipes if r.regression]
    subsections = []
    if broken or recipes:
        items = [
            Item(
                (
                    Strong(Own("recipe")),
                    Own(" "),
                    Code(r.recipe),
                    Own(": recipe check "),
                    f"{r.pinned} -> {r.candidate}",
                    *(
                        (Own("; new findings: "), clip_text(", ".join(r.appeared)))
                        if r.appeared
                        else ()
                    ),
                )
            )
            for r in recipes
        ]
        items += [
            Item(
                (
                    Code(t.test),
                    Own(f": {_change(t.pinned)} -> {_change(t.candidate)}"),
                    *((Own(": "), clip_text(one_line(t.detail))) if t.detail else ()),
                )
            )
            for t in broken[:SHOWN]
        ]
        if len(broken) > SHOWN:
            items.append(Item(Own(f"... and {len(broken) - SHOWN} more (the canary JSON)")))
        subsections.append(Section(Own("Would break on the candidate"), (Bullets(tuple(items)),)))
    others = [t for t in d.tests if t.kind != "newly-failing"]
    other_recipes = [r for r in d.recipes if not r.regression]
    if others or other_recipes:
        rows = [
            Row(
                (
                    Own(t.kind),
                    Code(t.test),
                    Own(f"{_change(t.pinned)} -> {_change(t.candidate)}"),
                    clip_text(one_line(t.detail)),
                )
            )
            for t in others[:SHOWN]
        ]
        rows += [
            Row(
                (
                    Own("recipe-changed"),
                    Code(r.recipe),
                    f"{r.pinned} -> {r.candidate}",
                    clip_text(
                        "; ".join([*(f"+{f}" for f in r.appeared), *(f"-{f}" for f in r.went)])
                    ),
                )
            )
            for r in other_recipes[:SHOWN]
        ]
        subsections.append(
            Section(
                Own("Other changes"),
                (Table(("change", "what", "pin -> candidate", "detail"), tuple(rows)),),
            )
        )
    if d.behaviour:
        rows = [
            Row((Code(b.test), clip_text(one_line("; ".join(b.differences[:SHOWN_DIFFS])))))
            for b in d.behaviour[:SHOWN]
        ]
        if len(d.behaviour) > SHOWN:
            rows.append(Row((Own(f"... and {len(d.behaviour) - SHOWN} more"), Own(""))))
        subsections.append(
            Section(
                Own("Behaviour changes (same verdict, other parser output)"),
                (Table(("scenario", "pin -> candidate"), tuple(rows)),),
            )
        )
    if d.probes:
        rows = [
            Row(
                (
                    Own(p.kind),
                    p.where,
                    clip_text(", ".join(p.added)) if p.added else Own("-"),
                    clip_text(", ".join(p.removed)) if p.removed else Own("-"),
                )
            )
            for p in d.probes
        ]
        subsections.append(
            Section(
                Own("vLLM surface changes (registries, engine arguments, serving keys)"),
                (Table(("kind", "where", "added", "removed"), tuple(rows)),),
            )
        )
    if d.notes:
        blocks.append(Paragraph((Own("Notes: "), clip_text(one_line("; ".join(d.notes))))))
    if not d.tests and not d.recipes:
        blocks.append(Paragraph(Own("No testcase and no recipe verdict changed.")))
    return Section(
        Own("Upgrade canary"), tuple(blocks), anchor=CANARY_ANCHOR, subsections=tuple(subsections)
    )
