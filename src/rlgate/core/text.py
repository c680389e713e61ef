r"""Make untrusted strings safe to print and to render (terminal, Markdown, HTML).

Everything rlgate shows a person may come from an untrusted input: recipe and
file names, JUnit names and messages, JSON fields written elsewhere. Three rules:

* **terminal**: no control character reaches a terminal raw. C0/C1 controls
  (ESC, CR, BEL, ...; newline and tab excepted) and Unicode line/paragraph and
  bidi-override characters are shown as visible ``\x1b`` / ``\u202e`` escapes,
  so a crafted name can neither erase a line nor recolour one;
* **Markdown**: untrusted text is escaped so it renders as the same literal text
  (no link, image, emphasis, heading, table cell break or raw HTML), or put in a
  code span whose fence is longer than any backtick run it holds;
* **one line**: a value that must stay on one line (a shell comment, a table
  cell) has its line breaks made visible too.

And one rule for credentials: a URL (a history database's, a Ray dashboard's) is shown only
through :func:`redact_url` (the password of its user and every query parameter that carries a
secret become ``***``); a message that may hold one (a library's exception text) goes through
:func:`redact_text`, and a URL rlgate stores goes through :func:`without_credentials`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus

__all__ = [
    "SECRET_PARAMETER",
    "escape_controls",
    "md_code",
    "md_text",
    "one_line",
    "printable",
    "redact_text",
    "redact_url",
    "unescape_controls",
    "url_secrets",
    "without_credentials",
]

# C0 controls except \t and \n, DEL, C1 controls, the Unicode characters that move or
# reorder text on a terminal (line/paragraph separators, bidi controls), and lone
# surrogates (a JSON "\ud800" escape), which no UTF-8 stream can even encode.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_LINE_BREAK = re.compile("[\n\r\u2028\u2029\x0b\x0c\x85]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character except newline and tab made visible."""
    return _CONTROL.sub(_escape, str(text))


# escape_controls also escapes what XML 1.0 cannot carry (U+FFFE, U+FFFF), and a backslash
# that would otherwise read as the start of an escape (so unescape_controls inverts it).
_NOT_XML = "[\ufffe\uffff]"
_REVERSIBLE = re.compile(
    rf"\\(?=\\|x[0-9a-f]{{2}}|u[0-9a-f]{{4}}|{_CONTROL.pattern}|{_NOT_XML})"
    rf"|{_CONTROL.pattern}|{_NOT_XML}"
)
_ESCAPE_SEQUENCE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def escape_controls(text: object) -> str:
    r"""``printable(text)``, reversibly, and safe in XML 1.0 (U+FFFE/U+FFFF escaped too).

    Controls read ``\x1b`` / ``\u202e`` exactly as :func:`printable` shows them; a backslash
    that would read as the start of such an escape is doubled, so :func:`unescape_controls`
    gives the original text back.
    """
    return _REVERSIBLE.sub(lambda m: "\\\\" if m.group(0) == "\\" else _escape(m), str(text))


def unescape_controls(text: str) -> str:
    """The inverse of :func:`escape_controls`."""

    def back(match: re.Match[str]) -> str:
        body = match.group(1)
        return "\\" if body == "\\" else chr(int(body[1:], 16))

    return _ESCAPE_SEQUENCE.sub(back, text)


def one_line(text: object) -> str:
    """``printable(text)`` with line breaks made visible as well: it cannot end a line."""
    return _CONTROL.sub(_escape, _LINE_BREAK.sub(_escape, str(text)))


