"""rlgate canary says what changed, not only what fails: observations and probes.

On real outputs: the functional tier's observations and the probe of vLLM 0.25.1 (the pin)
and vLLM 0.26.0 (tests/unit/data/canary/README.md), and JUnit written by real pytest runs
through rlgate's own plugin (``gate_record``); hypothesis for the edge cases (a scenario on
one side only, malformed or huge observations from an untrusted JUnit).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import rlgate
from rlgate.canary.compare import compare, compare_behaviour, read_observations
from rlgate.canary.probe import compare_probes, read_probe
from rlgate.cli.canary import junit_text, table
from rlgate.core.junit import read_junit
from rlgate.core.observations import (
    MAX_OBSERVATION_CHARS,
    decode_observation,
    diff_observations,
    encode_observation,
    token_digest,
)

DATA = Path(__file__).parent / "data" / "canary"
PROBE_PIN, PROBE_CANDIDATE = DATA / "probe-vllm-0.25.1.json", DATA / "probe-vllm-0.26.0.json"
OBSERVED_PIN = DATA / "observed-vllm-0.25.1.xml"
OBSERVED_CANDIDATE = DATA / "observed-vllm-0.26.0.xml"

SUITE = """
import os
from rlgate.core.observations import encode_observation

FLIP = os.environ["FLIP"] == "1"

def _call(command):
    return {"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}],
            "content": None, "reasoning_content": "Plan."}

def test_arguments_change(gate_record):
    gate_record(observation=encode_observation(
        {"non_streaming": _call("ls -la" if FLIP else "ls"), "streaming": _call("ls")}))

def test_prompt_ids_change(gate_record):
    ids = [1, 2, 3, 4] if FLIP else [1, 2, 3]
    from rlgate.core.observations import token_digest
    gate_record(observation=encode_observation({"prompt_ids": token_digest(ids)}))

def test_same(gate_record):
    gate_record(observation=encode_observation({"streaming": _call("pwd")}))

def test_observed_on_the_pin_only(gate_record):
    if not FLIP:
        gate_record(observation=encode_observation({"streaming": _call("pwd")}))

def test_malformed(record_property):
    record_property("rlgate.observation", "{not json" if FLIP else "[1, 2]")

def test_huge(record_property):
    record_property("rlgate.observation", "[" * 100000)

def test_only_on_the_pin():
    assert not FLIP or True
    if FLIP:
        import pytest
        pytest.skip("gone")
