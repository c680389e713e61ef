"""Benchmark rlgate's TensorBoard reader: speed vs tensorboard's EventAccumulator, and memory.

    python benchmarks/bench_metrics_reader.py [--tags 300] [--steps 3000] [--files 2]
        [--image-mb 4] [--skip-accumulator]

Two scenarios, each written with torch's SummaryWriter into a temp dir:

1. **many records**: a NeMo RL-shaped run, ``--tags`` scalar tags x ``--steps`` steps, split
   over ``--files`` ``exp_NNN/tensorboard`` dirs like a resumed run. Timed in the same
   process:

   * rlgate: ``rlgate.runs.metrics.load_run`` (framing + every header/payload CRC32C verified +
     Event decoding — numpy for torch's canonical ``add_scalar`` records, protobuf for the
     rest — + merging);
   * baseline: what NeMo RL's ``tests/json_dump_tb_logs.py`` does: one
     ``EventAccumulator(size_guidance={SCALARS: 0, TENSORS: 0})`` per file, ``Reload()``,
     then every scalar of every tag, merged later-file-wins.

2. **one large record**: an event file holding a few scalars and one ``add_image`` of
   about ``--image-mb`` MB (random pixels, so PNG does not shrink it); time per MB.

Memory: the peak of Python/numpy allocations during ``load_run`` (``tracemalloc``, in a
second pass, since tracing slows allocation down), printed next to the file size and the
size of what is kept (16 bytes per kept scalar: int64 step + float64 value).

Prints times, ratios and peaks, and checks the outputs are identical. Asserts nothing about
time or memory (never a timed assertion).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def write_image_run(root: Path, megabytes: float) -> None:
    from torch.utils.tensorboard import SummaryWriter

    side = int(math.sqrt(megabytes * 1e6 / 3))
    pixels = np.random.default_rng(1).integers(0, 256, (3, side, side), dtype=np.uint8)
    writer = SummaryWriter(log_dir=str(root / "exp_001" / "tensorboard"))
    writer.add_scalar("train/loss", 0.5, 1)
    writer.add_image("train/token_mult_prob_error_plot_sample", pixels, 1)
    writer.add_scalar("train/loss", 0.4, 2)
    writer.close()


def accumulator_dump(root: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing import event_accumulator as ea

    out: dict[str, dict[int, float]] = {}
    for f in sorted(root.glob("**/events*tfevents*"), key=lambda p: p.stat().st_mtime):
        acc = ea.EventAccumulator(str(f), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        for tag in acc.scalars.Keys():
            out.setdefault(tag, {}).update({e.step: e.value for e in acc.Scalars(tag)})
    return out


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def peak_mb(fn: Callable[[], Any]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def same_as(ref: dict[str, dict[int, float]], run: Any) -> bool:
    return all(
        len(ref[tag]) == len(run.series[tag])
        and all(
            v == run.series[tag].value_at(s)
            or (math.isnan(v) and math.isnan(run.series[tag].value_at(s)))
            for s, v in ref[tag].items()
        )
        for tag in ref
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tags", type=int, default=300)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--image-mb", type=float, default=4.0)
    parser.add_argument("--skip-accumulator", action="store_true")
    args = parser.parse_args()

    from rlgate.runs import tfrecord
    from rlgate.runs.metrics import (
        load_run,  # imported before timing: import cost is not reading cost
    )

    crc = "google-crc32c (C)" if tfrecord._C_EXTEND is not None else "numpy"
    print(f"CRC-32C of long records: {crc}; of many short ones: numpy, a block at a time")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "many"
        events = write_run(root, args.tags, args.steps, args.files)
        size = sum(f.stat().st_size for f in root.rglob("*tfevents*")) / 1e6
        print(f"[many records] {events:,} scalar events, {size:.1f} MB in {args.files} files")
        run, ours = timed(lambda: load_run(root))
        print(f"  rlgate load_run:           {ours:7.2f} s  ({events / ours / 1e6:.2f} M events/s)")
        if not args.skip_accumulator:
            ref, theirs = timed(lambda: accumulator_dump(root))
            print(f"  EventAccumulator + Reload: {theirs:7.2f} s")
            print(f"  speed-up: {theirs / ours:.1f}x   outputs identical: {same_as(ref, run)}")
        del run
        kept = events * 16 / 1e6
        peak = peak_mb(lambda: load_run(root))
        print(
            f"  memory: peak {peak:.1f} MB traced = {peak / size:.2f}x the files "
            f"({size:.1f} MB), {peak / kept:.2f}x what is kept ({kept:.1f} MB)"
        )

        image = Path(tmp) / "image"
        write_image_run(image, args.image_mb)
        size = sum(f.stat().st_size for f in image.rglob("*tfevents*")) / 1e6
        print(f"[one large record] {size:.1f} MB event file (one image + 2 scalars)")
        run, ours = timed(lambda: load_run(image))
        print(f"  rlgate load_run:           {ours:7.2f} s  ({ours / size:.3f} s per MB)")
        if not args.skip_accumulator:
            ref, theirs = timed(lambda: accumulator_dump(image))
            print(f"  EventAccumulator + Reload: {theirs:7.2f} s")
            print(f"  speed-up: {theirs / ours:.1f}x   outputs identical: {same_as(ref, run)}")
        peak = peak_mb(lambda: load_run(image))
        print(f"  memory: peak {peak:.1f} MB traced = {peak / size:.2f}x the file")


if __name__ == "__main__":
    main()
