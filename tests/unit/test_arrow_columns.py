"""The Arrow batches of decoded pages (kinesis_src/arrow.py) held to a column-by-column reference.

The reference builds each column with ``pa.array`` of the page's list, the
plain way; ``binary_column`` builds large values' ``data`` column from one
joined buffer instead, so random pages on both sides of its size threshold,
and random GetRecords bodies decoded by the one decode, must give the same
batch as the reference (the oracle's page for the bodies).
"""

from __future__ import annotations

import base64
import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kinesis_src.arrow import ARROW_SCHEMA, JOIN_FROM, arrival_micros, binary_column, page_to_arrow
from kinesis_src.aws.body_decode import decode_get_records
from kinesis_src.records import RecordPage
from tests.decode_oracle import DuplicateKey, Refused, oracle_page
from tests.unit.test_body_decode import documents, render

SHARD = "shardId-000000000000"


def reference_batch(page: RecordPage, stream: str, shard_id: str) -> pa.RecordBatch:
    n = len(page)
    subs = page.sub_sequence_numbers if page.sub_sequence_numbers is not None else [0] * n
    return pa.RecordBatch.from_arrays(
        [
            pa.array(page.partition_keys, pa.string()),
            pa.array(page.data, pa.binary()),
            pa.array([stream] * n, pa.string()),
            pa.array([shard_id] * n, pa.string()),
            pa.array(page.sequence_numbers, pa.string()),
            pa.array(subs, pa.int64()),
            arrival_micros(pa.array(page.arrival_epoch, pa.float64())),
        ],
        schema=ARROW_SCHEMA,
    )


_SIZES = st.sampled_from([0, 1, JOIN_FROM - 1, JOIN_FROM, JOIN_FROM + 1, 3 * JOIN_FROM]) | st.integers(0, 4 * JOIN_FROM)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(_SIZES, max_size=9), fill=st.binary(min_size=1, max_size=1))
@example(sizes=[JOIN_FROM, 0, JOIN_FROM], fill=b"\x00")  # an empty value between two joined ones
@example(sizes=[0, JOIN_FROM, 0], fill=b"a")  # the middle one alone reaches the threshold: the builder's way
def test_the_binary_column_equals_the_builders(sizes: list[int], fill: bytes) -> None:
    values = [bytes([fill[0] ^ (i % 256)]) * size for i, size in enumerate(sizes)]
    column = binary_column(values)
    assert column.type == pa.binary()
    assert column.to_pylist() == values
    assert column.equals(pa.array(values, pa.binary()))


def test_large_records_take_the_joined_buffer_and_keep_their_offsets() -> None:
    values = [bytes([i]) * (JOIN_FROM + i) for i in range(5)]
    column = binary_column(values)
    offsets = column.buffers()[1]
    assert column.buffers()[2].size == sum(map(len, values))
    assert [column[i].as_py() for i in range(5)] == values
    assert offsets is not None and column.offset == 0


def _oracle_or_none(body: bytes) -> RecordPage | None:
    try:
        return oracle_page(body)
    except (Refused, DuplicateKey):
        return None


@settings(max_examples=150, deadline=None)
@given(doc=documents(), style=st.integers(0, 3), big=st.booleans())
@example(doc={"Records": [{"SequenceNumber": "1", "Data": "QUJD" * 400, "ApproximateArrivalTimestamp": None},
                          {"SequenceNumber": "2", "Data": "", "PartitionKey": "k"}]}, style=0, big=True)
def test_a_decoded_body_gives_the_reference_batch_of_the_oracles_page(doc: dict, style: int, big: bool) -> None:
    if big:  # records past the join threshold: the joined-buffer way
        for record in doc.get("Records") or ():
            data = base64.b64decode(record["Data"]) or b"ABC"
            record["Data"] = base64.b64encode(data * (JOIN_FROM // len(data) + 1)).decode()
    body = render(doc, style)
    expected = _oracle_or_none(body)
    if expected is None:
        return  # refusals are test_body_decode's
    batch = page_to_arrow(decode_get_records(body), "stream-1", SHARD)
    assert batch.schema == ARROW_SCHEMA
    assert batch.equals(reference_batch(expected, "stream-1", SHARD))
