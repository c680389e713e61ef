"""rlgate.checks.registry: a check kind is one module, and nothing else needs to know it.

The shipped kinds are checked for what the registry promises (a spec model, a planner, an
evaluator, a unique name, one kind per module of rlgate.checks.kinds). A kind rlgate does not
ship (tests/unit/helpers/last_value_kind.py, written with the registry's public API only) is
then validated at load, planned, evaluated and written to JUnit and JSON by ``rlgate
check-run`` and by the convergence tier, on a real recipe and a real MLPerf run.
"""

from __future__ import annotations

import inspect
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import create_model

from rlgate.checks import kinds as kinds_package
from rlgate.checks.document import RunDocument
from rlgate.checks.plan import load_plan
from rlgate.checks.registry import (
    CheckKind,
    Need,
    gate_model,
    get_kind,
    kinds,
    parse_gate,
    register,
    registered,
)
from rlgate.cli.app import main
from rlgate.core.errors import RecipeError
from rlgate.core.junit import read_junit
from rlgate.core.results import Outcome, Result, Tier
from rlgate.recipe.spec import StrictModel

from .helpers.last_value_kind import LastValue, LastValueFields
from .helpers.mlperf_runs import RECIPE, REPO_ROOT, mlperf_path, mlperf_run

SHIPPED = [
    "integrity",
    "completion",
    "check_metrics",
    "reward",
    "agentic",
    "rollouts",
    "band",
    "perf",
    "async_vs_sync",
]
CHECK = "last_value:train/loss"


def last_loss() -> float:
    """The real run's last logged train/loss (what the new kind reads)."""
    return float(mlperf_run(256, 1).series["train/loss"].values[-1])


def recipe_with_last_value(tmp_path: Path, block: str) -> Path:
    """The reference recipe (through ``defaults:``) with the new kind's block added."""
    path = tmp_path / "last-value.yaml"
    path.write_text(f"defaults: {RECIPE}\nrlgate:\n  convergence:\n    last_value: {block}\n")
    return path


class TestShippedKinds:
    def test_every_kind_has_a_spec_a_planner_and_an_evaluator(self) -> None:
        registered_kinds = kinds()
        assert [k.name for k in registered_kinds] == SHIPPED  # plan order, names unique
        sections = gate_model().model_fields
        for kind in registered_kinds:
            cls = type(kind)
            assert not inspect.isabstract(cls), kind.name
            assert cls.plan is not CheckKind.plan and cls.evaluate is not CheckKind.evaluate
            assert issubclass(kind.spec_model, StrictModel), kind.name
            assert kind.tier is None or isinstance(kind.tier, Tier), kind.name
            assert kind.section in sections, kind.name
            section_model = sections[kind.section].annotation.__args__[0]
            assert issubclass(section_model, kind.spec_model), kind.name  # its fields are there
            assert get_kind(kind.name) is kind

    def test_each_module_of_the_kinds_package_registers_one_kind(self) -> None:
        modules = sorted(m.name for m in pkgutil.iter_modules(kinds_package.__path__))
        owners = sorted(type(k).__module__.rsplit(".", 1)[1] for k in kinds())
        assert owners == modules

    def test_the_plan_has_every_kind_in_order_and_no_kind_is_dispatched_by_name(self) -> None:
        plan = load_plan(RECIPE)
        assert [c.kind for c in plan.checks] == sorted(
            (c.kind for c in plan.checks), key=SHIPPED.index
        )
        band = next(c for c in plan.checks if c.name == "band_mean:timing/train/total_step_time")
        assert band.kind == "band" and band.tier is Tier.PERF  # the kind's planner chose it

    def test_a_duplicate_name_or_a_field_two_kinds_declare_is_refused(self) -> None:
        class SameName(LastValue):
            name = "reward"

        class SameField(LastValue):
            name = "reward_again"
            spec_model = create_model("RewardAgain", __base__=StrictModel, reward=(int, 0))

        with pytest.raises(ValueError, match="'reward' is already registered"):
            register(SameName)
        with pytest.raises(ValueError, match=r"both declare rlgate\.convergence\.reward"):
            register(SameField)
        assert [k.name for k in kinds()] == SHIPPED

    def test_an_incomplete_kind_is_refused(self) -> None:
        class NoSpec(CheckKind):  # no CheckKind[spec model]
            name, tier, section = "no_spec", Tier.CONVERGENCE, "convergence"

            def plan(self, spec, context):
                return []

            def evaluate(self, spec, check, inputs, context):
                raise NotImplementedError

        class NoEvaluator(CheckKind[LastValueFields]):
            name, tier, section = "x", Tier.PERF, "perf"

            def plan(self, spec, context):
                return []

        with pytest.raises(TypeError, match="NoSpec does not set spec_model"):
            register(NoSpec)
        with pytest.raises(TypeError, match="abstract method"):
            register(NoEvaluator)


