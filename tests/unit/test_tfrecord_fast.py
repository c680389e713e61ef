"""The TFRecord reader's vectorised fast path against protobuf, on files the real writers made.

The reference here is independent of the reader under test: a sequential framing walk (one
record at a time, header CRC, length against the file, payload CRC) and tensorboard's
``Event.FromString`` for every record. Files come from ``torch.utils.tensorboard.SummaryWriter``
(the canonical ``add_scalar`` layout the fast path decodes) and tensorboard's own
``EventFileWriter`` (every odd layout that must go through protobuf instead).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from torch.utils.tensorboard import SummaryWriter

import rlgate.runs.tfrecord as tfrecord
from rlgate.core.errors import MetricsError
from rlgate.runs.tfrecord import masked_crc32c, read_event_file

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- the reference ---------------------------------------------------------------------


def reference(data: bytes, tags: set[str] | None = None) -> tuple[dict[str, Any], str]:
    """``(series, outcome)`` of a byte string, one record at a time with protobuf.

    ``outcome`` is ``"ok"``, ``"tail"`` (truncated last record), or the error text the reader
    must raise (``corrupt record header at byte N`` / ``payload`` / ``not a TensorBoard Event``).
    """
    points: dict[str, tuple[list[int], list[float]]] = {}
    pos, size = 0, len(data)
    outcome = "ok"
    while pos < size:
        if pos + 12 > size:
            outcome = "tail"
            break
        (length,) = struct.unpack_from("<Q", data, pos)
        if masked_crc32c(data[pos : pos + 8]) != struct.unpack_from("<I", data, pos + 8)[0]:
            outcome = f"corrupt record header at byte {pos} "
            break
        end = pos + 16 + length
        if end > size:
            outcome = "tail"
            break
        payload = data[pos + 12 : pos + 12 + length]
        if masked_crc32c(payload) != struct.unpack_from("<I", data, end - 4)[0]:
            outcome = f"corrupt record payload at byte {pos} "
            break
        try:
            event = Event.FromString(payload)
        except Exception:
            outcome = f"record at byte {pos} is not a TensorBoard Event"
            break
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalar = value.simple_value
            elif kind == "tensor":
                scalar = tfrecord._tensor_scalar(value)
            else:
                continue
            if scalar is None or (tags is not None and value.tag not in tags):
                continue
            steps, vals = points.setdefault(value.tag, ([], []))
            steps.append(event.step)
            vals.append(scalar)
        pos = end
    series = {
        tag: (np.array(s, dtype=np.int64), np.array(v, dtype=np.float64))
        for tag, (s, v) in points.items()
    }
    return series, outcome


def outcome_of(path: Path, tags: set[str] | None = None) -> tuple[dict[str, Any], str]:
    try:
        out = read_event_file(path, tags)
    except MetricsError as exc:
        return {}, str(exc)
    assert len(out.warnings) <= 1
    return out.series, "tail" if out.warnings else "ok"


def assert_same(path: Path, tags: set[str] | None = None) -> None:
    """The reader's result is bit-identical to the reference's (NaN payloads included)."""
    want, want_outcome = reference(path.read_bytes(), tags)
    got, got_outcome = outcome_of(path, tags)
    if want_outcome not in ("ok", "tail"):
        assert want_outcome in got_outcome, (want_outcome, got_outcome)
        return
    assert got_outcome == want_outcome
    assert list(got) == list(want)  # tags in order of first appearance
    for tag in want:
        assert got[tag][0].dtype == np.int64 and got[tag][1].dtype == np.float64
        assert got[tag][0].tobytes() == want[tag][0].tobytes(), tag
        assert got[tag][1].tobytes() == want[tag][1].tobytes(), tag


# --- the real writers ------------------------------------------------------------------

tag_text = st.text(min_size=1, max_size=200)  # > 127 UTF-8 bytes: two-byte length varints
steps = st.integers(-(1 << 63), (1 << 63) - 1)
floats32 = st.floats(width=32, allow_nan=True, allow_infinity=True)


def torch_file(tmp: Path, points: list[tuple[str, float, int]]) -> Path:
    writer = SummaryWriter(log_dir=str(tmp), max_queue=10_000)
    for tag, value, step in points:
        writer.add_scalar(tag, value, step)
    writer.close()
    return next(tmp.glob("events*tfevents*"))


def scalar_value(tag: str, value: float) -> Summary.Value:
    return Summary.Value(tag=tag, simple_value=value)


def tensor_value(tag: str, value: float) -> Summary.Value:
    return Summary.Value(
        tag=tag,
        metadata=SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars")),
        tensor=TensorProto(dtype=1, float_val=[value]),
    )


def image_value(tag: str) -> Summary.Value:
    return Summary.Value(tag=tag, image=Summary.Image(encoded_image_string=b"\x89PNG" * 10))


@st.composite
def odd_events(draw: st.DrawFn, tags: list[str]) -> Event:
    kind = draw(st.sampled_from(["canonical", "step0", "tensor", "image", "several", "meta"]))
    tag, value = draw(st.sampled_from(tags)), draw(floats32)
    step = 0 if kind == "step0" else draw(steps)
    if kind in ("canonical", "step0"):
        values = [scalar_value(tag, value)]
    elif kind == "tensor":
        values = [tensor_value(tag, value)]
    elif kind == "image":
        values = [image_value(tag)]
    elif kind == "several":
        values = [scalar_value(draw(st.sampled_from(tags)), draw(floats32)) for _ in range(3)]
    else:  # a scalar with metadata: not the canonical layout, still a simple_value
        values = [
            Summary.Value(
                tag=tag, simple_value=value, metadata=SummaryMetadata(display_name="shown")
            )
        ]
    wall_time = draw(st.sampled_from([0.0, 1.7e9]))
    return Event(wall_time=wall_time, step=step, summary=Summary(value=values))


def event_file(tmp: Path, events: list[Event]) -> Path:
    writer = EventFileWriter(str(tmp))
    for event in events:
        writer.add_event(event)
    writer.close()
    return next(tmp.glob("events*tfevents*"))


@st.composite
def odd_files(draw: st.DrawFn) -> list[Event]:
    tags = draw(st.lists(tag_text, min_size=1, max_size=4, unique=True))
    return draw(st.lists(odd_events(tags), min_size=1, max_size=60))


def fresh(tmp_path: Path) -> Path:
    out = tmp_path / f"d{len(list(tmp_path.iterdir()))}"
    out.mkdir()
    return out


class TestFastPathAgainstProtobuf:
    @SETTINGS
    @given(st.lists(st.tuples(tag_text, floats32, steps), min_size=1, max_size=80))
    def test_torch_add_scalar_files_read_like_protobuf(self, tmp_path: Path, points) -> None:
        assert_same(torch_file(fresh(tmp_path), points))

    @SETTINGS
    @given(odd_files())
    def test_odd_layouts_read_like_protobuf(self, tmp_path: Path, events: list[Event]) -> None:
        assert_same(event_file(fresh(tmp_path), events))

    @SETTINGS
    @given(odd_files(), st.data())
    def test_tags_filter_reads_like_protobuf(self, tmp_path: Path, events, data) -> None:
        f = event_file(fresh(tmp_path), events)
        seen = sorted({v.tag for e in events for v in e.summary.value})
        keep = set(data.draw(st.lists(st.sampled_from(seen), max_size=len(seen))))
        assert_same(f, keep)

    @SETTINGS
    @given(odd_files(), st.sampled_from([64, 200, 1 << 21]))
    def test_any_block_size_reads_like_protobuf(
        self, tmp_path: Path, events: list[Event], block: int
    ) -> None:
        f = event_file(fresh(tmp_path), events)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(tfrecord, "BLOCK", block)
            assert_same(f)

    def test_fast_and_slow_records_of_one_tag_keep_file_order(self, tmp_path: Path) -> None:
        events = []
        for step in range(200):  # canonical, step 0, tensor, metadata: one tag, one block
            events.append(
                Event(
                    wall_time=1.0, step=step + 1, summary=Summary(value=[scalar_value("t", step)])
                )
            )
            events.append(
                Event(wall_time=1.0, step=0, summary=Summary(value=[scalar_value("t", -step)]))
            )
            events.append(
                Event(wall_time=1.0, step=step + 1, summary=Summary(value=[tensor_value("t", 0.5)]))
            )
        f = event_file(tmp_path, events)
        steps_, values = read_event_file(f).series["t"]
        want = [p for s in range(200) for p in ((s + 1, float(s)), (0, float(-s)), (s + 1, 0.5))]
        assert list(zip(steps_.tolist(), values.tolist(), strict=True)) == want
        assert_same(f)

    def test_a_canonical_record_with_invalid_utf8_is_refused_like_protobuf(
        self, tmp_path: Path
    ) -> None:
        f = event_file(
            tmp_path,
            [Event(wall_time=1.0, step=3, summary=Summary(value=[scalar_value("ab", 1.0)]))],
        )
        data = bytearray(f.read_bytes())
        pos = 0
        while True:  # the last record: the scalar event (the first is the file_version one)
            (length,) = struct.unpack_from("<Q", data, pos)
            if pos + 16 + length == len(data):
                break
            pos += 16 + length
        data[data.rfind(b"ab")] = 0xFF  # the tag is no longer UTF-8; the CRC is fixed below
        payload = bytes(data[pos + 12 : pos + 12 + length])
        data[pos + 12 + length :] = struct.pack("<I", masked_crc32c(payload))
        f.write_bytes(bytes(data))
        with pytest.raises(MetricsError, match=f"record at byte {pos} is not a TensorBoard Event"):
            read_event_file(f)


class TestCorruption:
    @SETTINGS
    @given(st.lists(st.tuples(tag_text, floats32, steps), min_size=1, max_size=40), st.data())
    def test_one_flipped_bit_is_reported_like_the_reference(
        self, tmp_path: Path, points, data
    ) -> None:
        f = torch_file(fresh(tmp_path), points)
        raw = bytearray(f.read_bytes())
        bit = data.draw(st.integers(0, 8 * len(raw) - 1))
        raw[bit // 8] ^= 1 << (bit % 8)
        f.write_bytes(bytes(raw))
        _want, outcome = reference(bytes(raw))
        assert outcome != "ok"  # CRC32C catches every single-bit error
        assert_same(f)

    @SETTINGS
    @given(odd_files(), st.data())
    def test_a_truncated_file_is_a_tail_warning_like_the_reference(
        self, tmp_path: Path, events, data
    ) -> None:
        f = event_file(fresh(tmp_path), events)
        raw = f.read_bytes()
        cut = data.draw(st.integers(0, len(raw)))
        f.write_bytes(raw[:cut])
        assert_same(f)


class TestFastPathIsTaken:
    def test_canonical_add_scalar_records_never_reach_protobuf(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        f = torch_file(tmp_path, [(f"train/m{i % 7}", i / 3, i + 1) for i in range(500)])
        parsed: list[int] = []

        def counting() -> Any:
            parse = Event.FromString

            def counted(data: Any) -> Any:
                parsed.append(len(data))
                return parse(data)

            return counted

        monkeypatch.setattr(tfrecord, "_event_parser", counting)
        out = read_event_file(f)
        assert out.records == 501 and sum(len(s) for s, _ in out.series.values()) == 500
        assert len(parsed) == 1  # only the file_version event goes through protobuf


class TestCrcBackends:
    @pytest.mark.parametrize("backend", ["c", "numpy"])
    @settings(max_examples=40, deadline=None)
    @given(data=st.binary(min_size=0, max_size=5_000))
    def test_c_and_numpy_crc32c_agree_with_tensorboard(self, data: bytes, backend: str) -> None:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as reference

        if backend == "c" and tfrecord._C_EXTEND is None:
            pytest.skip("google-crc32c (C) is not installed")
        with pytest.MonkeyPatch.context() as mp:
            if backend == "numpy":
                mp.setattr(tfrecord, "_C_EXTEND", None)
            assert masked_crc32c(data) == reference(data)

    def test_a_long_record_is_verified_by_both_backends(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        writer = SummaryWriter(log_dir=str(tmp_path))
        writer.add_image("plot", np.random.default_rng(0).integers(0, 256, (3, 700, 700), np.uint8))
        writer.add_scalar("train/loss", 0.5, 1)
        writer.close()
        f = next(tmp_path.glob("events*tfevents*"))
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x10  # inside the image record
        f.write_bytes(bytes(data))
        for backend in (tfrecord._C_EXTEND, None):
            monkeypatch.setattr(tfrecord, "_C_EXTEND", backend)
            with pytest.raises(MetricsError, match=r"corrupt record payload at byte \d+"):
                read_event_file(f)
