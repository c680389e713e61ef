"""``rlgate recipe check --junit``: a testcase per config and check (rule family).

Real ``recipe check`` runs over rlgate's recipes, the known-bad one, a recipe broken by an
override that trips a NeMo RL start-up assert, and a config that cannot be read; the JUnit
is read back with junitparser and rlgate's reader, and the report's merge of it validates
against pytest's junit-10.xsd.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from rlgate.cli.app import main
from rlgate.core.junit import read_junit, write_junit
from rlgate.core.results import Outcome, Tier
from rlgate.recipe.load import recipe_files

from .helpers import REPO_ROOT

RECIPES = REPO_ROOT / "recipes"
KNOWN_BAD = sorted((RECIPES / "known-bad").glob("*.yaml"))
GOOD = sorted(RECIPES.glob("*.yaml"))
XSD = Path(os.environ.get("RLGATE_JUNIT_XSD", Path(sys.prefix) / "share/rlgate/junit-10.xsd"))
PREFIX = "rlgate.functional.recipe_check."


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, object]:
    """One real ``recipe check`` of every top-level recipe, the known-bad one and a missing file."""
    root = tmp_path_factory.mktemp("rc")
    junit, doc = root / "rc.xml", root / "rc.json"
    missing = root / "gone.yaml"
    argv = ["recipe", "check", *map(str, GOOD), *map(str, KNOWN_BAD), str(missing)]
    code = main([*argv, "-q", "--junit", str(junit), "--json", str(doc)])
    return {"code": code, "junit": junit, "json": doc, "missing": missing}


def _cases(path: Path) -> list:
    return [case for suite in JUnitXml.fromfile(str(path)) for case in suite]


def test_a_testcase_per_config_and_check(checked):
    import json

    assert checked["code"] == 2  # the missing file: worst of 0, 1 and 2
    doc = json.loads(Path(checked["json"]).read_text())
    cases = _cases(checked["junit"])
    by_config: dict[str, list[str]] = {}
    for case in cases:
        assert case.classname.startswith(PREFIX), case.classname
        by_config.setdefault(case.classname.removeprefix(PREFIX), []).append(case.name)
    for report in doc["reports"]:  # every check --json lists is a testcase, in order
        names = [c["check"] for c in report["checks"]] or ["load"]
        assert by_config.pop(report["name"]) == names
    assert by_config == {}
    assert {p.stem for p in recipe_files(RECIPES)} >= {p.stem for p in GOOD + KNOWN_BAD}


def test_failures_carry_the_findings_and_a_good_recipe_has_none(checked):
    cases = _cases(checked["junit"])
    bad = {p.stem for p in KNOWN_BAD}
    failed = [c for c in cases if any(r._tag == "failure" for r in c.result)]
    assert failed and {c.classname.removeprefix(PREFIX) for c in failed} <= bad
    for case in failed:
        (failure,) = case.result
        assert failure.message.startswith("ERROR ")
        first = failure.message.partition(" (+")[0]  # the first error, then "(+N more)"
        assert failure.text.startswith(first) or f"\n{first}" in failure.text
        assert all(line.startswith(("ERROR", "WARNING", "INFO", "  source: ")) for line in
                   failure.text.splitlines())  # fmt: skip
    (load,) = [c for c in cases if c.name == "load"]
    assert load.classname == PREFIX + "gone"
    assert [r._tag for r in load.result] == ["error"]
    assert "gone.yaml" in load.result[0].message


def test_a_startup_rule_failure_quotes_nemo_rls_source(tmp_path, capsys):
    junit = tmp_path / "r.xml"
    code = main(
        ["recipe", "check", str(GOOD[0]), "policy.dtensor_cfg.enabled=true", "--junit", str(junit)]
    )
    assert code == 1
    (case,) = [c for c in _cases(junit) if c.name == "training"]
    (failure,) = case.result
    assert "backend-both" in failure.message
    assert (
        "  source: nemo_rl/models/policy/lm_policy.py::Policy.__init__ raises ValueError "
        "'Configure either Megatron" in failure.text
    )


def test_rlgates_reader_and_the_xsd_agree(checked):
    import xmlschema

    suites = read_junit(checked["junit"])
    results = [c.judged for s in suites for c in s.cases]
    assert results and all(r.tier is Tier.FUNCTIONAL for r in results)
    assert Outcome.FAIL in {r.outcome for r in results}
    assert {r.outcome for r in results} <= {Outcome.PASS, Outcome.FAIL, Outcome.SKIP, Outcome.ERROR}
    if not XSD.is_file():
        pytest.fail(f"pytest's junit-10.xsd not found at {XSD} (ci/install.sh)", pytrace=False)
    merged = checked["junit"].with_name("merged.xml")
    merged.write_text(write_junit(suites, layout="junit-10"))  # as rlgate report merges it
    assert not list(xmlschema.XMLSchema(str(XSD)).iter_errors(str(merged)))


def test_junit_is_kept_off_the_configs(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(GOOD[0].read_text())
    code = main(["recipe", "check", str(config), "--junit", str(config)])
    assert code == 2
    assert "refusing to write --junit" in capsys.readouterr().err
    assert config.read_text() == GOOD[0].read_text()


def test_a_config_name_with_a_line_break_stays_one_line_in_the_classname(tmp_path, capsys):
    """An XML attribute's line break is read back as a space: the name would change; printed,
    a name could forge a verdict line."""
    copied = tmp_path / "bad\nx: COMPATIBLE (0 checks).yaml"
    copied.write_bytes(KNOWN_BAD[0].read_bytes())
    junit = tmp_path / "r.xml"
    main(["recipe", "check", str(copied), str(tmp_path / "gone\rx.yaml"), "-q", "--no-cache",
          "--junit", str(junit)])  # fmt: skip
    names = {c.classname for c in _cases(junit)}
    assert all("\n" not in n and "\r" not in n for n in names), names
    assert len(names) == 2 and {n.removeprefix(PREFIX)[:4] for n in names} == {"bad\\", "gone"}
    out = capsys.readouterr().out
    assert not any(line.startswith("x: COMPATIBLE") for line in out.splitlines()), out
