"""Numbers, tables and curves of a rollout-path bench (:mod:`rlgate.bench.rollout`).

Three separate steps, as everywhere in rlgate: :func:`bench_summary` computes the JSON
form (per-turn curves as medians over repeats, totals, ratio, exponents, parser costs,
the cluster estimate and the raw metric samples, so the file is a valid baseline for
``--baseline``); :func:`render_bench` formats text and :func:`render_verdicts` the gate's
Results (core's table);
:func:`plot_bench` draws the curves with matplotlib. Nothing here measures or prints.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rlgate.bench.gate import MetricComparison, environment, fit_exponent
from rlgate.bench.rollout import FULL_PASSES_PER_CALL, RolloutBench, bench_metrics, growth_exponent
from rlgate.core.io import write_bytes_atomic
from rlgate.core.results import Outcome, Result, render_table

__all__ = [
    "bench_summary",
    "cluster_estimate",
    "plot_bench",
    "render_bench",
    "render_verdicts",
    "verdict_rows",
]


def _median_curve(curves: Sequence[Sequence[float]]) -> list[float]:
    return [round(statistics.median(col), 4) for col in zip(*curves, strict=True)]


def _median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def _growth(curve: Sequence[float]) -> float | None:
    return round(growth_exponent(curve), 4) if len(curve) > 1 else None


def cluster_estimate(bench: RolloutBench, summary: dict[str, Any]) -> dict[str, Any]:
    """CPU-seconds per rollout, per step and per vLLM front-end, as served and incremental.

    ``as_served`` counts :data:`~rlgate.bench.rollout.FULL_PASSES_PER_CALL` full
    render+tokenize passes per call (NeMo RL's prefix splice and Gym's ``/tokenize``), one
    Gym conversion and the one-shot parse of every generated token; ``incremental`` counts
    one incremental append instead.
    """
    shortest = str(min(bench.config.parser_lengths))
    parse_s = bench.generated_tokens * summary["parser_us_per_token"][shortest]["one_shot"] / 1e6
    gym_s = summary["gym_total_s"] or 0.0
    per_rollout = {
        "as_served": FULL_PASSES_PER_CALL * summary["full_total_s"] + gym_s + parse_s,
        "one_full_pass": summary["full_total_s"] + gym_s + parse_s,
        "incremental": summary["incremental_total_s"] + gym_s + parse_s,
    }
    shape = bench.cluster
    out: dict[str, Any] = {
        "turns": bench.config.turns,
        "rollouts_per_step": shape.rollouts_per_step,
        "gym_concurrency": shape.gym_concurrency,
        "vllm_servers": shape.vllm_servers,
        "full_passes_per_call": FULL_PASSES_PER_CALL,
        "cpu_s_per_rollout": {k: round(v, 3) for k, v in per_rollout.items()},
    }
    if shape.rollouts_per_step:
        step = {k: v * shape.rollouts_per_step for k, v in per_rollout.items()}
        out["cpu_s_per_step"] = {k: round(v, 1) for k, v in step.items()}
        if shape.vllm_servers:
            out["cpu_s_per_step_per_vllm_server"] = {
                k: round(v / shape.vllm_servers, 1) for k, v in step.items()
            }
    return out


def bench_summary(bench: RolloutBench) -> dict[str, Any]:
    """The JSON form of a bench (also a valid ``--baseline`` for the same configuration)."""
    runs, parses = bench.prompt_runs, bench.parse_runs
    full = _median_curve([r.full_ms for r in runs])
    incremental = _median_curve([r.incremental_ms for r in runs])
    gym = _median_curve([r.ms for r in bench.gym_runs]) if bench.gym_runs else []
    full_total = _median(sum(r.full_ms) for r in runs) / 1e3
    inc_total = _median(sum(r.incremental_ms) for r in runs) / 1e3
    lengths = [str(n) for n in bench.config.parser_lengths]
    metrics = bench_metrics(bench)
    summary: dict[str, Any] = {
        "recipe": bench.recipe,
        "environment": environment(),
        "config": bench.config.as_dict(),
        "repeats": len(runs),
        "turns": bench.config.turns,
        "prelude_tokens": bench.prompt_tokens[0],
        "generated_tokens": bench.generated_tokens,
        "skipped_source_steps": bench.skipped_steps,
        "prompt_tokens": list(runs[0].prompt_tokens),
        "full_ms": full,
        "render_ms": _median_curve([r.render_ms for r in runs]),
        "tokenize_ms": _median_curve([r.tokenize_ms for r in runs]),
        "incremental_ms": incremental,
        "gym_ms": gym,
        "full_total_s": round(full_total, 4),
        "incremental_total_s": round(inc_total, 4),
        "gym_total_s": round(_median(sum(r.ms) for r in bench.gym_runs) / 1e3, 4) if gym else None,
        "ratio": round(full_total / inc_total, 2) if inc_total > 0 else None,
        "full_exponent": _growth(full),
        # per-call cost vs prompt length: 1 = linear in the context (quadratic in turns)
        "full_context_exponent": round(fit_exponent(runs[0].prompt_tokens, full).exponent, 4),
        "incremental_exponent": _growth(incremental[1:]),
        "gym_exponent": _growth(gym),
        "mismatched_turns": list(runs[0].mismatched_turns),
        "parser_tokens": dict(zip(lengths, parses[0].tokens, strict=True)),
        "parser_us_per_token": {
            label: {
                "streaming": round(
                    _median(1e6 * p.streaming_s[i] / p.tokens[i] for p in parses), 3
                ),
                "one_shot": round(_median(1e6 * p.one_shot_s[i] / p.tokens[i] for p in parses), 3),
            }
            for i, label in enumerate(lengths)
        },
    }
    for kind in ("streaming", "one_shot"):
        samples = metrics.get(f"parser.{kind}_exponent")
        summary[f"parser_{kind}_exponent"] = round(_median(samples), 4) if samples else None
    summary["cluster"] = cluster_estimate(bench, summary)
    summary["metrics"] = {k: [round(v, 6) for v in s] for k, s in metrics.items()}
    return summary


def _row(cells: Sequence[Any], widths: Sequence[int]) -> str:
    return "  ".join(str(c).rjust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def render_bench(summary: dict[str, Any], *, rows: int = 10) -> str:
    """Text report: the per-turn curve (sampled), totals, parser costs, cluster estimate."""
    n = summary["turns"]
    picks = sorted({max(0, round(i * (n - 1) / (rows - 1))) for i in range(rows)})
    widths = (6, 9, 10, 11, 10, 9)
    gym = summary["gym_ms"]
    lines = [
        f"rollout path: {summary['recipe']} ({n} turns, {summary['repeats']} repeats, "
        f"opening {summary['prelude_tokens']} tokens)",
        _row(("turn", "tokens", "full ms", "render ms", "incr ms", "gym ms"), widths),
    ]
    for i in picks:
        g = f"{gym[i - 1]:.2f}" if gym and i > 0 else "-"
        lines.append(
            _row(
                (
                    i + 1,
                    summary["prompt_tokens"][i],
                    f"{summary['full_ms'][i]:.2f}",
                    f"{summary['render_ms'][i]:.2f}",
                    f"{summary['incremental_ms'][i]:.3f}",
                    g,
                ),
                widths,
            )
        )
    lines.append(
        f"total: full {summary['full_total_s']:.2f} s, incremental "
        f"{summary['incremental_total_s']:.3f} s, ratio {summary['ratio']}x; growth exponent "
        f"(cumulative vs turns) full {summary['full_exponent']}, incremental "
        f"{summary['incremental_exponent']}, gym {summary['gym_exponent']}; full cost vs "
        f"prompt length {summary['full_context_exponent']}"
    )
    if summary["mismatched_turns"]:
        lines.append(
            f"incremental ids differ from the full re-tokenization at "
            f"{len(summary['mismatched_turns'])} turn(s), "
            f"first {summary['mismatched_turns'][0] + 1}"
        )
    lines.append("parser us/token (streaming / one-shot):")
    for label, cost in summary["parser_us_per_token"].items():
        tokens = summary["parser_tokens"][label]
        lines.append(
            f"  {label:>6} ({tokens} tokens): {cost['streaming']:.1f} / {cost['one_shot']:.2f}"
        )
    lines.append(
        f"  growth exponent: streaming {summary['parser_streaming_exponent']}, "
        f"one-shot {summary['parser_one_shot_exponent']}"
    )
    cluster = summary["cluster"]
    if "cpu_s_per_step" in cluster:
        step = cluster["cpu_s_per_step"]
        lines.append(
            f"cluster: {cluster['rollouts_per_step']} rollouts/step x {n} turns: "
            f"{step['as_served']} CPU-s/step as served ({FULL_PASSES_PER_CALL} full passes/call), "
            f"{step['incremental']} incremental"
        )
    return "\n".join(lines)


def verdict_rows(comparisons: Sequence[MetricComparison]) -> list[dict[str, Any]]:
    """JSON rows of the gate: value, baseline, largest passing value, verdict, and Result.

    The rows keep ``bench rollout --json``'s keys (``metric, current, baseline, bound,
    noise, relative, verdict``) and add each metric's Result as ``result``.
    """
    return [
        {
            "metric": c.metric,
            "current": c.current,
            "baseline": c.baseline,
            "bound": c.bound,
            "noise": c.noise,
            "relative": c.relative,
            "verdict": c.verdict,
            "result": c.result().to_json(),
        }
        for c in comparisons
    ]


def render_verdicts(results: Sequence[Result]) -> str:
    """The gate's Results as core's table, failures first."""
    return render_table(sorted(results, key=lambda r: r.outcome is not Outcome.FAIL))


def plot_bench(
    summary: dict[str, Any], path: str | Path, *, inputs: Iterable[str | Path] = ()
) -> Path:
    """Draw per-turn costs and parser costs per token to a PNG, atomically."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2))
    left, right = fig.subplots(1, 2)
    turns = range(1, summary["turns"] + 1)
    left.plot(turns, summary["full_ms"], label="full re-render + re-tokenize")
    left.plot(turns, summary["incremental_ms"], label="incremental append")
    if summary["gym_ms"]:
        left.plot(range(2, summary["turns"] + 1), summary["gym_ms"], label="Gym conversion")
    left.set(xlabel="turn", ylabel="CPU ms per model call", yscale="log")
    left.set_title(summary["recipe"], fontsize=8)
    left.legend()
    lengths = [summary["parser_tokens"][k] for k in summary["parser_us_per_token"]]
    for kind in ("streaming", "one_shot"):
        costs = [c[kind] for c in summary["parser_us_per_token"].values()]
        right.plot(lengths, costs, marker="o", label=kind.replace("_", "-"))
    right.set(xlabel="output tokens", ylabel="CPU us per token", xscale="log", yscale="log")
    right.set_title("parsing", fontsize=8)
    right.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    out = write_bytes_atomic(path, buffer.getvalue(), inputs=inputs)
    return out
