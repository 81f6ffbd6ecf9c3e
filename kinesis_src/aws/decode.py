"""The fast path for GetRecords bodies, and the hook that puts it inside botocore.

botocore's generic parser walks the service model for every field of every
record; on a 10,000-record body that costs about 7x what ``json.loads`` plus
base64 decoding cost (see benchmarks/bench_decode.py). GetRecords is the one
call whose body grows with throughput, so only it takes the fast path; every
other operation, and every error response, is parsed by botocore as usual.
A body of the layout services write is cut at its quotes without a JSON
parser when numpy is installed (:func:`decode_page`, :mod:`.plain_body`).

The hook is a botocore ``ResponseParserFactory`` registered as the session's
``response_parser_factory`` component (and put on the client by
:func:`.boundary.use_fast_parser` when a caller brings its own session), so
signing, endpoints, checksums and error handling all stay botocore's. Its
parsers override only botocore's public ``parse``; the one private member
they use, ``_parse_shape``, goes through :mod:`.botocore_internals`, which
falls back to botocore's own parse where a release lacks it.
tests/unit/test_decode.py checks that both paths produce the same records on
the same bodies.

The same parser guards every JSON answer of our clients against two silent
failures of botocore's own parsing:

- botocore reads bodies with ``enforce_content_length=False``, so a body cut
  short by a broken connection reaches the parser as if it were whole. Any
  body shorter than its Content-Length raises :class:`TruncatedResponseError`
  (retriable) before it is parsed. (aiobotocore's aiohttp already raises
  ``ClientPayloadError`` there; the check is the same on both.)
- botocore parses a success body that is not JSON as ``{"message": body}``
  and then keeps only the output shape's members: an empty answer
  (ListShards -> no shards). A success body that is not a JSON object raises
  :class:`MalformedResponseError` (not retriable) naming the operation.

Errors raised here know neither the call's resource nor the endpoint;
:func:`.boundary.translate` adds both (see :func:`from_parser`).
"""

from __future__ import annotations

import binascii
import json
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import Any, Callable

from botocore import parsers

from ..errors import KinesisSourceError, MalformedResponseError, TruncatedResponseError
from ..records import RecordPage, gc_paused
from .botocore_internals import parse_shape
from .decode_diagnosis import diagnose, json_problem, kind
from .page_dicts import CONTINUATION, NEXT_ITERATOR, child_shard, page_from_botocore
from .page_dicts import page_as_botocore  # noqa: F401  (re-exported: tests compare the two paths with it)

PAGE_KEY = "Page"
"""Key under which the fast parser returns the decoded :class:`RecordPage`."""

_GET_RECORDS_OUTPUT = "GetRecordsOutput"


_DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, binascii.Error)

FROM_PARSER = "from_parser"
"""Attribute set on errors raised inside botocore's parse step: the boundary names the call on them."""


def from_parser(error: KinesisSourceError) -> KinesisSourceError:
    """Mark ``error`` as raised by the parser, which cannot know the call's resource or endpoint."""
    setattr(error, FROM_PARSER, True)
    return error


# -- guards for every JSON answer ---------------------------------------------------------------------


def _header(headers: Any, name: str) -> str | None:
    """A header by lower-case name: botocore's dict is case-insensitive, aiobotocore's is lower-cased."""
    value = headers.get(name)
    if value is None:
        for key, other in headers.items():
            if key.lower() == name:
                return str(other)
    return None if value is None else str(value)


def _operation(response: dict[str, Any]) -> str:
    return str((response.get("context") or {}).get("operation_name") or "AWS")


def check_complete(response: dict[str, Any]) -> None:
    """Raise :class:`TruncatedResponseError` when the body is shorter than its Content-Length.

    Skipped when there is no Content-Length (chunked: urllib3 and aiohttp
    raise on a cut chunked body themselves), when the body is a stream (event
    streams), and when a Content-Encoding other than identity is set (a client
    that decoded the body would make the lengths incomparable).
    """
    body = response.get("body")
    if not isinstance(body, (bytes, bytearray)):
        return
    headers = response.get("headers") or {}
    announced = _header(headers, "content-length")
    encoding = _header(headers, "content-encoding")
    if announced is None or (encoding and encoding.strip().lower() != "identity"):
        return
    try:
        expected = int(announced)
    except ValueError:
        return
    if len(body) < expected:
        raise from_parser(
            TruncatedResponseError(
                f"{_operation(response)} response body ended after {len(body)} of the {expected} bytes its "
                "Content-Length announced: the connection closed mid-answer"
            )
        )


def json_document(response: dict[str, Any]) -> Any:
    """A success body as JSON; :class:`MalformedResponseError` unless it is a JSON object (or empty)."""
    body = response["body"]
    doc: Any = {}
    if body:
        try:
            doc = json.loads(body.decode(parsers.ResponseParser.DEFAULT_ENCODING) if isinstance(body, bytes) else body)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            problem = f"not JSON ({json_problem(exc)})"
        else:
            problem = None if isinstance(doc, dict) else f"top level is a JSON {kind(doc)}, not an object"
        if problem:  # raised outside the except block: the JSON error's text may quote the body
            raise from_parser(
                MalformedResponseError(
                    f"{_operation(response)} response body ({len(body)} bytes) does not have the documented "
                    f"shape: {problem} (contents are not shown)"
                )
            )
    return doc


