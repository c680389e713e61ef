"""`rlgate report` on hostile files and output directories: exit 2 and one message, no harm.

Regression stories (issue 10):

* "files outside the output directory": a symlinked ``.rlgate-report`` marker (or
  ``plots/``) in ``--out`` made the report overwrite the link's target outside ``--out``;
* "crashes": a JUnit with an unknown ``rlgate.verdict``, a 20,000-deep XML, a testcase
  ``time`` that is not a number ended in a traceback (exit 70); NaN, Infinity, 1e400, a
  boolean or a string where a number belongs in an SWE JSON gave GO; a JSON that is an
  array, a number or a string, binary or non-UTF-8 bytes, a huge file, a FIFO each need one
  clear message naming the file, exit 2.

Every case goes through the CLI and asserts the exit code, that stderr is one
``rlgate: error:`` message naming the file (no traceback, no "internal error"), and that
nothing was written where it must not be.
"""

import json
import os
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.report.build import OUT_MARKER, prepare_out_dir
from rlgate.report.inputs import MAX_JSON_BYTES, MAX_JUNIT_BYTES
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri


def _run(capsys, args):
    code = main(["report", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _args(out, junit=None, swe=None, run=None, *extra, plots=False):
    full = ri.full_set()
    args = ["--junit", *(junit or full["junit"]), "--run", run or full["runs"][0]]
    args += ["--swe", swe or full["swe"], "--out", out, *extra]
    return args if plots else [*args, "--no-plots"]


def _one_error(err, path):
    lines = [line for line in err.splitlines() if line.startswith("rlgate: ")]
    assert len(lines) == 1 and lines[0].startswith("rlgate: error: "), err
    assert str(path) in err, err
    assert "Traceback" not in err and "internal error" not in err


# --- the output directory --------------------------------------------------------------------


class TestOutputDirectory:
    @pytest.mark.parametrize("force", [False, True], ids=["plain", "forced"])
    def test_a_symlinked_marker_is_refused_and_its_target_kept(self, tmp_path, capsys, force):
        out = tmp_path / "out"
        out.mkdir()
        victim = tmp_path / "victim.txt"
        victim.write_text("precious")
        (out / OUT_MARKER).symlink_to(victim)
        extra = ["--force"] if force else []
        code, _, err = _run(capsys, _args(out, None, None, None, *extra))
        assert code == 2
        _one_error(err, out / OUT_MARKER)
        assert "is a symbolic link" in err
        assert victim.read_text() == "precious"
        assert sorted(p.name for p in out.iterdir()) == [OUT_MARKER]

    def test_a_symlinked_plots_folder_is_refused_and_its_target_kept(self, tmp_path, capsys):
        out = prepare_out_dir(tmp_path / "out")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (out / "plots").symlink_to(elsewhere, target_is_directory=True)
        code, _, err = _run(capsys, _args(out, plots=True))
        assert code == 2
        _one_error(err, out / "plots")
        assert list(elsewhere.iterdir()) == []
        assert not (out / "report.md").exists()

    def test_a_symlinked_plots_folder_is_refused_by_write_report_too(self, tmp_path):
        from rlgate.core.errors import RlgateError
        from rlgate.report.build import build_report, write_report

        out = prepare_out_dir(tmp_path / "out")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        report = build_report(**ri.full_set())
        (out / "plots").symlink_to(elsewhere, target_is_directory=True)  # after preparing
        with pytest.raises(RlgateError, match="plots is a symbolic link"):
            write_report(report, out)
        assert list(elsewhere.iterdir()) == []

    @pytest.mark.parametrize("name", ["report.md", "report.html", "report.json", "junit.xml"])
    def test_a_symlinked_output_file_is_replaced_never_followed(self, tmp_path, capsys, name):
        out = prepare_out_dir(tmp_path / "out")
        outside = tmp_path / "notes.txt"
        outside.write_text("mine")
        (out / name).symlink_to(outside)
        code, _, err = _run(capsys, _args(out))
        assert code == 0, err
        assert outside.read_text() == "mine"
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 100

    def test_an_input_at_an_output_name_is_refused_before_anything_is_written(
        self, tmp_path, capsys
    ):
        out = tmp_path / "out"
        out.mkdir()
        swe = out / "report.json"
        swe.write_bytes(ri.swe("improved")[0].read_bytes())
        before = swe.read_bytes()
        code, _, err = _run(capsys, _args(out, None, swe, None, "--force"))
        assert code == 2
        _one_error(err, swe)
        assert "is where the report writes an output" in err
        assert swe.read_bytes() == before
        assert sorted(p.name for p in out.iterdir()) == ["report.json"]

    def test_out_inside_an_input_directory_is_refused(self, tmp_path, capsys):
        band = ri.full_set()["band_runs"][0]
        listing = sorted(p.name for p in Path(band).rglob("*"))
        out = Path(band) / "report"
        code, _, err = _run(capsys, [*_args(out), "--band-run", band])
        assert code == 2
        _one_error(err, band)
        assert "is inside the input directory" in err
        assert sorted(p.name for p in Path(band).rglob("*")) == listing

    def test_out_inside_the_run_directory_a_run_json_names_is_refused(self, tmp_path, capsys):
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        doc = json.loads(_run_text())
        doc["run"] = str(run_dir)
        run_json = tmp_path / "run.json"
        run_json.write_text(json.dumps(doc))
        code, _, err = _run(capsys, _args(run_dir / "report", None, None, run_json))
        assert code == 2
        _one_error(err, run_dir)
        assert list(run_dir.iterdir()) == []

    def test_a_symlinked_demo_inputs_folder_is_refused(self, tmp_path):
        from rlgate.core.errors import RlgateError
        from rlgate.demo.build import INPUTS, INPUTS_MARKER, run_demo

        out = prepare_out_dir(tmp_path / "out")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / INPUTS_MARKER).write_text("looks like the demo's")
        (elsewhere / "data.csv").write_text("user data")
        (out / INPUTS).symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(RlgateError, match="is a symbolic link"):
            run_demo(out, tokenizers=None)
        assert (elsewhere / "data.csv").read_text() == "user data"


# --- hostile files -----------------------------------------------------------------------------


def _swe_doc():
    return json.loads(ri.swe("improved")[0].read_text())


def _run_text():
    return ri.check_run(Fault.HEALTHY)[0].read_text()


def _junit_text(kind="swe"):
    return {"swe": ri.swe("improved")[1], "run": ri.check_run(Fault.HEALTHY)[1]}[kind].read_text()


def _one_case(time):
    return (
        '<testsuites><testsuite name="s"><testcase classname="tests.functional.test_x" '
        f'name="t" time="{time}"/></testsuite></testsuites>'
    )


def _deep(depth=20_000):
    nest = "<a>" * depth + "</a>" * depth
    return (
        '<testsuites><testsuite name="s"><testcase classname="tests.functional.x" name="t">'
        f'<failure message="m">{nest}</failure></testcase></testsuite></testsuites>'
    )


def _json(text):
    return lambda path: path.write_text(text)


def _doc(edit):
    def write(path):
        doc = _swe_doc()
        edit(doc)
        path.write_text(json.dumps(doc))

    return write


def _sparse(size):
    def write(path):
        with path.open("wb") as fh:
            fh.truncate(size + 1)

    return write


def _fifo(path):
    os.mkfifo(path)


# (id, which input, how to write it, a fragment of the message)
JUNIT_CASES = [
    ("unknown_swe_verdict", lambda p: p.write_text(
        _junit_text().replace('value="improved"', 'value="bogus"')), "not a swe_gate verdict"),
    ("unknown_check_verdict", lambda p: p.write_text(
        _junit_text("run").replace('name="rlgate.verdict" value="pass"',
                                   'name="rlgate.verdict" value="maybe"', 1)),
     "not a convergence verdict"),
    ("nested_20000_deep", lambda p: p.write_text(_deep()), "nested more than 32 deep"),
    ("binary", lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff"), "not valid XML"),
    ("non_utf8", lambda p: p.write_bytes(
        b'<?xml version="1.0" encoding="utf-8"?><testsuite name="\xe9\xff"/>'), "not valid XML"),
    ("junk_before_the_declaration", lambda p: p.write_text("," + _one_case(time="0.1")),
     "not valid XML (syntax error at line 1, column 0)"),  # expat's "error:" not repeated
    ("time_not_a_number", lambda p: p.write_text(_one_case(time="abc")), "time='abc'"),
    ("time_nan", lambda p: p.write_text(_one_case(time="nan")), "time='nan'"),
    ("time_negative", lambda p: p.write_text(_one_case(time="-3")), "time='-3'"),
    ("testcase_outside_a_suite", lambda p: p.write_text(
        '<testsuites><testcase classname="tests.functional.x" name="t"/></testsuites>'),
     "outside a <testsuite>"),
    ("delta_not_a_number", lambda p: p.write_text(_junit_text().replace(
        "&quot;delta_pp&quot;: ", "&quot;delta_pp&quot;: &quot;x&quot;, &quot;was&quot;: ")),
     "significance evidence delta_pp = 'x' is not a finite number"),
    ("value_not_a_number", lambda p: p.write_text(_junit_text("run").replace(
        'name="rlgate.value" value="', 'name="rlgate.value" value="x', 1)), "is not a number"),
    ("huge", _sparse(MAX_JUNIT_BYTES), "rlgate reads at most 256 MiB"),
    ("fifo", _fifo, "is not a regular file"),
    ("directory", lambda p: p.mkdir(), "is a directory"),
]  # fmt: skip

SWE_CASES = [
    ("array", _json("[1, 2, 3]"), "the JSON is an array, not an object"),
    ("number", _json("42"), "the JSON is a number, not an object"),
    ("string", _json('"improved"'), "the JSON is a string, not an object"),
    ("null", _json("null"), "the JSON is null, not an object"),
    ("binary", lambda p: p.write_bytes(b"\xff\xfe\x00{"), "is not UTF-8 text"),
    ("non_utf8_in_a_string", lambda p: p.write_bytes(b'{"verdict": "\xe9"}'), "not UTF-8"),
    ("nested_deeply", _json("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    ("truncated", lambda p: p.write_text(json.dumps(_swe_doc())[:300]), "is not valid JSON"),
    ("nan", _doc(lambda d: d.update(delta_pp=float("nan"))), "delta_pp: Input should be a finite"),
    ("infinity", _doc(lambda d: d.update(p_value=float("inf"))), "p_value: Input should be a fin"),
    ("overflow_1e400", lambda p: p.write_text(
        json.dumps(_swe_doc()).replace('"alpha": 0.05', '"alpha": 1e400')), "alpha: Input should"),
    ("missing_field", _doc(lambda d: d.pop("before")), "before: Field required"),
    ("bool_as_count", _doc(lambda d: d.update(lost=True)), "lost: Input should be a valid int"),
    ("string_as_number", _doc(lambda d: d.update(p_value="0.001")), "p_value: Input should be"),
    ("rate_above_one", _doc(lambda d: d["after"].update(rate=1.5)), "after.rate: Input should be"),
    ("no_instances", _doc(lambda d: d["dataset"].update(n_instances=0)), "n_instances: Input"),
    ("arms_of_different_sizes", _doc(lambda d: d["after"].update(n_instances=499)),
     "the arms and the dataset disagree on the number of instances"),
    ("ci_reversed", _doc(lambda d: d.update(ci95_pp=[6.0, 2.0])), "has its low end above"),
    ("unknown_verdict", _doc(lambda d: d.update(verdict="great")), "verdict: Input should be"),
    ("instance_set_unknown_word", _doc(lambda d: d["dataset"].update(instance_set="all")),
     "dataset.instance_set: Input should be"),
    ("no_criteria", _doc(lambda d: d.update(criteria=[])), "criteria: "),
    ("huge", _sparse(MAX_JSON_BYTES), "rlgate reads at most 64 MiB"),
    ("fifo", _fifo, "is not a regular file"),
    ("directory", lambda p: p.mkdir(), "is a directory"),
]  # fmt: skip

RUN_CASES = [
    ("array", _json("[]"), "the JSON is an array, not an object"),
    ("check_status_unknown", lambda p: p.write_text(
        _run_text().replace('"status": "pass"', '"status": "ok"', 1)),
     "checks.0.status: Input should be"),
    ("target_step_negative", lambda p: p.write_text(
        json.dumps({**json.loads(_run_text()), "target_step": -5})),
     "target_step: Input should be greater"),
    ("run_empty", lambda p: p.write_text(json.dumps({**json.loads(_run_text()), "run": ""})),
     "run: String should have at least 1 character"),
    ("passed_as_string", lambda p: p.write_text(
        json.dumps({**json.loads(_run_text()), "passed": "yes"})),
     "passed: Input should be a valid boolean"),
    ("check_value_not_a_number", lambda p: p.write_text(_run_text().replace(
        '"value": ', '"value": "1e3 steps", "was": ', 1)), "checks.0.value: Value error"),
    ("check_tier_unknown", lambda p: p.write_text(
        _run_text().replace('"tier": "convergence"', '"tier": "nightly"', 1)),
     "checks.0.tier: Input should be"),
]  # fmt: skip


class TestHostileFiles:
    @pytest.mark.parametrize(("write", "says"), [c[1:] for c in JUNIT_CASES],
                             ids=[c[0] for c in JUNIT_CASES])  # fmt: skip
    def test_a_hostile_junit_is_exit_2_naming_it(self, tmp_path, capsys, write, says):
        bad = tmp_path / "bad.xml"
        write(bad)
        full = ri.full_set()
        code, out, err = _run(capsys, _args(tmp_path / "out", [*full["junit"][:2], bad]))
        assert code == 2, out + err
        _one_error(err, bad)
        assert says in err
        assert not (tmp_path / "out").exists()

    @pytest.mark.parametrize(("write", "says"), [c[1:] for c in SWE_CASES],
                             ids=[c[0] for c in SWE_CASES])  # fmt: skip
    def test_a_hostile_swe_json_is_exit_2_naming_it(self, tmp_path, capsys, write, says):
        bad = tmp_path / "swe.json"
        write(bad)
        code, out, err = _run(capsys, _args(tmp_path / "out", None, bad))
        assert code == 2, out + err
        _one_error(err, bad)
        assert says in err
        assert not (tmp_path / "out").exists()

    @pytest.mark.parametrize(("write", "says"), [c[1:] for c in RUN_CASES],
                             ids=[c[0] for c in RUN_CASES])  # fmt: skip
    def test_a_hostile_run_json_is_exit_2_naming_it(self, tmp_path, capsys, write, says):
        bad = tmp_path / "run.json"
        write(bad)
        code, out, err = _run(capsys, _args(tmp_path / "out", None, None, bad))
        assert code == 2, out + err
        _one_error(err, bad)
        assert says in err

    def test_xml_entities_stay_refused(self, tmp_path, capsys):
        """XXE and entity bombs: refused at their DTD, before expat expands anything."""
        xxe = tmp_path / "xxe.xml"
        xxe.write_text(
            '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            '<testsuites><testsuite name="s"><testcase classname="tests.functional.x" '
            'name="t"><failure message="m">&x;</failure></testcase></testsuite></testsuites>'
        )
        code, _, err = _run(capsys, _args(tmp_path / "out", [xxe]))
        assert code == 2 and "refusing XML with a document type declaration" in err
        assert "root:" not in err
        _one_error(err, xxe)
        levels = "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, 9))
        bomb = tmp_path / "bomb.xml"
        bomb.write_text(
            f'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY e0 "lol">{levels}]>'
            '<testsuites><testsuite name="&e8;"/></testsuites>'
        )
        code, _, err = _run(capsys, _args(tmp_path / "out", [bomb]))
        assert code == 2 and "refusing XML with a document type declaration" in err
        _one_error(err, bomb)

    def test_a_fifo_as_baseline_is_a_note_not_a_hang(self, tmp_path, capsys):
        fifo = tmp_path / "baseline"
        os.mkfifo(fifo)
        code, _, err = _run(capsys, [*_args(tmp_path / "out", plots=True), "--baseline", fifo])
        assert code == 0, err
        notes = json.loads((tmp_path / "out/report.json").read_text())["notes"]
        assert (
            f"baseline {fifo} is not a run here (missing, or not a file or directory)"
            in " ".join(notes)
        )

    def test_a_repository_name_with_mathtext_does_not_break_the_swe_plot(self, tmp_path, capsys):
        swe = tmp_path / "swe.json"
        _doc(lambda d: d["per_repo"][0].update(repo=r"$\frac{$ a $x^$ b"))(swe)
        code, _, err = _run(capsys, _args(tmp_path / "out", None, swe, plots=True))
        assert code == 0, err
        assert (tmp_path / "out/plots/swe.png").stat().st_size > 1000
