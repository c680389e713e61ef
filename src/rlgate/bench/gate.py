"""Regression gate of the rollout-path bench: growth exponents, noise, stored baselines.

Pure logic over measured numbers (no timing here; :mod:`rlgate.bench.rollout` measures):

* :func:`fit_exponent` fits ``y = c * x**b`` by least squares on ``log y`` vs ``log x``
  (``scipy.stats.linregress``); ``b`` is the growth exponent (1 linear, 2 quadratic).
* A metric is a tuple of samples, one per repeat of the whole measurement. Every gated
  metric is *lower is better* (an exponent or a cost per token).
* :func:`compare_metric` fails a metric when the change of the medians exceeds
  ``max(sigmas * noise, floor)``, ``noise`` being the larger of the two sample standard
  deviations: the baseline's measured noise, or the current run's when it is noisier.
  Costs are compared as ratios (noise of ``log(samples)``, floor +25%), exponents as
  differences (floor 0.1). The floors keep a baseline recorded on a quiet machine from
  failing on scheduler jitter (measured false-alarm and detection rates:
  ``benchmarks/bench_rollout_path.py``).
* Baselines are stored per environment key (vLLM, transformers, tokenizers and nemo-gym
  versions, Python version, CPU model: :func:`environment_key`) and per recipe and bench
  configuration; comparing across keys or configurations is refused, never guessed.

Invariants: a missing metric or an unusable baseline is an error (``MetricsError``),
never a pass; improvements pass and are reported as such. A :class:`MetricComparison` is
the computation (its numbers); what leaves the gate is its
:class:`~rlgate.core.results.Result` (:meth:`MetricComparison.result`, tier ``perf``: PASS,
an improvement being a PASS that says so, or FAIL).
"""

from __future__ import annotations

import json
import math
import platform
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgate.core.errors import MetricsError
from rlgate.core.io import write_json_atomic
from rlgate.core.results import Op, Outcome, Result, Tier
from rlgate.core.versions import tested_versions

__all__ = [
    "KEY_DISTRIBUTIONS",
    "Baseline",
    "BaselineEntry",
    "Fit",
    "MetricComparison",
    "Tolerance",
    "compare_metric",
    "compare_metrics",
    "cpu_model",
    "environment",
    "environment_key",
    "fit_exponent",
    "load_baseline",
    "tolerance_for",
    "write_baseline",
]

# Library versions that change what the rollout path costs.
KEY_DISTRIBUTIONS: tuple[str, ...] = ("vllm", "transformers", "tokenizers", "nemo-gym")


@dataclass(frozen=True, slots=True)
class Fit:
    """A power-law fit ``y = c * x**exponent``."""

    exponent: float
    stderr: float
    r2: float


