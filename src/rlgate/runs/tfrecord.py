"""Streaming TFRecord/Event-file reader: framing, CRC32C and scalar extraction.

A TensorBoard event file is a sequence of TFRecords::

    uint64 length | uint32 masked_crc32c(length) | payload[length] | uint32 masked_crc32c(payload)

and each payload is a serialized ``tensorboard.Event`` (decoded here with tensorboard's
compiled protos, ``tensorboard.compat.proto.event_pb2``).

Why not ``EventAccumulator``: its compat reader computes CRC32C in pure Python one byte
at a time and routes every event through locks, reservoirs and plugin conversions.

Memory is proportional to what is kept (the scalar points, 16 bytes each), not to the file:

* the file is read in blocks of :data:`BLOCK` bytes; the records of one block are framed in a
  tight loop, have their header and payload CRCs verified at once (a table-driven CRC32C
  vectorised with numpy over records of equal length) and are decoded, then the block is
  dropped;
* decoding: a record in the exact layout of ``add_scalar`` from torch's SummaryWriter
  (``Event{wall_time, step, summary{value{tag, simple_value}}}`` in field order, every byte
  explained by it) is decoded with numpy, many records at once, tags grouped by sorting
  their bytes; every other record goes through protobuf's ``Event.FromString``. Points of
  one tag keep file order whichever way their records were decoded;
* a record longer than :data:`LARGE` (an image, a histogram, a graph) is never held whole:
  its CRC is computed chunk by chunk as it streams past (chunks split into columns and
  recombined with the CRC's linearity, so a long record costs milliseconds per MB, not a
  Python loop per byte; google-crc32c's C code when it is installed), and its protobuf
  is walked field by field so that only the small
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

try:  # a C CRC-32C for long buffers (hundreds of times the numpy columns); numpy otherwise
    import google_crc32c
except ImportError:  # pragma: no cover - depends on the install
    _C_EXTEND = None
else:  # its pure-Python fallback is slower than the numpy columns: not used
    _C_EXTEND = google_crc32c.extend if google_crc32c.implementation == "c" else None
_C_MIN = 256  # shorter buffers: a call per record costs more than a numpy step over many


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
    if n >= _C_MIN and _C_EXTEND is not None:
        return _C_EXTEND(state ^ 0xFFFFFFFF, data.tobytes()) ^ 0xFFFFFFFF
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


def _scalars(values: Any, tags: Container[str] | None) -> list[tuple[str, float]]:
    """The kept ``(tag, scalar)`` pairs of an Event's ``Summary.Value`` entries, in order."""
    out = []
    for value in values:  # empty for file_version/graph/session_log events
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            scalar: float | None = value.simple_value
        elif kind == "tensor":
            scalar = _tensor_scalar(value)
        else:
            continue
        if scalar is None or (tags is not None and value.tag not in tags):
            continue
        out.append((value.tag, scalar))
    return out


