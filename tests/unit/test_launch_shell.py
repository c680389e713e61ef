"""No input becomes shell code: the generated scripts are run with hostile names and values.

Every script rlgate generates (the local wrapper, the Slurm submission ``sbatch.sh``, the
driver command) goes through :mod:`rlgate.launch.shell`. The proof here is behavioural: a recipe
whose *file name* carries a command (after a newline, ``;``, ``$(...)``, backticks, quotes, a
carriage return or a Unicode line separator) and a site ``env:`` value that does the same are
launched for real (local backend) or their sbatch script is executed with a stand-in
``sbatch`` on PATH that runs COMMAND the way ray.sub does. The injected command would create a
marker file; it must not exist anywhere, and the driver must receive the recipe path and the
env value byte for byte.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.core.errors import LaunchError
from rlgate.launch.manifest import Backend
from rlgate.launch.plan import backend_for, launch, plan_launch
from rlgate.launch.shell import Line, Words, code, comment, export, require_env, script
from rlgate.launch.site import SiteConfig
from rlgate.launch.slurm import render_sbatch_script

from .helpers.launch_fixtures import (
    ONE_NODE,
    nemo_rl_checkout,
    recipe_named,
    slurm_site,
    swe_env,
    wait_for,
)

MARKER = "PWNED"
HOSTILE_NAMES = {
    "newline": f"r\ntouch {MARKER} #",
    "semicolon": f"r; touch {MARKER}; #",
    "command_substitution": f"r$(touch {MARKER})",
    "backticks": f"r`touch {MARKER}`",
    "quotes": f"r'\"; touch {MARKER}; echo \"'",
    "carriage_return": f"r\rtouch {MARKER} #",
    "line_separator": f"r\u2028touch {MARKER} #\u2029",
}
# A site env value that would run a command if it were not quoted.
HOSTILE_VALUE = f"$(touch {MARKER})`touch {MARKER}`'\n\"; touch {MARKER}; #"
# The driver: records the argv and environment it receives (python -c CODE --config PATH ...).
RECORDER = (
    sys.executable,
    "-c",
    "import json, os, sys; open(os.environ['RLGATE_TEST_RECORD'], 'w').write(json.dumps("
    "{'argv': sys.argv[1:], 'value': os.environ.get('RLGATE_TEST_VALUE'), 'cwd': os.getcwd()}))",
)


def hostile_env(tmp_path: Path) -> dict[str, str]:
    record = tmp_path / "record.json"
    extra = {"RLGATE_TEST_RECORD": str(record), "RLGATE_TEST_VALUE": HOSTILE_VALUE}
    return {**swe_env(tmp_path), **extra}


def markers(tmp_path: Path) -> list[Path]:
    return [p for p in tmp_path.rglob(f"*{MARKER}*") if not p.name.endswith(".yaml")]


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_local_wrapper_runs_no_injected_command_and_passes_values_intact(
    tmp_path: Path, name: str
) -> None:
    recipe = recipe_named(tmp_path, name)
    site = SiteConfig.model_validate({"env": hostile_env(tmp_path)})
    plan = plan_launch(
        recipe,
        backend=Backend.LOCAL,
        site=site,
        overrides=ONE_NODE,
        entrypoint=RECORDER,
        run_dir=tmp_path / "run",
    )
    manifest = launch(plan)
    backend = backend_for(Backend.LOCAL)
    wait_for(lambda: backend.poll(manifest).phase.terminal)
    state = backend.poll(manifest)
    log = (plan.run_dir / "driver.log").read_text()
    assert (state.phase.value, state.exit_status) == ("succeeded", 0), log
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"][:2] == ["--config", str(recipe)]  # the real path, byte for byte
    assert record["value"] == HOSTILE_VALUE
    assert markers(tmp_path) == []
    assert not Path(MARKER).exists()


def fake_slurm(tmp_path: Path) -> Path:
    """A stand-in ``sbatch`` (and ``srun``) that does what ray.sub does with COMMAND."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(
        "#!/usr/bin/env bash\n"
        'printf "%s\\n" "$@" > "$BASE_LOG_DIR/sbatch.argv"\n'
        'mkdir -p "$BASE_LOG_DIR/4242-logs"\n'
        'log="$BASE_LOG_DIR/4242-logs"\n'
        'printf \'%s\' "$COMMAND" > "$log/driver_command.sh"\n'
        'bash "$log/driver_command.sh" > "$log/ray-driver.log" 2>&1\n'
        "echo 4242\n"
    )
    srun = bin_dir / "srun"
    srun.write_text("#!/usr/bin/env bash\nexit 0\n")
    for tool in (sbatch, srun):
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return bin_dir


