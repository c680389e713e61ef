"""``rlgate.core.commands``: every external command is built from validated tokens, in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlgate.core.commands import Command, Options, command
from rlgate.core.errors import LaunchError, RlgateError

from .helpers import REPO_ROOT

SRC = REPO_ROOT / "src" / "rlgate"


class TestCommand:
    def test_fields_become_words_and_lists_become_one_word_each(self) -> None:
        cmd = command(
            "scancel --signal=TERM -- {ids}", ids=["4242", "4243_7", "4244+1"], error=LaunchError
        )
        assert cmd == Command(("scancel", "--signal=TERM", "--", "4242", "4243_7", "4244+1"))
        assert str(cmd) == "scancel --signal=TERM -- 4242 4243_7 4244+1"

    def test_a_value_after_a_literal_prefix_is_the_options_argument(self) -> None:
        assert command("sacct --jobs={job}", job="-1").argv == ("sacct", "--jobs=-1")

    def test_paths_and_numbers(self) -> None:
        cmd = command("git -C {path} log -n {n}", path=Path("/srv/nemo rl"), n=3)
        assert cmd.argv == ("git", "-C", "/srv/nemo rl", "log", "-n", "3")

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            pytest.param("--me", "starts with '-'", id="option"),
            pytest.param("-j", "starts with '-'", id="short_option"),
            pytest.param(["4242", "--me"], "starts with '-'", id="option_in_a_list"),
            pytest.param("42\n43", "a line break", id="newline"),
            pytest.param("42\r", "a line break", id="carriage_return"),
            pytest.param("a\x00b", "NUL byte", id="nul"),
            pytest.param("", "is empty", id="empty"),
            pytest.param(["4242", ""], "is empty", id="empty_in_a_list"),
        ],
    )
    def test_hostile_values_are_refused_with_the_callers_error(self, value, message) -> None:
        with pytest.raises(LaunchError, match=message) as info:
            command("scancel -- {ids}", ids=value, error=LaunchError)
        assert "\n" not in info.value.message

    def test_the_default_error_is_a_usage_error(self) -> None:
        with pytest.raises(RlgateError) as info:
            command("git -C {path} status", path="--upload-pack=touch /tmp/x")
        assert info.value.exit_code == 2

    @pytest.mark.parametrize(
        ("template", "values"),
        [
            pytest.param("scancel {ids", {"ids": "1"}, id="stray_brace"),
            pytest.param("scancel {ids}", {}, id="missing_value"),
            pytest.param("scancel", {"ids": "1"}, id="unused_value"),
            pytest.param("scancel {0}", {}, id="positional_field"),
            pytest.param("a\nb", {}, id="two_lines"),
        ],
    )
    def test_templates_are_rlgates_own_one_line_source(self, template, values) -> None:
        with pytest.raises(ValueError):
            command(template, **values)


class TestOptions:
    def test_validated_long_options_pass_as_options(self) -> None:
        cmd = command(
            "sbatch --parsable {extra} {script}",
            extra=Options(("--exclusive", "--constraint=h100&ib")),
            script="ray.sub",
        )
        assert cmd.argv == (
            "sbatch",
            "--parsable",
            "--exclusive",
            "--constraint=h100&ib",
            "ray.sub",
        )

    @pytest.mark.parametrize("item", ["-x", "--Wrap", "--wrap=a\nb", "ray.sub", "--"])
    def test_anything_else_is_refused(self, item: str) -> None:
        with pytest.raises(LaunchError, match="is not one long option"):
            command("sbatch {extra}", extra=Options((item,)), error=LaunchError)


def _subprocess_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if isinstance(owner, ast.Name) and owner.id == "subprocess":
            if node.func.attr in {"run", "Popen", "call", "check_call", "check_output"}:
                yield node
        if isinstance(owner, ast.Name) and owner.id == "os":  # a shell or exec: never
            if node.func.attr in {"system", "popen"} or node.func.attr.startswith(
                ("exec", "spawn", "posix_spawn")
            ):
                yield ast.Call(func=node.func, args=[], keywords=[], lineno=node.lineno)


def test_every_subprocess_call_in_rlgate_runs_a_built_command() -> None:
    """The mechanism: no argv reaches a process unless :func:`command` built it."""
    found, wrong = 0, []
    for path in sorted(SRC.rglob("*.py")):
        for call in _subprocess_calls(ast.parse(path.read_text(encoding="utf-8"))):
            found += 1
            first = call.args[0] if call.args else None
            if not (isinstance(first, ast.Attribute) and first.attr == "argv"):
                wrong.append(f"{path.relative_to(SRC)}:{call.lineno}")
            if any(k.arg == "shell" for k in call.keywords):
                wrong.append(f"{path.relative_to(SRC)}:{call.lineno} (shell=)")
    assert found >= 8  # the scan sees the calls (sbatch, squeue, sacct, scancel, git, ...)
    assert wrong == []