# Markdown escaping: a backslash goes before each character that can change the Markdown
# meaning of the text where it stands (CommonMark + GFM as GitHub and GitLab render it,
# markdown-it with linkify as editors do, Python-Markdown as MkDocs does), and nowhere
# else, so that `Qwen/Qwen3.5-35B`, `examples/configs/grpo_math_1B.yaml` and
# `grpo-qwen3.5-35ba3b` stay readable in report.md.
# '<' and '>' both: Python-Markdown (MkDocs) cannot escape '<', but an escaped '>' ends no tag.
_MD_ALWAYS = frozenset("\\`*[]<>&|~$@{}")  # escapes, code, emphasis, links, HTML, tables, math
_MD_LEADING = frozenset("#+-=(!.:/_")  # block markers at a line start (or after a part)
_MD_ORDERED = re.compile(r"\s*\d{1,9}")  # "1." / "1)" opening an ordered list
# Top-level domains a linkifier links without a scheme ("evil.com"): every two-letter label
# (country codes) and these (linkify-it's defaults and a few common ones).
_MD_TLDS = frozenset(
    "biz com edu gov net org pro web xxx aero asia coop info museum name shop "
    "app dev xyz zip mov site online top tech cloud store blog link page".split()
)


def _label(text: str, start: int, step: int) -> str:
    """The host label (letters, digits, hyphens) running from ``start`` in direction ``step``."""
    end = start
    while 0 <= end < len(text) and (text[end].isalnum() or text[end] == "-"):
        end += step
    return text[start:end] if step > 0 else text[end + 1 : start + 1]


def _tld_like(label: str) -> bool:
    low = label.lower()
    return low.startswith("xn--") or (label.isalpha() and (len(label) == 2 or low in _MD_TLDS))


def _md_special(text: str, i: int) -> bool:
    """Whether ``text[i]`` can change the Markdown meaning of ``text`` where it stands."""
    c = text[i]
    if c in _MD_ALWAYS:
        return True
    before, after = text[i - 1] if i else "", text[i + 1 : i + 2]
    if c in _MD_LEADING and not text[:i].strip():
        return True  # a heading, list, quote, break or setext line; or glued to what precedes
    if c in ".)" and _MD_ORDERED.fullmatch(text[:i]) and after in ("", " ", "\t"):
        return True
    if c == "_":  # emphasis, except between two letters or digits (snake_case)
        return not (before.isalnum() and after.isalnum())
    if c == "!":  # an image once a link follows
        return after == ""
    if c in ":/":  # scheme://, //host
        return after in ("/", "") if c == "/" else after == "/"
    if c == ".":  # www.host and bare host.tld autolinks
        return _label(text, i - 1, -1).lower() == "www" or _tld_like(_label(text, i + 1, 1))
    return False


def md_text(text: object) -> str:
    """Escape ``text`` for Markdown: it renders literally, on one line, with no live markup.

    No link (autolinks of ``scheme://``, ``www.``, ``host.tld`` and e-mail addresses
    included), image, emphasis, strikethrough, heading, list, quote, table cell break, math,
    entity or raw HTML can come from ``text``, wherever on a line it is put; only the
    characters that could make one are escaped. Blanks at either end, which Markdown does not
    show (and which could indent a code block or end a line with a break), are dropped.
    """
    body = one_line(text).strip(" \t")
    return "".join(f"\\{c}" if _md_special(body, i) else c for i, c in enumerate(body))


def md_code(text: object) -> str:
    """``text`` as a Markdown code span that no backtick inside it can close early."""
    body = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


#: Query parameters of a URL that carry a secret or name where one is (libpq's ``password``,
#: ``sslpassword``, ``passfile``, ``sslkey``, ``sslkeylogfile``, ``oauth_client_secret``,
#: ``scram_client_key``, ...; any ``token``): shown as ``***``.
SECRET_PARAMETER = re.compile(r"pass|key|secret|token", re.IGNORECASE)
# user:password@ -- the password runs to the last '@' (a raw '@', '/' or '?' in it included)
_USERINFO = re.compile(r"([^:/@?#]*):.*@", re.DOTALL)
#: Schemes whose clients send a user part alone as a credential (``requests``: basic auth
#: with an empty password; a token is often given so): there ``token@`` is shown as ``***@``.
#: A database URL's bare user is a name, not a secret, and stays.
USER_IS_SECRET = frozenset({"http", "https", "ws", "wss"})


