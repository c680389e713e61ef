"""`rlgate swe compare --exclude known-broken[:LIST]|flaky`: full and reduced side by side.

Inputs are per-instance maps on the real SWE-bench Verified ids (RLGATE_SWE_DATASET), as in
test_cli_swe.py, with several seeds per arm drawn from a seeded simulation; the release
report reads what `swe compare` wrote.
"""

import contextlib
import io
import json

import numpy as np
import pytest

from rlgate.cli.app import main
from rlgate.core.junit import read_junit
from rlgate.report.build import build_report
from rlgate.report.render import render_markdown
from rlgate.swe.known_broken import known_broken_ids

from .helpers import report_inputs as ri
from .helpers import swe_inputs as si

SEED = 29
RESAMPLES = "1000"


def _write_maps(root, ids, matrix, arm):
    paths = []
    for k, row in enumerate(matrix):
        path = root / f"{arm}_s{k}.json"
        path.write_text(
            json.dumps({i: {"resolved": bool(v)} for i, v in zip(ids, row, strict=True)})
        )
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def ids():
    return sorted(r["instance_id"] for r in si.verified_rows())


@pytest.fixture(scope="module")
def seeds(tmp_path_factory, ids):
    """3 seeds per arm; the trained model gains 10% of instances, and each seed of each arm
    flips 4% of its instances at random (flaky ones, known to the test)."""
    rng = np.random.default_rng(SEED)
    base = rng.random(500) < 0.4
    trained = base | (rng.random(500) < 0.1)
    before = np.vstack([base ^ (rng.random(500) < 0.04) for _ in range(3)])
    after = np.vstack([trained ^ (rng.random(500) < 0.04) for _ in range(3)])
    root = tmp_path_factory.mktemp("seeds")
    return {
        "before": _write_maps(root, ids, before, "before"),
        "after": _write_maps(root, ids, after, "after"),
        "one_before": _write_maps(root, ids, before[:1], "one_before"),
        "one_after": _write_maps(root, ids, after[:1], "one_after"),
        "flaky": {
            i
            for i, b, a in zip(ids, before.T, after.T, strict=True)
            if len(set(b)) == 2 or len(set(a)) == 2
        },
        "matrices": (before, after),
    }


def _compare(tmp_path, before, after, *extra, dataset=si.DATASET, name="out"):
    argv = ["swe", "compare", "--before", *map(str, before), "--after", *map(str, after),
            "--dataset", str(dataset), "--resamples", RESAMPLES, "--seed", "3",
            "--json", str(tmp_path / f"{name}.json"), "--junit", str(tmp_path / f"{name}.xml"),
            *extra]  # fmt: skip
    return main(argv)


def _doc(tmp_path, name="out"):
    return json.loads((tmp_path / f"{name}.json").read_text())


class TestFlakyIsReported:
    def test_swe_compare_reports_the_flaky_count_and_ids(self, seeds, tmp_path, capsys):
        assert _compare(tmp_path, seeds["before"], seeds["after"]) == 0
        flaky = _doc(tmp_path)["flaky"]
        assert set(flaky["ids"]) == seeds["flaky"] and flaky["count"] == len(seeds["flaky"])
        assert flaky["measured_arms"] == ["before", "after"]
        out = capsys.readouterr().out
        assert f"flaky instances: {len(seeds['flaky'])} (resolved in some runs of one arm" in out
        suite = next(s for s in read_junit(tmp_path / "out.xml") if s.name == "rlgate.swe_gate")
        props = dict(suite.properties)
        assert props["rlgate.flaky.count"] == str(len(seeds["flaky"]))
        assert set(props["rlgate.flaky.ids"].split(",")) == seeds["flaky"]

    def test_one_run_per_arm_says_flakiness_was_not_measured(self, seeds, tmp_path, capsys):
        assert _compare(tmp_path, seeds["one_before"], seeds["one_after"]) == 0
        assert _doc(tmp_path)["flaky"]["measured_arms"] == []
        assert "flaky instances: not measured (one run per arm" in capsys.readouterr().out


