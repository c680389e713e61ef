"""rlgate.runs.metrics and its TFRecord reader, on files written by the real writers.

Event files come from ``torch.utils.tensorboard.SummaryWriter`` (what NeMo RL's logger uses);
the reference for what they contain is tensorboard's own ``EventAccumulator`` (what NeMo RL's
``json_dump_tb_logs.py`` uses). MLPerf inputs are the real reference-run logs.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.tensorboard import SummaryWriter

from rlgate.core.errors import MetricsError
from rlgate.runs.metrics import (
    MLPERF_TAGS,
    SourceKind,
    load_metrics_json,
    load_mlperf_log,
    load_run,
    load_tensorboard_dir,
    to_metrics_json,
)
from rlgate.runs.tfrecord import _masked_crc_rows, crc32c, masked_crc32c, read_event_file

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


def long_record_file(path: Path, image_bytes: int, *, scalar_first: bool = True) -> Path:
    """One Event whose Summary holds a scalar and a large image (TF1 merged-summary style)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    image = Summary.Value(
        tag="plot", image=Summary.Image(encoded_image_string=os.urandom(image_bytes))
    )
    scalar = Summary.Value(tag="train/loss", simple_value=0.25)
    values = [scalar, image] if scalar_first else [image, scalar]
    writer = EventFileWriter(str(path))
    writer.add_event(Event(step=7, summary=Summary(value=values)))
    writer.add_event(
        Event(step=8, summary=Summary(value=[Summary.Value(tag="train/loss", simple_value=0.5)]))
    )
    writer.close()
    return next(path.glob("events*tfevents*"))


