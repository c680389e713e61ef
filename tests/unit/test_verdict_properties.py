"""Metamorphic properties of the release verdict, over generated input sets, through the real
``rlgate report`` (in-process ``rlgate.cli.app.main``).

Each input set is JUnit files written by rlgate's own writer (``JunitCase.of(result)``,
``write_junit``; a contradictory testcase is that case with its shown element changed, as a
hand-edited file holds it), check-run JSON written from ``RunDocument``, and the real SWE
comparison of report_inputs.py (``rlgate.swe.compare`` on the 500 Verified ids: its JSON and
its criteria suite). A base set of passing gate checks of every release tier is GO; hypothesis
spreads it over files and adds random testcases. The properties:

* adding a failing, erroring or contradictory gate check (to any file, as a new file, or as
  a run JSON reporting a failure) never gives GO or exit 0, never turns NO-GO into anything
  else, and a failure (shown, or hidden under a pass/skip) is always NO-GO;
* removing an input that holds only passing evidence never improves the verdict, and
  removing a tier's evaluated evidence never yields GO;
* the order of ``--junit`` files, and ``--junit A --junit B`` vs ``--junit A B``, do not change
  the verdict or its blockers;
* every run's exit code is the verdict report.json states (0 GO, 1 NO-GO, 3 INCOMPLETE).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rlgate.checks.document import RunDocument
from rlgate.cli.app import main
from rlgate.core.io import write_json_atomic
from rlgate.core.junit import INFORMATIONAL_PROPERTY, JunitCase, JunitSuite, read_junit, write_junit
from rlgate.core.results import INFRA_CAUSE, RELEASE_TIERS, Outcome, Result, Tier

from .helpers import report_inputs as ri

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
EXIT = {"GO": 0, "NO-GO": 1, "INCOMPLETE": 3}
RANK = {"GO": 0, "INCOMPLETE": 1, "NO-GO": 2}
CLASSNAME = {
    Tier.FUNCTIONAL: "tests.functional.test_generated",
    Tier.CONVERGENCE: "rlgate.convergence.generated",
    Tier.PERF: "rlgate.perf.generated",
    Tier.SWE_GATE: "rlgate.swe_gate",
    Tier.UNIT: "tests.unit.test_generated",
}
SHOWN = {"pass": Outcome.PASS, "fail": Outcome.FAIL, "error": Outcome.ERROR}
SHOWN |= {"skip": Outcome.SKIP, "xfail": Outcome.SKIP}


# --- testcases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One generated testcase: its tier, what its element shows, what it records."""

    tier: Tier
    shown: str  # pass / fail / error / skip / xfail
    recorded: Outcome | None  # None: a plain pytest testcase (no rlgate.verdict)
    infra: bool = False  # its Result names an infrastructure cause (an ERROR's evidence)
    informational: bool = False
    name: str = "added_check"

    @property
    def consistent(self) -> bool:
        return self.recorded is None or self.recorded is SHOWN[self.shown]

    @property
    def clean(self) -> bool:
        """Evidence that blocks nothing: informational, or a consistent pass or skip."""
        return self.informational or (self.consistent and self.shown in ("pass", "skip", "xfail"))

    @property
    def hides_or_is_a_failure(self) -> bool:
        """A FAIL (shown or recorded), or an ERROR of the code (shown or recorded)."""
        if self.informational:
            return False
        sides = {SHOWN[self.shown], *([self.recorded] if self.recorded else [])}
        code_error = Outcome.ERROR in sides and self.tier is not Tier.SWE_GATE and not self.infra
        return Outcome.FAIL in sides or code_error

    def case(self) -> JunitCase:
        """The testcase rlgate's writer writes for it (its element changed when it disagrees)."""
        shown = SHOWN[self.shown]
        outcome = self.recorded or shown
        evidence = (
            {INFRA_CAUSE: {"reason": "stalled", "detail": "no new step"}} if self.infra else {}
        )
        result = Result(
            name=self.name,
            tier=self.tier,
            outcome=outcome,
            message=f"generated {self.shown}",
            evidence=evidence,
            informational="benchmark" if self.informational else "",
        )
        case = JunitCase.of(result, classname=CLASSNAME[self.tier])
        if self.recorded is None:  # what pytest writes for a test that recorded nothing
            # ... but the plugin's informational marker, which it records on every such test
            marker = ((INFORMATIONAL_PROPERTY, "benchmark"),) if self.informational else ()
            case = dataclasses.replace(case, recorded=False, properties=marker)
        kind = "pytest.xfail" if self.shown == "xfail" else None
        message = "" if shown is Outcome.PASS else f"generated {self.shown}"
        return dataclasses.replace(case, shown=shown, kind=kind, message=message)


