"""Change-point detection on nightly histories with real run-to-run noise (``history changes``).

    python benchmarks/bench_changes.py [--mlperf-dir DIR] [--trials N] [--seed S]

Noise: the seed spread of the 18 real MLPerf runs (mlcommons/training rcp_logs, 6 seeds x GBS
256/512/1024): per run its mean reward and its mean steady-state step time (step 1 is a
warm-up), as a ratio to the mean of its GBS's six seeds (scaled by sqrt(6/5) for that mean);
a simulated nightly is its level times one of those 18 ratios, drawn with replacement.

Histories: ``NIGHTLIES`` nightlies; from nightly ``ONSET`` on, the metric gets worse (step
time up, reward down) by a planted step of 2, 5 or 10 %, or by a slow drift (1 or 3 % per
week, one nightly a day); "flat" plants nothing. Each method is run online: at every nightly
from ``FIRST`` on, on the values so far, and a change it flags at a nightly no earlier flag
was within 3 of is a new alarm. Per method and history kind:

* detection rate: the histories with a new alarm at or after the onset (at a nightly no more
  than 3 before it), delay: nightlies from the onset to that alarm (median);
* false alarms per 100 nightlies: new alarms at nightlies before the onset - 3 (and all of
  a flat history's), per 100 nightlies judged before the onset.

Methods:

* ``fixed``: today's fixed bound, a recipe band's (``checks.perf.build_band``, the MLPerf
  recipe's alpha 0.01 on the mean): from the first 5 nightlies (the promoted band), a value
  beyond mean -/+ t_{0.99,4} * sqrt(1 + 1/5) * sd in the bad direction fails its nightly;
* ``ttest``: Perfherder-style: at each nightly i, Welch's t (scipy) between the 12 values
  before i and the up to 12 from i (at least 3), an alert at a local maximum of |t| with
  |t| >= 7 (Perfherder's threshold) and a change of the means >= 2 %;
* ``otava``: ``rlgate.history.changes.detect`` (Apache Otava's E-Divisive, p < 0.001,
  min magnitude 1 %), as ``rlgate history changes`` runs it.

Prints one table per metric; asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy import stats

from rlgate.history.changes import detect
from rlgate.runs.metrics import load_mlperf_log

REPO = Path(__file__).resolve().parents[1]
NIGHTLIES = 48
ONSET = 24
FIRST = 10
BAND = 5
NEAR = 3
KINDS: dict[str, tuple[str, float]] = {
    "flat": ("flat", 0.0),
    "step 2 %": ("step", 0.02),
    "step 5 %": ("step", 0.05),
    "step 10 %": ("step", 0.10),
    "drift 1 %/wk": ("drift", 0.01 / 7),
    "drift 3 %/wk": ("drift", 0.03 / 7),
}


def mlperf_noise(root: Path) -> dict[str, np.ndarray]:
    """Per metric, the 18 runs' ratios to their GBS mean (``reward``, ``step_time``)."""
    out: dict[str, list[float]] = {"reward": [], "step_time": []}
    for gbs in (256, 512, 1024):
        per: dict[str, list[float]] = {"reward": [], "step_time": []}
        for seed in range(1, 7):
            run = load_mlperf_log(root / f"GBS{gbs}" / f"seed_{seed}.out")
            per["reward"].append(float(np.mean(run.series["train/reward"].values)))
            step = run.series["timing/train/total_step_time"].values[1:]
            per["step_time"].append(float(np.mean(step)))
        for k, v in per.items():
            a = np.asarray(v)
            out[k] += list((a / a.mean() - 1.0) * math.sqrt(len(a) / (len(a) - 1)))
    return {k: np.asarray(v) for k, v in out.items()}


def history(kind: str, size: float, worse: int, noise: np.ndarray, rng) -> np.ndarray:
    """One simulated history of a metric at level 1 (``worse``: +1 step time, -1 reward)."""
    level = np.ones(NIGHTLIES)
    after = np.arange(NIGHTLIES) >= ONSET
    if kind == "step":
        level[after] += worse * size
    elif kind == "drift":
        level[after] += worse * size * (np.arange(NIGHTLIES)[after] - ONSET + 1)
    return level * (1.0 + rng.choice(noise, NIGHTLIES))


Alarms = Callable[[np.ndarray, int], list[int]]


def fixed(worse: int) -> Alarms:
    """Today's band bound from the first BAND nightlies: the nightly itself, if beyond it."""

    def run(x: np.ndarray, worse_: int = worse) -> list[int]:
        band = x[:BAND]
        half = stats.t.ppf(0.99, BAND - 1) * math.sqrt(1 + 1 / BAND) * np.std(band, ddof=1)
        bound = band.mean() + worse_ * half
        return [len(x) - 1] if worse_ * (x[-1] - bound) > 0 else []

    return lambda x, _w: run(x)


