"""Unit tests of rlgate.bench.gate: exponent fits, the noise-based gate, stored baselines.

The samples below are real measurements (``rlgate.bench.rollout`` at the perf tier's
configuration on this repository's CI machine, AMD EPYC, 2 cores, shared), copied so the
gate logic is tested on the noise it meets in practice, not on invented numbers.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from rlgate.bench.gate import (
    COST_TOLERANCE,
    EXPONENT_TOLERANCE,
    Baseline,
    BaselineEntry,
    Tolerance,
    compare_metric,
    compare_metrics,
    environment,
    environment_key,
    fit_exponent,
    load_baseline,
    tolerance_for,
    write_baseline,
)
from rlgate.core.errors import MetricsError, RlgateError
from rlgate.core.results import Op, Outcome, Tier

# Measured: qwen3_coder streaming parse time (s) of 233/596/1003-token outputs, thinking recipe.
PARSER_TOKENS = (233, 596, 1003)
PARSER_STREAMING_S = (0.02407, 0.10163, 0.20713)
# Measured: prompt.full_us_per_token (CPU time, collector paused), 5 passes in one process,
# then 3 passes in another process (same recipe and configuration; load average ~2 on 2 cores).
FULL_US_QUIET = (1.6061, 1.6472, 1.4879, 1.6039, 1.5751)
FULL_US_RERUN = (1.5397, 1.4324, 1.6603)
# Measured: prompt.full_exponent over the same 5 passes.
FULL_EXPONENT = (1.1880, 1.1685, 1.1460, 1.1422, 1.1425)

ENV = {
    "vllm": "0.25.1",
    "transformers": "5.8.1",
    "tokenizers": "0.22.2",
    "nemo-gym": "0.7.0",
    "python": "3.11.7",
    "cpu": "AMD EPYC 7B13 64-Core Processor",
}
CONFIG = {
    "turns": 24,
    "agent_max_turns": 100,
    "max_total_sequence_length": 65536,
    "parser_lengths": [256, 512, 1024],
}


class TestFitExponent:
    @pytest.mark.parametrize(
        "exponent", [pytest.param(b, id=f"b_{b}") for b in (0.0, 0.5, 1.0, 2.0, 3.0)]
    )
    def test_fit_exponent_recovers_an_exact_power_law(self, exponent):
        x = [1, 2, 5, 10, 50, 200]
        fit = fit_exponent(x, [3.0 * v**exponent for v in x])
        assert fit.exponent == pytest.approx(exponent, abs=1e-9)

    def test_fit_exponent_on_measured_streaming_times_is_superlinear(self):
        fit = fit_exponent(PARSER_TOKENS, PARSER_STREAMING_S)
        assert 1.3 < fit.exponent < 1.7  # qwen3_coder streaming grows faster than linear
        assert fit.r2 > 0.98

    def test_fit_exponent_with_two_points_has_no_stderr(self):
        fit = fit_exponent([10, 20], [1.0, 4.0])
        assert fit.exponent == pytest.approx(2.0)
        assert fit.stderr == 0.0

    @pytest.mark.parametrize(
        ("x", "y", "match"),
        [
            pytest.param([1, 2], [1.0], "2 x values but 1", id="length_mismatch"),
            pytest.param([1, 2], [1.0, 0.0], "finite and positive", id="zero_cost"),
            pytest.param([0, 2], [1.0, 2.0], "finite and positive", id="zero_size"),
            pytest.param([1, 2], [1.0, math.nan], "finite and positive", id="nan"),
            pytest.param([5, 5], [1.0, 2.0], "two distinct x", id="one_size"),
        ],
    )
    def test_fit_exponent_rejects_unusable_input(self, x, y, match):
        with pytest.raises(MetricsError, match=match):
            fit_exponent(x, y)


class TestTolerance:
    def test_tolerance_for_exponents_and_costs(self):
        assert tolerance_for("prompt.full_exponent") is EXPONENT_TOLERANCE
        assert tolerance_for("parser.streaming_us_per_token@1024") is COST_TOLERANCE


class TestCompareMetric:
    def test_compare_metric_passes_a_rerun_in_another_process(self):
        verdict = compare_metric("prompt.full_us_per_token", FULL_US_RERUN, FULL_US_QUIET)
        assert verdict.outcome is Outcome.PASS
        assert verdict.current == 1.5397 and verdict.baseline == 1.6039

    def test_compare_metric_exponent_tolerance_is_four_times_the_measured_noise(self):
        verdict = compare_metric("prompt.full_exponent", FULL_EXPONENT, FULL_EXPONENT)
        noise = statistics.stdev(FULL_EXPONENT)  # 0.0196: below the 0.1 floor x 1/4
        assert verdict.noise == pytest.approx(noise)
        assert verdict.tolerance == pytest.approx(max(4 * noise, EXPONENT_TOLERANCE.floor))
        assert verdict.bound == pytest.approx(1.1460 + verdict.tolerance)

    def test_compare_metric_cost_noise_is_relative(self):
        """A cost's noise is the spread of log(samples): it does not grow with the cost."""
        verdict = compare_metric("prompt.full_us_per_token", FULL_US_QUIET, FULL_US_QUIET)
        doubled = compare_metric(
            "prompt.full_us_per_token", [2 * v for v in FULL_US_QUIET], FULL_US_QUIET
        )
        assert doubled.noise == pytest.approx(verdict.noise)
        assert verdict.bound == pytest.approx(1.6039 * math.exp(verdict.tolerance))

    def test_compare_metric_fails_a_doubled_cost_with_the_numbers(self):
        doubled = [2 * v for v in FULL_US_QUIET]
        verdict = compare_metric("prompt.full_us_per_token", doubled, FULL_US_QUIET)
        assert verdict.outcome is Outcome.FAIL and not verdict.improved
        text = verdict.describe()
        result = verdict.result()
        assert (result.tier, result.outcome, result.op, result.metric) == (
            Tier.PERF,
            Outcome.FAIL,
            Op.LE,
            "prompt.full_us_per_token",
        )
        assert result.value == verdict.current and result.threshold == verdict.bound
        assert result.message == text
        assert (
            "3.208 vs baseline 1.604 (x2.00, allowed x1.25; noise 3.8%" in text
            and "-> FAIL" in text
        )

    def test_compare_metric_reports_an_improvement_without_failing(self):
        halved = [v / 2 for v in FULL_US_QUIET]
        verdict = compare_metric("prompt.full_us_per_token", halved, FULL_US_QUIET)
        assert verdict.outcome is Outcome.PASS and verdict.improved
        result = verdict.result()
        assert result.outcome is Outcome.PASS and result.evidence["improved"] is True
        assert result.message.endswith("-> IMPROVED")

    def test_compare_metric_noise_is_the_noisier_side(self):
        """A noisier current run (a loaded CI machine) widens the tolerance; so does a noisy
        baseline: the gate never claims more precision than either measurement has."""
        logs = [[math.log(v) for v in side] for side in (FULL_US_QUIET, FULL_US_RERUN)]
        verdict = compare_metric("prompt.full_us_per_token", FULL_US_RERUN, FULL_US_QUIET)
        assert verdict.noise == pytest.approx(max(statistics.stdev(x) for x in logs))
        assert verdict.noise == pytest.approx(statistics.stdev(logs[1]))  # the rerun is noisier

    def test_compare_metric_exponent_floor_keeps_a_quiet_baseline_usable(self):
        flat = (1.20, 1.20, 1.20)
        verdict = compare_metric("prompt.full_exponent", (1.25, 1.26, 1.24), flat)
        assert verdict.tolerance == EXPONENT_TOLERANCE.floor
        assert verdict.outcome is Outcome.PASS
        assert compare_metric("prompt.full_exponent", (1.5,), flat).outcome is Outcome.FAIL

    def test_compare_metric_a_quadratic_parser_fails_the_exponent_gate(self):
        linear = [1.0, 1.02, 0.98]
        verdict = compare_metric("parser.streaming_exponent", [2.0, 1.97], linear)
        assert verdict.outcome is Outcome.FAIL

    def test_compare_metric_cost_floor_tolerates_a_quarter(self):
        base = (10.0, 10.0, 10.0)
        assert compare_metric("parser.x_us", [12.4], base).outcome is Outcome.PASS
        assert compare_metric("parser.x_us", [12.6], base).outcome is Outcome.FAIL

    def test_compare_metric_custom_tolerance(self):
        tight = Tolerance(sigmas=0.0, floor=0.01, relative=False)
        verdict = compare_metric("x_exponent", [1.05], [1.0], tight)
        assert verdict.outcome is Outcome.FAIL

    @pytest.mark.parametrize(
        ("current", "baseline", "match"),
        [
            pytest.param([], [1.0], "current run has no samples", id="empty_current"),
            pytest.param([1.0], [], "baseline has no samples", id="empty_baseline"),
            pytest.param([math.inf], [1.0], "non-finite", id="inf_current"),
            pytest.param([0.0], [1.0], "costs must be positive", id="zero_cost"),
        ],
    )
    def test_compare_metric_rejects_missing_samples(self, current, baseline, match):
        with pytest.raises(MetricsError, match=match):
            compare_metric("prompt.full_us_per_token", current, baseline)