TIERS = st.sampled_from([*RELEASE_TIERS, Tier.UNIT])
ANY_SPEC = st.builds(
    Spec,
    tier=TIERS,
    shown=st.sampled_from(["pass", "pass", "pass", "skip", "xfail", "fail", "error"]),
    recorded=st.sampled_from([None, None, Outcome.PASS, Outcome.PASS, *Outcome]),
    infra=st.booleans(),
    informational=st.sampled_from([False, False, False, True]),
)
CLEAN_SPEC = st.one_of(
    # a consistent pass, skip or expected failure (recorded or plain), or an informational one
    st.sampled_from(
        [
            ("pass", None),
            ("pass", Outcome.PASS),
            ("skip", None),
            ("skip", Outcome.SKIP),
            ("xfail", None),
            ("xfail", Outcome.SKIP),
        ]
    ).flatmap(
        lambda pair: st.builds(Spec, tier=TIERS, shown=st.just(pair[0]), recorded=st.just(pair[1]))
    ),
    st.builds(
        Spec,
        tier=TIERS,
        shown=st.sampled_from(list(SHOWN)),
        recorded=st.sampled_from([None, *Outcome]),
        informational=st.just(True),
    ),
)


BAD_SPEC = st.one_of(
    # a failure or an error, whatever it records
    st.builds(
        Spec,
        tier=TIERS,
        shown=st.sampled_from(["fail", "error"]),
        recorded=st.sampled_from([None, *Outcome]),
        infra=st.booleans(),
    ),
    # a failure or an error hidden under a pass, a skip or an expected failure
    st.builds(
        Spec,
        tier=TIERS,
        shown=st.sampled_from(["pass", "skip", "xfail"]),
        recorded=st.sampled_from([Outcome.FAIL, Outcome.ERROR]),
        infra=st.booleans(),
    ),
    # no side a failure, but the two disagree
    st.sampled_from(
        [("pass", Outcome.SKIP), ("skip", Outcome.PASS), ("xfail", Outcome.PASS)]
    ).flatmap(
        lambda pair: st.builds(Spec, tier=TIERS, shown=st.just(pair[0]), recorded=st.just(pair[1]))
    ),
)


# --- the base set (GO) and the real SWE comparison --------------------------------------------


@functools.cache
def swe_inputs() -> tuple[Path, JunitSuite]:
    """The real improved comparison on full Verified: its JSON, and its criteria suite."""
    swe_json, swe_xml = ri.swe("improved")
    criteria = read_junit(swe_xml)[0]
    assert criteria.name == "rlgate.swe_gate" and all(c.result.passed for c in criteria.cases)
    return swe_json, criteria


BASE = tuple(
    Spec(tier, "pass", Outcome.PASS, name=name)
    for tier, name in (
        (Tier.FUNCTIONAL, "test_parser_round_trip"),
        (Tier.CONVERGENCE, "completion"),
        (Tier.CONVERGENCE, "reward_trend"),
        (Tier.PERF, "perf:timing/train/total_step_time"),
    )
)


def run_doc(*checks: Result) -> RunDocument:
    return RunDocument(
        recipe="generated",
        run="/nonexistent/generated-run",
        passed=all(c.passed for c in checks),
        checks=checks,
    )


#: The run JSON documents an input set may name: the base run's, and one reporting a FAIL.
RUN_DOCS = {
    "base": run_doc(*(s.case().result for s in BASE if s.tier in (Tier.CONVERGENCE, Tier.PERF))),
    "failing": run_doc(
        Result(name="added_check", tier=Tier.CONVERGENCE, outcome=Outcome.FAIL, message="x")
    ),
}


