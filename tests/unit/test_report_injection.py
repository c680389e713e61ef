"""What people read stays literal: no link, image, HTML or terminal escape from an input.

Regression story (issue 10, "injection into what people read"): report.md kept live
Markdown links, images and ``javascript:`` URLs taken from JUnit names and messages and SWE
JSON fields, a backtick broke out of inline code, some SWE summary lines were not escaped
at all (raw ``<script>`` reached report.md), and ESC from JSON messages and recipe names
landed in report.md and report.html (and crashed the SWE plot when a ``$`` made it
mathtext).

A corpus of hostile strings goes into every channel a user can fill: JUnit testcase names,
classnames, messages, skip reasons, testcase and suite properties (written with
junitparser), run JSON and SWE JSON fields (real documents with fields replaced). The pages
are checked as written and as rendered by a GitHub-like Markdown renderer (markdown-it-py's
``gfm-like``: tables, strikethrough, bare-URL autolinks) and an HTML parser: the only links
are the report's own anchors, the only images its own plots, no tag or attribute comes from
an input, no raw control character survives, and the hostile text is still visible as text.
"""

import contextlib
import html
import io
import json
import re
from html.parser import HTMLParser

import pytest
from junitparser import Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite
from markdown_it import MarkdownIt

from rlgate.cli.app import main
from rlgate.core.text import md_code, md_text
from rlgate.report.build import build_report, prepare_out_dir, write_report
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri

# Every string is something a JUnit or JSON written elsewhere can carry. XML 1.0 cannot
# carry ESC or most C0 controls, so the terminal escapes go through the JSON inputs.
HOSTILE = (
    "[click me](javascript:alert(1))",
    "![pixel](https://evil.example/p.png)",
    "<script>alert(2)</script>",
    '<img src=x onerror="alert(3)">',
    "`` ` ``<b>bold</b>`` `",
    "**bold** _em_ ~~strike~~ # heading | cell | break",
    "https://evil.example/auto and www.evil.example",
    "<https://evil.example/angle> <mailto:x@evil.example>",
    "&#x6a;avascript:alert(4) &lt;script&gt;",
    "[ref]: javascript:alert(5)",
    "[text][ref]",
    "line one\nline two\n# injected heading\n- injected item",
    "\u202ereversed\u2066 \u2028separator",
    "$\\frac{$ mathtext $x^$",
)
TERMINAL = (
    "\x1b[2K\x1b[1Aerased",
    "\x1b]8;;https://evil.example\x07osc-link\x1b]8;;\x07",
    "\x07bell\x9b",
)
CONTROL = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
HTML_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "div", "p", "ul",
    "li", "b", "a", "table", "tr", "th", "td", "details", "summary", "figure", "img",
    "figcaption", "code",
}  # fmt: skip
VISIBLE = ("javascript:alert(1)", "<script>alert(2)</script>", "evil.example/p.png", "onerror=")


def _h(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)]


def _t(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)] + TERMINAL[i % len(TERMINAL)]


def _hostile_junit(root):
    """A functional-tier JUnit whose every string is hostile (junitparser writes it)."""
    suite = TestSuite("suite " + _h(2))
    suite.add_property("rlgate.version." + _h(0), _h(1))
    for i, text in enumerate(HOSTILE):
        case = TestCase(text, classname=f"tests.functional.{text}")
        props = Properties()
        props.add_property(Property("rlgate.template_sha256", _h(i + 1)))
        props.add_property(Property(_h(i + 2), _h(i + 3)))
        case.append(props)
        if i % 3 == 0:
            case.result = [Failure(_h(i + 4))]
        elif i % 3 == 1:
            case.result = [Skipped(_h(i + 5))]
        suite.add_testcase(case)
    xml = JUnitXml("hostile " + _h(0))
    xml.add_testsuite(suite)
    path = root / "hostile.xml"
    xml.write(str(path))
    return path


def _hostile_run_json(root):
    doc = json.loads(ri.check_run(Fault.HEALTHY)[0].read_text())
    doc["recipe"] = _t(0)
    doc["run"] = "/nowhere/" + _t(1)
    doc["warnings"] = [_t(2)]
    for i, check in enumerate(doc["checks"]):  # value and tier are typed: refused if hostile
        check.update(name=_t(i), message=_t(i + 3), bound=_h(i + 4), unit=_t(i + 5))
    doc["skipped"] = [{"name": _t(6), "tier": "perf", "reason": _t(8)}]
    path = root / "run.json"
    path.write_text(json.dumps(doc))
    return path


def _hostile_swe_json(root):
    doc = json.loads(ri.swe("improved")[0].read_text())
    doc["test"] = _t(0)
    doc["reasons"] = [_t(1)]
    doc["dataset"]["source"] = _t(2)
    for i, criterion in enumerate(doc["criteria"]):
        criterion["message"] = _t(i + 3)
    for i, repo in enumerate(doc["per_repo"]):
        repo["repo"] = _t(i)
    for i, run in enumerate(doc["before"]["runs"]):
        run["label"] = _t(i + 4)
    path = root / "swe.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """report.md, report.html and the CLI's stdout for the hostile inputs (plots drawn)."""
    root = tmp_path_factory.mktemp("hostile")
    full = ri.full_set()
    junit = [_hostile_junit(root), *full["junit"][1:]]
    args = ["report", "--junit", *map(str, junit), "--run", str(_hostile_run_json(root))]
    args += ["--swe", str(_hostile_swe_json(root)), "--out", str(root / "out")]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return {
        "code": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "md": (root / "out/report.md").read_text(encoding="utf-8"),
        "html": (root / "out/report.html").read_text(encoding="utf-8"),
    }


