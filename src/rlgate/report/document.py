"""The release report as a document: sections of typed blocks, built once, rendered twice.

:mod:`rlgate.report.sections` builds one :class:`Document` from a
:class:`~rlgate.report.model.ReleaseReport`; :mod:`rlgate.report.render` writes that same
document as Markdown and as HTML. A section is a title, an optional anchor and a tuple of
blocks (:class:`Paragraph`, :class:`Bullets`, :class:`Table`, :class:`Listing`,
:class:`Figure`, :class:`VerdictBanner`, :class:`Notice`), plus optional subsections.

Escaping is decided by type, once, in the backends; a builder never escapes:

* a plain ``str`` is **untrusted** text (anything that may come from an input): Markdown
  gets :func:`rlgate.core.text.md_text` (literal, one line), HTML ``html.escape`` after
  :func:`rlgate.core.text.printable`;
* :class:`Own` is rlgate's own wording and numbers (never input-derived): verbatim in
  Markdown, escaped in HTML all the same;
* :class:`Code` is a code span (:func:`rlgate.core.text.md_code` / ``<code>``);
* :class:`Strong` is bold; :class:`Ref` a link to one of the report's own anchors;
  :class:`Link` an https link from rlgate's configuration (site config, CI variables);
* :class:`Escaped` is a sentence its producer already escaped for Markdown (the story),
  carried with its plain form for HTML.

Anchors, HTML classes and figure keys are checked identifiers and a figure's image is its
own PNG (``plots/<key>.png`` in Markdown, a base64 ``data:`` URI in HTML): no URL, tag or
attribute can come from an input (a :class:`Link`'s URL is the site's or the CI's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeAlias

from rlgate.core.links import https_url

__all__ = [
    "CLIP",
    "Block",
    "Bullets",
    "Cell",
    "Code",
    "Document",
    "Entry",
    "Escaped",
    "Figure",
    "Inline",
    "Item",
    "Link",
    "Listing",
    "Notice",
    "Own",
    "Paragraph",
    "Ref",
    "Row",
    "Section",
    "Strong",
    "Table",
    "VerdictBanner",
    "clip",
    "parts",
    "plain_text",
]

_IDENT = re.compile(r"[a-z0-9][a-z0-9_-]*", re.IGNORECASE)
_DATA_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]*={0,2}")


def _ident(value: str | None, what: str) -> None:
    if value is not None and not _IDENT.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not an identifier ([a-z0-9_-])")


#: Longest message a table cell or bullet shows (the full text is in junit.xml / the JSON).
CLIP = 300


def clip(text: str, n: int = CLIP) -> str:
    """``text`` cut to ``n`` characters (an ellipsis marks the cut), for a cell or bullet."""
    return text if len(text) <= n else text[: n - 1] + "…"


# --- inline -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Own:
    """rlgate's own words or numbers (never input-derived): verbatim in Markdown."""

    text: str


@dataclass(frozen=True, slots=True)
class Code:
    """A code span (untrusted text, shown literally in a monospace span)."""

    text: str


@dataclass(frozen=True, slots=True)
class Strong:
    """Bold text."""

    text: str | Own


@dataclass(frozen=True, slots=True)
class Ref:
    """A link to one of the report's own anchors (``#anchor``); never a URL."""

    anchor: str
    text: str | Own

    def __post_init__(self) -> None:
        _ident(self.anchor, "link anchor")


@dataclass(frozen=True, slots=True)
class Link:
    """An external https link from rlgate's own configuration (rlgate.core.links), never an input's.

    ``url`` is checked again here (https, RFC 3986 characters only); ``text`` is shown as any
    text of its type.
    """

    url: str
    text: str | Own

    def __post_init__(self) -> None:
        if https_url(self.url) is None:
            raise ValueError(f"link {self.url!r} is not a plain https URL")


@dataclass(frozen=True, slots=True)
class Escaped:
    """A sentence already escaped for Markdown by its producer, and its plain form (HTML)."""

    markdown: str
    plain: str


Inline: TypeAlias = str | Own | Code | Strong | Ref | Link | Escaped
#: What a table cell, paragraph or list item holds: one inline or a run of them.
Cell: TypeAlias = Inline | tuple[Inline, ...]


def parts(cell: Cell) -> tuple[Inline, ...]:
    """The inlines of ``cell``, as a tuple."""
    return cell if isinstance(cell, tuple) else (cell,)


