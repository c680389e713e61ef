"""Fast TFRecord/Event-file reader: framing, CRC32C and scalar extraction.

A TensorBoard event file is a sequence of TFRecords::

    uint64 length | uint32 masked_crc32c(length) | payload[length] | uint32 masked_crc32c(payload)

and each payload is a serialized ``tensorboard.Event`` (decoded here with tensorboard's
compiled protos, ``tensorboard.compat.proto.event_pb2``).

Why not ``EventAccumulator``: its compat reader computes CRC32C in pure Python one byte
at a time and routes every event through locks, reservoirs and plugin conversions. Here
the framing walk is a tight loop over ``struct.unpack_from`` and all CRCs (headers *and*
payloads) are verified at once with a table-driven CRC32C vectorised over records of equal
length (numpy), so integrity checking stays on without the per-byte Python cost.

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

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlgate._errors import MetricsError

__all__ = ["EventScalars", "crc32c", "masked_crc32c", "read_event_file"]

_HEADER = struct.Struct("<QI")
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected

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


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (scalar reference implementation)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = int(_TABLE[(crc ^ byte) & 0xFF]) ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _masked_crc_columns(cols: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of every column of a 2-D uint8 array (one record per column).

    Column-major so that each of the ``L`` table-lookup steps reads one contiguous row.
    """
    crc = np.full(cols.shape[1], 0xFFFFFFFF, dtype=np.uint32)
    for row in cols:
        crc = _TABLE[(crc ^ row) & 0xFF] ^ (crc >> np.uint32(8))
    crc ^= np.uint32(0xFFFFFFFF)
    rotated = (crc >> np.uint32(15)) | (crc << np.uint32(17))
    return (rotated.astype(np.uint64) + _MASK_DELTA).astype(np.uint32)


def _masked_crc_rows(rows: np.ndarray) -> np.ndarray:
    """Masked CRC-32C of every row of a 2-D uint8 array (all rows the same length)."""
    return _masked_crc_columns(np.ascontiguousarray(rows.T))


@dataclass
class EventScalars:
    """Scalars of one event file: ``{tag: (steps int64, values float64)}`` in file order."""

    path: Path
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    records: int = 0
    warnings: list[str] = field(default_factory=list)


def _walk(buf: bytes, path: Path) -> tuple[np.ndarray, np.ndarray, str | None]:
    """Record offsets and payload lengths; the reason if the tail is incomplete.

    Lengths are trusted here and verified afterwards (every header CRC, vectorised); only a
    record that runs past the end of the file gets its header CRC checked on the spot, to
    tell a truncated tail from a corrupt length.
    """
    offsets: list[int] = []
    lengths: list[int] = []
    add_offset, add_length = offsets.append, lengths.append
    unpack = _LENGTH.unpack_from
    pos, size = 0, len(buf)
    while pos + _HEADER.size <= size:
        (length,) = unpack(buf, pos)
        end = pos + _HEADER.size + length + _FOOTER.size
        if end > size:
            break
        add_offset(pos)
        add_length(length)
        pos = end
    tail: str | None = None
    if pos < size:
        if size - pos < _HEADER.size:
            tail = f"partial record header ({size - pos} of 12 bytes)"
        else:
            length, header_crc = _HEADER.unpack_from(buf, pos)
            if masked_crc32c(buf[pos : pos + 8]) != header_crc:
                raise MetricsError(
                    f"{path}: corrupt record header at byte {pos} (length CRC mismatch)",
                    hint="the event file is damaged; re-copy it from the run directory",
                )
            tail = f"record at byte {pos} announces {length} bytes, file ends first"
    return np.asarray(offsets, dtype=np.int64), np.asarray(lengths, dtype=np.int64), tail


def _verify_crcs(buf: bytes, offsets: np.ndarray, lengths: np.ndarray, path: Path) -> None:
    """Verify all header and payload CRCs, vectorised per payload length."""
    if not offsets.size:
        return
    raw = np.frombuffer(buf, dtype=np.uint8)
    header = raw[np.arange(8)[:, None] + offsets[None, :]]
    stored_crc = raw[offsets[:, None] + np.arange(8, 12)].copy().view("<u4").ravel()
    bad = np.flatnonzero(_masked_crc_columns(header) != stored_crc)
    if bad.size:
        raise MetricsError(
            f"{path}: corrupt record header at byte {int(offsets[bad[0]])} (CRC mismatch)",
            hint="the event file is damaged in the middle; re-copy it from the run directory",
        )
    starts = offsets + _HEADER.size
    for length in np.unique(lengths):
        idx = np.flatnonzero(lengths == length)
        cols = raw[np.arange(int(length))[:, None] + starts[idx][None, :]]
        ends = starts[idx] + length
        footer = raw[ends[:, None] + np.arange(4)].copy().view("<u4").ravel()
        wrong = np.flatnonzero(_masked_crc_columns(cols) != footer)
        if wrong.size:
            raise MetricsError(
                f"{path}: corrupt record payload at byte {int(offsets[idx[wrong[0]]])} "
                "(CRC mismatch)",
                hint="the event file is damaged in the middle; re-copy it from the run directory",
            )


def _tensor_scalar(value: object) -> float | None:
    tensor = value.tensor  # type: ignore[attr-defined]
    if value.metadata.plugin_data.plugin_name != "scalars" or tensor.tensor_shape.dim:  # type: ignore[attr-defined]
        return None
    spec = _TENSOR_DTYPES.get(tensor.dtype)
    if spec is None:
        return None
    dtype, field_name = spec
    if tensor.tensor_content:
        arr = np.frombuffer(tensor.tensor_content, dtype=dtype)
        return float(arr[0]) if arr.size == 1 else None
    vals = getattr(tensor, field_name)
    if len(vals) != 1:
        return None
    if dtype is np.float16:  # half_val stores the raw 16-bit pattern in an int
        return float(np.array([vals[0]], dtype=np.uint16).view(np.float16)[0])
    return float(vals[0])


def read_event_file(path: str | Path) -> EventScalars:
    """Read one event file's scalars (see the module docstring for the rules)."""
    from tensorboard.compat.proto.event_pb2 import Event

    file = Path(path)
    buf = file.read_bytes()
    offsets, lengths, tail = _walk(buf, file)
    _verify_crcs(buf, offsets, lengths, file)
    out = EventScalars(path=file, records=int(offsets.size))
    if tail is not None:
        out.warnings.append(f"{file}: truncated last record dropped ({tail})")
    acc: dict[str, tuple[list[int], list[float]]] = {}
    parse, view = Event.FromString, memoryview(buf)
    for start, length in zip((offsets + _HEADER.size).tolist(), lengths.tolist(), strict=True):
        try:
            event = parse(view[start : start + length])
        except Exception as exc:  # protobuf DecodeError: CRC fine, so not an Event at all
            raise MetricsError(
                f"{file}: record at byte {start - 12} is not an Event: {exc}"
            ) from exc
        step = event.step
        for value in event.summary.value:  # empty for file_version/graph/session_log events
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
            try:
                points = acc[tag]
            except KeyError:
                points = acc[tag] = ([], [])
            points[0].append(step)
            points[1].append(scalar)
    out.series = {
        tag: (np.asarray(s, dtype=np.int64), np.asarray(v, dtype=np.float64))
        for tag, (s, v) in acc.items()
    }
    return out
