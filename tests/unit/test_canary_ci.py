"""The CI canary: ci/install.sh's record, the e2e test's skip/fail rule, the newest stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from rlgate.canary import ci
from rlgate.core.errors import RlgateError

DATA = Path(__file__).parent / "data" / "canary"
ROOT = Path(__file__).parents[2]


def _pypi(name: str) -> dict:
    # trimmed from https://pypi.org/pypi/NAME/json (2026-12-02): releases' files and yanked
    return json.loads((DATA / f"pypi-{name}.json").read_text())


def test_newest_vllm_and_the_newest_transformers_it_accepts() -> None:
    vllm = _pypi("vllm")
    assert ci.newest_release(vllm) == Version("0.33.0")
    spec = ci.accepted_spec(vllm, "transformers")
    assert spec == Requirement("transformers<5.20.0,>=5.16.1")
    transformers = _pypi("transformers")
    assert ci.newest_release(transformers) == Version("5.24.0")
    assert ci.newest_accepted(transformers, spec) == Version("5.19.0")
    assert ci.newest_accepted(transformers, None) == Version("5.24.0")


def test_yanked_prereleases_and_fileless_releases_are_never_newest() -> None:
    doc = {
        "releases": {
            "0.34.0": [{"filename": "vllm-0.34.0.tar.gz", "yanked": True}],
            "0.35.0rc1": [{"filename": "vllm-0.35.0rc1.tar.gz", "yanked": False}],
            "0.36.0": [],
            "not-a-version": [{"filename": "x", "yanked": False}],
            "0.33.0": [{"filename": "vllm-0.33.0.tar.gz", "yanked": False}],
        }
    }
    assert ci.newest_release(doc) == Version("0.33.0")
    with pytest.raises(RlgateError, match="accepts"):
        ci.newest_accepted(doc, Requirement("vllm>=0.40"))
    with pytest.raises(RlgateError, match="releases"):
        ci.newest_release({"info": {}})


def test_not_requested_is_recorded_and_skips_with_the_reason(tmp_path: Path) -> None:
    assert ci.requested_canary(tmp_path, {})[0] is None
    assert "no canary requested" in ci.requested_canary(tmp_path, {})[2]
    assert ci.prepare(tmp_path / ci.CI_CACHE, requested=False) == {"requested": False}
    cache, record, why = ci.requested_canary(tmp_path, {})
    assert (cache, record) == (None, None)
    assert "RLGATE_CANARY=0" in why
    assert ci.requested_canary(tmp_path, {"RLGATE_CANARY": "0"})[2] == "RLGATE_CANARY=0"
    by_hand = ci.requested_canary(tmp_path, {"RLGATE_CANARY_CACHE": "/c"})
    assert by_hand == (Path("/c"), None, "")


@pytest.mark.parametrize(
    "text", ["{", '{"requested": "yes"}', '{"requested": true, "stack": "vllm==0.26.0"}', "[]"]
)
def test_a_corrupt_record_is_an_error_not_a_skip(tmp_path: Path, text: str) -> None:
    (tmp_path / ci.CI_CACHE).mkdir(parents=True)
    (tmp_path / ci.CI_CACHE / ci.RECORD).write_text(text)
    with pytest.raises(RlgateError, match="install record"):
        ci.requested_canary(tmp_path, {})


def _run_e2e(root: Path, record: dict | None, *, select: str) -> subprocess.CompletedProcess:
    """The real e2e test file run by pytest inside a stand-in checkout ``root``."""
    (root / "tests" / "unit").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "unit" / "test_canary_e2e.py", root / "tests" / "unit")
    if record is not None:
        (root / ci.CI_CACHE).mkdir(parents=True)
        (root / ci.CI_CACHE / ci.RECORD).write_text(json.dumps(record))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLGATE_CANARY")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-k", select,
         str(root / "tests" / "unit" / "test_canary_e2e.py")],
        capture_output=True, text=True, check=False, cwd=root, env=env, timeout=300,
    )  # fmt: skip


def test_a_requested_environment_that_is_gone_fails_the_suite(tmp_path: Path) -> None:
    record = {"requested": True, "stack": "vllm==0.26.0", "environment": str(tmp_path / "gone")}
    proc = _run_e2e(tmp_path / "co", record, select="requested_environment")
    assert proc.returncode == 1, proc.stdout
    assert "1 failed" in proc.stdout
    assert "it is gone" in proc.stdout


def test_a_broken_environment_fails_and_a_complete_one_passes(tmp_path: Path) -> None:
    env = tmp_path / "env"
    env.mkdir()
    (env / "rlgate-canary.json").write_text(json.dumps({"key": "k"}))
    record = {"requested": True, "stack": "vllm==0.26.0", "environment": str(env)}
    proc = _run_e2e(tmp_path / "a", record, select="requested_environment")
    assert proc.returncode == 1 and "is broken" in proc.stdout, proc.stdout
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    proc = _run_e2e(tmp_path / "b", record, select="requested_environment")
    assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("record", "reason"),
    [(None, "no canary requested"), ({"requested": False}, "ran with RLGATE_CANARY=0")],
)
def test_no_request_skips_both_tests_with_the_reason(
    tmp_path: Path, record: dict | None, reason: str
) -> None:
    proc = _run_e2e(tmp_path / "co", record, select="canary or requested")
    assert proc.returncode == 0, proc.stdout
    assert "2 skipped" in proc.stdout
    assert reason in proc.stdout


def test_prepare_cli_records_an_off_request(tmp_path: Path) -> None:
    assert ci.main(["prepare", "--off", "--cache-dir", str(tmp_path)]) == 0
    assert json.loads((tmp_path / ci.RECORD).read_text())["requested"] is False
