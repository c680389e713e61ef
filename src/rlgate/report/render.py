"""Render a :class:`~rlgate.report.model.ReleaseReport` as Markdown, self-contained HTML and JSON.

Rendering only: no decisions and no file writes. Both pages come from the one
:class:`~rlgate.report.document.Document` that :func:`rlgate.report.sections.build_document`
builds, through two small backends, :func:`to_markdown` and :func:`to_html`, so they carry
the same sections in the same order. The HTML embeds its figures as base64 PNG and its CSS
inline: no external request, no script.

Escaping happens here, by type (:mod:`rlgate.report.document`): every plain ``str`` is
untrusted: in Markdown it goes through :func:`rlgate.core.text.md_text` (renders
literally: no link, image, emphasis, heading, table break or raw HTML), a code span through
:func:`rlgate.core.text.md_code` (its ``|`` escaped inside a table cell); in HTML through
``html.escape`` after :func:`rlgate.core.text.printable` (no raw control character, e.g.
ESC, reaches either page). The only links are the report's own anchors and
``plots/<key>.png``; no URL comes from an input.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rlgate.core.results import Tier
from rlgate.core.text import md_code, md_text, one_line, printable
from rlgate.report.document import (
    Block,
    Bullets,
    Cell,
    Code,
    Document,
    Escaped,
    Figure,
    Link,
    Listing,
    Notice,
    Own,
    Paragraph,
    Ref,
    Section,
    Strong,
    Table,
    VerdictBanner,
    parts,
)
from rlgate.report.sections import build_document

if TYPE_CHECKING:
    from rlgate.report.model import ReleaseReport

__all__ = ["render_html", "render_markdown", "report_payload", "to_html", "to_markdown"]


def _words(text: object) -> str:
    """Untrusted text with its whitespace runs (line breaks included) made one space."""
    return " ".join(str(text).split())


# --- Markdown ---------------------------------------------------------------------------------


def _md_part(part: object, cell: bool) -> str:
    if isinstance(part, Own):
        return part.text
    if isinstance(part, Escaped):
        return part.markdown
    if isinstance(part, Code):
        code = md_code(part.text)
        return code.replace("|", "\\|") if cell else code  # GFM splits cells first
    if isinstance(part, Strong):
        inner = _md(part.text, cell)
        return f"**{inner}**" if inner else ""
    if isinstance(part, Ref):
        return f"[{_md(part.text, cell)}](#{part.anchor})"
    if isinstance(part, Link):  # an RFC 3986 https URL (checked by Link): <...> needs no escape
        url = part.url.replace("|", "%7C") if cell else part.url
        return f"[{_md(part.text, cell)}](<{url}>)"
    return md_text(_words(part))  # untrusted: literal, one line


def _md(cell: Cell, in_cell: bool = False) -> str:
    return "".join(_md_part(p, in_cell) for p in parts(cell))


def _md_table(table: Table) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in table.head) + " |"]
    lines.append("|" + "---|" * len(table.head))
    for row in table.rows:
        cells = [_md(c, in_cell=True) for c in row.cells]
        if row.anchor:
            cells[0] = f'<a id="{row.anchor}"></a>{cells[0]}'
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _md_listing(listing: Listing) -> str:
    names = [md_code(e.name) + (f" ({_md(e.status)})" if e.status else "") for e in listing.entries]
    if not names:
        return _md(listing.label) + "."
    extra = len(names) - listing.limit
    more = f" … (+{extra}; all in {_md(listing.where)})" if extra > 0 else ""
    return _md(listing.label) + ": " + ", ".join(names[: listing.limit]) + more


def _md_block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [_md(block.content)]
    if isinstance(block, Bullets):
        return [f"- {_md(item.content)}" for item in block.items]
    if isinstance(block, Table):
        return _md_table(block)
    if isinstance(block, Listing):
        return [_md_listing(block)]
    if isinstance(block, Figure):
        return [
            f"![{_md(block.title)}](plots/{block.key}.png)",
            "",
            f"*{_md(block.caption)}*",
        ]
    if isinstance(block, VerdictBanner):
        return [f"## Verdict: **{block.text or block.verdict}**"]
    if isinstance(block, Notice):
        return [f"> **{_md(block.content)}**"]
    raise TypeError(f"no Markdown for block {type(block).__name__}")


def _md_section(level: int, section: Section) -> list[str]:
    lines = []
    if section.title is not None:
        anchor = f'<a id="{section.anchor}"></a>' if section.anchor else ""
        lines += ["#" * level + f" {anchor}{_md(section.title)}", ""]
    for block in section.blocks:
        body = _md_block(block)
        lines += [*body, ""] if body else []
    return lines


def to_markdown(document: Document) -> str:
    """``document`` as GitHub-flavoured Markdown (figures referenced under ``plots/``)."""
    lines = [f"# {_md(document.title)}", ""]
    for level, section in document.walk():
        lines += _md_section(level, section)
    return "\n".join(lines).rstrip("\n") + "\n"


def render_markdown(report: ReleaseReport) -> str:
    """The report as GitHub-flavoured Markdown (figures referenced under ``plots/``)."""
    return to_markdown(build_document(report))


# --- HTML -------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1180px;color:#1d2733;line-height:1.45;padding:0 16px}
h1{margin-bottom:4px}h2{border-bottom:1px solid #d8dee6;padding-bottom:4px;margin-top:32px}
.verdict{display:inline-block;font-size:34px;font-weight:700;padding:10px 28px;
border-radius:10px;color:#fff}
.v-GO{background:#1a7f37}.v-NO-GO{background:#cf222e}.v-INCOMPLETE{background:#bf8700}
.demo{background:#fff4ce;border:2px dashed #bf8700;padding:8px 14px;font-weight:600;
margin:10px 0}
.story{font-size:18px;margin:16px 0;padding:12px 16px;background:#f3f6fa;
border-left:5px solid #1f77b4}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px;width:100%}
th,td{border:1px solid #d8dee6;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f6fa}
tr.failed td:first-child,tr.error td:first-child{color:#cf222e;font-weight:700}
tr.skipped td:first-child,tr.xfailed td:first-child{color:#9a6700}
li.b-NO-GO{color:#cf222e}li.b-INCOMPLETE{color:#9a6700}figure{margin:12px 0}
figure img{max-width:100%;border:1px solid #d8dee6}figcaption{font-size:12px;color:#57606a}
code{background:#f3f6fa;padding:0 3px}details{margin:6px 0 14px}
"""