def fit_exponent(x: Sequence[float], y: Sequence[float]) -> Fit:
    """Fit the growth exponent of ``y`` in ``x`` by log-log least squares.

    Raises:
        MetricsError: fewer than two distinct positive points, or a non-positive value.
    """
    from scipy.stats import linregress

    if len(x) != len(y):
        raise MetricsError(f"fit_exponent: {len(x)} x values but {len(y)} y values")
    bad = [(a, b) for a, b in zip(x, y, strict=True) if not (a > 0 and b > 0)]
    if bad or not all(math.isfinite(v) for v in (*x, *y)):
        raise MetricsError(f"fit_exponent: values must be finite and positive, got {bad[:3]}")
    if len(set(x)) < 2:
        raise MetricsError(f"fit_exponent: needs two distinct x values, got {sorted(set(x))}")
    res = linregress([math.log(v) for v in x], [math.log(v) for v in y])
    stderr = float(res.stderr) if len(x) > 2 else 0.0
    return Fit(float(res.slope), stderr, float(res.rvalue) ** 2)


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How far above the baseline a metric may go: ``max(sigmas * noise, floor)``.

    ``relative`` metrics (costs) are compared as ratios: noise is the standard deviation
    of ``log(samples)`` and ``floor`` a fraction (0.25: +25%). Others (exponents) are
    compared as differences and ``floor`` is absolute.
    """

    sigmas: float
    floor: float
    relative: bool


# Exponents are dimensionless and load-independent: 0.1 is a tenth of the way from linear
# to quadratic growth. Costs per token are wall time on a shared machine: the 25% floor
# and log-space noise are what keeps separate CI runs from failing on load alone
# (false-alarm and detection rates: benchmarks/bench_rollout_path.py, docs/rollout-path.md).
EXPONENT_TOLERANCE = Tolerance(sigmas=4.0, floor=0.1, relative=False)
COST_TOLERANCE = Tolerance(sigmas=4.0, floor=0.25, relative=True)


def tolerance_for(metric: str) -> Tolerance:
    """The tolerance policy of a metric (by name: ``*exponent`` or a cost)."""
    return EXPONENT_TOLERANCE if metric.endswith("exponent") else COST_TOLERANCE


def _spread(samples: Sequence[float]) -> float:
    return statistics.stdev(samples) if len(samples) > 1 else 0.0


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric against its baseline: the numbers behind its outcome.

    ``noise`` and ``tolerance`` are in the compared scale (log of the value for relative
    metrics); ``bound`` is the largest passing value in the metric's own unit. ``outcome``
    is PASS or FAIL; ``improved`` marks a PASS below the baseline by more than the tolerance.
    """

    metric: str
    current: float
    baseline: float
    bound: float
    noise: float
    tolerance: float
    relative: bool
    outcome: Outcome
    improved: bool = False
    samples: tuple[float, ...] = field(default=())
    baseline_samples: tuple[float, ...] = field(default=())

    @property
    def verdict(self) -> str:
        """``pass``, ``improved`` or ``fail`` (the words of ``bench rollout --json``'s gate)."""
        return "improved" if self.improved else self.outcome.value

    def result(self, name: str | None = None) -> Result:
        """The Result (value: the current median; threshold: the largest passing value)."""
        return Result(
            name=name or self.metric,
            tier=Tier.PERF,
            outcome=self.outcome,
            value=self.current,
            op=Op.LE,
            threshold=self.bound,
            bound=f"<= {self.bound:.4g}",
            message=self.describe(),
            metric=self.metric,
            evidence={
                "baseline": self.baseline,
                "noise": self.noise,
                "tolerance": self.tolerance,
                "relative": self.relative,
                "improved": self.improved,
                "samples": list(self.samples),
                "baseline_samples": list(self.baseline_samples),
            },
        )

    def describe(self) -> str:
        """One line: the values, the change against what the noise allows, the verdict."""
        n = f"n={len(self.samples)} vs {len(self.baseline_samples)}"
        if self.relative:
            change = f"x{self.current / self.baseline:.2f}, allowed x{math.exp(self.tolerance):.2f}"
            noise = f"noise {self.noise:.1%}"
        else:
            change = f"{self.current - self.baseline:+.3f}, allowed +{self.tolerance:.3f}"
            noise = f"noise {self.noise:.3f}"
        return (
            f"{self.metric}: {self.current:.4g} vs baseline {self.baseline:.4g} ({change}; "
            f"{noise}, {n}) -> {self.verdict.upper()}"
        )


def _check_samples(metric: str, samples: Sequence[float], what: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in samples)
    if not values:
        raise MetricsError(f"{metric}: the {what} has no samples")
    if not all(math.isfinite(v) for v in values):
        raise MetricsError(f"{metric}: the {what} has non-finite samples {list(values)}")
    return values


def compare_metric(
    metric: str,
    current: Sequence[float],
    baseline: Sequence[float],
    tolerance: Tolerance | None = None,
) -> MetricComparison:
    """Compare a lower-is-better metric's samples with its baseline's samples.

    The change of the medians fails when it exceeds ``max(sigmas * noise, floor)``, noise
    being the larger sample standard deviation of the two sides.

    Raises:
        MetricsError: either side has no samples, a non-finite one, or (for a relative
            metric) a non-positive one.
    """
    cur = _check_samples(metric, current, "current run")
    base = _check_samples(metric, baseline, "baseline")
    policy = tolerance or tolerance_for(metric)
    if policy.relative:
        if min(cur + base) <= 0:
            raise MetricsError(f"{metric}: costs must be positive, got {list(cur + base)}")
        scale, floor = math.log, math.log1p(policy.floor)
    else:
        scale, floor = float, policy.floor
    cur_t, base_t = [scale(v) for v in cur], [scale(v) for v in base]
    noise = max(_spread(cur_t), _spread(base_t))
    tol = max(policy.sigmas * noise, floor)
    delta = statistics.median(cur_t) - statistics.median(base_t)
    med_base = statistics.median(base)
    bound = med_base * math.exp(tol) if policy.relative else med_base + tol
    return MetricComparison(
        metric,
        statistics.median(cur),
        med_base,
        bound,
        noise,
        tol,
        policy.relative,
        Outcome.FAIL if delta > tol else Outcome.PASS,
        improved=delta < -tol,
        samples=cur,
        baseline_samples=base,
    )


def compare_metrics(
    current: Mapping[str, Sequence[float]], baseline: Mapping[str, Sequence[float]]
) -> list[MetricComparison]:
    """Compare every baseline metric; one the current run lacks is an error.

    Raises:
        MetricsError: a baseline metric is missing from ``current``.
    """
    missing = sorted(set(baseline) - set(current))
    if missing:
        raise MetricsError(
            f"the current measurement lacks baseline metric(s) {missing}",
            hint="measure with the same bench configuration as the baseline",
        )
    return [compare_metric(name, current[name], baseline[name]) for name in baseline]


# --- environment and stored baselines -------------------------------------------------------