class TestStreamingReader:
    @settings(max_examples=25, deadline=None)
    @given(st.binary(min_size=100, max_size=20_000))
    def test_crc32c_of_long_buffers_matches_tensorboard_reference(self, data: bytes) -> None:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

        assert masked_crc32c(data) == reference(data)

    def test_small_blocks_read_the_same_as_one_block(
        self, two_exp_run: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import rlgate.runs.tfrecord as tfrecord

        whole = to_metrics_json(load_tensorboard_dir(two_exp_run))
        monkeypatch.setattr(tfrecord, "BLOCK", 64)  # refill at almost every record
        monkeypatch.setattr(tfrecord, "LARGE", 100)  # the hparams/image records stream past
        assert to_metrics_json(load_tensorboard_dir(two_exp_run)) == whole

    @pytest.mark.parametrize("scalar_first", [True, False], ids=["scalar_first", "image_first"])
    def test_a_long_record_keeps_its_scalars_and_skips_the_image_unread(
        self, tmp_path: Path, scalar_first: bool
    ) -> None:
        f = long_record_file(tmp_path, 3_000_000, scalar_first=scalar_first)
        out = read_event_file(f)
        steps, values = out.series["train/loss"]
        assert (
            steps.tolist() == [7, 8] and values.tolist() == [0.25, 0.5] and "plot" not in out.series
        )
        assert to_metrics_json(load_tensorboard_dir(tmp_path)) == accumulator_dump(tmp_path)

    def test_a_corrupt_byte_inside_a_long_record_is_corruption(self, tmp_path: Path) -> None:
        f = long_record_file(tmp_path, 2_500_000)
        data = bytearray(f.read_bytes())
        data[1_500_000] ^= 0x01
        f.write_bytes(bytes(data))
        with pytest.raises(MetricsError, match=r"corrupt record payload at byte \d+"):
            read_event_file(f)

    @pytest.mark.parametrize("crc_ok", [True, False], ids=["header_crc_ok", "header_crc_bad"])
    def test_a_huge_length_field_is_checked_against_the_file_size(
        self, tmp_path: Path, crc_ok: bool
    ) -> None:
        f = write_events(tmp_path, {"train/loss": [(1, 1.0), (2, 2.0)]})
        header = struct.pack("<Q", 1 << 62)
        crc = masked_crc32c(header) if crc_ok else masked_crc32c(header) ^ 1
        f.write_bytes(f.read_bytes() + header + struct.pack("<I", crc) + b"x" * 100)
        if crc_ok:  # a writer killed mid-record: the tail is dropped, the rest is kept
            out = read_event_file(f)
            assert "announces 4611686018427387904 bytes, file ends first" in out.warnings[0]
            assert out.series["train/loss"][0].tolist() == [1, 2]
        else:
            with pytest.raises(MetricsError, match="corrupt record header"):
                read_event_file(f)

    def test_a_record_that_is_not_an_event_is_named(self, tmp_path: Path) -> None:
        payload = b"\xff" * 20
        f = tmp_path / "events.out.tfevents.1.host"
        header = struct.pack("<Q", len(payload))
        f.write_bytes(
            header
            + struct.pack("<I", masked_crc32c(header))
            + payload
            + struct.pack("<I", masked_crc32c(payload))
        )
        with pytest.raises(MetricsError, match="record at byte 0 is not a TensorBoard Event"):
            read_event_file(f)


class TestHostileRunDirs:
    def test_a_symlink_loop_in_the_run_dir_is_refused_naming_it(
        self, two_exp_run: Path, tmp_path: Path
    ) -> None:
        import shutil

        root = tmp_path / "run"
        shutil.copytree(two_exp_run, root)
        (root / "exp_001" / "loop").symlink_to("..")
        with pytest.raises(
            MetricsError, match=r"symlink loop in the run directory: .*exp_001/loop"
        ):
            load_run(root)

    def test_a_symlinked_exp_dir_is_followed_like_json_dump_tb_logs(
        self, two_exp_run: Path, tmp_path: Path
    ) -> None:
        root = tmp_path / "run"
        root.mkdir()
        (root / "exp_001").symlink_to(two_exp_run / "exp_001")
        (root / "exp_002").symlink_to(two_exp_run / "exp_002")
        assert to_metrics_json(load_run(root)) == to_metrics_json(load_run(two_exp_run))

    def test_event_files_without_scalars_are_refused(self, tmp_path: Path) -> None:
        writer = SummaryWriter(log_dir=str(tmp_path / "exp_001" / "tensorboard"))
        writer.add_image("plot", np.zeros((3, 2, 2), dtype=np.uint8), 1)
        writer.close()
        with pytest.raises(MetricsError, match="no scalar metrics in 1 event file"):
            load_run(tmp_path)

    def test_mtime_order_against_exp_order_is_a_named_warning(
        self, two_exp_run: Path, tmp_path: Path
    ) -> None:
        import shutil

        copy = tmp_path / "copy"
        shutil.copytree(two_exp_run, copy)
        for f in (copy / "exp_001").rglob("*tfevents*"):
            os.utime(f, (2e9, 2e9))
        run = load_run(copy)
        assert any("disagrees with NeMo RL's exp_NNN job order" in w for w in run.warnings)
        assert not any("disagrees" in w for w in load_run(two_exp_run).warnings)


class TestHostileMetricsJson:
    @pytest.mark.parametrize(
        ("text", "match"),
        [
            pytest.param('{"t": {"010": 1.0, "10": 2.0}}', "step key '010'", id="leading_zero"),
            pytest.param('{"t": {"-1": 1.0}}', "step key '-1'", id="negative"),
            pytest.param('{"t": {"1.5": 1.0}}', "step key '1.5'", id="fraction"),
            pytest.param('{"t": {" 7": 1.0}}', "step key ' 7'", id="space"),
            pytest.param('{"t": {"1_0": 1.0}}', "step key '1_0'", id="underscore"),
            pytest.param(
                '{"t": {"99999999999999999999999": 1.0}}', "step key '9999", id="beyond_int64"
            ),
            pytest.param('{"t": {"1": 1.0, "1": 2.0}}', "key '1' appears twice", id="dup_step"),
            pytest.param(
                '{"t": {"1": 1.0}, "t": {"2": 2.0}}', "key 't' appears twice", id="dup_tag"
            ),
            pytest.param('{"t": {"1": true}}', "is not a number: True", id="bool"),
            pytest.param('{"t": {"1": [1]}}', "is not a number: list", id="list"),
            pytest.param(
                '{"t": {"1": ' + "[" * 50_000 + "]" * 50_000 + "}}", "nested too deeply", id="deep"
            ),
            pytest.param("{}", "no scalar metrics", id="empty"),
            pytest.param('{"t": {}}', "no scalar metrics", id="empty_tag"),
        ],
    )
    def test_silent_changes_are_refused_naming_the_value(
        self, tmp_path: Path, text: str, match: str
    ) -> None:
        path = tmp_path / "metrics.json"
        path.write_text(text)
        with pytest.raises(MetricsError, match=match):
            load_metrics_json(path)

    def test_invalid_utf8_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "metrics.json"
        path.write_bytes(b'{"train/loss": {"1": 0.5}, "\xff\xfe": {"1": 1.0}}')
        with pytest.raises(MetricsError, match=r"metrics.json is not UTF-8 text \(byte 28"):
            load_run(path)

    def test_numbers_beyond_float_range_become_infinite_not_a_crash(self, tmp_path: Path) -> None:
        path = tmp_path / "metrics.json"
        path.write_text('{"t": {"1": 1' + "0" * 400 + ', "2": -1e400, "3": Infinity}}')
        assert load_metrics_json(path).get("t").values.tolist() == [math.inf, -math.inf, math.inf]


class TestHostileMlperf:
    @pytest.mark.parametrize(
        ("step", "shown"),
        [
            pytest.param("NaN", "nan", id="nan"),
            pytest.param("Infinity", "inf", id="inf"),
            pytest.param("1e300", "1e+300", id="huge"),
            pytest.param("5.7", "5.7", id="fraction"),
            pytest.param("-1", "-1", id="negative"),
            pytest.param('"3"', "'3'", id="string"),
            pytest.param("true", "True", id="bool"),
            pytest.param("99999999999999999999999", "99999999999999999999999", id="beyond_int64"),
        ],
    )
    def test_a_step_that_is_not_a_training_step_is_refused_naming_it(
        self, tmp_path: Path, step: str, shown: str
    ) -> None:
        path = tmp_path / "x.out"
        path.write_text(
            f':::MLLOG {{"key": "tracked_stats", "value": {{"reward": 1}}, '
            f'"metadata": {{"step": {step}}}}}\n'
        )
        with pytest.raises(
            MetricsError,
            match=rf"x.out:1: tracked_stats has metadata.step {re.escape(shown)}, not a training",
        ):
            load_mlperf_log(path)

    @pytest.mark.parametrize(
        ("line", "match"),
        [
            pytest.param('{"key": 5}', "not an event object with a key", id="key_not_str"),
            pytest.param(
                '{"key": "run_stop", "metadata": [1]}', "metadata of type list", id="meta_list"
            ),
            pytest.param("[1, 2]", "not an event object", id="list"),
        ],
    )
    def test_malformed_events_are_refused(self, tmp_path: Path, line: str, match: str) -> None:
        path = tmp_path / "x.out"
        path.write_text(f":::MLLOG {line}\n")
        with pytest.raises(MetricsError, match=match):
            load_mlperf_log(path)

    def test_a_corrupt_last_line_that_ends_with_a_line_break_is_not_a_torn_tail(
        self, tmp_path: Path
    ) -> None:
        good = '{"key": "tracked_stats", "value": {"reward": 1}, "metadata": {"step": 1}}'
        path = tmp_path / "x.out"
        path.write_text(f":::MLLOG {good}\n:::MLLOG {{broken\n")
        with pytest.raises(MetricsError, match=r"x\.out:2: corrupt :::MLLOG line"):
            load_mlperf_log(path)
        path.write_text(f":::MLLOG {good}\n:::MLLOG {{broken")
        assert "truncated last" in load_mlperf_log(path).warnings[0]


class TestDispatch:
    def test_a_device_is_neither_a_directory_nor_a_file(self) -> None:
        with pytest.raises(MetricsError, match="/dev/null is neither a directory nor a regular"):
            load_run("/dev/null")

    def test_mllog_lines_after_a_long_console_preamble_are_found(self, tmp_path: Path) -> None:
        event = {"key": "tracked_stats", "value": {"reward": 1}, "metadata": {"step": 1}}
        path = tmp_path / "job.log"
        preamble = ("x" * 99 + "\n") * ((1 << 20) // 100) + "y" * 72  # needle spans 1 MiB
        path.write_text(preamble + "\n:::MLLOG " + json.dumps(event) + "\n")
        assert load_run(path).kind is SourceKind.MLPERF_LOG
        path.write_text(preamble + " :::MLLOG not at a line start\n")
        with pytest.raises(MetricsError, match="cannot tell what"):
            load_run(path)