def plain_text(cell: Cell) -> str:
    """What ``cell`` reads as, without markup (the text both backends show)."""
    out = []
    for part in parts(cell):
        if isinstance(part, Escaped):
            out.append(part.plain)
        elif isinstance(part, Strong | Ref | Link):
            out.append(plain_text(part.text))
        elif isinstance(part, Own | Code):
            out.append(part.text)
        else:
            out.append(part)
    return "".join(out)


# --- blocks -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Paragraph:
    """A paragraph; ``style`` is an HTML class (e.g. ``story``)."""

    content: Cell
    style: str | None = None

    def __post_init__(self) -> None:
        _ident(self.style, "paragraph style")


#: One bullet of a :class:`Bullets` list: a paragraph (``style``: the ``<li>``'s class).
Item = Paragraph


@dataclass(frozen=True, slots=True)
class Bullets:
    """A bulleted list."""

    items: tuple[Item, ...]


@dataclass(frozen=True, slots=True)
class Row:
    """A table row; ``anchor`` makes it a link target, ``style`` is an HTML class."""

    cells: tuple[Cell, ...]
    anchor: str | None = None
    style: str | None = None

    def __post_init__(self) -> None:
        _ident(self.anchor, "row anchor")
        _ident(self.style, "row style")


@dataclass(frozen=True, slots=True)
class Table:
    """A table with a header row (rlgate's own column names)."""

    head: tuple[str, ...]
    rows: tuple[Row, ...]

    def __post_init__(self) -> None:
        bad = [r for r in self.rows if len(r.cells) != len(self.head)]
        if bad:
            raise ValueError(f"table {self.head}: a row has {len(bad[0].cells)} cells")


@dataclass(frozen=True, slots=True)
class Entry:
    """One name of a :class:`Listing`, with its status when the listing shows one."""

    name: str
    status: str | None = None


@dataclass(frozen=True, slots=True)
class Listing:
    """Many names under a label.

    Markdown lists the first ``limit`` inline (then a count of the rest, ``all in
    <where>``); HTML lists all of them in a collapsed ``<details>`` table.
    """

    label: Cell
    entries: tuple[Entry, ...]
    limit: int = 40
    where: str = "junit.xml"


@dataclass(frozen=True, slots=True)
class Figure:
    """A plot: ``plots/<key>.png`` next to the Markdown, inlined as base64 in the HTML."""

    key: str
    title: str
    caption: str
    data_uri: str

    def __post_init__(self) -> None:
        _ident(self.key, "figure key")
        if not _DATA_URI.fullmatch(self.data_uri):
            raise ValueError(f"figure {self.key}: not a base64 PNG data URI")


@dataclass(frozen=True, slots=True)
class VerdictBanner:
    """The verdict (GO / NO-GO / INCOMPLETE): a heading in Markdown, a coloured badge in HTML."""

    verdict: str
    #: what the banner says, when more than the verdict (rlgate's own words and numbers:
    #: ``GO with 2 quarantined checks``); the verdict alone names the HTML class
    text: str = ""

    def __post_init__(self) -> None:
        _ident(self.verdict, "verdict")


@dataclass(frozen=True, slots=True)
class Notice:
    """A warning that frames the whole report (the DEMO banner)."""

    content: Cell


Block: TypeAlias = Paragraph | Bullets | Table | Listing | Figure | VerdictBanner | Notice


@dataclass(frozen=True, slots=True)
class Section:
    """A titled part of the report (``title`` None: no heading, e.g. the verdict at the top).

    Subsections are one heading level below. ``anchor`` is the section's link target.
    """

    title: Cell | None
    blocks: tuple[Block, ...] = ()
    anchor: str | None = None
    subsections: tuple[Section, ...] = ()

    def __post_init__(self) -> None:
        _ident(self.anchor, "section anchor")

    def walk(self, level: int = 2) -> Iterator[tuple[int, Section]]:
        """This section and its subsections, depth first, with their heading levels."""
        yield level, self
        for sub in self.subsections:
            yield from sub.walk(level + 1)


@dataclass(frozen=True, slots=True)
class Document:
    """The whole report: a title (the page's ``<h1>``), a browser-tab title, the sections."""

    title: str
    tab_title: str
    sections: tuple[Section, ...] = field(default=())

    def walk(self) -> Iterator[tuple[int, Section]]:
        """Every section, depth first, with its heading level (2 for top-level sections)."""
        for section in self.sections:
            yield from section.walk()

    def anchors(self) -> list[str]:
        """Every link target the document defines (sections and table rows), in order."""
        out = []
        for _, section in self.walk():
            out += [section.anchor] if section.anchor else []
            for block in section.blocks:
                if isinstance(block, Table):
                    out += [r.anchor for r in block.rows if r.anchor]
        return out