class TestNewKindSchema:
    def test_a_registered_kind_adds_its_fields_to_its_section(self) -> None:
        raw = {"convergence": {"last_value": {"metric": "train/loss", "max": 1.0}}}
        with pytest.raises(RecipeError, match=r"rlgate\.convergence\.last_value: unknown key"):
            parse_gate(raw, recipe="r")
        with registered(LastValue):
            gate = parse_gate(raw, recipe="r")
            assert gate.convergence.last_value.max == 1.0
            assert gate.convergence.completion.metric == "train/loss"  # the others' fields stay
            with pytest.raises(RecipeError) as info:
                parse_gate({"convergence": {"last_value": {"metric": "m", "maxx": 1}}})
            assert "rlgate.convergence.last_value.maxx: unknown key; did you mean 'max'?" in str(
                info.value
            )
        with pytest.raises(RecipeError, match="unknown key"):  # gone with the block
            parse_gate(raw, recipe="r")

    def test_a_kind_may_bring_a_section_of_its_own(self) -> None:
        class Canary(LastValue):
            name, section = "canary", "canary"

        with registered(Canary):
            gate = parse_gate({"canary": {"last_value": {"metric": "m", "max": 2}}})
            assert gate.canary.last_value.metric == "m" and gate.convergence is None


class TestNewKindEndToEnd:
    def test_check_run_validates_the_new_kind_at_load(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        recipe = recipe_with_last_value(tmp_path, "{metric: train/loss, maxx: 1}")
        with registered(LastValue):
            code = main(["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe)])
        err = capsys.readouterr().err
        assert code == 2 and "rlgate.convergence.last_value.maxx: unknown key" in err
        assert "did you mean 'max'?" in err and "Traceback" not in err

    @pytest.mark.parametrize(("margin", "code", "outcome"), [(1.0, 0, "pass"), (-1e-3, 1, "fail")])
    def test_check_run_plans_evaluates_and_writes_the_new_kind(
        self, tmp_path: Path, margin: float, code: int, outcome: str
    ) -> None:
        ceiling = last_loss() + margin
        recipe = recipe_with_last_value(tmp_path, f"{{metric: train/loss, max: {ceiling!r}}}")
        out, junit = tmp_path / "run.json", tmp_path / "run.xml"
        args = ["check-run", str(mlperf_path(256, 1)), "--recipe", str(recipe)]
        with registered(LastValue):
            assert main([*args, "--json", str(out), "--junit", str(junit)]) == code
        doc = RunDocument.model_validate(json.loads(out.read_text()))
        written = {r.name: r for r in doc.checks}
        assert written[CHECK].outcome is Outcome(outcome)
        assert written[CHECK].value == pytest.approx(last_loss())
        assert (written[CHECK].threshold, written[CHECK].bound) == (ceiling, f"<= {ceiling:g}")
        assert {r.outcome for n, r in written.items() if n != CHECK} == {Outcome.PASS}
        with registered(LastValue):  # planned where its order puts it: after agentic, before band
            plan = load_plan(recipe)
        kinds_around = [c.kind for c in plan.checks if c.kind in ("agentic", "last_value", "band")]
        assert kinds_around == sorted(kinds_around, key=["agentic", "last_value", "band"].index)
        assert [r.name for r in doc.checks] == [c.name for c in plan.checks if c.need is Need.RUN]
        (suite,) = read_junit(junit)
        case = next(c for c in suite.cases if c.name == CHECK)
        assert case.recorded and case.shown is Outcome(outcome)
        assert case.result == written[CHECK]
        assert case.classname == f"rlgate.convergence.{recipe.stem}"

    def test_the_convergence_tier_runs_the_new_kind_loaded_as_a_plugin(
        self, tmp_path: Path
    ) -> None:
        """The same kind in a pytest run: ``-p`` its module; JUnit and --rlgate-json agree."""
        ceiling = last_loss() - 1e-3
        recipe = recipe_with_last_value(tmp_path, f"{{metric: train/loss, max: {ceiling!r}}}")
        junit, doc_path = tmp_path / "tier.xml", tmp_path / "tier.json"

        def run_tier(*plugin: str) -> subprocess.CompletedProcess[str]:
            cmd = [
                *(sys.executable, "-m", "pytest", "tests/convergence", "-q"),
                *("-p", "no:cacheprovider", *plugin, "--junitxml", str(junit)),
                *("--rlgate-json", str(doc_path)),
                *("--run-dir", str(mlperf_path(256, 1)), "--recipe", str(recipe)),
            ]
            env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
            return subprocess.run(
                cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, env=env
            )

        unknown = run_tier()  # without the kind's module, its block is an unknown key
        assert unknown.returncode == 1, unknown.stdout + unknown.stderr
        assert "rlgate.convergence.last_value: unknown key" in unknown.stdout
        proc = run_tier("-p", "tests.unit.helpers.last_value_kind")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        (suite,) = read_junit(junit)
        cases = {c.name: c for c in suite.cases}
        case = cases[f"test_convergence_check[{CHECK}]"]
        assert case.shown is Outcome.FAIL and case.result.outcome is Outcome.FAIL
        assert case.result.value == pytest.approx(last_loss()) and case.result.threshold == ceiling
        not_passed = {
            n.split("[")[1][:-1]: c.shown for n, c in cases.items() if c.shown is not Outcome.PASS
        }
        assert not_passed == {CHECK: Outcome.FAIL, "band_curve:train/reward": Outcome.SKIP}
        doc = RunDocument.model_validate(json.loads(doc_path.read_text()))
        written = {r.name: r for r in doc.checks}
        assert doc.passed is False and written[CHECK] == Result.from_json(case.result.to_json())
