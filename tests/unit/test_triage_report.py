"""The release report's triage section (rlgate.report.triage_section): tables, trends, pages.

A history of real Results (the corpus gated by its checks) and a candidate JUnit as
``check-run --junit`` writes it; the section is data, the pages render it escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlgate.core.junit import JunitCase, JunitSuite, write_junit
from rlgate.core.results import Outcome, Result, Tier
from rlgate.history.triage import TABLE_HEADER, Label
from rlgate.report.build import Verdict, build_report, prepare_out_dir, write_report
from rlgate.report.render import render_html, render_markdown
from rlgate.testing.corpus import Fault

from .helpers.triage_inputs import RECIPE, gate_results, nightly

STEP = "perf:timing/train/total_step_time"


def candidate_junit(path: Path, results, recipe: str = RECIPE) -> Path:
    cases = [
        JunitCase.of(r, classname=f"rlgate.{r.tier.value}.{recipe}", facts={"recipe": recipe})
        for r in results
    ]
    path.write_text(write_junit([JunitSuite.of(f"rlgate.check-run.{recipe}", cases)]))
    return path


def history(n: int = 8, fault_from: int | None = None):
    """Healthy nightlies of code A; from ``fault_from`` on, code B and the slow run."""
    out = []
    for k in range(1, n + 1):
        regressed = fault_from is not None and k >= fault_from
        fault = Fault.STEP_TIME_UP if regressed else Fault.HEALTHY
        out.append(nightly(k, gate_results(fault), code="B" if regressed else "A"))
    return out


class TestSection:
    def test_a_regression_is_labelled_with_its_first_failing_nightly(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        report = build_report([junit], history=history(fault_from=6), draw_plots=False)
        section = report.triage
        assert section is not None and report.verdict is Verdict.NO_GO
        mine, latest = section.tables
        assert mine.header == (*TABLE_HEADER[:2], "main last 8", *TABLE_HEADER[3:])
        row = next(r for r in mine.rows if STEP in r[0])
        assert row[3] == "regression" and "main fails since n06" in row[4]
        assert row[2] == ".....FFF 5/8 pass"
        assert latest.title.startswith("Latest main nightly n08")
        assert {lb.check: lb.label for lb in section.latest} == {
            STEP: Label.REGRESSION,
            "perf:performance/tokens_per_sec_per_gpu": Label.REGRESSION,
        }
        assert section.window == tuple(f"n{k:02d}" for k in range(1, 9))

    def test_pre_existing_failures_keep_the_verdict_no_go(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        report = build_report([junit], history=history(fault_from=1), draw_plots=False)
        assert {lb.label for lb in report.triage.labels} == {Label.PRE_EXISTING}
        assert report.verdict is Verdict.NO_GO  # labels explain; they never soften a failure

    def test_a_passing_candidate_has_nothing_to_triage(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.HEALTHY))
        report = build_report([junit], history=history(), draw_plots=False)
        assert report.triage.labels == () and report.triage.tables[0].rows == ()
        assert "nothing to triage" in report.triage.tables[0].empty

    def test_an_empty_history_says_so_and_every_failure_is_unknown(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        report = build_report([junit], history=[], draw_plots=False)
        assert {lb.label for lb in report.triage.labels} == {Label.UNKNOWN}
        assert "holds no nightly of branch 'main'" in report.triage.notes[0]
        assert len(report.triage.tables) == 1  # no latest nightly to show

    def test_without_a_history_there_is_no_section(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        report = build_report([junit], draw_plots=False)
        assert report.triage is None and "Triage" not in render_markdown(report)


class TestPages:
    def test_md_html_json_and_trend_plots(self, tmp_path) -> None:
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        report = build_report([junit], history=history(fault_from=6))
        assert report.triage.figure_keys == ("trend-convergence", "trend-perf")
        files = write_report(report, prepare_out_dir(tmp_path / "out"))
        md = files["markdown"].read_text()
        triage_part = md.split('## <a id="triage"></a>Triage against the nightly history')[1]
        assert "![trend-perf]" not in md  # figures are shown by their titles
        assert "(plots/trend-perf.png)" in triage_part.split('## <a id="swe">')[0]
        assert md.count("(plots/trend-perf.png)") == 1  # in the triage section only
        assert "| regression |" in triage_part
        html = files["html"].read_text()
        assert '<h2 id="triage">Triage against the nightly history</h2>' in html
        assert "main fails since n06" in html
        doc = json.loads(files["json"].read_text())["triage"]
        assert {lb["check"] for lb in doc["candidate"]} == {
            STEP,
            "perf:performance/tokens_per_sec_per_gpu",
        }
        assert doc["figures"] == ["trend-convergence", "trend-perf"]
        assert (tmp_path / "out" / "plots" / "trend-perf.png").read_bytes()[:4] == b"\x89PNG"

    def test_hostile_check_names_are_shown_literally(self, tmp_path) -> None:
        name = "<img src=x onerror=alert(1)> [link](http://evil.example) \x1b[31m|x|"
        bad = Result(name=name, tier=Tier.CONVERGENCE, outcome=Outcome.FAIL, message="boom")
        ok = bad.model_copy(update={"outcome": Outcome.PASS})
        junit = candidate_junit(tmp_path / "c.xml", [*gate_results(Fault.HEALTHY), bad])
        runs = [nightly(k, [*gate_results(Fault.HEALTHY), ok]) for k in range(1, 4)]
        report = build_report([junit], history=runs, draw_plots=False)
        (label,) = report.triage.labels
        assert label.check == name and label.label is Label.REGRESSION
        html, md = render_html(report), render_markdown(report)
        assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
        assert "\x1b" not in html and "\x1b" not in md
        row = next(line for line in md.splitlines() if line.startswith("| ") and "onerror" in line)
        assert "\\[link\\](http\\:\\//" in row and "\\|x\\|" in row and row.count(" | ") == 4


def test_the_reports_own_recordings_are_not_its_history(tmp_path) -> None:
    """check-run --db recorded the run on main before the report: not a main nightly for it."""
    slow = gate_results(Fault.STEP_TIME_UP)
    own = nightly(9, [], part="check-run")
    own = own.model_copy(update={"results": list(slow)})  # its very Results, recorded
    junit = candidate_junit(tmp_path / "c.xml", slow)
    report = build_report([junit], history=[*history(), own], draw_plots=False)
    step = next(lb for lb in report.triage.labels if lb.check == STEP)
    assert step.label is Label.REGRESSION and step.first_failing == "candidate"
    assert [m.nightly for m in step.history] == [f"n{k:02d}" for k in range(1, 9)]


class TestReportDb:
    """`rlgate report --db`: the triage section from the database, then the run recorded."""

    def test_report_db_triages_then_records_the_candidate(self, tmp_path, capsys) -> None:
        from rlgate.cli.app import main
        from rlgate.core.errors import ExitCode
        from rlgate.history.store import open_store

        db = str(tmp_path / "h.db")
        with open_store(db) as store:
            for run in history(fault_from=6):
                store.record(run.context, run.results)
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        out = tmp_path / "out"
        args = ["report", "--junit", str(junit), "--db", db, "--branch", "pr-1", "--no-plots"]
        code = main([*args, "--run-id", "pr-1-run", "--last", "5", "--out", str(out)])
        assert code == ExitCode.FAIL, capsys.readouterr().err
        doc = json.loads((out / "report.json").read_text())["triage"]
        assert doc["window"] == ["n04", "n05", "n06", "n07", "n08"]
        step = next(lb for lb in doc["candidate"] if lb["check"] == STEP)
        assert step["label"] == "regression" and step["first_failing"] == "n06"
        assert "main fails since n06" in (out / "report.md").read_text()
        with open_store(db) as store:
            (recorded,) = [r for r in store.runs() if r.context.run_id == "pr-1-run"]
        assert recorded.context.branch == "pr-1"  # recorded after, never triaged as main

    def test_report_baseline_commit_labels_against_the_merge_base(self, tmp_path, capsys) -> None:
        """Main broke at n06 (code B); the PR's merge base is code A: its checks regressed."""
        from rlgate.cli.app import main
        from rlgate.core.errors import ExitCode
        from rlgate.history.store import open_store

        from .helpers.triage_inputs import commit

        db = str(tmp_path / "h.db")
        with open_store(db) as store:
            for run in history(fault_from=1):  # main fails throughout: pre-existing
                store.record(run.context, run.results)
            for k in (2, 3):  # the merge base, nightlies of a release branch
                run = nightly(k, gate_results(Fault.HEALTHY), code="A", branch="release")
                store.record(run.context, run.results)
        junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
        sha = commit("A")["nemo_rl"][:9]
        docs = {}
        for name, extra in (("main", []), ("base", ["--baseline-commit", f"nemo_rl={sha}"])):
            out = tmp_path / name
            args = ["report", "--junit", str(junit), "--db", db, "--no-plots", "--out", str(out)]
            assert main([*args, "--run-id", f"pr-{name}", *extra]) == ExitCode.FAIL
            docs[name] = json.loads((out / "report.json").read_text())["triage"]
        capsys.readouterr()
        assert {lb["label"] for lb in docs["main"]["candidate"]} == {"pre-existing"}
        assert {lb["label"] for lb in docs["base"]["candidate"]} == {"regression"}
        assert docs["base"]["baseline_commit"] == f"nemo_rl@{sha}"
        page = (tmp_path / "base" / "report.md").read_text()
        shown = f"nemo_rl\\@{sha}"  # as the Markdown page escapes it
        assert f"baseline {shown} last 2" in page and f"baseline commit {shown}" in page
        assert docs["base"]["window"] == docs["main"]["window"]  # the trends stay main's
        out = tmp_path / "none"
        args = ["report", "--junit", str(junit), "--db", db, "--no-plots", "--out", str(out)]
        assert main([*args, "--baseline-commit", "abcdef12", "--run-id", "pr-none"]) == 1
        doc = json.loads((out / "report.json").read_text())["triage"]
        assert {lb["label"] for lb in doc["candidate"]} == {"unknown"}
        assert any("no run of baseline commit abcdef12" in n for n in doc["notes"])


