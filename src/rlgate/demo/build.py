"""The bundled demo: ``rlgate report --demo --out DIR`` builds a whole release report here.

What runs, in about a minute on 2 cores:

1. the **functional tier for real**: its test modules and conftest ship in the package
   (:data:`rlgate.core.resources.FUNCTIONAL_TIER`, ``tests/functional/`` of the repository,
   over the bundled recipes :data:`~rlgate.core.resources.RECIPES`) and run with
   ``python -m pytest`` in a subprocess -- real vLLM parsers, tokenizers, templates and
   nemo-gym code -- writing ``functional.xml``. The run is the same from a wheel and from a
   checkout (:func:`functional_command`: no project config, rootdir the bundle's folder, so
   its JUnit classnames read ``functional.<module>``). Without a tokenizer root
   (``--tokenizers`` / ``RLGATE_TOKENIZERS``) it does not run, and the report says so and
   is INCOMPLETE, never GO;
2. meanwhile, **generated demo runs**: a healthy run, a baseline and five band runs of the
   fault corpus's recipe (:mod:`rlgate.testing.corpus`, TensorBoard writer, NeMo RL tag
   names) plus healthy Gym rollouts, gated with :mod:`rlgate.checks.plan` into ``run.json`` /
   ``run.xml``;
3. **generated demo SWE results**: four seeds per arm as per-instance maps over the 500
   Verified ids (the dataset ``RLGATE_SWE_DATASET`` names, else the bundled id list, see
   ``rlgate/data/README.md``), gated with :mod:`rlgate.swe.compare` into ``swe.json`` /
   ``swe.xml``;
4. a **demo nightly history** (:mod:`rlgate.demo.history`): 30 generated main-branch
   nightlies labelled DEMO, gated by the same checks, with a regression, a flaky check and
   an infra failure planted, recorded in ``DIR/demo-inputs/history.db`` (SQLite, the
   ``[history]`` extra) so the report shows its triage section and trends; the newest
   nightly's Results also go to ``DIR/demo-inputs/latest-nightly.xml`` (try ``rlgate triage
   --candidate`` on it with ``--db`` that file and ``--hardware demo-2x8``);
5. the report (:mod:`rlgate.report.build`), labelled DEMO in its title, sentence and plots.

Invariants: generated inputs live in ``DIR/demo-inputs/``, which carries a marker and is
replaced on every run (a ``demo-inputs`` folder without the marker, or a symbolic link
standing for the folder or its marker, is never touched); the
demo is deterministic for a given seed; nothing outside ``DIR`` is written (the functional
subprocess runs in ``DIR/demo-inputs`` with ``-p no:cacheprovider`` and
``PYTHONDONTWRITEBYTECODE=1``); nothing is read from a source checkout.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rlgate.core.commands import Command, command
from rlgate.core.errors import RlgateError
from rlgate.core.io import remove_tree, write_json_atomic, write_text_atomic
from rlgate.core.progress import Progress, no_progress
from rlgate.core.resources import BUNDLED_TIER, FUNCTIONAL_TIER, bundled_tier_values
from rlgate.demo.history import (
    DEMO_BRANCH,
    demo_history,
    record_demo_history,
    write_nightly_junit,
)
from rlgate.demo.swe import (  # noqa: F401  (names of the demo, re-exported)
    BUNDLED_INSTANCES,
    DEMO_RECIPE,
    SWE_SEEDS,
    find_swe_dataset,
    write_demo_swe,
)

if TYPE_CHECKING:
    from rlgate.report.build import ReleaseReport

__all__ = [
    "DemoResult",
    "find_swe_dataset",
    "functional_command",
    "functional_tier_command",
    "run_demo",
    "write_demo_swe",
]

logger = logging.getLogger(__name__)

INPUTS = "demo-inputs"
INPUTS_MARKER = ".rlgate-demo-inputs"
HISTORY_DB = "history.db"  # the demo's nightly history (SQLite), in DIR/demo-inputs/
LATEST_NIGHTLY = "latest-nightly.xml"  # its newest nightly's Results, as JUnit
# The corpus recipe, named in NeMo RL's convention (its stem is the run's recipe id).
FUNCTIONAL_TIMEOUT_S = 900
DEMO_STEPS = 8  # the steps run_demo reports to its progress


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo produced."""

    report: ReleaseReport
    files: dict[str, Path]
    functional: str  # how the functional tier went, one line


# --- functional tier ---------------------------------------------------------------------------


