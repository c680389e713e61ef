"""Render a :class:`~rlgate.report.model.ReleaseReport` as Markdown, self-contained HTML and JSON.

Rendering only: no decisions and no file writes. The verdict comes first, then the
sentence, then every blocker linked to the anchor of its evidence (``#case-N`` testcase
rows, ``#tier-<tier>`` sections, ``#swe``, ``#runs``). The HTML embeds its figures as
base64 PNG and its CSS inline: no external request, no script.

Every input-derived string (testcase names and messages, JSON fields, recipe values, file
names) is untrusted: in Markdown it goes through :func:`rlgate.core.text.md_text` (renders
literally: no link, image, emphasis, heading, table break or raw HTML) or
:func:`rlgate.core.text.md_code`; in HTML through ``html.escape`` after
:func:`rlgate.core.text.printable` (no raw control character, e.g. ESC, reaches either page).
The only links are the report's own anchors and ``plots/<key>.png``; no URL comes from an
input.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from rlgate.core.junit import format_value
from rlgate.core.results import Outcome, Tier
from rlgate.core.text import md_code, md_text, printable
from rlgate.report.inputs import Case

if TYPE_CHECKING:
    from rlgate.checks.plan import RunDocument
    from rlgate.report.model import ReleaseReport
    from rlgate.report.verdict import TierSummary

__all__ = ["render_html", "render_markdown", "report_payload"]

_DEMO_BANNER = "DEMO — generated demo runs and demo SWE results; not a release result."
_EXPLAIN = {
    "GO": "Every release tier ran with no failure or error and SWE-bench Verified improved.",
    "NO-GO": "A gate failed, or training did not improve SWE-bench Verified.",
    "INCOMPLETE": "Evidence is missing, inconclusive or inconsistent: this is not a GO.",
}
_LISTED = 40  # passed / informational testcases listed by name per tier


class _Md(str):
    """Markdown rlgate wrote itself (numbers, fixed words): goes into a table cell as is."""

    __slots__ = ()


def _md(text: object) -> str:
    """Untrusted text for Markdown: literal, one line, table-safe."""
    return md_text(" ".join(str(text).split()))


def _cell(value: object) -> str:
    return value if isinstance(value, _Md) else _md(value)


def _h(text: object) -> str:
    """Untrusted text for HTML: control characters made visible, then escaped."""
    return html.escape(printable(text), quote=True)


def _short(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _tier_row(t: TierSummary) -> list[str]:
    gating = [c for c in t.cases if not c.informational]
    info = len(t.cases) - len(gating)
    counts = [_Md(n) for n in t.counts().values()]
    ran = _Md("yes" if t.ran else "**NOT RUN**")
    extra = f" (+{info} informational)" if info else ""
    return [_Md(t.tier.value), _Md(f"{len(gating)}{extra}"), *counts, ran]


def _swe_rows(report: ReleaseReport) -> list[list[str]]:
    assert report.swe is not None
    doc = report.swe[1]
    rows = []
    for name, arm in (("before", doc.before), ("after", doc.after)):
        se = "–" if arm.rate_se is None else f"{100 * arm.rate_se:.1f}%"
        worst = max((r.infra_error_rate for r in arm.runs), default=0.0)
        cells = [name, str(len(arm.runs)), f"{100 * arm.rate:.1f}%", se, f"{worst:.1%}"]
        rows.append([_Md(x) for x in cells])
    return rows


def _swe_summary(report: ReleaseReport, esc: Callable[[str], str]) -> list[str]:
    """The SWE facts, one line each; ``esc`` escapes the parts that come from the inputs."""
    ev = report.swe_evidence
    lines = []
    if report.swe is not None:
        path, doc = report.swe
        n = doc.before.n_instances
        lo, hi = doc.ci95_pp
        margin = "" if doc.margin_pp is None else f", margin {doc.margin_pp:g} pp"
        ds = doc.dataset
        sha = (ds.file_sha256 or ds.ids_sha256)[:12]
        lines += [
            f"verdict {doc.verdict.value}: Δ {doc.delta_pp:+.2f} pp, "
            f"95% CI [{lo:+.2f}, {hi:+.2f}] pp, "
            f"{esc(doc.test)} p = {doc.p_value:.3g} (α = {doc.alpha:g}{margin})",
            _flips(doc.lost, doc.gained, n, len(doc.before.runs) == len(doc.after.runs) == 1),
            f"dataset {esc(ds.source)} ({n} instances, sha256 {esc(sha)}); JSON {esc(str(path))}",
            *_swe_flaky_reduced(report, esc),
        ]
    elif ev is not None:
        lines.append(f"No SWE JSON given; from the swe_gate JUnit: verdict {esc(ev.stated.value)}")
    else:
        lines.append("No SWE JSON and no swe_gate JUnit verdict given.")
    if ev is not None:
        full = "" if ev.full_verified else " (not the full set: no GO)"
        lines.append(f"instance set compared: {ev.universe()}{full}")
        lines += [f"CONTRADICTION: {esc(c)}" for c in ev.contradictions]
    return lines


def _swe_flaky_reduced(report: ReleaseReport, esc: Callable[[str], str]) -> list[str]:
    """The flaky instances and the ``--exclude`` comparison of the SWE JSON, if it has them."""
    assert report.swe is not None
    doc, ev, lines = report.swe[1], report.swe_evidence, []
    if doc.flaky is not None and not doc.flaky.measured_arms:
        lines.append("flaky instances: not measured (one run per arm)")
    elif doc.flaky is not None:
        ids = ", ".join(esc(i) for i in doc.flaky.ids[:5])
        more = f" … (+{len(doc.flaky.ids) - 5} more)" if len(doc.flaky.ids) > 5 else ""
        lines.append(
            f"flaky instances (resolved in some runs of one arm, not in others): "
            f"{doc.flaky.count}" + (f": {ids}{more}" if ids else "")
        )
    reduced = ev.reduced if ev is not None else None
    if doc.reduced is not None and reduced is not None:
        r, c = doc.reduced, doc.reduced.comparison
        sets = ", ".join(f"{esc(x.label)} {x.count}" for x in r.sets)
        lines.append(
            f"reduced comparison (--exclude {esc(' '.join(r.exclude))}; shown, never decides): "
            f"without {r.excluded_count} instances ({sets}), on {reduced.universe()}: verdict "
            f"{c.verdict.value}, Δ {c.delta_pp:+.2f} pp, 95% CI [{c.ci95_pp[0]:+.2f}, "
            f"{c.ci95_pp[1]:+.2f}] pp, p = {c.p_value:.3g}"
        )
        lines += [f"CONTRADICTION (reduced): {esc(x)}" for x in reduced.contradictions]
    return lines


def _swe_side_by_side(report: ReleaseReport) -> list[list[str]]:
    """Rows of the full and the reduced comparison side by side (rlgate's numbers and words)."""
    assert report.swe is not None and report.swe[1].reduced is not None
    ev = report.swe_evidence
    assert ev is not None and ev.reduced is not None
    cols = []
    for doc, e in ((report.swe[1], ev), (report.swe[1].reduced.comparison, ev.reduced)):
        cols.append(
            [
                e.universe(),
                str(doc.dataset.n_instances),
                doc.verdict.value,
                f"{doc.delta_pp:+.2f} pp",
                f"[{doc.ci95_pp[0]:+.2f}, {doc.ci95_pp[1]:+.2f}] pp",
                f"{doc.p_value:.3g}",
                f"{100 * doc.before.rate:.1f}% → {100 * doc.after.rate:.1f}%",
            ]
        )
    names = ["instance set", "instances", "verdict", "Δ", "95% CI", "p", "before → after"]
    return [[_Md(x) for x in row] for row in zip(names, *cols, strict=True)]


def _flips(lost: int, gained: int, n: int, single: bool) -> str:
    if single:  # one run per arm: the discordance that sizes the eval (rlgate swe power)
        return f"lost {lost}, gained {gained}: discordance ψ = {(lost + gained) / n:.3f}"
    return f"instances whose mean over seeds differs: {lost} lower after, {gained} higher after"


def _case_line(c: Case) -> list[str]:
    return [c.status.upper(), c.name, _short(c.message), c.source]


def _check_rows(report: ReleaseReport, doc: RunDocument, width: int) -> list[list[str]]:
    return [
        [
            _Md(c.outcome.value.upper()),
            _Md(c.tier.value),
            c.name,
            "" if c.outcome is Outcome.SKIP else format_value(c.value),
            c.bound,
            _short(c.message, width),
        ]
        for c in (*doc.checks, *doc.skipped)
    ]


def _recipe_facts(report: ReleaseReport) -> list[tuple[str, str]]:
    r = report.recipe
    if r is None:
        return []
    return [
        ("name", r.name),
        ("file", f"{r.path} (sha256 {r.sha256[:12]})"),
        ("model", r.model),
        ("cluster", r.cluster),
        ("tool / reasoning parser", f"{r.tool_parser} / {r.reasoning_parser}"),
        (
            "async GRPO",
            f"{r.async_grpo} (max trajectory age {r.max_trajectory_age}, in-flight "
            f"weight updates {r.in_flight_weight_updates})",
        ),
        ("steps, batch", f"{r.max_num_steps}, {r.batch}"),
        ("defaults chain", " → ".join(r.sources)),
    ]


def _version_lines(report: ReleaseReport, esc: Callable[[str], str], code: Callable[[str], str]):
    v = report.versions
    lines = [esc(v.nemo_rl), esc(v.nemo_gym)]
    lines += [f"JUnit {esc(s)}: {esc(k)} {esc(val)}" for s, k, val in v.from_junit]
    lines += [f"tokenizer file {esc(p)}: sha256 {code(h)}" for p, h in v.tokenizer_files]
    lines += [f"template {esc(w)}: sha256 {code(h)}" for w, h in v.templates]
    return lines


# --- Markdown -------------------------------------------------------------------------------


def _table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(x) for x in row) + " |" for row in rows]
    return [*lines, ""]


