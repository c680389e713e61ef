"""Properties of the verdict under quarantine, over generated input sets (hypothesis).

The input sets are test_verdict_properties.py's (JUnit written by rlgate's own writer, run
JSON, the real SWE comparison), every recorded testcase of recipe :data:`RECIPE` (its
``rlgate.recipe``, as check-run writes it), judged by the real report builder with the
quarantine entries given (``rlgate report --db`` reads the active ones from the store;
test_quarantine.py covers that path). The properties:

* an entry for another recipe, a check not in the run, or other hardware never changes
  the verdict, its text or its blockers;
* a quarantined failing check never yields the plain text "GO" (a GO says "GO with N
  quarantined checks");
* an expired or removed entry restores the verdict without it (a failure: NO-GO);
* removing a tier's evaluated evidence never yields GO, quarantined checks or not;
* the exit code always agrees with the report's JSON.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import event, given, settings
from hypothesis import strategies as st

from rlgate.core.io import write_json_atomic
from rlgate.core.junit import JunitCase, JunitSuite, write_junit
from rlgate.core.results import RELEASE_TIERS, Outcome, Tier
from rlgate.history.quarantine import Quarantine, QuarantineState, state_of
from rlgate.report.build import build_report
from rlgate.report.render import report_payload

from .test_verdict_properties import (
    ANY_SPEC,
    BAD_SPEC,
    CLEAN_SPEC,
    DECOYS,
    EXIT,
    RUN_DOCS,
    TIERS,
    InputSet,
    Spec,
    _evaluated,
    input_sets,
    scratch,
    swe_inputs,
)
from .test_verdict_properties import SETTINGS as _SETTINGS

RECIPE = "grpo-q"
#: Fewer examples than test_verdict_properties (each builds several reports).
SETTINGS = settings(_SETTINGS, max_examples=12)
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def tagged(case: JunitCase) -> JunitCase:
    """The testcase as check-run writes it for :data:`RECIPE` (plain pytest ones untouched)."""
    if not case.recorded:
        return case
    return dataclasses.replace(case, properties=(*case.properties, ("rlgate.recipe", RECIPE)))


def judge(root: Path, inputs: InputSet, entries=()) -> tuple[str, str, tuple]:
    """The verdict, its text and its blockers; checks that the exit code agrees with JSON."""
    swe_json, criteria = swe_inputs()
    out = Path(root) / f"set-{len(list(Path(root).iterdir()))}"
    out.mkdir()
    junit = []
    named = [
        (f"junit-{i}", JunitSuite.of(f"generated-{i}", [tagged(s.case()) for s in specs]))
        for i, specs in enumerate(inputs.files)
    ]
    for stem, suite in [*named, *([("swe", criteria)] if inputs.criteria else [])]:
        if suite.cases:
            path = out / f"{stem}.xml"
            path.write_text(write_junit([suite]), encoding="utf-8")
            junit.append(path)
    runs = [write_json_atomic(out / f"run-{k}.json", RUN_DOCS[k].to_json()) for k in inputs.runs]
    report = build_report(
        junit,
        runs=runs,
        swe=swe_json if inputs.swe else None,
        draw_plots=False,
        quarantines=list(entries),
    )
    doc = report_payload(report)
    assert EXIT[doc["verdict"]] == doc["exit_code"] == int(report.verdict.exit_code)
    assert doc["verdict_text"] == report.verdict_text
    blockers = tuple(sorted((b["kind"], b["forces"], b["title"]) for b in doc["blockers"]))
    return doc["verdict"], doc["verdict_text"], blockers


def entry(check: str, *, recipe: str = RECIPE, hardware: str | None = None, **kw) -> Quarantine:
    base = {"until": NOW + timedelta(days=7), "runs": None}
    base |= kw
    return Quarantine(
        id=kw.pop("id", 1), recipe=recipe, check=check, hardware=hardware,
        reason="flaky on 2n8g (NVBUG 123)", owner="alice", added_at=NOW - timedelta(days=1),
        added_by="ci", until=base["until"], runs=base["runs"],
        removed_at=base.get("removed_at"), removed_by=base.get("removed_by"),
    )  # fmt: skip


def active(q: Quarantine) -> QuarantineState:
    state = state_of(q, NOW, 0)
    assert state.active
    return state


#: A failing gate check of the recipe that records its verdict (so it names the recipe).
FAILING = st.builds(
    lambda tier, shown, infra: Spec(tier, shown, Outcome(shown), infra, name="quarantine_me"),
    tier=TIERS,
    shown=st.sampled_from(["fail", "error"]),
    infra=st.booleans(),
)


def with_spec(inputs: InputSet, spec: Spec, where: int) -> InputSet:
    files = [list(f) for f in inputs.files]
    files[where % len(files)].append(spec)
    return dataclasses.replace(inputs, files=tuple(map(tuple, files)))


@SETTINGS
@given(
    inputs=input_sets(),
    bad=BAD_SPEC | FAILING,
    where=st.integers(0, 3),
    other=st.sampled_from(["recipe", "check", "hardware"]),
)
def test_an_entry_for_another_recipe_check_or_hardware_never_changes_the_verdict(
    inputs, bad, where, other
):
    inputs = with_spec(inputs, dataclasses.replace(bad, name="quarantine_me"), where)
    if other == "recipe":
        q = entry("quarantine_me", recipe="another-recipe")
    elif other == "check":
        q = entry("no_such_check")
    else:  # the testcases state no hardware: an entry for one hardware holds none of them
        q = entry("quarantine_me", hardware="8n8g")
    with scratch() as root:
        before = judge(root, inputs)
        after = judge(root, inputs, [active(q)])
    event(f"{other}: {before[0]}")
    assert after == before


@SETTINGS
@given(inputs=input_sets(), bad=BAD_SPEC | FAILING, where=st.integers(0, 3))
def test_a_quarantined_failing_check_never_reads_plain_go(inputs, bad, where):
    inputs = with_spec(inputs, dataclasses.replace(bad, name="quarantine_me"), where)
    with scratch() as root:
        before = judge(root, inputs)
        verdict, text, blockers = judge(root, inputs, [active(entry("quarantine_me"))])
    event(f"{before[0]} -> {text}")
    assert before[1] != "GO" and text != "GO", (bad, before, text)
    if verdict == "GO":
        assert text.startswith("GO with ") and text.split()[2].isdigit()
        assert any(kind == "quarantined" for kind, _, _ in blockers)


@SETTINGS
@given(inputs=input_sets(), bad=FAILING, where=st.integers(0, 3))
def test_a_quarantined_failure_is_waived_only_while_the_entry_is_active(inputs, bad, where):
    inputs = with_spec(inputs, dataclasses.replace(bad, name="quarantine_me"), where)
    expired = [
        state_of(entry("quarantine_me", until=NOW - timedelta(seconds=1)), NOW),
        state_of(entry("quarantine_me", until=None, runs=3), NOW, runs_seen=3),
        state_of(
            entry("quarantine_me", removed_at=NOW - timedelta(hours=1), removed_by="bob"), NOW
        ),
    ]
    with scratch() as root:
        without = judge(root, inputs)
        for state in expired:
            assert not state.active
            assert judge(root, inputs, [state]) == without  # expiry restores the verdict
        quarantined = judge(root, inputs, [active(entry("quarantine_me"))])
    if bad.hides_or_is_a_failure:
        assert without[0] == "NO-GO"
    event(f"{without[0]} -> {quarantined[1]}")
    no_go = [title for _, forces, title in without[2] if forces == "NO-GO"]
    if no_go and all(title.endswith(": quarantine_me") for title in no_go):
        # the only NO-GO was the quarantined failure: no longer NO-GO, and said so
        assert quarantined[0] != "NO-GO" and "quarantined" in quarantined[1]


@SETTINGS
@given(
    inputs=input_sets(CLEAN_SPEC | ANY_SPEC),
    tier=st.sampled_from(RELEASE_TIERS),
    decoys=st.lists(DECOYS, min_size=0, max_size=3),
    failing=st.booleans(),
)
def test_removing_a_tiers_evaluated_evidence_never_yields_go(inputs, tier, decoys, failing):
    """Every unquarantined PASS/FAIL testcase of the tier goes; a quarantined check of the
    tier (failing or passing) stays, with its entry active: it is no evidence either."""
    kept = [tuple(s for s in f if not (s.tier is tier and _evaluated(s))) for f in inputs.files]
    held = Spec(tier, "fail" if failing else "pass", Outcome.FAIL if failing else Outcome.PASS,
                name="quarantine_me")  # fmt: skip
    decoys = [Spec(tier, sh, rec, infra, name=f"decoy_{i}") for i, (sh, rec, infra) in
              enumerate(decoys)]  # fmt: skip
    files = (*kept, (*decoys, held))
    fewer = dataclasses.replace(inputs, files=files)
    if tier is Tier.SWE_GATE:
        fewer = dataclasses.replace(fewer, swe=False, criteria=False)
    with scratch() as root:
        verdict, text, _ = judge(root, fewer, [active(entry("quarantine_me"))])
    event(f"{tier.value}: {text}")
    assert verdict != "GO", text
