"""STRING tensors' packed layout, as TFLite stores them (tflite/string_util.h): a little-endian int32 count N, N + 1
int32 offsets (byte positions from the buffer's start: string i is bytes [offset[i], offset[i + 1]), the last offset
is the end of the data), then the N strings' bytes back to back, with no terminators. Model buffers hold it; the
runtime keeps every STRING tensor's value in it (lite_numba/runtime/strings.py) and the string kernels (kernels/text,
the Flex text ops) read and write it. The bytes are never decoded: invalid UTF-8, empty strings and embedded NULs pass
through untouched.

`offsets` validates a buffer (count not negative and matching the tensor, the header inside the buffer, offsets in
order and inside the buffer) before anything indexes it, so a corrupt buffer is an error naming the tensor, never a
read past its end. Everything is numpy over whole buffers: no Python loop per string except where Python objects
(bytes) are made or read.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

# offsets are int32: a packed buffer holds at most 2 GiB - 1 bytes (the official DynamicBuffer's limit too)
MAX_PACKED_BYTES = (1 << 31) - 1


class StringBufferError(ValueError):
    """A packed string buffer that does not hold what its header says (corrupt model or data)."""


def header_bytes(count: int) -> int:
    """Bytes of the header of a buffer of `count` strings: the count and count + 1 offsets."""
    return 4 * (count + 2)


def offsets(buf: np.ndarray, count: int | None = None, what: str = "string tensor") -> np.ndarray:
    """The count + 1 offsets of a packed buffer (int64), after checking it: at least a count, the count not negative
    (and equal to `count` when given: the tensor's element count), the header inside the buffer, the first offset
    at or after the header's end, offsets in order and the last one inside the buffer. StringBufferError names
    `what` otherwise."""
    buf = np.asarray(buf)
    if buf.dtype != np.uint8 or buf.ndim != 1:
        raise StringBufferError(f"{what}: a packed string buffer is 1-D uint8, got {buf.dtype.name} {buf.shape}")
    n = buf.size
    if n < 4:
        raise StringBufferError(f"{what}: string buffer has {n} bytes, too few for its count (4 bytes)")
    got = int(buf[:4].view("<i4")[0])
    if got < 0:
        raise StringBufferError(f"{what}: string buffer count is {got} (negative)")
    if count is not None and got != count:
        raise StringBufferError(f"{what}: string buffer holds {got} strings, the tensor has {count} elements")
    head = header_bytes(got)
    if head > n:
        raise StringBufferError(f"{what}: string buffer count {got} needs a {head}-byte header, the buffer has {n} "
                                f"bytes")
    offs = buf[4:head].view("<i4").astype(np.int64)
    if offs[0] < head or offs.max() > n or (got and bool(np.any(offs[1:] < offs[:-1]))):
        bad = "out of order" if offs[0] >= head and offs.max() <= n else "outside the buffer"
        raise StringBufferError(f"{what}: string buffer offsets are {bad} (first {int(offs[0])}, last "
                                f"{int(offs[-1])}, header {head} bytes, buffer {n} bytes)")
    return offs


def build(lengths: np.ndarray, data: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A packed buffer of strings with these lengths whose bytes are `data` back to back (uint8, sum(lengths) bytes),
    written into `out` (uint8, exactly packed_size(lengths) bytes) or a new array."""
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    count = lengths.size
    head = header_bytes(count)
    total = head + int(data.size)
    if total > MAX_PACKED_BYTES:
        raise StringBufferError(f"a string tensor of {count} strings and {int(data.size)} bytes is larger than a "
                                f"packed buffer holds ({MAX_PACKED_BYTES} bytes: offsets are int32)")
    if out is None:
        out = np.empty(total, np.uint8)
    hdr = np.empty(count + 2, "<i4")
    hdr[0] = count
    hdr[1] = head
    if count:
        hdr[2:] = head + np.cumsum(lengths)
    out[:head] = hdr.view(np.uint8)
    out[head:total] = data
    return out


def packed_size(lengths: np.ndarray) -> int:
    """Bytes of the packed buffer of strings with these lengths."""
    lengths = np.asarray(lengths).reshape(-1)
    return header_bytes(lengths.size) + int(lengths.sum())


def pack(items: Iterable[bytes]) -> np.ndarray:
    """The packed buffer of a sequence of bytes objects."""
    items = list(items)
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    data = np.frombuffer(b"".join(items), np.uint8)
    return build(lengths, data)


def empty(count: int) -> np.ndarray:
    """The packed buffer of `count` empty strings."""
    return build(np.zeros(count, np.int64), np.zeros(0, np.uint8))


def items(buf: np.ndarray, offs: np.ndarray | None = None) -> list[bytes]:
    """The strings of a packed buffer, as bytes objects (offsets: its checked offsets, else checked here)."""
    if offs is None:
        offs = offsets(buf)
    raw = np.asarray(buf).tobytes()
    bounds = offs.tolist()
    return [raw[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def to_array(buf: np.ndarray, shape: tuple[int, ...], what: str = "string tensor") -> np.ndarray:
    """The tensor's value as the official get_tensor gives it: an object array of bytes of `shape`."""
    offs = offsets(buf, math.prod(shape), what)
    out = np.empty(len(offs) - 1, object)
    out[:] = items(buf, offs)
    return out.reshape(shape)


def is_string_array(value: np.ndarray) -> bool:
    """Whether set_tensor may take this array for a STRING tensor: bytes or str (object, S or U dtype)."""
    return value.dtype.kind in "OSU"


def from_array(value, what: str = "string tensor") -> np.ndarray:
    """The packed buffer of an array of bytes or str (dtype object, S or U; str encoded as UTF-8), in C order. S
    arrays keep their bytes up to numpy's trailing-NUL padding (numpy cannot tell those NULs from padding); object
    arrays keep every byte."""
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    if arr.dtype.kind == "S":
        seq = flat.tolist()
    elif arr.dtype.kind == "U":
        seq = [s.encode("utf-8") for s in flat.tolist()]
    elif arr.dtype.kind == "O":
        seq = []
        for s in flat.tolist():
            if isinstance(s, (bytes, bytearray, memoryview)):
                seq.append(bytes(s))
            elif isinstance(s, str):
                seq.append(s.encode("utf-8"))
            elif isinstance(s, np.bytes_):
                seq.append(bytes(s))
            else:
                raise ValueError(f"{what}: cannot set a string from a {type(s).__name__} ({s!r}): give bytes or str")
    else:
        raise ValueError(f"{what}: expected an array of bytes or str, got {arr.dtype.name}")
    return pack(seq)


def take(buf: np.ndarray, offs: np.ndarray, index: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The packed buffer of strings index[0], index[1], ... of `buf` (flat element indices, already checked to be in
    range; offs: buf's checked offsets), into `out` (uint8 of exactly take_size(...) bytes) or a new array."""
    index = np.asarray(index, np.int64).reshape(-1)
    starts = offs[:-1][index]
    lens = offs[1:][index] - starts
    total = int(lens.sum())
    data = np.empty(total, np.uint8)
    if total:
        rel = np.cumsum(lens) - lens  # where each string starts in data
        pos = np.repeat(starts - rel, lens) + np.arange(total, dtype=np.int64)
        np.take(np.asarray(buf), pos, out=data)
    return build(lens, data, out)


def take_size(offs: np.ndarray, index: np.ndarray) -> int:
    """Bytes of take(buf, offs, index)."""
    index = np.asarray(index, np.int64).reshape(-1)
    return header_bytes(index.size) + int((offs[1:][index] - offs[:-1][index]).sum())


def lengths(offs: np.ndarray) -> np.ndarray:
    """The strings' byte lengths, from checked offsets."""
    return offs[1:] - offs[:-1]


class StringBuffers(dict):
    """The values of a graph's STRING tensors, outside the arena: {tensor index: buffer}, each buffer a uint8 array
    holding the tensor's packed value in its first `sizes[index]` bytes, sized when the value is written — at run
    time, by set_tensor or a kernel (GraphRuntime.strings; kernels write through PrepareContext.string_output).

    A tensor's buffer is reused by its next write when the new value fits (every invoke and resize reuses it), and
    replaced when the value outgrows it or needs less than a quarter of it (the old one is freed); `clear()` frees
    them all. `check(nbytes, what)` is the runtime's memory limit, called before a buffer is made (a MemoryError
    naming the tensor). A copy (GraphRuntime.share, a clone) copies the values: writes never reach the other's."""

    def __init__(self, check=None):
        super().__init__()
        self.check = check
        self.sizes: dict[int, int] = {}

    def value(self, i: int, t) -> np.ndarray:
        """Tensor i's packed value (t: its runtime Tensor: shape, dtype, name), a new view at every call; a tensor
        never written reads as empty strings of its current shape. A tensor that is not STRING has no storage
        here: the runtime's "Tensor data is null" error."""
        if t.dtype != np.dtype(object):
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        count = math.prod(t.shape)
        buf = self.get(i)
        if buf is None or int(buf[:4].view("<i4")[0]) != count:  # never written, or resized since
            buf = self.reserve(i, header_bytes(count), t.name)
            build(np.zeros(count, np.int64), np.zeros(0, np.uint8), buf)
        return buf[:self.sizes[i]]

    def reserve(self, i: int, nbytes: int, name: str = "") -> np.ndarray:
        """A writable buffer of exactly `nbytes` for tensor i's next value (its storage, reused when it fits); the
        caller fills it with a whole packed value."""
        if nbytes > MAX_PACKED_BYTES:
            raise StringBufferError(f"string tensor {i} ({name!r}) would need {nbytes} bytes, more than a packed "
                                    f"buffer holds ({MAX_PACKED_BYTES} bytes: offsets are int32)")
        buf = self.get(i)
        if buf is None or buf.size < nbytes or buf.size > 4 * max(nbytes, 64):
            if self.check is not None:
                self.check(nbytes, f"string tensor {i} ({name!r}, {nbytes} bytes packed)")
            self.pop(i, None)  # (the old buffer is freed before the new one is made)
            buf = self[i] = np.empty(max(nbytes, 64), np.uint8)
        self.sizes[i] = nbytes
        return buf[:nbytes]

    def put(self, i: int, packed: np.ndarray, name: str = "") -> None:
        """Tensor i's value becomes a copy of this packed buffer."""
        self.reserve(i, packed.size, name)[:] = packed

    def write_array(self, i: int, value, name: str = "") -> None:
        """Tensor i's value becomes this array of bytes or str (from_array: str as UTF-8), as set_tensor gives it."""
        self.put(i, from_array(value, f"tensor {i} ({name!r})"), name)

    def read_array(self, i: int, t) -> np.ndarray:
        """Tensor i's value as an object array of bytes of its shape (t: its runtime Tensor; a constant's packed bytes
        are its data), as get_tensor gives it."""
        return to_array(self.value(i, t) if t.data is None else t.data, t.shape, f"tensor {i} ({t.name!r})")

    def clear(self) -> None:
        super().clear()
        self.sizes.clear()

    def snapshot(self) -> dict[int, np.ndarray]:
        """{tensor index: a copy of its packed value} (picklable: capture_state)."""
        return {i: np.array(buf[:self.sizes[i]], copy=True) for i, buf in self.items()}

    def restore(self, snapshot: dict[int, np.ndarray]) -> None:
        """The values of a snapshot (restore_state)."""
        for i, value in snapshot.items():
            self.put(i, value)

    def __copy__(self) -> StringBuffers:
        new = StringBuffers(self.check)
        for i, value in self.snapshot().items():
            new.put(i, value)
        return new
