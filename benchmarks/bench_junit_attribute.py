"""Benchmark reading JUnit files with very long attributes: linear in the file's size.

    python benchmarks/bench_junit_attribute.py [--small-mb 2] [--large-mb 25] [--skip-before]

Real JUnit files (rlgate's writer, :func:`rlgate.core.junit.write_junit`): one suite whose
testcases carry ``--small-mb`` / ``--large-mb`` MB of ``A`` in their names, what a crafted
or broken file may hold (the reader's bound on a file is
:data:`rlgate.core.junit.MAX_JUNIT_BYTES`, 256 MiB). Two shapes:

1. **one attribute** of the whole size (the attack of issue 18's follow-up: 25 MB, 101 s);
2. **many attributes**: as many names of ``--small-mb`` MB as make up the size (each within
   :data:`rlgate.core.junit.MAX_XML_TOKEN`, 4 MiB, so every file is one rlgate reads).

Two readers, timed in the same process:

* **before**: the reader up to this change, defusedxml's ``iterparse`` (the file fed to expat
  in 16 KiB chunks, no bound on a token). expat 2.5.0 rescans a token still incomplete at
  each chunk's end, and one long attribute costs time quadratic in its length even in one
  ``Parse`` call (100 MB: 22 s);
* **after**: :func:`rlgate.core.junit.read_junit` (1 MiB chunks; a tag or comment longer
  than ``MAX_XML_TOKEN`` is refused, exit 2, after at most that much work).

Prints each reader's times (or that it refused the file) and the ratio large/small for
each shape: linear is about large/small (12.5 for 25 vs 2 MB), quadratic about its square
(156). Checks every reader that read a file gave the names back. Asserts nothing about time
(never a timed assertion).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from defusedxml.ElementTree import iterparse

from rlgate.core.errors import RlgateError
from rlgate.core.junit import MAX_XML_TOKEN, JunitCase, JunitSuite, read_junit, write_junit
from rlgate.core.results import Outcome, Result, Tier

Reader = Callable[[Path], list[str]]


def write_file(path: Path, sizes: list[int]) -> list[str]:
    """A JUnit file with one testcase per size, named with that many ``A``; the names."""
    names = ["completion", *("A" * n for n in sizes)]
    cases = [
        JunitCase.of(
            Result(name=n, tier=Tier.CONVERGENCE, status=Outcome.PASS, message="ok"),
            classname="rlgate.convergence.bench",
        )
        for n in names
    ]
    path.write_text(write_junit([JunitSuite.of("rlgate.bench", cases)]), encoding="utf-8")
    return names


def shapes(megabytes: float, each_mb: float) -> dict[str, list[int]]:
    """The names' lengths of each shape, for a file of ``megabytes`` MB."""
    total, each = int(megabytes * 10**6), int(each_mb * 10**6)
    if each > MAX_XML_TOKEN - 4096:  # the name's tag also holds classname="..."
        raise SystemExit(f"--small-mb must be below {MAX_XML_TOKEN / 10**6:.1f}")
    return {
        "one attribute": [total],
        "many attributes": [each] * (total // each) + ([total % each] if total % each else []),
    }


def before(path: Path) -> list[str]:
    """The reader as it was: ``iterparse`` over the open file (16 KiB chunks), no token bound."""
    from rlgate.core.junit import _JunitParser

    with path.open("rb") as fh:
        events = iterparse(fh, events=("start", "end"), parser=_JunitParser())
        for _ in events:
            pass
        root: ET.Element = events.root  # type: ignore[attr-defined]
    return [case.get("name", "") for case in root.iter("testcase")]


def after(path: Path) -> list[str]:
    """rlgate's reader now."""
    return [case.name for case in read_junit(path)[0].cases]


def timed(read: Reader, path: Path, names: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        got = read(path)
    except RlgateError as exc:
        return time.perf_counter() - start, f"refused: {exc.message[exc.message.find('the') :]}"
    seconds = time.perf_counter() - start
    if got != names:
        raise SystemExit(f"{path.name}: the names read back differ")
    return seconds, "read"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small-mb", type=float, default=2.0)
    parser.add_argument("--large-mb", type=float, default=25.0)
    parser.add_argument(
        "--skip-before", action="store_true", help="time only rlgate's reader (before: minutes)"
    )
    args = parser.parse_args()
    readers: dict[str, Reader] = {"after": after}
    if not args.skip_before:
        readers = {"before": before, **readers}
    small, large = args.small_mb, args.large_mb
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes(small, small):
            files = {}
            for mb in (small, large):
                path = Path(tmp) / f"{shape.replace(' ', '-')}-{mb:g}mb.xml"
                files[mb] = (path, write_file(path, shapes(mb, small)[shape]))
            print(f"{shape}:")
            for label, read in readers.items():
                times = {}
                for mb, (path, names) in files.items():
                    times[mb], what = timed(read, path, names)
                    print(f"  {label:>6}: {mb:5g} MB: {times[mb]:8.3f} s  {what}")
                ratio = times[large] / max(times[small], 1e-9)
                print(
                    f"  {label:>6}: ratio {large:g} MB / {small:g} MB = {ratio:.1f} "
                    f"(linear: {large / small:.1f}, quadratic: {(large / small) ** 2:.0f})"
                )


if __name__ == "__main__":
    main()