def test_both_pages_carry_the_registered_triage_section(tmp_path) -> None:
    """One document, two pages: the section's headings, rows and figures are on both."""
    import html as html_lib

    from markdown_it import MarkdownIt

    from rlgate.report.document import Figure, Table
    from rlgate.report.sections import build_document

    junit = candidate_junit(tmp_path / "c.xml", gate_results(Fault.STEP_TIME_UP))
    report = build_report([junit], history=history(fault_from=6))
    (section,) = [s for s in build_document(report).sections if s.anchor == "triage"]
    titles = [str(getattr(s.title, "text", s.title)) for _, s in section.walk()]
    assert titles[0] == "Triage against the nightly history" and titles[-1] == "Trends"
    rows = [row.cells for _, s in section.walk() for b in s.blocks if isinstance(b, Table)
            for row in b.rows]  # fmt: skip
    keys = [b.key for _, s in section.walk() for b in s.blocks if isinstance(b, Figure)]
    assert keys == ["trend-convergence", "trend-perf"] and len(rows) == 4
    for markup in (MarkdownIt("gfm-like").render(render_markdown(report)), render_html(report)):
        page = html_lib.unescape(markup)  # the text a reader sees
        assert 'id="triage"' in page
        assert all(title in page for title in titles)
        assert all(str(c) in page for cells in rows for c in cells)
        assert "perf checks over the nightlies" in page  # the trend figure (its alt text)