def _h(text: object) -> str:
    """Untrusted text for HTML: control characters made visible, then escaped."""
    return html.escape(printable(text), quote=True)


def _attrs(anchor: str | None = None, style: str | None = None) -> str:
    """``id``/``class`` attributes (checked identifiers, see rlgate.report.document)."""
    return (f' id="{anchor}"' if anchor else "") + (f' class="{style}"' if style else "")


def _html_part(part: object) -> str:
    if isinstance(part, Own):
        return _h(part.text)
    if isinstance(part, Escaped):
        return _h(part.plain)
    if isinstance(part, Code):
        return f"<code>{_h(one_line(part.text))}</code>"  # as md_code shows it
    if isinstance(part, Strong):
        return f"<b>{_html(part.text)}</b>"
    if isinstance(part, Ref):
        return f'<a href="#{part.anchor}">{_html(part.text)}</a>'
    if isinstance(part, Link):
        return f'<a href="{_h(part.url)}" rel="noopener noreferrer">{_html(part.text)}</a>'
    return _h(_words(part))


def _html(cell: Cell) -> str:
    return "".join(_html_part(p) for p in parts(cell))


def _html_rows(rows: Sequence[tuple[str, Sequence[Cell]]]) -> str:
    return "".join(
        f"<tr{attrs}>" + "".join(f"<td>{_html(c)}</td>" for c in cells) + "</tr>"
        for attrs, cells in rows
    )


