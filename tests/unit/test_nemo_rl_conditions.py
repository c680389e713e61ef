"""Differential test: every condition of NeMo RL's test suites, rlgate vs NeMo RL's check_metrics.

Every ``tests/check_metrics.py`` condition in a NeMo RL checkout's ``tests/test_suites/**/*.sh``
(read by :func:`rlgate.recipe.suite.read_suite`, as the shell passes it) is evaluated on the
same generated ``metrics.json`` files by rlgate (``load_metrics_json`` + ``evaluate_condition``)
and by NeMo RL's own ``tests/check_metrics.py`` from the checkout (its ``evaluate_check``, in a
subprocess; a sample also through the script's command line, whose exit code must agree).
For each condition the files make it true and false where values can (constant series around
every number in the condition, random series, a resumed run whose steps start late), and one
has a NaN. They must agree, except where NeMo RL is wrong, by a rule named here and in
docs/findings.md (R1: NaN). Opt-in: ``NEMO_RL_DIR`` (verified at NVIDIA-NeMo/RL 7ea279a).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rlgate.checks.conditions import evaluate_condition
from rlgate.core.results import Outcome
from rlgate.recipe.conditions import (
    Abs,
    AnyCondition,
    Arith,
    Comparison,
    ConditionSyntaxError,
    Expr,
    Neg,
    Number,
    SeriesCall,
    StepIndex,
    parse_condition,
)
from rlgate.recipe.suite import read_suite
from rlgate.runs.metrics import load_metrics_json

NEMO_RL = os.environ.get("NEMO_RL_DIR")
pytestmark = pytest.mark.skipif(not NEMO_RL, reason="set NEMO_RL_DIR to a NeMo RL checkout")

# conditions on an evaluation's JSON (a scalar "score", no step), not a run's metrics
NOT_RUN_CONDITIONS = {'data["score"] >= 0.2396'}

_ORACLE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("check_metrics", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = []
for path, check in json.load(open(sys.argv[2])):
    data = json.load(open(path))
    passed, message, value = module.evaluate_check(data, check)
    out.append([bool(passed), message])
json.dump(out, open(sys.argv[3], "w"))
"""


@dataclass(frozen=True)
class Case:
    script: str
    condition: str
    parsed: AnyCondition
    target: int
    doc: str  # the metrics.json file
    label: str


def _numbers(expr: Expr) -> list[float]:
    if isinstance(expr, Number):
        return [expr.value]
    if isinstance(expr, SeriesCall):
        return [expr.above] if expr.above is not None else []
    if isinstance(expr, Neg | Abs):
        return _numbers(expr.operand)
    if isinstance(expr, Arith):
        return [*_numbers(expr.left), *_numbers(expr.right)]
    return []


def _constants(cond: AnyCondition) -> list[float]:
    if isinstance(cond, Comparison):
        return [*_numbers(cond.left), *_numbers(cond.right)]
    return [cond.threshold, *_numbers(cond.value)]


def _steps_read(cond: AnyCondition, target: int) -> list[int]:
    terms: list[Expr] = []

    def walk(e: Expr) -> None:
        if isinstance(e, Neg | Abs):
            walk(e.operand)
        elif isinstance(e, Arith):
            walk(e.left)
            walk(e.right)
        else:
            terms.append(e)

    if isinstance(cond, Comparison):
        walk(cond.left)
        walk(cond.right)
    else:
        terms.append(cond.value)
    return [t.step if t.step is not None else target for t in terms if isinstance(t, StepIndex)]


