"""How reliably the corpus gate classifies each fault, over many corpus seeds.

    python benchmarks/bench_corpus_gate.py [--seeds 20]

For each seed, builds the whole fault-injection corpus (rlgate.testing.corpus: event files
written with torch's SummaryWriter, a fresh baseline and five fresh band references) and
runs the corpus recipe's gate on every fault. Prints, per fault, how often exactly the
expected checks were caught, and which checks misfired (false alarms on healthy data, or
misses). The unit test pins seed 0; this shows it is not a lucky seed. Asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

from rlgate.checks.plan import load_inputs, load_plan, run_gate
from rlgate.core.results import Outcome
from rlgate.testing.corpus import EXPECTED_CATCHES, Fault, build_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    exact: collections.Counter[Fault] = collections.Counter()
    extra: dict[Fault, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    missed: dict[Fault, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for seed in range(args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            corpus = build_corpus(Path(tmp) / "c", seed=seed * 100)
            plan = load_plan(corpus.recipe)
            for fault, run in corpus.runs.items():
                report = run_gate(
                    plan,
                    load_inputs(
                        plan, run, baseline=corpus.baseline, rollouts=corpus.rollouts["healthy"]
                    ),
                )
                caught = {r.name for r in report.results if r.outcome is not Outcome.PASS}
                expected = EXPECTED_CATCHES[fault]
                exact[fault] += caught == expected
                extra[fault].update(caught - expected)
                missed[fault].update(expected - caught)
        print(f"seed {seed * 100}: done", flush=True)
    print(f"\n{'fault':32s} exact   misfired (false alarm) / missed checks")
    for fault in Fault:
        notes = [f"+{k} x{v}" for k, v in extra[fault].items()] + [
            f"-{k} x{v}" for k, v in missed[fault].items()
        ]
        print(f"{fault.value:32s} {exact[fault]:3d}/{args.seeds:<3d} {', '.join(notes) or '-'}")
    healthy = sum(exact[f] for f in (Fault.HEALTHY, Fault.HEALTHY_NOISE, Fault.RESUMED))
    print(f"\nhealthy controls passing every check: {healthy}/{3 * args.seeds}")


if __name__ == "__main__":
    main()
