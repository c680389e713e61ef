"""``rlgate.core.commands``: every external command is built from validated tokens, in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgate.core.commands import Command, command
from rlgate.core.errors import LaunchError, RlgateError


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
