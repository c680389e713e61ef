"""Real inputs for the release report's tests, produced by the real producers.

* pytest JUnit: a small test tree run by a real ``python -m pytest --junitxml`` subprocess
  (xunit1, ``record_property``), laid out as ``tests/<tier>/test_*.py`` like rlgate's tiers;
* check-run JSON + JUnit: the fault corpus (``rlgate.testing.corpus``) gated by
  ``rlgate.checks.plan`` exactly as ``rlgate check-run`` does;
* swe compare JSON + JUnit: per-instance maps from ``rlgate.demo.build.write_demo_swe`` over the
  bundled 500 Verified ids, compared by ``rlgate.swe.compare`` and rendered by
  ``rlgate.swe.report``, exactly as ``rlgate swe compare`` does.

Only which outcome each input has is chosen here; formats and decisions are the libraries'.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from rlgate.checks.plan import load_inputs, load_plan, render_junit, run_gate
from rlgate.core.io import write_json_atomic, write_text_atomic
from rlgate.demo.build import BUNDLED_INSTANCES, write_demo_swe
from rlgate.swe.compare import GateOptions, compare_arms
from rlgate.swe.readers import load_arm
from rlgate.swe.records import load_universe
from rlgate.swe.report import build_swe_junit, comparison_to_dict
from rlgate.testing.corpus import Fault

from .corpus_build import corpus


@functools.cache
def scratch() -> Path:
    root = Path(tempfile.mkdtemp(prefix="rlgate-report-inputs-"))
    atexit.register(shutil.rmtree, root, True)
    return root


# --- pytest JUnit ------------------------------------------------------------------------------

PASSING = """
def test_parser_round_trip(record_property):
    record_property("rlgate.recipe", "grpo-demo")
    record_property("rlgate.template_sha256", "0123456789abcdef")
"""

MIXED = """
import pytest

def test_passes():
    pass

def test_fails():
    assert 1 == 2, "tool call left unparsed"

@pytest.fixture
def broken():
    raise RuntimeError("tokenizer folder missing")

def test_errors(broken):
    pass

def test_skipped():
    pytest.skip("Qwen3.5-specific tokenizer class")

@pytest.mark.xfail(strict=True, reason="hermes keeps the newline before a tool call")
def test_known_limitation():
    assert False
"""

SKIPPED_ONLY = """
import pytest

def test_needs_a_run():
    pytest.skip("the convergence tier needs --run-dir and --recipe")
"""


BENCHMARKS = """
import pytest

@pytest.mark.benchmark
def test_prompt_preparation(record_property):
    record_property("rlgate.full_total_s", "0.52")

def test_parsing(benchmark):
    benchmark.pedantic(lambda: sum(range(100)), rounds=2)

def test_trajectory_fills_the_recipe_context():
    assert 200 == 200
"""


def pytest_junit(name: str, files: dict[str, str], *, plugin: bool = False) -> Path:
    """Run real pytest on ``files`` (relative path -> source) and return its xunit1 JUnit.

    ``plugin`` loads rlgate's pytest plugin (markers, ``rlgate.informational``).
    """
    root = scratch() / "pytest" / name
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    (root / "pytest.ini").write_text("[pytest]\njunit_family = xunit1\n")
    out = root / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *(["-p", "rlgate.pytest_plugin"] if plugin else []), "--junitxml", str(out), "tests"],
        cwd=root, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    assert out.is_file(), f"pytest wrote no JUnit for {name}"
    return out


@functools.cache
def functional_passing() -> Path:
    return pytest_junit("functional_passing", {"tests/functional/test_parsers.py": PASSING})


@functools.cache
def functional_mixed() -> Path:
    return pytest_junit("functional_mixed", {"tests/functional/test_mixed.py": MIXED})


@functools.cache
def convergence_skipped() -> Path:
    return pytest_junit("conv_skipped", {"tests/convergence/test_convergence.py": SKIPPED_ONLY})


@functools.cache
def perf_benchmarks_only() -> Path:
    """A nightly's perf tier without --baseline: benchmarks and a sanity test, no gate check."""
    return pytest_junit(
        "perf_benchmarks", {"tests/perf/test_rollout_path.py": BENCHMARKS}, plugin=True
    )


# --- check-run ----------------------------------------------------------------------------------


@functools.cache
def check_run(fault: Fault) -> tuple[Path, Path]:
    """(run JSON, JUnit) of ``rlgate check-run`` on the corpus run with ``fault``."""
    c = corpus()
    plan = load_plan(c.recipe)
    report = run_gate(
        plan,
        load_inputs(plan, c.runs[fault], baseline=c.baseline, rollouts=c.rollouts["healthy"]),
    )
    out = scratch() / "check-run" / fault.value
    return (
        write_json_atomic(out / "run.json", report.to_dict()),
        write_text_atomic(out / "run.xml", render_junit(report)),
    )


