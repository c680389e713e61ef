"""`rlgate report` shows local paths relative to --out or to the inputs' common root."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rlgate.cli.app import main
from rlgate.report.paths import PathRoots, path_roots, shorten
from rlgate.testing.corpus import Fault

from .helpers import report_inputs as ri


def _report(out: Path, kw: dict) -> int:
    args = ["report", "--junit", *map(str, kw["junit"]), "--out", str(out), "--no-plots"]
    if kw.get("runs"):
        args += ["--run", *map(str, kw["runs"]), "--swe", str(kw["swe"])]
        args += ["--recipe", str(kw["recipe"]), "--baseline", str(kw["baseline"])]
        args += ["--band-run", *map(str, kw["band_runs"])]
    return main(args)


def _written(out: Path) -> tuple[str, str, dict]:
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    return md, html, json.loads((out / "report.json").read_text())


def test_inputs_outside_out_read_relative_to_their_common_root(tmp_path, capsys):
    kw = ri.full_set("improved", Fault.HEALTHY)
    out = tmp_path / "report"
    assert _report(out, kw) == 0
    md, html, doc = _written(out)
    given = [*kw["junit"], *kw["runs"], kw["swe"], kw["recipe"], kw["baseline"], *kw["band_runs"]]
    root = Path(doc["path_roots"]["inputs"])
    assert root == Path(os.path.commonpath([p.parent for p in given]))
    for path in given:
        rel = str(Path(path).relative_to(root))
        assert str(path) not in md and str(path) not in html
        assert rel in md or rel.replace("_", "\\_") in md
    listed = [entry["path"] for entry in doc["inputs"]]
    assert listed and not any(os.path.isabs(p) for p in listed)
    assert all((root / p).exists() for p in listed)  # each one resolves under the named root
    assert f"else to `{root}`" in md  # the Inputs section says relative to what


def test_inputs_under_out_read_relative_to_out(tmp_path, capsys):
    out = tmp_path / "report"
    assert _report(out, {"junit": [ri.functional_passing()]}) == 3  # rlgate made out
    (out / "in").mkdir()
    junit = out / "in" / "functional.xml"
    shutil.copyfile(ri.functional_passing(), junit)
    assert _report(out, {"junit": [junit]}) == 3
    md, html, doc = _written(out)
    assert [e["path"] for e in doc["inputs"]] == ["in/functional.xml"]
    assert "`in/functional.xml`" in md and str(out) not in md and str(out) not in html
    assert doc["path_roots"] == {"out": str(out), "inputs": None}


def test_shorten_rewrites_whole_paths_only():
    roots = PathRoots(out="/srv/out", inputs="/data/run")
    assert shorten("see /srv/out/report.md and /data/run/a/b.json", roots) == (
        "see report.md and a/b.json"
    )
    assert shorten("/srv/outer/x /data/runs/y x/srv/out/z /srv/out", roots) == (
        "/srv/outer/x /data/runs/y x/srv/out/z ."
    )


def test_path_roots_never_uses_the_filesystem_root(tmp_path):
    assert path_roots(tmp_path / "o", ["/etc/hosts", str(tmp_path / "x.xml")]).inputs is None
