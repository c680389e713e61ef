"""rlgate.core.text: untrusted strings made safe for terminals and Markdown."""

import html
import re
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from rlgate.core.text import (
    md_code,
    md_text,
    one_line,
    printable,
    redact_text,
    redact_url,
    without_credentials,
)

HOSTILE = [
    "[click](javascript:alert(1))",
    "![img](http://evil.example/x.png)",
    "<script>alert(1)</script>",
    "a `code` b ``c``",
    "**bold** _em_ # heading",
    "| cell | break |",
    "line\nbreak\r\x1b[2K\x1b[1Aerased",
    "<http://auto.link> www.evil.example https://evil.example/x",
    "\u202egnp.exe",
]


def _render(md: str) -> str:
    return MarkdownIt("gfm-like").render(md)


class TestPrintable:
    def test_printable_makes_escape_sequences_visible(self):
        assert printable("NO-GO\x1b[2K\x1b[1A\rGO") == "NO-GO\\x1b[2K\\x1b[1A\\x0dGO"

    def test_printable_keeps_newlines_and_tabs(self):
        assert printable("a\n\tb") == "a\n\tb"

    def test_printable_escapes_c1_and_bidi_controls(self):
        assert printable("\x9b31m\u202eabc") == "\\x9b31m\\u202eabc"

    def test_one_line_also_escapes_line_breaks(self):
        assert one_line("a\nb\u2028c") == "a\\x0ab\\u2028c"


class TestMarkdown:
    @pytest.mark.parametrize("text", HOSTILE)
    def test_md_text_renders_as_literal_text_with_no_markup(self, text):
        html = _render(md_text(text))
        assert re.fullmatch(r"<p>.*</p>\n", html, re.S), html
        inner = html[3:-5]
        assert "<a " not in inner and "<img" not in inner and "<script" not in inner
        assert "<strong>" not in inner and "<em>" not in inner and "<code>" not in inner
        assert "\x1b" not in inner and "\n" not in inner

    @pytest.mark.parametrize("text", HOSTILE)
    def test_md_code_is_one_code_span_holding_the_text(self, text):
        html = _render(md_code(text))
        assert html.startswith("<p><code>") and html.endswith("</code></p>\n"), html
        assert html.count("<code>") == 1

    def test_md_code_fence_outgrows_backtick_runs(self):
        assert md_code("a ``b`` c") == "```a ``b`` c```"


# --- md_text escapes only what can change the Markdown meaning --------------------------------

READABLE = [  # model ids, paths, recipe names, versions, sentences: shown as they are
    "Qwen/Qwen3.5-35B-A3B",
    "nvidia/Llama-3.1-Nemotron-Nano-8B-v1",
    "examples/configs/grpo_math_1B.yaml",
    "recipes/llm/grpo-qwen3.5-35ba3b-2n8g-megatron-async1off.yaml",
    "grpo-qwen3.5-35ba3b-2n8g-megatron-async1off-gym-swe-demo",
    "vllm 0.11.2, torch 2.8.0+cu128",
    "needs a GPU (CUDA): skipped; see the log, then rerun.",
    "qwen3_coder / deepseek_r1",
]


@pytest.mark.parametrize("text", READABLE)
def test_md_text_leaves_model_ids_paths_and_names_readable(text):
    assert md_text(text) == text
    assert _render(md_text(text)) == f"<p>{html.escape(text, quote=False)}</p>\n"


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("*a* _b_ a*b*c __init__", "\\*a\\* \\_b\\_ a\\*b\\*c \\_\\_init\\_\\_"),
        ("# h", "\\# h"),
        ("- item", "\\- item"),
        ("12. item", "12\\. item"),
        ("3.5 then 1. x", "3.5 then 1. x"),  # only a line's start opens a list
        ("http://evil.example", "http\\:\\//evil.example"),
        ("www.evil.example", "www\\.evil.example"),
        ("see evil.com or run.py", "see evil\\.com or run\\.py"),  # bare host.tld links
        ("x@evil.example", "x\\@evil.example"),
        ("<b>&amp; |~$`[", "\\<b\\>\\&amp; \\|\\~\\$\\`\\["),
    ],
)
def test_md_text_escapes_what_would_be_markup(text, escaped):
    assert md_text(text) == escaped