@dataclass(frozen=True)
class InputSet:
    """JUnit files (each a list of testcases), run JSON documents, and whether the SWE JSON
    and the SWE criteria JUnit (a file of its own, as ``swe compare --junit`` writes) are given.
    """

    files: tuple[tuple[Spec, ...], ...]
    runs: tuple[str, ...] = ("base",)  # keys of RUN_DOCS
    swe: bool = True
    criteria: bool = True


@st.composite
def input_sets(draw: st.DrawFn, extras: st.SearchStrategy[Spec] = ANY_SPEC) -> InputSet:
    """The base GO set spread over 1-3 files, plus up to 4 generated testcases."""
    n_files = draw(st.integers(1, 3))
    files: list[list[Spec]] = [[] for _ in range(n_files)]
    for spec in BASE:
        files[draw(st.integers(0, n_files - 1))].append(spec)
    specs = draw(st.lists(extras, max_size=4))
    for i, spec in enumerate(specs):
        files[draw(st.integers(0, n_files - 1))].append(dataclasses.replace(spec, name=f"gen_{i}"))
    return InputSet(tuple(tuple(f) for f in files))


# --- running the real report ------------------------------------------------------------------


@dataclass(frozen=True)
class Outcomes:
    verdict: str
    code: int
    blockers: tuple[tuple[str, str], ...]


def write_inputs(root: Path, inputs: InputSet) -> tuple[list[Path], list[Path], Path | None]:
    swe_json, criteria = swe_inputs()
    junit = []
    named = [
        (f"junit-{i}", JunitSuite.of(f"generated-{i}", [s.case() for s in specs]))
        for i, specs in enumerate(inputs.files)
    ]
    for stem, suite in [*named, *([("swe", criteria)] if inputs.criteria else [])]:
        if suite.cases:
            path = root / f"{stem}.xml"
            path.write_text(write_junit([suite]), encoding="utf-8")
            junit.append(path)
    runs = [write_json_atomic(root / f"run-{k}.json", RUN_DOCS[k].to_json()) for k in inputs.runs]
    return junit, runs, swe_json if inputs.swe else None


