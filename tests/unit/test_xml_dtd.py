"""Untrusted XML carries no DTD, no entity and no processing instruction (issue 18).

Regression story: docs/security.md said XML entities are refused, but ``core.junit``'s reader
(expat through ElementTree) expanded internal entities, so a JUnit file could grow a message
a thousandfold from a few hundred bytes, and only the largest "billion laughs" met expat's
amplification limit. A JUnit report never needs a document type declaration: every reader
of untrusted XML (one: :func:`rlgate.core.junit.read_junit`, behind ``report --junit``,
``triage --candidate`` and ``history record --junit``) now refuses a DTD as defusedxml does,
and a processing instruction too, with exit 2 and one message naming the file. A JUnit
written by pytest or by rlgate's own writer still reads.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rlgate.cli.app import main
from rlgate.core.errors import RlgateError
from rlgate.core.junit import read_junit
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri

CASE = (
    '<testsuites><testsuite name="s" tests="1"><testcase classname="tests.functional.t" '
    'name="t"><failure message="m">{body}</failure></testcase></testsuite></testsuites>'
)


def _laughs(levels: int) -> str:
    """An entity doubling tenfold per level: 10**levels copies of "lol" from a few lines."""
    decls = "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, levels + 1))
    return f'<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY e0 "lol">{decls}]>\n' + CASE.format(
        body=f"&e{levels};"
    )


#: name -> (the file's text, what the one error line says)
HOSTILE: dict[str, tuple[str, str]] = {
    # expanded today (30,000 characters from 400 bytes), under expat's amplification limit
    "internal_entities": (_laughs(4), "document type declaration"),
    "billion_laughs": (_laughs(9), "document type declaration"),
    "external_entity": (
        '<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
        + CASE.format(body="&x;"),
        "document type declaration",
    ),
    "external_dtd": (
        '<?xml version="1.0"?>\n<!DOCTYPE testsuites SYSTEM "file:///etc/passwd">\n'
        + CASE.format(body="x"),
        "document type declaration",
    ),
    "dtd_alone": ("<!DOCTYPE testsuites>\n" + CASE.format(body="x"), "document type declaration"),
    "processing_instruction": (
        '<?xml version="1.0"?>\n<?xml-stylesheet type="text/xsl" href="http://x/s.xsl"?>\n'
        + CASE.format(body="x"),
        "processing instruction <?xml-stylesheet",
    ),
    "instruction_inside": (
        CASE.format(body='<?php system("id"); ?>'),
        "processing instruction <?php",
    ),
}


def _report(tmp_path: Path, junit: Path) -> list[str]:
    return ["report", "--junit", str(junit), "--out", str(tmp_path / "out"), "--no-plots"]


def _triage(tmp_path: Path, junit: Path) -> list[str]:
    return ["triage", "--candidate", str(junit), "--db", str(tmp_path / "h.db")]


def _record(tmp_path: Path, junit: Path) -> list[str]:
    return ["history", "record", "--junit", str(junit), "--recipe-name", "r", "--db",
            str(tmp_path / "h.db")]  # fmt: skip


COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "report": _report,
    "triage": _triage,
    "history_record": _record,
}


def _one_line(err: str, path: Path) -> str:
    lines = err.strip().splitlines()
    assert len(lines) in (1, 2) and lines[0].startswith("rlgate: error: "), err
    assert len(lines) == 1 or lines[1].startswith("  hint: "), err
    assert "Traceback" not in err and "internal error" not in err
    assert str(path) in lines[0], err
    return lines[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_xml_is_exit_2_with_one_line(tmp_path, capsys, command, case) -> None:
    text, says = HOSTILE[case]
    junit = tmp_path / "hostile.xml"
    junit.write_text(text, encoding="utf-8")
    code = main(COMMANDS[command](tmp_path, junit))
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert says in _one_line(err, junit)
    assert "lollol" not in out + err  # nothing was expanded
    assert not (tmp_path / "out").exists()
    if (tmp_path / "h.db").exists():  # history record opened it first: nothing recorded
        from rlgate.history.store import open_store

        with open_store(tmp_path / "h.db") as store:
            assert store.runs(last=10) == []


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_the_reader_refuses_before_building_anything(tmp_path, case) -> None:
    text, says = HOSTILE[case]
    junit = tmp_path / "hostile.xml"
    junit.write_text(text, encoding="utf-8")
    with pytest.raises(RlgateError, match="refusing") as caught:
        read_junit(junit)
    assert says in caught.value.message and caught.value.hint


def test_a_dtd_late_in_a_large_file_is_still_refused(tmp_path) -> None:
    """Refused where expat meets it, whatever came before (the reader streams)."""
    junit = tmp_path / "late.xml"
    junit.write_text("<!-- " + "x" * 200_000 + " -->\n<!DOCTYPE t>\n" + CASE.format(body="x"))
    with pytest.raises(RlgateError, match="document type declaration"):
        read_junit(junit)


class TestNormalJunitStillReads:
    """What pytest and rlgate's writer produce (an XML declaration, no DTD) reads as before."""

    def test_pytest_junit_reads_with_its_declaration(self) -> None:
        junit = ri.functional_passing()
        assert junit.read_text().startswith('<?xml version="1.0" encoding="utf-8"?>')
        ((suite),) = read_junit(junit)
        assert [c.name for c in suite.cases] == ["test_parser_round_trip"]
        assert suite.cases[0].prop("rlgate.recipe") == "grpo-demo"

    def test_report_reads_a_pytest_junit(self, tmp_path, capsys) -> None:
        code = main(_report(tmp_path, ri.functional_passing()))
        out, err = capsys.readouterr()
        assert code == 3 and "verdict: INCOMPLETE" in out, err  # the other tiers did not run
        assert (tmp_path / "out" / "junit.xml").is_file()

    def test_history_record_reads_a_pytest_junit(self, tmp_path, capsys) -> None:
        code = main(_record(tmp_path, ri.functional_passing()))
        out, err = capsys.readouterr()
        assert code == 0 and "history: recorded run" in out, err

    def test_triage_reads_rlgate_junit(self, tmp_path, capsys) -> None:
        _, run_xml = ri.check_run(Fault.HEALTHY)
        assert run_xml.read_text().startswith("<?xml")
        from rlgate.history.store import open_store

        open_store(tmp_path / "h.db").close()  # a history with no runs (triage creates none)
        code = main(_triage(tmp_path, run_xml))
        out, err = capsys.readouterr()
        assert code == 0 and "nothing to triage" in out, err


