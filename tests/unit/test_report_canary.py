"""``rlgate report --canary CANARY.json``: the "Upgrade canary" section, informational.

Inputs are real: the comparison of the real functional-tier JUnit of vLLM 0.25.1 and 0.26.0
(tests/unit/data/canary/), and one of JUnit written by real pytest runs where a testcase
breaks, one heals and a strict xfail is lifted, each turned into the JSON ``rlgate canary
--json`` writes by the same function. The canary JSON is untrusted: bad shapes are exit 2
with one line, hostile names stay literal text.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgate.canary.compare import (
    Case,
    Comparison,
    Kind,
    State,
    compare,
    compare_recipes,
    compare_tests,
)
from rlgate.canary.record import document
from rlgate.cli.app import main
from rlgate.core.errors import ExitCode
from rlgate.core.io import write_json_atomic
from rlgate.report.canary_section import CanaryDoc

from .test_canary_compare import _junit
from .test_report_injection import HOSTILE, _own_links_and_images_only, _parse, _rendered

DATA = Path(__file__).parent / "data" / "canary"
PIN = DATA / "functional-vllm-0.25.1.xml"
CAND = DATA / "functional-vllm-0.26.0.xml"
RECIPES = (
    {"reports": [{"name": "target", "status": "compatible", "findings": []}]},
    {"reports": [{"name": "target", "status": "incompatible", "findings": [
        {"severity": "error", "code": "parser-missing", "key": "policy.generation"}]}]},
)  # fmt: skip


def _doc(pinned, candidate, recipes=(None, None)) -> dict:
    return document(
        compare([pinned], [candidate], *recipes), label="vllm==0.26.0",
        relaxed=["tokenspeed-mla==0.1.2"], environment="/cache/canary/k", pinned_junit=[PIN],
        candidate_junit=[CAND], packages=["vllm"],
    )  # fmt: skip


def _write(path: Path, doc: dict) -> Path:
    write_json_atomic(path, doc)
    return path


@pytest.fixture(scope="module")
def changed(tmp_path_factory) -> dict:
    """A canary document with every kind of change and a recipe regression."""
    tmp = tmp_path_factory.mktemp("canary")
    doc = _doc(_junit(tmp, "0"), _junit(tmp, "1"), RECIPES)
    assert doc["regression"] is True
    return doc


def _report(tmp_path: Path, name: str, *extra: str, capsys=None) -> tuple[int, Path]:
    out = tmp_path / name
    code = main(["report", "--junit", str(PIN), "--out", str(out), "--no-plots", *extra])
    return code, out


def test_a_regressing_canary_is_shown_first_and_never_changes_the_verdict(
    tmp_path: Path, changed: dict, capsys
) -> None:
    canary = _write(tmp_path / "canary.json", changed)
    code_without, plain = _report(tmp_path, "plain")
    code_with, out = _report(tmp_path, "with", "--canary", str(canary))
    assert code_with == code_without  # informational: the pinned stack's verdict stands
    before = json.loads((plain / "report.json").read_text())
    after = json.loads((out / "report.json").read_text())
    assert after["verdict"] == before["verdict"] and after["blockers"] == before["blockers"]
    assert "canary" not in before
    assert after["canary"]["blocks_release"] is False and after["canary"]["regression"] is True
    assert after["canary"]["counts"] == {
        "newly-failing": 1, "newly-passing": 1, "limitation-lifted": 1, "changed": 1,
        "added": 0, "removed": 0, "unchanged": 1, "behaviour_changed": 0, "probe_changes": 0,
    }  # fmt: skip
    assert [t.rsplit("::", 1)[1] for t in after["canary"]["newly_failing"]] == ["test_breaks"]
    assert after["canary"]["recipes_regressed"] == ["target"]
    md = (out / "report.md").read_text()
    section = md[md.index('## <a id="canary"></a>Upgrade canary') :]
    section = section[: section.index("\n## ", 5)]
    assert "`vllm==0.26.0`" in section and "`canary/vllm-0.26.0`" in section
    assert "does not change this report's verdict" in section
    assert "1 newly failing, 1 newly passing, 1 strict xfail(s) lifted" in section
    assert "| `vllm` | 0.25.1 | 0.26.0 | yes |" in section
    assert "| `torch` | 2.11.0 | 2.11.0 |  |" in section
    assert "Candidate stack `vllm==0.26.0` against the pin" in section
    breaks = section[section.index("### Would break on the candidate") :]
    breaks = breaks[: breaks.index("### Other changes")]
    assert "- **recipe** `target`: recipe check compatible -\\> incompatible" in breaks
    assert "test_breaks" in breaks and "tool_calls == \\[\\] on the candidate" in breaks
    assert "test_heals" not in breaks
    other = section[section.index("### Other changes") :]
    assert "limitation-lifted" in other and "F-7: qwen3_coder drops a call" in other
    html = (out / "report.html").read_text()
    assert "Upgrade canary" in html and 'id="canary"' in html
    assert str(canary) in {i["path"] for i in after["inputs"]}


def test_the_real_two_stack_canary_says_nothing_changed(tmp_path: Path) -> None:
    canary = _write(tmp_path / "canary.json", _doc(PIN, CAND))
    _, out = _report(tmp_path, "out", "--canary", str(canary))
    md = (out / "report.md").read_text()
    assert "No testcase and no recipe verdict changed." in md
    assert "0 newly failing" in md and "208 testcases unchanged" in md
    assert json.loads((out / "report.json").read_text())["canary"]["regression"] is False


def test_hostile_names_in_a_canary_stay_literal_text(tmp_path: Path, changed: dict) -> None:
    doc = copy.deepcopy(changed)
    for i, test in enumerate(doc["tests"]):
        test["test"] = HOSTILE[i % len(HOSTILE)].replace("\n", " ") + f" {i}"
        test["detail"] = HOSTILE[(i + 3) % len(HOSTILE)]
    doc["recipes"][0]["recipe"] = "<script>alert(2)</script>"
    doc["recipes"][0]["appeared"] = ["[click me](javascript:alert(1))"]
    doc["stack"] = "![pixel](https://evil.example/p.png)"
    canary = _write(tmp_path / "canary.json", doc)
    _, out = _report(tmp_path, "out", "--canary", str(canary))
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    rendered = _rendered(md)
    _own_links_and_images_only(_parse(rendered).tags, "plots/")
    _own_links_and_images_only(_parse(html).tags, "data:image/png")
    assert "<script" not in rendered.lower() and "<script" not in html.lower()
    assert "javascript:alert(1)" in rendered  # visible as text
    assert "evil.example/p.png" in rendered


def _bad(changed: dict):
    def unknown_kind(d):
        d["tests"][0]["kind"] = "newly-broken"

    def wrong_type(d):
        d["unchanged"] = "1"

    def huge(d):
        d["tests"][0]["test"] = "x" * 5000

    def control(d):
        d["tests"][0]["test"] = "name\x1b[2Kerased"

    def contradiction(d):
        d["regression"] = False

    def regression_flag(d):
        d["tests"][0]["regression"] = not d["tests"][0]["regression"]

    def other_command(d):
        d["command"] = "triage"

    def unknown_state(d):
        d["tests"][0]["candidate"] = "passed"

    return [unknown_kind, wrong_type, huge, control, contradiction, regression_flag,
            other_command, unknown_state]  # fmt: skip


@pytest.mark.parametrize("case", range(8))
def test_a_bad_canary_json_exits_2_with_one_line(
    tmp_path: Path, changed: dict, case: int, capsys
) -> None:
    doc = copy.deepcopy(changed)
    _bad(changed)[case](doc)
    canary = _write(tmp_path / "canary.json", doc)
    capsys.readouterr()
    code, out = _report(tmp_path, "out", "--canary", str(canary))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert err.count("rlgate: error:") == 1 and "canary JSON" in err
    assert len([line for line in err.splitlines() if line.startswith("rlgate: error:")]) == 1
    assert "Traceback" not in err and not re.search("[\x00-\x08\x1b]", err)
    assert not out.exists()  # nothing written for an invalid input


@pytest.mark.parametrize("text", ["[]", "not json", '"a string"'])
def test_a_canary_file_that_is_no_object_exits_2(tmp_path: Path, text: str, capsys) -> None:
    canary = tmp_path / "canary.json"
    canary.write_text(text)
    code, out = _report(tmp_path, "out", "--canary", str(canary))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and err.count("rlgate: error:") == 1 and "canary JSON" in err
    assert not out.exists()


def test_a_forged_canary_that_hides_a_regression_exits_2(
    tmp_path: Path, changed: dict, capsys
) -> None:
    """pass -> fail relabelled ``changed``, compatible -> incompatible not a regression."""
    forged = copy.deepcopy(changed)
    for t in forged["tests"]:
        if t["kind"] == "newly-failing":
            t["kind"], t["regression"] = "changed", False
    for r in forged["recipes"]:
        r["regression"] = False
    forged["regression"] = False
    canary = _write(tmp_path / "canary.json", forged)
    capsys.readouterr()
    code, out = _report(tmp_path, "out", "--canary", str(canary))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert err.count("rlgate: error:") == 1 and "contradicts itself" in err
    assert "kind is changed but pass -> fail is newly-failing" in err
    assert not out.exists()


_STATES = list(State)
_VERDICTS = ["compatible", "incompatible", "incomplete", "invalid", "error", "absent"]


@st.composite
def _real_doc(draw) -> dict:
    """A document of the real comparison of random state pairs and recipe verdicts."""
    n = draw(st.integers(1, 12))
    pinned, candidate = {}, {}
    for i in range(n):
        before = draw(st.sampled_from([None, *_STATES]))
        after = draw(st.sampled_from([None, *_STATES]))
        if before is not None:
            pinned[f"t::c{i}"] = Case(before, "p")
        if after is not None:
            candidate[f"t::c{i}"] = Case(after, "c")
    tests, unchanged = compare_tests(pinned, candidate)

    def checks(side: str) -> dict:
        return {"reports": [{"name": f"r{i}", "status": draw(st.sampled_from(_VERDICTS),
                                                            label=f"{side}{i}")}
                            for i in range(draw(st.integers(0, 3), label=side))]}  # fmt: skip

    recipes = compare_recipes(checks("pin"), checks("cand"))
    comparison = Comparison(tuple(tests), tuple(recipes), unchanged)
    return {"schema_version": 1, "command": "canary", "stack": "vllm==0.26.0",
            **comparison.as_dict()}  # fmt: skip


def _contradictions(raw: dict) -> list[str]:
    return CanaryDoc.model_validate(raw).contradictions()


@settings(max_examples=300, deadline=None)
@given(_real_doc())
def test_every_document_of_the_real_comparison_is_consistent(raw: dict) -> None:
    assert _contradictions(raw) == []


@settings(max_examples=300, deadline=None)
@given(_real_doc(), st.data())
def test_any_single_relabelling_is_refused(raw: dict, data) -> None:
    edits = [("top", None)]
    edits += [("kind", i) for i in range(len(raw["tests"]))]
    edits += [("test-regression", i) for i in range(len(raw["tests"]))]
    edits += [("recipe-regression", i) for i in range(len(raw["recipes"]))]
    what, i = data.draw(st.sampled_from(edits))
    forged = copy.deepcopy(raw)
    if what == "top":
        forged["regression"] = not forged["regression"]
    elif what == "kind":
        others = [k.value for k in Kind if k.value != forged["tests"][i]["kind"]]
        forged["tests"][i]["kind"] = data.draw(st.sampled_from(others))
    elif what == "test-regression":
        forged["tests"][i]["regression"] = not forged["tests"][i]["regression"]
    else:
        forged["recipes"][i]["regression"] = not forged["recipes"][i]["regression"]
    assert _contradictions(forged), (what, i, forged)


def test_behaviour_and_vllm_surface_changes_are_shown_and_counted(tmp_path: Path) -> None:
    """Real: the probes of vLLM 0.25.1 and 0.26.0 (inkling, engine args) and observations
    that differ between two real pytest runs whose testcases all keep their verdict."""
    from .test_canary_behaviour import _run

    pinned, candidate = _run(tmp_path, "0"), _run(tmp_path, "1")
    probes = [json.loads((DATA / f"probe-vllm-{v}.json").read_text()) for v in ("0.25.1", "0.26.0")]
    doc = document(
        compare([pinned], [candidate], None, None, *probes), label="vllm==0.26.0", relaxed=[],
        environment="/cache/canary/k", pinned_junit=[PIN], candidate_junit=[CAND],
        packages=["vllm"],
    )  # fmt: skip
    assert doc["behaviour"] and doc["probes"]
    canary = _write(tmp_path / "canary.json", doc)
    code, out = _report(tmp_path, "out", "--canary", str(canary))
    md = (out / "report.md").read_text()
    assert "Behaviour changes (same verdict, other parser output)" in md
    assert 'arguments.command: "ls" -> "ls -la"' in md.replace("\\", "")
    assert "vLLM surface changes" in md and "inkling" in md
    assert f"{len(doc['behaviour'])} scenario(s) behaving differently" in md
    counts = json.loads((out / "report.json").read_text())["canary"]["counts"]
    assert (counts["behaviour_changed"], counts["probe_changes"]) == (
        len(doc["behaviour"]), len(doc["probes"]))  # fmt: skip
    assert code == _report(tmp_path, "plain")[0]  # informational: the verdict is the same


@pytest.mark.parametrize(
    ("key", "delta"),
    [("newly-failing", 1), ("behaviour_changed", 1), ("probe_changes", -1), ("bogus", 0)],
)
def test_counts_that_contradict_the_listed_changes_exit_2(
    tmp_path: Path, changed: dict, key: str, delta: int, capsys
) -> None:
    doc = copy.deepcopy(changed)
    listed = {"behaviour_changed": 0, "probe_changes": 0}
    doc["counts"][key] = max(0, doc["counts"].get(key, listed.get(key, 0)) + delta)
    if key == "probe_changes":  # a probe change listed, the count saying none
        doc["probes"] = [{"kind": "tool-parser", "where": "x", "added": ["a"], "removed": []}]
        doc["counts"][key] = 0
    canary = _write(tmp_path / "canary.json", doc)
    code, _ = _report(tmp_path, "out", "--canary", str(canary))
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE and "contradicts itself: counts" in err, err
