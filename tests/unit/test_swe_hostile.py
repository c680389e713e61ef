"""Hostile and malformed inputs to `rlgate swe compare|power|eval` (issue 10).

Every input of the SWE gate -- the dataset, the four result formats (final report,
harness log directory, per-instance map, Gym rollouts), the `swe eval` run record
and predictions, and every numeric argument -- is fed malformed, binary,
contradictory or oversized variants. Each must end with its documented exit code
and one clear `rlgate: error:` (or argparse `error:`) line naming the input, never a
traceback, an internal error (70) or a silent change of an outcome.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlgate.cli.app import main

from .helpers import swe_inputs as si

# A hand-made universe (not Verified ids): fast to load, and each test states its rows.
IDS = ("alpha__one-1", "alpha__one-2", "beta__two-3")
ROWS = [{"instance_id": i, "repo": i.split("-")[0].replace("__", "/")} for i in IDS]
# Verified instances of four test-log parser families, for inputs graded by swebench.
FOUR_IDS = (
    "django__django-11099",
    "sympy__sympy-20590",
    "psf__requests-2317",
    "astropy__astropy-12907",
)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run the CLI in-process; argparse's exit becomes a code like any other."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(code: int, err: str, expected_code: int, pattern: str) -> None:
    """The exit code, the message, and exactly one error line without a traceback."""
    assert code == expected_code, err
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert re.search(pattern, err), f"{pattern!r} not in {err!r}"


def _dump(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def final_report(resolved=(), unresolved=(), error=(), **extra) -> dict:
    """A final report in swebench 5.0.2's make_run_report shape over IDS."""
    doc = {
        "resolved_ids": list(resolved),
        "unresolved_ids": list(unresolved),
        "error_ids": list(error),
        "completed_ids": sorted({*resolved, *unresolved}),
        "submitted_ids": list(IDS),
        "empty_patch_ids": [],
        "incomplete_ids": [],
        "resolved_instances": len(resolved),
    }
    doc.update(extra)
    return doc


@pytest.fixture
def tiny(tmp_path):
    """A 3-instance dataset and a valid per-instance map on it."""
    dataset = _dump(tmp_path / "dataset.json", ROWS)
    good = _dump(tmp_path / "good.json", {i: {"resolved": k == 0} for k, i in enumerate(IDS)})
    return dataset, good


def compare(capsys, before, after, dataset, *extra) -> tuple[int, str, str]:
    argv = ["swe", "compare", "--before", str(before), "--after", str(after)]
    return run_cli([*argv, "--dataset", str(dataset), "--resamples", "100", *extra], capsys)


# --- the dataset (the universe) -----------------------------------------------------------

DATASETS: dict[str, tuple[str | bytes, str]] = {
    "list_of_ints": ("[1, 2, 3]", r"instance 1: every row needs instance_id and repo; got int"),
    "list_of_strings": ('["alpha__one-1"]', r"instance 1: every row needs .* got str"),
    "nested_lists": ("[[1], [2]]", r"instance 1: every row needs .* got list"),
    "dict_without_id": ('[{"repo": "a/b"}]', r"every row needs instance_id and repo; got keys"),
    "non_string_id": (
        '[{"instance_id": 5, "repo": "a/b"}]',
        r"instance_id must be a string, got int",
    ),
    "control_char_id": (
        '[{"instance_id": "a\\u001b[2J", "repo": "a/b"}]',
        r"instance_id .* is not a usable name",
    ),
    "lone_surrogate_id": (
        '[{"instance_id": "a\\udc80", "repo": "a/b"}]',
        r"instance_id .* is not a usable name",
    ),
    "empty_id": ('[{"instance_id": " ", "repo": "a/b"}]', r"is not a usable name"),
    "non_string_repo": ('[{"instance_id": "a__b-1", "repo": ["a"]}]', r"repo must be a string"),
    "duplicate_ids": (
        json.dumps([ROWS[0], ROWS[0]]),
        r"duplicate instance_id alpha__one-1",
    ),
    "duplicate_key": (
        '[{"instance_id": "a__b-1", "instance_id": "a__b-2", "repo": "a/b"}]',
        r"the key 'instance_id' appears twice",
    ),
    "empty_list": ("[]", r"dataset .*dataset\.json: no instances"),
    "an_object": ('{"instance_id": "a__b-1"}', r"must be a list of instances, got dict"),
    "empty_file": ("", r"file is empty"),
    "binary": (b"\xff\xfe\x00\x01[]", r"dataset\.json: dataset is not UTF-8 text"),
    "deeply_nested": ("[" * 100_000 + "]" * 100_000, r"nested too deeply"),
    "test_labels_not_a_list": (
        '[{"instance_id": "a__b-1", "repo": "a/b", "FAIL_TO_PASS": "{}", "PASS_TO_PASS": "[]"}]',
        r"a test list must be a list of test names",
    ),
}


