"""One real canary end to end, ``rlgate canary --with vllm==0.26.0`` (half an hour).

Runs when the candidate environment was prepared: by ``ci/install.sh`` with
``RLGATE_CANARY=1`` (``.ci/run`` sets it) into the checkout's ``.cache/rlgate-canary``, whose
install record (``rlgate.canary.ci``) says so, or by hand with ``RLGATE_CANARY_CACHE`` (an
environment built there for this source tree is reused; otherwise it is built, ~1-2 min
with a warm uv cache). Skipped, with the reason, when no canary was requested (no record,
``requested: false``, or ``RLGATE_CANARY=0``); a requested environment that is missing or
broken FAILS, so CI never skips the canary it asked for. The functional tier then runs in
both stacks (~15 min each on 2 cores). Needs ``RLGATE_TOKENIZERS``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlgate.canary.ci import requested_canary
from rlgate.canary.env import marker_ok

ROOT = Path(__file__).parents[2]
TOKENIZERS = os.environ.get("RLGATE_TOKENIZERS")


# a corrupt install record fails collection: never a silent skip
CACHE, RECORD_DOC, WHY_NOT = requested_canary(ROOT, os.environ)

pytestmark = pytest.mark.skipif(CACHE is None, reason=WHY_NOT or "no canary requested")


def test_the_requested_environment_is_there() -> None:
    """ci/install.sh's record names a complete environment: missing or broken is a failure."""
    if RECORD_DOC is None:
        pytest.skip("RLGATE_CANARY_CACHE: the environment is built by the canary itself")
    env = Path(RECORD_DOC["environment"])
    marker = env / "rlgate-canary.json"
    assert marker.is_file(), f"ci/install.sh built the canary environment {env}; it is gone"
    key = json.loads(marker.read_text(encoding="utf-8")).get("key", "")
    assert marker_ok(env, key), f"the canary environment {env} is broken (no interpreter)"
    assert RECORD_DOC["stack"] == "vllm==0.26.0", RECORD_DOC


def test_a_real_canary_against_vllm_0_26_0(tmp_path: Path) -> None:
    assert TOKENIZERS, "a requested canary needs RLGATE_TOKENIZERS (the README's test command)"
    recipe = ROOT / "recipes" / "reference"
    out = tmp_path / "canary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "canary", "--with", "vllm==0.26.0",
         "--cache-dir", str(CACHE), "--tokenizers", str(TOKENIZERS), "--json", str(out),
         "--junit", str(tmp_path / "canary.xml"), "--work-dir", str(tmp_path / "work"),
         *[a for r in sorted(recipe.glob("*.yaml")) for a in ("--recipe", str(r))]],
        capture_output=True,
        text=True,
        check=False,
        timeout=4 * 3600,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(out.read_text())
    assert doc["stack"] == "vllm==0.26.0"
    assert "tokenspeed-mla==0.1.2" in doc["relaxed"]  # vllm 0.26.0 pins another build
    assert doc["regression"] is (proc.returncode == 1)
    built = Path(doc["environment"])
    assert built.parent.resolve() == Path(CACHE).resolve()
    version = subprocess.run(
        [str(built / "bin" / "python"), "-c", "import vllm; print(vllm.__version__)"],
        capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert version.stdout.strip() == "0.26.0"
    assert (tmp_path / "work" / "pinned" / "functional.xml").is_file()
    assert (tmp_path / "work" / "candidate" / "functional.xml").is_file()