def _md_blockers(report: ReleaseReport) -> list[str]:
    if not report.blockers:
        n = len(report.allowances)
        return [
            _EXPLAIN["GO"] + f" {n} skipped or expected-failure testcase(s) are allowed and "
            "listed under [Skips and expected failures](#allowances).",
            "",
        ]
    lines = [_EXPLAIN[report.verdict.value], ""]
    for b in report.blockers:
        lines.append(
            f"- **{b.forces.value}** · {_md(b.title)}: {_md(_short(b.detail))} "
            f"([evidence](#{b.anchor}))"
        )
    return [*lines, ""]


def _md_names(cases: Sequence[Case], status: bool = False) -> str:
    names = [md_code(c.name) + (f" ({c.status})" if status else "") for c in cases]
    more = f" … (+{len(cases) - _LISTED}; all in junit.xml)" if len(cases) > _LISTED else ""
    return ", ".join(names[:_LISTED]) + more


def _md_informational(t: TierSummary) -> list[str]:
    lines = []
    instances = [c for c in t.cases if c.informational == "instance"]
    if instances:
        lost = sum(c.shown is Outcome.FAIL for c in instances)
        lines.append(
            f"Per-instance suite (informational): {len(instances)} instances, {lost} lost."
        )
    others = [c for c in t.cases if c.informational and c.informational != "instance"]
    if others:
        kinds = ", ".join(sorted({c.informational for c in others}))
        lines.append(f"Informational ({_md(kinds)}; never a gate check): {_md_names(others, True)}")
    return [x for line in lines for x in ("", line)]


