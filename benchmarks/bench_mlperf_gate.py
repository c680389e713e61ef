"""False-alarm and detection rates of the reference recipe's gate on the 18 real MLPerf runs.

    python benchmarks/bench_mlperf_gate.py [--mlperf-dir DIR]

Uses recipes/reference/grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml (its
GBS 512/1024 rows as overrides) on mlcommons/training's rcp_logs (6 seeds x GBS 256/512/1024):

* convergence: every run against its recipe (completion, reward, refit, finiteness);
* perf: every ordered same-GBS seed pair (candidate vs baseline) -> false alarms; the same
  pairs with the candidate's step time x1.2 / x1.5 (and tokens/s / 1.5) -> detection;
* band: leave-one-out with N = 3, 4, 5 reference seeds (all subsets) -> acceptance of the
  held-out run, rejection of it with the reward flattened (frozen at its first-third mean)
  and with the step time x1.5.

Prints tables; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
from pathlib import Path

from rlgate.checks.kinds.band import BandSpec
from rlgate.checks.plan import GateInputs, evaluate_check, load_plan, run_gate
from rlgate.core.results import Outcome
from rlgate.runs.metrics import load_mlperf_log
from rlgate.testing.perturb import flatten_series, scale_series

REPO = Path(__file__).resolve().parents[1]
RECIPE = (
    REPO / "recipes" / "reference" / "grpo-qwen3.5-397ba17b-64n4g-megatron-async-r2egym-mlperf.yaml"
)
OVERRIDES = {
    256: [],
    512: ["grpo.num_prompts_per_step=32", "grpo.max_num_steps=20"],
    1024: ["grpo.num_prompts_per_step=64", "grpo.max_num_steps=10"],
}
STEP, TPS, REWARD = (
    "timing/train/total_step_time",
    "timing/train/valid_tokens_per_sec_per_gpu",
    "train/reward",
)


def rate(hits: int, total: int) -> str:
    return f"{hits:3d}/{total:<3d} ({hits / total:6.1%})"


def report_convergence(runs, plans) -> None:
    print("convergence checks, each run vs its recipe (no baseline/band):")
    for g, plan in plans.items():
        reports = [run_gate(plan, GateInputs(run=run)) for run in runs[g]]
        bad = {r.name for rep in reports for r in rep.results if r.outcome is not Outcome.PASS}
        passed = sum(rep.passed for rep in reports)
        print(f"  GBS {g:4d}: {passed}/6 runs pass; failing checks: {sorted(bad) or 'none'}")


def perf_counts(plan, runs) -> tuple[int, int, int, int, int]:
    checks = {c.metric: c for c in plan.checks if c.name.startswith("perf:")}
    fa = s12 = s15 = t15 = n = 0
    for a, b in itertools.permutations(range(6), 2):
        cand, base = runs[a], runs[b]

        def fails(candidate, metric, base=base) -> bool:
            inputs = GateInputs(run=candidate, baseline=base)
            return evaluate_check(plan, checks[metric], inputs).outcome is not Outcome.PASS

        fa += fails(cand, STEP) + fails(cand, TPS)
        s12 += fails(scale_series(cand, STEP, 1.2), STEP)
        s15 += fails(scale_series(cand, STEP, 1.5), STEP)
        t15 += fails(scale_series(cand, TPS, 1 / 1.5), TPS)
        n += 1
    return fa, s12, s15, t15, n


def report_perf(runs, plans) -> None:
    print("\nperf, ordered same-GBS seed pairs (2 metrics each):")
    print("  GBS   false alarms     step x1.2 caught   step x1.5 caught   tok/s /1.5 caught")
    totals = [0, 0, 0, 0, 0]
    for g, plan in plans.items():
        fa, s12, s15, t15, n = counts = perf_counts(plan, runs[g])
        totals = [x + y for x, y in zip(totals, counts, strict=True)]
        print(f"  {g:4d}  {rate(fa, 2 * n)}  {rate(s12, n)}     {rate(s15, n)}     {rate(t15, n)}")
    fa, s12, s15, t15, n = totals
    print(f"  all   {rate(fa, 2 * n)}  {rate(s12, n)}     {rate(s15, n)}     {rate(t15, n)}")


def band_counts(plan, runs, n_ref: int) -> tuple[int, int, int, int]:
    band = plan.gate.band or BandSpec()
    gate = plan.gate.model_copy(update={"band": band.model_copy(update={"min_runs": n_ref})})
    p = dataclasses.replace(plan, gate=gate)
    checks = [c for c in p.checks if c.name.startswith("band_")]
    acc = flat = slow = total = 0
    for held in range(6):
        others = [runs[i] for i in range(6) if i != held]
        for refs in itertools.combinations(others, n_ref):

            def ok(candidate, refs=refs) -> bool:
                inputs = GateInputs(run=candidate, band_runs=tuple(refs))
                return all(evaluate_check(p, c, inputs).outcome is Outcome.PASS for c in checks)

            acc += ok(runs[held])
            flat += not ok(flatten_series(runs[held], REWARD))
            slow += not ok(scale_series(runs[held], STEP, 1.5))
            total += 1
    return acc, flat, slow, total


def report_band(runs, plans) -> None:
    print("\nreference band, leave-one-out (held-out run vs N reference seeds, all subsets):")
    print("  N  GBS   accepted           flat reward rejected  step x1.5 rejected")
    for n_ref in (3, 4, 5):
        for g, plan in plans.items():
            acc, flat, slow, total = band_counts(plan, runs[g], n_ref)
            print(
                f"  {n_ref}  {g:4d}  {rate(acc, total)}  {rate(flat, total)}    {rate(slow, total)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("RLGATE_MLPERF_DIR", REPO.parent / "shared" / "mlperf-qwen35-grpo-rcp")
    parser.add_argument("--mlperf-dir", type=Path, default=Path(default))
    args = parser.parse_args()
    runs = {
        g: [load_mlperf_log(args.mlperf_dir / f"GBS{g}" / f"seed_{s}.out") for s in range(1, 7)]
        for g in OVERRIDES
    }
    plans = {g: load_plan(RECIPE, overrides=OVERRIDES[g]) for g in OVERRIDES}
    report_convergence(runs, plans)
    report_perf(runs, plans)
    report_band(runs, plans)


if __name__ == "__main__":
    main()
