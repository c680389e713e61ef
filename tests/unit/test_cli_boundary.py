"""The CLI's one error boundary: exit codes that mean one thing each, output safe to print."""

import pytest

from rlgate.cli.app import _Exit, _handle_errors, main
from rlgate.core.errors import ExitCode, SweError


class TestHandleErrors:
    def test_user_error_exits_with_its_code_and_one_message(self, capsys):
        with pytest.raises(_Exit) as stop, _handle_errors():
            raise SweError("dataset x.json: duplicate instance_id a__b-1", hint="dedupe it")
        assert stop.value.code == ExitCode.USAGE
        assert capsys.readouterr().err == (
            "rlgate: error: dataset x.json: duplicate instance_id a__b-1\n  hint: dedupe it\n"
        )

    def test_a_bug_exits_70_never_1_and_says_how_to_report_it(self, capsys, monkeypatch):
        monkeypatch.delenv("RLGATE_DEBUG", raising=False)
        with pytest.raises(_Exit) as stop, _handle_errors():
            {}["missing"]  # an internal KeyError
        assert stop.value.code == ExitCode.INTERNAL == 70
        err = capsys.readouterr().err
        assert "internal error" in err and "RLGATE_DEBUG=1" in err
        assert "Traceback" not in err

    def test_rlgate_debug_shows_the_traceback_of_a_bug(self, capsys, monkeypatch):
        monkeypatch.setenv("RLGATE_DEBUG", "1")
        with pytest.raises(_Exit), _handle_errors():
            raise ZeroDivisionError("boom")
        assert "Traceback" in capsys.readouterr().err

    def test_a_missing_optional_module_exits_3_naming_the_extra(self, capsys):
        """An extra not installed is the environment (3), not a bug in rlgate (70)."""
        with pytest.raises(_Exit) as stop, _handle_errors():
            import rlgate_absent_dependency  # noqa: F401  (a real failed import)
        assert stop.value.code == ExitCode.INFRA  # a base dependency missing: a broken install
        assert "reinstall rlgate" in capsys.readouterr().err
        for name, extra in (("vllm", "functional"), ("ray.job_submission", "launch")):
            with pytest.raises(_Exit) as stop, _handle_errors():
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            assert stop.value.code == ExitCode.INFRA == 3
            top = name.split(".")[0]
            assert capsys.readouterr().err == (
                f"rlgate: error: this needs the Python module {top!r}, which is not installed\n"
                f"  hint: pip install 'rlgate[{extra}]' (ci/install.sh installs every extra)\n"
            )

    def test_a_missing_module_of_rlgate_itself_is_a_bug(self, capsys, monkeypatch):
        monkeypatch.delenv("RLGATE_DEBUG", raising=False)
        with pytest.raises(_Exit) as stop, _handle_errors():
            raise ModuleNotFoundError("No module named 'rlgate.nope'", name="rlgate.nope")
        assert stop.value.code == ExitCode.INTERNAL and "internal error" in capsys.readouterr().err

    def test_error_message_control_characters_are_made_visible(self, capsys):
        with pytest.raises(_Exit), _handle_errors():
            raise SweError("bad id a\x1b[2K\rGO")
        assert capsys.readouterr().err == "rlgate: error: bad id a\\x1b[2K\\x0dGO\n"


class TestOutputPaths:
    def test_json_output_that_is_a_directory_exits_2_naming_it(self, tmp_path, capsys):
        code = main(["swe", "power", "--n", "500", "--json", str(tmp_path)])
        assert code == ExitCode.USAGE
        assert f"--json {tmp_path} is a directory" in capsys.readouterr().err
