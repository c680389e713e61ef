"""The pytest plugin: tier markers from the test path, ``--rlgate-*`` options shared with the CLI.

The plugin runs for real in a pytest subprocess on a scratch tree (its own ``pytest.ini``,
no conftest), so what is asserted is what a user's ``pytest -m <tier>`` does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlgate.cli.app import build_parser
from rlgate.core import options
from rlgate.core.options import PLUGIN_OPTIONS, Option
from rlgate.core.validate import nonempty
from rlgate.pytest_plugin import TIER_MARKERS, tier_of

# A test that prints the options the plugin parsed (dest -> value), one per line.
ECHO = """
def test_echo(pytestconfig):
    for dest in ("run_dir", "recipe", "band_run", "max_steps", "swe_before", "swe_alpha",
                 "tokenizers"):
        print(f"OPT {dest}={pytestconfig.getoption(dest)!r}")
"""


def _pytest(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    (root / "pytest.ini").write_text("[pytest]\nstrict = true\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "rlgate.pytest_plugin",
         *args],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})},
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return root


def _selected(output: str) -> set[str]:
    return {line.strip() for line in output.splitlines() if "::" in line}


class TestTierMarkers:
    @pytest.fixture(scope="class")
    def tree(self, tmp_path_factory: pytest.TempPathFactory) -> Path:
        test = "def test_x():\n    pass\n"
        return _tree(
            tmp_path_factory.mktemp("tiers"),
            {
                "tests/unit/test_a.py": test,
                "tests/unit/deeper/test_b.py": test,
                "tests/functional/test_c.py": test,
                "tests/perf/test_d.py": test,
                "tests/swe_gate/test_e.py": test,
                "tests/other/perf_notes/test_f.py": test,  # no tier folder on its path
                # a tier folder that is not directly under tests/ (the demo's bundled copy)
                "bundle/functional/test_g.py": test,
            },
        )

    @pytest.mark.parametrize(
        ("expression", "expected"),
        [
            ("unit", {"tests/unit/test_a.py::test_x", "tests/unit/deeper/test_b.py::test_x"}),
            (
                "functional",
                {"tests/functional/test_c.py::test_x", "bundle/functional/test_g.py::test_x"},
            ),
            ("perf", {"tests/perf/test_d.py::test_x"}),
            ("swe_gate", {"tests/swe_gate/test_e.py::test_x"}),
            ("convergence", set()),
        ],
    )
    def test_each_test_gets_its_tier_marker_from_its_path_without_a_conftest(
        self, tree: Path, expression: str, expected: set[str]
    ) -> None:
        code, out = _pytest(tree, "--collect-only", "-q", "-m", expression, "tests", "bundle")
        assert _selected(out) == expected, out
        assert code == (0 if expected else 5), out  # 5: no tests selected

    def test_a_test_outside_every_tier_folder_has_no_tier(self, tree: Path) -> None:
        tiers = " or ".join(TIER_MARKERS)
        code, out = _pytest(tree, "--collect-only", "-q", "-m", f"not ({tiers})", "tests")
        assert code == 0 and _selected(out) == {"tests/other/perf_notes/test_f.py::test_x"}, out

    def test_tier_of_reads_only_the_path_below_the_rootdir(self, tmp_path: Path) -> None:
        root = tmp_path / "perf" / "checkout"  # a tier name above the rootdir does not count
        assert tier_of(root / "tests/unit/test_a.py", root) == "unit"
        assert tier_of(root / "tests/test_a.py", root) is None
        assert tier_of(tmp_path / "elsewhere/functional/test_a.py", root) is None


class TestOptions:
    def test_namespaced_names_and_historic_aliases_set_the_same_option(
        self, tmp_path: Path
    ) -> None:
        run = tmp_path / "run"
        run.mkdir()
        recipe = tmp_path / "r.yaml"
        recipe.write_text("x: 1\n")
        _tree(tmp_path, {"tests/unit/test_echo.py": ECHO})
        code, out = _pytest(
            tmp_path, "-s", "-q", "tests",
            "--rlgate-run-dir", str(run), "--recipe", str(recipe), "--rlgate-recipe", str(recipe),
            "--band-run", str(run), "--rlgate-band-run", str(run), "--rlgate-max-steps", "7",
            "--rlgate-swe-before", str(run), str(recipe), "--swe-alpha", "0.1",
            "--rlgate-tokenizers", "/tok",
        )  # fmt: skip
        assert code == 0, out
        assert f"OPT run_dir={run!r}" in out
        assert f"OPT recipe={[recipe, recipe]!r}" in out  # repeatable: the functional matrix
        assert f"OPT band_run={[run, run]!r}" in out
        assert "OPT max_steps=7" in out and "OPT swe_alpha=0.1" in out
        assert f"OPT swe_before={[run, recipe]!r}" in out
        assert "OPT tokenizers='/tok'" in out

    def test_defaults_come_from_the_table_and_the_environment(self, tmp_path: Path) -> None:
        _tree(tmp_path, {"tests/unit/test_echo.py": ECHO})
        code, out = _pytest(tmp_path, "-s", "-q", "tests", env={"RLGATE_TOKENIZERS": "/env/tok"})
        assert code == 0, out
        assert "OPT tokenizers='/env/tok'" in out and "OPT swe_alpha=0.05" in out
        assert "OPT run_dir=None" in out and "OPT band_run=[]" in out

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            (
                ["--rlgate-run-dir", "no/such/run"],
                "argument --rlgate-run-dir/--run-dir: path does not exist: no/such/run",
            ),
            (
                ["--baseline", "missing-baseline"],
                "argument --rlgate-baseline/--baseline: path does not exist: missing-baseline",
            ),
            (["--swe-alpha", "1.5"], "argument --rlgate-swe-alpha/--swe-alpha: 1.5 is outside"),
            (["--rlgate-max-steps", "0"], "--rlgate-max-steps/--max-steps: must be >= 1, got 0"),
            (["--swe-dataset", " "], "argument --rlgate-swe-dataset/--swe-dataset: must not be"),
        ],
        ids=["missing_run", "missing_baseline", "alpha_out_of_range", "zero_steps", "blank"],
    )
    def test_bad_values_are_usage_errors_naming_the_option(
        self, tmp_path: Path, args: list[str], message: str
    ) -> None:
        _tree(tmp_path, {"tests/unit/test_echo.py": ECHO})
        code, out = _pytest(tmp_path, "-q", "tests", *args)
        assert code == pytest.ExitCode.USAGE_ERROR, out
        assert message in out and "OPT" not in out  # refused at parsing: nothing ran


def _cli_actions() -> dict[str, dict[str, argparse.Action]]:
    """Every CLI command (``check-run``, ``swe compare``, ...) -> its options by flag."""
    found: dict[str, dict[str, argparse.Action]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:  # argparse has no public listing of a parser's actions
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())
            else:
                for flag in action.option_strings:
                    found.setdefault(name, {})[flag] = action

    walk(build_parser(), "")
    return found


#: Which CLI commands share which plugin option (the option is the same one there).
SHARED: dict[str, tuple[str, ...]] = {
    "tokenizers": ("recipe check", "launch", "bench rollout", "report"),
    "recipe": ("check-run", "bench rollout", "report"),
    "baseline": ("check-run", "report"),
    "rollouts": ("check-run",),
    "band-run": ("check-run", "report"),
    "sync-run": ("check-run",),
    "max-steps": ("check-run",),
    "swe-before": ("swe compare",),
    "swe-after": ("swe compare",),
    "swe-dataset": ("swe compare", "swe eval"),
    "swe-alpha": ("swe compare", "swe power"),
    "swe-margin-pp": ("swe compare",),
    "swe-max-infra-error-rate": ("swe compare",),
}


class TestOneDefinition:
    def test_every_shared_option_is_the_tables_definition_in_each_cli_command(self) -> None:
        actions = _cli_actions()
        assert set(SHARED) <= {o.name for o in PLUGIN_OPTIONS}
        for option in PLUGIN_OPTIONS:
            for command in SHARED.get(option.name, ()):
                action = actions[command].get(option.cli_flag)
                assert action is not None, f"rlgate {command} has no {option.cli_flag}"
                where = f"rlgate {command} {option.cli_flag}"
                assert action.help == option.help, where
                assert action.type is option.type, where
                assert action.metavar == option.metavar, where

    def test_every_shared_option_names_for_the_output_guard_what_the_cli_says(self) -> None:
        """The plugin's guard declares each option as the CLI's table does (one rule)."""
        from rlgate.cli import outputs

        actions = _cli_actions()
        for option in PLUGIN_OPTIONS:
            for command in SHARED.get(option.name, ()):
                dest = actions[command][option.cli_flag].dest
                assert outputs.role(command, dest) is option.role, (command, option.name)

    def test_every_path_option_of_the_plugin_is_an_input_of_its_guard(self) -> None:
        from rlgate.core.io import Role

        for option in PLUGIN_OPTIONS:
            if option.path:
                assert option.role.path and not option.role.output, option.name
        assert options.JSON.role is Role.FILE_OUT and options.TOKENIZERS.role is Role.ROOT

    def test_bench_rollouts_baseline_is_another_option(self) -> None:
        """`bench rollout --baseline` is a stored benchmark baseline, not a run: not shared."""
        action = _cli_actions()["bench rollout"]["--baseline"]
        assert action.help != options.BASELINE.help

    def test_every_plugin_option_is_namespaced_with_its_historic_alias(self) -> None:
        for option in PLUGIN_OPTIONS:
            if option.alias:
                assert option.pytest_flags == (f"--rlgate-{option.name}", f"--{option.name}")
            else:  # new options have no bare alias, and a namespaced destination
                assert option.pytest_flags == (f"--rlgate-{option.name}",)
                assert option.dest == f"rlgate_{option.name.replace('-', '_')}"
        assert [o.name for o in PLUGIN_OPTIONS if not o.alias] == ["json"]

    @pytest.mark.parametrize("change", ["help", "type", "metavar"])
    def test_a_command_may_change_only_the_shape(self, change: str) -> None:
        with pytest.raises(ValueError, match=f"may not change \\['{change}'\\]"):
            options.TOKENIZERS.kwargs(**{change: None})

    def test_list_options_get_a_fresh_list_each_time(self) -> None:
        first, second = options.BAND_RUN.kwargs(), options.BAND_RUN.kwargs()
        assert first["default"] == [] and first["default"] is not second["default"]

    def test_path_check_runs_after_the_options_own_type(self, tmp_path: Path) -> None:
        dataset = Option("d", help="h", type=nonempty, path=True)
        kind = dataset.kwargs(check_paths=True)["type"]
        with pytest.raises(argparse.ArgumentTypeError, match="must not be empty"):
            kind("  ")
        with pytest.raises(argparse.ArgumentTypeError, match="path does not exist"):
            kind(str(tmp_path / "nope"))
        assert kind(str(tmp_path)) == tmp_path
        assert dataset.kwargs()["type"] is nonempty  # the CLI: readers check paths


class TestRlgateRunExitCodes:
    """``rlgate run`` reports pytest's exit codes in rlgate's meaning (docs/security.md 1).

    Regression story: pytest's internal error (its 3) came out as rlgate's 3, which reads
    "infrastructure, rerun", and its usage error (4) as a code rlgate does not document.
    """

    @staticmethod
    def _run(root: Path) -> tuple[int, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "rlgate.cli", "run", "functional", "-q", "-p",
             "no:cacheprovider", "-p", "rlgate.pytest_plugin"],
            cwd=root, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        )  # fmt: skip
        return proc.returncode, proc.stdout + proc.stderr

    def test_an_internal_error_of_pytest_is_70(self, tmp_path: Path) -> None:
        hook = "def pytest_collection_modifyitems(items):\n    raise RuntimeError('boom')\n"
        root = _tree(tmp_path, {"conftest.py": hook, "functional/test_a.py": "def test_a(): pass"})
        code, out = self._run(root)
        assert code == 70 and "INTERNALERROR" in out and "RuntimeError: boom" in out, out

    def test_a_usage_error_of_pytest_is_2(self, tmp_path: Path) -> None:
        root = _tree(tmp_path, {"conftest.py": "", "functional/test_a.py": "def test_a(): pass"})
        (root / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option\n")
        code, out = self._run(root)
        assert code == 2 and "unrecognized arguments: --no-such-option" in out, out

    def test_a_collection_error_stays_2(self, tmp_path: Path) -> None:
        """pytest's 2 (a collection error, or an interruption) is rlgate's 2: not 130."""
        root = _tree(tmp_path, {"functional/test_a.py": "def test_a(:\n"})
        code, out = self._run(root)
        assert code == 2 and "SyntaxError" in out, out