"""


def _run(tmp_path: Path, flip: str) -> Path:
    root = tmp_path / "suite"
    root.mkdir(exist_ok=True)
    (root / "test_observe.py").write_text(SUITE)
    out = tmp_path / f"observed-{flip}.xml"
    src = str(Path(rlgate.__file__).resolve().parents[1])
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
         "--rootdir", str(root), "-p", "rlgate.pytest_plugin", "-o", "junit_family=xunit1",
         f"--junitxml={out}", str(root)],
        env={"FLIP": flip, "PATH": "/usr/bin:/bin", "PYTHONPATH": src},
        capture_output=True,
        check=False,
        timeout=300,
    )  # fmt: skip
    assert out.is_file()
    return out


@pytest.fixture(scope="module")
def observed_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("observed")
    return _run(tmp, "0"), _run(tmp, "1")


def test_a_changed_observation_is_shown_even_when_both_testcases_pass(
    observed_pair: tuple[Path, Path],
) -> None:
    pinned, candidate = observed_pair
    result = compare([pinned], [candidate])
    by_test = {c.test.split("::")[1]: c for c in result.behaviour}
    assert by_test["test_arguments_change"].differences == (
        'non_streaming.tool_calls[0].arguments.command: "ls" -> "ls -la"',
    )
    (ids,) = by_test["test_prompt_ids_change"].differences[1:]
    assert by_test["test_prompt_ids_change"].differences[0] == "prompt_ids.len: 3 -> 4"
    assert ids.startswith("prompt_ids.sha256: ")
    assert by_test["test_observed_on_the_pin_only"].differences == ("observed on the pin only",)
    assert "test_same" not in by_test
    # both pass on both sides: a behaviour change, not a state change and not a regression
    assert not any(c.test.endswith("test_arguments_change") for c in result.tests)
    assert not result.regressions
    assert result.counts["behaviour_changed"] == 3


def test_malformed_or_huge_observations_are_ignored_with_a_note(
    observed_pair: tuple[Path, Path],
) -> None:
    pinned, candidate = observed_pair
    seen, notes = read_observations([candidate])
    assert not any(t.endswith(("test_malformed", "test_huge")) for t in seen)
    (note,) = notes
    assert note.startswith("2 observations ignored: ")
    assert "test_malformed (not JSON)" in note and "test_huge (" in note
    result = compare([pinned], [candidate])
    assert any("not a JSON object" in n for n in result.notes)  # the pin's "[1, 2]"
    assert f"note: candidate: {note}" in table(result, "vllm==0.26.0")


def test_table_json_and_junit_carry_behaviour_and_probe_changes(
    observed_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    pin_probe = {"tool_parsers": ["hermes", "qwen3_coder"], "engine_args": ["model", "seed"]}
    cand_probe = {"tool_parsers": ["hermes", "qwen3_xml"], "engine_args": ["model", "seed"]}
    result = compare([observed_pair[0]], [observed_pair[1]], None, None, pin_probe, cand_probe)
    shown = table(result, "vllm==0.26.0")
    assert 'non_streaming.tool_calls[0].arguments.command: "ls" -> "ls -la"' in shown
    assert "tool-parser  vLLM ToolParserManager" in shown and "+qwen3_xml -qwen3_coder" in shown
    assert "no regression" in shown
    doc = json.loads(json.dumps(result.as_dict()))
    assert doc["probes"] == [
        {"kind": "tool-parser", "where": "vLLM ToolParserManager", "added": ["qwen3_xml"],
         "removed": ["qwen3_coder"]}
    ]  # fmt: skip
    assert len(doc["behaviour"]) == 3 and doc["counts"]["probe_changes"] == 1
    out = tmp_path / "canary.xml"
    out.write_text(junit_text(result, "vllm==0.26.0"))
    cases = [c for s in read_junit(out) for c in s.cases]
    kinds = {c.classname.rsplit(".", 1)[-1] for c in cases}
    assert {"behaviour", "tool-parser"} <= kinds
    assert all(c.shown.value == "pass" for c in cases if c.classname.endswith("behaviour"))
    parser = next(c for c in cases if c.classname.endswith("tool-parser"))
    assert "added 1, removed 1: +qwen3_xml -qwen3_coder" in parser.result.message


# --- the real two stacks ---------------------------------------------------------------


def test_the_real_probes_of_vllm_0_25_1_and_0_26_0() -> None:
    pinned, note_a = read_probe(PROBE_PIN)
    candidate, note_b = read_probe(PROBE_CANDIDATE)
    assert (note_a, note_b) == ("", "")
    assert pinned and candidate
    assert (pinned["vllm"], candidate["vllm"]) == ("0.25.1", "0.26.0")
    assert {"hermes", "qwen3_coder", "qwen3_xml"} <= set(pinned["tool_parsers"])
    assert {"deepseek_r1", "qwen3"} <= set(pinned["reasoning_parsers"])
    changes = {c.kind: (c.added, c.removed) for c in compare_probes(pinned, candidate)}
    # measured: vLLM 0.26.0 registers "inkling" (vllm/tool_parsers/__init__.py and
    # vllm/reasoning/__init__.py) and adds four AsyncEngineArgs fields (vllm/engine/arg_utils.py,
    # e.g. ``max_num_scheduled_tokens: int | None = None``); nothing removed; the serving
    # kwargs and the chat-template kwargs of the four stock templates are the same
    assert changes == {
        "tool-parser": (("inkling",), ()),
        "reasoning-parser": (("inkling",), ()),
        "engine-arg": (
            (
                "enable_bf16x3_router_gemm",
                "enable_moe_shared_loras",
                "max_num_scheduled_tokens",
                "prefix_match_unit",
            ),
            (),
        ),
    }
    assert len(pinned["chat_template_kwargs"]) == 4
    assert "enable_thinking" in pinned["chat_template_kwargs"]["qwen3.5-35b-a3b"]


def test_the_pin_probe_is_the_key_schema_vllm_subtree() -> None:
    """The probe reads the class the key schema's vLLM subtree was generated from."""
    from rlgate.recipe.schema import load_schema

    prefix = "policy.generation.vllm_kwargs."
    keys = {k.removeprefix(prefix) for k in load_schema().keys if k.startswith(prefix)}
    pinned, _ = read_probe(PROBE_PIN)
    candidate, _ = read_probe(PROBE_CANDIDATE)
    assert pinned and candidate
    assert {k for k in keys if "." not in k} == set(pinned["engine_args"])  # vLLM 0.25.1's
    assert not set(candidate["engine_args"]) <= keys  # 0.26.0's new fields: unknown-key today
    assert "enable_thinking" in pinned["chat_template_kwargs"]["qwen3.5-35b-a3b"]


