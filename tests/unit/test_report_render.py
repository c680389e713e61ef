"""One rendering path: report.md and report.html are two backends over one document.

Regression story (issue 12, "one HTML/Markdown rendering path"): ``report/render.py`` had
two renderers, kept in sync by hand, and they had drifted: the HTML listed every
informational testcase, the Markdown only some; the Markdown cut check messages at 160
characters, the HTML never; the HTML's "Why" was a section, the Markdown's a subsection; and
a blocker linking to a testcase that passed (a check recording a failing verdict) pointed to
an anchor only the HTML had, a dead link in report.md. Now the sections
(``report/sections.py``) build one ``Document`` and both pages are rendered from it.

The pages are read back with real parsers (markdown-it-py's ``gfm-like`` renderer for the
Markdown, ``html.parser`` for both) and compared with the document and with each other:
the same headings (level, text, anchor) in the same order, the same anchors and links,
every fact of every block present in reading order, the same figures.
"""

from __future__ import annotations

import functools
import re
from html.parser import HTMLParser

import pytest
from junitparser import Failure, JUnitXml, Properties, Property, TestCase, TestSuite
from markdown_it import MarkdownIt

from rlgate.core.text import one_line, printable
from rlgate.report import sections
from rlgate.report.build import build_report
from rlgate.report.document import (
    Bullets,
    Code,
    Escaped,
    Figure,
    Item,
    Listing,
    Notice,
    Own,
    Paragraph,
    Ref,
    Row,
    Section,
    Table,
    VerdictBanner,
    parts,
    plain_text,
)
from rlgate.report.render import render_html, render_markdown
from rlgate.report.sections import build_document
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri

HOSTILE_NAMES = (
    "cell|break",
    "x` [a](javascript:alert(1)) `y",
    "<script>alert(2)</script>",
    "back\\|slash **bold** # not a heading",
    "line one\nline two",
)


def _junit(path, cases):
    """A JUnit of the given (name, classname, failure message | None) (junitparser writes it)."""
    suite = TestSuite("rendered")
    for name, classname, failure, verdict in cases:
        case = TestCase(name, classname=classname)
        if verdict:
            props = Properties()
            props.add_property(Property("rlgate.verdict", verdict))
            case.append(props)
        if failure:
            case.result = [Failure(failure)]
        suite.add_testcase(case)
    xml = JUnitXml()
    xml.add_testsuite(suite)
    xml.write(str(path))
    return path


@functools.cache
def _report(scenario: str):
    full = ri.full_set()
    if scenario == "go":
        return build_report(**full, draw_plots=False)
    if scenario == "no_go_and_incomplete":
        return build_report(**ri.full_set("inconclusive", Fault.NAN_LOSS), draw_plots=False)
    if scenario == "demo_with_plots":
        return build_report(**full, demo=True, draw_plots=True)
    if scenario == "junit_only":
        return build_report([ri.functional_mixed()])
    root = ri.scratch() / f"render-{scenario}"
    root.mkdir(exist_ok=True)
    if scenario == "passed_with_a_failing_verdict":  # its blocker links to a passed testcase
        case = ("perf:timing/train/total_step_time", "rlgate.perf.demo", None, "fail")
        junit = [*full["junit"], _junit(root / "one.xml", [case])]
        return build_report(junit, runs=full["runs"], swe=full["swe"], draw_plots=False)
    assert scenario == "hostile_names"
    cases = [
        (name, "tests.functional.test_x", name if i % 2 else None, None)
        for i, name in enumerate(HOSTILE_NAMES)
    ]
    return build_report([_junit(root / "hostile.xml", cases), *full["junit"][1:]])


SCENARIOS = (
    "go",
    "no_go_and_incomplete",
    "demo_with_plots",
    "junit_only",
    "passed_with_a_failing_verdict",
    "hostile_names",
)


