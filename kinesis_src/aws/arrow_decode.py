"""GetRecords bodies decoded straight into Arrow, for Spark tasks.

The reference decoder (:func:`.decode.decode_get_records`) runs
``json.loads``, which builds a dict and strings per record, then base64
decodes each record and Spark's path converts the lists to Arrow again.
Here a body takes the first of three decoders that accepts it:

1. a body as services write it (compact, every record's fields in one
   order, nothing escaped) is cut at its quotes without a JSON parser
   (:mod:`.plain_body`);
2. any other body goes through ``pyarrow.json`` against an explicit schema
   (strings stay in Arrow buffers);
3. the reference decoder takes what neither accepts.

Both fast paths decode base64 with numpy (:mod:`.vector_base64`) and the
page carries its Arrow columns (:class:`~kinesis_src.arrow.ArrowPage`); the
Python lists the cursor and the other readers use are made from the columns
in C (``to_pylist``). Per record of 200 B, with ``page_to_arrow``: ~2.3 µs
cut, ~3.2 with pyarrow.json, ~2.6 the reference (benchmarks/bench_decode.py;
in Spark the reference costs the most: docs/performance.md).

**Only the plain shape takes the pyarrow.json path.** The body is handed to the
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

import pyarrow as pa
import pyarrow.json as pj
from botocore.client import BaseClient

from ..arrow import ArrowPage, PageColumns, arrival_micros
from ..records import RecordPage
from .boundary import install_parser_factory
from .decode import FastGetRecordsParser, FastResponseParserFactory, decode_get_records
from .plain_body import cut_page
from .vector_base64 import decode_column

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
_JSON_SPACE = b" \t\n\r"


class NotPlain(Exception):
    """The body is not of the plain shape this path decodes; the reference decoder takes it."""


_cut = cut_page  # the layout cut, shared with the Consumer's decode (a name the benchmarks swap out)


def decode_get_records_arrow(body: bytes | str) -> RecordPage:
    """The page of a GetRecords body, with its Arrow columns when the body is of the plain shape."""
    if isinstance(body, str) or len(body) < SMALL_BODY:
        return decode_get_records(body)
    try:
        return _cut(body)  # a body with ChildShards does not pass: they take the reference decoder below
    except ValueError:  # another layout (NotThisLayout, NotALayout): parse it
        pass
    if _CHILD_SHARDS in body:
        return decode_get_records(body)
    try:
        return _decode(body)
    except (NotPlain, pa.ArrowException, ValueError, binascii.Error):  # ValueError: UnicodeDecodeError too
        return decode_get_records(body)  # the same page, or the named MalformedResponseError


def _decode(body: bytes) -> ArrowPage:
    if not body.lstrip(_JSON_SPACE).startswith(b"{"):
        raise NotPlain("not a JSON object")  # and pyarrow.json crashes the process on a body that opens with null
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
    """Every value's base64, decoded in a few numpy passes (:mod:`.vector_base64`).

    Anything but canonical base64 raises :class:`~.vector_base64.NotCanonical`
    (a ``ValueError``), and the body takes the reference decoder.
    """
    return decode_column(encoded).column


# -- the parser hook --------------------------------------------------------------------------------


class ArrowGetRecordsParser(FastGetRecordsParser):
    """The fast parser, except GetRecords bodies are decoded into Arrow-backed pages."""

    decode = staticmethod(decode_get_records_arrow)


class ArrowResponseParserFactory(FastResponseParserFactory):
    parser_class = ArrowGetRecordsParser


def use_arrow_parser(client: BaseClient) -> BaseClient:
    """Make this one client (owned by the caller: a Spark task's) decode GetRecords into Arrow-backed pages.

    The pages are whole :class:`RecordPage` values, so anything reading
    through the client still works; the factory goes on the client as
    :func:`.boundary.use_fast_parser`'s does. Where botocore does not let a
    client have its own parser (:mod:`.botocore_internals`), the client keeps
    the fast parser its session gave it: the same pages, without Arrow columns.
    """
    install_parser_factory(client, ArrowResponseParserFactory)
    return client