def _md_tier_cases(t: TierSummary) -> list[str]:
    lines = [f'### <a id="{t.anchor}"></a>{t.tier.value}', ""]
    if not t.cases:
        return [*lines, "No testcase of this tier was given.", ""]
    shown = [c for c in t.cases if c.shown is not Outcome.PASS and not c.informational]
    passed = [c for c in t.cases if c.shown is Outcome.PASS and not c.informational]
    if shown:
        lines += ["| status | testcase | message | source |", "|---|---|---|---|"]
        for c in shown:
            row = [_md(x) for x in _case_line(c)]
            lines.append(f'| <a id="{c.anchor}"></a>{row[0]} | ' + " | ".join(row[1:]) + " |")
        lines.append("")
    lines.append(f"{len(passed)} passed: " + _md_names(passed))
    return [*lines, *_md_informational(t), ""]


def _md_sections(report: ReleaseReport) -> list[str]:
    lines = ["## Tiers", ""]
    head = ["tier", "testcases", "passed", "failed", "errors", "skipped", "xfailed", "ran"]
    lines += _table(head, (_tier_row(t) for t in report.tiers))
    if report.figures:
        lines += ["## Plots", ""]
        for fig in report.figures:  # rlgate's own titles, captions and image paths
            lines += [f"![{fig.title}](plots/{fig.key}.png)", "", f"*{fig.caption}*", ""]
    lines += ['## <a id="swe"></a>SWE-bench', ""]
    lines += [f"- {line}" for line in _swe_summary(report, _md)] + [""]
    if report.swe is not None:
        lines += _table(["arm", "runs", "resolved", "± SE", "worst infra"], _swe_rows(report))
        crit = [
            [c.name, _Md(c.outcome.value.upper()), _short(c.message)]
            for c in report.swe[1].criteria
        ]
        lines += _table(["criterion", "status", "message"], crit)
        if report.swe[1].reduced is not None and report.swe_evidence is not None:
            lines += _table(["", "full (the verdict)", "reduced"], _swe_side_by_side(report))
    lines += ['## <a id="runs"></a>Training runs', ""]
    for path, doc in report.runs:
        lines += [
            f"**{_md(doc.recipe)}** — run {md_code(doc.run)} (JSON {_md(path)}), "
            f"target step {doc.target_step}, {'passed' if doc.passed else 'FAILED'}",
            "",
        ]
        head = ["status", "tier", "check", "value", "bound", "message"]
        lines += _table(head, _check_rows(report, doc, 160))
    if report.time is not None:
        lines += [f"Training time: {report.time.text()} (sum of timing/train/total_step_time).", ""]
    lines += ["## Evidence by tier", ""]
    for t in report.tiers:
        lines += _md_tier_cases(t)
    return lines