def test_the_real_observations_of_vllm_0_25_1_and_0_26_0() -> None:
    pinned, notes_a = read_observations([OBSERVED_PIN])
    candidate, notes_b = read_observations([OBSERVED_CANDIDATE])
    assert (notes_a, notes_b) == ([], [])
    assert len(pinned) == 55 and set(pinned) == set(candidate)  # 63 testcases, 8 skipped
    tool_calls = [t for t in pinned if "TestToolCallRoundTrip" in t]
    assert tool_calls and all(pinned[t]["non_streaming"]["tool_calls"] for t in tool_calls)
    assert all(len(pinned[t]["prompt_ids"]) == 2 for t in pinned if "prompt_ids" in pinned[t])
    result = compare([OBSERVED_PIN], [OBSERVED_CANDIDATE])
    # measured: vLLM 0.26.0's parsers return exactly what 0.25.1's do on every scenario, and
    # the prompts tokenize the same (transformers 5.8.1 on both sides)
    assert (result.tests, result.behaviour, result.notes, result.unchanged) == ((), (), (), 63)
    # and a change would show: the candidate's first tool call with other arguments
    test = next(t for t in tool_calls if t.endswith("-plain]"))
    moved = json.loads(json.dumps(candidate[test]))
    moved["streaming"]["tool_calls"][0]["arguments"] = {"command": "rm -rf /testbed"}
    (change,) = compare_behaviour({test: pinned[test]}, {test: moved})
    assert change.differences == (
        'streaming.tool_calls[0].arguments.command: "ls -la /testbed" -> "rm -rf /testbed"',
    )


# --- properties ------------------------------------------------------------------------

_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
_key = st.from_regex(r"[a-z_]{1,8}", fullmatch=True) | st.text(max_size=8)  # odd keys quoted
_doc = st.recursive(
    st.dictionaries(_key, _leaf, max_size=4),
    lambda inner: st.dictionaries(
        _key,
        inner | st.lists(inner | _leaf, max_size=3),
        max_size=4,
    ),
    max_leaves=20,
)


@given(_doc, _doc)
def test_a_difference_is_listed_exactly_when_the_observations_differ(a: dict, b: dict) -> None:
    assert diff_observations(a, a) == []
    same = encode_observation(a) == encode_observation(b)
    assert (diff_observations(a, b) == []) is same


