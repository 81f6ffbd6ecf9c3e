"""The hook that puts the one GetRecords decode (:mod:`.body_decode`) inside botocore's parsers.

It also guards every JSON answer: a body cut short is a retriable TruncatedResponseError, a success
body that is not a JSON object a MalformedResponseError."""

from __future__ import annotations

from typing import Any, Callable

from botocore import parsers

from ..errors import TruncatedResponseError
from ..records import RecordPage
from .body_decode import FROM_PARSER, decode_get_records, decode_json_object, decode_subscribe_event, from_parser
from .botocore_internals import parse_shape
from .page_dicts import NEXT_ITERATOR, page_from_botocore

PAGE_KEY = "Page"
"""Key under which the fast parser returns the decoded :class:`RecordPage`."""

_GET_RECORDS_OUTPUT = "GetRecordsOutput"

__all__ = ["FROM_PARSER", "decode_get_records", "decode_subscribe_event", "from_parser"]  # callers take them from here


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
    """Raise :class:`TruncatedResponseError` when the body is shorter than its Content-Length;
    not for a chunked body (urllib3 and aiohttp raise it), a stream, or an encoding but identity."""
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
    return decode_json_object(body, f"{_operation(response)} response body") if body else {}


def parse_json_output(parser: parsers.BaseJSONParser, response: dict[str, Any], shape: Any) -> dict[str, Any] | None:
    """A success body of any operation but GetRecords, checked, then walked by botocore's model;
    None where this botocore cannot walk a decoded document (the caller has botocore parse it)."""
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
    """A success answer parsed the fast way, with ``ResponseMetadata``: GetRecords by ``decode``,
    the rest by :func:`parse_json_output`. None for botocore's parse (errors, streams, no shape)."""
    if not succeeded(response) or takes_botocore_path(shape):
        return None
    if is_get_records(shape):
        return with_metadata(page_output(decode(response["body"])), response)
    return parse_json_output(parser, response, shape)


def check_before_parse(operation_model: Any, response_dict: dict[str, Any],
                       customized_response_dict: dict[str, Any], **_: Any) -> None:
    """botocore's public ``before-parse`` event, for a client whose parser is botocore's own: the
    fast parser's checks, and the fast GetRecords page merged in (``customized_response_dict``)."""
    check_complete(response_dict)
    shape = operation_model.output_shape
    if not succeeded(response_dict) or takes_botocore_path(shape):
        return
    if is_get_records(shape):
        customized_response_dict.update(page_output(decode_get_records(response_dict["body"])))
    else:
        json_document(response_dict)


class FastGetRecordsParser(parsers.JSONParser):
    """botocore's JSON parser, except success bodies take the fast path (:func:`fast_parse`):
    GetRecords gives the page under ``PAGE_KEY`` plus botocore's scalars. Answers are guarded."""

    def parse(self, response: dict[str, Any], shape: Any) -> Any:
        check_complete(response)
        parsed = fast_parse(self, response, shape, decode_get_records)
        return parsed if parsed is not None else super().parse(response, shape)


class FastResponseParserFactory(parsers.ResponseParserFactory):
    """Hands out :class:`FastGetRecordsParser` (``parser_class``) for JSON, with its own copy of the
    parser settings (``settings``), given to botocore's parsers for other protocols too."""

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
