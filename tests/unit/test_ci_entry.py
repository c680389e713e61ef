"""CI runs the README's test command verbatim (the brief: `.ci/run` calls the README's command)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text[text.index("## Set-up") :]
    block = setup[setup.index("```bash") : setup.index("```", setup.index("```bash") + 3)]
    (command,) = [ln for ln in block.splitlines() if ln.startswith("HF_HUB_OFFLINE=1 ")]
    return command


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    command = _readme_test_command()
    assert "-m pytest" in command
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in run.splitlines()]
    assert command in lines
    # the other branch (shared data elsewhere) differs only in where the tokenizers are
    other = command.replace("../shared/tokenizers", '"$SHARED/tokenizers"')
    assert other in lines


def test_ci_installs_with_the_readmes_install_step() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^ci/install\.sh && ", text, re.M)
    assert re.search(r"^RLGATE_CANARY=\$\{RLGATE_CANARY:-1\} ci/install\.sh$",
                     (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)  # fmt: skip