def parse_json_output(parser: parsers.BaseJSONParser, response: dict[str, Any], shape: Any) -> dict[str, Any] | None:
    """A success body of any operation but GetRecords, parsed by botocore, but never as ``{"message": body}``.

    None, after the check, where this botocore cannot walk a decoded document
    (:func:`.botocore_internals.parse_shape`): the caller has botocore parse the body.
    """
    parsed = parse_shape(parser, shape, json_document(response))
    return None if parsed is None else with_metadata(parsed, response)


def with_metadata(parsed: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """``ResponseMetadata`` as botocore's ``parse`` adds it: request id, status, lower-cased headers."""
    headers = response["headers"]
    metadata = parsed.setdefault("ResponseMetadata", {})
    request_id = _header(headers, "x-amzn-requestid")
    if request_id is not None:
        metadata["RequestId"] = request_id
    metadata["HTTPStatusCode"] = response["status_code"]
    metadata["HTTPHeaders"] = {str(key).lower(): value for key, value in headers.items()}
    return parsed


def decode_subscribe_event(payload: bytes | str) -> RecordPage:
    """Decode a SubscribeToShardEvent payload the same fast way; ``next_iterator`` is the continuation.

    The event has GetRecords' Records and ChildShards, with the
    continuation sequence number in place of the next iterator (None on a
    closed shard's last event). botocore's event-stream parser would walk
    the model per field: 9-14x the cost per record (benchmarks/bench_efo.py).
    """
    return decode_get_records(payload, CONTINUATION, "SubscribeToShard event")


def decode_get_records(
    body: bytes | str, next_key: str = NEXT_ITERATOR, what: str = "GetRecords response body"
) -> RecordPage:
    """Decode a GetRecords JSON body into a columnar page.

    On a malformed body the error names the field and the problem, never the
    body: record data and partition keys are the user's data and end up in
    logs with the error. The error is raised outside the ``except`` block so
    the original exception (whose text may quote the body) is not chained.
    """
    try:
        with gc_paused():  # json.loads' dicts are garbage once the columns are out (see gc_paused)
            return _decode(body, next_key)
    except _DECODE_ERRORS as exc:
        problem = diagnose(body) or f"unexpected shape ({type(exc).__name__})"
    raise from_parser(
        MalformedResponseError(
            f"{what} ({len(body)} bytes) does not have the documented shape: {problem} "
            "(record contents are not shown)"
        )
    )


# -- the plain layout, cut without a JSON parser where numpy is installed ----------------------------

PLAIN_CUT_FROM = 16 * 1024
"""Smaller bodies (a few dozen records) take the reference: the cut's fixed cost per call is larger there."""


def decode_page(body: bytes | str) -> RecordPage:
    """A GetRecords body as a page: cut at its quotes when it has the plain layout, else :func:`decode_get_records`.

    The plain layout is what services write (:mod:`.plain_body`); the cut
    gives the reference's page (tests/unit/test_plain_body.py) with its
    Arrow columns, so ``batch.to_arrow()`` costs nothing more. In the
    Consumer it saves ~15 % of the decode and half its page faults: no str
    of the whole body, no dict per record (docs/performance.md). Any other
    body, and every body without numpy, takes the reference, whose page or
    ``MalformedResponseError`` is then the answer.
    """
    cut = plain_cut()
    if cut is None or not isinstance(body, bytes) or len(body) < PLAIN_CUT_FROM:
        return decode_get_records(body)
    try:
        with gc_paused():  # its lists and Arrow objects are no cycles either (see gc_paused)
            return cut(body)
    except ValueError:  # NotThisLayout, and the ValueErrors json, UTF-8 and base64 raise on other bodies
        return decode_get_records(body)


@lru_cache(maxsize=1)
def plain_cut() -> Callable[[bytes], RecordPage] | None:
    """The cutter, or None without numpy (the ``spark`` extra). Its imports take ~0.3 s: polling readers
    call this as they are made, so that no page waits for them."""
    try:
        from .plain_body import cut_page
    except ImportError:
        return None
    return cut_page


def _decode(body: bytes | str, next_key: str = NEXT_ITERATOR) -> RecordPage:
    """The fast path: no per-field checks, only what json and base64 enforce anyway.

    Columns are pulled with ``map`` over C callables (``dict.get``,
    ``itemgetter``, ``a2b_base64``) rather than comprehensions: no Python
    frame per record, which halves the cost of everything but ``json.loads``
    (tests/unit/test_decode.py holds the two paths to the same records).
    A record that is not a JSON object raises TypeError here, as ``.get`` on
    it raised AttributeError before: both are diagnosed the same way.
    """
    doc = json.loads(body)
    records = doc.get("Records") or ()
    return RecordPage(
        partition_keys=_optional(records, "PartitionKey"),
        data=list(map(binascii.a2b_base64, map(_DATA, records))),
        sequence_numbers=list(map(_SEQUENCE_NUMBER, records)),
        arrival_epoch=_optional(records, "ApproximateArrivalTimestamp"),
        encryption_types=_optional(records, "EncryptionType"),
        next_iterator=doc.get(next_key),
        millis_behind_latest=doc.get("MillisBehindLatest"),
        child_shards=tuple(child_shard(c) for c in doc.get("ChildShards") or ()),
    )


_DATA = itemgetter("Data")
_SEQUENCE_NUMBER = itemgetter("SequenceNumber")


def _optional(records: Any, key: str) -> list[Any]:
    """One column of a field a record may lack (None where it does)."""
    return list(map(dict.get, records, repeat(key)))


def is_get_records(shape: Any) -> bool:
    """The one response shape the fast path takes."""
    return shape is not None and shape.name == _GET_RECORDS_OUTPUT


def page_output(page: RecordPage) -> dict[str, Any]:
    """A page in the dict both botocore parsers return: the page under ``PAGE_KEY``, and GetRecords' scalars."""
    parsed: dict[str, Any] = {PAGE_KEY: page}
    if page.next_iterator is not None:
        parsed[NEXT_ITERATOR] = page.next_iterator
    if page.millis_behind_latest is not None:
        parsed["MillisBehindLatest"] = page.millis_behind_latest
    return parsed


def page_of(output: dict[str, Any]) -> RecordPage:
    """The page of a GetRecords output: ours, or built from botocore's dict where botocore parsed the body."""
    page = output.get(PAGE_KEY)
    return page if page is not None else page_from_botocore(output)


def takes_botocore_path(shape: Any) -> bool:
    """No output shape, or an event stream: botocore's own parse handles these."""
    return shape is None or bool(shape.event_stream_name)


def succeeded(response: dict[str, Any]) -> bool:
    """A success answer, as botocore's ``parse`` tells them from errors."""
    return int(response["status_code"]) < 301


def fast_parse(
    parser: parsers.BaseJSONParser, response: dict[str, Any], shape: Any, decode: Callable[[bytes], RecordPage]
) -> dict[str, Any] | None:
    """A success answer parsed the fast way, with botocore's ``ResponseMetadata``; None for botocore's parse.

    GetRecords bodies are decoded by ``decode``; other JSON bodies are checked
    (never ``{"message": body}``) and walked by botocore's model; errors, event
    streams and answers without a shape are botocore's. Shared by
    :class:`FastGetRecordsParser`, aiobotocore's twin in :mod:`.async_kinesis`
    and the Arrow decoder's parser (:mod:`.arrow_decode`).
    """
    if not succeeded(response) or takes_botocore_path(shape):
        return None
    if is_get_records(shape):
        return with_metadata(page_output(decode(response["body"])), response)
    return parse_json_output(parser, response, shape)


def check_before_parse(operation_model: Any, response_dict: dict[str, Any],
                       customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's public ``before-parse`` event, for a client whose parser is botocore's own.

    The same checks the fast parser makes (a cut body, a success body that is
    not a JSON object), and a GetRecords page decoded the fast way into the
    answer (``customized_response_dict`` is merged into it): botocore still
    parses the body, but the page and its errors are the same.
    """
    check_complete(response_dict)
    shape = operation_model.output_shape
    if not succeeded(response_dict) or takes_botocore_path(shape):
        return
    if is_get_records(shape):
        customized_response_dict.update(page_output(decode_page(response_dict["body"])))
    else:
        json_document(response_dict)


class FastGetRecordsParser(parsers.JSONParser):
    """botocore's JSON parser, except success bodies take the fast path (:func:`fast_parse`).

    The result of GetRecords carries the page under ``PAGE_KEY`` plus the
    scalar fields botocore would return, so code reading NextShardIterator
    etc. keeps working. Every answer is first checked against its
    Content-Length, and no success body is read as ``{"message": body}`` (see
    the module docstring).
    """

    @staticmethod
    def decode(body: bytes) -> RecordPage:
        """How a GetRecords body becomes a page (the Arrow parser decodes into Arrow columns)."""
        return decode_page(body)

    def parse(self, response: dict[str, Any], shape: Any) -> Any:
        check_complete(response)
        parsed = fast_parse(self, response, shape, self.decode)
        return parsed if parsed is not None else super().parse(response, shape)


class FastResponseParserFactory(parsers.ResponseParserFactory):
    """Hands out :class:`FastGetRecordsParser` (``parser_class``) for the JSON protocol Kinesis speaks.

    Keeps its own copy of the parser settings (``settings``), given to its
    parsers and to botocore's for other protocols alike.
    """

    parser_class: type[FastGetRecordsParser] = FastGetRecordsParser

    def __init__(self, **settings: Any) -> None:
        super().__init__()
        self.settings: dict[str, Any] = {}
        self.set_parser_defaults(**settings)

    def set_parser_defaults(self, **kwargs: Any) -> None:
        self.settings.update(kwargs)
        super().set_parser_defaults(**kwargs)

    def create_parser(self, protocol_name: str) -> parsers.ResponseParser:
        if protocol_name == "json":
            return self.parser_class(**self.settings)
        return super().create_parser(protocol_name)