def cpu_model() -> str:
    """The CPU model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def environment() -> dict[str, str]:
    """What a baseline is valid for: key library versions, Python, CPU model."""
    versions = tested_versions()
    env = {name: versions.get(name, "absent") for name in KEY_DISTRIBUTIONS}
    return {**env, "python": platform.python_version(), "cpu": cpu_model()}


def environment_key(env: Mapping[str, str] | None = None) -> str:
    """File-name-safe key of an environment, e.g. ``vllm-0.25.1_..._cpu-amd-epyc``."""
    env = environment() if env is None else env
    parts = [f"{name}-{env.get(name, 'absent')}" for name in (*KEY_DISTRIBUTIONS, "python")]
    parts.append("cpu-" + re.sub(r"[^a-z0-9]+", "-", env.get("cpu", "unknown").lower()).strip("-"))
    return "_".join(parts)


@dataclass(frozen=True, slots=True)
class BaselineEntry:
    """Metric samples of one recipe at one bench configuration."""

    recipe: str
    config: dict[str, Any]
    metrics: dict[str, tuple[float, ...]]


@dataclass(frozen=True, slots=True)
class Baseline:
    """A stored baseline file: one environment, many (recipe, configuration) entries."""

    path: Path | None
    environment: dict[str, str]
    entries: tuple[BaselineEntry, ...]

    @property
    def key(self) -> str:
        """The environment key this baseline is valid for."""
        return environment_key(self.environment)

    def entry(self, recipe: str, config: Mapping[str, Any]) -> BaselineEntry | None:
        """The entry measured for ``recipe`` with exactly ``config`` (None when absent)."""
        for item in self.entries:
            if item.recipe == recipe and item.config == dict(config):
                return item
        return None

    def require_environment(self, env: Mapping[str, str]) -> None:
        """Refuse a baseline measured on other library versions or another CPU.

        Raises:
            MetricsError: the environments differ (names every differing field).
        """
        diff = {
            k: (self.environment.get(k), env.get(k))
            for k in (*KEY_DISTRIBUTIONS, "python", "cpu")
            if self.environment.get(k) != env.get(k)
        }
        if diff:
            shown = ", ".join(f"{k}: baseline {a!r} vs here {b!r}" for k, (a, b) in diff.items())
            raise MetricsError(
                f"baseline {self.path} was measured in another environment ({shown})",
                hint="record a baseline here: python benchmarks/bench_rollout_path.py --record",
            )


def _entry(raw: Any, where: str) -> BaselineEntry:
    if not isinstance(raw, Mapping):
        raise MetricsError(f"{where}: an entry must be a mapping")
    recipe, config, metrics = raw.get("recipe"), raw.get("config"), raw.get("metrics")
    if not isinstance(recipe, str) or not isinstance(config, Mapping):
        raise MetricsError(f"{where}: an entry needs `recipe` (string) and `config` (mapping)")
    if not isinstance(metrics, Mapping) or not metrics:
        raise MetricsError(f"{where}: entry {recipe!r} has no `metrics`")
    parsed: dict[str, tuple[float, ...]] = {}
    for name, samples in metrics.items():
        if not isinstance(samples, list) or not all(isinstance(v, int | float) for v in samples):
            raise MetricsError(f"{where}: {recipe} metric {name!r} must be a list of numbers")
        parsed[str(name)] = _check_samples(name, samples, f"baseline {where}")
    return BaselineEntry(recipe, dict(config), parsed)


def load_baseline(path: str | Path) -> Baseline:
    """Read a baseline: a stored file (``entries``) or one ``rlgate bench rollout --json``.

    Raises:
        MetricsError: unreadable, not JSON, truncated, or missing required fields.
    """
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MetricsError(f"cannot read baseline {file}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise MetricsError(f"baseline {file} is not valid JSON (truncated?): {exc}") from exc
    if not isinstance(raw, Mapping) or not isinstance(raw.get("environment"), Mapping):
        raise MetricsError(f"baseline {file} has no `environment` mapping")
    if "entries" in raw:
        items = raw["entries"]
        if not isinstance(items, list) or not items:
            raise MetricsError(f"baseline {file}: `entries` must be a non-empty list")
        entries = tuple(_entry(item, str(file)) for item in items)
    else:  # the JSON of one bench run
        entries = (_entry(raw, str(file)),)
    env = {str(k): str(v) for k, v in raw["environment"].items()}
    return Baseline(file, env, entries)


def write_baseline(
    path: str | Path,
    env: Mapping[str, str],
    entries: Iterable[BaselineEntry],
    *,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """Write a baseline file atomically (``schema_version``, environment, entries)."""
    payload = {
        "key": environment_key(env),
        "environment": dict(env),
        "entries": [
            {
                "recipe": e.recipe,
                "config": e.config,
                "metrics": {k: list(v) for k, v in e.metrics.items()},
            }
            for e in entries
        ],
    }
    return write_json_atomic(path, payload, inputs=inputs)