@given(_doc)
def test_an_observation_round_trips_or_becomes_its_digest(doc: dict) -> None:
    text = encode_observation(doc)
    assert len(text) <= MAX_OBSERVATION_CHARS and text.isascii()
    back, why = decode_observation(text)
    assert why == "" and back is not None
    assert back == json.loads(json.dumps(doc)) or set(back) == {"digest", "chars"}


@given(st.text(max_size=300) | st.sampled_from(["[" * 5000, '{"a":' * 30 + "1" + "}" * 30]))
def test_untrusted_observation_text_is_a_doc_or_a_note_never_a_traceback(text: str) -> None:
    doc, why = decode_observation(text)
    assert (doc is None) == bool(why) or (doc is None and text == "")
    assert doc is None or isinstance(doc, dict)


def test_an_odd_key_is_one_quoted_path_component() -> None:
    (line,) = diff_observations({"a\nb.c[0]": 1}, {"a\nb.c[0]": 2})
    assert line == '"a\\nb.c[0]": 1 -> 2' and "\n" not in line


def test_a_huge_observation_is_recorded_as_its_digest() -> None:
    text = encode_observation({"content": "x" * (2 * MAX_OBSERVATION_CHARS)})
    doc, _ = decode_observation(text)
    assert doc is not None and set(doc) == {"digest", "chars"}
    assert doc["chars"] > 2 * MAX_OBSERVATION_CHARS
    assert token_digest([1, 2, 3]) == token_digest([1, 2, 3]) != token_digest([1, 2])


@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _doc, max_size=3),
    st.dictionaries(st.sampled_from(["b", "c", "d"]), _doc, max_size=3),
)
def test_a_scenario_on_one_side_only_is_said_once(pinned: dict, candidate: dict) -> None:
    changes = {c.test: c.differences for c in compare_behaviour(pinned, candidate)}
    for test in set(pinned) ^ set(candidate):
        side = "the pin" if test in pinned else "the candidate"
        assert changes[test] == (f"observed on {side} only",)
    for test in set(pinned) & set(candidate):
        assert (test in changes) is (diff_observations(pinned[test], candidate[test]) != [])


@pytest.mark.parametrize(
    "text",
    ["", "[]", "{", '{"tool_parsers": "hermes"}', '{"tool_parsers": [1, 2]}', "x" * 10],
)
def test_a_malformed_probe_is_a_note(tmp_path: Path, text: str) -> None:
    path = tmp_path / "probe.json"
    path.write_text(text)
    doc, note = read_probe(path)
    assert note and "ignored" in note
    assert doc is None or "tool_parsers" not in doc
    assert compare_probes(doc, {"tool_parsers": ["hermes"]}) == []


def test_a_huge_probe_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    path.write_text(json.dumps({"tool_parsers": ["p" * 100] * 50000}))
    doc, note = read_probe(path)
    assert doc is None and "more than" in note


def test_the_probe_run_by_the_canary_in_this_environment(tmp_path: Path) -> None:
    """``run_probe`` (the canary's own call) with this interpreter writes the pin's probe."""
    from rlgate.canary.env import run_probe

    code, _ = run_probe(Path(sys.executable), tmp_path, "")
    assert code == 0, (tmp_path / "probe.log").read_text()[-2000:]
    here, note = read_probe(tmp_path / "probe.json")
    pinned, _ = read_probe(PROBE_PIN)
    assert note == "" and here and pinned
    if here["vllm"] == pinned["vllm"]:
        assert compare_probes(pinned, here) == []
    assert here["chat_template_kwargs"] == {}  # no --tokenizers: no template read


def test_a_probe_that_cannot_run_is_a_note(tmp_path: Path) -> None:
    from rlgate.canary import env as canary_env
    from rlgate.cli.canary import _probe

    doc, note = _probe(canary_env, Path("/bin/false"), tmp_path, "", "candidate")
    assert doc is None
    assert note == f"the probe of the candidate stack failed (exit 1; log {tmp_path / 'probe.log'})"