class TestKnownBrokenSideBySide:
    def test_full_and_reduced_are_both_reported_and_the_full_one_decides(
        self, seeds, tmp_path, capsys
    ):
        assert _compare(tmp_path, seeds["before"], seeds["after"], name="plain") == 0
        capsys.readouterr()
        code = _compare(tmp_path, seeds["before"], seeds["after"], "--exclude", "known-broken")
        out = capsys.readouterr().out
        plain, doc = _doc(tmp_path, "plain"), _doc(tmp_path)
        assert code == 0
        # the top level is the full comparison, unchanged by --exclude
        assert {k: v for k, v in doc.items() if k != "reduced"} == {
            k: v for k, v in plain.items() if k != "reduced"
        }
        assert plain["reduced"] is None
        reduced = doc["reduced"]
        broken = known_broken_ids()
        assert reduced["gating"] is False and reduced["exclude"] == ["known-broken"]
        assert set(reduced["excluded_ids"]) == broken and reduced["excluded_count"] == 17
        assert [s["label"] for s in reduced["sets"]] == [
            "known-broken:nemo-skills",
            "known-broken:swebench-gold-run-2025-01",
        ]
        assert [s["count"] for s in reduced["sets"]] == [11, 14]
        assert all("github" in s["source"].lower() or "/" in s["source"] for s in reduced["sets"])
        cmp = reduced["comparison"]
        assert cmp["dataset"]["n_instances"] == 483
        assert cmp["dataset"]["instance_set"] == "verified-subset"
        assert cmp["before"]["n_instances"] == cmp["after"]["n_instances"] == 483
        assert not broken & {d["instance_id"] for d in cmp["discordant"]}
        # side by side in the text, the reduced set never called SWE-bench Verified
        full_part, reduced_part = out.split("  reduced comparison (--exclude known-broken)")
        assert "SWE gate verdict: IMPROVED" in full_part
        assert "SWE-bench Verified, all 500 instances" in full_part
        assert "the verdict above is the full comparison's" in reduced_part
        assert "a subset of Verified: 483 of its 500 instances" in reduced_part
        assert "SWE-bench Verified" not in reduced_part
        assert "excluded 17 of 500 instances: known-broken:nemo-skills 11, " in reduced_part

    def test_the_reduced_numbers_are_the_gate_on_the_kept_instances(self, seeds, ids, tmp_path):
        """Same statistics as `swe compare` on a dataset of the kept instances only."""
        assert _compare(tmp_path, seeds["before"], seeds["after"], "--exclude", "known-broken") == 0
        reduced = _doc(tmp_path)["reduced"]["comparison"]
        kept = [i for i in ids if i not in known_broken_ids()]
        dataset = si.write_subset_dataset(tmp_path / "kept.jsonl", kept)
        before, after = seeds["matrices"]
        keep = np.isin(ids, kept)
        sub = tmp_path / "sub"
        sub.mkdir()
        b = _write_maps(sub, kept, before[:, keep], "before")
        a = _write_maps(sub, kept, after[:, keep], "after")
        _compare(tmp_path, b, a, dataset=dataset, name="direct")
        direct = _doc(tmp_path, "direct")
        for key in ("verdict", "delta_pp", "p_value", "ci95_pp", "test", "lost", "gained"):
            assert reduced[key] == direct[key], key
        assert reduced["dataset"]["ids_sha256"] == direct["dataset"]["ids_sha256"]
        assert reduced["dataset"]["labels_sha256"] == direct["dataset"]["labels_sha256"]

    def test_one_list_by_its_id(self, seeds, tmp_path):
        code = _compare(
            tmp_path, seeds["before"], seeds["after"], "--exclude", "known-broken:nemo-skills"
        )
        assert code == 0
        reduced = _doc(tmp_path)["reduced"]
        assert set(reduced["excluded_ids"]) == known_broken_ids(("nemo-skills",))
        assert [s["label"] for s in reduced["sets"]] == ["known-broken:nemo-skills"]
        assert reduced["comparison"]["dataset"]["n_instances"] == 489

    def test_repeated_and_overlapping_exclusions_count_each_instance_once(self, seeds, tmp_path):
        code = _compare(
            tmp_path, seeds["before"], seeds["after"], "--exclude", "known-broken:nemo-skills",
            "--exclude", "known-broken", "--exclude", "known-broken:nemo-skills",
        )  # fmt: skip
        assert code == 0
        reduced = _doc(tmp_path)["reduced"]
        assert [s["label"] for s in reduced["sets"]] == [
            "known-broken:nemo-skills",
            "known-broken:swebench-gold-run-2025-01",
        ]
        assert reduced["excluded_count"] == 17

    def test_the_junit_has_the_reduced_suite_as_information_only(self, seeds, tmp_path):
        _compare(tmp_path, seeds["before"], seeds["after"], "--exclude", "known-broken")
        suites = {s.name: s for s in read_junit(tmp_path / "out.xml")}
        assert set(suites) == {
            "rlgate.swe_gate",
            "rlgate.swe_gate.instances",
            "rlgate.swe_gate.reduced",
        }
        reduced = suites["rlgate.swe_gate.reduced"]
        props = dict(reduced.properties)
        assert "rlgate.verdict" not in props  # the suite verdict is the full comparison's
        assert props["rlgate.reduced.gating"] == "false"
        assert props["rlgate.reduced.excluded_count"] == "17"
        assert props["rlgate.reduced.instance_set"] == "verified-subset"
        assert "SWE-bench Verified" not in props["rlgate.reduced.instance_set.text"]
        assert [c.result.informational for c in reduced.cases] == ["reduced"] * 5
        assert dict(suites["rlgate.swe_gate"].properties)["rlgate.verdict"] == "improved"

    def test_an_exclusion_naming_nothing_here_is_reported_with_zero(self, tmp_path, capsys):
        names = [f"octo__repo-{k}" for k in range(40)]
        dataset = tmp_path / "own.json"
        dataset.write_text(json.dumps([{"instance_id": i, "repo": "octo/repo"} for i in names]))
        b, a = tmp_path / "b.json", tmp_path / "a.json"
        b.write_text(json.dumps({i: {"resolved": k % 2 == 0} for k, i in enumerate(names)}))
        a.write_text(json.dumps({i: {"resolved": k % 3 == 0} for k, i in enumerate(names)}))
        code = _compare(tmp_path, [b], [a], "--exclude", "known-broken", dataset=dataset)
        doc = _doc(tmp_path)
        assert code in (0, 1)
        assert doc["reduced"]["excluded_count"] == 0
        assert [s["count"] for s in doc["reduced"]["sets"]] == [0, 0]
        assert [s["listed"] for s in doc["reduced"]["sets"]] == [11, 14]
        assert doc["reduced"]["comparison"]["delta_pp"] == doc["delta_pp"]
        out = capsys.readouterr().out
        assert "excluded 0 of 40 instances: known-broken:nemo-skills 0 (of 11 listed)" in out


