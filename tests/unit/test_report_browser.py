"""The report opens and renders in a real browser: a headless Chromium screenshot.

Chromium is a system package (Debian: `apt-get install -y --no-install-recommends chromium`,
which `.ci/run` installs). Its absence is a failure, not a skip: an unrendered report is
exactly what this test guards against.
"""

import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from .helpers.demo_build import demo_without_functional

WIDTH, HEIGHT = 1280, 2000
INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium"
# Started as the machine's probe does: no sandbox (root in CI), no network side-channels.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(f"Chromium is not on PATH; install it: {INSTALL}", pytrace=False)


def _colour(rgb: np.ndarray, hex_colour: str, tolerance: int = 6) -> int:
    want = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(rgb.astype(int) - want).max(axis=-1) <= tolerance).sum())


class TestReportInBrowser:
    def test_report_html_renders_in_headless_chromium(self, tmp_path):
        result = demo_without_functional()
        page = result.files["html"]
        shot = tmp_path / "report.png"
        cmd = [
            _chromium(),
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            f"--window-size={WIDTH},{HEIGHT}",
            page.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert shot.is_file(), f"no screenshot (exit {proc.returncode}): {proc.stderr[-2000:]}"
        image = Image.open(shot).convert("RGB")
        assert image.size == (WIDTH, HEIGHT)
        rgb = np.asarray(image)
        assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 200, "the page rendered blank"
        # The INCOMPLETE badge and the DEMO banner (CSS); the plots (base64 PNGs): run lines
        # in matplotlib blue and the reward band (#a6cee3 at alpha 0.6 over white).
        assert _colour(rgb, "#bf8700") > 5_000, "verdict badge not rendered"
        assert _colour(rgb, "#fff4ce") > 5_000, "DEMO banner not rendered"
        assert _colour(rgb, "#1f77b4", tolerance=20) > 2_000, "plots not rendered"
        assert _colour(rgb, "#c8e1ee", tolerance=10) > 5_000, "reward band not rendered"