def functional_tier_command(
    junit: Path,
    tokenizers: str | os.PathLike[str],
    select: str | None = None,
    *,
    python: str | os.PathLike[str] | None = None,
) -> Command:
    """The pytest command line of the bundled functional tier (the same from a wheel or a checkout).

    ``-c os.devnull``: no project configuration is read (an installed rlgate has none);
    ``--rootdir``/``--confcutdir`` the bundle's parent folder, so no conftest outside the
    bundle is loaded and test ids, hence JUnit classnames, are ``functional/<module>``;
    the plugin (tier markers, ``--tokenizers``) is loaded with ``-p``; JUnit is xunit1 as
    the project's own (properties on testcases); ``select`` is a ``-k`` expression. Built by
    :func:`rlgate.core.commands.command`. ``python``: another interpreter (a canary's
    candidate environment, ``rlgate canary``) instead of this one.
    """
    values: dict[str, str] = {"select": select} if select is not None else {}
    return command(
        f"{{python}} -m pytest {BUNDLED_TIER} -m functional -q --tokenizers {{tokenizers}} "
        "--junitxml {junit}" + (" -k {select}" if select is not None else ""),
        python=python or sys.executable,
        **bundled_tier_values(),
        tokenizers=Path(tokenizers).resolve(),
        junit=junit.resolve(),
        **values,
    )


def functional_command(
    junit: Path, tokenizers: str | os.PathLike[str], select: str | None = None
) -> list[str]:
    """:func:`functional_tier_command`'s argv as a list."""
    return list(functional_tier_command(junit, tokenizers, select).argv)


