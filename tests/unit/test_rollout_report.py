"""Unit tests of rlgate.bench.report on one real measurement (``rollout_measured``)."""

from __future__ import annotations

import json

import pytest

from rlgate.bench.gate import compare_metric, load_baseline
from rlgate.bench.report import bench_summary, plot_bench, render_bench, render_verdicts
from rlgate.bench.rollout import FULL_PASSES_PER_CALL
from rlgate.core.errors import RlgateError

from .helpers.rollout_measured import GYM_MS, PARSER_LENGTHS, PROMPT_TOKENS, measured_bench

CLI_FIELDS = (
    "turns",
    "full_ms",
    "incremental_ms",
    "full_total_s",
    "incremental_total_s",
    "ratio",
    "full_exponent",
    "parser_us_per_token",
)


@pytest.fixture(scope="module")
def summary():
    return bench_summary(measured_bench(passes=3))


class TestBenchSummary:
    def test_bench_summary_has_the_fields_dashboards_read(self, summary):
        assert all(field in summary for field in CLI_FIELDS)
        assert summary["turns"] == len(summary["full_ms"]) == len(summary["incremental_ms"]) == 24
        assert set(summary["parser_us_per_token"]) == {str(n) for n in PARSER_LENGTHS}
        assert summary["prompt_tokens"] == list(PROMPT_TOKENS)

    def test_bench_summary_totals_and_ratio(self, summary):
        assert summary["full_total_s"] == pytest.approx(sum(summary["full_ms"]) / 1e3, rel=1e-3)
        assert summary["ratio"] == pytest.approx(
            summary["full_total_s"] / summary["incremental_total_s"], rel=1e-2
        )
        assert summary["gym_total_s"] == pytest.approx(sum(GYM_MS) / 1e3, rel=1e-3)
        assert 14 < summary["ratio"] < 17  # measured: 15.7x at 24 turns

    def test_bench_summary_cluster_estimate_arithmetic(self, summary):
        cluster = summary["cluster"]
        parse = 5766 * summary["parser_us_per_token"]["256"]["one_shot"] / 1e6
        served = FULL_PASSES_PER_CALL * summary["full_total_s"] + summary["gym_total_s"] + parse
        assert cluster["cpu_s_per_rollout"]["as_served"] == pytest.approx(served, abs=1e-3)
        assert cluster["cpu_s_per_step"]["as_served"] == pytest.approx(64 * served, abs=0.1)
        assert cluster["cpu_s_per_step_per_vllm_server"]["incremental"] == pytest.approx(
            cluster["cpu_s_per_step"]["incremental"] / 4, abs=0.1
        )

    def test_bench_summary_is_a_baseline_for_its_own_configuration(self, summary, tmp_path):
        path = tmp_path / "bench.json"
        path.write_text(json.dumps(summary), encoding="utf-8")
        entry = load_baseline(path).entry(summary["recipe"], summary["config"])
        assert entry is not None
        assert set(entry.metrics) == set(summary["metrics"])


class TestRender:
    def test_render_bench_shows_the_curve_totals_and_parsers(self, summary):
        text = render_bench(summary)
        assert text.splitlines()[0].startswith(f"rollout path: {summary['recipe']} (24 turns")
        assert f"total: full {summary['full_total_s']:.2f} s" in text
        assert f"ratio {summary['ratio']}x" in text
        assert "1024 (1003 tokens): 258.7 / 16.59" in text
        assert "64 rollouts/step x 24 turns" in text

    def test_render_verdicts_lists_failures_first(self):
        ok = compare_metric("a_exponent", [1.0], [1.0])
        bad = compare_metric("b_exponent", [2.0], [1.0])
        first = render_verdicts([ok.result(), bad.result()]).splitlines()[0]
        assert first.split()[:2] == ["FAIL", "b_exponent"] and "-> FAIL" in first


class TestPlotBench:
    def test_plot_bench_writes_a_png(self, summary, tmp_path):
        out = plot_bench(summary, tmp_path / "plots" / "rollout.png")
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_plot_bench_never_overwrites_an_input(self, summary, tmp_path):
        given = tmp_path / "recipe.yaml"
        given.write_text("keep", encoding="utf-8")
        with pytest.raises(RlgateError, match="one of the inputs"):
            plot_bench(summary, given, inputs=[given])
        assert given.read_text(encoding="utf-8") == "keep"
