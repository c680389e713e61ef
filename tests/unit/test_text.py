"""rlgate.core.text: untrusted strings made safe for terminals and Markdown."""

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
