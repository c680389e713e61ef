"""rlgate canary: parsing --with, the requirement/constraint steps, exit 2 on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from rlgate.canary.stack import (
    CanaryError,
    constraints_without,
    named_constraints,
    parse_moves,
    parse_with,
    requirements_with,
    stack_label,
)
from rlgate.core.errors import ExitCode

# uv 0.13.9's own refusals, verbatim (resolving vllm==0.26.0 against ci/constraints.txt)
UV_TOKENSPEED = (
    "error: No solution found when resolving dependencies\n  cause: Because vllm==0.26.0 "
    "depends on tokenspeed-mla{sys_platform == 'linux'}==0.1.8 and tokenspeed-mla"
    "{sys_platform == 'linux'}==0.1.2, we can conclude that vllm==0.26.0 cannot be used.\n"
    "         And because you require vllm==0.26.0, we can conclude that your requirements "
    "are unsatisfiable."
)
UV_PROTOBUF = (
    "error: No solution found when resolving dependencies\n  cause: Because "
    "nvidia-cutlass-dsl-libs-base==4.6.0 depends on protobuf>=6.30.2,<7 and "
    "nvidia-cutlass-dsl==4.6.0 depends on nvidia-cutlass-dsl-libs-base==4.6.0, we can "
    "conclude that nvidia-cutlass-dsl==4.6.0 depends on protobuf>=6.30.2,<7.\n         And "
    "because vllm==0.26.0 depends on nvidia-cutlass-dsl[cu13]==4.6.0 and tensorboard>=2.21.0 "
    "depends on protobuf==7.36.2, we can conclude that tensorboard>=2.21.0 and vllm==0.26.0 "
    "are incompatible.\n         And because you require tensorboard==2.21.0 and "
    "vllm==0.26.0, we can conclude that your requirements are unsatisfiable."
)
PINS = [
    "tokenspeed-mla==0.1.2",
    "protobuf==7.36.2",
    "tensorboard==2.21.0",
    "nvidia-cutlass-dsl==4.5.2",
    "typing_extensions==4.16.0",
    "torch==2.11.0",
]


class TestParseWith:
    def test_an_exact_version_of_a_known_package(self) -> None:
        move = parse_with("vllm==0.26.0")
        assert (move.name, move.version, move.requirement) == (
            "vllm",
            Version("0.26.0"),
            "vllm==0.26.0",
        )
        assert parse_with("NeMo_Gym==0.7.0").name == "nemo-gym"

    @pytest.mark.parametrize(
        ("text", "says"),
        [
            ("numpy==2.0", "does not know 'numpy'"),
            ("vllm==banana", "is not a version"),
            ("vllm>=0.26", "not PKG==VERSION or PKG@PATH"),
            ("vllm", "not PKG==VERSION or PKG@PATH"),
            ("vllm@/no/such/file.whl", "neither a .whl file nor a source checkout"),
            ("nemo-gym@/tmp", "installed by version only"),
        ],
    )
    def test_bad_input_is_refused(self, text: str, says: str) -> None:
        with pytest.raises(CanaryError, match=says) as err:
            parse_with(text)
        assert err.value.exit_code is ExitCode.USAGE

    def test_a_wheel_must_be_the_package_s(self, tmp_path: Path) -> None:
        wheel = tmp_path / "transformers-5.12.0-py3-none-any.whl"
        wheel.write_bytes(b"PK")
        with pytest.raises(CanaryError, match="is not a vllm wheel"):
            parse_with(f"vllm@{wheel}")
        move = parse_with(f"transformers@{wheel}")
        assert move.requirement == f"transformers @ {wheel.resolve().as_uri()}"

    def test_a_source_checkout(self, tmp_path: Path) -> None:
        (tmp_path / "pyproject.toml").write_text("[project]\nname='vllm'\n")
        assert parse_with(f"vllm@{tmp_path}").path == tmp_path.resolve()

    def test_moves_are_sorted_once_each_and_at_least_one(self) -> None:
        moves = parse_moves(["vllm==0.29.0", "transformers==5.12.0"])
        assert stack_label(moves) == "transformers==5.12.0,vllm==0.29.0"
        with pytest.raises(CanaryError, match="moves vllm twice"):
            parse_moves(["vllm==0.29.0", "vllm==0.30.0"])
        with pytest.raises(CanaryError, match="no candidate stack"):
            parse_moves([])


class TestResolutionSteps:
    def test_the_moved_requirement_replaces_the_pinned_one(self) -> None:
        base = ["pytest>=9", "vllm==0.25.1", "transformers<5.9,>=5.5"]
        moves = parse_moves(["vllm==0.26.0", "tokenizers==0.23.0", "nemo-gym==0.7.0"])
        assert requirements_with(base, moves) == [
            "pytest>=9",
            "vllm==0.26.0",
            "transformers<5.9,>=5.5",
            "tokenizers==0.23.0",  # added; nemo-gym is installed alone, never resolved
        ]

    def test_constraints_lose_the_moved_packages_and_comments(self) -> None:
        lines = ["# pins", "vllm==0.25.1", "Torch==2.11.0  # the pin's", ""]
        assert constraints_without(lines, ["vllm"]) == ["Torch==2.11.0"]

    def test_the_pins_uv_names_are_found_in_its_real_messages(self) -> None:
        assert named_constraints(UV_TOKENSPEED, PINS) == ["tokenspeed-mla==0.1.2"]
        assert named_constraints(UV_PROTOBUF, PINS) == ["protobuf==7.36.2", "tensorboard==2.21.0"]

    def test_a_name_is_matched_whole_and_across_spellings(self) -> None:
        assert named_constraints("you require typing-extensions==4.16.0", PINS) == [
            "typing_extensions==4.16.0"
        ]
        assert named_constraints("depends on torch==2.11.01 or xtorch==2.11.0", PINS) == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "canary", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--with", "numpy==2.0"),
        ("--with", "vllm==not-a-version"),
        (),
        ("--with", "vllm==0.26.0", "--with", "vllm==0.27.0"),
        ("--with", "vllm==0.26.0", "--tokenizers", "/no/such/dir"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(args: tuple[str, ...]) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rlgate: error: ")]
    assert len(errors) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
