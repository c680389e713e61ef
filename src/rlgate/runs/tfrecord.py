"""Streaming TFRecord/Event-file reader: framing, CRC32C and scalar extraction.

A TensorBoard event file is a sequence of TFRecords::

    uint64 length | uint32 masked_crc32c(length) | payload[length] | uint32 masked_crc32c(payload)

and each payload is a serialized ``tensorboard.Event`` (decoded here with tensorboard's
compiled protos, ``tensorboard.compat.proto.event_pb2``).

Why not ``EventAccumulator``: its compat reader computes CRC32C in pure Python one byte
at a time and routes every event through locks, reservoirs and plugin conversions.

Memory is proportional to what is kept (the scalar points, 16 bytes each), not to the file:

* the file is read in blocks of :data:`BLOCK` bytes; the records of one block have their
  header and payload CRCs verified at once (a table-driven CRC32C vectorised with numpy over
  records of equal length) and are decoded, then the block is dropped;
* a record longer than :data:`LARGE` (an image, a histogram, a graph) is never held whole:
  its CRC is computed chunk by chunk as it streams past (chunks split into columns and
  recombined with the CRC's linearity, so a long record costs milliseconds per MB, not a
  Python loop per byte), and its protobuf is walked field by field so that only the small
  ``Summary.Value`` entries are decoded; a value larger than :data:`MAX_VALUE` cannot be a
  scalar and is skipped unread;
* a length field is checked against the bytes left in the file before anything is read or
  allocated, so a corrupt length cannot ask for gigabytes.

Rules (invariants):

* A header or payload CRC mismatch is corruption: :class:`MetricsError` with file and
  byte offset. Nothing after a corrupt record can be trusted.
* An incomplete final record (fewer bytes than its header announces, or a partial
  header) is a truncated tail: it is dropped with a warning, because every record before
  it is complete and CRC-verified. A tail whose complete header fails its CRC is
  corruption, not truncation.
* Kept values: ``simple_value`` (what ``torch.utils.tensorboard.SummaryWriter.add_scalar``
  writes, and NeMo RL uses) and rank-0 numeric tensors of the ``scalars`` plugin (the
  "new style" ``add_scalar(new_style=True)`` / TF2 ``tf.summary.scalar``). Everything
  else (images, histograms, hparams, text) is skipped.
"""

from __future__ import annotations

import functools
import os
import struct
from array import array
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from rlgate.core.errors import MetricsError

__all__ = [
    "BLOCK",
    "LARGE",
    "MAX_VALUE",
    "EventScalars",
    "crc32c",
    "masked_crc32c",
    "read_event_file",
]

BLOCK = 1 << 21  # bytes read at a time (2 MiB)
LARGE = 1 << 20  # payloads longer than this stream past in chunks (never held whole)
MAX_VALUE = 1 << 16  # a Summary.Value longer than this is not a scalar: skipped unread

_HEADER = struct.Struct("<QI")
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")
_FRAME = _HEADER.size + _FOOTER.size
_MASK_DELTA = 0xA282EAD8
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MAX_STEP = (1 << 63) - 1

# TensorProto dtypes (tensorboard/compat/proto/types.proto) -> numpy dtype and value field.
_TENSOR_DTYPES = {
    1: (np.float32, "float_val"),  # DT_FLOAT
    2: (np.float64, "double_val"),  # DT_DOUBLE
    3: (np.int32, "int_val"),  # DT_INT32
    9: (np.int64, "int64_val"),  # DT_INT64
    19: (np.float16, "half_val"),  # DT_HALF
}


def _make_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table[i] = crc
    return table


_TABLE = _make_table()
_EIGHT = np.uint32(8)