def _html_block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p{_attrs(style=block.style)}>{_html(block.content)}</p>"
    if isinstance(block, Bullets):
        items = "".join(f"<li{_attrs(style=i.style)}>{_html(i.content)}</li>" for i in block.items)
        return f"<ul>{items}</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{_html(h)}</th>" for h in block.head)
        rows = _html_rows([(_attrs(r.anchor, r.style), r.cells) for r in block.rows])
        return f"<table><tr>{head}</tr>{rows}</table>"
    if isinstance(block, Listing):
        entries = [
            ("", (Code(e.name), e.status) if e.status else (Code(e.name),)) for e in block.entries
        ]
        summary = f"<summary>{_html(block.label)}</summary>"
        return f"<details>{summary}<table>{_html_rows(entries)}</table></details>"
    if isinstance(block, Figure):
        return (
            f'<figure><img alt="{_html(block.title)}" src="{block.data_uri}">'
            f"<figcaption>{_html(block.caption)}</figcaption></figure>"
        )
    if isinstance(block, VerdictBanner):
        return f'<div class="verdict v-{block.verdict}">{_h(block.text or block.verdict)}</div>'
    if isinstance(block, Notice):
        return f'<div class="demo">{_html(block.content)}</div>'
    raise TypeError(f"no HTML for block {type(block).__name__}")


def _html_section(level: int, section: Section) -> list[str]:
    out = []
    if section.title is not None:
        out.append(f"<h{level}{_attrs(section.anchor)}>{_html(section.title)}</h{level}>")
    return out + [_html_block(b) for b in section.blocks]


def to_html(document: Document) -> str:
    """``document`` as one self-contained HTML page (inline CSS, base64 figures, no script)."""
    parts_ = [f"<h1>{_html(document.title)}</h1>"]
    for level, section in document.walk():
        parts_ += _html_section(level, section)
    body = "\n".join(parts_)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_html(document.tab_title)}</title>"
        f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def render_html(report: ReleaseReport) -> str:
    """The report as one self-contained HTML page (inline CSS, base64 figures, no script)."""
    return to_html(build_document(report))


# --- JSON -------------------------------------------------------------------------------------


def report_payload(report: ReleaseReport) -> dict[str, Any]:
    """The machine-readable summary written as report.json (``schema_version`` added)."""
    ev = report.swe_evidence
    return {
        "title": report.title,
        "demo": report.demo,
        "verdict": report.verdict.value,
        "verdict_text": report.verdict_text,
        "quarantined": report.quarantined,
        "exit_code": int(report.verdict.exit_code),
        "story": report.story,
        "blockers": [
            {
                "kind": b.kind.value,
                "tier": b.tier.value,
                "title": b.title,
                "detail": b.detail,
                "forces": b.forces.value,
                "anchor": b.anchor,
            }
            for b in report.blockers
        ],
        "tiers": {
            t.tier.value: {
                "ran": t.ran,
                **t.counts(),
                "informational": sum(1 for c in t.cases if c.informational),
            }
            for t in report.tiers
        },
        "swe_verdict": report.swe_verdict.value if report.swe_verdict else None,
        "swe": None
        if ev is None
        else {
            "stated_verdict": ev.stated.value,
            "instance_set": ev.instance_set.value,
            "n_instances": ev.n,
            "contradictions": list(ev.contradictions),
            "reduced": None
            if ev.reduced is None or report.swe is None or report.swe[1].reduced is None
            else {
                "stated_verdict": ev.reduced.stated.value,
                "instance_set": ev.reduced.instance_set.value,
                "n_instances": ev.reduced.n,
                "excluded": report.swe[1].reduced.excluded_count,
                "exclude": list(report.swe[1].reduced.exclude),
                "contradictions": list(ev.reduced.contradictions),
            },
        },
        "training_time_s": report.time.seconds if report.time else None,
        "figures": [f.key for f in report.figures],
        "inputs": [{"path": p, "sha256": h} for p, h in report.inputs],
        "notes": list(report.notes),
        "unattributed_testcases": sum(c.tier is Tier.OTHER for c in report.junit.cases),
        "triage": report.triage.to_json() if report.triage else None,
        **({"canary": report.canary.as_json()} if report.canary else {}),
    }
