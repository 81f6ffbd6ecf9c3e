"""GetRecords bodies decoded straight into Arrow, for Spark tasks.

The reference decoder (:func:`.decode.decode_get_records`) runs
``json.loads``, which builds a dict and strings per record, then base64
decodes each record and Spark's path converts the lists to Arrow again.
Here the body goes through ``pyarrow.json`` against an explicit schema
(strings stay in Arrow buffers), every record's base64 is decoded in one
call over one buffer, and the page carries its Arrow columns
(:class:`~kinesis_src.arrow.ArrowPage`); the Python lists the cursor and
the other readers use are made from the columns in C (``to_pylist``).
Per record of 200 B: ~2.3 µs against ~4 µs (benchmarks/bench_decode.py).

**Only the plain shape takes this path.** The body is handed to the
reference decoder, whose result or ``MalformedResponseError`` is then the
answer, whenever it is anything but: one JSON object, UTF-8, each record an
object whose fields have the documented JSON types (pyarrow's explicit
schema refuses any other type instead of converting it), no field given
twice, ``SequenceNumber`` and ``Data`` present, ``Data`` canonical base64
(length a multiple of 4, at most two ``=`` at its end, nothing outside the
alphabet), and no ``ChildShards`` (a closed shard's last page). Bodies under
:data:`SMALL_BODY` bytes also take the reference path: pyarrow's fixed cost
per call is larger than what it saves there. So both paths give the same
page for every body (tests/unit/test_arrow_decode.py holds them to it on
random pages), and malformed bodies give the same error naming the call.

KPL aggregates need nothing here: the cursor de-aggregates a page with an
aggregate into a new page, which goes to Arrow through its lists.
"""

from __future__ import annotations

import binascii
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from botocore import parsers
from botocore.client import BaseClient

from ..arrow import ArrowPage, PageColumns, arrival_micros
from ..records import RecordPage
from .decode import (
    FastGetRecordsParser,
    FastResponseParserFactory,
    decode_get_records,
    is_get_records,
    parse_get_records,
)

SMALL_BODY = 16 * 1024
"""Bodies shorter than this (a few dozen records or fewer) take the reference decoder."""

_RECORD = pa.struct(
    [
        ("SequenceNumber", pa.string()),
        ("ApproximateArrivalTimestamp", pa.float64()),
        ("Data", pa.string()),
        ("PartitionKey", pa.string()),
        ("EncryptionType", pa.string()),
    ]
)
_BODY = pa.schema(
    [("Records", pa.list_(_RECORD)), ("NextShardIterator", pa.string()), ("MillisBehindLatest", pa.int64())]
)
_PARSE = pj.ParseOptions(explicit_schema=_BODY, unexpected_field_behavior="ignore")
_CHILD_SHARDS = b'"ChildShards"'


class NotPlain(Exception):
    """The body is not of the plain shape this path decodes; the reference decoder takes it."""


def decode_get_records_arrow(body: bytes | str) -> RecordPage:
    """The page of a GetRecords body, with its Arrow columns when the body is of the plain shape."""
    if isinstance(body, str) or len(body) < SMALL_BODY or _CHILD_SHARDS in body:
        return decode_get_records(body)
    try:
        return _decode(body)
    except (NotPlain, pa.ArrowException, ValueError, binascii.Error):  # ValueError: UnicodeDecodeError too
        return decode_get_records(body)  # the same page, or the named MalformedResponseError


def _decode(body: bytes) -> ArrowPage:
    if not body.isascii():
        body.decode("utf-8")  # json.loads refuses bad UTF-8 anywhere; pyarrow only in the fields it reads
    table = parse_body(body)
    if table.num_rows != 1:
        raise NotPlain("not exactly one JSON value")
    records = table.column("Records").chunk(0)
    if records.null_count:
        raise NotPlain("Records is null")  # json.loads gives None: the reference reads it as no records
    fields = records.flatten()
    if fields.null_count:
        raise NotPlain("a record is null")
    columns = _columns(fields)
    sequence_numbers = columns.sequence_numbers.to_pylist()
    return ArrowPage(
        partition_keys=columns.partition_keys.to_pylist(),
        data=columns.data.to_pylist(),
        sequence_numbers=sequence_numbers,
        arrival_epoch=fields.field("ApproximateArrivalTimestamp").to_pylist(),
        encryption_types=fields.field("EncryptionType").to_pylist(),
        next_iterator=table.column("NextShardIterator")[0].as_py(),
        millis_behind_latest=table.column("MillisBehindLatest")[0].as_py(),
        columns=columns,
        columns_of=sequence_numbers,
    )