# --- CRC-32C ---------------------------------------------------------------------------
#
# The CRC register update ``s' = T[(s ^ byte) & 0xFF] ^ (s >> 8)`` is linear over GF(2) in
# (s, byte), so ``crc(s, A || B) = shift_|B|(crc(s, A)) ^ crc(0, B)`` where ``shift_n`` is
# the register after n zero bytes (a fixed 32x32 bit matrix, applied with four 256-entry
# tables). A long buffer is cut into k columns of m bytes whose ``crc(0, column)`` are
# computed together (m numpy steps over k-wide arrays), then folded left to right.


def _raw_columns(cols: np.ndarray, init: int) -> np.ndarray:
    """CRC register (no final XOR) of every column of a 2-D uint8 array, from ``init``."""
    crc = np.full(cols.shape[1], init, dtype=np.uint32)
    for row in cols:
        crc = _TABLE[(crc ^ row) & 0xFF] ^ (crc >> _EIGHT)
    return crc


@functools.cache
def _shift_tables(m: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """Tables applying ``shift_m`` to a register, one per register byte."""
    basis = np.array([1 << j for j in range(32)], dtype=np.uint32)
    for _ in range(m):
        basis = _TABLE[basis & 0xFF] ^ (basis >> _EIGHT)
    values = np.arange(256)
    tables = []
    for byte in range(4):
        table = np.zeros(256, dtype=np.uint32)
        for bit in range(8):
            table ^= np.where((values >> bit) & 1, basis[8 * byte + bit], 0).astype(np.uint32)
        tables.append(table.tolist())
    return tables[0], tables[1], tables[2], tables[3]


def _crc_update(state: int, data: np.ndarray) -> int:
    """The CRC register after ``data`` (1-D uint8), starting from ``state``."""
    n = int(data.size)
    if n < 128:
        return int(_raw_columns(data.reshape(n, 1), state)[0]) if n else state
    m = 1 << max(4, (n.bit_length() + 1) // 2)  # a power of two near sqrt(n): few tables
    k, r = divmod(n, m)
    if r:
        state = int(_raw_columns(data[:r].reshape(r, 1), state)[0])
    columns = np.ascontiguousarray(data[r:].reshape(k, m).T)
    t0, t1, t2, t3 = _shift_tables(m)
    for c in _raw_columns(columns, 0).tolist():
        state = (
            t0[state & 255] ^ t1[(state >> 8) & 255] ^ t2[(state >> 16) & 255] ^ t3[state >> 24] ^ c
        )
    return state


def _mask(crc: int) -> int:
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data``."""
    return _crc_update(0xFFFFFFFF, np.frombuffer(data, dtype=np.uint8)) ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    return _mask(_crc_update(0xFFFFFFFF, np.frombuffer(data, dtype=np.uint8)))


def _masked_columns(cols: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of every column of a 2-D uint8 array (one record per column)."""
    crc = _raw_columns(cols, 0xFFFFFFFF) ^ np.uint32(0xFFFFFFFF)
    rotated = (crc >> np.uint32(15)) | (crc << np.uint32(17))
    return (rotated.astype(np.uint64) + _MASK_DELTA).astype(np.uint32)


def _masked_crc_rows(rows: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of every row of a 2-D uint8 array (all rows the same length)."""
    n, length = rows.shape
    if n * n * 4 >= length:  # wide enough: one numpy step per byte over all rows at once
        return _masked_columns(np.ascontiguousarray(rows.T))
    return np.array([_mask(_crc_update(0xFFFFFFFF, row)) for row in rows], dtype=np.uint32)


# --- scalars ---------------------------------------------------------------------------


@dataclass
class EventScalars:
    """Scalars of one event file: ``{tag: (steps int64, values float64)}`` in file order."""

    path: Path
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    records: int = 0
    warnings: list[str] = field(default_factory=list)


def _tensor_scalar(value: Any) -> float | None:
    tensor = value.tensor
    if value.metadata.plugin_data.plugin_name != "scalars" or tensor.tensor_shape.dim:
        return None
    spec = _TENSOR_DTYPES.get(tensor.dtype)
    if spec is None:
        return None
    dtype, field_name = spec
    if tensor.tensor_content:
        if len(tensor.tensor_content) != np.dtype(dtype).itemsize:
            return None
        return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    vals = getattr(tensor, field_name)
    if len(vals) != 1:
        return None
    if dtype is np.float16:  # half_val stores the raw 16-bit pattern in an int
        return float(np.array([vals[0]], dtype=np.uint16).view(np.float16)[0])
    return float(vals[0])


class _Sink:
    """Collects (step, value) per tag in compact arrays (16 bytes per kept point)."""

    def __init__(self, tags: Container[str] | None) -> None:
        self.tags = tags
        self.points: dict[str, tuple[array, array]] = {}

    def add(self, step: int, values: Any) -> None:
        for value in values:  # empty for file_version/graph/session_log events
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                scalar: float | None = value.simple_value
            elif kind == "tensor":
                scalar = _tensor_scalar(value)
            else:
                continue
            if scalar is None:
                continue
            tag = value.tag
            if self.tags is not None and tag not in self.tags:
                continue
            try:
                steps, vals = self.points[tag]
            except KeyError:
                steps, vals = self.points[tag] = (array("q"), array("d"))
            steps.append(step)
            vals.append(scalar)

    def series(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {
            tag: (np.frombuffer(s, dtype=np.int64), np.frombuffer(v, dtype=np.float64))
            for tag, (s, v) in self.points.items()
        }


# --- framing ---------------------------------------------------------------------------


def _corrupt_header(path: Path, offset: int) -> MetricsError:
    return MetricsError(
        f"{path}: corrupt record header at byte {offset} (length CRC mismatch)",
        hint="the event file is damaged; re-copy it from the run directory",
    )


def _corrupt_payload(path: Path, offset: int) -> MetricsError:
    return MetricsError(
        f"{path}: corrupt record payload at byte {offset} (CRC mismatch)",
        hint="the event file is damaged in the middle; re-copy it from the run directory",
    )


def _not_an_event(path: Path, offset: int, why: object) -> MetricsError:
    return MetricsError(
        f"{path}: record at byte {offset} is not a TensorBoard Event ({why})",
        hint="is this an events*tfevents* file written by TensorBoard's SummaryWriter?",
    )


class _Reader:
    """One pass over an event file; see the module docstring."""

    def __init__(self, fh: IO[bytes], path: Path, size: int, sink: _Sink) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.fh, self.path, self.size, self.sink = fh, path, size, sink
        self.parse_event, self.parse_value = Event.FromString, Summary.Value.FromString
        self.records = 0
        self.tail: str | None = None

    def run(self) -> None:
        size = self.size
        buf, buf_at = b"", 0  # buf holds the file's bytes from offset buf_at
        pending: list[tuple[int, int]] = []  # (offset in buf, payload length), not yet checked
        pos = 0
        while pos < size:
            rel = pos - buf_at
            if rel + _HEADER.size > len(buf):
                self._flush(buf, buf_at, pending)
                buf, buf_at, rel = self._refill(buf, buf_at, pos, _HEADER.size), pos, 0
                if len(buf) < _HEADER.size:
                    self.tail = f"partial record header ({len(buf)} of 12 bytes)"
                    return
            (length,) = _LENGTH.unpack_from(buf, rel)
            end = pos + length + _FRAME
            if end > size or length > LARGE:
                self._flush(buf, buf_at, pending)  # an earlier corruption is reported first
                if masked_crc32c(buf[rel : rel + 8]) != _FOOTER.unpack_from(buf, rel + 8)[0]:
                    raise _corrupt_header(self.path, pos)
                if end > size:
                    self.tail = f"record at byte {pos} announces {length} bytes, file ends first"
                    return
                buf, buf_at = b"", end  # not held while the long record streams past
                self._large(pos, length)
                pos = end
                self.fh.seek(end)
                continue
            if rel + length + _FRAME > len(buf):
                self._flush(buf, buf_at, pending)
                buf, buf_at, rel = self._refill(buf, buf_at, pos, length + _FRAME), pos, 0
                if len(buf) < length + _FRAME:  # the file shrank while being read
                    self.tail = f"record at byte {pos} announces {length} bytes, file ends first"
                    return
            pending.append((rel, length))
            pos = end
        self._flush(buf, buf_at, pending)

    def _refill(self, buf: bytes, buf_at: int, pos: int, need: int) -> bytes:
        """The file's bytes from ``pos``: at least ``need`` if the file has them, up to a block."""
        kept = buf[pos - buf_at :]
        ahead = self.size - pos - len(kept)  # not read yet
        want = min(ahead, max(need - len(kept), min(BLOCK, ahead)))
        return kept + self.fh.read(want) if want > 0 else kept

    def _flush(self, buf: bytes, buf_at: int, pending: list[tuple[int, int]]) -> None:
        """Verify every pending record's CRCs (vectorised), then decode them."""
        if not pending:
            return
        raw = np.frombuffer(buf, dtype=np.uint8)
        offsets = np.fromiter((p[0] for p in pending), dtype=np.int64, count=len(pending))
        lengths = np.fromiter((p[1] for p in pending), dtype=np.int64, count=len(pending))
        words = np.lib.stride_tricks.sliding_window_view(raw, 4)
        header_crc = _masked_columns(
            np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(raw, 8)[offsets].T)
        )
        bad = np.flatnonzero(header_crc != _u32(words[offsets + 8]))
        if bad.size:
            raise _corrupt_header(self.path, buf_at + int(offsets[bad[0]]))
        starts = offsets + _HEADER.size
        first_bad: int | None = None
        for length in np.unique(lengths).tolist():
            idx = np.flatnonzero(lengths == length)
            if length:
                rows = np.lib.stride_tricks.sliding_window_view(raw, length)[starts[idx]]
                crcs = _masked_crc_rows(rows)
            else:
                crcs = np.full(idx.size, _mask(0xFFFFFFFF), dtype=np.uint32)
            wrong = np.flatnonzero(crcs != _u32(words[starts[idx] + length]))
            if wrong.size:
                at = int(offsets[idx[wrong[0]]])
                first_bad = at if first_bad is None else min(first_bad, at)
        if first_bad is not None:
            raise _corrupt_payload(self.path, buf_at + first_bad)
        view, parse, add = memoryview(buf), self.parse_event, self.sink.add
        for rel, length in pending:
            start = rel + _HEADER.size
            try:
                event = parse(view[start : start + length])
            except Exception as exc:  # protobuf DecodeError: CRC fine, so not an Event at all
                raise _not_an_event(self.path, buf_at + rel, exc) from exc
            add(event.step, event.summary.value)
        self.records += len(pending)
        pending.clear()

    def _large(self, pos: int, length: int) -> None:
        """A long record: CRC while streaming, then decode only its small Summary values."""
        fh = self.fh
        fh.seek(pos + _HEADER.size)
        state, left = 0xFFFFFFFF, length
        while left:
            chunk = fh.read(min(LARGE, left))
            if not chunk:
                raise MetricsError(f"{self.path}: the file shrank while being read")
            state = _crc_update(state, np.frombuffer(chunk, dtype=np.uint8))
            left -= len(chunk)
        footer = fh.read(_FOOTER.size)
        if len(footer) < _FOOTER.size or _mask(state) != _FOOTER.unpack(footer)[0]:
            raise _corrupt_payload(self.path, pos)
        try:
            step, values = _scan_event(_Wire(fh, pos + _HEADER.size, length), self.parse_value)
        except Exception as exc:  # malformed wire data, or a Value protobuf cannot decode
            raise _not_an_event(self.path, pos, exc) from exc
        self.sink.add(step, values)
        self.records += 1


def _u32(rows: np.ndarray) -> np.ndarray:
    """Little-endian uint32 of every 4-byte row."""
    return np.ascontiguousarray(rows).view("<u4").ravel()


class _Wire:
    """Protobuf wire-format reader over a region of a file (small reads, seeks to skip)."""

    def __init__(self, fh: IO[bytes], start: int, length: int) -> None:
        self.fh, self.pos, self.end = fh, start, start + length
        self.buf, self.buf_at = b"", start

    def _byte(self) -> int:
        rel = self.pos - self.buf_at
        if rel >= len(self.buf):
            self.fh.seek(self.pos)
            self.buf, self.buf_at, rel = self.fh.read(min(4096, self.end - self.pos)), self.pos, 0
            if not self.buf:
                raise ValueError("truncated varint")
        self.pos += 1
        return self.buf[rel]

    def varint(self) -> int:
        out, shift = 0, 0
        while True:
            if self.pos >= self.end or shift > 63:
                raise ValueError("malformed varint")
            byte = self._byte()
            out |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return out
            shift += 7

    def take(self, n: int) -> int:
        """Advance over ``n`` bytes; the offset they start at."""
        if n < 0 or self.pos + n > self.end:
            raise ValueError("field runs past the end of the record")
        at, self.pos = self.pos, self.pos + n
        return at

    def read(self, n: int) -> bytes:
        at = self.take(n)
        rel = at - self.buf_at
        if 0 <= rel and rel + n <= len(self.buf):
            return self.buf[rel : rel + n]
        self.fh.seek(at)
        data = self.fh.read(n)
        if len(data) != n:
            raise ValueError("truncated field")
        return data

    def skip(self, wire_type: int) -> None:
        if wire_type == 0:
            self.varint()
        elif wire_type == 1:
            self.take(8)
        elif wire_type == 2:
            self.take(self.varint())
        elif wire_type == 5:
            self.take(4)
        else:
            raise ValueError(f"unsupported wire type {wire_type}")


def _scan_event(wire: _Wire, parse_value: Any) -> tuple[int, list[Any]]:
    """``Event.step`` and the small ``Summary.Value`` entries of a long Event record."""
    step, values = 0, []
    while wire.pos < wire.end:
        key = wire.varint()
        number, wire_type = key >> 3, key & 7
        if number == 2 and wire_type == 0:  # Event.step (int64)
            step = wire.varint()
            step = step - (1 << 64) if step > _MAX_STEP else step
        elif number == 5 and wire_type == 2:  # Event.summary
            size = wire.varint()
            end = wire.pos + size
            if end > wire.end:
                raise ValueError("summary runs past the end of the record")
            while wire.pos < end:
                key = wire.varint()
                if key >> 3 == 1 and key & 7 == 2:  # Summary.value
                    size = wire.varint()
                    if size <= MAX_VALUE:
                        values.append(parse_value(wire.read(size)))
                    else:
                        wire.take(size)  # an image, histogram or tensor: not a scalar
                else:
                    wire.skip(key & 7)
            if wire.pos != end:
                raise ValueError("summary length does not match its values")
        else:
            wire.skip(wire_type)
    return step, values


def read_event_file(
    path: str | os.PathLike[str], tags: Container[str] | None = None
) -> EventScalars:
    """Read one event file's scalars (see the module docstring for the rules).

    Args:
        path: the event file.
        tags: keep only these tags (default: every scalar tag).
    """
    file = Path(path)
    sink = _Sink(tags)
    with file.open("rb") as fh:
        reader = _Reader(fh, file, os.fstat(fh.fileno()).st_size, sink)
        reader.run()
    out = EventScalars(path=file, series=sink.series(), records=reader.records)
    if reader.tail is not None:
        out.warnings.append(f"{file}: truncated last record dropped ({reader.tail})")
    return out
