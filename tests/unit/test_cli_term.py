"""The terminal, in a real pseudo-terminal: progress shown then cleared, colour only there.

`python -m rlgate.cli swe compare` runs with its stdout and stderr on a pty (os.openpty),
on a pipe, or in files; what it wrote is read back byte for byte.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import numpy as np
import pytest

from .helpers import swe_inputs as si

SRC = Path(__file__).resolve().parents[2] / "src"
SGR = re.compile(rb"\x1b\[[0-9;]*m")
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] swe compare: \d of 4: ", re.M)


@pytest.fixture(scope="module")
def arms(tmp_path_factory):
    root = tmp_path_factory.mktemp("term")
    ids = [r["instance_id"] for r in si.verified_rows()]
    rng = np.random.default_rng(11)
    base = rng.random(500) < 0.4
    better = base | (rng.random(500) < 0.12)
    paths = []
    for name, vec in (("base", base), ("better", better)):
        paths.append(root / f"{name}.json")
        paths[-1].write_text(
            json.dumps({i: {"resolved": bool(v)} for i, v in zip(ids, vec, strict=True)})
        )
    return paths


def _argv(arms, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "rlgate.cli", "swe", "compare", "--before", str(arms[0]),
        "--after", str(arms[1]), "--dataset", str(si.DATASET), "--resamples", "1000",
        "--json", str(out / "out.json"), "--junit", str(out / "out.xml"),
    ]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(PYTHONPATH=str(SRC), TERM="xterm-256color", **extra)
    return env


def _in_pty(argv: list[str], env: dict[str, str], *, stdout_pipe: bool = False):
    """Run ``argv`` with stderr (and stdout unless ``stdout_pipe``) on a fresh pty."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=subprocess.PIPE if stdout_pipe else slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    tty = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for 120 s: {tty[-500:]!r}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        tty += chunk
    piped = b""
    if proc.stdout is not None:
        piped = proc.stdout.read()
        proc.stdout.close()
    os.close(master)
    return proc.wait(), tty, piped


def _screen(data: bytes) -> list[str]:
    """The lines a terminal shows after ``data`` (carriage return overwrites; SGR dropped)."""
    lines, line, col = [], [], 0
    text = SGR.sub(b"", data).replace(b"\x1b[K", b"").replace(b"\x1b[2K", b"")
    for ch in text.decode("utf-8", "replace"):
        if ch == "\n":
            lines.append("".join(line).rstrip())
            line, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            line[col:col + 1] = [ch]  # fmt: skip
            col += 1
    lines.append("".join(line).rstrip())
    return [ln for ln in lines if ln]


def test_on_a_terminal_progress_is_shown_then_cleared_and_verdicts_are_coloured(arms, tmp_path):
    code, tty, _ = _in_pty(_argv(arms, tmp_path), _env())
    assert code == 0, tty
    assert b"reading the before arm" in tty and b"comparing (1000 resamples)" in tty
    screen = _screen(tty)
    assert not any("swe compare:" in ln for ln in screen), screen  # the bar was erased
    assert screen[0] == "SWE gate verdict: IMPROVED", screen  # output intact, not overwritten
    assert any(ln.startswith("  PASS  significance") for ln in screen)
    assert b"\x1b[32mPASS\x1b[0m" in tty and b"\x1b[1;32mIMPROVED\x1b[0m" in tty
    for written in ("out.json", "out.xml"):  # files are never coloured
        assert b"\x1b" not in (tmp_path / written).read_bytes()


def test_no_color_keeps_the_progress_but_drops_every_colour(arms, tmp_path):
    code, tty, _ = _in_pty(_argv(arms, tmp_path), _env(NO_COLOR="1"))
    assert code == 0
    assert b"reading the before arm" in tty
    assert not SGR.search(tty), SGR.findall(tty)


def test_an_empty_no_color_is_unset(arms, tmp_path):
    _, tty, _ = _in_pty(_argv(arms, tmp_path), _env(NO_COLOR=""))
    assert b"\x1b[32mPASS\x1b[0m" in tty


def test_a_piped_stdout_is_never_coloured(arms, tmp_path):
    code, tty, piped = _in_pty(_argv(arms, tmp_path), _env(), stdout_pipe=True)
    assert code == 0
    assert b"SWE gate verdict: IMPROVED" in piped and b"\x1b" not in piped
    assert b"reading the before arm" in tty  # stderr is still the terminal: the bar shows
    assert not any("swe compare:" in ln for ln in _screen(tty))


def test_without_a_terminal_each_step_is_one_timestamped_line(arms, tmp_path):
    env = _env(RLGATE_PROGRESS_AFTER="0")  # every step (default: those running 5 s or more)
    proc = subprocess.run(_argv(arms, tmp_path), env=env, capture_output=True, check=False)
    assert proc.returncode == 0
    err = proc.stderr.decode()
    assert b"\x1b" not in proc.stdout + proc.stderr
    assert len(STAMPED.findall(err)) == 4, err
    assert "swe compare: 2 of 4: reading the before arm (1 run(s))" in err


def test_hostile_names_reach_the_terminal_inert(arms, tmp_path):
    hostile = tmp_path / "a\x1b]0;owned\x07b"
    hostile.mkdir()
    before = hostile / "base.json"
    before.write_bytes(arms[0].read_bytes())
    argv = _argv([before, arms[1]], tmp_path)
    code, tty, _ = _in_pty(argv, _env())
    assert code == 0
    assert b"\x1b]" not in tty and b"\x07" not in tty


def test_without_a_terminal_steps_quicker_than_the_threshold_write_nothing(arms, tmp_path):
    env = _env(RLGATE_PROGRESS_AFTER="60")
    proc = subprocess.run(_argv(arms, tmp_path), env=env, capture_output=True, check=False)
    assert proc.returncode == 0
    assert proc.stderr == b""  # no step ran 60 s: no line (an error stays one line)


def test_a_line_break_in_an_item_cannot_forge_a_progress_line(monkeypatch):
    """Without a terminal each step is one line: an item's newline is shown, never obeyed."""
    from rlgate.cli import term

    monkeypatch.setenv("RLGATE_PROGRESS_AFTER", "0")
    stream = io.StringIO()
    lines = term._Lines(stream)
    lines("recipe check", 0, 1, "a\n[04:59:59] verdict: GO")
    text = stream.getvalue()
    assert text.count("\n") == 1 and "verdict: GO" in text


def test_a_closed_stderr_still_writes_the_report(tmp_path):
    """``2>&-``: sys.stderr is None; the command still runs and its exit code stands."""
    out = tmp_path / "out"
    junit = tmp_path / "missing.xml"
    code = subprocess.run(
        [sys.executable, "-m", "rlgate.cli", "report", "--junit", str(junit), "--out", str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        close_fds=True,
        preexec_fn=lambda: os.close(2),
    ).returncode
    assert code == 2  # a missing input: usage error, not a crash (120) on the closed stream
