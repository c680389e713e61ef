"""Benchmark rlgate's TensorBoard reader against tensorboard's EventAccumulator.

    python benchmarks/bench_metrics_reader.py [--tags 300] [--steps 3000] [--files 2]

Writes a large NeMo RL-shaped run (``--tags`` scalar tags x ``--steps`` steps, split over
``--files`` ``exp_NNN/tensorboard`` dirs like a resumed run) with torch's SummaryWriter
into a temp dir, then in the same process times:

* rlgate: ``rlgate.metrics.load_run`` (framing + every header/payload CRC32C verified +
  Event decoding + merging);
* baseline: what NeMo RL's ``tests/json_dump_tb_logs.py`` does: one
  ``EventAccumulator(size_guidance={SCALARS: 0, TENSORS: 0})`` per file, ``Reload()``,
  then every scalar of every tag, merged later-file-wins.

Prints both times and the ratio, and checks the outputs are identical. Asserts nothing
about time (never a timed assertion).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np


def write_run(root: Path, tags: int, steps: int, files: int) -> int:
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(0)
    names = [f"train/metric_{i:03d}/mean" for i in range(tags)]
    bounds = np.linspace(0, steps, files + 1).astype(int)
    for k in range(files):
        writer = SummaryWriter(
            log_dir=str(root / f"exp_{k + 1:03d}" / "tensorboard"), max_queue=100_000
        )
        for step in range(bounds[k] + 1, bounds[k + 1] + 1):
            values = rng.normal(size=tags)
            for name, value in zip(names, values, strict=True):
                writer.add_scalar(name, float(value), step)
        writer.close()
    return tags * steps


def accumulator_dump(root: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    out: dict[str, dict[int, float]] = {}
    for f in sorted(root.glob("**/events*tfevents*"), key=lambda p: p.stat().st_mtime):
        acc = ea.EventAccumulator(str(f), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        for tag in acc.scalars.Keys():
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", type=int, default=300)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--files", type=int, default=2)
    args = parser.parse_args()

    from rlgate.metrics import load_run  # imported before timing: import cost is not reading cost

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        events = write_run(root, args.tags, args.steps, args.files)
        size = sum(f.stat().st_size for f in root.rglob("*tfevents*"))
        print(
            f"wrote {events:,} scalar events ({size / 1e6:.1f} MB, {args.files} files) "
            f"in {time.perf_counter() - t0:.1f} s"
        )

        t0 = time.perf_counter()
        run = load_run(root)
        ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref = accumulator_dump(root)
        theirs = time.perf_counter() - t0

        same = all(
            len(ref[tag]) == len(run.series[tag])
            and all(
                v == run.series[tag].value_at(s)
                or (math.isnan(v) and math.isnan(run.series[tag].value_at(s)))
                for s, v in ref[tag].items()
            )
            for tag in ref
        )
        rate = events / ours / 1e6
        print(f"rlgate load_run:            {ours:7.2f} s  ({rate:.2f} M events/s, CRCs verified)")
        print(
            f"EventAccumulator + Reload:  {theirs:7.2f} s  ({events / theirs / 1e6:.2f} M events/s)"
        )
        print(f"speed-up: {theirs / ours:.1f}x   outputs identical: {same}")


if __name__ == "__main__":
    main()
