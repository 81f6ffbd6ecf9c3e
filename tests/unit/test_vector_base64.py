"""The numpy base64 decoder must give exactly what ``binascii.a2b_base64`` gives, or refuse.

It decodes canonical base64 only (whole quads, the alphabet, at most two
``=`` at a value's end); anything else raises ``NotCanonical`` and the
page takes the reference decoder, which is lenient.
"""

from __future__ import annotations

import base64
import binascii

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_src.aws.vector_base64 import NotCanonical, decode_column, spans_as_array


def strict_or_none(values: list[str]) -> list[bytes] | None:
    try:
        return [binascii.a2b_base64(v.encode(), strict_mode=True) for v in values]
    except binascii.Error:
        return None


def ours_or_none(array: pa.Array) -> list[bytes] | None:
    try:
        decoded = decode_column(array)
    except NotCanonical:
        return None
    assert decoded.values() == decoded.column.to_pylist()
    return decoded.column.to_pylist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=60), max_size=50), st.integers(0, 3))
def test_canonical_columns_decode_as_a2b_base64(values: list[bytes], skip: int) -> None:
    encoded = pa.array([base64.b64encode(v).decode() for v in values], pa.string()).slice(min(skip, len(values)))
    assert ours_or_none(encoded) == values[min(skip, len(values)):]


_CHARS = st.sampled_from(list("AQgw+/=9aZ ") + ["\n", "-", "_", "é"])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(_CHARS, max_size=12), max_size=8))
def test_any_column_decodes_as_strict_a2b_base64_or_is_refused(values: list[str]) -> None:
    """Random text from base64's alphabet and a few others: the same bytes, or refused exactly when
    strict ``a2b_base64`` refuses (the one difference allowed: we refuse, it accepts, never the reverse)."""
    expected = strict_or_none(values)
    got = ours_or_none(pa.array(values, pa.string()))
    if got is not None:
        assert got == expected
    elif expected is not None:  # a strict decoder takes it: it must be something we refuse by design
        pytest.fail(f"refused canonical base64 {values!r}")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.data())
def test_spans_as_array_gives_each_span(buffer: bytes, data: st.DataObject) -> None:
    n = len(buffer)
    spans = data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, n)), max_size=20))
    starts = np.array([min(a, b) for a, b in spans], dtype=np.int64)
    sizes = np.array([abs(a - b) for a, b in spans], dtype=np.int64)
    array = spans_as_array(np.frombuffer(buffer, dtype=np.uint8), starts, sizes, pa.binary())
    assert array.to_pylist() == [buffer[s : s + k] for s, k in zip(starts.tolist(), sizes.tolist())]