class _Page(HTMLParser):
    """What a reader gets from an HTML page: headings, anchors, links, images, text."""

    def __init__(self, markup: str):
        super().__init__(convert_charrefs=True)
        self.headings: list[tuple[int, str, str | None]] = []
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.alts: list[str] = []
        self.banners: list[str] = []
        self._text: list[str] = []
        self._heading: list | None = None
        self._banner: list[str] | None = None
        self._hidden = 0
        self.feed(markup)
        self.close()

    @property
    def text(self) -> str:
        return " ".join("".join(self._text).split())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._hidden += tag in ("style", "title")
        if "id" in a:
            self.ids.append(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])
        if tag == "img":
            self.alts.append(a["alt"])
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = [int(tag[1]), [], a.get("id")]
        elif tag == "a" and "id" in a and self._heading is not None:
            self._heading[2] = a["id"]
        if tag == "div" and "verdict" in (a.get("class") or "").split():
            self._banner = []

    def handle_endtag(self, tag):
        self._hidden -= tag in ("style", "title")
        if self._heading is not None and tag == f"h{self._heading[0]}":
            level, text, anchor = self._heading
            self.headings.append((level, " ".join("".join(text).split()), anchor))
            self._heading = None
        if tag == "div" and self._banner is not None:
            self.banners.append("".join(self._banner))
            self._banner = None

    def handle_data(self, data):
        if self._hidden:
            return
        self._text.append(data)
        for sink in (self._heading and self._heading[1], self._banner):
            if sink is not None and sink is not False:
                sink.append(data)


def _pages(report) -> dict[str, _Page]:
    return {
        "md": _Page(MarkdownIt("gfm-like").render(render_markdown(report))),
        "html": _Page(render_html(report)),
    }


def _norm(part) -> str:
    """What a fact reads as on either page (one line, controls visible, spaces collapsed)."""
    if isinstance(part, Code):
        return " ".join(one_line(part.text).split())
    if isinstance(part, Escaped):
        return " ".join(printable(part.plain).split())
    return " ".join(printable(plain_text(part)).split())


def _facts(document) -> list[str]:
    """Every fact of every block, in reading order (the document's, not a page's)."""
    out: list[str] = []

    def cell(c):
        out.extend(f for f in (_norm(p) for p in parts(c)) if f)

    for _, section in document.walk():
        if section.title is not None:
            cell(section.title)
        for block in section.blocks:
            if isinstance(block, Paragraph | Notice):
                cell(block.content)
            elif isinstance(block, Bullets):
                for item in block.items:
                    cell(item.content)
            elif isinstance(block, Table):
                for head in block.head:
                    cell(head)
                for row in block.rows:
                    for c in row.cells:
                        cell(c)
            elif isinstance(block, Listing):
                cell(block.label)
                for entry in block.entries[: block.limit]:
                    cell(Code(entry.name))
                    cell(entry.status or "")
            elif isinstance(block, Figure):
                cell(block.caption)
            elif isinstance(block, VerdictBanner):
                cell(block.verdict)
    return out


def _in_order(facts: list[str], text: str) -> list[str]:
    """The facts not found in ``text`` after the previous one (empty: all there, in order)."""
    missing, at = [], 0
    for fact in facts:
        found = text.find(fact, at)
        if found < 0:
            missing.append(fact)
        else:
            at = found + len(fact)
    return missing


@pytest.mark.parametrize("scenario", SCENARIOS)
class TestOneDocumentTwoPages:
    def test_both_pages_have_the_documents_headings_in_its_order(self, scenario):
        report = _report(scenario)
        document = build_document(report)
        expected = [
            (level, _norm(s.title), s.anchor) for level, s in document.walk() if s.title is not None
        ]
        pages = _pages(report)
        verdict = f"Verdict: {report.verdict.value}"
        for name, page in pages.items():
            title, *rest = page.headings
            assert title == (1, _norm(report.title), None), name
            rest = [h for h in rest if h != (2, verdict, None)]  # Markdown's verdict line
            assert rest == expected, name
            assert len(rest) > 8, name  # a real outline, not an empty match
        assert pages["md"].headings[1] == (2, verdict, None)
        assert pages["html"].banners == [report.verdict.value]
        assert expected[0] == (3, "Why", None)

    def test_both_pages_carry_every_fact_of_the_document_in_order(self, scenario):
        report = _report(scenario)
        facts = _facts(build_document(report))
        assert len(facts) > 50
        for name, page in _pages(report).items():
            missing = _in_order(facts, page.text)
            assert not missing, (name, missing[:5])

    def test_anchors_links_and_figures_are_the_same_on_both_pages(self, scenario):
        report = _report(scenario)
        document = build_document(report)
        pages = _pages(report)
        md, html = pages["md"], pages["html"]
        assert md.ids == html.ids == document.anchors()
        assert md.hrefs == html.hrefs
        assert {h.removeprefix("#") for h in md.hrefs} <= set(md.ids), "a link goes nowhere"
        assert all(h.startswith("#") for h in md.hrefs)
        assert md.alts == html.alts == [_norm(f.title) for f in report.figures]
        assert len(md.hrefs) >= max(1, len(report.blockers))  # GO links its allowances

    def test_every_blocker_links_to_a_row_or_section_on_both_pages(self, scenario):
        report = _report(scenario)
        for name, page in _pages(report).items():
            for blocker in report.blockers:
                assert f"#{blocker.anchor}" in page.hrefs, (name, blocker.title)
                assert blocker.anchor in page.ids, (name, blocker.title)


