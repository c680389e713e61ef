"""Database text is untrusted like a file's: ``report --db`` shows it, never renders it.

Nightlies recorded by rlgate itself (its store accepts any one-line text) whose nightly
ids, run ids, branch, hardware and label hold Markdown links, raw HTML, backticks, bidi and
C1 control characters; the candidate is check-run's real JUnit of a corpus run whose reward
checks fail, so the triage section names those nightlies in its evidence, its window and
its table of the latest nightly (which passed). The pages are checked with the checks
``test_report_injection`` applies to hostile files. A row that holds ESC (only another tool
can write one) is refused when read, naming its column; ``history show`` prints a check
name or bound that holds a line break (rlgate records them from JUnit) on one line.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the [history] extra is not installed")

from rlgate.cli.app import main
from rlgate.core.results import Result, Tier
from rlgate.history.ingest import make_context
from rlgate.history.store import open_store
from rlgate.testing.corpus import Fault

from .helpers.cli import one_error
from .helpers.cli import run_cli as run
from .helpers.corpus_build import corpus
from .helpers.triage_inputs import T0, commit, gate_results, recipe_name
from .test_report_injection import (
    CONTROL,
    HTML_TAGS,
    _own_links_and_images_only,
    _parse,
    _raw_html,
    _rendered,
)

LINK = "[x](javascript:alert(1))"
HOSTILE = (
    '<img src=x onerror="alert(3)">',
    "`` ` ``<b>bold</b>`` `",
    "![pixel](https://evil.example/p.png)",
    "<script>alert(2)</script>",
    "**bold** _em_ ~~strike~~ | cell | break",
    "\u202ereversed\u2066 \x9b2K csi",
)
BRANCH = "[main](javascript:alert(6))"
HARDWARE = "<b>64n4g</b>](javascript:alert(7))"  # the candidate's too: one series
# what the page shows: the window's first and last nightly, the branch, the evidence
VISIBLE = ("javascript:alert(1)", '<img src=x onerror="alert(3)">', "javascript:alert(6)")


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """Seven passing nightlies of the corpus recipe on one hardware, every context text
    hostile; the newest nightly's id is a javascript: link."""
    db = tmp_path_factory.mktemp("history") / "history.db"
    with open_store(db) as store:
        for k, text in enumerate((*HOSTILE, LINK), start=1):
            context = make_context(
                run_id=f"{text} run {k}",
                recipe=recipe_name(),
                branch=BRANCH,
                nightly_id=text,
                hardware=HARDWARE,
                label=f"{HOSTILE[(k + 1) % len(HOSTILE)]} label",
                commits=commit("A"),
                recorded_at=T0 + timedelta(days=k),
            )
            store.record(context, gate_results(Fault.HEALTHY))
    return db


@pytest.fixture(scope="module")
def pages(history: Path, tmp_path_factory) -> dict[str, str]:
    """``report --db`` (plots drawn) for a candidate whose reward checks fail."""
    root = tmp_path_factory.mktemp("report")
    c = corpus()
    junit = root / "flat.xml"
    args = ["check-run", str(c.runs[Fault.REWARD_FLAT]), "--recipe", str(c.recipe),
            "--baseline", str(c.baseline), "--rollouts", str(c.rollouts["healthy"]),
            "--junit", str(junit)]  # fmt: skip
    assert main(args) == 1
    db = root / "history.db"
    shutil.copyfile(history, db)
    report = ["report", "--junit", str(junit), "--db", str(db), "--main-branch", BRANCH,
              "--hardware", HARDWARE, "--out", str(root / "out"),
              "--run-id", "candidate"]  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(report)
    assert code in (1, 3) and "rlgate: error" not in err.getvalue(), err.getvalue()
    return {
        "stdout": out.getvalue(),
        "md": (root / "out" / "report.md").read_text(encoding="utf-8"),
        "html": (root / "out" / "report.html").read_text(encoding="utf-8"),
    }


def test_the_triage_section_names_the_hostile_nightlies(pages) -> None:
    text = "".join(_parse(_rendered(pages["md"])).text)
    assert "regression" in text and f"Latest {BRANCH} nightly {LINK}" in text
    assert f"No gate check of {LINK} fails or errors." in text  # the latest nightly passed
    assert f"{BRANCH} passes it (last: {LINK} (" in text  # the evidence names the nightly