class TestCompareMetrics:
    def test_compare_metrics_gates_every_baseline_metric(self):
        verdicts = compare_metrics(
            {"a_exponent": [1.0], "b_exponent": [1.0], "extra_exponent": [9.0]},
            {"a_exponent": [1.0], "b_exponent": [1.0]},
        )
        assert [v.metric for v in verdicts] == ["a_exponent", "b_exponent"]

    def test_compare_metrics_missing_metric_is_an_error_not_a_pass(self):
        with pytest.raises(MetricsError, match=r"lacks baseline metric\(s\) \['gym.exponent'\]"):
            compare_metrics({"a_exponent": [1.0]}, {"a_exponent": [1.0], "gym.exponent": [1.0]})


class TestEnvironmentKey:
    def test_environment_key_is_file_name_safe_and_names_every_field(self):
        key = environment_key(ENV)
        assert key == (
            "vllm-0.25.1_transformers-5.8.1_tokenizers-0.22.2_nemo-gym-0.7.0_python-3.11.7_"
            "cpu-amd-epyc-7b13-64-core-processor"
        )

    def test_environment_key_changes_with_the_cpu(self):
        assert environment_key(ENV) != environment_key({**ENV, "cpu": "Intel Xeon"})

    def test_environment_names_the_installed_libraries(self):
        env = environment()
        assert set(env) == {"vllm", "transformers", "tokenizers", "nemo-gym", "python", "cpu"}
        assert env["vllm"] != "absent"


