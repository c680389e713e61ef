"""rlgate canary's environments: a real (small) uv build, its marker, a half-built entry."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.canary import env as canary_env
from rlgate.canary.env import MARKER, Resolution, build, cache_key, marker_ok
from rlgate.core.errors import RlgateError

pytest.importorskip("uv", reason="the canary extra (uv) is not installed")

SMALL = Resolution(lock="packaging==26.4\n", relaxed=(), gym="nemo-gym==0.7.0", seconds=0.0)


def test_the_environment_rlgate_runs_in_is_never_a_target() -> None:
    with pytest.raises(RlgateError, match="environment rlgate runs in"):
        build(SMALL, Path(sys.prefix) / "canary-cache")


def test_a_half_built_entry_is_rebuilt_and_a_complete_one_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    key = cache_key(SMALL)
    half = cache / key[:24]
    (half / "bin").mkdir(parents=True)
    (half / "bin" / "python").write_text("#!/bin/sh\nexit 1\n")  # what a dead build left
    (half / "junk").write_text("half-built")
    assert not marker_ok(half, key)

    first = build(SMALL, cache, label="packaging==26.4")
    assert first.path == half and not first.reused
    assert not (half / "junk").exists()
    assert marker_ok(half, key)
    marker = json.loads((half / MARKER).read_text())
    assert marker["key"] == key and marker["stack"] == "packaging==26.4"
    assert not marker_ok(half, "0" * 64)  # another stack's key never matches
    probe = subprocess.run(
        [str(first.python), "-c", "import packaging, rlgate, nemo_gym, sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).resolve() == half.resolve()  # relocated, and isolated
    assert Path(sys.prefix).resolve() != half.resolve()
    assert [p.name for p in cache.iterdir()] == [half.name]  # no temporary directory left

    second = build(SMALL, cache)
    assert second.reused and second.path == half


def test_a_key_depends_on_the_lock_and_rlgate_s_source() -> None:
    other = Resolution("packaging==26.3\n", (), "nemo-gym==0.7.0", 0.0)
    assert cache_key(SMALL) != cache_key(other)
    assert len(canary_env.source_digest()) == 64