def _start_functional(
    inputs: Path, tokenizers: str | os.PathLike[str] | None, select: str | None
) -> tuple[subprocess.Popen[bytes] | None, str]:
    if not tokenizers or not Path(tokenizers).is_dir():
        return None, (
            f"functional tier not run: no tokenizer root ({tokenizers or 'unset'}); pass "
            "--tokenizers DIR or set RLGATE_TOKENIZERS (one subfolder per model)"
        )
    if not (FUNCTIONAL_TIER / "conftest.py").is_file():
        return None, (
            f"functional tier not run: the bundled tier is missing ({FUNCTIONAL_TIER}); "
            "reinstall rlgate"
        )
    cmd = functional_tier_command(inputs / "functional.xml", tokenizers, select)
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # every tokenizer comes from the local root
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")  # write no bytecode next to the bundle
    log = (inputs / "functional.log").open("wb")
    try:
        proc = subprocess.Popen(cmd.argv, cwd=inputs, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()
    return proc, "functional tier: " + " ".join(cmd.argv[2:])


def _finish_functional(proc: subprocess.Popen[bytes] | None, inputs: Path, why: str) -> str:
    if proc is None:
        return why
    log = inputs / "functional.log"
    try:
        code = proc.wait(timeout=FUNCTIONAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"functional tier killed after {FUNCTIONAL_TIMEOUT_S} s (log: {log})"
    if not (inputs / "functional.xml").is_file():
        return f"functional tier wrote no JUnit (pytest exit {code}; log: {log})"
    return f"functional tier ran for real: pytest exit {code} (log: {log})"


# --- generated runs ----------------------------------------------------------------------------


def _write_runs(inputs: Path, seed: int) -> dict[str, Path]:
    from rlgate.testing.corpus import Fault, corpus_recipe, write_rollouts, write_run

    root = inputs / "runs"
    paths = {
        "run": write_run(root / "healthy", Fault.HEALTHY, seed=seed + 1000),
        "baseline": write_run(root / "baseline", Fault.HEALTHY, seed=seed + 1),
        "rollouts": write_rollouts(root / "rollouts.jsonl", "healthy", seed=seed + 7),
    }
    for k in range(5):
        write_run(root / "band" / f"seed_{k}", Fault.HEALTHY, seed=seed + 10 + k)
    header = "# DEMO recipe (generated by rlgate.demo.build from rlgate.testing.corpus)\n"
    paths["recipe"] = write_text_atomic(root / f"{DEMO_RECIPE}.yaml", header + corpus_recipe())
    paths["band"] = root / "band"
    return paths


def _gate_runs(inputs: Path, runs: dict[str, Path]) -> dict[str, Path]:
    from rlgate.checks.plan import load_inputs, load_plan, render_junit, run_gate

    plan = load_plan(runs["recipe"])
    gate_inputs = load_inputs(
        plan, runs["run"], baseline=runs["baseline"], rollouts=runs["rollouts"]
    )
    report = run_gate(plan, gate_inputs)
    given = [runs["recipe"], runs["run"], runs["baseline"], runs["rollouts"]]
    return {
        "run_json": write_json_atomic(inputs / "run.json", report.to_dict(), inputs=given),
        "run_junit": write_text_atomic(inputs / "run.xml", render_junit(report), inputs=given),
    }


# --- generated SWE results -------------------------------------------------------------------


def _gate_swe(inputs: Path, seed: int) -> dict[str, Path]:
    from rlgate.swe.compare import GateOptions, compare_arms
    from rlgate.swe.readers import load_arm
    from rlgate.swe.records import load_universe
    from rlgate.swe.report import build_swe_junit, comparison_to_dict

    universe = load_universe(find_swe_dataset())
    before, after = write_demo_swe(inputs / "swe", list(universe.ids), seed=seed)
    comparison = compare_arms(
        load_arm("before", before, universe),
        load_arm("after", after, universe),
        universe,
        GateOptions(seed=seed),
    )
    given = [*before, *after]
    xml = build_swe_junit(comparison).tostring().decode("utf-8")
    return {
        "swe_json": write_json_atomic(
            inputs / "swe.json", comparison_to_dict(comparison), inputs=given
        ),
        "swe_junit": write_text_atomic(inputs / "swe.xml", xml, inputs=given),
    }


def _fresh_inputs(inputs: Path) -> None:
    """Empty ``DIR/demo-inputs`` if an earlier demo made it; refuse a folder it did not make.

    A symbolic link (the folder or its marker) is never followed: it is refused. The folder
    is deleted only through :func:`rlgate.core.io.remove_tree`, which refuses it when an input
    of the command lies inside (``--tokenizers DIR/demo-inputs/tok``).
    """
    marker = inputs / INPUTS_MARKER
    for path in (inputs, marker):
        if path.is_symlink():
            raise RlgateError(
                f"{path} is a symbolic link; the demo never deletes or writes through a link",
                hint="remove the link, or choose another --out",
            )
    if inputs.exists():
        if not marker.is_file():
            raise RlgateError(
                f"{inputs} exists and was not written by rlgate's demo; not replacing it",
                hint="choose another --out, or move that folder away",
            )
        remove_tree(inputs, what="the demo's generated inputs")
    inputs.mkdir()
    marker.write_text("generated by `rlgate report --demo`; replaced on every demo run\n")


# --- the pipeline ------------------------------------------------------------------------------


def run_demo(
    out_dir: str | os.PathLike[str],
    *,
    tokenizers: str | os.PathLike[str] | None = None,
    force: bool = False,
    seed: int = 0,
    functional_select: str | None = None,
    progress: Progress = no_progress,
) -> DemoResult:
    """Run the demo end to end and write the report into ``out_dir``.

    ``functional_select`` runs only the functional tests a ``-k`` expression selects;
    ``progress`` hears of each of its steps (:mod:`rlgate.core.progress`).
    """
    from rlgate.report.build import build_report, prepare_out_dir, write_report

    def step(done: int, item: str = "") -> None:
        progress("report --demo", done, DEMO_STEPS, item)

    out = prepare_out_dir(out_dir, force=force)
    inputs = out / INPUTS
    _fresh_inputs(inputs)
    step(0, "starting the functional tier (in the background)")
    proc, why = _start_functional(inputs, tokenizers, functional_select)
    try:
        step(1, "writing the demo runs")
        runs = _write_runs(inputs, seed)
        step(2, "gating the runs and the SWE results")
        gated = {**_gate_runs(inputs, runs), **_gate_swe(inputs, seed)}
        step(3, "generating the nightly history")
        generated = demo_history(
            inputs / "history", seed=seed, recipe=runs["recipe"], baseline=runs["baseline"]
        )
        step(4, "recording the nightly history")
        history, recorded = record_demo_history(inputs / HISTORY_DB, generated)
        latest = [r for r in generated if r.context.nightly_id == generated[-1].context.nightly_id]
        write_nightly_junit(inputs / LATEST_NIGHTLY, latest)  # for `rlgate triage` to try
    except BaseException:
        if proc is not None:
            proc.kill()
            proc.wait()
        raise
    step(5, "waiting for the functional tier")
    functional = _finish_functional(proc, inputs, why)
    step(6, "building the report")
    logger.info(functional)
    junit = [inputs / "functional.xml"] if (inputs / "functional.xml").is_file() else []
    report = build_report(
        [*junit, gated["run_junit"], gated["swe_junit"]],
        runs=[gated["run_json"]],
        swe=gated["swe_json"],
        recipe=runs["recipe"],
        baseline=runs["baseline"],
        band_runs=sorted(runs["band"].iterdir()),
        tokenizers=tokenizers,
        demo=True,
        notes=(functional, recorded),
        history=history,
        main_branch=DEMO_BRANCH,
    )
    step(7, "writing the report")
    files = write_report(report, out)
    step(DEMO_STEPS)
    return DemoResult(report, files, functional)