def _write(tmp_path: Path, payload: object, name: str = "b.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


class TestBaselineFiles:
    def test_write_then_load_baseline_round_trips(self, tmp_path):
        entry = BaselineEntry("recipe-a", CONFIG, {"prompt.full_exponent": FULL_EXPONENT})
        path = write_baseline(tmp_path / "key.json", ENV, [entry])
        loaded = load_baseline(path)
        assert loaded.environment == ENV
        assert loaded.entry("recipe-a", CONFIG).metrics == entry.metrics
        assert json.loads(path.read_text())["schema_version"] == 1

    def test_baseline_entry_requires_the_same_configuration(self, tmp_path):
        entry = BaselineEntry("recipe-a", CONFIG, {"prompt.full_exponent": FULL_EXPONENT})
        loaded = load_baseline(write_baseline(tmp_path / "key.json", ENV, [entry]))
        assert loaded.entry("recipe-a", {**CONFIG, "turns": 200}) is None
        assert loaded.entry("recipe-b", CONFIG) is None

    def test_load_baseline_accepts_one_bench_json(self, tmp_path):
        payload = {"environment": ENV, "recipe": "r", "config": CONFIG, "metrics": {"m": [1.0]}}
        loaded = load_baseline(_write(tmp_path, payload))
        assert loaded.entry("r", CONFIG).metrics == {"m": (1.0,)}

    def test_require_environment_names_what_differs(self):
        baseline = Baseline(Path("b.json"), ENV, ())
        with pytest.raises(MetricsError, match=r"vllm: baseline '0.25.1' vs here '0.29.0'"):
            baseline.require_environment({**ENV, "vllm": "0.29.0"})
        baseline.require_environment(dict(ENV))  # same environment: no error

    @pytest.mark.parametrize(
        ("payload", "match"),
        [
            pytest.param({"entries": []}, "no `environment`", id="no_environment"),
            pytest.param({"environment": ENV, "entries": []}, "non-empty list", id="no_entries"),
            pytest.param(
                {"environment": ENV, "entries": [{"recipe": "r", "config": CONFIG}]},
                "has no `metrics`",
                id="no_metrics",
            ),
            pytest.param(
                {"environment": ENV, "recipe": "r", "config": CONFIG, "metrics": {"m": "1.0"}},
                "must be a list of numbers",
                id="metric_not_a_list",
            ),
            pytest.param(
                {"environment": ENV, "recipe": "r", "config": CONFIG, "metrics": {"m": []}},
                "has no samples",
                id="metric_without_samples",
            ),
        ],
    )
    def test_load_baseline_rejects_malformed_files(self, tmp_path, payload, match):
        with pytest.raises(MetricsError, match=match):
            load_baseline(_write(tmp_path, payload))

    def test_load_baseline_truncated_file_is_an_error_naming_it(self, tmp_path):
        path = tmp_path / "cut.json"
        path.write_text('{"environment": {"vllm": "0.25', encoding="utf-8")
        with pytest.raises(MetricsError, match=r"cut.json is not valid JSON \(truncated\?\)"):
            load_baseline(path)

    def test_load_baseline_missing_file_is_an_error(self, tmp_path):
        with pytest.raises(MetricsError, match="cannot read baseline"):
            load_baseline(tmp_path / "absent.json")

    def test_write_baseline_never_overwrites_an_input(self, tmp_path):
        entry = BaselineEntry("r", CONFIG, {"m": (1.0,)})
        path = write_baseline(tmp_path / "key.json", ENV, [entry])
        before = path.read_text()
        with pytest.raises(RlgateError, match="it is one of the inputs"):
            write_baseline(path, ENV, [entry], inputs=[path])
        assert path.read_text() == before