# --- long tokens: reading stays linear in the file's size -----------------------------------------


def _renamed(tmp_path: Path, name: str, *, body: str = "") -> Path:
    """check-run's real JUnit with its first testcase renamed (and ``body`` added to it)."""
    _, run_xml = ri.check_run(Fault.HEALTHY)
    text = run_xml.read_text(encoding="utf-8")
    at = text.index("<testcase ")
    start = text.index('name="', at) + len('name="')
    end = text.index('"', start)
    text = text[:start] + name + text[end:]
    if body:
        close = text.index(">", text.index("<testcase ")) + 1
        text = text[:close] + body + text[close:]
    junit = tmp_path / "long.xml"
    junit.write_text(text, encoding="utf-8")
    return junit


class TestLongTokens:
    """One tag longer than MAX_XML_TOKEN is refused; below it, and any text, reads exactly.

    Regression story: a 25 MB attribute in a 25 MB JUnit file (limit 256 MiB) took 101 s to
    read, because expat 2.5.0 costs time quadratic in one token's length (rescanned on
    every chunk fed, and even in one call). benchmarks/bench_junit_attribute.py shows the
    times; the tests assert the bound's message and that what lies within it reads back.
    """

    @pytest.mark.parametrize("command", sorted(COMMANDS))
    def test_an_attribute_over_the_bound_is_exit_2_naming_it(
        self, tmp_path, capsys, command
    ) -> None:
        from rlgate.core.junit import MAX_XML_TOKEN

        junit = _renamed(tmp_path, "A" * (MAX_XML_TOKEN + 2**20))
        code = main(COMMANDS[command](tmp_path, junit))
        out, err = capsys.readouterr()
        assert code == 2, out + err
        line = _one_line(err, junit)
        assert "the XML tag (or comment) at byte" in line and "longer than 4 MiB" in line
        assert not (tmp_path / "out").exists()

    def test_a_comment_over_the_bound_is_refused(self, tmp_path) -> None:
        junit = tmp_path / "comment.xml"
        junit.write_text("<!-- " + "x" * (5 * 2**20) + " -->\n" + CASE.format(body="x"))
        with pytest.raises(RlgateError, match="at byte 0 is longer than 4 MiB"):
            read_junit(junit)

    def test_an_attribute_within_the_bound_reads_back_exactly(self, tmp_path) -> None:
        from rlgate.core.junit import MAX_XML_TOKEN

        name = "A" * (MAX_XML_TOKEN - 2**16)
        suites = read_junit(_renamed(tmp_path, name))
        assert name in [c.name for s in suites for c in s.cases]

    def test_long_text_is_not_a_token(self, tmp_path) -> None:
        """20 MB of captured output (text, reported as it arrives) reads whole."""
        out = "log line\n" * (20 * 2**20 // 9)
        suites = read_junit(_renamed(tmp_path, "t", body=f"<system-out>{out}</system-out>"))
        case = next(c for s in suites for c in s.cases if c.name == "t")
        assert case.system_out == out