def ttest(x: np.ndarray, _worse: int) -> list[int]:
    """Perfherder-style sliding Welch t-test: back 12, fore up to 12 (at least 3)."""
    back, fore, min_fore, threshold, min_change = 12, 12, 3, 7.0, 0.02
    ts = np.zeros(len(x))
    for i in range(back, len(x) - min_fore + 1):
        jw, kw = x[i - back : i], x[i : i + fore]
        t = stats.ttest_ind(kw, jw, equal_var=False).statistic
        change = abs(kw.mean() / jw.mean() - 1.0)
        ts[i] = abs(t) if math.isfinite(t) and change >= min_change else 0.0
    return [
        i for i in range(len(x)) if ts[i] >= threshold and ts[i] == ts[max(0, i - 3) : i + 4].max()
    ]


def otava(x: np.ndarray, _worse: int) -> list[int]:
    """``rlgate history changes``'s detector."""
    return [index for index, *_ in detect(list(x))]


def evaluate(method: Alarms, x: np.ndarray, worse: int, planted: bool):
    """(detected at, false alarms, nightlies judged before onset) of one online run."""
    flagged: list[int] = []
    false, found = 0, None
    for t in range(FIRST, NIGHTLIES):
        for index in method(x[: t + 1], worse):
            if any(abs(index - f) <= NEAR for f in flagged):
                continue
            flagged.append(index)
            if planted and index >= ONSET - NEAR:
                if found is None and t >= ONSET:
                    found = t
            else:
                false += 1
    judged = NIGHTLIES - FIRST if not planted else ONSET - NEAR - FIRST
    return found, false, judged


def run(noise: dict[str, np.ndarray], trials: int, seed: int) -> None:
    """Print the tables."""
    for metric, worse in (("step_time", +1), ("reward", -1)):
        sd = float(np.std(noise[metric], ddof=1))
        print(f"\n{metric}: run-to-run sd {sd * 100:.2f} % (18 MLPerf runs), {trials} histories")
        methods: dict[str, Alarms] = {"fixed": fixed(worse), "ttest": ttest, "otava": otava}
        rows: dict[str, dict[str, tuple[float, float | None, float]]] = {}
        for name, method in methods.items():
            rows[name] = {}
            for kind, (shape, size) in KINDS.items():
                rng = np.random.default_rng(seed)
                hits, delays, false, judged = 0, [], 0, 0
                for _ in range(trials):
                    x = history(shape, size, worse, noise[metric], rng)
                    found, f, j = evaluate(method, x, worse, planted=shape != "flat")
                    false, judged = false + f, judged + j
                    if found is not None:
                        hits += 1
                        delays.append(found - ONSET)
                delay = float(np.median(delays)) if delays else None
                rows[name][kind] = (hits / trials, delay, 100.0 * false / judged)
        print(f"  {'method':7} {'history':14} {'detected':>9} {'delay':>6} {'FA/100':>7}")
        for name in methods:
            for kind in KINDS:
                rate, delay, fa = rows[name][kind]
                shown = "-" if delay is None else f"{delay:.0f}"
                det = "-" if kind == "flat" else f"{rate * 100:.0f} %"
                print(f"  {name:7} {kind:14} {det:>9} {shown:>6} {fa:7.2f}")
        planted = [k for k in KINDS if k != "flat"]

        def pooled(name: str, rows=rows, planted=planted) -> tuple[float, float]:
            rate = float(np.mean([rows[name][k][0] for k in planted]))
            return rate, float(np.mean([rows[name][k][2] for k in KINDS]))

        base_rate, base_fa = pooled("fixed")
        print("  pooled over the planted histories (detection) and all (false alarms / 100):")
        for name in methods:
            rate, fa = pooled(name)
            ratio = f"{rate / base_rate:.2f}x fixed" if base_rate else "fixed detects none"
            fa_ratio = f"{fa / base_fa:.2f}x fixed" if base_fa else "fixed raises none"
            print(f"    {name:7} detected {rate * 100:5.1f} % ({ratio}), "
                  f"false alarms {fa:.2f} ({fa_ratio})")  # fmt: skip


def main() -> None:
    """Entry point."""
    default = os.environ.get("RLGATE_MLPERF_DIR", REPO.parent / "shared" / "mlperf-qwen35-grpo-rcp")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlperf-dir", type=Path, default=Path(default))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    noise = mlperf_noise(args.mlperf_dir)
    start = time.perf_counter()
    run(noise, args.trials, args.seed)
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