def _docs(cond: AnyCondition, target: int, rng: np.random.Generator) -> list[tuple[str, dict]]:
    """Metrics for the condition's tags: constant, random, resumed and NaN series."""
    tags = cond.tags if isinstance(cond, Comparison) else [cond.tag]
    last = max([target, *_steps_read(cond, target)])
    steps = list(range(0, last + 1))
    levels = {0.0, 1.0}
    for c in _constants(cond):
        d = max(abs(c) * 0.1, 0.01)
        levels |= {c, c - d, c + d, -c}
    docs = []
    for level in sorted(levels):
        docs.append((f"constant {level:g}", {t: {str(s): level for s in steps} for t in tags}))
    for k, level in enumerate(sorted(levels)):
        noisy = {
            t: {str(s): float(level + (abs(level) + 0.1) * rng.normal(0, 0.3)) for s in steps}
            for t in tags
        }
        docs.append((f"random {k} around {level:g}", noisy))
    start = max(1, last // 3)  # a resumed run: its first steps were logged by another job
    docs += [
        (
            f"resumed at step {start}",
            {t: {k: v for k, v in d.items() if int(k) >= start} for t, d in doc.items()},
        )
        for _, doc in docs[len(levels) : len(levels) + 3]
    ]
    nan = json.loads(json.dumps(docs[len(levels)][1]))
    for t in tags:
        keys = sorted(nan[t], key=int)
        nan[t][keys[len(keys) // 2]] = float("nan")
    docs.append(("NaN in the middle", nan))
    return docs


@functools.cache
def _cases(root: str) -> tuple[list[Case], list[tuple[str, str]]]:
    out: list[Case] = []
    unparsed: list[tuple[str, str]] = []
    rng = np.random.default_rng(22)
    work = Path(root)
    n = 0
    scripts = sorted(Path(NEMO_RL or "").glob("tests/test_suites/**/*.sh"))
    for script in scripts:
        suite = read_suite(script)
        target = suite.max_steps or 10
        for condition in suite.conditions():
            try:
                parsed = parse_condition(condition)
            except ConditionSyntaxError:
                unparsed.append((script.name, condition))
                continue
            for label, doc in _docs(parsed, target, rng):
                n += 1
                path = work / f"m{n}.json"
                path.write_text(json.dumps(doc))
                out.append(Case(script.name, condition, parsed, target, str(path), label))
    return out, unparsed


def _oracle(cases: list[Case], work: Path) -> list[tuple[bool, str]]:
    assert NEMO_RL is not None
    batch, out = work / "batch.json", work / "oracle.json"
    batch.write_text(json.dumps([[c.doc, c.condition] for c in cases]))
    check_metrics = Path(NEMO_RL) / "tests" / "check_metrics.py"
    subprocess.run(
        [sys.executable, "-c", _ORACLE, str(check_metrics), str(batch), str(out)], check=True
    )
    return [tuple(r) for r in json.loads(out.read_text())]


def _rlgate(case: Case) -> bool:
    run = load_metrics_json(case.doc)
    return (
        evaluate_condition(case.parsed, run, name="c", target_step=case.target).outcome
        is Outcome.PASS
    )


def _nan_rule(case: Case, ours: bool, theirs: bool) -> bool:
    """R1: NeMo RL passes a condition whose values hold a NaN (min/max/ratio_above/median skip
    or misorder it; a NaN comparison is False); rlgate fails it, naming the step."""
    return case.label == "NaN in the middle" and theirs and not ours


@pytest.fixture(scope="module")
def differential(tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("conditions")
    cases, unparsed = _cases(str(work))
    oracle = _oracle(cases, work)
    return {"cases": cases, "unparsed": unparsed, "oracle": oracle, "work": work}


def test_every_suite_condition_is_read_and_all_but_evaluation_json_ones_parse(
    differential: dict,
) -> None:
    cases, unparsed = differential["cases"], differential["unparsed"]
    assert {c for _, c in unparsed} == NOT_RUN_CONDITIONS
    conditions = {(c.script, c.condition) for c in cases}
    arithmetic = {c.condition for c in cases if isinstance(c.parsed, Comparison)}
    print(f"{len(conditions)} (script, condition) pairs, {len(arithmetic)} with arithmetic")
    assert len(arithmetic) >= 6


def test_rlgate_agrees_with_nemo_rls_check_metrics_on_every_condition(differential: dict) -> None:
    cases, oracle = differential["cases"], differential["oracle"]
    disagreements, by_rule = [], 0
    outcomes: dict[tuple[str, str], set[bool]] = {}
    for case, (theirs, message) in zip(cases, oracle, strict=True):
        ours = _rlgate(case)
        outcomes.setdefault((case.script, case.condition), set()).add(theirs)
        if ours == theirs:
            continue
        if _nan_rule(case, ours, theirs):
            by_rule += 1
            continue
        disagreements.append(
            f"{case.script}: {case.condition} [{case.label}]: rlgate {ours}, "
            f"NeMo RL {theirs} ({message})"
        )
    assert not disagreements, "\n".join(disagreements[:40])
    one_sided = sorted(k for k, seen in outcomes.items() if len(seen) < 2)
    print(f"{len(cases)} evaluations; {by_rule} NaN cases NeMo RL passes and rlgate fails (R1)")
    print(
        f"{len(outcomes) - len(one_sided)} of {len(outcomes)} conditions seen both true and false"
    )
    assert len(one_sided) <= len(outcomes) // 20, "\n".join(f"{s}: {c}" for s, c in one_sided[:40])


def test_the_oracles_function_is_what_its_command_line_decides(differential: dict) -> None:
    """check_metrics.py's exit code is 0 exactly when evaluate_check passed every condition."""
    cases, oracle = differential["cases"], differential["oracle"]
    assert NEMO_RL is not None
    script = Path(NEMO_RL) / "tests" / "check_metrics.py"
    for case, (theirs, _) in list(zip(cases, oracle, strict=True))[:: max(1, len(cases) // 12)]:
        done = subprocess.run(
            [sys.executable, str(script), case.doc, case.condition], capture_output=True
        )
        assert (done.returncode == 0) == theirs, case