def _md_tail(report: ReleaseReport) -> list[str]:
    lines = ['## <a id="allowances"></a>Skips and expected failures', ""]
    rows = [
        [_Md(c.status), _Md(c.tier.value), c.name, _short(c.message, 220)]
        for c in report.allowances
    ]
    lines += _table(["kind", "tier", "testcase", "reason"], rows) if rows else ["None.", ""]
    lines += ["## Versions tested", ""]
    installed = [[_Md(k), _Md(v)] for k, v in report.versions.environment]  # this machine's
    lines += _table(["package", "version"], installed)
    lines += [f"- {line}" for line in _version_lines(report, _md, md_code)]
    lines += ["", "## Recipe", ""]
    facts = _recipe_facts(report)
    lines += [f"- {k}: {_md(v)}" for k, v in facts] or [
        "No --recipe given: model and cluster are not stated."
    ]
    lines += ["", "## Inputs", ""]
    lines += [f"- {md_code(p)} sha256 {md_code(h)}" for p, h in report.inputs]
    if report.notes:
        lines += ["", "## Notes", ""] + [f"- {_md(n)}" for n in report.notes]
    return [*lines, ""]


def render_markdown(report: ReleaseReport) -> str:
    """The report as GitHub-flavoured Markdown (figures referenced under ``plots/``)."""
    lines = [f"# {report.title}", ""]
    if report.demo:
        lines += [f"> **{_DEMO_BANNER}**", ""]
    lines += [f"## Verdict: **{report.verdict.value}**", "", report.story_md, ""]
    lines += ["### Why", "", *_md_blockers(report)]
    return "\n".join([*lines, *_md_sections(report), *_md_tail(report)])


# --- HTML -----------------------------------------------------------------------------------

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


