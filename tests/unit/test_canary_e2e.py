"""Opt-in: one real canary end to end, ``rlgate canary --with vllm==0.26.0`` (minutes).

Set ``RLGATE_CANARY_CACHE`` to the canary cache directory (an environment built there for
this source tree is reused; otherwise it is built, ~2 min with a warm uv cache) and
``RLGATE_TOKENIZERS``. The functional tier then runs in both stacks (~14 min each on 2 cores).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CACHE = os.environ.get("RLGATE_CANARY_CACHE")
TOKENIZERS = os.environ.get("RLGATE_TOKENIZERS")

pytestmark = pytest.mark.skipif(
    not CACHE or not TOKENIZERS,
    reason="opt-in: set RLGATE_CANARY_CACHE (and RLGATE_TOKENIZERS) to run a real canary",
)


def test_a_real_canary_against_vllm_0_26_0(tmp_path: Path) -> None:
    recipe = Path(__file__).parents[2] / "recipes" / "reference"
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
    assert built.parent == Path(CACHE).resolve() or built.parent == Path(CACHE)
    version = subprocess.run(
        [str(built / "bin" / "python"), "-c", "import vllm; print(vllm.__version__)"],
        capture_output=True, text=True, check=False, env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert version.stdout.strip() == "0.26.0"
    assert (tmp_path / "work" / "pinned" / "functional.xml").is_file()
    assert (tmp_path / "work" / "candidate" / "functional.xml").is_file()