def parse_body(body: bytes) -> pa.Table:
    """The body through pyarrow.json against the documented shape: one row per JSON value in it."""
    read = pj.ReadOptions(use_threads=False, block_size=len(body) + 1)
    return pj.read_json(pa.py_buffer(body), read_options=read, parse_options=_PARSE)


def _columns(fields: pa.StructArray) -> PageColumns:
    sequence_numbers = fields.field("SequenceNumber")
    encoded = fields.field("Data")
    if sequence_numbers.null_count or encoded.null_count:
        raise NotPlain("a record lacks SequenceNumber or Data")
    return PageColumns(
        partition_keys=fields.field("PartitionKey"),
        data=decode_base64(encoded),
        sequence_numbers=sequence_numbers,
        arrival=arrival_micros(fields.field("ApproximateArrivalTimestamp")),
    )


def decode_base64(encoded: pa.StringArray) -> pa.BinaryArray:
    """Every value's base64, decoded in one ``a2b_base64`` call over the array's one buffer.

    Each value is whole quads (length a multiple of 4), so the quads of the
    concatenation are the values' quads: with each ``=`` read as ``A`` (zero
    bits) every value decodes to 3/4 of its length, and the bytes its
    padding stood for (1 or 2 zeros) are then dropped. Anything but
    canonical base64 raises :class:`NotPlain` (or ``binascii.Error`` from
    the strict decode: a character outside the alphabet).
    """
    n = len(encoded)
    offsets = np.frombuffer(encoded.buffers()[1], dtype=np.int32)[encoded.offset : encoded.offset + n + 1]
    lengths = np.diff(offsets)
    if (lengths & 3).any():
        raise NotPlain("a Data value is not whole base64 quads")
    values = encoded.buffers()[2]
    text = b"" if values is None else values.to_pybytes()[offsets[0] : offsets[-1]]
    pads = pc.ends_with(encoded, "=").to_numpy(zero_copy_only=False).astype(np.int32)
    pads += pc.ends_with(encoded, "==").to_numpy(zero_copy_only=False)
    padding = int(pads.sum())
    if text.count(b"=") != padding:
        raise NotPlain("'=' inside a Data value")
    decoded = binascii.a2b_base64(text.replace(b"=", b"A") if padding else text, strict_mode=True)
    ends = np.cumsum(lengths // 4 * 3, dtype=np.int64)
    if padding:
        decoded = _drop_padding(decoded, ends, pads)
    sizes = lengths // 4 * 3 - pads
    value_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=value_offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(value_offsets), pa.py_buffer(decoded)])


def _drop_padding(decoded: bytes, ends: np.ndarray, pads: np.ndarray) -> bytes:
    """``decoded`` without the last ``pads[i]`` bytes of each value ``i`` (which ends at ``ends[i]``)."""
    keep = np.ones(len(decoded), dtype=bool)
    keep[ends[pads >= 1] - 1] = False
    keep[ends[pads == 2] - 2] = False
    return np.frombuffer(decoded, dtype=np.uint8)[keep].tobytes()


# -- the parser hook --------------------------------------------------------------------------------


class ArrowGetRecordsParser(FastGetRecordsParser):
    """The fast parser, except GetRecords bodies are decoded into Arrow-backed pages."""

    def _do_parse(self, response: dict[str, Any], shape: Any) -> dict[str, Any]:
        if is_get_records(shape):
            return parse_get_records(self, response, decode=decode_get_records_arrow)
        return super()._do_parse(response, shape)


class ArrowResponseParserFactory(FastResponseParserFactory):
    def create_parser(self, protocol_name: str) -> parsers.ResponseParser:
        if protocol_name == "json":
            return ArrowGetRecordsParser(**self._defaults)
        return super().create_parser(protocol_name)


def use_arrow_parser(client: BaseClient) -> BaseClient:
    """Make this one client (owned by the caller: a Spark task's) decode GetRecords into Arrow-backed pages.

    The pages are whole :class:`RecordPage` values, so anything reading
    through the client still works; see :func:`.boundary.use_fast_parser`
    for why the factory goes on the client's endpoint.
    """
    endpoint = client._endpoint
    current = endpoint._response_parser_factory
    if not isinstance(current, ArrowResponseParserFactory):
        arrow = ArrowResponseParserFactory()
        arrow.set_parser_defaults(**getattr(current, "_defaults", {}))
        endpoint._response_parser_factory = arrow
    return client