@pytest.mark.parametrize("name", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES.keys())
def test_sbatch_script_runs_no_injected_command_and_passes_values_intact(
    tmp_path: Path, name: str
) -> None:
    checkout = nemo_rl_checkout(tmp_path)[0]
    recipe = recipe_named(tmp_path, name)
    raw = slurm_site(tmp_path).model_dump(mode="json")
    site = SiteConfig.model_validate({**raw, "env": hostile_env(tmp_path)})
    plan = plan_launch(
        recipe,
        backend=Backend.SLURM,
        site=site,
        nemo_rl_dir=checkout,
        entrypoint=RECORDER,
        run_dir=tmp_path / "runs" / "hostile",
    )
    text = render_sbatch_script(plan)
    path = tmp_path / "sbatch.sh"
    path.write_text(text)
    syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "PATH": f"{fake_slurm(tmp_path)}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(["bash", str(path)], cwd=cwd, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "4242"
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"][:2] == ["--config", str(recipe)]
    assert record["value"] == HOSTILE_VALUE
    assert record["cwd"] == str(checkout)
    argv = (plan.run_dir / "slurm" / "sbatch.argv").read_text().splitlines()
    assert argv[-1] == "ray.sub" and "--job-name=acct_llm:hostile" in argv
    assert markers(tmp_path) == []


class TestShellBuilder:
    def test_code_quotes_every_value_as_one_word(self) -> None:
        line = code("cd {dir} && {argv}", dir="/a b/$(x)", argv=Words(["echo", "a;b", "`c`"]))
        assert line == "cd '/a b/$(x)' && echo 'a;b' '`c`'"
        out = subprocess.run(["bash", "-c", f"{line.split(' && ')[1]}"], capture_output=True)
        assert out.stdout == b"a;b `c`\n"

    def test_comment_cannot_end_early(self) -> None:
        text = "a\nb\rc\u2028d\x85e\x1b[2Kf"
        line = comment(text)
        assert "\n" not in line and "\r" not in line and "\u2028" not in line
        assert line == "# a\\x0ab\\x0dc\\u2028d\\x85e\\x1b[2Kf"

    @pytest.mark.parametrize("name", ["X; touch y; Y", "A=B", "1X", "", "A B", "A\nB"], ids=repr)
    def test_export_refuses_a_name_that_is_not_a_posix_name(self, name: str) -> None:
        with pytest.raises(LaunchError, match="not an environment variable name"):
            export(name, "v")
        with pytest.raises(LaunchError, match="not an environment variable name"):
            require_env(name)

    def test_export_quotes_the_value(self) -> None:
        line = export("HF_HOME", "/x'; touch y; '")
        out = subprocess.run(
            ["bash", "-c", f'{line}; printf %s "$HF_HOME"'], capture_output=True, text=True
        )
        assert out.stdout == "/x'; touch y; '"

    def test_nul_byte_is_refused(self) -> None:
        with pytest.raises(LaunchError, match="NUL byte"):
            code("cd {d}", d="/a\x00b")
        with pytest.raises(LaunchError, match="NUL byte"):
            export("A", "\x00")

    def test_script_accepts_only_generated_lines(self) -> None:
        assert script(code("true")) == "#!/usr/bin/env bash\ntrue\n"
        with pytest.raises(TypeError, match="not a generated shell line"):
            script(code("true"), "echo raw")  # type: ignore[arg-type]
        assert isinstance(code("true"), Line)

    @pytest.mark.parametrize(
        ("template", "values"),
        [
            pytest.param("a\nb", {}, id="two_lines"),
            pytest.param("cd {d!r}", {"d": "x"}, id="conversion"),
            pytest.param("cd {d}", {}, id="missing_value"),
            pytest.param("cd", {"d": "x"}, id="unused_value"),
        ],
    )
    def test_template_misuse_is_a_bug_not_output(self, template: str, values: dict) -> None:
        with pytest.raises(ValueError):
            code(template, **values)