@pytest.fixture(scope="module")
def lossy(ids, tmp_path_factory):
    """The trained model loses instances it only sometimes solves: a regression on the full
    set (exit 1) that vanishes once the flaky instances are excluded."""
    root = tmp_path_factory.mktemp("lossy")
    rng = np.random.default_rng(SEED + 1)
    base = rng.random(500) < 0.5
    before = np.vstack([base] * 3)
    after = np.vstack([base & (rng.random(500) > 0.15) for _ in range(3)])
    b = _write_maps(root, ids, before, "before")
    a = _write_maps(root, ids, after, "after")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = _compare(root, b, a, "--exclude", "flaky")
    return code, out.getvalue(), root


class TestFlakyExclusion:
    def test_exclude_flaky_removes_exactly_the_flaky_instances(self, seeds, tmp_path):
        assert _compare(tmp_path, seeds["before"], seeds["after"], "--exclude", "flaky") == 0
        doc = _doc(tmp_path)
        reduced = doc["reduced"]
        assert set(reduced["excluded_ids"]) == seeds["flaky"]
        assert reduced["comparison"]["dataset"]["n_instances"] == 500 - len(seeds["flaky"])
        assert reduced["comparison"]["flaky"]["count"] == 0

    def test_the_verdict_and_exit_code_stay_the_full_comparisons(self, lossy):
        code, out, root = lossy
        doc = _doc(root)
        assert doc["verdict"] == "regressed" and code == 1
        assert doc["reduced"]["comparison"]["verdict"] == "no_significant_change"
        assert "SWE gate verdict: REGRESSED" in out
        assert "note: the reduced verdict (no_significant_change) differs from the full one " in out

    def test_a_report_from_the_junit_alone_takes_the_full_verdict(self, lossy):
        _, _, root = lossy
        report = build_report([root / "out.xml"], draw_plots=False)
        assert report.swe_evidence.stated.value == "regressed"
        assert report.swe_evidence.instance_set.value == "swe-bench-verified"
        assert report.verdict.value == "NO-GO"
        reduced = [c for c in report.junit.cases if c.informational == "reduced"]
        assert len(reduced) == 5 and not any(c.gating for c in reduced)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("rlgate: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return err


class TestBadExclusions:
    @pytest.mark.parametrize(
        ("value", "message"),
        [
            pytest.param("nope", "--exclude 'nope' is not an exclusion", id="unknown_name"),
            pytest.param(
                "flaky:x", "--exclude 'flaky:x' is not an exclusion", id="flaky_with_list"
            ),
            pytest.param(
                "known-broken:nope",
                "--exclude 'known-broken:nope': no bundled known-broken list 'nope'",
                id="unknown_list",
            ),
            pytest.param(
                "known-broken:",
                "--exclude 'known-broken:': no bundled known-broken list ''",
                id="empty_list_id",
            ),
            pytest.param(
                "Known-Broken", "--exclude 'Known-Broken' is not an exclusion", id="wrong_case"
            ),
        ],
    )
    def test_an_unknown_exclusion_exits_two_with_one_message_and_writes_nothing(
        self, seeds, tmp_path, capsys, value, message
    ):
        code = _compare(tmp_path, seeds["before"], seeds["after"], "--exclude", value)
        assert code == 2
        err = _one_error(capsys)
        assert message in err
        assert "nemo-skills, swebench-gold-run-2025-01" in err  # the hint names the lists
        assert not (tmp_path / "out.json").exists() and not (tmp_path / "out.xml").exists()

    def test_exclude_flaky_with_one_run_per_arm_is_reported_not_formed(
        self, seeds, tmp_path, capsys
    ):
        """Nothing can flip with one run per arm: the reduced comparison is said to be
        unformed; the exit code and the JSON's top level stay the full comparison's."""
        plain = _compare(tmp_path, seeds["one_before"], seeds["one_after"], name="plain")
        capsys.readouterr()
        code = _compare(tmp_path, seeds["one_before"], seeds["one_after"], "--exclude", "flaky")
        out = capsys.readouterr().out
        assert code == plain == 0
        doc, full = _doc(tmp_path), _doc(tmp_path, "plain")
        assert doc["reduced"] is None and full["reduced_not_formed"] is None
        unformed = doc["reduced_not_formed"]
        assert unformed["gating"] is False and unformed["exclude"] == ["flaky"]
        assert unformed["reason"].startswith("flaky: every arm has fewer than 2 runs")
        keys = set(doc) - {"reduced_not_formed"}
        assert {k: doc[k] for k in keys} == {k: full[k] for k in keys}
        assert "reduced comparison (--exclude flaky): not formed: flaky: every arm" in out
        assert "the verdict above is the full comparison's" in out
        suite = next(s for s in read_junit(tmp_path / "out.xml") if s.name.endswith(".reduced"))
        props = dict(suite.properties)
        assert props["rlgate.reduced.formed"] == "false" and not suite.cases
        assert props["rlgate.reduced.not_formed"] == unformed["reason"]

    def test_excluding_every_instance_is_reported_not_formed(self, tmp_path, capsys):
        broken = sorted(known_broken_ids(("nemo-skills",)))
        dataset = si.write_subset_dataset(tmp_path / "broken.jsonl", broken)
        run = tmp_path / "run.json"
        run.write_text(json.dumps({i: {"resolved": True} for i in broken}))
        plain = _compare(tmp_path, [run], [run], dataset=dataset, name="plain")
        code = _compare(tmp_path, [run], [run], "--exclude", "known-broken", dataset=dataset)
        assert code == plain
        unformed = _doc(tmp_path)["reduced_not_formed"]
        assert "the exclusions remove all 11 instances" in unformed["reason"]
        assert unformed["sets"][0] | {"source": ""} == {
            "label": "known-broken:nemo-skills",
            "count": 11,
            "listed": 11,
            "source": "",
        }
        assert "not formed: the exclusions remove all 11 instances" in capsys.readouterr().out


@pytest.fixture(scope="module")
def report_swe(tmp_path_factory):
    """`swe compare --exclude known-broken` on the report helpers' improved demo seeds."""
    before, after = ri._maps()
    out = tmp_path_factory.mktemp("report_swe")
    argv = ["swe", "compare", "--before", *map(str, before), "--after", *map(str, after),
            "--dataset", str(si.DATASET), "--resamples", "2000", "--seed", "1",
            "--exclude", "known-broken", "--json", str(out / "swe.json"),
            "--junit", str(out / "swe.xml")]  # fmt: skip
    assert main(argv) == 0
    return out / "swe.json", out / "swe.xml"


class TestReleaseReport:
    def _report(self, swe_json, swe_xml):
        kwargs = ri.full_set()
        kwargs["junit"] = [*kwargs["junit"][:-1], swe_xml]
        kwargs["swe"] = swe_json
        return build_report(**kwargs, draw_plots=False)

    def test_the_report_shows_the_reduced_comparison_and_keeps_the_full_verdict(self, report_swe):
        plain = build_report(**ri.full_set(), draw_plots=False)
        report = self._report(*report_swe)
        assert report.verdict.value == plain.verdict.value == "GO"
        md = render_markdown(report)
        section = md.split('<a id="swe"></a>')[1].split('<a id="runs"></a>')[0]
        assert "reduced comparison (--exclude known-broken; shown, never decides)" in section
        assert "on a 483-instance subset of SWE-bench Verified: verdict" in section
        assert (
            "| instance set | SWE-bench Verified | a 483-instance subset of SWE-bench Verified |"
            in section
        )
        assert "| instances | 500 | 483 |" in section
        assert report.swe_evidence.reduced.instance_set.value == "verified-subset"

    def test_the_story_names_the_reduced_set_as_a_subset(self, report_swe):
        story = self._report(*report_swe).story
        full, reduced = story.split("without 17 excluded instances (known-broken)")
        assert "improves from" in full and "on SWE-bench Verified (" in full
        assert (
            reduced.startswith(": ")
            and " on a 483-instance subset of SWE-bench Verified," in reduced
        )

    def test_a_reduced_set_claiming_to_be_verified_is_a_contradiction_not_a_name(
        self, report_swe, tmp_path
    ):
        doc = json.loads(report_swe[0].read_text())
        doc["reduced"]["comparison"]["dataset"]["instance_set"] = "swe-bench-verified"
        edited = tmp_path / "swe.json"
        edited.write_text(json.dumps(doc))
        report = self._report(edited, report_swe[1])
        assert report.verdict.value == "GO"  # the reduced comparison never decides
        md = render_markdown(report)
        assert "CONTRADICTION (reduced): it claims the full SWE-bench Verified set" in md
        assert "on an unrecognised 483-instance set: verdict" in md
        tail = report.story.split("without 17 excluded instances (known-broken)")[1]
        assert tail.startswith(", the reduced comparison contradicts itself)")
        assert "SWE-bench Verified" not in tail

    def test_a_reduced_count_that_does_not_add_up_exits_two(self, report_swe, tmp_path, capsys):
        doc = json.loads(report_swe[0].read_text())
        doc["reduced"]["excluded_count"] = 3
        edited = tmp_path / "swe.json"
        edited.write_text(json.dumps(doc))
        code = main(
            ["report", "--junit", str(report_swe[1]), "--swe", str(edited),
             "--out", str(tmp_path / "rep"), "--no-plots"]
        )  # fmt: skip
        assert code == 2
        err = _one_error(capsys)
        assert "483 instances kept + 3 excluded is not the full comparison's 500" in err


class TestFlakyAcrossStoredRuns:
    """One seed per nightly cannot show a flip; the seeds the history stored can."""

    def nightly(self, seeds, tmp_path, db, k, *extra):
        return _compare(
            tmp_path, seeds["before"][k : k + 1], seeds["after"][k : k + 1],
            "--db", db, "--run-id", f"swe-n{k}", "--before-model", "base",
            "--after-model", "trained", *extra, name=f"n{k}",
        )  # fmt: skip

    def flips(self, matrix) -> set[str]:
        return {i for i, col in zip(self.ids, matrix.T, strict=True) if len(set(col)) == 2}

    def test_history_flaky_and_exclude_flaky_read_the_stored_seeds(
        self, seeds, ids, tmp_path, capsys
    ):
        self.ids = ids
        before, after = seeds["matrices"]
        db = str(tmp_path / "h.db")
        assert self.nightly(seeds, tmp_path, db, 0) == 0
        # one stored run per model: still nothing can flip, and --exclude flaky says so; the
        # exit code is the full comparison's, and the nightly is recorded as without it
        assert self.nightly(seeds, tmp_path, db, 1, "--exclude", "flaky") == 0
        out = capsys.readouterr().out
        assert "not formed: flaky: every arm has fewer than 2 runs, nor does the history" in out
        assert "history: recorded run swe-n1" in out
        # nightly 2: its own arms have one run each; the stored seeds 0 and 1 show flips
        assert self.nightly(seeds, tmp_path, db, 2, "--exclude", "flaky") == 0
        capsys.readouterr()
        stored = self.flips(before[:2]) | self.flips(after[:2])
        reduced = _doc(tmp_path, "n2")["reduced"]
        assert set(reduced["excluded_ids"]) == stored and stored
        assert _doc(tmp_path, "n2")["flaky"]["count"] == 0  # the comparison alone saw none
        (flaky_set,) = reduced["sets"]
        assert "stored runs of base, trained" in flaky_set["source"]

        out_json = tmp_path / "flaky.json"
        assert main(["history", "flaky", "--db", db, "--json", str(out_json)]) == 0
        out = capsys.readouterr().out
        doc = json.loads(out_json.read_text())["models"]
        assert doc["base"]["runs"] == 3 and doc["trained"]["runs"] == 3
        assert {f["instance_id"] for f in doc["base"]["flaky"]} == self.flips(before)
        assert {f["instance_id"] for f in doc["trained"]["flaky"]} == self.flips(after)
        some = doc["base"]["flaky"][0]
        assert 0 < some["resolved"] < some["graded"] == 3
        assert f"base     3 run(s)  {len(self.flips(before))} flaky instance(s)" in out

        assert main(["history", "flaky", "--db", db, "--model", "nobody"]) == 0
        assert "nobody  0 run(s)  not measured (needs 2 runs)" in capsys.readouterr().out

    def test_an_empty_history_says_so_and_an_output_never_overwrites_the_db(self, tmp_path, capsys):
        from rlgate.history.store import open_store

        db = tmp_path / "h.db"
        open_store(db).close()  # a history database with no runs (flaky creates none)
        assert main(["history", "flaky", "--db", str(db)]) == 0
        assert "holds no SWE-bench instance outcome" in capsys.readouterr().out
        assert main(["history", "flaky", "--db", str(db), "--model", "\x1b[2Jm\nx"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\\x1b[2Jm\\x0ax  0 run(s)  not measured" in out
        kept = db.read_bytes()
        assert main(["history", "flaky", "--db", str(db), "--json", str(db)]) == 2
        assert "it is one of the inputs" in _one_error(capsys) and db.read_bytes() == kept


class TestStoredHistoryNeverDecides:
    """`swe compare --exclude flaky --db`: whatever the history stored, the exit code is the
    full comparison's and the JSON is written."""

    def maps(self, root, ids, name, resolved) -> object:
        path = root / f"{name}.json"
        path.write_text(
            json.dumps({i: {"resolved": bool(v)} for i, v in zip(ids, resolved, strict=True)})
        )
        return path

    def test_a_stored_flaky_set_of_every_instance_is_reported_not_formed(
        self, seeds, ids, tmp_path, capsys
    ):
        db = str(tmp_path / "h.db")
        everything = self.maps(tmp_path, ids, "all", [True] * len(ids))
        nothing = self.maps(tmp_path, ids, "none", [False] * len(ids))
        record = ["history", "record", "--db", db, "--recipe", "swe_gate", "--dataset",
                  str(si.DATASET)]  # fmt: skip
        for k, path in enumerate((everything, nothing)):  # every instance flips for "base"
            assert main([*record, "--swe-run", f"base={path}", "--run-id", f"stored{k}"]) == 0
        one = (seeds["one_before"], seeds["one_after"])
        plain = _compare(tmp_path, *one, name="plain")
        capsys.readouterr()
        args = ["--db", db, "--before-model", "base", "--after-model", "trained"]
        code = _compare(tmp_path, *one, "--exclude", "flaky", *args, "--run-id", "n1")
        out = capsys.readouterr().out
        assert code == plain == 0  # was 2, with no JSON written
        unformed = _doc(tmp_path)["reduced_not_formed"]
        assert unformed["reason"].startswith("the exclusions remove all 500 instances")
        assert unformed["sets"][0]["label"] == "flaky" and unformed["sets"][0]["count"] == 500
        assert "stored runs of base" in unformed["sets"][0]["source"]
        assert "not formed: the exclusions remove all 500 instances" in out
        assert _doc(tmp_path)["verdict"] == _doc(tmp_path, "plain")["verdict"]

    def test_the_report_shows_a_reduced_comparison_that_was_not_formed(
        self, seeds, tmp_path, capsys
    ):
        code = _compare(tmp_path, seeds["one_before"], seeds["one_after"], "--exclude", "flaky")
        assert code == 0
        kwargs = ri.full_set()
        kwargs["junit"] = [*kwargs["junit"][:-1], tmp_path / "out.xml"]
        kwargs["swe"] = tmp_path / "out.json"
        report = build_report(**kwargs, draw_plots=False)
        md = render_markdown(report)
        section = md.split('<a id="swe"></a>')[1].split('<a id="runs"></a>')[0]
        assert "reduced comparison (--exclude flaky; shown, never decides): not formed: " in section
        assert "every arm has fewer than 2 runs" in section
