"""rlgate.metrics and its TFRecord reader, on files written by the real writers.

Event files come from ``torch.utils.tensorboard.SummaryWriter`` (what NeMo RL's logger uses);
the reference for what they contain is tensorboard's own ``EventAccumulator`` (what NeMo RL's
``json_dump_tb_logs.py`` uses). MLPerf inputs are the real reference-run logs.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.tensorboard import SummaryWriter

from rlgate._errors import MetricsError
from rlgate._tfrecord import _masked_crc_rows, crc32c, masked_crc32c, read_event_file
from rlgate.metrics import (
    MLPERF_TAGS,
    SourceKind,
    load_metrics_json,
    load_mlperf_log,
    load_run,
    load_tensorboard_dir,
    to_metrics_json,
)

MLPERF = Path(
    os.environ.get(
        "RLGATE_MLPERF_DIR", Path(__file__).parents[3] / "shared" / "mlperf-qwen35-grpo-rcp"
    )
)


def write_events(
    tb_dir: Path, points: dict[str, list[tuple[int, float]]], *, extras: bool = False
) -> Path:
    writer = SummaryWriter(log_dir=str(tb_dir))
    if extras:
        writer.add_hparams({"lr": 1e-6}, {})
        writer.add_image("plot", np.zeros((3, 2, 2), dtype=np.uint8), 1)
        writer.add_histogram("hist", np.arange(5.0), 1)
        writer.add_scalar("new_style", 2.5, 1, new_style=True)
    for tag, series in points.items():
        for step, value in series:
            writer.add_scalar(tag, value, step)
    writer.close()
    return next(tb_dir.glob("events*tfevents*"))


def accumulator_dump(log_dir: Path) -> dict[str, dict[str, float]]:
    """What json_dump_tb_logs.py produces (EventAccumulator, mtime order, later wins)."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    out: dict[str, dict[str, float]] = {}
    for f in sorted(log_dir.glob("**/events*tfevents*"), key=lambda p: p.stat().st_mtime):
        acc = ea.EventAccumulator(str(f), size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
        acc.Reload()
        for tag in acc.scalars.Keys():
            out.setdefault(tag, {}).update({str(e.step): e.value for e in acc.Scalars(tag)})
    return out


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.fixture(scope="module")
def two_exp_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A resumed run: exp_001 steps 1..6, exp_002 steps 5..10 with different values at 5, 6."""
    root = tmp_path_factory.mktemp("resumed")
    first = write_events(
        root / "exp_001" / "tensorboard",
        {
            "train/loss": [(s, 1.0 / s) for s in range(1, 7)],
            "train/reward": [(s, 0.1 * s) for s in range(1, 7)],
            "ray/node.0.gpu.0.util": [(t, 50.0) for t in (0, 10, 20)],
        },
        extras=True,
    )
    second = write_events(
        root / "exp_002" / "tensorboard",
        {
            "train/loss": [(s, 2.0 / s) for s in range(5, 11)],
            "train/reward": [(s, 0.1 * s) for s in range(5, 11)],
        },
    )
    newer = second.stat().st_mtime
    os.utime(first, (newer - 100, newer - 100))
    return root


class TestCrc32c:
    @given(st.binary(max_size=64))
    def test_crc32c_matches_tensorboard_reference(self, data: bytes) -> None:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

        assert masked_crc32c(data) == reference(data)

    @settings(max_examples=30)
    @given(st.integers(1, 40), st.integers(1, 12), st.randoms())
    def test_crc32c_vectorised_rows_match_scalar(self, length: int, rows: int, rnd) -> None:
        data = np.array(
            [[rnd.randrange(256) for _ in range(length)] for _ in range(rows)], dtype=np.uint8
        )
        assert _masked_crc_rows(data).tolist() == [masked_crc32c(bytes(r)) for r in data]

    def test_crc32c_known_value(self) -> None:
        assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


class TestReadEventFile:
    def test_read_event_file_matches_event_accumulator(self, two_exp_run: Path) -> None:
        mine = to_metrics_json(load_tensorboard_dir(two_exp_run))
        ref = accumulator_dump(two_exp_run)
        assert set(ref) <= set(mine)
        for tag, points in ref.items():
            assert points.keys() == mine[tag].keys(), tag
            assert all(same(points[s], mine[tag][s]) for s in points), tag

    def test_read_event_file_keeps_new_style_scalars_and_skips_non_scalars(
        self, two_exp_run: Path
    ) -> None:
        run = load_tensorboard_dir(two_exp_run)
        assert run.get("new_style").as_dict() == {"1": 2.5}
        assert not {"plot", "hist"} & set(run.tags)

    def test_read_event_file_keeps_nan_values(self, tmp_path: Path) -> None:
        f = write_events(tmp_path, {"train/loss": [(1, 0.5), (2, float("nan")), (3, 0.4)]})
        steps, values = read_event_file(f).series["train/loss"]
        assert steps.tolist() == [1, 2, 3] and math.isnan(values[1])

    @pytest.mark.parametrize("where", ["length", "header_crc", "payload", "footer"])
    def test_read_event_file_tolerates_truncated_last_record(
        self, tmp_path: Path, where: str
    ) -> None:
        f = write_events(tmp_path, {"train/loss": [(s, float(s)) for s in range(1, 6)]})
        data = f.read_bytes()
        starts, pos = [], 0
        while pos < len(data):  # independent framing walk: 8-byte length, 4, payload, 4
            starts.append(pos)
            pos += 16 + struct.unpack_from("<Q", data, pos)[0]
        last, length = starts[-1], len(data) - starts[-1] - 16
        keep = {"length": 4, "header_crc": 10, "payload": 12 + length // 2, "footer": 14 + length}[
            where
        ]
        f.write_bytes(data[: last + keep])
        out = read_event_file(f)
        assert len(out.warnings) == 1 and "truncated last record" in out.warnings[0]
        steps, values = out.series["train/loss"]
        assert steps.tolist() == [1, 2, 3, 4] and values.tolist() == [1.0, 2.0, 3.0, 4.0]

    def test_read_event_file_rejects_corrupt_payload_in_the_middle(self, tmp_path: Path) -> None:
        f = write_events(tmp_path, {"train/loss": [(s, float(s)) for s in range(1, 6)]})
        data = bytearray(f.read_bytes())
        pos = data.find(b"train/loss")
        data[pos] ^= 0xFF
        f.write_bytes(bytes(data))
        with pytest.raises(MetricsError, match=r"corrupt record payload at byte \d+"):
            read_event_file(f)

    def test_read_event_file_rejects_corrupt_length_header(self, tmp_path: Path) -> None:
        f = write_events(tmp_path, {"train/loss": [(s, float(s)) for s in range(1, 6)]})
        data = bytearray(f.read_bytes())
        data[0] ^= 0x01  # first record's length: its header CRC no longer matches
        f.write_bytes(bytes(data))
        with pytest.raises(MetricsError, match="corrupt record header"):
            read_event_file(f)

    def test_read_event_file_accepts_empty_file(self, tmp_path: Path) -> None:
        f = tmp_path / "events.out.tfevents.1.host"
        f.write_bytes(b"")
        assert read_event_file(f).series == {}


class TestLoadTensorboardDir:
    def test_load_tensorboard_dir_merges_exp_dirs_later_file_wins(self, two_exp_run: Path) -> None:
        run = load_tensorboard_dir(two_exp_run)
        loss = run.get("train/loss")
        assert loss.steps.tolist() == list(range(1, 11))
        assert loss.value_at(6) == pytest.approx(2.0 / 6) and loss.value_at(2) == pytest.approx(0.5)
        assert {(c.tag, c.step) for c in run.conflicts} == {("train/loss", 5), ("train/loss", 6)}
        assert any("later file wins" in w for w in run.warnings)
        assert run.kind is SourceKind.TENSORBOARD and len(run.files) == 3  # + the hparams sub-run

    def test_load_tensorboard_dir_orders_files_by_mtime_not_name(
        self, two_exp_run: Path, tmp_path: Path
    ) -> None:
        import shutil

        copy = tmp_path / "copy"
        shutil.copytree(two_exp_run, copy)
        first = next((copy / "exp_001").rglob("*tfevents*"))
        os.utime(first, (2e9, 2e9))  # exp_001 is now the newest file
        assert load_tensorboard_dir(copy).get("train/loss").value_at(6) == pytest.approx(1.0 / 6)

    def test_load_tensorboard_dir_marks_gpu_monitor_tags_time_indexed(
        self, two_exp_run: Path
    ) -> None:
        run = load_tensorboard_dir(two_exp_run)
        assert (
            run.get("ray/node.0.gpu.0.util").time_indexed and not run.get("train/loss").time_indexed
        )

    def test_load_tensorboard_dir_records_steps_going_backwards(self, tmp_path: Path) -> None:
        write_events(tmp_path / "exp_001", {"train/loss": [(1, 1.0), (2, 2.0), (1, 3.0)]})
        run = load_tensorboard_dir(tmp_path)
        assert [(a.tag, a.step, a.previous_step) for a in run.anomalies] == [("train/loss", 1, 2)]
        assert run.get("train/loss").as_dict() == {"1": 3.0, "2": 2.0}

    def test_load_tensorboard_dir_without_event_files_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(MetricsError, match="no TensorBoard event files") as info:
            load_tensorboard_dir(tmp_path)
        assert "logger.log_dir" in str(info.value)

    def test_load_tensorboard_dir_missing_tag_suggests_close_names(self, two_exp_run: Path) -> None:
        with pytest.raises(MetricsError, match="did you mean 'train/reward'"):
            load_tensorboard_dir(two_exp_run).get("train/rewards")


class TestLoadMetricsJson:
    def test_load_metrics_json_round_trips_json_dump_format(
        self, two_exp_run: Path, tmp_path: Path
    ) -> None:
        dump = to_metrics_json(load_tensorboard_dir(two_exp_run))
        path = tmp_path / "metrics.json"
        path.write_text(json.dumps(dump))
        back = load_metrics_json(path)
        assert to_metrics_json(back) == dump and back.kind is SourceKind.METRICS_JSON

    def test_load_metrics_json_sorts_steps_and_keeps_nan(self, tmp_path: Path) -> None:
        path = tmp_path / "metrics.json"
        path.write_text('{"train/loss": {"10": 1.0, "2": NaN, "3": 0.5}}')
        loss = load_metrics_json(path).get("train/loss")
        assert loss.steps.tolist() == [2, 3, 10] and math.isnan(loss.values[0])

    @pytest.mark.parametrize(
        ("text", "match"),
        [
            pytest.param('{"train/loss": {"1": 1.0', "not valid JSON", id="truncated"),
            pytest.param(
                '{"train/loss": {"one": 1.0}}', "step key 'one' that is not", id="bad_step"
            ),
            pytest.param('{"train/loss": {"1": "x"}}', "is not a number", id="bad_value"),
            pytest.param('{"train/loss": [1, 2]}', "must map step strings", id="not_a_mapping"),
            pytest.param("[1, 2]", "expected an object", id="not_an_object"),
        ],
    )
    def test_load_metrics_json_rejects_malformed_input(
        self, tmp_path: Path, text: str, match: str
    ) -> None:
        path = tmp_path / "metrics.json"
        path.write_text(text)
        with pytest.raises(MetricsError, match=match):
            load_metrics_json(path)


class TestLoadMlperfLog:
    @pytest.fixture(scope="class")
    def seed1(self) -> Path:
        path = MLPERF / "GBS256" / "seed_1.out"
        if not path.is_file():
            pytest.fail(
                f"MLPerf reference logs not found at {MLPERF} (set RLGATE_MLPERF_DIR)",
                pytrace=False,
            )
        return path

    def test_load_mlperf_log_maps_tracked_stats_to_nemo_rl_tags(self, seed1: Path) -> None:
        run = load_mlperf_log(seed1)
        assert set(MLPERF_TAGS.values()) - {"timing/train/generation"} <= set(run.tags)
        assert (
            run.get("train/reward").last_step == 17
        )  # the step-18 stats hold only validation_time
        assert run.get("timing/train/total_step_time").value_at(1) == pytest.approx(
            471.2140495249769
        )
        assert run.get("validation/accuracy").as_dict() == {"18": 0.71875}

    def test_load_mlperf_log_exposes_hyperparameters_and_run_stop(self, seed1: Path) -> None:
        meta = load_mlperf_log(seed1).metadata
        assert meta["run_status"] == "success" and meta["last_step"] == 18
        hp = meta["hyperparameters"]
        assert (
            hp["global_batch_size"] == 256
            and hp["max_steps"] == 30
            and hp["target_accuracy"] == 0.69
        )

    def test_load_mlperf_log_drops_truncated_last_line(self, seed1: Path, tmp_path: Path) -> None:
        text = seed1.read_text()
        path = tmp_path / "live.out"
        path.write_text(text[: len(text) - 40])
        run = load_mlperf_log(path)
        assert (
            any("truncated last" in w for w in run.warnings) and run.metadata["run_status"] is None
        )

    def test_load_mlperf_log_rejects_corrupt_line_in_the_middle(
        self, seed1: Path, tmp_path: Path
    ) -> None:
        lines = seed1.read_text().splitlines()
        lines[60] = lines[60][:50]
        path = tmp_path / "bad.out"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(MetricsError, match=r"bad.out:61: corrupt :::MLLOG line"):
            load_mlperf_log(path)

    def test_load_mlperf_log_keeps_unmapped_keys_with_a_warning(self, tmp_path: Path) -> None:
        path = tmp_path / "x.out"
        event = {"key": "tracked_stats", "value": {"foo": 1.0}, "metadata": {"step": 1}}
        path.write_text(f"console line\n:::MLLOG {json.dumps(event)}\n")
        run = load_mlperf_log(path)
        assert run.get("mlperf/foo").as_dict() == {"1": 1.0} and "foo" in run.warnings[0]


class TestLoadRun:
    def test_load_run_detects_every_input_kind(self, two_exp_run: Path, tmp_path: Path) -> None:
        (tmp_path / "metrics.json").write_text('{"a": {"1": 1.0}}')
        event = {"key": "tracked_stats", "value": {"reward": 1}, "metadata": {"step": 1}}
        (tmp_path / "run.log").write_text(f"x\n:::MLLOG {json.dumps(event)}\n")
        event_file = next(two_exp_run.rglob("exp_002/**/*tfevents*"))
        assert load_run(two_exp_run).kind is SourceKind.TENSORBOARD
        assert load_run(event_file).kind is SourceKind.TENSORBOARD
        assert load_run(tmp_path / "metrics.json").kind is SourceKind.METRICS_JSON
        assert load_run(tmp_path / "run.log").kind is SourceKind.MLPERF_LOG

    def test_load_run_rejects_unknown_and_missing_inputs(self, tmp_path: Path) -> None:
        (tmp_path / "notes.txt").write_text("hello\n")
        with pytest.raises(MetricsError, match="cannot tell what"):
            load_run(tmp_path / "notes.txt")
        with pytest.raises(MetricsError, match="run not found"):
            load_run(tmp_path / "nope")


class TestMlperfValues:
    def test_load_mlperf_log_rejects_non_numeric_stats(self, tmp_path: Path) -> None:
        event = {"key": "tracked_stats", "value": {"reward": "high"}, "metadata": {"step": 1}}
        path = tmp_path / "x.out"
        path.write_text(f":::MLLOG {json.dumps(event)}\n")
        with pytest.raises(MetricsError, match=r"x.out:1: train/reward at step 1 is not a number"):
            load_mlperf_log(path)
