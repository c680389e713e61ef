"""Links in the report: https templates of the site config and the CI's own variables only."""

from __future__ import annotations

import json
import posixpath
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlgate.cli.app import main
from rlgate.core.links import check_template, ci_links, fill, https_url

from .helpers import report_inputs as ri
from .helpers.cli import one_error

CI_VARS = ("CI_JOB_URL", "GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")


@pytest.fixture(autouse=True)
def _no_ci(monkeypatch):
    for name in (*CI_VARS, "RLGATE_SITE"):
        monkeypatch.delenv(name, raising=False)


def _report(tmp_path, *extra: str) -> tuple[int, str, str]:
    out = tmp_path / "out"
    code = main(["report", "--junit", str(ri.functional_passing()), "--out", str(out),
                 "--no-plots", *extra])  # fmt: skip
    if not (out / "report.md").is_file():
        return code, "", ""
    return code, (out / "report.md").read_text(), (out / "report.html").read_text()


def _site(tmp_path, links: dict[str, str]) -> str:
    path = tmp_path / "site.yaml"
    path.write_text(json.dumps({"links": links}))  # JSON is YAML
    return str(path)


def test_github_actions_variables_link_the_ci_job(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "NVIDIA-NeMo/RL")
    monkeypatch.setenv("GITHUB_RUN_ID", "123456")
    _, md, html = _report(tmp_path)
    url = "https://github.com/NVIDIA-NeMo/RL/actions/runs/123456"
    assert f"- [the CI job](<{url}>) (ci\\_job)" in md or f"[the CI job](<{url}>)" in md
    assert f'<a href="{url}" rel="noopener noreferrer">the CI job</a>' in html


def test_gitlab_job_url_and_a_site_template(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CI_JOB_URL", "https://gitlab.example.com/g/p/-/jobs/7?a=1&b=2")
    site = _site(tmp_path, {"release": "https://wiki.example.com/releases/rl"})
    _, md, html = _report(tmp_path, "--site", site)
    assert "[the release](<https://wiki.example.com/releases/rl>)" in md
    assert 'href="https://gitlab.example.com/g/p/-/jobs/7?a=1&amp;b=2"' in html


@pytest.mark.parametrize(
    "value",
    ["javascript:alert(1)", "http://gitlab.example.com/job/1", "https://a b/", "https://u:p@h/x",
     'https://h/"><script>', "https://h/x\n", "data:text/html,<b>"],
)  # fmt: skip
def test_a_ci_url_that_is_not_plain_https_is_never_linked(tmp_path, monkeypatch, capsys, value):
    monkeypatch.setenv("CI_JOB_URL", value)
    _, md, html = _report(tmp_path)
    assert "the CI job" not in md and "<script>" not in html and "javascript:" not in html


@pytest.mark.parametrize(
    "template",
    ["https://w/{run_id.__class__}", "https://w/{run_id[0]}", "https://w/{run_id!r}",
     "https://w/{run_id:>99}", "https://w/{token}", "https://{run_id}.evil/", "http://w/{run_id}",
     "https://w/{run_id"],
)  # fmt: skip
def test_a_site_template_beyond_plain_fields_is_exit_2(tmp_path, capsys, template):
    code, _, _ = _report(tmp_path, "--site", _site(tmp_path, {"run": template}))
    assert code == 2
    assert "invalid site config" in one_error(capsys.readouterr().err)


def test_links_are_absent_without_configuration(tmp_path, capsys):
    _, md, html = _report(tmp_path)
    assert "## Links" not in md and '<a href="http' not in html


@given(st.text(min_size=1, max_size=40))
def test_a_filled_value_never_leaves_its_path_segment(value):
    url = fill("https://wandb.example.com/team/runs/{run_id}/overview", {"run_id": value})
    assert url is not None and https_url(url) == url
    parts = urlsplit(url)
    assert parts.netloc == "wandb.example.com" and not parts.query and not parts.fragment
    assert parts.path.startswith("/team/runs/") and parts.path.endswith("/overview")
    assert parts.path.count("/") == 4
    assert posixpath.normpath(parts.path) == parts.path  # no "." or ".." segment either


@pytest.mark.parametrize("value", [".", "..", "%2E%2E"])
def test_dot_segments_are_encoded_never_resolved(value):
    url = fill("https://wandb.example.com/team/runs/{run_id}/x", {"run_id": value})
    assert url is not None and "/../" not in url and "/./" not in url
    assert posixpath.normpath(urlsplit(url).path) == urlsplit(url).path


def test_github_repository_with_dot_segments_is_never_linked():
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "../..",
           "GITHUB_RUN_ID": "1"}  # fmt: skip
    assert ci_links(env) == {}
    assert ci_links({**env, "GITHUB_REPOSITORY": "org/repo"}) == {
        "ci_job": "https://github.com/org/repo/actions/runs/1"
    }


def test_a_site_url_holding_a_local_path_is_never_shortened(tmp_path, capsys):
    """The report shortens local paths in its text, never inside a link of the site config."""
    here = str(tmp_path)
    site = _site(tmp_path, {"release": f"https://fs.example/browse?path={here}/x",
                            "tensorboard": f"https://tb.example/#{here}/r16"})  # fmt: skip
    _, md, html = _report(tmp_path, "--site", site)
    assert f"(<https://fs.example/browse?path={here}/x>)" in md
    assert f"(<https://tb.example/#{here}/r16>)" in md
    assert f'href="https://fs.example/browse?path={here}/x"' in html


def test_check_template_and_ci_links_directly():
    assert check_template("https://tb.example.com/#scalars&regexInput={run_name}")
    with pytest.raises(ValueError, match="not allowed"):
        check_template("https://tb/{0}")
    github = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r"}
    assert ci_links({**github, "GITHUB_RUN_ID": "1; rm"}) == {}
    assert ci_links({**github, "GITHUB_RUN_ID": "9"}) == {
        "ci_job": "https://github.com/o/r/actions/runs/9"
    }