@pytest.mark.parametrize("content,pattern", DATASETS.values(), ids=DATASETS.keys())
def test_swe_compare_refuses_a_malformed_dataset(tmp_path, capsys, tiny, content, pattern):
    dataset = tmp_path / "dataset.json"
    if isinstance(content, bytes):
        dataset.write_bytes(content)
    else:
        dataset.write_text(content)
    code, _, err = compare(capsys, tiny[1], tiny[1], dataset)
    assert_one_error(code, err, 2, pattern)


@pytest.mark.parametrize(
    "content,pattern",
    [
        pytest.param(
            json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[1]) + "\n" + json.dumps(ROWS[2])[:20],
            r"dataset\.jsonl:3: not valid JSON column",
            id="truncated_last_line",
        ),
        pytest.param(
            json.dumps(ROWS[0]).encode() + b"\n\xc3\x28\n",
            r"dataset\.jsonl: dataset is not UTF-8 text",
            id="binary_line",
        ),
        pytest.param("5\n", r"instance 1: every row needs .* got int", id="int_line"),
    ],
)
def test_swe_compare_refuses_a_malformed_jsonl_dataset(tmp_path, capsys, tiny, content, pattern):
    dataset = tmp_path / "dataset.jsonl"
    if isinstance(content, bytes):
        dataset.write_bytes(content)
    else:
        dataset.write_text(content)
    code, _, err = compare(capsys, tiny[1], tiny[1], dataset)
    assert_one_error(code, err, 2, pattern)


def test_swe_compare_refuses_a_dataset_larger_than_the_bound(tmp_path, capsys, tiny):
    rows = [{"instance_id": f"a__b-{k}", "repo": "a/b"} for k in range(100_001)]
    dataset = _dump(tmp_path / "big.json", rows)
    code, _, err = compare(capsys, tiny[1], tiny[1], dataset)
    assert_one_error(code, err, 2, r"100,001 instances, more than rlgate compares \(100,000")


@pytest.mark.parametrize("split", ["../../etc/x", "a/b", "", "te\nst"])
def test_swe_compare_refuses_a_split_that_is_a_path(capsys, tiny, split):
    code, _, err = compare(capsys, tiny[1], tiny[1], tiny[0], "--split", split)
    assert_one_error(code, err, 2, r"argument --split: .*is not a split name")


# --- harness final reports ------------------------------------------------------------------

FINAL_REPORTS: dict[str, tuple[dict, str]] = {
    "resolved_and_error": (
        final_report(resolved=[IDS[0]], error=[IDS[0], IDS[1]]),
        r"contradictory report: alpha__one-1 listed in both resolved_ids and error_ids",
    ),
    "resolved_and_unresolved": (
        final_report(resolved=[IDS[0]], unresolved=[IDS[0]]),
        r"contradictory report: alpha__one-1 listed in both resolved_ids and unresolved_ids",
    ),
    "unresolved_and_empty_patch": (
        final_report(unresolved=[IDS[1]], empty_patch_ids=[IDS[1]]),
        r"contradictory report: alpha__one-2 listed in both unresolved_ids and empty_patch_ids",
    ),
    "resolved_and_incomplete": (
        final_report(resolved=[IDS[2]], incomplete_ids=[IDS[2]]),
        r"contradictory report: beta__two-3 listed in both resolved_ids and incomplete_ids",
    ),
    "infra_failure_of_a_resolved_id": (
        final_report(resolved=[IDS[0]], infra_failure_ids=[IDS[0]]),
        r"contradictory report: alpha__one-1 in infra_failure_ids but in neither "
        r"unresolved_ids nor error_ids",
    ),
    "same_id_twice_in_a_list": (
        final_report(unresolved=[IDS[1], IDS[1]]),
        r"unresolved_ids lists the same id twice: alpha__one-2",
    ),
    "count_is_a_bool": (
        final_report(resolved=[IDS[0]], resolved_instances=True),
        r"inconsistent report: resolved_instances=True",
    ),
    "failure_reasons_a_list": (
        final_report(error=[IDS[0]], failure_reasons=["oom"]),
        r"failure_reasons must map instance ids to reason strings",
    ),
    "ids_not_strings": (final_report(error=[1, 2]), r"error_ids must be a list of instance ids"),
}


