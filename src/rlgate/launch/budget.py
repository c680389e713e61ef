"""GPU-hour budgets: one launch and a nightly list, the way NeMo RL budgets its suites.

NeMo RL's ``tools/launch`` charges a test script ``NUM_RUNS * NUM_NODES * GPUS_PER_NODE *
NUM_MINUTES / 60`` GPU-hours, with ``NUM_RUNS = ceil(MAX_STEPS / STEPS_PER_RUN)`` chained
Slurm jobs, and its unit tests fail when the nightly list's total passes a cap
(``test_nightly_compute_stays_below_4139_hours``). rlgate does the same for
``ci/nightly.yaml``:

.. code-block:: yaml

    cap_gpu_hours: 800          # required; a real number with its reason in a comment
    root: ..                    # base of relative recipe paths (default: this file's folder)
    runs:
      - recipe: recipes/<file>.yaml
        steps: 20               # grpo.max_num_steps for this run (the watch target)
        steps_per_run: 20       # steps one Slurm job reaches (default: steps -> one job)
        minutes: 240            # Slurm time limit of one job
        nodes: 4                # must equal the recipe's cluster.num_nodes
        gpus: 8                 # must equal the recipe's cluster.gpus_per_node
        overrides: []           # NeMo RL (Hydra) overrides, also applied when checking nodes
        baseline: null          # optional perf baseline run for this recipe
        name: null              # run name (default: the recipe's file stem)

Invariants: pure (reads YAML and recipes, writes nothing); the arithmetic is exact for
whole minutes (no integer division as in the bash original, so nothing rounds down to 0);
a list entry whose nodes/GPUs disagree with its recipe is an error, not a silent estimate.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from rlgate.checks.registry import load_recipe
from rlgate.core.errors import RecipeError
from rlgate.core.io import read_yaml
from rlgate.core.validate import LineText, PositiveFloat, PositiveInt, problems

__all__ = [
    "Budget",
    "BudgetLine",
    "NightlyList",
    "NightlyRun",
    "evaluate_budget",
    "gpu_hours",
    "load_nightly",
    "render_budget",
    "render_run_table",
    "runs_needed",
]


def runs_needed(steps: int, steps_per_run: int) -> int:
    """Chained jobs needed to reach ``steps``: ``ceil(steps / steps_per_run)``."""
    if steps < 1 or steps_per_run < 1:
        raise ValueError(f"steps ({steps}) and steps_per_run ({steps_per_run}) must be >= 1")
    return math.ceil(steps / steps_per_run)


def gpu_hours(*, runs: int, nodes: int, gpus_per_node: int, minutes: int) -> float:
    """``runs * nodes * gpus_per_node * minutes / 60`` (NeMo RL ``tools/launch``)."""
    return runs * nodes * gpus_per_node * minutes / 60


# A run name becomes <runs root>/<name>, a path NeMo RL's override parser and ray.sub read
# (rlgate.launch.site.PLAIN_PATH), so it is one plain path component.
RUN_NAME = re.compile(r"[A-Za-z0-9_+@-][A-Za-z0-9._+@-]*")


def _run_name(name: str) -> str:
    if not RUN_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} cannot name a run directory (letters, digits and . _ + @ -, "
            "not starting with .)"
        )
    return name


class NightlyRun(BaseModel):
    """One entry of the nightly list."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    recipe: LineText
    steps: PositiveInt
    steps_per_run: PositiveInt | None = None
    minutes: PositiveInt
    nodes: PositiveInt
    gpus: PositiveInt
    overrides: list[LineText] = Field(default_factory=list)
    baseline: LineText | None = None
    name: Annotated[str, AfterValidator(_run_name)] | None = None


class NightlyList(BaseModel):
    """The nightly list file."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    cap_gpu_hours: PositiveFloat
    root: LineText = "."
    runs: list[NightlyRun] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class BudgetLine:
    """One run's resolved entry and its cost."""

    name: str
    recipe: Path
    steps: int
    steps_per_run: int
    runs: int
    nodes: int
    gpus_per_node: int
    minutes: int
    overrides: tuple[str, ...]
    baseline: Path | None
    gpu_hours: float


@dataclass(frozen=True, slots=True)
class Budget:
    """A nightly list's cost against its cap."""

    source: Path
    lines: tuple[BudgetLine, ...]
    total: float
    cap: float

    @property
    def within_cap(self) -> bool:
        """True when the total does not exceed the cap."""
        return self.total <= self.cap


def load_nightly(path: str | os.PathLike[str]) -> NightlyList:
    """Read and validate a nightly list YAML.

    Raises:
        RecipeError: unreadable, not YAML, unknown or missing keys, bad values.
    """
    file = Path(path)
    raw = read_yaml(file, what="nightly list", error=RecipeError)
    if not isinstance(raw, dict):
        raise RecipeError(
            f"{file}: a nightly list is a mapping with cap_gpu_hours and runs, "
            f"got {type(raw).__name__}"
        )
    try:
        return NightlyList.model_validate(raw)
    except ValidationError as exc:
        raise RecipeError(
            f"{file}: invalid nightly list:\n{problems(exc)}",
            hint="keys: cap_gpu_hours, root, runs[{recipe, steps, steps_per_run, minutes, "
            "nodes, gpus, overrides, baseline, name}]; counts are positive integers",
        ) from None


