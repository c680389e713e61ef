"""`rlgate report --demo`: the bundled demo end to end (functional tier for real, DEMO inputs).

Regression story: the README's main command used to be `rlgate demo --out demo-report`, a
command that did not exist. The demo is now `rlgate report --demo`, and these tests run it.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

import rlgate
from rlgate.core.errors import RlgateError
from rlgate.core.resources import FUNCTIONAL_TIER, RECIPES
from rlgate.core.results import Tier
from rlgate.demo.build import (
    BUNDLED_INSTANCES,
    DEMO_RECIPE,
    HISTORY_DB,
    INPUTS,
    run_demo,
    write_demo_swe,
)
from rlgate.demo.history import DEMO_NIGHTLIES
from rlgate.recipe.load import recipe_files
from rlgate.report.build import BlockerKind, Verdict, prepare_out_dir
from rlgate.swe.compare import Verdict as SweVerdict
from rlgate.swe.records import load_universe

from .helpers import REPO_ROOT
from .helpers.demo_build import FUNCTIONAL_SUBSET, demo_with_functional, demo_without_functional
from .helpers.demo_build import tokenizer_root as demo_tokenizers


class TestDemoWithoutTokenizers:
    def test_demo_without_tokenizers_is_incomplete_never_go(self):
        result = demo_without_functional()
        report = result.report
        assert report.verdict is Verdict.INCOMPLETE
        (blocker,) = report.blockers
        assert (blocker.kind, blocker.tier) == (BlockerKind.NOT_RUN, Tier.FUNCTIONAL)
        assert "pass --tokenizers DIR or set RLGATE_TOKENIZERS" in result.functional
        assert result.functional in report.notes
        ran = {t.tier for t in report.tiers if t.ran}
        assert ran == {Tier.CONVERGENCE, Tier.PERF, Tier.SWE_GATE}

    def test_demo_labels_title_sentence_plots_and_pages_demo(self):
        result = demo_without_functional()
        report, files = result.report, result.files
        assert report.title.startswith("DEMO")
        assert report.story.startswith("DEMO (generated inputs, not a release result): ")
        trends = set(report.triage.figure_keys)  # the demo history's trend panels
        assert trends == {"trend-convergence", "trend-perf", "trend-swe_gate"}
        assert len([f for f in report.figures if f.key not in trends]) == 5
        assert all(f.title.startswith("DEMO") for f in report.figures)
        assert "DEMO — generated demo runs and demo SWE results" in files["html"].read_text()
        assert "> **DEMO — generated demo runs" in files["markdown"].read_text()
        assert json.loads(files["json"].read_text())["demo"] is True

    def test_demo_gates_generated_runs_and_swe_with_the_real_libraries(self):
        report = demo_without_functional().report
        (_, run), swe = report.runs[0], report.swe
        assert run.recipe == DEMO_RECIPE and run.passed and len(run.checks) >= 30
        assert swe is not None and swe[1].verdict is SweVerdict.IMPROVED
        assert swe[1].dataset.n_instances == 500 and report.swe_evidence.full_verified
        assert report.recipe is not None and report.recipe.model == "Qwen/Qwen3.5-35B-A3B"
        assert report.time is not None and report.time.steps == 50

    def test_demo_rerun_in_its_own_directory_replaces_its_inputs(self):
        first = demo_without_functional()
        out = first.files["html"].parent
        stale = out / INPUTS / "stale.txt"
        stale.write_text("from an earlier demo")
        again = run_demo(out, tokenizers=None)
        assert not stale.exists()
        assert again.report.story == first.report.story
        assert again.report.verdict is first.report.verdict

    def test_demo_refuses_a_foreign_non_empty_directory(self, tmp_path):
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(RlgateError, match="not empty and was not created by rlgate"):
            run_demo(tmp_path, tokenizers=None)
        assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]

    def test_demo_never_replaces_a_demo_inputs_folder_it_did_not_write(self, tmp_path):
        out = prepare_out_dir(tmp_path / "out")
        (out / INPUTS).mkdir()
        (out / INPUTS / "data.csv").write_text("user data")
        with pytest.raises(RlgateError, match="was not written by rlgate's demo"):
            run_demo(out, tokenizers=None)
        assert (out / INPUTS / "data.csv").read_text() == "user data"


class TestDemoWithFunctionalTier:
    def test_demo_runs_the_functional_tier_for_real_and_is_go(self, request):
        result = demo_with_functional(demo_tokenizers(request.config))
        report = result.report
        assert result.functional.startswith("functional tier ran for real: pytest exit 0")
        functional = next(t for t in report.tiers if t.tier is Tier.FUNCTIONAL)
        assert functional.ran and functional.counts()["passed"] >= 5
        assert all(c.source.endswith(f"{INPUTS}/functional.xml") for c in functional.cases)
        assert report.verdict is Verdict.GO, report.blockers
        assert "with key training health metrics verified" in report.story

    def test_demo_functional_subset_is_what_the_test_asked_for(self, request):
        report = demo_with_functional(demo_tokenizers(request.config)).report
        names = {c.name.split("[")[0] for c in report.junit.cases if c.tier is Tier.FUNCTIONAL}
        assert names == {FUNCTIONAL_SUBSET}


class TestDemoHistory:
    """The demo records 30 DEMO nightlies and its report triages the latest against them."""

    def test_the_history_is_recorded_and_read_back_from_sqlite(self):
        from rlgate.history.store import open_store

        result = demo_without_functional()
        db = result.files["html"].parent / INPUTS / HISTORY_DB
        with open_store(db) as store:
            runs = store.runs(label="DEMO")
        assert len(runs) == 2 * DEMO_NIGHTLIES and {r.context.branch for r in runs} == {"main"}
        assert f"recorded in {db}" in " ".join(result.report.notes)

    def test_the_report_labels_the_planted_faults_of_the_latest_nightly(self):
        report = demo_without_functional().report
        section = report.triage
        assert section.window[-1] == "DEMO-n30" and len(section.window) == DEMO_NIGHTLIES
        assert section.labels == ()  # the demo's own candidate passes every gate check
        assert {lb.check: lb.label.value for lb in section.latest} == {
            "perf:timing/train/total_step_time": "regression",
            "perf:performance/tokens_per_sec_per_gpu": "regression",
            "rollouts:truncated_final_rate": "flaky",
            "coverage_after": "infra",
            "significance": "infra",
        }
        step = next(lb for lb in section.latest if lb.check.startswith("perf:timing"))
        assert step.first_failing == "DEMO-n25"
        md = demo_without_functional().files["markdown"].read_text()
        assert r"### Latest main nightly DEMO\-n30" in md and "(plots/trend-perf.png)" in md


class TestDemoSwe:
    def test_demo_swe_results_are_deterministic_and_realistic(self, tmp_path):
        ids = list(load_universe(BUNDLED_INSTANCES).ids)
        first = write_demo_swe(tmp_path / "a", ids, seed=5)
        second = write_demo_swe(tmp_path / "b", ids, seed=5)
        for x, y in zip([*first[0], *first[1]], [*second[0], *second[1]], strict=True):
            assert x.read_text() == y.read_text()
        rates = {
            arm: [
                sum(e["resolved"] for e in json.loads(p.read_text()).values()) / len(ids)
                for p in paths
            ]
            for arm, paths in zip(("before", "after"), first, strict=True)
        }
        assert all(0.3 < r < 0.55 for r in rates["before"] + rates["after"])
        assert min(rates["after"]) > max(rates["before"])

    def test_bundled_instance_list_is_the_verified_universe(self):
        universe = load_universe(BUNDLED_INSTANCES)
        assert universe.n == 500
        assert sum(r == "django/django" for r in universe.repos.values()) == 231


class TestDemoNeedsNoCheckout:
    """An installed rlgate runs the demo's functional tier from its package data alone."""

    def test_bundle_is_the_repositorys_functional_tier_and_recipes(self):
        assert FUNCTIONAL_TIER.resolve() == (REPO_ROOT / "tests" / "functional").resolve()
        assert RECIPES.resolve() == (REPO_ROOT / "recipes").resolve()

    def test_a_copy_of_the_package_alone_runs_the_functional_tier(self, request, tmp_path):
        """The package copied (links resolved) with no checkout around: the tier runs from it."""
        site = tmp_path / "site"
        shutil.copytree(
            Path(rlgate.__file__).parent,
            site / "rlgate",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        junit = tmp_path / "functional.xml"
        tokenizers = str(Path(demo_tokenizers(request.config)).resolve())  # the child's cwd differs
        script = (
            "import sys, subprocess, rlgate\n"
            "from pathlib import Path\n"
            "from rlgate.demo.build import functional_command\n"
            f"assert Path(rlgate.__file__).is_relative_to({str(site)!r}), rlgate.__file__\n"
            f"cmd = functional_command(Path({str(junit)!r}), {tokenizers!r},"
            f" {FUNCTIONAL_SUBSET!r})\n"
            "sys.exit(subprocess.call(cmd))\n"
        )
        env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
        env["HF_HUB_OFFLINE"] = "1"
        proc = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        cases = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
        recipes = {p.stem for p in recipe_files(RECIPES)}
        assert len(cases) >= 3 and all(c.classname.startswith("functional.") for c in cases)
        assert all(c.is_passed for c in cases)
        assert {c.name.split("[")[1].rstrip("]") for c in cases} <= recipes  # bundled recipes
        assert not list(site.rglob("__pycache__"))  # nothing written into the package