@pytest.mark.parametrize("doc,pattern", FINAL_REPORTS.values(), ids=FINAL_REPORTS.keys())
def test_swe_compare_refuses_a_contradictory_final_report(tmp_path, capsys, tiny, doc, pattern):
    report = _dump(tmp_path / "org__m.run.json", doc)
    code, _, err = compare(capsys, tiny[1], report, tiny[0])
    assert_one_error(code, err, 2, r"org__m\.run\.json: " + pattern)


def test_swe_compare_refuses_a_key_repeated_in_a_final_report(tmp_path, capsys, tiny):
    text = json.dumps(final_report(resolved=[IDS[0]]))
    report = tmp_path / "r.json"
    report.write_text(text[:-1] + ', "resolved_ids": []}')  # json would keep the last silently
    code, _, err = compare(capsys, tiny[1], report, tiny[0])
    assert_one_error(code, err, 2, r"r\.json: the key 'resolved_ids' appears twice")


def test_swe_compare_refuses_a_binary_final_report(tmp_path, capsys, tiny):
    report = tmp_path / "r.json"
    report.write_bytes(b'{"resolved_ids": ["\xff\xfe"]}')
    code, _, err = compare(capsys, tiny[1], report, tiny[0])
    assert_one_error(code, err, 2, r"r\.json: SWE-bench result is not UTF-8 text")


def test_a_real_harness_report_passes_the_contradiction_checks(tmp_path, capsys):
    """swebench's make_run_report output (every category) is accepted: no false alarm."""
    ids = list(FOUR_IDS)
    kinds = [si.RESOLVED, si.DOCKER_ERROR, si.HARNESS_ERROR, si.EMPTY_PATCH]
    run = si.write_harness_run(
        tmp_path / "run", "r", dict(zip(ids, kinds, strict=True)), dataset_ids=ids
    )
    doc = json.loads(run.final_report.read_text())
    assert doc["infra_failure_ids"] == ["sympy__sympy-20590"]  # the classified subset
    dataset = si.write_subset_dataset(tmp_path / "u.jsonl", ids)
    code, out, err = compare(
        capsys, run.final_report, run.final_report, dataset, "--max-infra-error-rate", "1"
    )
    assert code == 0, err
    assert "NO_SIGNIFICANT_CHANGE" in out


# --- per-instance maps ----------------------------------------------------------------------------

MAPS: dict[str, tuple[str, str]] = {
    "resolved_without_a_patch": (
        json.dumps({IDS[0]: {"resolved": True, "patch_exists": False}}),
        r"contradictory entry for alpha__one-1: resolved=true with patch_exists=False",
    ),
    "resolved_and_infra_failure": (
        json.dumps({IDS[0]: {"resolved": True, "infra_failure": True}}),
        r"resolved=true with infra_failure=True",
    ),
    "id_twice": (
        f'{{"{IDS[0]}": {{"resolved": false}}, "{IDS[0]}": {{"resolved": true}}}}',
        r"the key 'alpha__one-1' appears twice",
    ),
    "reason_not_a_string": (
        json.dumps({IDS[0]: {"resolved": False, "infra_failure_reason": {"x": 1}}}),
        r"infra_failure_reason of alpha__one-1 must be a string",
    ),
    "tests_status_not_an_object": (
        json.dumps({IDS[0]: {"resolved": False, "tests_status": [1]}}),
        r"alpha__one-1: tests_status is not an object",
    ),
    "test_names_not_strings": (
        json.dumps(
            {IDS[0]: {"resolved": False, "tests_status": {"FAIL_TO_PASS": {"success": [{}]}}}}
        ),
        r"tests_status\.FAIL_TO_PASS\.success must be a list of test names",
    ),
}