def redact_url(text: object) -> str:
    """``text`` (a URL, or anything else) with its credentials replaced by ``***``.

    The password of ``scheme://user:password@host`` (to the last ``@``, so a malformed URL
    leaks none of it), a user part alone where it is a credential (:data:`USER_IS_SECRET`)
    and the value of every query parameter whose decoded name matches
    :data:`SECRET_PARAMETER` (``?password=...&sslpassword=...``). Text without ``://`` (a
    file path) is returned as it is. Every message, output and JSON that names a database
    URL shows it through this function.
    """
    scheme, sep, rest = str(text).partition("://")
    if not sep:
        return scheme
    if match := _USERINFO.match(rest):
        rest = f"{match.group(1)}:***@{rest[match.end() :]}"
    elif scheme.lower() in USER_IS_SECRET and "@" in rest:
        rest = f"***@{rest.rpartition('@')[2]}"
    head, qsep, query = rest.partition("?")
    if qsep:
        parts = re.split(r"([&;])", query)
        for i in range(0, len(parts), 2):
            key, eq, _ = parts[i].partition("=")
            if eq and SECRET_PARAMETER.search(unquote_plus(key)):
                parts[i] = f"{key}=***"
        rest = head + qsep + "".join(parts)
    return f"{scheme}{sep}{rest}"


# A URL inside free text: a scheme, "://", and everything up to a space, quote or bracket.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")


def url_secrets(url: str) -> tuple[str, ...]:
    """The secrets ``url`` carries: its password and the values of secret query parameters.

    As :func:`redact_url` reads them (the user part runs to the last ``@``); each as written
    and percent-decoded, longest first.
    """
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        return ()
    userinfo, at, host = rest.rpartition("@")
    found = {userinfo.split(":", 1)[1]} if at and ":" in userinfo else set()
    if at and ":" not in userinfo and scheme.lower() in USER_IS_SECRET:
        found.add(userinfo)
    _, qsep, query = (host if at else rest).partition("?")
    for part in re.split(r"[&;]", query.partition("#")[0]) if qsep else ():
        key, eq, value = part.partition("=")
        if eq and SECRET_PARAMETER.search(unquote_plus(key)):
            found.add(value)
    found |= {unquote_plus(v) for v in found} | {unquote(v) for v in found}
    return tuple(sorted((v for v in found if v), key=len, reverse=True))


def redact_text(text: object, *urls: str) -> str:
    """``text`` (a message) with every URL in it through :func:`redact_url`.

    And every secret of ``urls`` (:func:`url_secrets`: the URLs the message is about) replaced
    by ``***`` wherever it appears, so a library that quotes its address in another form
    (decoded, inside a longer word) leaks none of it either.
    """
    shown = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), str(text))
    for secret in sorted({s for url in urls for s in url_secrets(url)}, key=len, reverse=True):
        shown = shown.replace(secret, "***")
    return shown


def without_credentials(url: str) -> str:
    """``url`` without its user part (``user:password@``) and its secret query parameters.

    What rlgate may store of a URL to reach the same place again; the credentials come from
    where the user keeps them (the environment) when it is used. The user part runs to the
    last ``@``, as in :func:`redact_url`.
    """
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        return str(url)
    rest = rest.rpartition("@")[2]
    head, qsep, query = rest.partition("?")
    if not qsep:
        return f"{scheme}{sep}{rest}"
    query, hsep, fragment = query.partition("#")
    kept = [
        part
        for part in re.split(r"[&;]", query)
        if part and not SECRET_PARAMETER.search(unquote_plus(part.partition("=")[0]))
    ]
    return f"{scheme}{sep}{head}{'?' + '&'.join(kept) if kept else ''}{hsep}{fragment}"