def report(
    root: Path, junit: Sequence[Sequence[Path]], runs: Sequence[Path], swe: Path | None
) -> Outcomes:
    """``rlgate report``, each group of ``junit`` after its own ``--junit``; checks P4."""
    out = Path(tempfile.mkdtemp(dir=root, prefix="out-"))
    args = ["report", *(a for group in junit for a in ("--junit", *map(str, group)))]
    args += ["--run", *map(str, runs)] if runs else []
    args += ["--swe", str(swe)] if swe else []
    args += ["--no-plots", "--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    assert code in (0, 1, 3), f"exit {code}: {stderr.getvalue()}"
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    # the exit code agrees with the verdict the report's own JSON states
    assert EXIT[doc["verdict"]] == code == doc["exit_code"], (doc["verdict"], code)
    assert f"verdict: {doc['verdict']}" in stdout.getvalue()
    blockers = tuple(sorted((b["forces"], b["title"]) for b in doc["blockers"]))
    return Outcomes(doc["verdict"], code, blockers)


def run_set(root: Path, inputs: InputSet) -> Outcomes:
    junit, runs, swe = write_inputs(root, inputs)
    return report(root, [junit], runs, swe)


@contextlib.contextmanager
def scratch():
    with tempfile.TemporaryDirectory(prefix="rlgate-verdict-props-") as tmp:
        yield Path(tmp)


def test_the_base_set_is_go():
    with scratch() as root:
        assert run_set(root, InputSet((BASE,))) == Outcomes("GO", 0, ())


# --- adding a failing, erroring or contradictory gate check -----------------------------------


@SETTINGS
@given(inputs=input_sets(), bad=BAD_SPEC, where=st.integers(0, 3))
def test_adding_a_bad_gate_check_never_gives_go(inputs, bad, where):
    files = [list(f) for f in inputs.files]
    if where < len(files):
        files[where].append(bad)
    else:  # a file of its own
        files.append([bad])
    worse = dataclasses.replace(inputs, files=tuple(map(tuple, files)))
    with scratch() as root:
        before = run_set(root, inputs)
        after = run_set(root, worse)
    event(f"{before.verdict} -> {after.verdict}")
    assert after.verdict != "GO" and after.code != 0, (bad, after)
    if before.verdict == "NO-GO" or bad.hides_or_is_a_failure:
        assert after.verdict == "NO-GO", (bad, before, after)


@SETTINGS
@given(inputs=input_sets())
def test_a_run_json_reporting_a_failure_no_junit_shows_is_no_go(inputs):
    worse = dataclasses.replace(inputs, runs=(*inputs.runs, "failing"))
    with scratch() as root:
        assert run_set(root, worse).verdict == "NO-GO"


# --- removing inputs --------------------------------------------------------------------------


@SETTINGS
@given(
    inputs=input_sets(CLEAN_SPEC | ANY_SPEC),
    removed=st.sampled_from(["junit", "criteria", "run", "swe"]),
    index=st.integers(0, 3),
)
def test_removing_passing_evidence_never_improves_the_verdict(inputs, removed, index):
    """An input holding only passing (or skipped, or informational) evidence is removed."""
    clean = [i for i, f in enumerate(inputs.files) if all(s.clean for s in f)]
    if removed == "junit" and clean:
        files = list(inputs.files)
        files.pop(clean[index % len(clean)])
        fewer = dataclasses.replace(inputs, files=tuple(files))
    elif removed == "criteria":
        fewer = dataclasses.replace(inputs, criteria=False)
    elif removed == "swe":
        fewer = dataclasses.replace(inputs, swe=False)
    else:
        fewer = dataclasses.replace(inputs, runs=())
    with scratch() as root:
        full = run_set(root, inputs)
        less = run_set(root, fewer)
    event(f"{full.verdict} -> {less.verdict}")
    assert RANK[less.verdict] >= RANK[full.verdict], (removed, full, less)


def _evaluated(spec: Spec) -> bool:
    return not spec.informational and spec.consistent and spec.shown in ("pass", "fail")


#: Testcases that evaluated nothing and block nothing by their element: a skip, an expected
#: failure, ``skip`` recorded on a passed testcase, an infra error (shown, or recorded).
DECOYS = st.sampled_from(
    [
        ("skip", None, False),
        ("skip", Outcome.SKIP, False),
        ("xfail", None, False),
        ("pass", Outcome.SKIP, False),
        ("skip", Outcome.PASS, False),
        ("error", Outcome.ERROR, True),
        ("pass", Outcome.ERROR, True),
    ]
)


@SETTINGS
@given(
    inputs=input_sets(CLEAN_SPEC),
    tier=st.sampled_from(RELEASE_TIERS),
    decoys=st.lists(DECOYS, min_size=1, max_size=3),
)
def test_removing_a_tiers_evaluated_evidence_never_yields_go(inputs, tier, decoys):
    """Every PASS/FAIL testcase of the tier goes; what did not evaluate stays (``decoys``:
    skips, errors, contradictions of that tier, e.g. ``skip`` recorded on a passed case)."""
    decoys = [
        Spec(tier, shown, rec, infra, name=f"decoy_{i}")
        for i, (shown, rec, infra) in enumerate(decoys)
    ]
    kept = [tuple(s for s in f if not (s.tier is tier and _evaluated(s))) for f in inputs.files]
    files = (*kept, tuple(decoys))
    if tier is Tier.SWE_GATE:
        fewer = dataclasses.replace(inputs, files=files, swe=False, criteria=False)
    else:
        fewer = dataclasses.replace(inputs, files=files)
    with scratch() as root:
        assert run_set(root, fewer).verdict != "GO"


# --- order and repetition ---------------------------------------------------------------------


@SETTINGS
@given(inputs=input_sets(), data=st.data())
def test_order_and_repetition_of_junit_files_do_not_change_the_verdict(inputs, data):
    with scratch() as root:
        junit, runs, swe = write_inputs(root, inputs)
        together = report(root, [junit], runs, swe)
        event(together.verdict)
        shuffled = data.draw(st.permutations(junit))
        assert report(root, [shuffled], runs, swe) == together
        assert report(root, [[p] for p in junit], runs, swe) == together  # --junit A --junit B
        cut = data.draw(st.integers(0, len(junit)))
        groups = [g for g in (shuffled[:cut], shuffled[cut:]) if g]
        assert report(root, groups, runs, swe) == together  # --junit A B --junit C