class _Sink:
    """Collects (step, value) per tag in compact arrays (16 bytes per kept point)."""

    def __init__(self, tags: Container[str] | None) -> None:
        self.tags = tags
        self.points: dict[str, tuple[array, array]] = {}

    def _arrays(self, tag: str) -> tuple[array, array]:
        try:
            return self.points[tag]
        except KeyError:
            arrays = self.points[tag] = (array("q"), array("d"))
            return arrays

    def add(self, step: int, values: Any) -> None:
        """Append one Event's kept scalars."""
        for tag, scalar in _scalars(values, self.tags):
            steps, vals = self._arrays(tag)
            steps.append(step)
            vals.append(scalar)

    def extend(self, tag: str, steps: np.ndarray, vals: np.ndarray) -> None:
        """Append many points of one tag at once (int64 steps, float64 values)."""
        s, v = self._arrays(tag)
        s.frombytes(memoryview(np.ascontiguousarray(steps, dtype=np.int64)).cast("B"))
        v.frombytes(memoryview(np.ascontiguousarray(vals, dtype=np.float64)).cast("B"))

    def series(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {
            tag: (np.frombuffer(s, dtype=np.int64), np.frombuffer(v, dtype=np.float64))
            for tag, (s, v) in self.points.items()
        }


# --- the canonical add_scalar layout, decoded for many records at once ------------------
#
# torch's SummaryWriter.add_scalar (and tensorboardX's) serialise
#
#   Event{wall_time(1, fixed64), step(2, varint), summary(5){value(1){tag(1), simple_value(2)}}}
#
# in field order. For the records of one length, :func:`_canonical` checks with numpy that
# every byte is explained by that layout (field keys, and each length consistent with the
# record's length) and decodes step, tag and value; every other record goes to protobuf.

_CANONICAL_MIN = 23  # 9 wall_time + 2 step + 2 summary + 2 value + 3 tag (1 byte) + 5 float


def _varints(
    rows: np.ndarray, at: np.ndarray, most: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varint at column ``at`` of every row: (value uint64, the column after it, well-formed)."""
    n, width = rows.shape
    index = np.arange(n)
    value = np.zeros(n, dtype=np.uint64)
    done = np.zeros(n, dtype=bool)
    after = at.copy()
    for j in range(most):
        col = at + j
        live = ~done & (col < width)
        byte = rows[index, np.minimum(col, width - 1)]
        bits = (byte & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        value |= np.where(live, bits, np.uint64(0))
        ends = live & (byte < 0x80)
        if j == 9:  # the tenth byte of a 64-bit varint holds one bit: else leave it to protobuf
            ends &= byte <= 1
        after = np.where(ends, col + 1, after)
        done |= ends
        if done.all():
            break
    return value, after, done


def _canonical(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For records of one length (rows): (ok, step int64, value float64, tag start column).

    A record is ok when it is exactly the canonical layout; its tag is the bytes from its tag
    start column up to the last 5 bytes (key 0x15 + the float32).
    """
    n, width = rows.shape
    index = np.arange(n)
    last = width - 1

    def byte_at(col: np.ndarray) -> np.ndarray:
        return rows[index, np.minimum(col, last)]

    ok = (rows[:, 0] == 0x09) & (rows[:, 9] == 0x10)
    step, at, good = _varints(rows, np.full(n, 10, dtype=np.int64), 10)
    ok &= good & (byte_at(at) == 0x2A)
    for key in (0x0A, 0x0A):  # Summary.value, then Value.tag: each runs to the record's end
        size, after, good = _varints(rows, at + 1, 3)
        ok &= good & (after.astype(np.uint64) + size == width) & (byte_at(after) == key)
        at = after
    size, after, good = _varints(rows, at + 1, 3)
    tag_end = after.astype(np.uint64) + size
    ok &= good & (size > 0) & (tag_end == width - 5) & (rows[:, width - 5] == 0x15)
    values = np.ascontiguousarray(rows[:, width - 4 :]).view("<f4").ravel().astype(np.float64)
    return ok, step.view(np.int64), values, after


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


def _event_parser() -> Any:
    """Protobuf's ``Event.FromString`` (a function, so tests can count its calls)."""
    from tensorboard.compat.proto.event_pb2 import Event

    return Event.FromString


class _Reader:
    """One pass over an event file; see the module docstring."""

    def __init__(self, fh: IO[bytes], path: Path, size: int, sink: _Sink) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self.fh, self.path, self.size, self.sink = fh, path, size, sink
        self.parse_event, self.parse_value = _event_parser(), Summary.Value.FromString
        self.records = 0
        self.tail: str | None = None

    def run(self) -> None:
        size, unpack = self.size, _LENGTH.unpack_from
        buf, buf_at = b"", 0  # buf holds the file's bytes from offset buf_at
        pending: list[int] = []  # offsets in buf of whole records, CRCs not yet checked
        pos = 0
        while pos < size:
            rel, have, append = pos - buf_at, len(buf), pending.append
            while rel + _HEADER.size <= have:  # every small record wholly in the buffer
                (length,) = unpack(buf, rel)
                after = rel + length + _FRAME
                if after > have or length > LARGE:
                    break
                append(rel)
                rel = after
            pos = buf_at + rel
            if pos >= size:
                break
            if rel + _HEADER.size > have:
                self._flush(buf, buf_at, pending)
                buf, buf_at, rel = self._refill(buf, buf_at, pos, _HEADER.size), pos, 0
                if len(buf) < _HEADER.size:
                    self.tail = f"partial record header ({len(buf)} of 12 bytes)"
                    return
                continue
            (length,) = unpack(buf, rel)
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
            self._flush(buf, buf_at, pending)  # the record runs past the buffer
            buf, buf_at = self._refill(buf, buf_at, pos, length + _FRAME), pos
            if len(buf) < length + _FRAME:  # the file shrank while being read
                self.tail = f"record at byte {pos} announces {length} bytes, file ends first"
                return
        self._flush(buf, buf_at, pending)

    def _refill(self, buf: bytes, buf_at: int, pos: int, need: int) -> bytes:
        """The file's bytes from ``pos``: at least ``need`` if the file has them, up to a block."""
        kept = buf[pos - buf_at :]
        ahead = self.size - pos - len(kept)  # not read yet
        want = min(ahead, max(need - len(kept), min(BLOCK, ahead)))
        return kept + self.fh.read(want) if want > 0 else kept

    def _flush(self, buf: bytes, buf_at: int, pending: list[int]) -> None:
        """Verify every pending record's CRCs (vectorised), then decode them in file order."""
        if not pending:
            return
        raw = np.frombuffer(buf, dtype=np.uint8)
        offsets = np.array(pending, dtype=np.int64)
        heads = np.lib.stride_tricks.sliding_window_view(raw, 8)[offsets]
        lengths = np.ascontiguousarray(heads).view("<u8").ravel().astype(np.int64)
        words = np.lib.stride_tricks.sliding_window_view(raw, 4)
        header_crc = _masked_columns(np.ascontiguousarray(heads.T))
        bad = np.flatnonzero(header_crc != _u32(words[offsets + 8]))
        if bad.size:
            raise _corrupt_header(self.path, buf_at + int(offsets[bad[0]]))
        starts = offsets + _HEADER.size
        slow = np.ones(len(pending), dtype=bool)  # records left to protobuf
        chunks: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        first_bad: int | None = None
        order = np.argsort(lengths, kind="stable")
        cuts = np.flatnonzero(np.diff(lengths[order])) + 1
        for idx in np.split(order, cuts):
            length = int(lengths[idx[0]])
            if length:
                rows = np.lib.stride_tricks.sliding_window_view(raw, length)[starts[idx]]
                crcs = _masked_crc_rows(rows)
            else:
                crcs = np.full(idx.size, _mask(0xFFFFFFFF), dtype=np.uint32)
            wrong = np.flatnonzero(crcs != _u32(words[starts[idx] + length]))
            if wrong.size:
                at = int(offsets[idx[wrong[0]]])
                first_bad = at if first_bad is None else min(first_bad, at)
            elif first_bad is None and length >= _CANONICAL_MIN:
                self._fast(rows, idx, slow, chunks)
        if first_bad is not None:
            raise _corrupt_payload(self.path, buf_at + first_bad)
        view, parse, tags = memoryview(buf), self.parse_event, self.sink.tags
        late: dict[str, tuple[list[int], list[int], list[float]]] = {}
        for i in np.flatnonzero(slow).tolist():
            rel = pending[i]
            start, length = rel + _HEADER.size, int(lengths[i])
            try:
                event = parse(view[start : start + length])
            except Exception as exc:  # protobuf DecodeError: CRC fine, so not an Event at all
                raise _not_an_event(self.path, buf_at + rel, exc) from exc
            for tag, scalar in _scalars(event.summary.value, tags):
                where, steps, vals = late.setdefault(tag, ([], [], []))
                where.append(i)
                steps.append(event.step)
                vals.append(scalar)
        for tag, (where, steps, vals) in late.items():
            chunks.setdefault(tag, []).append(
                (
                    np.array(where, dtype=np.int64),
                    np.array(steps, dtype=np.int64),
                    np.array(vals, dtype=np.float64),
                )
            )
        self._sink_block(chunks, {tag: rank for rank, tag in enumerate(late)})
        self.records += len(pending)
        pending.clear()

    def _fast(
        self,
        rows: np.ndarray,
        idx: np.ndarray,
        slow: np.ndarray,
        chunks: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    ) -> None:
        """Decode the canonical records among ``rows`` (records ``idx``, one length)."""
        ok, steps, values, tag_at = _canonical(rows)
        width, tags = rows.shape[1], self.sink.tags
        for col in np.unique(tag_at[ok]).tolist():  # one tag width at a time
            sel = np.flatnonzero(ok & (tag_at == col))
            names = np.ascontiguousarray(rows[sel, col : width - 5])
            uniq, inverse = np.unique(
                names.view(f"V{width - 5 - col}").ravel(), return_inverse=True
            )
            by_tag = np.argsort(inverse, kind="stable")  # file order within each tag
            cuts = np.flatnonzero(np.diff(inverse[by_tag])) + 1
            for name, group in zip(uniq.tolist(), np.split(by_tag, cuts), strict=True):
                try:
                    tag = bytes(name).decode("utf-8")
                except UnicodeDecodeError:
                    continue  # left to protobuf, which decides what such a record is
                mine = sel[group]
                slow[idx[mine]] = False
                if tags is None or tag in tags:
                    chunks.setdefault(tag, []).append((idx[mine], steps[mine], values[mine]))

    def _sink_block(
        self,
        chunks: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]],
        late_rank: dict[str, int],
    ) -> None:
        """Append one block's points: new tags in order of first appearance, each in file order.

        Two tags can first appear in the same record only if protobuf decoded it (a fast record
        has one value); ``late_rank`` is then their order of appearance.
        """
        firsts = sorted(
            ((min(int(c[0][0]) for c in parts), late_rank.get(tag, 0)), tag)
            for tag, parts in chunks.items()
        )
        for _, tag in firsts:
            parts = chunks[tag]
            if len(parts) == 1:
                _, steps, vals = parts[0]
            else:
                where = np.concatenate([p[0] for p in parts])
                order = np.argsort(where, kind="stable")
                steps = np.concatenate([p[1] for p in parts])[order]
                vals = np.concatenate([p[2] for p in parts])[order]
            self.sink.extend(tag, steps, vals)

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