def test_markdown_has_no_live_construct_from_the_database(pages) -> None:
    md = pages["md"]
    raw = [h for h in _raw_html(md) if not re.fullmatch(r'<a id="[a-z0-9_-]+">|</a>', h)]
    assert not raw, raw
    prose = re.sub(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)", "<code span>", md)
    # the text stays, its markup does not: its '[', ']', '<' and '>' are escaped
    assert "\\](javascript:" in prose and "\\<img src=x onerror=" in prose
    assert not re.search(r"(?<!\\)\]\(javascript:|(?<!\\)<img|onerror=[^\n<>]*(?<!\\)>", prose)
    rendered = _rendered(md)
    tags = _parse(rendered).tags
    _own_links_and_images_only(tags, "plots/")
    assert not any(t == "del" for t, _ in tags), "~~strike~~ from the database rendered"
    text = "".join(_parse(rendered).text)
    for token in VISIBLE:
        assert token in text, token


def test_html_has_only_its_own_tags_links_and_images(pages) -> None:
    parsed = _parse(pages["html"])
    _own_links_and_images_only(parsed.tags, "data:image/png;base64,")
    assert {t for t, _ in parsed.tags} <= HTML_TAGS
    text = "".join(parsed.text)
    for token in VISIBLE:
        assert token in text, token


@pytest.mark.parametrize("page", ["md", "html", "stdout"])
def test_no_control_character_from_the_database_reaches_a_page(pages, page) -> None:
    assert not CONTROL.findall(pages[page]), sorted(set(CONTROL.findall(pages[page])))


def test_history_show_and_triage_show_the_database_text_as_text(
    history: Path, tmp_path: Path, capsys
) -> None:
    db = tmp_path / "h.db"
    shutil.copyfile(history, db)
    code, out, err = run(["history", "show", recipe_name(), "--db", str(db), "--branch",
                          BRANCH], capsys)  # fmt: skip
    assert code == 0, err
    runs = [line for line in out.splitlines() if re.match(r"  \d ", line)]
    assert len(runs) == len(HOSTILE) + 1  # one line per run, whatever its text holds
    assert f"{LINK} run 7 / {LINK} / {BRANCH}" in out and "<script>alert(2)</script>" in out
    assert not CONTROL.findall(out) and "\\x9b2K" in out and "\\u202e" in out


@pytest.mark.parametrize(
    ("column", "table"),
    [("nightly_id", "runs"), ("hardware", "runs"), ("label", "runs"), ("branch", "runs")],
)
def test_a_row_holding_an_escape_sequence_is_refused_when_read(
    history: Path, tmp_path: Path, capsys, column: str, table: str
) -> None:
    """Only another tool can store ESC (rlgate refuses it on recording): refused on reading."""
    db = tmp_path / "h.db"
    shutil.copyfile(history, db)
    conn = sqlite3.connect(db)
    conn.execute(f"update {table} set {column} = 'x' || char(27) || ']8;;http://e' || char(7)")
    conn.commit()
    conn.close()
    code, out, err = run(["history", "show", recipe_name(), "--db", str(db)], capsys)
    assert code == 2 and not out
    assert f"table {table}, row id=" in one_error(err) and f"column {column}: holds" in err
    assert "\x1b" not in err and "\\x1b" in err


def test_history_show_prints_database_text_on_one_line_each(tmp_path: Path, capsys) -> None:
    """A check name and bound rlgate recorded from a JUnit may hold line breaks."""
    db = str(tmp_path / "h.db")
    hostile = Result(name="reward\nFAKE 1 run(s)", tier=Tier.CONVERGENCE, status="pass",
                     bound="< 1\n  1  PASS forged", message="ok\x1b[2K\u202e")  # fmt: skip
    with open_store(db) as store:
        store.record(make_context(run_id="r1", recipe="x", nightly_id="[n](javascript:x)"),
                     [*gate_results(Fault.HEALTHY)[:2], hostile])  # fmt: skip
    for extra in ([], ["--check", hostile.name]):
        code, out, err = run(["history", "show", "x", "--db", db, *extra], capsys)
        assert code == 0, err
        assert not re.search(r"^(FAKE|  1  PASS forged)", out, flags=re.M), out
        assert "reward\\x0aFAKE 1 run(s)" in out or "check reward\\x0aFAKE" in out
        assert "[n](javascript:x)" in out  # a terminal shows markup as the text it is
        assert "\x1b" not in out and "\u202e" not in out
