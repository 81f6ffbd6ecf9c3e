"""Canonical base64 of a whole Arrow string column, decoded in a few numpy passes.

CPython's ``binascii.a2b_base64`` reads a character at a time (~3 ns a
character here, ~0.85 µs a record of 200 B called per record); decoding a
page's records in one call over their concatenation leaves each padded
value's 1-2 zero bytes inside the output, which then have to be cut out
(~0.5 µs a record more: a copy, a count, a boolean mask). Here, in ~0.9 µs
a record (about ``a2b_base64`` per record, but into one buffer):

- every character goes through one 256-entry lookup table (``np.take``), the
  quads' 6-bit values are packed into 3 bytes with shifts over whole columns
  (as uint32 words), so the page's concatenated base64 decodes in a few
  passes of numpy;
- the padding bytes are never cut out: the output column is a view array
  (``binary_view``: each value is a start and a length in one buffer, gaps
  allowed) over the decoded buffer, which Arrow casts to ``binary`` with one
  ``memcpy`` per value (:func:`spans_as_array`).

Only canonical base64 is decoded: every value a whole number of quads,
nothing outside the alphabet, at most two ``=`` and only at a value's end.
Anything else raises :class:`NotCanonical` and the caller falls back to the
reference decoder, which is lenient exactly as before (``a2b_base64``
without ``strict_mode`` skips stray characters). For canonical input the
bytes are exactly ``a2b_base64``'s (tests/unit/test_vector_base64.py checks
that on random columns). Like ``a2b_base64`` this ignores the unused low
bits of a padded quad (``QR==`` decodes as ``QQ==``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_PAD_VALUE = 64
_INVALID = 255
_LOOKUP = np.full(256, _INVALID, dtype=np.uint8)
_LOOKUP[np.frombuffer(_ALPHABET, dtype=np.uint8)] = np.arange(64, dtype=np.uint8)
_LOOKUP[ord("=")] = _PAD_VALUE
_INLINE = 12
"""A view array stores values of at most this many bytes inside the view itself (the Arrow format)."""


class NotCanonical(ValueError):
    """The column is not canonical base64; the reference decoder takes the page."""


@dataclass(frozen=True)
class Decoded:
    """A decoded column, and where its values lie in the decoded buffer (for the page's Python list)."""

    column: pa.BinaryArray
    buffer: np.ndarray  # uint8: every quad's 3 bytes, padding bytes included
    starts: np.ndarray  # int64, one per value
    sizes: np.ndarray  # int64, one per value

    def values(self) -> list[bytes]:
        """The values as Python bytes: slices of one ``bytes`` copy of the buffer (cheaper than ``to_pylist``)."""
        whole = self.buffer.tobytes()
        starts = self.starts.tolist()
        ends = (self.starts + self.sizes).tolist()
        return list(map(whole.__getitem__, map(slice, starts, ends)))


def decode_column(encoded: pa.Array) -> Decoded:
    """Every value of a ``string`` (or ``binary``) array, base64-decoded; :class:`NotCanonical` unless canonical.

    Null values are refused too (the caller has checked there are none).
    """
    if encoded.null_count:
        raise NotCanonical("a null value")
    n = len(encoded)
    offsets = np.frombuffer(encoded.buffers()[1], dtype=np.int32)[encoded.offset : encoded.offset + n + 1].astype(np.int64)
    lengths = np.diff(offsets)
    if (lengths & 3).any():
        raise NotCanonical("a value is not whole base64 quads")
    text = _bytes_of(encoded.buffers()[2], int(offsets[0]), int(offsets[-1]))
    sixes = np.take(_LOOKUP, text)
    if len(sixes) and int(sixes.max()) > _PAD_VALUE:
        raise NotCanonical("a character outside the base64 alphabet")
    pads = _padding(sixes, offsets - offsets[0], lengths)
    decoded = _pack(sixes)
    starts = (offsets[:-1] - offsets[0]) // 4 * 3
    sizes = lengths // 4 * 3 - pads
    return Decoded(spans_as_array(decoded, starts, sizes, pa.binary()), decoded, starts, sizes)


def _bytes_of(buffer: pa.Buffer | None, start: int, stop: int) -> np.ndarray:
    if buffer is None or start == stop:
        return np.zeros(0, dtype=np.uint8)
    return np.frombuffer(buffer, dtype=np.uint8)[start:stop]


def _padding(sixes: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each value's count of ``=`` (0-2), after checking that no ``=`` is anywhere but a value's last two."""
    ends = offsets[1:]
    nonempty = lengths > 0
    last = np.zeros(len(lengths), dtype=np.int64)
    before_last = np.zeros(len(lengths), dtype=np.int64)
    last[nonempty] = sixes[ends[nonempty] - 1] == _PAD_VALUE
    before_last[nonempty] = sixes[ends[nonempty] - 2] == _PAD_VALUE
    if (before_last > last).any():
        raise NotCanonical("'=' before a value's last character that is not '='")
    pads = last + before_last
    if int(np.count_nonzero(sixes == _PAD_VALUE)) != int(pads.sum()):
        raise NotCanonical("'=' inside a value")
    return pads


def _pack(sixes: np.ndarray) -> np.ndarray:
    """Each quad's four 6-bit values as three bytes, computed on the quads as little-endian uint32 words.

    Contiguous 32-bit lanes run faster than strided bytes; each output byte
    takes its bits from the word with a shift and a mask. A pad's lookup
    value (64) is masked off or reaches only the bytes that padding stands
    for, which the output's spans leave out.
    """
    words = sixes.view("<u4")
    out = np.empty((len(words), 3), dtype=np.uint8)
    np.bitwise_or((words << 2) & 0xFC, (words >> 12) & 0x03, out=out[:, 0], casting="unsafe")
    np.bitwise_or((words >> 4) & 0xF0, (words >> 18) & 0x0F, out=out[:, 1], casting="unsafe")
    np.bitwise_or((words >> 10) & 0xC0, (words >> 24) & 0x3F, out=out[:, 2], casting="unsafe")
    return out.reshape(-1)


def spans_as_array(buffer: np.ndarray, starts: np.ndarray, sizes: np.ndarray, type_: pa.DataType) -> pa.Array:
    """Values ``buffer[starts[i]:starts[i] + sizes[i]]`` as one contiguous ``binary``/``string`` array.

    Built as a view array over ``buffer`` (no copy), then cast, which copies
    each value once into a new contiguous buffer. Value sizes and starts
    must fit in int32 (a GetRecords body is at most 10 MB). A ``string``
    result is not checked for UTF-8 again: the caller's buffer was.
    """
    n = len(starts)
    views = np.zeros((n, 4), dtype=np.int32)
    views[:, 0] = sizes
    long = sizes > _INLINE
    if long.any():
        views[long, 1] = _words_at(buffer, starts[long], 1)[:, 0]  # the first 4 bytes; the rest stays in buffer
        views[long, 3] = starts[long]  # views[:, 2], the buffer index, is 0: the one data buffer
    short = ~long & (sizes > 0)
    if short.any():
        inline = _words_at(buffer, starts[short], 3).view(np.uint8)
        inline[np.arange(_INLINE)[None, :] >= sizes[short][:, None]] = 0
        views[short, 1:] = inline.view(np.int32)
    data = pa.py_buffer(buffer if len(buffer) else np.zeros(1, dtype=np.uint8))
    binary = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), data]).cast(pa.binary())
    if type_ == pa.binary():
        return binary
    return pa.Array.from_buffers(type_, n, binary.buffers())


def _words_at(buffer: np.ndarray, starts: np.ndarray, count: int) -> np.ndarray:
    """(len(starts), count) int32 words read from ``buffer`` at ``starts`` (unaligned); zeros past its end."""
    if len(starts) == 0:
        return np.zeros((0, count), dtype=np.int32)
    if int(starts.max()) + 4 * count <= len(buffer):
        words = np.ndarray((len(buffer) - 3,), dtype="<i4", buffer=buffer, strides=(1,))
        return np.stack([words[starts + 4 * k] for k in range(count)], axis=1)
    padded = np.zeros(len(buffer) + 4 * count, dtype=np.uint8)
    padded[: len(buffer)] = buffer
    return _words_at(padded, starts, count)