@pytest.mark.parametrize("text,pattern", MAPS.values(), ids=MAPS.keys())
def test_swe_compare_refuses_a_contradictory_instance_map(tmp_path, capsys, tiny, text, pattern):
    (tmp_path / "m.json").write_text(text)
    code, _, err = compare(capsys, tiny[1], tmp_path / "m.json", tiny[0])
    assert_one_error(code, err, 2, r"m\.json: .*" + pattern)


# --- harness log directories ----------------------------------------------------------------------


def _log_dir(root: Path) -> Path:
    model = root / "logs/run_evaluation/r/org__m"
    for k, iid in enumerate(IDS):
        (model / iid).mkdir(parents=True)
        _dump(model / iid / "report.json", {iid: {"resolved": k == 0}})
    return model.parent


def test_swe_compare_refuses_a_binary_instance_report(tmp_path, capsys, tiny):
    logs = _log_dir(tmp_path)
    (logs / "org__m" / IDS[1] / "report.json").write_bytes(b"\x89PNG\r\n\x1a\n")
    code, _, err = compare(capsys, tiny[1], logs, tiny[0])
    assert_one_error(code, err, 2, r"alpha__one-2/report\.json: SWE-bench result is not UTF-8")


def test_a_binary_instance_log_is_read_as_a_harness_error(tmp_path, capsys, tiny):
    """A torn/binary run_instance.log (crashed container) is a harness error, not a crash."""
    logs = _log_dir(tmp_path)
    (logs / "org__m" / IDS[2] / "report.json").unlink()
    (logs / "org__m" / IDS[2] / "run_instance.log").write_bytes(b"\xff\x00\xfe crashed")
    code, _, err = compare(capsys, tiny[1], logs, tiny[0], "--json", str(tmp_path / "o.json"))
    assert code == 3, err
    assert json.loads((tmp_path / "o.json").read_text())["after"]["runs"][0]["ids"]["error"] == [
        IDS[2]
    ]


def test_swe_compare_refuses_run_metadata_with_a_non_string_dataset(tmp_path, capsys, tiny):
    logs = _log_dir(tmp_path)
    _dump(logs / "run.json", {"dataset": ["x"]})
    code, _, err = compare(capsys, tiny[1], logs, tiny[0])
    assert_one_error(code, err, 2, r"run\.json: 'dataset' must be a dataset name")


# --- NeMo Gym rollouts ----------------------------------------------------------------------------


def _rollout(iid: str, reward=1.0, **extra) -> str:
    return json.dumps({"instance_id": iid, "reward": reward, **extra}) + "\n"


ROLLOUTS: dict[str, tuple[bytes, str]] = {
    "binary_line": (
        _rollout(IDS[0]).encode() + b'{"instance_id": "\xff"}\n',
        r"r\.jsonl:2: not UTF-8 text",
    ),
    "truncated_last_line": (
        (_rollout(IDS[0]) + _rollout(IDS[1]) + _rollout(IDS[2])[:15]).encode(),
        r"r\.jsonl:3: not valid JSON column",
    ),
    "huge_int_reward": (_rollout(IDS[0], reward=10**400).encode(), r"reward 1000.* is not 0 or 1"),
    "nan_reward": (_rollout(IDS[0], reward=float("nan")).encode(), r"reward nan .* is not 0 or 1"),
    "resolved_but_not_evaluated": (
        _rollout(IDS[0], reward=1, evaluation_completed=False).encode(),
        r"r\.jsonl:1: contradictory rollout for alpha__one-1: reward 1 with "
        r"evaluation_completed=false",
    ),
    "bool_rollout_index": (
        _rollout(IDS[0], _ng_rollout_index=True).encode(),
        r"_ng_rollout_index=True is not an int >= 0",
    ),
    "a_list_per_line": (b"[1, 2]\n", r"r\.jsonl:1: expected a JSON object per line, got list"),
    "instance_dict_not_json": (
        _rollout(
            IDS[0], responses_create_params={"metadata": {"instance_dict": "{not json"}}
        ).encode(),
        r"r\.jsonl:1: responses_create_params\.metadata\.instance_dict: not valid JSON",
    ),
    "deeply_nested_line": (
        b'{"instance_id": "x", "reward": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        r"r\.jsonl:1: not valid JSON: nested too deeply",
    ),
    "duplicate_reward_key": (
        f'{{"instance_id": "{IDS[0]}", "reward": 0, "reward": 1}}\n'.encode(),
        r"r\.jsonl:1: the key 'reward' appears twice",
    ),
    "too_many_repeats": (
        "".join(_rollout(IDS[0], _ng_rollout_index=k) for k in range(257)).encode(),
        r"r\.jsonl:257: more than 256 distinct _ng_rollout_index values",
    ),
}