class _Tags(HTMLParser):
    """Every tag with its attributes, and the text, of an HTML document."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(markup: str) -> _Tags:
    parser = _Tags()
    parser.feed(markup)
    return parser


def _markdown() -> MarkdownIt:
    """GitHub-like: tables, strikethrough and bare-URL autolinks (linkify)."""
    return MarkdownIt("gfm-like")


def _rendered(md: str) -> str:
    return _markdown().render(md)


def _raw_html(md: str) -> list[str]:
    """Every raw HTML fragment the Markdown parser passes through."""
    out = []
    for token in _markdown().parse(md):
        if token.type == "html_block":
            out.append(token.content)
        out += [t.content for t in token.children or () if t.type == "html_inline"]
    return out


def _own_links_and_images_only(tags, image_prefix):
    for tag, attrs in tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "a":
            href = attrs.get("href")
            assert href is None or re.fullmatch(r"#[a-z0-9_-]+", href), (tag, attrs)
        if tag == "img":
            assert (attrs.get("src") or "").startswith(image_prefix), (tag, attrs)
        assert tag not in ("script", "iframe", "object", "embed", "form", "input", "link")


class TestHostileStrings:
    def test_the_report_is_written_and_the_exit_code_is_a_verdict(self, pages):
        assert pages["code"] in (0, 1, 3), pages["stderr"]
        assert "internal error" not in pages["stderr"]

    def test_markdown_source_has_no_live_construct_from_an_input(self, pages):
        md = pages["md"]
        raw = [h for h in _raw_html(md) if not re.fullmatch(r'<a id="[a-z0-9_-]+">|</a>', h)]
        assert not raw, raw  # the report's own anchors are its only raw HTML
        prose = re.sub(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)", "<code span>", md)
        # the hostile text stays, its markup does not: its '[', ']', '<' and '>' are escaped
        assert "\\](javascript:" in prose and "\\<img src=x onerror=" in prose
        assert not re.search(r"(?<!\\)\]\(javascript:|(?<!\\)<img|onerror=[^\n<>]*(?<!\\)>", prose)
        assert "https://evil" not in prose and "www.evil" not in prose  # GFM autolinks
        images = [line for line in prose.splitlines() if "![" in line]
        assert images and all(re.fullmatch(r"!\[[^\n]*\]\(plots/\w+\.png\)", x) for x in images)
        assert not re.search(r"^#+ .*injected", md, flags=re.M)
        assert not re.search(r"^- injected item", md, flags=re.M)

    def test_markdown_renders_only_the_reports_own_links_images_and_html(self, pages):
        rendered = _rendered(pages["md"])
        tags = _parse(rendered).tags
        _own_links_and_images_only(tags, "plots/")
        assert {t for t, _ in tags} <= {
            "h1", "h2", "h3", "p", "a", "strong", "em", "ul", "li", "table", "thead",
            "tbody", "tr", "th", "td", "code", "img", "blockquote",
        }  # fmt: skip
        assert not any(t == "del" for t, _ in tags), "~~strike~~ from an input rendered"

    def test_markdown_keeps_the_hostile_text_visible(self, pages):
        text = "".join(_parse(_rendered(pages["md"])).text)
        for token in VISIBLE:
            assert token in text, token

    def test_html_page_has_only_its_own_tags_links_and_images(self, pages):
        parsed = _parse(pages["html"])
        _own_links_and_images_only(parsed.tags, "data:image/png;base64,")
        assert {t for t, _ in parsed.tags} <= HTML_TAGS
        text = "".join(parsed.text)
        for token in VISIBLE:
            assert token in text, token

    @pytest.mark.parametrize("page", ["md", "html", "stdout"])
    def test_no_raw_control_character_reaches_a_page_or_the_terminal(self, pages, page):
        found = CONTROL.findall(pages[page])
        assert not found, sorted(set(found))
        shown = pages[page]
        if page != "stdout":
            rendered = _rendered(shown) if page == "md" else shown
            shown = "".join(_parse(rendered).text)
        assert "\\x1b[2K" in shown  # visible as text, escaped

    def test_a_backtick_in_a_name_cannot_close_its_code_span(self):
        name = "x` [a](javascript:alert(1)) `y"
        rendered = _rendered(f"passed: {md_code(name)}")
        assert "<code>" + html.escape(name, quote=False) + "</code>" in rendered
        assert "href" not in rendered


class TestMdText:
    @pytest.mark.parametrize("text", [*HOSTILE, *TERMINAL])
    def test_md_text_renders_as_the_same_literal_text(self, text):
        from rlgate.core.text import one_line

        rendered = _rendered(md_text(text))
        parsed = _parse(rendered)
        assert [t for t, _ in parsed.tags] == ["p"]
        assert "".join(parsed.text).strip() == one_line(text).strip()

    @pytest.mark.parametrize("text", HOSTILE)
    def test_md_text_is_one_table_cell(self, text):
        rendered = _rendered(f"| a | b |\n|---|---|\n| {md_text(text)} | end |\n")
        cells = [t for t, _ in _parse(rendered).tags if t == "td"]
        assert len(cells) == 2


def test_write_report_of_a_hostile_junit_alone_escapes_it(tmp_path):
    """The same corpus through the library (no CLI), with the plots drawn."""
    report = build_report([_hostile_junit(tmp_path)])
    files = write_report(report, prepare_out_dir(tmp_path / "out"))
    rendered = _rendered(files["markdown"].read_text())
    assert "<script" not in rendered and "javascript:alert(1)" in rendered
    _own_links_and_images_only(_parse(rendered).tags, "plots/")
    assert "<script" not in files["html"].read_text().lower()
