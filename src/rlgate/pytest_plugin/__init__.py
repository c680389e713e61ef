"""rlgate's pytest plugin: tier markers, gate options, and the tested-versions header.

Loaded by the root ``conftest.py`` (``pytest_plugins``) or ``-p rlgate.pytest_plugin``.
Options are validated at parse time; a missing input for a tier is reported by
the tier itself as a skip naming the missing option, never as a silent pass. Tests marked
``benchmark`` (or using pytest-benchmark's ``benchmark`` fixture) carry the JUnit property
``rlgate.informational = benchmark``: evidence in the release report, never a gate.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlgate.core.junit import INFORMATIONAL_PROPERTY
from rlgate.core.validate import float_in, positive_int
from rlgate.core.versions import format_versions, tested_versions

pytest_plugins = ("rlgate.pytest_plugin.fixtures",)

TIER_MARKERS: dict[str, str] = {
    "unit": "unit tests of the rlgate library itself (CPU, seconds)",
    "functional": "tier 1: templates x tool/reasoning parsers x NeMo Gym conversions x recipes "
    "with real vLLM parsers and tokenizers (CPU, seconds)",
    "convergence": "tier 2: health bounds on a NeMo RL run (--run-dir, --recipe)",
    "perf": "tier 3: step time / tokens per second against a baseline run (--run-dir, "
    "--baseline); without a run, the rollout path's CPU cost per turn against a stored baseline",
    "swe_gate": "tier 4: SWE-bench Verified before/after gate (--swe-before, --swe-after)",
}
#: Markers of tests that are evidence but not gates: their testcases carry the
#: ``rlgate.informational`` JUnit property, and the release report never counts them as
#: their tier's gate check (``docs/recommendation-rule.md``).
INFORMATIONAL_MARKERS: dict[str, str] = {
    "benchmark": "a benchmark: measures and reports numbers, gates nothing (informational in "
    "the release report; tests using pytest-benchmark's `benchmark` fixture get it too)",
}
RESOURCE_MARKERS: dict[str, str] = {
    "gpu": "needs a GPU",
    "multinode": "needs a multi-node cluster",
    "docker": "needs a Docker daemon",
}


def _existing_path(value: str) -> Path:
    path = Path(value).expanduser()
    if not path.exists():
        raise pytest.UsageError(f"rlgate: path does not exist: {value}")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register rlgate's options (one group, shared by every tier)."""
    group = parser.getgroup("rlgate", "rlgate release gates")
    group.addoption(
        "--tokenizers",
        default=os.environ.get("RLGATE_TOKENIZERS"),
        help="tokenizer root: one subfolder per model named by the HF id's last component "
        "lowercased (default: $RLGATE_TOKENIZERS, else the HF cache/hub)",
    )
    group.addoption(
        "--recipe",
        action="append",
        default=[],
        type=_existing_path,
        help="recipe YAML(s) to gate (functional: restrict the matrix; convergence/perf: bounds)",
    )
    group.addoption(
        "--run-dir",
        type=_existing_path,
        help="NeMo RL run to check: logger.log_dir, a metrics.json, or an MLPerf log",
    )
    group.addoption("--baseline", type=_existing_path, help="baseline run for perf comparison")
    group.addoption("--rollouts", type=_existing_path, help="NeMo Gym rollouts JSONL")
    group.addoption(
        "--band-run",
        action="append",
        default=[],
        type=_existing_path,
        help="an earlier good run of the recipe (repeat: >= 5 runs define the reference band)",
    )
    group.addoption("--sync-run", type=_existing_path, help="synchronous run for async-vs-sync")
    group.addoption("--max-steps", type=positive_int, help="target step (default: the recipe's)")
    group.addoption(
        "--rlgate-json",
        metavar="FILE",
        help="convergence/perf tiers: also write the checks' results as `rlgate check-run "
        "--json` writes them (one evaluation for JUnit and JSON)",
    )
    group.addoption("--swe-before", nargs="+", type=_existing_path, help="SWE results, base")
    group.addoption("--swe-after", nargs="+", type=_existing_path, help="SWE results, trained")
    group.addoption("--swe-dataset", type=_existing_path, help="SWE-bench Verified parquet/dir")
    group.addoption(
        "--swe-alpha",
        type=float_in(0, 1, open_lo=True, open_hi=True),
        help="SWE gate significance level (default 0.05)",
    )
    group.addoption(
        "--swe-margin-pp",
        type=float_in(0, 100),
        help="SWE gate non-inferiority margin in points (default 0)",
    )
    group.addoption(
        "--swe-max-infra-error-rate",
        type=float_in(0, 1),
        help="SWE gate: above this share of infra errors/missing instances an arm is inconclusive",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register markers with descriptions (``strict`` rejects unknown ones)."""
    for name, text in {**TIER_MARKERS, **INFORMATIONAL_MARKERS, **RESOURCE_MARKERS}.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@pytest.hookimpl(trylast=True)  # after the conftests have added their markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag informational tests (``benchmark``) with ``rlgate.informational`` for JUnit."""
    for item in items:
        kind = next((m for m in INFORMATIONAL_MARKERS if item.get_closest_marker(m)), None)
        if kind is None and "benchmark" in getattr(item, "fixturenames", ()):
            kind = "benchmark"  # pytest-benchmark's fixture: a benchmark by construction
        if kind is not None and (INFORMATIONAL_PROPERTY, kind) not in item.user_properties:
            item.user_properties.append((INFORMATIONAL_PROPERTY, kind))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Print the versions this run tests against."""
    return [f"rlgate tested versions: {format_versions(tested_versions())}"]


def mark_tier(items: list[pytest.Item], directory: Path, tier: str) -> None:
    """Add ``tier``'s marker to every item collected under ``directory``."""
    marker = getattr(pytest.mark, tier)
    for item in items:
        if directory in item.path.parents:
            item.add_marker(marker)