def _html_table(head: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    body = "".join("<tr>" + "".join(f"<td>{_h(x)}</td>" for x in r) + "</tr>" for r in rows)
    return "<table><tr>" + "".join(f"<th>{_h(x)}</th>" for x in head) + f"</tr>{body}</table>"


def _html_listing(cases: Sequence[Case], what: str) -> str:
    listing = "".join(
        f"<tr id='{c.anchor}'><td>{_h(c.status)}</td><td>{_h(c.name)}</td></tr>" for c in cases
    )
    return f"<details><summary>{len(cases)} {_h(what)}</summary><table>{listing}</table></details>"


def _html_cases(t: TierSummary) -> str:
    out = [f'<h3 id="{t.anchor}">{_h(t.tier.value)}</h3>']
    if not t.cases:
        return out[0] + "<p>No testcase of this tier was given.</p>"
    shown = [c for c in t.cases if c.shown is not Outcome.PASS and not c.informational]
    passed = [c for c in t.cases if c.shown is Outcome.PASS and not c.informational]
    rows = "".join(
        f'<tr id="{c.anchor}" class="{c.status}">'
        + "".join(f"<td>{_h(x)}</td>" for x in _case_line(c))
        + "</tr>"
        for c in shown
    )
    if rows:
        out.append(
            "<table><tr><th>status</th><th>testcase</th><th>message</th><th>source</th></tr>"
            f"{rows}</table>"
        )
    out.append(_html_listing(passed, "passed testcases"))
    info = [c for c in t.cases if c.informational]
    if info:
        kinds = ", ".join(sorted({c.informational for c in info}))
        out.append(_html_listing(info, f"informational testcases ({kinds}; never gate checks)"))
    return "".join(out)


def _html_body(report: ReleaseReport) -> list[str]:
    v = report.verdict.value
    parts = [f"<h1>{_h(report.title)}</h1>"]
    if report.demo:
        parts.append(f'<div class="demo">{_h(_DEMO_BANNER)}</div>')
    parts += [
        f'<div class="verdict v-{v}">{_h(v)}</div>',
        f'<p class="story">{_h(report.story)}</p>',
    ]
    items = "".join(
        f'<li class="b-{b.forces.value}"><b>{_h(b.forces.value)}</b> · {_h(b.title)}: '
        f'{_h(_short(b.detail))} (<a href="#{b.anchor}">evidence</a>)</li>'
        for b in report.blockers
    )
    why = (
        f"<ul>{items}</ul>"
        if items
        else f"<p>{_h(_EXPLAIN['GO'])} {len(report.allowances)} "
        'skipped or expected-failure testcases are allowed (<a href="#allowances">listed</a>).</p>'
    )
    parts += ["<h2>Why</h2>", why, "<h2>Tiers</h2>"]
    head = ["tier", "testcases", "passed", "failed", "errors", "skipped", "xfailed", "ran"]
    parts.append(
        _html_table(head, ([x.replace("*", "") for x in _tier_row(t)] for t in report.tiers))
    )
    if report.figures:
        parts.append("<h2>Plots</h2>")
        parts += [
            f'<figure><img alt="{_h(f.title)}" src="{f.data_uri()}">'
            f"<figcaption>{_h(f.caption)}</figcaption></figure>"
            for f in report.figures
        ]
    return parts


def _html_rest(report: ReleaseReport) -> list[str]:
    parts = ['<h2 id="swe">SWE-bench</h2>']
    parts.append("<ul>" + "".join(f"<li>{_h(x)}</li>" for x in _swe_summary(report, str)) + "</ul>")
    if report.swe is not None:
        parts.append(
            _html_table(["arm", "runs", "resolved", "± SE", "worst infra"], _swe_rows(report))
        )
        parts.append(
            _html_table(
                ["criterion", "status", "message"],
                ([c.name, c.outcome.value.upper(), c.message] for c in report.swe[1].criteria),
            )
        )
        if report.swe[1].reduced is not None and report.swe_evidence is not None:
            head = ["", "full (the verdict)", "reduced"]
            parts.append(_html_table(head, _swe_side_by_side(report)))
    parts.append('<h2 id="runs">Training runs</h2>')
    for path, doc in report.runs:
        parts.append(
            f"<p><b>{_h(doc.recipe)}</b> — run <code>{_h(doc.run)}</code> (JSON {_h(path)}), "
            f"target step {_h(doc.target_step)}, {'passed' if doc.passed else 'FAILED'}</p>"
        )
        head = ["status", "tier", "check", "value", "bound", "message"]
        parts.append(_html_table(head, _check_rows(report, doc, 10_000)))
    if report.time is not None:
        parts.append(
            f"<p>Training time: {_h(report.time.text())} (sum of timing/train/total_step_time).</p>"
        )
    parts.append("<h2>Evidence by tier</h2>")
    parts += [_html_cases(t) for t in report.tiers]
    parts.append('<h2 id="allowances">Skips and expected failures</h2>')
    parts.append(
        _html_table(
            ["kind", "tier", "testcase", "reason"],
            ([c.status, c.tier.value, c.name, c.message] for c in report.allowances),
        )
    )
    return parts


def _html_tail(report: ReleaseReport) -> list[str]:
    v = report.versions
    parts = ["<h2>Versions tested</h2>", _html_table(["package", "version"], v.environment)]
    extra = _version_lines(report, str, str)
    parts.append("<ul>" + "".join(f"<li>{_h(x)}</li>" for x in extra) + "</ul>")
    facts = _recipe_facts(report)
    items = [f"{k}: {v}" for k, v in facts] or [
        "No --recipe given: model and cluster are not stated."
    ]
    parts += ["<h2>Recipe</h2>", "<ul>" + "".join(f"<li>{_h(x)}</li>" for x in items) + "</ul>"]
    parts += ["<h2>Inputs</h2>", _html_table(["path", "sha256"], report.inputs)]
    if report.notes:
        parts += [
            "<h2>Notes</h2>",
            "<ul>" + "".join(f"<li>{_h(n)}</li>" for n in report.notes) + "</ul>",
        ]
    return parts


def render_html(report: ReleaseReport) -> str:
    """The report as one self-contained HTML page (inline CSS, base64 figures, no script)."""
    body = "\n".join([*_html_body(report), *_html_rest(report), *_html_tail(report)])
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_h(report.verdict.value)} — {_h(report.title)}</title>"
        f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def report_payload(report: ReleaseReport) -> dict[str, Any]:
    """The machine-readable summary written as report.json (``schema_version`` added)."""
    ev = report.swe_evidence
    return {
        "title": report.title,
        "demo": report.demo,
        "verdict": report.verdict.value,
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
    }