@functools.cache
def check_run_no_baseline() -> tuple[Path, Path]:
    """(run JSON, JUnit) of ``rlgate check-run`` without ``--baseline``: perf checks skipped."""
    c = corpus()
    plan = load_plan(c.recipe)
    report = run_gate(
        plan, load_inputs(plan, c.runs[Fault.HEALTHY], rollouts=c.rollouts["healthy"])
    )
    out = scratch() / "check-run" / "no-baseline"
    return (
        write_json_atomic(out / "run.json", report.to_dict()),
        write_text_atomic(out / "run.xml", render_junit(report)),
    )


# --- swe compare --------------------------------------------------------------------------------


@functools.cache
def _maps() -> tuple[list[Path], list[Path]]:
    universe = load_universe(BUNDLED_INSTANCES)
    return write_demo_swe(scratch() / "swe-maps", list(universe.ids), seed=3)


def _infra_copy(paths: list[Path], share: float) -> list[Path]:
    out = []
    for path in paths:
        doc = json.loads(path.read_text())
        for iid in sorted(doc)[: int(share * len(doc))]:
            doc[iid] = {"resolved": False, "infra_failure": True,
                        "infra_failure_reason": "container_unavailable"}  # fmt: skip
        target = path.with_name(f"infra_{path.name}")
        target.write_text(json.dumps(doc))
        out.append(target)
    return out


@functools.cache
def swe(kind: str) -> tuple[Path, Path]:
    """(SWE JSON, JUnit) of ``rlgate swe compare`` for a comparison of ``kind``."""
    before, after = _maps()
    arms = {
        "improved": (before, after),
        "regressed": (after, before),
        "no_significant_change": (before[:2], before[2:]),
        "inconclusive": (_infra_copy(before, 0.33), after),
    }[kind]
    universe = load_universe(BUNDLED_INSTANCES)
    comparison = compare_arms(
        load_arm("before", arms[0], universe),
        load_arm("after", arms[1], universe),
        universe,
        GateOptions(n_resamples=2000, seed=1),
    )
    assert comparison.verdict.value == kind, comparison.reasons
    out = scratch() / "swe" / kind
    return (
        write_json_atomic(out / "swe.json", comparison_to_dict(comparison)),
        write_text_atomic(out / "swe.xml", build_swe_junit(comparison).tostring().decode()),
    )


def swe_maps(root: Path, ids: list[str], resolved: dict[str, int]) -> dict[str, Path]:
    """One per-instance map per arm: the first ``resolved[arm]`` ids resolved."""
    out = {}
    for arm, k in resolved.items():
        doc = {iid: {"resolved": i < k, "patch_exists": True} for i, iid in enumerate(ids)}
        out[arm] = root / f"{arm}.json"
        out[arm].parent.mkdir(parents=True, exist_ok=True)
        out[arm].write_text(json.dumps(doc))
    return out


_RESOLVED = {  # resolved instances per arm, as shares of n
    "improved": (0.25, 0.5),
    "regressed": (0.5, 0.25),
    "no_significant_change": (0.25, 0.25),
}


@functools.cache
def swe_on_set(kind: str, verdict: str = "improved", n: int = 100) -> tuple[Path, Path]:
    """(SWE JSON, JUnit) of a comparison with ``verdict`` on ``n`` instances, not Verified.

    ``kind``: ``"subset"`` (the first ``n`` Verified ids) or ``"unknown"`` (a hand-made set).
    """
    rows = json.loads(BUNDLED_INSTANCES.read_text())
    if kind == "unknown":
        rows = [{"instance_id": f"acme__widget-{i}", "repo": "acme/widget"} for i in range(n)]
    out = scratch() / "swe-set" / kind / verdict
    out.mkdir(parents=True, exist_ok=True)
    dataset = out / "dataset.json"
    dataset.write_text(json.dumps(rows[:n]))
    universe = load_universe(dataset)
    shares = dict(zip(("before", "after"), _RESOLVED[verdict], strict=True))
    maps = swe_maps(out, list(universe.ids), {arm: int(k * n) for arm, k in shares.items()})
    comparison = compare_arms(
        load_arm("before", [maps["before"]], universe),
        load_arm("after", [maps["after"]], universe),
        universe,
        GateOptions(n_resamples=2000, seed=1),
    )
    assert comparison.verdict.value == verdict, comparison.reasons
    return (
        write_json_atomic(out / "swe.json", comparison_to_dict(comparison)),
        write_text_atomic(out / "swe.xml", build_swe_junit(comparison).tostring().decode()),
    )


def full_set(swe_kind: str = "improved", fault: Fault = Fault.HEALTHY) -> dict[str, object]:
    """Keyword arguments of ``build_report`` for every tier present."""
    run_json, run_xml = check_run(fault)
    swe_json, swe_xml = swe(swe_kind)
    c = corpus()
    return {
        "junit": [functional_passing(), run_xml, swe_xml],
        "runs": [run_json],
        "swe": swe_json,
        "recipe": c.recipe,
        "baseline": c.baseline,
        "band_runs": list(c.band_runs),
    }
