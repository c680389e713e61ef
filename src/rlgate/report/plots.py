"""Figures of the release report, drawn with matplotlib's Agg canvas into PNG bytes.

No pyplot and no global state: each figure is a ``matplotlib.figure.Figure`` rendered by
its own ``FigureCanvasAgg``, so drawing is thread-safe and never opens a window. A figure
whose data is missing is not drawn; :func:`render_all` returns why instead, and the report
lists it. Demo figures carry a large DEMO watermark.

Figures: reward per step with the reference band; logprob error and generation KL with
their bounds; turns per sample and truncation rate; step time and tokens/s/GPU against the
baseline; SWE-bench resolved rate before/after with 95% CIs and per repository, titled
with the instance set compared. Labels taken from inputs (check and repository names) are
shown as plain text: one line, no mathtext.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from rlgate.core.results import Op, Result, number_text
from rlgate.core.text import one_line
from rlgate.report.inputs import SweDoc
from rlgate.runs.metrics import MetricSeries, RunMetrics

__all__ = ["Figure", "render_all", "value_bounds", "wilson_interval"]

REWARD = "train/reward"
TMPE = "train/token_mult_prob_error"
GEN_KL = "train/gen_kl_error"
TURNS = "train/turns_per_sample/mean"
TURNS_P95 = "train/turns_per_sample/p95"
TRUNCATION = "train/truncation_rate"
STEP_TIME = "timing/train/total_step_time"
TOKENS = ("performance/tokens_per_sec_per_gpu", "timing/train/valid_tokens_per_sec_per_gpu")
_DRAWN_OPS = (Op.LT, Op.LE, Op.GT, Op.GE)
_BEFORE, _AFTER, _BAND, _BASE = "#7f8c9a", "#1f77b4", "#a6cee3", "#ff7f0e"


@dataclass(frozen=True, slots=True)
class Figure:
    """One rendered figure: a file stem, a title, a caption and PNG bytes."""

    key: str
    title: str
    caption: str
    png: bytes

    def data_uri(self) -> str:
        """``data:image/png;base64,...`` for a self-contained HTML page."""
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def _plain(text: object, limit: int = 80) -> str:
    """An input-derived label as matplotlib shows it: one line, no mathtext (``$``)."""
    label = one_line(text)
    label = label if len(label) <= limit else label[: limit - 1] + "…"
    return label.replace("$", r"\$")


def _new(ncols: int = 1) -> tuple[MplFigure, list]:
    fig = MplFigure(figsize=(5.2 * ncols, 3.4), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _finish(fig: MplFigure, key: str, title: str, caption: str, demo: bool) -> Figure:
    if demo:
        fig.text(
            0.5,
            0.5,
            "DEMO",
            fontsize=64,
            color="#d62728",
            alpha=0.18,
            ha="center",
            va="center",
            rotation=20,
            weight="bold",
        )
    fig.suptitle(("DEMO — " if demo else "") + title, fontsize=11)
    buf = io.BytesIO()
    fig.canvas.print_png(buf)
    return Figure(key, ("DEMO — " if demo else "") + title, caption, buf.getvalue())


def _xy(series: MetricSeries) -> tuple[np.ndarray, np.ndarray]:
    return series.steps.astype(float), series.values.astype(float)


def value_bounds(checks: Sequence[Result], metric: str) -> list[tuple[str, float]]:
    """Thresholds of the gate's checks on the values of ``metric`` (``< 1.05`` -> 1.05).

    A line is drawn for a check on ``metric`` whose threshold is on the metric's own scale
    (its Result states no ``unit``: a condition's reduced value) and whose ``op`` is an
    inequality; a ratio, band or perf bound (a ``unit``) is not on the metric's scale.
    """
    out = []
    for check in checks:
        threshold = check.threshold
        if (
            check.metric == metric
            and not check.unit
            and check.op in _DRAWN_OPS
            and threshold is not None
            and math.isfinite(threshold)
        ):
            out.append((f"{check.name} {check.op.value} {number_text(threshold)}", threshold))
    return out


def _label(ax, tag: str) -> None:
    """Full tag as the panel title, its last component on the y axis (long tags overflow)."""
    ax.set_title(tag, fontsize=8)
    ax.set_ylabel(tag.rsplit("/", 1)[-1], fontsize=8)


def _hlines(ax, bounds: list[tuple[str, float]]) -> None:
    for label, value in bounds:
        ax.axhline(value, color="#d62728", linestyle="--", linewidth=1, label=_plain(label))


def _reward(run: RunMetrics, band_runs: Sequence[RunMetrics], alpha: float, demo: bool):
    from rlgate.checks.perf import Band, build_band

    series = run.series.get(REWARD)
    if series is None:
        return f"reward plot: the run does not log {REWARD}"
    fig, (ax,) = _new()
    refs = [r.series[REWARD] for r in band_runs if REWARD in r.series]
    caption = "reward per step"
    if len(refs) >= 2:
        band = build_band(refs, alpha=alpha, warmup_steps=0, min_runs=len(refs))
        if isinstance(band, Band):
            lo, hi = band.interval(np.arange(band.steps.size))
            ax.fill_between(
                band.steps, lo, hi, color=_BAND, alpha=0.6, label=f"band ({len(refs)} runs)"
            )
            ax.plot(
                band.steps,
                band.values.mean(axis=0),
                color="#6a8caf",
                linewidth=1,
                label="band mean",
            )
            caption += (
                f"; shaded: one-sided {1 - alpha:.0%} prediction band of {len(refs)} reference runs"
            )
    x, y = _xy(series)
    ax.plot(x, y, color=_AFTER, linewidth=1.6, label="run")
    if x.size >= 2:
        slope, icpt = np.polyfit(x, y, 1)
        ax.plot(x, slope * x + icpt, color="#2ca02c", linestyle=":", label="OLS trend")
    ax.set_xlabel("step")
    _label(ax, REWARD)
    ax.legend(fontsize=7, loc="lower right")
    return _finish(fig, "reward", "Reward with its reference band", caption, demo)


def _mismatch(run: RunMetrics, checks: Sequence[Result], demo: bool):
    present = [t for t in (TMPE, GEN_KL) if t in run.series]
    if not present:
        return f"logprob plot: the run logs neither {TMPE} nor {GEN_KL}"
    fig, axes = _new(len(present))
    for ax, tag in zip(axes, present, strict=True):
        x, y = _xy(run.series[tag])
        ax.plot(x, y, color=_AFTER, linewidth=1.4, label="run")
        _hlines(ax, value_bounds(checks, tag))
        ax.set_xlabel("step")
        _label(ax, tag)
        ax.legend(fontsize=7)
    title = "Logprob error and generation KL (train vs vLLM)"
    return _finish(fig, "logprob", title, "dashed: the gate's bounds on the metric", demo)


def _agentic(run: RunMetrics, checks: Sequence[Result], demo: bool):
    present = [t for t in (TURNS, TRUNCATION) if t in run.series]
    if not present:
        return f"agentic plot: the run logs neither {TURNS} nor {TRUNCATION}"
    fig, axes = _new(len(present))
    for ax, tag in zip(axes, present, strict=True):
        x, y = _xy(run.series[tag])
        ax.plot(x, y, color=_AFTER, linewidth=1.4, label=tag.rsplit("/", 1)[-1])
        if tag == TURNS and TURNS_P95 in run.series:
            ax.plot(*_xy(run.series[TURNS_P95]), color=_BEFORE, linewidth=1, label="p95")
        _hlines(ax, value_bounds(checks, tag))
        ax.set_xlabel("step")
        _label(ax, tag)
        ax.legend(fontsize=7)
    return _finish(fig, "agentic", "Turns per sample and truncation", "per training step", demo)


def _perf(run: RunMetrics, baseline: RunMetrics | None, demo: bool):
    tokens = next((t for t in TOKENS if t in run.series), None)
    present = [t for t in (STEP_TIME, tokens) if t and t in run.series]
    if not present:
        return f"perf plot: the run logs neither {STEP_TIME} nor tokens/s/GPU"
    fig, axes = _new(len(present))
    for ax, tag in zip(axes, present, strict=True):
        if baseline is not None and tag in baseline.series:
            bx, by = _xy(baseline.series[tag])
            ax.plot(bx, by, color=_BASE, linewidth=1, label="baseline")
            ax.axhline(float(np.median(by)), color=_BASE, linestyle="--", linewidth=1)
        x, y = _xy(run.series[tag])
        ax.plot(x, y, color=_AFTER, linewidth=1.4, label="run")
        ax.axhline(float(np.median(y)), color=_AFTER, linestyle="--", linewidth=1)
        ax.set_xlabel("step")
        _label(ax, tag)
        ax.legend(fontsize=7)
    caption = "dashed: medians" + ("" if baseline is not None else "; no --baseline given")
    return _finish(fig, "perf", "Step time and tokens/s/GPU vs the baseline", caption, demo)


def wilson_interval(rate: float, n: int) -> tuple[float, float]:
    """95% Wilson interval of a resolve rate over ``n`` instances (statsmodels)."""
    from statsmodels.stats.proportion import proportion_confint  # ~0.6 s: only when drawn

    lo, hi = proportion_confint(rate * n, n, alpha=0.05, method="wilson")
    return float(lo), float(hi)


def _swe(doc: SweDoc, universe: str, demo: bool) -> Figure:
    fig = MplFigure(figsize=(10.4, 3.8), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2, width_ratios=[1, 2])
    for i, (arm, colour) in enumerate(((doc.before, _BEFORE), (doc.after, _AFTER))):
        lo, hi = wilson_interval(arm.rate, arm.n_instances)
        left.bar(i, 100 * arm.rate, color=colour, width=0.6)
        left.errorbar(
            i,
            100 * arm.rate,
            yerr=[[100 * (arm.rate - lo)], [100 * (hi - arm.rate)]],
            color="black",
            capsize=6,
        )
        left.text(
            i,
            100 * hi + 1,
            f"{100 * arm.rate:.1f}%\n{len(arm.runs)} run(s)",
            ha="center",
            fontsize=8,
        )
    left.set_xticks([0, 1], ["before", "after"])
    left.set_ylabel("resolved (%)")
    left.set_ylim(0, max(100 * doc.after.rate, 100 * doc.before.rate) * 1.35 + 5)
    lo, hi = doc.ci95_pp
    left.set_title(
        f"Δ {doc.delta_pp:+.1f} pp [{lo:+.1f}, {hi:+.1f}]; {doc.verdict.value}", fontsize=9
    )
    rows = sorted(doc.per_repo, key=lambda r: r.n)
    y = np.arange(len(rows))
    right.barh(
        y - 0.2,
        [100 * r.before_resolved / r.n for r in rows],
        height=0.4,
        color=_BEFORE,
        label="before",
    )
    right.barh(
        y + 0.2,
        [100 * r.after_resolved / r.n for r in rows],
        height=0.4,
        color=_AFTER,
        label="after",
    )
    right.set_yticks(
        y, [f"{_plain(r.repo, 48)} (n={r.n}, {r.delta_pp:+.0f} pp)" for r in rows], fontsize=7
    )
    right.set_xlabel("resolved (%)")
    right.legend(fontsize=7, loc="lower right")
    caption = (
        "left: resolved rate (mean over runs) with its 95% Wilson interval over the instances; "
        "title: the paired difference and its 95% CI; right: per repository"
    )
    return _finish(fig, "swe", f"SWE-bench before/after on {universe}", caption, demo)


def render_all(
    *,
    run: RunMetrics | None,
    baseline: RunMetrics | None = None,
    band_runs: Sequence[RunMetrics] = (),
    band_alpha: float = 0.01,
    checks: Sequence[Result] = (),
    swe: SweDoc | None = None,
    swe_universe: str = "SWE-bench Verified",
    demo: bool = False,
) -> tuple[list[Figure], list[str]]:
    """Every figure the inputs allow, and a note for each one that could not be drawn.

    ``swe_universe`` names the instance set the SWE comparison ran on (the plot's title).
    """
    drawn: list[Figure | str] = []
    if run is None:
        drawn.append("training and perf plots: no run (pass --run with a check-run JSON)")
    else:
        drawn += [
            _reward(run, band_runs, band_alpha, demo),
            _mismatch(run, checks, demo),
            _agentic(run, checks, demo),
            _perf(run, baseline, demo),
        ]
    drawn.append(_swe(swe, swe_universe, demo) if swe is not None else "SWE plot: no --swe JSON")
    return [d for d in drawn if isinstance(d, Figure)], [d for d in drawn if isinstance(d, str)]
