"""A GPU-free stand-in for NeMo RL's ``run_grpo_nemo_gym.py``, for launcher smoke tests.

It takes the same command line (``--config FILE`` plus Hydra overrides), loads the config
with :func:`rlgate.recipe.load.load_recipe` the way the real entry point resolves it (the
``rlgate:`` block's check sections, which NeMo RL never reads, are not validated), and writes a
healthy async SWE run's TensorBoard events into ``<logger.log_dir>/exp_NNN/tensorboard/``
with NeMo RL's tag names (:func:`rlgate.testing.corpus.write_run`). Options before
``--config`` inject the ways a real run ends badly::

    python -m rlgate.testing.standin [--stop-at-step K] [--exit-code N] [--fail-with TEXT]
        [--seconds S] [--hang] [--fault-file PATH]
        --config RECIPE grpo.max_num_steps=N logger.log_dir=DIR ...

``--hang`` wedges the run after its last step (it sleeps until killed), as an async run
stuck on a straggler rollout does. ``--fault-file PATH`` (relative to the working directory,
i.e. the NeMo RL checkout the launcher runs from) names a corpus fault
(:class:`rlgate.testing.corpus.Fault`, e.g. ``reward_flat``) to write instead of a healthy
run when the file exists: a commit of a test repository that adds it plants a regression
(``rlgate bisect``'s tests). ``--fail-file PATH`` likewise: when it exists, the run writes no
step, prints the file's first line to stderr (e.g. an infrastructure signature such as
``torch.OutOfMemoryError: CUDA out of memory``) and exits 1.

Use it as ``rlgate launch RECIPE --entrypoint "python -m rlgate.testing.standin"`` to check a
site's launch -> watch -> check-run plumbing (container, mounts, log paths) without GPUs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rlgate.recipe.load import load_recipe
from rlgate.testing.corpus import Fault, Profile, write_run

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse NeMo RL's command line, write the run's events, exit like the run would."""
    parser = argparse.ArgumentParser(prog="python -m rlgate.testing.standin")
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--stop-at-step", type=int, help="write only this many steps")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--fail-with", help="print this line to stderr before exiting")
    parser.add_argument("--seconds", type=float, default=0.0, help="sleep before writing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hang", action="store_true", help="after the steps, sleep until killed")
    parser.add_argument("--fault-file", type=Path, help="a file naming a corpus Fault, if present")
    parser.add_argument("--fail-file", type=Path, help="if present: its line to stderr, exit 1")
    args, overrides = parser.parse_known_args(argv)
    recipe = load_recipe(args.config, overrides)
    target = recipe.facts.grpo.max_num_steps or 0
    log_dir = Path(str(recipe.facts.logger.log_dir))
    steps = min(target, args.stop_at_step) if args.stop_at_step is not None else target
    if args.fail_file is not None and args.fail_file.is_file():
        lines = args.fail_file.read_text().splitlines()
        args.fail_with, args.exit_code, steps = (lines[0] if lines else "failed"), 1, 0
    print(f"stand-in for run_grpo_nemo_gym.py: {recipe.name}, {steps}/{target} steps -> {log_dir}")
    sys.stdout.flush()
    time.sleep(args.seconds)
    fault = Fault.HEALTHY
    if args.fault_file is not None and args.fault_file.is_file():
        fault = Fault(args.fault_file.read_text().strip())
    if steps > 0:
        write_run(log_dir, fault, seed=args.seed, profile=replace(Profile(), steps=steps))
    for step in range(1, steps + 1):
        print(f"========================= Step {step}/{target} =========================")
    sys.stdout.flush()
    while args.hang:
        time.sleep(3600)
    if args.fail_with:
        print(args.fail_with, file=sys.stderr)
    return args.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
