"""The SWE result formats of other tools: NeMo-Skills, mini-swe-agent, SWE-agent, OpenHands.

Each is written by :mod:`.helpers.swe_formats` as its tool writes it (graded by swebench's
own code where the tool runs the harness) and read through ``rlgate swe compare``'s readers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import SweError
from rlgate.swe.readers import load_arm, load_runs, readers
from rlgate.swe.records import InputFormat, Outcome, load_universe

from .helpers import swe_formats as sf
from .helpers import swe_inputs as si

# Verified instances of four test-log parser families
IDS = (
    "django__django-11099",
    "sympy__sympy-20590",
    "psf__requests-2317",
    "astropy__astropy-12907",
)
FOUR = dict(zip(IDS, sf.KINDS, strict=True))  # one instance of each kind


@pytest.fixture(scope="module")
def universe():
    return load_universe(si.DATASET)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(code: int, err: str, pattern: str, expected_code: int = 2) -> None:
    assert code == expected_code, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
    assert re.search(pattern, err), f"{pattern!r} not in {err!r}"


def compare(capsys, before, after, *extra) -> tuple[int, str, str]:
    argv = ["swe", "compare", "--before", str(before), "--after", str(after)]
    resamples = [] if "--resamples" in extra else ["--resamples", "100"]
    return run_cli([*argv, "--dataset", str(si.DATASET), *resamples, *extra], capsys)


def outcomes_of(run) -> dict[str, Outcome]:
    return {i: o.outcome for i, o in run.outcomes.items() if o.outcome is not Outcome.MISSING}


def test_every_format_has_one_registered_reader():
    registered = readers()
    assert {r.fmt for r in registered} == set(InputFormat)
    assert len({r.order for r in registered}) == len(registered)
    # the catch-alls come last: a directory is a log dir, a .jsonl Gym rollouts, when nothing
    # more specific claims it
    assert [r.fmt for r in registered][-2:] == [InputFormat.LOG_DIR, InputFormat.GYM_ROLLOUTS]


# --- NeMo-Skills ------------------------------------------------------------------------------


class TestNemoSkills:
    def test_a_results_directory_is_one_run_per_seed(self, universe, tmp_path):
        out = sf.write_nemo_skills(tmp_path / "ns", [FOUR, FOUR])
        runs = load_runs(out, universe)  # ns eval's --output_dir
        assert [Path(r.label).name for r in runs] == ["output-rs0.jsonl", "output-rs1.jsonl"]
        assert {r.input_format for r in runs} == {InputFormat.NEMO_SKILLS}
        assert outcomes_of(runs[0]) == {
            IDS[0]: Outcome.RESOLVED,
            IDS[1]: Outcome.UNRESOLVED,
            IDS[2]: Outcome.EMPTY_PATCH,
            IDS[3]: Outcome.ERROR,  # NeMo-Skills' evaluation command left no report.json
        }
        assert runs[0].outcomes[IDS[3]].reason == "evaluation command failed (no report.json)"
        assert runs[0].dataset_name == sf.NS_DATASET_NAME
        assert runs[0].scope == frozenset(IDS)
        assert runs[0].label_mismatch == ()
        same = load_runs(out / "eval-results/swe-bench", universe)
        assert [r.label for r in same] == [r.label for r in runs]

    def test_one_seed_file_is_one_run(self, universe, tmp_path):
        out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
        (run,) = load_runs(out / "eval-results/swe-bench/output-rs0.jsonl", universe)
        assert outcomes_of(run)[IDS[0]] is Outcome.RESOLVED

    def test_a_patch_that_did_not_apply_is_read_from_the_eval_log(self, universe, tmp_path):
        out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
        logs = out / "eval-results/swe-bench/rs0/apptainer_logs"
        logs.mkdir(parents=True)
        (logs / f"{IDS[3]}_eval_attempt1.log").write_text("network flake\n")
        (logs / f"{IDS[3]}_eval_attempt3.log").write_text(
            ">>>>> Patch Apply Failed:\npatch: ****\n"
        )
        (run,) = load_runs(out / "eval-results/swe-bench/output-rs0.jsonl", universe)
        assert run.outcomes[IDS[3]].outcome is Outcome.PATCH_FAILED

    def test_swe_compare_reads_nemo_skills_results(self, tmp_path, capsys):
        # on main this was refused: "rollout for ... has no numeric 'reward'"
        before = sf.write_nemo_skills(tmp_path / "b", [FOUR])
        after = sf.write_nemo_skills(tmp_path / "a", [dict.fromkeys(IDS, sf.RESOLVED)])
        code, out, _ = compare(capsys, before, after, "--json", str(tmp_path / "o.json"))
        doc = json.loads((tmp_path / "o.json").read_text())
        assert doc["before"]["runs"][0]["format"] == "nemo_skills"
        assert doc["before"]["runs"][0]["counts"]["error"] == 1
        assert doc["after"]["resolved"] == [4]
        assert code == 3 and doc["verdict"] == "inconclusive", out  # 496 instances missing


def _first(change):
    """A mutation of the first line of an output file."""
    return lambda lines: [change(lines[0]), *lines[1:]]


def _replace(old: str, new: str):
    return _first(lambda line: line.replace(old, new))


ID0 = IDS[0]
NS_HOSTILE = {
    "torn_line": (
        lambda lines: [lines[0], f'{{"instance_id": "{ID0}", "swe-', *lines[1:]],
        r"output-rs0\.jsonl:2: not valid JSON",
    ),
    "unknown_id": (
        _replace(ID0, "django__django-99999"),
        r"1 instance id\(s\) are not in the dataset",
    ),
    "duplicate_conflicting": (
        lambda lines: [*lines, lines[0].replace('"resolved": true', '"resolved": false')],
        rf"output-rs0\.jsonl:5: {ID0} already seen at .*output-rs0\.jsonl:1",
    ),
    "nan": (
        _replace('"resolved": true', '"resolved": NaN'),
        r"needs a boolean 'resolved'; got .*nan",
    ),
    "no_metrics": (
        _replace('"swe-bench-metrics"', '"metrics"'),
        r"output-rs0\.jsonl:1: no 'swe-bench-metrics'",
    ),
    "metrics_list": (
        _first(lambda line: json.dumps({**json.loads(line), "swe-bench-metrics": [1]})),
        rf"swe-bench-metrics of {ID0} must be an object",
    ),
    "resolved_without_patch": (
        _replace('"patch_exists": true', '"patch_exists": false'),
        rf"contradictory entry for {ID0}: resolved=true with patch_exists=False",
    ),
    "null_patch_with_patch": (
        lambda lines: (
            [
                *lines[:2],
                lines[2].replace('"patch_exists": false', '"patch_exists": true'),
                *lines[3:],
            ]
        ),
        r"contradictory row for psf__requests-2317: the agent's model_patch is null",
    ),
    "non_string_id": (
        _first(lambda line: json.dumps({**json.loads(line), "instance_id": 7})),
        r"instance_id must be a string, got int",
    ),
}


@pytest.mark.parametrize(("mutate", "pattern"), list(NS_HOSTILE.values()), ids=list(NS_HOSTILE))
def test_swe_compare_refuses_hostile_nemo_skills_results(tmp_path, capsys, mutate, pattern):
    out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
    path = out / "eval-results/swe-bench/output-rs0.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(mutate(lines)) + "\n")
    good = sf.write_nemo_skills(tmp_path / "good", [FOUR])
    code, _, err = compare(capsys, good, out)
    assert_one_error(code, err, pattern)


@pytest.mark.parametrize(
    ("leftover", "pattern"),
    [
        ("output-rs1.jsonl-async", r"has not finished 1 file\(s\): output-rs1\.jsonl-async"),
        ("output-rs2_chunk3.jsonl", r"has not finished 1 file\(s\): output-rs2_chunk3\.jsonl"),
        ("output-rs0.jsonl-async", r"has not finished 1 file\(s\): output-rs0\.jsonl-async"),
        ("output.jsonl", r"holds both the greedy output\.jsonl and seeded output-rs\*\.jsonl"),
    ],
)  # fmt: skip
def test_an_unfinished_nemo_skills_directory_is_refused(tmp_path, capsys, leftover, pattern):
    out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
    results = out / "eval-results/swe-bench"
    (results / leftover).write_text((results / "output-rs0.jsonl").read_text())
    code, _, err = compare(capsys, out, out / "eval-results/swe-bench/output-rs0.jsonl")
    assert_one_error(code, err, pattern)


def test_a_chunk_left_next_to_its_merged_file_is_not_unfinished(universe, tmp_path):
    out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
    results = out / "eval-results/swe-bench"
    (results / "output-rs0_chunk0.jsonl").write_text("")
    assert len(load_runs(out, universe)) == 1


def test_a_nemo_skills_arm_counts_its_seeds(universe, tmp_path):
    out = sf.write_nemo_skills(tmp_path / "ns", [FOUR, FOUR, FOUR])
    arm = load_arm("before", [out], universe)
    assert len(arm.runs) == 3


def test_an_error_names_the_nemo_skills_file(universe, tmp_path):
    out = sf.write_nemo_skills(tmp_path / "ns", [FOUR])
    path = out / "eval-results/swe-bench/output-rs0.jsonl"
    path.write_bytes(path.read_bytes() + b'{"instance_id": "\xff"}\n')
    with pytest.raises(SweError, match=r"output-rs0\.jsonl:5: not UTF-8"):
        load_runs(out, universe)


# --- one set of outcomes in every format ---------------------------------------------------


def _arms(
    ids: list[str], *, gained: int = 45, lost: int = 10, infra_after: int = 5
) -> tuple[dict[str, str], dict[str, str]]:
    """Before/after outcomes: the after model gains and loses instances, infra in both arms."""
    before, after = {}, {}
    for k, iid in enumerate(ids):
        kind = [sf.RESOLVED, sf.RESOLVED, sf.UNRESOLVED, sf.UNRESOLVED, sf.UNRESOLVED][k % 5]
        if k % 50 == 7:
            kind = sf.EMPTY_PATCH
        if k % 100 == 13:
            kind = sf.INFRA
        before[iid] = after[iid] = kind
    flips = [i for i in ids if before[i] == sf.UNRESOLVED][:gained]
    for iid in flips:
        after[iid] = sf.RESOLVED
    for iid in [i for i in ids if before[i] == sf.RESOLVED][:lost]:
        after[iid] = sf.UNRESOLVED
    for iid in [i for i in ids if before[i] == sf.UNRESOLVED and i not in flips][:infra_after]:
        after[iid] = sf.INFRA
    return before, after


#: what each format's reader makes of the "infra" kind (both count as infrastructure)
INFRA_AS = {"nemo_skills": Outcome.ERROR}
EXPECTED = {
    sf.RESOLVED: Outcome.RESOLVED,
    sf.UNRESOLVED: Outcome.UNRESOLVED,
    sf.EMPTY_PATCH: Outcome.EMPTY_PATCH,
}


@pytest.fixture(scope="module")
def every_format(tmp_path_factory):
    """The same before/after outcomes over the 500 Verified ids, written in every format."""
    ids = [r["instance_id"] for r in si.verified_rows()]
    before, after = _arms(ids)
    root = tmp_path_factory.mktemp("formats")
    written = {
        fmt: (write(root / fmt / "before", before), write(root / fmt / "after", after))
        for fmt, write in sf.WRITERS.items()
    }
    return before, after, written


def test_every_format_gives_the_same_outcomes_and_verdict(every_format, universe, tmp_path, capsys):
    before, after, written = every_format
    assert set(written) == {f.value for f in InputFormat} - {"log_dir", "instance_map"}
    docs = {}
    for fmt, (b, a) in written.items():
        for path, outcomes in ((b, before), (a, after)):
            (run,) = load_runs(path, universe)
            assert run.input_format.value == fmt
            expected = {**EXPECTED, sf.INFRA: INFRA_AS.get(fmt, Outcome.INFRA)}
            got = {i: o.outcome for i, o in run.outcomes.items()}
            assert got == {i: expected[k] for i, k in outcomes.items()}, fmt
        out = tmp_path / f"{fmt}.json"
        code, _, err = compare(capsys, b, a, "--json", str(out), "--resamples", "1000")
        assert code == 0, (fmt, err)
        docs[fmt] = json.loads(out.read_text())
    reference = docs.pop("final_report")
    assert reference["verdict"] == "improved"
    assert (reference["gained"], reference["lost"]) == (45, 10)
    for fmt, doc in docs.items():
        for key in ("verdict", "delta_pp", "p_value", "ci95_pp", "gained", "lost", "test"):
            assert doc[key] == reference[key], (fmt, key)
        for arm in ("before", "after"):
            for key in ("resolved", "rate", "infra_error_rate", "empty_patch", "n_instances"):
                assert doc[arm][key] == reference[arm][key], (fmt, arm, key)
        assert [c["status"] for c in doc["criteria"]] == [
            c["status"] for c in reference["criteria"]
        ], fmt


@pytest.mark.parametrize("fmt", sorted(sf.WRITERS))
def test_infra_in_any_format_makes_the_comparison_inconclusive(fmt, tmp_path, capsys):
    # 40 instances, 6 of them failed by the environment in the after arm (15 %): every
    # format's reader must count them as infrastructure, never as the model's failures
    ids = [r["instance_id"] for r in si.verified_rows()][:40]
    dataset = si.write_subset_dataset(tmp_path / "subset.jsonl", ids)
    before, after = _arms(ids, gained=5, lost=2, infra_after=6)
    b = sf.WRITERS[fmt](tmp_path / "before", before)
    a = sf.WRITERS[fmt](tmp_path / "after", after)
    argv = ["swe", "compare", "--before", str(b), "--after", str(a), "--dataset", str(dataset)]
    code, out, err = run_cli(
        [*argv, "--resamples", "100", "--json", str(tmp_path / "o.json")], capsys
    )
    doc = json.loads((tmp_path / "o.json").read_text())
    assert code == 3 and doc["verdict"] == "inconclusive", (fmt, out, err)
    assert doc["after"]["infra_error_rate"] == [pytest.approx(7 / 40)]  # 1 + 6


# --- the agent formats, one by one ------------------------------------------------------------


class TestAgentFormats:
    @pytest.mark.parametrize(
        ("fmt", "infra_reason"),
        [
            ("mini_swe_agent", "mini-swe-agent: RuntimeError"),
            ("swe_agent", "SWE-agent: Uncaught RuntimeError"),
            ("openhands", "OpenHands: Timeout after 3600 seconds"),
        ],
    )
    def test_the_agents_own_infra_status_is_infra_not_an_empty_patch(
        self, universe, tmp_path, fmt, infra_reason
    ):
        path = sf.WRITERS[fmt](tmp_path / fmt, FOUR)
        (run,) = load_runs(path, universe)
        assert outcomes_of(run) == {
            IDS[0]: Outcome.RESOLVED,
            IDS[1]: Outcome.UNRESOLVED,
            IDS[2]: Outcome.EMPTY_PATCH,  # a model failure: step/cost limit, max iterations
            IDS[3]: Outcome.INFRA,  # the harness alone calls it empty (or missing)
        }
        assert run.outcomes[IDS[3]].reason == infra_reason

    def test_an_openhands_output_file_reads_as_its_directory(self, universe, tmp_path):
        path = sf.write_openhands(tmp_path / "oh", FOUR)
        (run,) = load_runs(path / "output.jsonl", universe)
        assert run.input_format is InputFormat.OPENHANDS and run.label == str(path)

    @pytest.mark.parametrize(
        ("status", "infra"),
        [
            ("submitted", False),
            ("submitted (exit_cost)", False),
            ("skipped (submitted (exit_context))", False),
            ("exit_format", False),
            ("exit_total_execution_time", True),
            ("submitted (exit_command_timeout)", True),
            ("exit_environment_error", True),
            ("exit_api", True),
            ("Uncaught DockerException", True),
            ("some_new_status", True),
        ],
    )
    def test_swe_agent_statuses(self, status, infra):
        from rlgate.swe.readers.formats.swe_agent import is_infra

        assert is_infra(status) is infra

    @pytest.mark.parametrize(
        ("status", "infra"),
        [
            ("Submitted", False),
            ("LimitsExceeded", False),
            ("ContextWindowExceededError", False),
            ("TimeExceeded", True),
            ("APIConnectionError", True),
            ("Uncaught RuntimeError", True),
        ],
    )
    def test_mini_swe_agent_statuses(self, status, infra):
        from rlgate.swe.readers.formats.mini_swe_agent import is_infra

        assert is_infra(status) is infra

    def test_openhands_errors_are_classified_as_gym_classifies_them(self):
        pytest.importorskip("tomlkit")
        from responses_api_agents.swe_agents.app import _classify_agent_error

        from rlgate.swe.readers.formats.openhands import agent_error_kind

        for error in (
            sf.OH_MAX_ITERATIONS,
            "ContextWindowExceededError: litellm.ContextWindowExceededError: too long",
            "LLMContextWindowExceedError: Conversation history longer than LLM context window",
            "AgentStuckInLoopError: Agent got stuck in a loop",
            "AgentRuntimeUnavailableError: runtime not available",
            "Timeout after 3600 seconds",
        ):
            assert agent_error_kind(error) == _classify_agent_error(error), error


def _rewrite_json(path: Path, change) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def _yaml_status(path: Path, status, ids) -> None:
    path.write_text(sf.yaml.dump({"instances_by_exit_status": {status: ids}}))


HOSTILE_AGENT_DIRS = {
    "mini_preds_not_a_mapping": (
        "mini_swe_agent",
        lambda d: (d / "preds.json").write_text("[1, 2]"),
        r"preds\.json: expected \{instance_id: prediction\}, got list",
    ),
    "mini_torn_yaml": (
        "mini_swe_agent",
        lambda d: (d / "exit_statuses_1760000000.5.yaml").write_text(
            "instances_by_exit_status: {a: [\n"
        ),
        r"exit_statuses_1760000000\.5\.yaml: not valid YAML",
    ),
    "mini_one_id_two_statuses": (
        "mini_swe_agent",
        lambda d: (d / "exit_statuses_1760000000.5.yaml").write_text(
            sf.yaml.dump(
                {"instances_by_exit_status": {"Submitted": [IDS[0]], "TimeExceeded": [IDS[0]]}}
            )
        ),
        r"django__django-11099 is listed under two exit statuses: 'Submitted' and 'TimeExceeded'",
    ),
    "mini_nan_status": (
        "mini_swe_agent",
        lambda d: (d / "exit_statuses_1760000000.5.yaml").write_text(
            "instances_by_exit_status:\n  .nan: [django__django-11099]\n"
        ),
        r"must map exit statuses to lists of instance ids",
    ),
    "mini_unknown_id": (
        "mini_swe_agent",
        lambda d: _yaml_status(
            d / "exit_statuses_1760000001.yaml", "RuntimeError", ["django__django-99999"]
        ),
        r"1 instance id\(s\) are not in the dataset .*django__django-99999",
    ),
    "mini_report_of_other_predictions": (
        "mini_swe_agent",
        lambda d: _rewrite_json(
            d / "preds.json", lambda p: {k: v for k, v in p.items() if k != IDS[0]}
        ),
        rf"grades other predictions than .*preds\.json \(submitted only in the report: {ID0}",
    ),
    "mini_no_report": (
        "mini_swe_agent",
        lambda d: (d / f"{sf.MODEL.replace('/', '__')}.mini.json").unlink(),
        r"mini-swe-agent predictions \(preds\.json\) without a SWE-bench harness report",
    ),
    "mini_two_reports": (
        "mini_swe_agent",
        lambda d: (d / "copy.json").write_text(
            (d / f"{sf.MODEL.replace('/', '__')}.mini.json").read_text()
        ),
        r"2 SWE-bench harness reports",
    ),
    "mini_trajectory_status_not_text": (
        "mini_swe_agent",
        lambda d: _rewrite_json(
            d / IDS[0] / f"{IDS[0]}.traj.json", lambda t: t | {"info": {"exit_status": 3}}
        ),
        r"traj\.json: info\.exit_status must be a string, got 3",
    ),
    "swe_agent_without_preds": (
        "swe_agent",
        lambda d: (d / "preds.json").unlink(),
        r"a SWE-agent output directory without preds\.json",
    ),
    "swe_agent_duplicate_conflicting_prediction": (
        "swe_agent",
        lambda d: (d / "preds.json").write_text(
            (d / "preds.json")
            .read_text()
            .replace("{", '{"django__django-11099": {"model_patch": ""}, ', 1)
        ),
        r"the key 'django__django-11099' appears twice",
    ),
    "openhands_duplicate_rows": (
        "openhands",
        lambda d: (d / "output.jsonl").write_text(
            (d / "output.jsonl").read_text()
            + (d / "output.jsonl").read_text().splitlines()[1]
            + "\n"
        ),
        r"output\.jsonl:5: sympy__sympy-20590 already seen at .*output\.jsonl:2",
    ),
    "openhands_torn_line": (
        "openhands",
        lambda d: (d / "output.jsonl").write_text((d / "output.jsonl").read_text()[:-40]),
        r"output\.jsonl:4: not valid JSON",
    ),
    "openhands_nan_error": (
        "openhands",
        lambda d: (d / "output.jsonl").write_text(
            (d / "output.jsonl").read_text().replace('"error": null', '"error": NaN', 1)
        ),
        r"error of django__django-11099 must be a string or null, got nan",
    ),
    "openhands_no_report": (
        "openhands",
        lambda d: (d / "report.json").unlink(),
        r"OpenHands predictions \(output\.jsonl\) without a SWE-bench harness report",
    ),
}


@pytest.mark.parametrize(("fmt", "break_it", "pattern"), list(HOSTILE_AGENT_DIRS.values()),
                         ids=list(HOSTILE_AGENT_DIRS))  # fmt: skip
def test_swe_compare_refuses_hostile_agent_outputs(tmp_path, capsys, fmt, break_it, pattern):
    good = sf.WRITERS[fmt](tmp_path / "good", FOUR)
    bad = sf.WRITERS[fmt](tmp_path / "bad", FOUR)
    break_it(bad)
    code, _, err = compare(capsys, good, bad)
    assert_one_error(code, err, pattern)


# --- a real mini-swe-agent output directory --------------------------------------------------

MINI_SAMPLE = Path(__file__).parent / "data/mini_swe_agent_2.4.6"  # tools/mini_swe_agent_sample.py


def test_a_real_mini_swe_agent_output_directory(universe, tmp_path):
    import shutil

    out = tmp_path / "mini"
    shutil.copytree(MINI_SAMPLE, out)
    preds = json.loads((out / "preds.json").read_text())
    kinds = {"django__django-11099": si.RESOLVED, "sympy__sympy-20590": si.EMPTY_PATCH,
             "psf__requests-2317": si.EMPTY_PATCH}  # fmt: skip
    si.write_harness_run(out, "mini", kinds, model=sf.MODEL, dataset_ids=list(kinds))
    (out / "preds.jsonl").unlink()
    assert {p["model_patch"] != "" for p in preds.values()} == {True, False}
    (run,) = load_runs(out, universe)
    assert outcomes_of(run) == {
        "django__django-11099": Outcome.RESOLVED,
        "sympy__sympy-20590": Outcome.EMPTY_PATCH,  # LimitsExceeded: the model's
        "psf__requests-2317": Outcome.INFRA,  # its environment could not be created
    }
    assert run.outcomes["psf__requests-2317"].reason == "mini-swe-agent: FileNotFoundError"


def test_the_mini_swe_agent_writer_writes_what_the_tool_writes(tmp_path):
    real_traj = json.loads(
        (MINI_SAMPLE / "django__django-11099/django__django-11099.traj.json").read_text()
    )
    real_preds = json.loads((MINI_SAMPLE / "preds.json").read_text())
    real_yaml = sf.yaml.safe_load(next(MINI_SAMPLE.glob("exit_statuses_*.yaml")).read_text())
    out = sf.write_mini_swe_agent(tmp_path / "mini", FOUR)
    traj = json.loads((out / IDS[0] / f"{IDS[0]}.traj.json").read_text())
    assert set(traj) == set(real_traj)
    assert set(traj["info"]) <= set(real_traj["info"])
    assert traj["trajectory_format"] == real_traj["trajectory_format"]
    preds = json.loads((out / "preds.json").read_text())
    assert {frozenset(p) for p in preds.values()} == {frozenset(p) for p in real_preds.values()}
    written = sf.yaml.safe_load(next(out.glob("exit_statuses_*.yaml")).read_text())
    assert set(written) == set(real_yaml)


# --- a real SWE-agent 0.x output directory (SWE-agent's own test data) ----------------------------

SWE_AGENT_0X = Path(__file__).parent / "data/swe_agent_0.x"


def test_a_real_swe_agent_0x_output_directory(tmp_path):
    import shutil

    from .helpers.swe_logs import write_final_report

    out = tmp_path / "sweagent"
    shutil.copytree(SWE_AGENT_0X, out)
    dataset = out / "dataset.json"  # swe-bench-dev-easy_first_only.json of the same repository
    universe = load_universe(dataset)
    (pred,) = [json.loads(line) for line in (out / "all_preds.jsonl").read_text().splitlines()]
    iid, model = pred["instance_id"], pred["model_name_or_path"]
    # its per-instance report as swebench's run_instance leaves it (the dev set has no v5
    # fields to grade with), then the real make_run_report over it
    inst = out / "logs/run_evaluation/r0" / model / iid
    inst.mkdir(parents=True)
    entry = {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True,
             "resolved": True}  # fmt: skip
    (inst / "report.json").write_text(json.dumps({iid: entry}))
    rows = json.loads(dataset.read_text())
    write_final_report({iid: pred}, rows, "r0", out, out)
    (run,) = load_runs(out, universe)
    assert run.input_format is InputFormat.SWE_AGENT
    assert outcomes_of(run)[iid] is Outcome.RESOLVED  # its trajectory says "submitted"
    # the same run whose trajectory says the environment failed: infra, unless resolved
    traj = json.loads((out / f"{iid}.traj").read_text())
    traj["info"]["exit_status"] = "exit_environment_error"
    (out / f"{iid}.traj").write_text(json.dumps(traj))
    entry["resolved"] = False
    (inst / "report.json").write_text(json.dumps({iid: entry}))
    for report in out.glob(f"{model}.r0.json"):
        report.unlink()
    write_final_report({iid: pred}, rows, "r0", out, out)
    (run,) = load_runs(out, universe)
    assert run.outcomes[iid].outcome is Outcome.INFRA
    assert run.outcomes[iid].reason == "SWE-agent: exit_environment_error"
