"""Benchmark the functional tier: its wall and CPU time against importing vLLM, in one run.

    RLGATE_TOKENIZERS=../shared/tokenizers python benchmarks/bench_functional.py [--profile]
        [--against OTHER/src]

Runs, as subprocesses of this interpreter and in this order:

* ``python -c "import vllm.tool_parsers"`` (the named baseline: what any process that uses
  vLLM's real parsers pays before it parses anything; ``import vllm`` costs the same, since
  ``vllm/__init__`` imports torch through ``vllm.env_override``);
* ``python -m pytest -m functional`` on the shipped tier (``rlgate/data/functional``) with
  ``--junitxml``, offline.

Prints each one's wall and CPU (user + system) seconds and the ratio tier/baseline: on a
machine shared with other jobs the wall time is noisy, the CPU time and the ratio much
less. With ``--against SRC`` (another checkout's ``src``, e.g. main's) that tree's shipped
tier runs too, in the same run and before this one, and the ratio this/that is printed with
whether both JUnit files hold the same testcases with the same outcomes (before/after).
With ``--profile`` the tier runs again under cProfile and the breakdown is printed
(imports: ``-X importtime``, a fraction of that run's wall; the rest: cProfile) as
fractions of the tier's profiled time (imports, tokenizer loads, template renders, replays,
recipe loads and checks, nemo-gym code); the categories overlap (a check renders templates).
Asserts nothing; exits 1 if the tier fails.
"""

from __future__ import annotations

import argparse
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import rlgate

TIER = Path(rlgate.__file__).parent / "data" / "functional"
TARGET_S = 20.0
BASELINE = "import vllm.tool_parsers"


def timed(cmd: list[str], src: Path | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system of the child) and exit code of ``cmd``.

    ``src``: the folder holding the ``rlgate`` package the child imports (``PYTHONPATH``).
    """
    env = dict(os.environ, PYTHONPATH=str(src)) if src is not None else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0,):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-2000:])
    return wall, cpu, proc.returncode


def tier_command(junit: Path, *prefix: str, tier: Path = TIER) -> list[str]:
    return [
        sys.executable,
        *prefix,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "functional",
        str(tier),
        "--junitxml",
        str(junit),
    ]


CATEGORIES: dict[str, Callable[[tuple[str, int, str]], bool]] = {
    "tokenizer loads": lambda k: k[2] == "from_pretrained" or k[2] == "from_file",
    "template renders": lambda k: k[0].endswith("serving/templates.py") and k[2] == "render",
    "contiguity replays": lambda k: k[0].endswith("contiguity.py") and k[2] == "replay",
    "parser parses": lambda k: k[0].endswith("serving/parsers.py") and k[2].startswith("parse"),
    "recipe loads": lambda k: k[0].endswith("recipe/load.py") and k[2] == "load_recipe",
    "recipe checks": lambda k: k[0].endswith("checks/recipe.py") and k[2] == "check_recipe",
    "YAML parses": lambda k: k[0].endswith("yaml/__init__.py") and k[2] == "load",
    "nemo-gym code": lambda k: "nemo_gym" in k[0] or "responses_api_" in k[0],
}


def breakdown(profile: Path) -> tuple[float, dict[str, float]]:
    """Profiled total and, per category, the time spent in it (outermost calls only)."""
    stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    total = max(v[3] for v in stats.values())
    out = {}
    for name, match in CATEGORIES.items():
        out[name] = sum(
            c[3]
            for k, v in stats.items()
            if match(k)
            for caller, c in v[4].items()
            if not match(caller)
        )
    return total, out


def import_seconds(stderr: str) -> dict[str, float]:
    """Seconds of outermost imports per top-level package, from ``-X importtime`` output."""
    out: dict[str, float] = {}
    for line in stderr.splitlines():
        head, _, name = line.partition("|")[2].partition("|")
        outermost = name.startswith(" ") and not name.startswith("  ")
        if line.startswith("import time:") and head.strip().isdigit() and outermost:
            pkg = name.strip().split(".")[0]
            out[pkg] = out.get(pkg, 0.0) + int(head.strip()) / 1e6
    return out


def outcomes(junit: Path) -> dict[str, str]:
    """Each testcase id of a JUnit file and its outcome (passed, failure, error, skipped)."""
    import xml.etree.ElementTree as ET

    found = {}
    for case in ET.parse(junit).iter("testcase"):
        kinds = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        found[f"{case.get('classname')}::{case.get('name')}"] = kinds[0] if kinds else "passed"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", action="store_true", help="also print the breakdown")
    parser.add_argument(
        "--against", type=Path, metavar="SRC", help="another tree's src/ to run first (before)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
    if not os.environ.get("RLGATE_TOKENIZERS"):
        parser.error("set RLGATE_TOKENIZERS to the tokenizer root")
    if args.against is not None and not (args.against / "rlgate" / "data" / "functional").is_dir():
        parser.error(f"--against {args.against}: no rlgate/data/functional under it")
    here = Path(rlgate.__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        base = timed([sys.executable, "-c", BASELINE])
        print(f"{'what':48s} {'wall s':>8s} {'cpu s':>8s}")
        print(f"{'baseline: python -c ' + repr(BASELINE):48s} {base[0]:8.1f} {base[1]:8.1f}")
        if args.against is not None:
            other_tier = args.against.resolve() / "rlgate" / "data" / "functional"
            cmd = tier_command(Path(tmp) / "against.xml", tier=other_tier)
            other = timed(cmd, args.against.resolve())
            print(f"{'functional tier of --against (before)':48s} {other[0]:8.1f} {other[1]:8.1f}")
        tier = timed(tier_command(Path(tmp) / "functional.xml"), here)
        print(f"{'functional tier (pytest -m functional)':48s} {tier[0]:8.1f} {tier[1]:8.1f}")
        print(
            f"tier / baseline: wall {tier[0] / base[0]:.2f}x, cpu {tier[1] / base[1]:.2f}x; "
            f"target: tier <= {TARGET_S:.0f} s wall on 2 cores"
        )
        if args.against is not None:
            same = outcomes(Path(tmp) / "against.xml") == outcomes(Path(tmp) / "functional.xml")
            print(
                f"tier / --against: wall {tier[0] / other[0]:.2f}x, cpu {tier[1] / other[1]:.2f}x; "
                f"same testcases and outcomes: {'yes' if same else 'NO'}"
            )
        if args.profile:
            prof = Path(tmp) / "tier.prof"
            timed(tier_command(Path(tmp) / "p.xml", "-m", "cProfile", "-o", str(prof)), here)
            start = time.perf_counter()
            cmd = tier_command(Path(tmp) / "i.xml", "-X", "importtime")
            env = dict(os.environ, PYTHONPATH=str(here))
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            wall = time.perf_counter() - start
            imports = import_seconds(proc.stderr)
            top = sorted(imports.items(), key=lambda kv: -kv[1])[:6]
            print(
                f"imports (-X importtime): {sum(imports.values()) / wall:.1%} of the tier's "
                f"{wall:.1f} s wall; " + ", ".join(f"{k} {v / wall:.1%}" for k, v in top)
            )
            total, parts = breakdown(prof)
            print(f"profile (cProfile, {total:.1f} s profiled; categories overlap):")
            for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
                print(f"  {seconds / total:6.1%}  {name}")
    return 0 if tier[2] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
