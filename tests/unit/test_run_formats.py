"""The run-input format registry (rlgate.runs.registry): one module per format, found by import."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from rlgate.core.errors import MetricsError
from rlgate.runs import formats as formats_package
from rlgate.runs.metrics import SourceKind, load_run
from rlgate.runs.records import Merger, RunMetrics
from rlgate.runs.registry import (
    RunFormat,
    RunSource,
    formats,
    register,
    registered,
    shapes_hint,
)
from rlgate.testing.corpus import Fault, write_run


class CsvRun(RunFormat):
    """A format defined in a test: ``tag,step,value`` lines in a ``*.csv`` file."""

    name = "test_csv"
    kind = SourceKind.METRICS_JSON
    order = 25
    shape = "a tag,step,value CSV (a test's format)"

    def detect(self, source: RunSource) -> bool:
        return source.is_file and source.path is not None and source.path.suffix == ".csv"

    def read(self, source: RunSource) -> RunMetrics:
        assert source.path is not None
        merger = Merger()
        index = merger.source(str(source.path))
        rows = [line.split(",") for line in source.path.read_text().splitlines()]
        for tag in sorted({r[0] for r in rows}):
            steps = np.array([int(r[1]) for r in rows if r[0] == tag], np.int64)
            values = np.array([float(r[2]) for r in rows if r[0] == tag])
            merger.add(tag, steps, values, index)
        series, _, segments = merger.finish()
        return RunMetrics(
            source.path,
            self.kind,
            MappingProxyType(series),
            files=(source.path,),
            segments=MappingProxyType(segments),
        )


def test_every_module_of_the_formats_package_is_a_registered_format() -> None:
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(formats_package.__path__)}
    names = [f.name for f in formats()]
    assert len(names) == len(set(names))
    assert {type(f).__module__.rsplit(".", 1)[1] for f in formats()} == modules
    assert [f.name for f in formats()][:3] == ["tensorboard", "metrics_json", "mlperf_log"]
    assert sum(f.fallback for f in formats()) == 1


def test_a_format_defined_elsewhere_is_found_by_load_run_without_other_edits(
    tmp_path: Path,
) -> None:
    csv = tmp_path / "run.csv"
    csv.write_text("train/loss,1,0.5\ntrain/loss,2,0.25\n")
    with pytest.raises(MetricsError, match="cannot tell what"):
        load_run(csv)
    with registered(CsvRun):
        run = load_run(csv)
        assert "a tag,step,value CSV" in shapes_hint()
    assert run.get("train/loss").as_dict() == {"1": 0.5, "2": 0.25}
    assert "test_csv" not in [f.name for f in formats()]  # gone after the block


def test_two_formats_with_one_name_are_refused() -> None:
    class Clash(CsvRun):
        name = "tensorboard"

    with pytest.raises(TypeError, match="two run formats are called 'tensorboard'"):
        register(Clash)


def test_a_directory_no_format_detects_gets_the_fallback_message_listing_every_shape(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with pytest.raises(MetricsError) as info:
        load_run(tmp_path)
    assert "no TensorBoard event files" in str(info.value)
    for fmt in formats():
        assert fmt.shape in (info.value.hint or "")


def test_detection_picks_the_same_format_as_before_for_each_shape(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "tb", Fault.HEALTHY, seed=3)
    assert load_run(run_dir).kind is SourceKind.TENSORBOARD
    doc = {"train/loss": {"1": 1.0}}
    (tmp_path / "m.json").write_text(json.dumps(doc))
    assert load_run(tmp_path / "m.json").kind is SourceKind.METRICS_JSON
    assert RunSource.of("http://127.0.0.1:5000").url == "http://127.0.0.1:5000"
    assert RunSource.of("sqlite:///mlflow.db").path is None