def test_a_passed_testcase_a_blocker_names_is_a_row_of_its_tier_table():
    report = _report("passed_with_a_failing_verdict")
    (blocker,) = report.blockers
    rendered = MarkdownIt("gfm-like").render(render_markdown(report))
    row = next(r for r in rendered.split("<tr>") if f'<a id="{blocker.anchor}">' in r)
    assert "PASSED" in row and "<td>perf:timing/train/total_step_time</td>" in row
    assert f'<tr id="{blocker.anchor}" class="passed">' in render_html(report)


def test_hostile_names_stay_literal_and_in_one_cell_on_both_pages():
    report = _report("hostile_names")
    pages = _pages(report)
    for name, page in pages.items():
        for i, hostile in enumerate(HOSTILE_NAMES):
            # a failing name is a table cell (spaces collapsed), a passing one a code span
            shown = " ".join(hostile.split()) if i % 2 else one_line(hostile)
            assert shown in page.text, (name, hostile)
        assert not any("javascript" in h for h in page.hrefs), name
    rendered = MarkdownIt("gfm-like").render(render_markdown(report))
    row = next(r for r in rendered.split("<tr>") if "cell|break" in r)
    assert row.count("<td>") == 4  # status, testcase, message, source: the | split nothing


# --- the registration point ---------------------------------------------------------------------


def _triage_like(report):
    """A section as another module would add one: input text as plain str, a table, a link."""
    first = report.junit.cases[0]
    return Section(
        Own("Triage"),
        (
            Paragraph((Own("First testcase: "), first.name, Own(".")), style="note"),
            Table(
                ("case", "where"),
                (Row(("[x](javascript:alert(1)) a|b", Code("p|q")), anchor="triage-1"),),
            ),
            Bullets((Item((Own("see "), Ref("triage-1", Own("the row")))),)),
        ),
        anchor="triage",
    )


def test_a_section_registered_in_sections_appears_in_both_pages(monkeypatch):
    report = _report("junit_only")
    before = build_document(report)
    at = sections.SECTIONS.index(sections.tiers_section) + 1
    registered = [*sections.SECTIONS[:at], _triage_like, lambda _: None, *sections.SECTIONS[at:]]
    monkeypatch.setattr(sections, "SECTIONS", registered)
    after = build_document(report)
    assert [s.title for s in after.sections] == [
        *[s.title for s in before.sections[:at]],
        Own("Triage"),
        *[s.title for s in before.sections[at:]],
    ]
    pages = _pages(report)
    for name, page in pages.items():
        titles = [text for level, text, _ in page.headings if level == 2]
        assert titles[titles.index("Tiers") + 1] == "Triage", name
        assert ["triage", "triage-1"] == [i for i in page.ids if i.startswith("triage")], name
        assert "#triage-1" in page.hrefs and not any("javascript" in h for h in page.hrefs)
        assert "[x](javascript:alert(1)) a|b" in page.text and "p|q" in page.text, name
        assert not _in_order(_facts(after), page.text), name
    rendered = MarkdownIt("gfm-like").render(render_markdown(report))
    row = next(r for r in rendered.split("<tr>") if "triage-1" in r)
    assert row.count("<td>") == 2  # the | in the text and in the code span split no cell


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Ref('x" onclick="alert(1)', Own("t")), id="link_anchor"),
        pytest.param(lambda: Ref("https://evil.example", Own("t")), id="link_url"),
        pytest.param(lambda: Row(("a",), anchor="a b"), id="row_anchor"),
        pytest.param(lambda: Row(("a",), style='x"><script>'), id="row_class"),
        pytest.param(lambda: Paragraph("a", style="story note"), id="paragraph_class"),
        pytest.param(lambda: Section(Own("t"), anchor="#swe"), id="section_anchor"),
        pytest.param(lambda: VerdictBanner("GO<b>"), id="verdict"),
        pytest.param(lambda: Figure("../x", "t", "c", "data:image/png;base64,AA=="), id="key"),
        pytest.param(lambda: Figure("k", "t", "c", "https://evil.example/p.png"), id="figure_url"),
    ],
)
def test_an_anchor_class_or_image_the_report_does_not_own_is_refused(make):
    with pytest.raises(ValueError, match=r"not an identifier|not a base64 PNG data URI"):
        make()