# Text dense in Markdown punctuation, letters (www, com, http, mailto), digits and spaces.
_MARKDOWNY = st.lists(
    st.sampled_from(
        [
            *"\\`*_[]()<>#+-=.!|~&:;/@$%^{}'\"?,\t ",
            "a",
            "Z",
            "1",
            "9",
            "é",
            "\n",
            "www",
            "com",
            "py",
            "http",
            "mailto",
            "localhost",
            "&#x6a;",
            "&lt;",
            "xn--p1ai",
            "рф",
        ]
    ),
    max_size=30,
).map("".join)
_MARKUP = re.compile(r"<(?!/?(?:p|ul|li|table|thead|tbody|tr|th|td)>)")


def _contexts(escaped: str) -> dict[str, str]:
    """The places rlgate puts untrusted text on a Markdown page, with the HTML expected."""
    return {
        "paragraph": f"{escaped}",
        "after text": f"recipe {escaped} passed",
        "bullet": f"- {escaped}",
        "bold": f"**{escaped}**",
        "table cell": f"| a | b |\n|---|---|\n| {escaped} | end |",
    }


@settings(max_examples=400, deadline=None)
@given(text=_MARKDOWNY)
def test_md_text_renders_as_its_own_plain_text_wherever_it_stands(text):
    escaped = md_text(text)
    shown = " ".join(one_line(text).split())
    for where, page in _contexts(escaped).items():
        rendered = _render(page)
        if where == "bold":
            rendered = rendered.replace("<strong>", "", 1).replace("</strong>", "", 1)
            if not shown:
                continue  # "****" is a thematic break or nothing: no text to check
        assert not _MARKUP.search(rendered), (where, page, rendered)
        plain = html.unescape(re.sub(r"<[^>]+>", " ", rendered))
        assert shown in " ".join(plain.split()), (where, page, rendered)


@settings(max_examples=200, deadline=None)
@given(text=_MARKDOWNY)
def test_md_text_makes_no_markup_in_python_markdown_either(text):
    """MkDocs uses Python-Markdown: it cannot escape '<' (but an escaped '>' ends no tag)."""
    markdown = pytest.importorskip("markdown")
    for where, page in _contexts(md_text(text)).items():
        rendered = markdown.markdown(page, extensions=["tables"])
        if where == "bold":
            rendered = rendered.replace("<strong>", "", 1).replace("</strong>", "", 1)
        assert not _MARKUP.search(rendered.replace("<hr />", "")), (where, page, rendered)


# --- URLs with credentials in messages and stored addresses (Ray dashboards) -----------------

_SECRET_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(tail=_SECRET_TEXT)
def test_a_message_quoting_a_url_in_any_form_shows_none_of_its_secrets(tail: str) -> None:
    secret = "S3CRET" + tail
    enc = quote(secret, safe="")
    url = f"http://rlgate:{enc}@head:8265/?token={enc}&x=1"
    said = (
        f"HTTPConnectionPool(host='head', port=8265): url: {url} failed; "
        f"auth rlgate:{secret} rejected; password={unquote(enc)}"
    )
    shown = redact_text(said, url)
    assert "S3CRET" not in shown and "head" in shown, shown
    stored = without_credentials(url)
    assert stored == "http://head:8265/?x=1" and "S3CRET" not in redact_url(url)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://TOKEN_S3CRET@127.0.0.1:1", "http://***@127.0.0.1:1"),  # requests: basic auth
        ("wss://TOKEN_S3CRET@head:8265/x", "wss://***@head:8265/x"),
        ("postgresql://rlgate@db:5432/h", "postgresql://rlgate@db:5432/h"),  # a name, no secret
    ],
)
def test_a_user_part_alone_is_a_secret_where_clients_send_it_as_one(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "S3CRET" not in redact_text(f"cannot reach {url}: refused", url)
    assert "S3CRET" not in without_credentials(url)


def test_a_validation_error_never_echoes_a_password_free_text_cuts_short() -> None:
    """A raw space (or bracket) in a password ends the URL for the text scanner; the value's
    own secrets are still replaced (core.validate.problems)."""
    from pydantic import BaseModel, ValidationError, field_validator

    from rlgate.core.validate import problems

    class Site(BaseModel):
        address: str

        @field_validator("address")
        @classmethod
        def _an_address(cls, value: str) -> str:
            raise ValueError(f"{redact_url(value)} is not an address")

    for url in ("http://admin:hunter2 S3CRET@head:8265", "http://u:pa(ss S3CRET@head:1"):
        with pytest.raises(ValidationError) as info:
            Site(address=url)
        said = problems(info.value)
        assert "S3CRET" not in said and "hunter2" not in said and "pa(ss" not in said, said