@pytest.mark.parametrize("content,pattern", ROLLOUTS.values(), ids=ROLLOUTS.keys())
def test_swe_compare_refuses_malformed_rollouts(tmp_path, capsys, tiny, content, pattern):
    (tmp_path / "r.jsonl").write_bytes(content)
    code, _, err = compare(capsys, tiny[1], tmp_path / "r.jsonl", tiny[0])
    assert_one_error(code, err, 2, pattern)


# --- `rlgate swe eval` run directories (rlgate_swe_eval.json) ---------------------------------


@pytest.fixture
def run_dir(tmp_path):
    """A run directory whose final report is named relative to it, as `swe eval` writes it."""
    run = tmp_path / "runs" / "rl_s0"
    run.mkdir(parents=True)
    _dump(run / "org__m.rl_s0.json", final_report(resolved=[IDS[0]], unresolved=IDS[1:]))
    _dump(run / "rlgate_swe_eval.json", {"final_report": "org__m.rl_s0.json"})
    return run


def test_a_relative_final_report_resolves_against_the_run_dir(
    tmp_path, capsys, tiny, run_dir, monkeypatch
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the run dir, nor its parent
    code, _, err = compare(capsys, tiny[1], run_dir, tiny[0], "--json", str(tmp_path / "o.json"))
    assert code == 0, err
    (run,) = json.loads((tmp_path / "o.json").read_text())["after"]["runs"]
    assert run["label"] == str(run_dir / "org__m.rl_s0.json")
    assert run["format"] == "final_report"


RECORDS: dict[str, tuple[Callable[[Path], object], str]] = {
    "its_own_directory": (lambda run: ".", r"final_report '\.' is not a final report file"),
    "itself": (
        lambda run: "rlgate_swe_eval.json",
        r"final_report 'rlgate_swe_eval\.json' is not a final report file",
    ),
    "a_loop_of_run_dirs": (
        lambda run: _loop(run),
        r"final_report 'other' is not a final report file",
    ),
    "escaping_the_run_dir": (
        lambda run: "../../../outside.json",
        r"final_report '\.\./\.\./\.\./outside\.json' is outside the run directory",
    ),
    "absolute_elsewhere": (
        lambda run: str(run.parent.parent / "outside.json"),
        r"outside\.json' is outside the run directory",
    ),
    "relative_to_the_old_cwd": (
        lambda run: "runs/rl_s0/org__m.rl_s0.json",
        r"(?s)is not a final report file in the run directory .*hint: paths in the record are "
        r"relative to the run directory",
    ),
    "not_a_string": (lambda run: 5, r"rlgate_swe_eval\.json: no final_report recorded"),
    "lone_surrogate": (lambda run: "m\udc80.json", r"final_report .* is not a usable path"),
    "nul_byte": (lambda run: "m\x00.json", r"final_report .* is not a usable path"),
    "a_per_instance_map": (
        lambda run: _dump(run / "map.json", {IDS[0]: {"resolved": True}}).name,
        r"map\.json: swebench final report is missing",
    ),
}


def _loop(run: Path) -> str:
    """run/other is a run dir whose record points back at run (read as a directory)."""
    (run / "other").mkdir()
    _dump(run / "other/rlgate_swe_eval.json", {"final_report": ".."})
    return "other"


@pytest.mark.parametrize("final,pattern", RECORDS.values(), ids=RECORDS.keys())
def test_swe_compare_refuses_a_record_that_names_no_final_report_inside(
    tmp_path, capsys, tiny, run_dir, final, pattern
):
    _dump(tmp_path / "outside.json", final_report(resolved=[IDS[0]]))
    _dump(run_dir / "rlgate_swe_eval.json", {"final_report": final(run_dir)})
    code, _, err = compare(capsys, tiny[1], run_dir, tiny[0])
    assert_one_error(code, err, 2, pattern)


def test_swe_compare_refuses_a_binary_run_record(capsys, tiny, run_dir):
    (run_dir / "rlgate_swe_eval.json").write_bytes(b"\x00\xff\xfe")
    code, _, err = compare(capsys, tiny[1], run_dir, tiny[0])
    assert_one_error(code, err, 2, r"rlgate_swe_eval\.json: rlgate swe eval record is not UTF-8")


# --- arguments ---------------------------------------------------------------------------------

COMPARE_ARGS: dict[str, tuple[list[str], str]] = {
    "negative_seed": (["--seed", "-1"], r"argument --seed: -1 is outside 0\.\.4,294,967,295"),
    "huge_seed": (["--seed", str(2**64)], r"argument --seed: .* is outside 0\.\.4,294,967,295"),
    "float_seed": (["--seed", "1.5"], r"argument --seed: not an integer"),
    "huge_resamples": (["--resamples", "100000000"], r"argument --resamples: .*100,000"),
    "few_resamples": (["--resamples", "10"], r"argument --resamples: 10 is outside 100\.\."),
    "nan_alpha": (["--alpha", "nan"], r"argument --alpha: must be a finite number"),
    "zero_alpha": (["--alpha", "0"], r"argument --alpha: 0\.0 is outside \(0"),
    "inf_margin": (["--margin-pp", "inf"], r"argument --margin-pp: must be a finite number"),
    "negative_margin": (["--margin-pp", "-1"], r"argument --margin-pp: -1\.0 is outside \[0"),
    "nan_infra_rate": (["--max-infra-error-rate", "nan"], r"must be a finite number"),
    "empty_dataset_name": (["--dataset", " "], r"argument --dataset: must not be empty"),
}


@pytest.mark.parametrize("extra,pattern", COMPARE_ARGS.values(), ids=COMPARE_ARGS.keys())
def test_swe_compare_refuses_bad_arguments(capsys, tiny, extra, pattern):
    code, _, err = compare(capsys, tiny[1], tiny[1], tiny[0], *extra)
    assert_one_error(code, err, 2, pattern)


POWER_ARGS: dict[str, tuple[list[str], str]] = {
    "huge_n": (["--n", "100000000"], r"argument --n: 100000000 is outside 1\.\.100,000"),
    "zero_n": (["--n", "0"], r"argument --n: 0 is outside 1\.\."),
    "negative_n": (["--n", "-5"], r"argument --n: -5 is outside"),
    "nan_discordance": (["--discordance", "nan"], r"argument --discordance: must be a finite"),
    "inf_discordance": (["--discordance", "inf"], r"argument --discordance: must be a finite"),
    "zero_discordance": (["--discordance", "0"], r"argument --discordance: 0\.0 is outside \(0"),
    "negative_discordance": (["--discordance", "-0.1"], r"--discordance: -0\.1 is outside"),
    "zero_seeds": (["--seeds", "0"], r"argument --seeds: 0 is outside 1\.\.256"),
    "huge_seeds": (["--seeds", "100000"], r"argument --seeds: 100000 is outside 1\.\.256"),
    "nan_alpha": (["--alpha", "nan"], r"argument --alpha: must be a finite number"),
    "power_one": (["--power", "1"], r"argument --power: 1\.0 is outside"),
    "nan_noise": (["--noise-fraction", "nan"], r"argument --noise-fraction: must be a finite"),
    "too_many_values": (
        ["--n", *map(str, range(10, 61))],
        r"swe power: --n has 51 values \(at most 50\)",
    ),
    "too_much_exact_work": (
        ["--n", "100000", "--discordance", *[f"0.{k:02d}" for k in range(1, 12)]],
        r"the one-seed rows enumerate 1,100,000 instances in total \(at most 1,000,000",
    ),
}


@pytest.mark.parametrize("extra,pattern", POWER_ARGS.values(), ids=POWER_ARGS.keys())
def test_swe_power_refuses_bad_arguments(capsys, extra, pattern):
    code, _, err = run_cli(["swe", "power", *extra], capsys)
    assert_one_error(code, err, 2, pattern)


def _predictions(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


PRED = {"instance_id": "django__django-11099", "model_name_or_path": "org/m", "model_patch": "x"}
EVAL_CASES: dict[str, tuple[str | bytes, list[str], str]] = {
    "binary_predictions": (b"\xff\xfe\x00", [], r"p\.jsonl: predictions file is not UTF-8"),
    "id_not_a_string": (
        json.dumps({**PRED, "instance_id": ["x"]}) + "\n",
        [],
        r"prediction 1: instance_id must be a string, got list",
    ),
    "patch_not_a_string": (
        json.dumps({**PRED, "model_patch": 5}) + "\n",
        [],
        r"model_patch must be a string or null",
    ),
    "model_is_dotdot": (
        json.dumps({**PRED, "model_name_or_path": ".."}) + "\n",
        [],
        r"model_name_or_path '\.\.' cannot name a directory",
    ),
    "deeply_nested": ("[" * 100_000 + "\n", [], r"p\.jsonl:1: not valid JSON: nested too deeply"),
    "run_id_a_path": (
        json.dumps(PRED),
        ["--harness-run-id", "../x"],
        r"run id '\.\./x' must be 1-128",
    ),
    "zero_workers": (json.dumps(PRED), ["--max-workers", "0"], r"argument --max-workers: 0 is"),
    "negative_timeout": (
        json.dumps(PRED),
        ["--timeout-seconds", "-1"],
        r"argument --timeout-seconds: -1 is",
    ),
    "split_a_path": (json.dumps(PRED), ["--split", "x/y"], r"argument --split: .*not a split"),
    "control_char_instance_id": (
        json.dumps(PRED),
        ["--instance-ids", "a\x1bb"],
        r"--instance-ids: instance_id .* is not a usable name",
    ),
}


@pytest.mark.parametrize("content,extra,pattern", EVAL_CASES.values(), ids=EVAL_CASES.keys())
def test_swe_eval_refuses_bad_inputs_before_starting(
    tmp_path, capsys, monkeypatch, content, extra, pattern
):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/rlgate/docker.sock")
    preds = _predictions(tmp_path / "p.jsonl", content)
    argv = ["swe", "eval", "--predictions", str(preds), "--run-dir", str(tmp_path / "run")]
    if "--harness-run-id" not in extra:
        argv += ["--harness-run-id", "r1"]
    code, _, err = run_cli([*argv, *extra], capsys)
    assert_one_error(code, err, 2, pattern)
    assert not (tmp_path / "run").exists()


# --- mutated bytes: every input format, exit 0-3 and never a traceback -------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One valid input of each format on a 4-instance Verified subset (graded by swebench)."""
    root = tmp_path_factory.mktemp("corpus")
    ids = list(FOUR_IDS)
    kinds = [si.RESOLVED, si.UNRESOLVED, si.PATCH_FAILED, si.RESOLVED]
    run = si.write_harness_run(
        root / "run", "r", dict(zip(ids, kinds, strict=True)), dataset_ids=ids
    )
    _dump(run.root / "rlgate_swe_eval.json", {"final_report": run.final_report.name})
    files = {
        "dataset": si.write_subset_dataset(root / "u.jsonl", ids),
        "final_report": run.final_report,
        "instance_report": run.log_dir / "org__model" / ids[0] / "report.json",
        "eval_record": run.root / "rlgate_swe_eval.json",
        "instance_map": _dump(
            root / "map.json", {i: {"resolved": k % 2 == 0} for k, i in enumerate(ids)}
        ),
        "rollouts": root / "r.jsonl",
    }
    rollouts = [_rollout(i, reward=float(k % 2)) for k, i in enumerate(ids)]
    files["rollouts"].write_text("".join(rollouts))
    return root, run, files


MUTATION = st.tuples(
    st.sampled_from(["replace", "insert", "truncate"]),
    st.floats(0, 1, allow_nan=False),
    st.binary(min_size=1, max_size=8),
)


def _mutate(data: bytes, how: tuple[str, float, bytes]) -> bytes:
    kind, where, chunk = how
    at = int(where * len(data))
    if kind == "truncate":
        return data[:at]
    if kind == "insert":
        return data[:at] + chunk + data[at:]
    return data[:at] + chunk + data[at + len(chunk) :]


@pytest.mark.parametrize(
    "target",
    ["dataset", "final_report", "instance_report", "eval_record", "instance_map", "rollouts"],
)
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(how=MUTATION)
def test_mutated_swe_inputs_never_crash(corpus, capsys, target, how):
    _, run, files = corpus
    path = files[target]
    original = path.read_bytes()
    try:
        path.write_bytes(_mutate(original, how))
        after = {
            "final_report": run.final_report,
            "instance_report": run.log_dir,
            "eval_record": run.root,
            "instance_map": files["instance_map"],
            "rollouts": files["rollouts"],
        }.get(target, files["instance_map"])
        code, _, err = compare(
            capsys, files["instance_map"], after, files["dataset"], "--max-infra-error-rate", "1"
        )
    finally:
        path.write_bytes(original)
    assert code in (0, 1, 2, 3), err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        assert sum("error:" in line for line in err.splitlines()) == 1, err


def test_mutation_corpus_is_valid_before_mutation(corpus, capsys):
    """The unmutated corpus compares cleanly, so mutations are what the test exercises."""
    _, run, files = corpus
    for after in (run.final_report, run.log_dir, run.root, files["rollouts"]):
        code, out, err = compare(
            capsys, files["instance_map"], after, files["dataset"], "--max-infra-error-rate", "1"
        )
        assert code in (0, 1), (after, err)
        assert "SWE gate verdict" in out


# --- odd paths and outputs ----------------------------------------------------------------------


def test_swe_compare_refuses_a_fifo_instead_of_reading_it_forever(tmp_path, capsys, tiny):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    code, _, err = compare(capsys, tiny[1], fifo, tiny[0])
    assert_one_error(code, err, 2, r"r\.jsonl: not a regular file or directory")


def test_a_missing_local_dataset_is_a_usage_error_not_a_hub_lookup(tmp_path, capsys, tiny):
    code, _, err = compare(capsys, tiny[1], tiny[1], tmp_path / "nope.parquet")
    assert_one_error(code, err, 2, r"dataset .*nope\.parquet: no such file or directory")


def test_swe_compare_refuses_json_and_junit_on_the_same_file(tmp_path, capsys, tiny):
    out = str(tmp_path / "out")
    code, _, err = compare(capsys, tiny[1], tiny[1], tiny[0], "--json", out, "--junit", out)
    assert_one_error(code, err, 2, r"--json and --junit name the same file")
    assert not (tmp_path / "out").exists()


def test_swe_compare_refuses_an_integer_literal_python_cannot_convert(tmp_path, capsys, tiny):
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps(final_report())[:-1] + ', "resolved_instances": ' + "9" * 5000 + "}"
    )
    code, _, err = compare(capsys, tiny[1], report, tiny[0])
    assert_one_error(code, err, 2, r"r\.json: not valid JSON: Exceeds the limit")


def test_an_instance_map_entry_without_resolved_is_named(tmp_path, capsys, tiny):
    (tmp_path / "m.json").write_text(
        json.dumps({IDS[0]: {"resolved": True}, IDS[1]: {"resolve": False}})
    )
    code, _, err = compare(capsys, tiny[1], tmp_path / "m.json", tiny[0])
    assert_one_error(code, err, 2, r"m\.json: entry for alpha__one-2 needs a boolean 'resolved'")


def test_swe_compare_refuses_an_output_inside_an_input_run_dir(tmp_path, capsys, tiny, run_dir):
    record = (run_dir / "rlgate_swe_eval.json").read_bytes()
    out = run_dir / "rlgate_swe_eval.json"
    code, _, err = compare(capsys, tiny[1], run_dir, tiny[0], "--junit", str(out))
    assert_one_error(
        code,
        err,
        2,
        r"refusing to write .*rlgate_swe_eval\.json: it is inside the input directory",
    )
    assert out.read_bytes() == record


def test_an_error_id_outside_the_dataset_is_named_when_logs_sit_next_to_the_report(
    tmp_path, capsys
):
    """The sibling logs are looked up per error id; an unknown id is an input error."""
    ids = list(FOUR_IDS)
    kinds = [si.RESOLVED, si.PATCH_FAILED, si.UNRESOLVED, si.RESOLVED]
    run = si.write_harness_run(
        tmp_path / "run", "r", dict(zip(ids, kinds, strict=True)), dataset_ids=ids
    )
    doc = json.loads(run.final_report.read_text())
    doc["error_ids"].append("octo__repo-9")
    doc["error_instances"] += 1
    _dump(run.final_report, doc)
    dataset = si.write_subset_dataset(tmp_path / "u.jsonl", ids)
    code, _, err = compare(capsys, run.final_report, run.final_report, dataset)
    assert_one_error(code, err, 2, r"1 instance id\(s\) are not in the dataset .*octo__repo-9")