def _resolve_line(entry: NightlyRun, root: Path, where: str) -> BudgetLine:
    recipe_path = root / entry.recipe
    recipe = load_recipe(recipe_path, entry.overrides)
    problems, cluster = [], recipe.facts.cluster
    for key, actual, listed in (
        ("cluster.num_nodes", cluster.num_nodes, entry.nodes),
        ("cluster.gpus_per_node", cluster.gpus_per_node, entry.gpus),
    ):
        if actual != listed:
            problems.append(f"{key} is {actual!r} in the recipe but {listed} in the list")
    if problems:
        raise RecipeError(
            f"{where} ({recipe_path.name}): " + "; ".join(problems),
            hint="the budget must charge what the run allocates: fix the list or override "
            "the recipe in the entry's overrides",
        )
    name = entry.name or recipe_path.stem
    if not RUN_NAME.fullmatch(name):
        raise RecipeError(
            f"{where}: the recipe's file name {name!r} cannot name a run directory",
            hint="give the entry a `name` of letters, digits and . _ + @ -",
        )
    per_run = entry.steps_per_run or entry.steps
    runs = runs_needed(entry.steps, per_run)
    cost = gpu_hours(runs=runs, nodes=entry.nodes, gpus_per_node=entry.gpus, minutes=entry.minutes)
    return BudgetLine(
        name=name,
        recipe=recipe_path,
        steps=entry.steps,
        steps_per_run=per_run,
        runs=runs,
        nodes=entry.nodes,
        gpus_per_node=entry.gpus,
        minutes=entry.minutes,
        overrides=tuple(entry.overrides),
        baseline=root / entry.baseline if entry.baseline else None,
        gpu_hours=cost,
    )


def evaluate_budget(path: str | os.PathLike[str], *, cap: float | None = None) -> Budget:
    """Load the nightly list at ``path``, check every entry against its recipe, sum GPU-hours.

    Args:
        path: the nightly list YAML.
        cap: overrides the file's ``cap_gpu_hours``.

    Raises:
        RecipeError: invalid list, missing recipe, duplicate names, nodes/GPUs mismatch.
    """
    file = Path(path)
    nightly = load_nightly(file)
    if cap is not None and not (math.isfinite(cap) and cap > 0):
        raise RecipeError(f"--cap must be a positive number of GPU-hours, got {cap}")
    root = (file.parent / nightly.root).resolve()
    lines = tuple(
        _resolve_line(entry, root, f"{file}: runs[{i}]") for i, entry in enumerate(nightly.runs)
    )
    names = [line.name for line in lines]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RecipeError(
            f"{file}: run name(s) listed twice: {dupes}",
            hint="each run needs its own run directory; give a repeated recipe a distinct `name`",
        )
    total = sum(line.gpu_hours for line in lines)
    return Budget(file, lines, total, nightly.cap_gpu_hours if cap is None else cap)


def render_budget(budget: Budget, *, verbose: bool = True) -> str:
    """The budget as text: one line per run (as ``tools/launch`` prints), then the total."""
    out: list[str] = []
    if verbose:
        for line in budget.lines:
            out.append(
                f"{line.gpu_hours:8.1f} GPU-h  {line.name}  ({line.runs} run(s) x {line.nodes} "
                f"nodes x {line.gpus_per_node} GPUs x {line.minutes} min; {line.steps} steps)"
            )
    verdict = "within" if budget.within_cap else "OVER"
    out.append(
        f"total {budget.total:.1f} GPU-hours for {len(budget.lines)} run(s): {verdict} the cap "
        f"of {budget.cap:g} GPU-hours ({budget.source})"
    )
    return "\n".join(out) + "\n"


def render_run_table(lines: Sequence[BudgetLine]) -> str:
    """One tab-separated line per run for shell loops.

    Columns: name, recipe, steps, steps_per_run, minutes, baseline ("-" if none), overrides
    (space-joined, may be empty).
    """
    rows = []
    for line in lines:
        baseline = str(line.baseline) if line.baseline else "-"
        fields = [line.name, str(line.recipe), str(line.steps), str(line.steps_per_run)]
        fields += [str(line.minutes), baseline, " ".join(line.overrides)]
        if any("\t" in f or "\n" in f for f in fields) or any(" " in o for o in line.overrides):
            raise RecipeError(
                f"run {line.name}: a field has a tab or newline, or an override has a space; "
                "the run table cannot carry it",
                hint="shell loops split overrides on spaces: use YAML flow values without spaces",
            )
        rows.append("\t".join(fields))
    return "".join(row + "\n" for row in rows)
